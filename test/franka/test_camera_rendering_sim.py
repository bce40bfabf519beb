"""Simulated cameras render on the process's one GL thread.

Mesa's software rasteriser crashed franka_sim_node with SIGSEGV (in swrast_dri.so, under glReadPixels)
when its four cameras rendered each on a thread of its own: about one ROS launch in forty died so, and
the arms of that launch with it ("lost connection to the robot ... the robot closed the connection").
Before: four cameras captured in a tight loop from four threads crashed the process (SIGSEGV) in one
of eleven 60 s runs; since, none in four.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sim_process import free_sim_hosts

from robots.franka.cameras import MujocoCamera
from robots.franka.sim.simulator import FrankaSim, SimScene
from rpent.runtime.gl_thread import on_gl_thread

ROOT = Path(__file__).resolve().parents[2]
STRESS = """
import sys, threading, time
from robots.franka.cameras import MujocoCamera
from robots.franka.sim.simulator import FrankaSim, SimScene

seconds, hosts = float(sys.argv[1]), sys.argv[2:]
sim = FrankaSim(SimScene.dual(), hostnames=hosts).build()
cameras = [MujocoCamera(sim, n, 320, 240, arm_names=["left", "right"]) for n in ("front", "top", "left_wrist", "right_wrist")]
sim.serve()
frames = [0] * len(cameras)
end = time.monotonic() + seconds

def capture(i):
    while time.monotonic() < end:
        frame = cameras[i].capture_frame()
        assert frame.rgb.shape == (240, 320, 3) and frame.depth_m.shape == (240, 320)
        frames[i] += 1

threads = [threading.Thread(target=capture, args=(i,)) for i in range(len(cameras))]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("frames", *frames, flush=True)
for camera in cameras:
    camera.close()
sim.close()
"""


def _gl_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("rpent-gl")]


def test_on_gl_thread_runs_every_call_on_one_thread_nested_calls_at_once_and_returns_errors():
    seen: set[int] = set()

    def where() -> int:
        seen.add(threading.get_ident())
        return on_gl_thread(threading.get_ident)  # on the GL thread already: runs at once, no deadlock

    callers = [threading.Thread(target=lambda: on_gl_thread(where)) for _ in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(30)
    assert len(seen) == 1 and threading.get_ident() not in seen
    assert on_gl_thread(where) in seen
    with pytest.raises(ZeroDivisionError):
        on_gl_thread(lambda: 1 / 0)
    assert len(_gl_threads()) == 1


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_cameras_of_two_simulators_render_on_the_one_gl_thread_and_stop_cleanly():
    sims = [FrankaSim(SimScene()).build(), FrankaSim(SimScene.dual()).build()]
    cameras = [MujocoCamera(sims[0], "front"), MujocoCamera(sims[1], "left_wrist", arm_names=["left", "right"])]
    try:
        rendered = []
        callers = [threading.Thread(target=lambda c=c: rendered.append(c.capture_frame().rgb.shape)) for c in cameras]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(60)
        assert rendered == [(240, 320, 3)] * 2
        assert len(_gl_threads()) == 1  # no thread of its own per camera, whatever the simulator
    finally:
        for camera in cameras:
            camera.close()
        for sim in sims:
            sim.close()
    with pytest.raises(Exception, match="closed"):
        cameras[0].capture()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_four_cameras_captured_at_once_for_10_s_do_not_crash_the_process():
    # 10 s (was 30: a CI minute's budget): the one-GL-thread design itself is pinned by the test above on every
    # run; this one shows the process survives the load, which the old crash did in 1 of 11 runs of 60 s.
    hosts = free_sim_hosts(246, 250, count=2)
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", STRESS, "10", *hosts], cwd=ROOT,
                          capture_output=True, text=True, timeout=240, env={**os.environ, "MUJOCO_GL": "egl"})
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
    counts = [int(n) for n in done.stdout.split("frames", 1)[1].split()]
    assert len(counts) == 4 and min(counts) > 5, done.stdout


"""franky-sim keeps time with a moving arm's client: a late client stops the robot's clock, not its motion.

The franky client runs in a process of its own, which the test freezes (SIGSTOP) in the middle of a
motion, as a loaded machine's scheduler does for a few milliseconds at a time. The simulator runs here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from sim_process import free_sim_hosts

from robots.franka.sim.lockstep import PATIENCE_S
from robots.franka.sim.simulator import FrankaSim, SimScene

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

FROZEN_S = 0.3  # wall-clock time the client is frozen mid-motion (below the simulator's patience)

# One joint motion of about 2 s on the robot's clock, then the client's verdict on one line.
CLIENT = textwrap.dedent("""
    import sys, franky, numpy as np
    robot = franky.Robot(sys.argv[1], realtime_config=franky.RealtimeConfig.Ignore)
    robot.relative_dynamics_factor = franky.RelativeDynamicsFactor(0.1)
    target = np.array(robot.current_joint_state.position, dtype=float)
    target[0] += 0.6
    print("READY", flush=True)
    sys.stdin.readline()
    try:
        robot.move(franky.JointMotion(franky.JointState(target)))
        print("DONE ok", flush=True)
    except Exception as exc:
        print("DONE", type(exc).__name__, exc, flush=True)
""")


def _line(proc: subprocess.Popen, timeout_s: float = 60.0) -> str:
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    assert line, "the franky client said nothing"
    return line[0].strip()


@contextmanager
def _moving_client(lockstep: bool, first: int) -> Iterator[tuple[FrankaSim, subprocess.Popen]]:
    """The simulator here and a franky client process of its own, whose motion has begun."""
    host = free_sim_hosts(first, first + 5)[0]
    with FrankaSim(SimScene(), hostnames=[host], lockstep=lockstep) as sim:
        client = subprocess.Popen([sys.executable, "-c", CLIENT, host], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert _line(client) == "READY"
            start = sim.arm_joints(0)
            client.stdin.write("go\n")
            client.stdin.flush()
            moved_by = 0.0
            while moved_by < 0.02:  # judged on the robot's clock: a moving arm, whatever the machine's load
                sim.wait_until(sim.time_s + 0.005)
                moved_by = float(np.max(np.abs(sim.arm_joints(0) - start)))
                assert sim.time_s < 10, "the client's motion never began"
            yield sim, client
        finally:
            client.kill()
            client.wait(10)


def _frozen_for(client: subprocess.Popen, sim: FrankaSim) -> tuple[float, np.ndarray]:
    """Freeze the client for FROZEN_S of wall time: (simulated seconds that passed, joint change meanwhile)."""
    os.kill(client.pid, signal.SIGSTOP)
    try:
        before_s, before_q = sim.time_s, sim.arm_joints(0)
        threading.Event().wait(FROZEN_S)  # the stimulus: a client descheduled for this long
        return sim.time_s - before_s, sim.arm_joints(0) - before_q
    finally:
        os.kill(client.pid, signal.SIGCONT)


def test_the_robots_clock_waits_for_a_frozen_client_and_the_motion_then_ends_normally():
    assert FROZEN_S < PATIENCE_S
    with _moving_client(lockstep=True, first=100) as (sim, client):
        passed_s, moved = _frozen_for(client, sim)
        # The client had answered the state before it froze, so at most the step of that answer was made.
        assert passed_s <= 0.0015, f"{passed_s * 1000:.1f} ms of simulated time passed while the client was frozen"
        assert np.max(np.abs(moved)) < 1e-3
        assert _line(client) == "DONE ok"
    assert sim.clients_left_behind == 0


def test_with_the_wall_clock_switch_the_robot_runs_on_without_its_client():
    with _moving_client(lockstep=False, first=106) as (sim, client):
        passed_s, _ = _frozen_for(client, sim)
        assert passed_s > 0.05, f"only {passed_s * 1000:.1f} ms of simulated time passed in {FROZEN_S} s"


def test_a_client_frozen_longer_than_the_patience_is_left_behind_and_the_simulation_runs_on():
    with _moving_client(lockstep=True, first=112) as (sim, client):
        os.kill(client.pid, signal.SIGSTOP)
        try:
            start_s = sim.time_s
            # A simulation that waited on would never get there: wait_until raises after its wall timeout.
            sim.wait_until(start_s + 0.2, wall_timeout_s=PATIENCE_S + 10)
        finally:
            os.kill(client.pid, signal.SIGCONT)
        assert sim.clients_left_behind >= 1  # (again if an answer sent just before the freeze arrives after the wait began)

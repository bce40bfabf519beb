"""franky-sim is served only once it is ready: cameras made while franky clients were connected took the
GIL long enough (about 0.3 s each) for the stepping thread to stall and a connected client's state reads
to time out (libfranka: UDP receive: Timeout), which lost the arms of a ROS launch before it began."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
from sim_process import free_sim_hosts

from robots.franka.cameras import MujocoCamera
from robots.franka.hardware.franky_arm import FrankyArm
from robots.franka.sim.simulator import FrankaSim, SimScene

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_built_simulator_takes_no_client_until_it_is_served_and_its_cameras_render_before():
    host = free_sim_hosts(120, 130)[0]
    sim = FrankaSim(SimScene(), hostnames=[host]).build()
    arm = camera = None
    try:
        camera = MujocoCamera(sim, "front")
        assert camera.capture().shape == (240, 320, 3)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, 1337), timeout=5)
        sim.serve()
        assert sim.hosts == [host]
        arm = FrankyArm(host, name="arm")
        before = sim.time_s
        assert arm.clock_s() >= 0 and len(arm.state().joints) == 7
        assert sim.time_s > before  # it steps once served
    finally:
        for part in (arm, camera):
            if part is not None:
                part.close()
        sim.close()


def test_a_simulator_that_stops_stepping_says_why(caplog):
    """Its clients only see their states stop (libfranka: UDP receive: Timeout, every arm at once); the
    simulator's log names the failure (ci25: MuJoCo's 'simulation is unstable' and then nothing)."""
    host = free_sim_hosts(120, 130)[0]
    sim = FrankaSim(SimScene(), hostnames=[host]).serve()
    try:
        def broken() -> None:
            raise FloatingPointError("qacc is not finite")

        sim._sim.step = broken
        with pytest.raises(TimeoutError, match="qacc is not finite"):  # wait_until names the fault
            sim.wait_until(sim.time_s + 1.0, wall_timeout_s=30)
        failures = [r for r in caplog.records if r.name == "robots.franka.sim.simulator" and r.levelname == "ERROR"]
        assert len(failures) == 1 and "stopped stepping" in failures[0].getMessage(), caplog.text
        assert "qacc is not finite" in caplog.text  # with its traceback
    finally:
        sim.close()


def test_a_simulator_that_stalls_says_where_its_stepping_thread_waits(caplog):
    """Its clients give up after 1 s without a state, every arm at once (a busy-loop launch run lost all four
    clients with nothing in the simulator's log): a stall of STALL_S is logged with the stepping thread's stack
    and the clients' lockstep state, and its end too."""
    host = free_sim_hosts(120, 130)[0]
    sim = FrankaSim(SimScene(), hostnames=[host]).serve()
    released = threading.Event()
    step = sim._sim.step
    try:
        def held_up_step() -> None:  # a step that waits for the test: where the stack must point
            released.wait(30)
            step()

        sim._sim.step = held_up_step

        def logged(text: str) -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.name == "robots.franka.sim.stall_watch" and text in r.getMessage()]

        wait_until(lambda: logged("has not stepped"), 10, "the stall logged")
        stall = logged("has not stepped")[0].getMessage()
        assert "in held_up_step" in stall and "released.wait(30)" in stall, stall
        assert f"{host}: no client" in stall and "lockstep on" in stall, stall
        sim._sim.step = step
        released.set()
        wait_until(lambda: logged("stepped again"), 10, "the stall's end logged")
        assert len(logged("has not stepped")) == 1
    finally:
        released.set()
        sim.close()


def wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(0.01)  # polls a log the watch thread writes

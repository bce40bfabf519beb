"""Bare franky's own stop, as the yardstick of our stops: a simulated arm of the test's own at a joint speed,
robot.stop(), and how long (on the robot's clock) until franky reads every joint at rest."""

from __future__ import annotations

import time

import numpy as np


def rest_after_bare_stop(host: str, joint: int, speed_rad_s: float, timeout_s: float = 60.0) -> float:
    """Robot-clock seconds from robot.stop() to rest, of an arm at `host` (franky-sim started here)
    turning joint `joint` (0-based) at `speed_rad_s`; judged at rest as robots.franka.policy.stream does."""
    import franky

    from robots.franka.hardware.franky_arm import at_rest
    from robots.franka.sim.simulator import FrankaSim, SimScene

    with FrankaSim(SimScene(), hostnames=[host]) as _sim:
        robot = franky.Robot(host, realtime_config=franky.RealtimeConfig.Ignore)
        velocity = np.zeros(7)
        velocity[joint] = speed_rad_s
        robot.move(franky.JointVelocityMotion(velocity, duration=franky.Duration(5000)), asynchronous=True)
        deadline = time.monotonic() + timeout_s
        while abs(robot.state.dq[joint]) < 0.98 * speed_rad_s:
            assert time.monotonic() < deadline, "bare franky's arm did not reach its speed"
            time.sleep(0.001)
        stopped_at = robot.state.time.to_sec()
        robot.stop()
        while not at_rest(list(robot.state.dq)):
            assert time.monotonic() < deadline, "bare franky's arm did not come to rest"
            time.sleep(0.001)
        rest_s = robot.state.time.to_sec() - stopped_at
        try:
            robot.join_motion(timeout=5)
        except franky.ControlException:
            pass  # preempted by the stop, as expected
        return rest_s

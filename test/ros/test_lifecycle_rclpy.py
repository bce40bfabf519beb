"""The arm, gripper and camera nodes are managed nodes: configure connects, activate admits motions,
deactivate stops a running motion and refuses new ones (saying why), cleanup disconnects; each
publishes its health on /diagnostics.

Against franky-sim in a subprocess (own 127.0.0.x addresses), over DDS on loopback. Skipped where
rclpy, the generated rpent interfaces or franky-sim cannot be imported.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim])")
cv2 = pytest.importorskip("cv2", reason="opencv-python is not installed")

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sim_process import franka_sim_process  # noqa: E402

from robots.franka.hardware.franky_arm import FrankyArm  # noqa: E402
from robots.franka.ros.arm_node import FrankaArmNode  # noqa: E402
from robots.franka.ros.camera_node import CameraNode  # noqa: E402
from robots.franka.ros.gripper_node import FrankaGripperNode  # noqa: E402
from rpent.runtime.arm import TrajectoryFailure  # noqa: E402
from rpent_ros.runtime.proxy import RemoteRuntimeError, RuntimeProxy, remote_error  # noqa: E402

from .goals import wait_until  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(180)]
SUCCESS = TransitionCallbackReturn.SUCCESS


@pytest.fixture(scope="module")
def sim_host() -> Iterator[str]:
    with franka_sim_process(*(f"127.0.0.{b}" for b in range(231, 236))) as (_proc, host):
        yield host


class Diagnostics:
    """The last /diagnostics status per name."""

    def __init__(self, node: Node) -> None:
        self.changed = threading.Condition()
        self.last: dict[str, DiagnosticStatus] = {}
        node.create_subscription(DiagnosticArray, "/diagnostics", self._keep, 50)

    def _keep(self, msg: DiagnosticArray) -> None:
        with self.changed:
            for status in msg.status:
                self.last[status.name] = status
            self.changed.notify_all()

    def wait(self, name: str, condition: Callable[[dict[str, str]], bool], what: str, timeout_s: float = 20.0,
             message: str = "") -> DiagnosticStatus:
        """The first status of `name` whose values meet `condition` and whose message holds `message`."""
        def seen() -> bool:
            status = self.last.get(name)
            return (status is not None and message in status.message
                    and condition({kv.key: kv.value for kv in status.values}))

        with self.changed:
            assert self.changed.wait_for(seen, timeout_s), f"{name}: no status with {what}; last {self.last.get(name)}"
            return self.last[name]


def values(status: DiagnosticStatus) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def arm_node(ros, host: str, **extra) -> FrankaArmNode:
    overrides = [Parameter("name", value="arm"), Parameter("ip", value=host), Parameter("publish_rate_hz", value=20.0),
                 Parameter("diagnostics_period_s", value=0.2), *(Parameter(k, value=v) for k, v in extra.items())]
    return ros(FrankaArmNode(parameter_overrides=overrides))


def test_an_arm_node_moves_only_while_active_and_deactivating_it_stops_a_running_motion(ros, sim_host):
    node = arm_node(ros, sim_host)
    arm = RuntimeProxy(ros(Node("toolkit_stand_in")), "/franka_arm/arm/call", "arm")
    arm.wait_ready(30)
    with pytest.raises(RemoteRuntimeError, match=r"state refused: /franka_arm is unconfigured \(nothing connected"):
        arm.state()

    assert node.trigger_configure() == SUCCESS
    start = arm.state().pose.position
    with pytest.raises(RemoteRuntimeError, match=r"start_relative refused: /franka_arm is inactive and acts only while "
                                                 r"active \(`ros2 lifecycle set /franka_arm activate`\)"):
        arm.start_relative([0.0, 0.0, -0.05])
    assert arm.state().pose.position == pytest.approx(start, abs=1e-4)  # checks and reads are served, nothing moved

    assert node.trigger_activate() == SUCCESS
    arm.start_relative([0.0, 0.0, -0.09], speed_factor=0.05)
    wait_until(lambda: np.linalg.norm(np.subtract(arm.state().pose.position, start)) > 0.01, 30, "the arm moves", poll_s=0.05)
    deactivated = time.monotonic()
    assert node.trigger_deactivate() == SUCCESS
    outcome = arm.wait(timeout_s=10)
    assert outcome.stopped and not outcome.finished and time.monotonic() - deactivated < 2.0
    stopped_at = arm.settled_state().pose.position
    assert start[2] - 0.085 < stopped_at[2] < start[2] - 0.01  # stopped short of the target
    with pytest.raises(RemoteRuntimeError, match=r"start_joints refused: /franka_arm is inactive"):
        arm.start_joints([list(arm.state().joints)])

    # cleanup disconnects: the robot takes another client (franky-sim, like a real FR3, serves one at a time).
    assert node.trigger_cleanup() == SUCCESS
    with pytest.raises(RemoteRuntimeError, match=r"/franka_arm is unconfigured"):
        arm.state()
    FrankyArm(sim_host, connect_timeout_s=10).close()


def test_a_gripper_node_deactivated_during_a_move_stops_it(ros, sim_host):
    node = ros(FrankaGripperNode(parameter_overrides=[
        Parameter("name", value="arm"), Parameter("ip", value=sim_host), Parameter("diagnostics_period_s", value=0.2),
    ]))
    gripper = RuntimeProxy(ros(Node("toolkit_stand_in")), "/franka_gripper/arm/call", "arm_gripper")
    gripper.wait_ready(30)
    assert node.trigger_configure() == SUCCESS
    with pytest.raises(RemoteRuntimeError, match=r"move refused: /franka_gripper is inactive"):
        gripper.move(0.02)
    assert node.trigger_activate() == SUCCESS
    assert gripper.move(0.0, timeout_s=30).finished  # closed, so the next move has the whole stroke to go
    outcomes = []
    moving = threading.Thread(target=lambda: outcomes.append(gripper.move(0.08, timeout_s=30)))
    moving.start()
    wait_until(lambda: gripper.state().width_m > 0.01, 30, "the fingers open", poll_s=0.02)
    assert node.trigger_deactivate() == SUCCESS
    moving.join(10)
    assert outcomes and outcomes[0].stopped and not outcomes[0].finished
    width = gripper.state().width_m
    assert 0.01 < width < 0.075
    with pytest.raises(RemoteRuntimeError, match=r"grasp refused: /franka_gripper is inactive"):
        gripper.grasp(0.0, 20.0)


def test_a_camera_node_captures_only_while_active(ros, tmp_path):
    video = tmp_path / "front.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (64, 48))
    for _ in range(100):
        writer.write(np.full((48, 64, 3), 120, np.uint8))
    writer.release()
    node = ros(CameraNode(parameter_overrides=[
        Parameter("name", value="front"), Parameter("device", value=str(video)),
        Parameter("width", value=64), Parameter("height", value=48),
    ]))
    camera = RuntimeProxy(ros(Node("toolkit_stand_in")), "/camera/front/call", "front")
    camera.wait_ready(30)
    assert node.trigger_configure() == SUCCESS
    with pytest.raises(RemoteRuntimeError, match=r"capture refused: /camera is inactive"):
        camera.capture()
    assert node.trigger_activate() == SUCCESS
    assert camera.capture().shape == (48, 64, 3)
    assert node.trigger_deactivate() == SUCCESS
    with pytest.raises(RemoteRuntimeError, match=r"capture_frame refused: /camera is inactive"):
        camera.capture_frame()


def test_runtime_nodes_publish_their_health_on_diagnostics(ros, sim_host):
    node = arm_node(ros, sim_host)
    seen = Diagnostics(ros(Node("monitor")))
    name = "franka_arm: arm arm"
    status = seen.wait(name, lambda v: v["lifecycle state"] == "unconfigured", "the unconfigured state")
    assert status.level == DiagnosticStatus.WARN and status.hardware_id == sim_host

    assert node.trigger_configure() == SUCCESS
    arm = RuntimeProxy(ros(Node("toolkit_stand_in")), "/franka_arm/arm/call", "arm")
    arm.wait_ready(30)
    with pytest.raises(RemoteRuntimeError):
        arm.start_relative([0.0, 0.0, -0.02])
    status = seen.wait(name, lambda v: v["last command"].startswith("start_relative: refused"), "the refused motion")
    assert status.level == DiagnosticStatus.WARN and status.message == "inactive: motions refused"

    assert node.trigger_activate() == SUCCESS
    arm.start_relative([0.0, 0.0, -0.02])
    arm.wait(timeout_s=30)
    status = seen.wait(name, lambda v: v["last command"] == "start_relative: ok" and float(v["telemetry rate (Hz)"]) > 5,
                       "the motion and telemetry running")
    v = values(status)
    assert status.level == DiagnosticStatus.OK and status.message == "active"
    assert v["connected"] == "true" and v["robot mode"] in ("Idle", "Move") and v["errors"] == "[]"
    assert float(v["control rate (Hz)"]) == 1000.0 and 0.0 <= float(v["control command success rate"]) <= 1.0
    assert len(json.loads(v["external wrench (N, Nm)"])) == 6 and len(json.loads(v["external joint torques (Nm)"])) == 7
    assert float(v["last command age (s)"]) < 30

    gripper = ros(FrankaGripperNode(parameter_overrides=[
        Parameter("name", value="arm"), Parameter("ip", value=sim_host), Parameter("diagnostics_period_s", value=0.2),
    ]))
    assert gripper.trigger_configure() == SUCCESS
    status = seen.wait("franka_gripper: gripper arm", lambda v: "temperature (C)" in v, "the hand's temperature")
    assert float(values(status)["temperature (C)"]) > 0 and values(status)["connected"] == "true"


def test_an_arm_node_that_cannot_connect_says_why_on_diagnostics(ros):
    # Nothing listens on this address.
    node = arm_node(ros, "127.0.0.239", connect_wait_s=0.0, connect_timeout_s=1.0)
    seen = Diagnostics(ros(Node("monitor")))
    assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    # The status from before the configure also reads unconfigured and not connected: only the one that
    # names the failure is the failed configure's.
    status = seen.wait("franka_arm: arm arm", lambda v: v["connected"] == "false" and v["lifecycle state"] == "unconfigured",
                       "the failed configure", message="could not connect to the Franka arm at 127.0.0.239")
    assert status.level == DiagnosticStatus.WARN


def test_a_trajectory_failure_a_runtime_node_reports_stays_one_for_the_toolkits_motion():
    # robots.franka.motion plans again after a TrajectoryFailure; over ROS the arm node's error
    # text is all that crosses, so the proxy must turn it back into one (and nothing else into one).
    failed = remote_error("arm.wait: TrajectoryFailure: arm at 127.0.0.2: motion failed: Motion planner failed with error code -111")
    assert isinstance(failed, TrajectoryFailure) and isinstance(failed, RemoteRuntimeError)
    assert "error code -111" in str(failed)
    for other in ("arm.wait: RuntimeFault: arm at 127.0.0.2: lost connection to the robot",
                  "arm.wait: RuntimeError: TrajectoryFailure: spoofed in a message", "arm gone"):
        error = remote_error(other)
        assert isinstance(error, RemoteRuntimeError) and not isinstance(error, TrajectoryFailure), other

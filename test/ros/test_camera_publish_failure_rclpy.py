"""A camera whose pictures cannot be published is visible: its node's /diagnostics says ERROR with the
error and a count of failed publishes, and says OK again once pictures go out.

The conversion fails the way OpenCV 5 breaks it: cv_bridge's table of OpenCV type numbers no longer
holds CV_8UC3 (16), so every colour image raises `KeyError: 16` inside cv_bridge.

Skipped where rclpy, cv_bridge or the generated rpent interfaces cannot be imported.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("cv_bridge", reason="cv_bridge not importable: build it into the sourced ROS 2 workspace")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
cv2 = pytest.importorskip("cv2", reason="opencv-python is not installed")

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from robots.franka.ros.camera_node import CameraNode  # noqa: E402
from rpent_ros.runtime import image_msgs  # noqa: E402

from .managed import activated  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]


class Watch:
    """The latest /diagnostics status of one name and whether images arrive, with bounded waits."""

    def __init__(self, node: Node, status_name: str, image_topic: str) -> None:
        self.changed = threading.Condition()
        self.status: DiagnosticStatus | None = None
        self.images = 0
        self.name = status_name
        node.create_subscription(DiagnosticArray, "/diagnostics", self._diagnostics, 10)
        node.create_subscription(Image, image_topic, self._image, 2)

    def _diagnostics(self, msg: DiagnosticArray) -> None:
        with self.changed:
            for status in msg.status:
                if status.name == self.name:
                    self.status = status
            self.changed.notify_all()

    def _image(self, _msg: Image) -> None:
        with self.changed:
            self.images += 1
            self.changed.notify_all()

    def until(self, condition, what: str, timeout_s: float = 30.0) -> None:
        with self.changed:
            assert self.changed.wait_for(condition, timeout_s), f"timed out waiting for {what}; last status {self.status}"

    def values(self) -> dict[str, str]:
        assert self.status is not None
        return {kv.key: kv.value for kv in self.status.values}


@pytest.fixture
def video(tmp_path: Path) -> Path:
    path = tmp_path / "front.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (64, 48))
    for _ in range(900):
        writer.write(np.full((48, 64, 3), 90, np.uint8))
    writer.release()
    return path


def test_a_camera_that_cannot_publish_is_an_error_on_diagnostics_with_a_count_until_it_publishes_again(
    ros, video, monkeypatch
):
    # OpenCV 5 numbers its types differently: cv_bridge's table built from them lacks OpenCV 4's 16.
    table = {number: name for number, name in image_msgs._bridge.cvtype_to_name.items() if number != cv2.CV_8UC3}
    monkeypatch.setattr(image_msgs._bridge, "cvtype_to_name", table)
    activated(ros(CameraNode(parameter_overrides=[
        Parameter("name", value="front"), Parameter("device", value=str(video)), Parameter("width", value=64),
        Parameter("height", value=48), Parameter("publish_rate_hz", value=10.0),
        Parameter("diagnostics_period_s", value=0.2),
    ])))
    watch = Watch(ros(Node("monitor")), "camera: camera front", "/camera/front/image_raw")
    watch.until(lambda: watch.status is not None and watch.status.level == DiagnosticStatus.ERROR
                and int(watch.values().get("failed publishes", "0")) >= 3, "an ERROR with failed publishes")
    assert watch.status.message.startswith("camera front cannot publish its pictures: KeyError: 16"), watch.status.message
    assert watch.values()["last publish error"] == "KeyError: 16"
    assert watch.images == 0

    monkeypatch.undo()  # pictures convert again: the node says so and the topic has them
    watch.until(lambda: watch.images > 0 and watch.status.level == DiagnosticStatus.OK, "pictures and an OK status")
    failed = int(watch.values()["failed publishes"])
    assert failed >= 3 and watch.values()["last publish error"] == "KeyError: 16"  # the count stays: it happened

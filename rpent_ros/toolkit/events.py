"""Toolkit events -> ROS topics: ToolEvent on ~/events, the latest observation images for rviz."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rclpy.node import Node
from sensor_msgs.msg import Image

from rpent.msg import ToolEvent
from rpent_ros.runtime.image_msgs import png_to_image_msg
from rpent_ros.toolkit.conversions import event_fields

log = logging.getLogger(__name__)


class RosEventSink:
    """A DashboardEventSink that publishes on ROS topics; per-action clips only when a dashboard wants them."""

    enabled = True

    def __init__(self, node: Node, max_images: int = 4, clips: bool = False) -> None:
        self.node = node
        self.clips = clips
        self.events = node.create_publisher(ToolEvent, "~/events", 50)
        self.images = [node.create_publisher(Image, f"~/observation/image_{i}", 2) for i in range(max_images)]

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        if not self.node.context.ok():  # shutting down after Ctrl-C: the record is still saved, nobody listens
            return
        msg = ToolEvent(**event_fields(kind, payload))
        msg.stamp = self.node.get_clock().now().to_msg()
        self.events.publish(msg)
        if kind == "tool_finished":
            for publisher, path in zip(self.images, payload.get("images") or [], strict=False):
                try:
                    image = png_to_image_msg(Path(path).read_bytes(), stamp=msg.stamp, frame_id="camera")
                except (OSError, ValueError) as exc:
                    log.warning("observation image %s not published: %s", path, exc)
                    continue
                publisher.publish(image)

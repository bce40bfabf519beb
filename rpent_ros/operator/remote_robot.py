"""A robot that lives in a toolkit_node, seen by the dashboard as if it were local.

`rpent.dashboard.session.DashboardSession` drives a robot through its spec (`init_runtime`,
`stop_runtime`, prompts, task form) and its module (`get_toolkit`). Here the runtime and the toolkit
belong to a toolkit node, so:

- the one shared component is the toolkit node itself, "ready" once its actions answer;
- each task opens a fresh record on the node (`~/new_task` into the task's own directory, so
  steps.jsonl, episode.mp4 and the recipe sit next to the dashboard's run.log and result.json when
  both nodes share a file system) and closes it through `~/close_task`;
- tool events reach the page from the node's `~/events` topic, and camera views from image topics.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

from rpent.dashboard.frames import FRAME_SOURCES_KEY
from rpent.dashboard.session import dashboard_of
from rpent.msg import ToolEvent
from rpent.robot import RobotSpec, RunConfig
from rpent.robot.spec import RuntimeComponent
from rpent.tools import ToolResult
from rpent.tools.api import StageCallback
from rpent_ros.runtime.image_msgs import image_msg_to_rgb
from rpent_ros.toolkit.client import RemoteTool, RosToolkit, recipe_of
from rpent_ros.toolkit.remote_call import RemoteCall

CLOSED_KIND = "task_closed"


class ToolkitEvents:
    """Subscribes to `<namespace>/events`: forwards tool events to a sink and notes closed records."""

    def __init__(self, node: Node, namespace: str) -> None:
        self.forward: Callable[[str, dict[str, Any]], None] | None = None  # the dashboard's sink, once it exists
        self._closed: set[str] = set()
        self._changed = threading.Condition()
        # Deep and reliable: the "task_closed" marker proves every earlier event arrived only if none was dropped.
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.subscription = node.create_subscription(ToolEvent, f"{namespace}/events", self._received, qos)

    def _received(self, msg: ToolEvent) -> None:
        try:
            payload = json.loads(msg.payload_json) if msg.payload_json else {}
        except json.JSONDecodeError:
            payload = {"raw": msg.payload_json}
        if msg.kind == CLOSED_KIND:
            with self._changed:
                self._closed.add(str(payload.get("output_dir", "")))
                self._changed.notify_all()
            return
        if self.forward is not None:
            self.forward(msg.kind, payload)

    def wait_closed(self, output_dir: str, timeout_s: float) -> bool:
        """True once the node's announcement that `output_dir` was closed has arrived."""
        with self._changed:
            return self._changed.wait_for(lambda: output_dir in self._closed, timeout_s)


class ImageTopics:
    """The latest picture of each frame channel, from sensor_msgs/Image topics."""

    def __init__(self, node: Node, topics: Mapping[str, str]) -> None:
        self.topics = dict(topics)
        self._latest: dict[str, Image] = {}
        self._lock = threading.Lock()
        self.subscriptions = [
            node.create_subscription(Image, topic, lambda msg, name=name: self._store(name, msg), 2)
            for name, topic in self.topics.items()
        ]

    def _store(self, name: str, msg: Image) -> None:
        with self._lock:
            self._latest[name] = msg

    def source(self, name: str) -> Callable[[], np.ndarray]:
        def latest() -> np.ndarray:
            with self._lock:
                msg = self._latest.get(name)
            if msg is None:
                raise RuntimeError(f"no image on {self.topics[name]} yet")
            return image_msg_to_rgb(msg)

        return latest

    def sources(self) -> dict[str, Callable[[], np.ndarray]]:
        return {name: self.source(name) for name in self.topics}


class RemoteTask:
    """One task's toolkit: the node's tools (through RosToolkit) and the end of its record. The ToolkitAPI of
    the dashboard's tasks on a toolkit node: closing it closes the task's record on the node (~/close_task),
    and its calls are refused from then on (the node's next record is not this task's).

    The toolkit node keeps the robot's memory, so nothing is published to memory from here.
    """

    memory = None

    def __init__(self, remote: RosToolkit, events: ToolkitEvents, output_dir: str, settle_s: float = 10.0) -> None:
        self._remote = remote
        self._events = events
        self.output_dir = Path(output_dir)
        self._settle_s = settle_s
        self._closed: dict[str, str] | None = None
        self._stop_record: dict[str, Any] | None = None

    def list_tools(self, include_read_image: bool = True) -> list[RemoteTool]:
        return self._remote.list_tools(include_read_image)

    def get_tool(self, name: str) -> RemoteTool | None:
        return self._remote.get_tool(name)

    def submit(self, name: str, arguments: Any = None, *, on_stage: StageCallback | None = None) -> RemoteCall:
        if self._closed is not None:
            return self._remote.refused_call(name, f"{self._remote.namespace}: this task's record is closed; '{name}' "
                                                   "was not sent", on_stage)
        return self._remote.submit(name, arguments, on_stage=on_stage)

    def execute_tool(self, name: str, arguments: Any = None) -> ToolResult:
        return self.submit(name, arguments).result()

    def cancel(self, call_id: int, reason: str = "cancelled") -> bool:
        return self._remote.cancel(call_id, reason)

    def cancel_active_and_wait(self, timeout: float | None = None, reason: str = "cancelled by operator") -> bool:
        return self._remote.cancel_active_and_wait(timeout, reason)

    def resume_calls(self) -> None:
        self._remote.resume_calls()

    @property
    def finish_result(self) -> dict[str, Any] | None:
        return self._remote.finish_result

    def solved(self) -> bool | None:
        return self._remote.solved()

    def stop_record(self) -> dict[str, Any]:
        """The node's latched stop for this task's result.json (as the task closed, once it has)."""
        return self._stop_record if self._stop_record is not None else self._remote.stop_record()

    def write_recipe(self, recipe_tag: str) -> Path:
        return recipe_of(self._close(recipe_tag), self._remote.namespace)

    def close(self, timeout: float | None = None) -> Path | None:
        closed = self._close("")
        return Path(closed["episode"]) if closed["episode"] else None

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def _close(self, recipe_tag: str) -> dict[str, str]:
        if self._closed is None:
            # Read before the close: afterwards the node's status is its next record's.
            self._stop_record = self._remote.stop_record()
            self._closed = self._remote.close_task(recipe_tag)
            # The page shows the last tool rows only if their events came before the task ends.
            self._events.wait_closed(self._closed["output_dir"], self._settle_s)
        return self._closed


class RemoteRobot:
    """The `robot` module DashboardSession calls: get_toolkit opens a fresh record on the node."""

    def __init__(self, remote: RosToolkit, events: ToolkitEvents) -> None:
        self.remote = remote
        self.events = events

    def get_toolkit(self, *, runtime_kwargs: dict[str, Any], dashboard_events: Any, config: RunConfig) -> RemoteTask:
        output_dir = self.remote.new_task(str(Path(config.output_dir).resolve()))
        return RemoteTask(self.remote, self.events, output_dir)


class RemoteSpec:
    """The robot's own spec (prompts, task form, validation, frame channels) with the runtime replaced
    by the toolkit node."""

    def __init__(self, spec: RobotSpec, remote: RosToolkit, frames: ImageTopics, ready_timeout_s: float = 120.0) -> None:
        self._spec = spec
        self._remote = remote
        self._frames = frames
        self._ready_timeout_s = ready_timeout_s
        component = RuntimeComponent("toolkit", f"Toolkit node {remote.namespace}", shared=True)
        self.dashboard = replace(dashboard_of(spec), components=(component,))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spec, name)

    def init_runtime(self, config: RunConfig, *, selection: Any = None, events: Any = None) -> dict[str, Any]:
        self._remote.wait_ready(self._ready_timeout_s)
        return {FRAME_SOURCES_KEY: self._frames.sources()}

    def stop_runtime(self, runtime_kwargs: dict[str, Any]) -> None:
        """The toolkit node and the runtime nodes own the robot; the dashboard stops nothing."""


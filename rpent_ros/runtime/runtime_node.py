"""RuntimeNode: a plain (not managed) node that owns runtime objects and serves each over RuntimeCall.

A robot's own nodes build on it (a simulator node serving its cameras: robots.<name>.ros), as they
build on rpent_ros.runtime.managed_node.ManagedRuntimeNode for devices that connect and disconnect. `every`
is the telemetry timer both use: a failing publish is logged, never raised into the executor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node

from rpent_ros.runtime.server import RuntimeServer


class RuntimeNode(Node):
    """A node owning runtime objects (the simulator, a policy client): serves each at `~/<name>/call`
    from the start and stops them all on shutdown."""

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        super().__init__(node_name, automatically_declare_parameters_from_overrides=True, **kwargs)
        self.group = ReentrantCallbackGroup()
        self.servers: list[RuntimeServer] = []
        self.owned: list[Any] = []

    def serve(self, name: str, target: Any, methods: frozenset[str], relays: bool = False) -> None:
        self.owned.append(target)
        self.servers.append(RuntimeServer(self, name, target, methods, self.group, relays=relays))

    def every(self, rate_hz: float, callback: Callable[[], None]) -> None:
        every(self, rate_hz, callback)

    def shutdown(self) -> None:
        for timer in list(self.timers):  # telemetry ends before the devices it reads close
            self.destroy_timer(timer)
        for target in self.owned:
            for method in ("stop", "close"):
                function = getattr(target, method, None)
                if callable(function):
                    try:
                        function()
                    except Exception as exc:
                        self.get_logger().error(f"{method} on shutdown failed: {type(exc).__name__}: {exc}")
        for server in self.servers:
            server.close()


def every(node: Node, rate_hz: float, callback: Callable[[], None]) -> None:
    """Call `callback` at `rate_hz` on its own callback group; a failure is logged (throttled), never raised."""

    def guarded() -> None:
        try:
            callback()
        except Exception as exc:  # telemetry must not take the node down
            node.get_logger().warning(f"telemetry: {type(exc).__name__}: {exc}", throttle_duration_sec=5.0)

    node.create_timer(1.0 / rate_hz, guarded, callback_group=MutuallyExclusiveCallbackGroup())

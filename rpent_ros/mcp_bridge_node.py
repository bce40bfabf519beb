"""mcp_bridge_node: a remote toolkit_node's tools as an MCP server, so Claude Code, Codex or Claude
Desktop drive the robot over ROS.

    ros2 run rpent mcp_bridge_node --ros-args -p toolkit_namespace:=/toolkit              # stdio
    ros2 run rpent mcp_bridge_node --ros-args -p transport:=http -p port:=8765           # http://127.0.0.1:8765/mcp

MCP cancellation cancels exactly that call's ROS goal; results carry text, PNG paths and images.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from rpent.mcp.bridge import build_mcp_server
from rpent.mcp.transports import check_host, serve_http, serve_stdio
from rpent_ros.logging_bridge import forward_python_logging
from rpent_ros.signals import shield_shutdown
from rpent_ros.spinning import BackgroundSpin
from rpent_ros.toolkit_client import RosToolkit

log = logging.getLogger("rpent.mcp_bridge_node")


class McpBridgeNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("mcp_bridge", **kwargs)
        self.toolkit_namespace = self.declare_parameter("toolkit_namespace", "/toolkit").value
        self.transport = self.declare_parameter("transport", "stdio").value
        self.host = self.declare_parameter("host", "127.0.0.1").value
        self.port = int(self.declare_parameter("port", 8765).value)
        self.allow_remote = bool(self.declare_parameter("allow_remote", False).value)
        self.read_image = bool(self.declare_parameter("read_image", False).value)
        if self.transport not in ("stdio", "http"):
            raise ValueError(f"parameter transport: must be stdio or http, got {self.transport!r}")
        if self.transport == "http":
            check_host(self.host, allow_remote=self.allow_remote)
        self.toolkit = RosToolkit(self, self.toolkit_namespace)

    def server(self) -> Any:
        self.toolkit.wait_ready()
        return build_mcp_server(self.toolkit, name="robot", include_read_image=self.read_image)  # type: ignore[arg-type]


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    forward_python_logging()
    node = McpBridgeNode()
    executor = MultiThreadedExecutor(num_threads=8)
    executor.add_node(node)
    spinning = BackgroundSpin(executor)
    try:
        server = node.server()
        if node.transport == "stdio":
            asyncio.run(serve_stdio(server))
        else:
            asyncio.run(serve_http(server, host=node.host, port=node.port,
                                   on_listening=lambda url: print(f"MCP server listening on {url}", file=sys.stderr, flush=True)))
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        shield_shutdown()
        node.toolkit.cancel_active_and_wait(timeout=10, reason="mcp_bridge_node shutting down")
        spinning.stop()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

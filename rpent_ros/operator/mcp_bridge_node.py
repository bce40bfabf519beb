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

from rclpy.node import Node

from rpent.mcp.bridge import build_mcp_server
from rpent.mcp.transports import check_host, serve_http, serve_stdio
from rpent.robot import ConfigError
from rpent_ros import node_main
from rpent_ros.params import NodeParameters, Param
from rpent_ros.toolkit.client import RosToolkit

log = logging.getLogger("rpent.mcp_bridge_node")
BRIDGE_PARAMETERS = (
    Param("toolkit_namespace", "/toolkit", "namespace of the toolkit_node whose tools are served"),
    Param("transport", "stdio", "stdio: MCP on this process's stdin/stdout; http: streamable HTTP at http://host:port/mcp",
          choices=("stdio", "http")),
    Param("host", "127.0.0.1", "address the HTTP transport listens on (other than loopback only with allow_remote)"),
    Param("port", 8765, "port of the HTTP transport (0: a free one)", low=0, high=65535),
    Param("allow_remote", False, "let the HTTP transport listen on an address other than loopback"),
    Param("read_image", False, "also serve read_image (a saved picture by its path)"),
)


class McpBridgeNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("mcp_bridge", automatically_declare_parameters_from_overrides=True, **kwargs)
        parameters = NodeParameters(self)
        p = parameters.declare(*BRIDGE_PARAMETERS)
        parameters.finish()
        self.toolkit_namespace, self.transport = p["toolkit_namespace"], p["transport"]
        self.host, self.port, self.allow_remote, self.read_image = p["host"], p["port"], p["allow_remote"], p["read_image"]
        if self.transport == "http":
            try:
                check_host(self.host, allow_remote=self.allow_remote)
            except ValueError as exc:
                raise ConfigError(f"parameter host: {exc}") from None
        self.toolkit = RosToolkit(self, self.toolkit_namespace)

    def server(self) -> Any:
        self.toolkit.wait_ready()
        return build_mcp_server(self.toolkit, name="robot", include_read_image=self.read_image)

    def shutdown(self) -> None:
        self.toolkit.cancel_active_and_wait(timeout=10, reason="mcp_bridge_node shutting down")


def main(args: list[str] | None = None) -> None:
    node_main.init(args)
    node = node_main.build("mcp_bridge_node", McpBridgeNode)
    spinning = node_main.Spinning(node, threads=8)
    try:
        server = node.server()
        if node.transport == "stdio":
            asyncio.run(serve_stdio(server))
        else:
            asyncio.run(serve_http(server, host=node.host, port=node.port,
                                   on_listening=lambda url: print(f"MCP server listening on {url}", file=sys.stderr, flush=True)))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM; the goals still running are cancelled below
        pass
    finally:
        spinning.close(node.shutdown)


if __name__ == "__main__":
    main()

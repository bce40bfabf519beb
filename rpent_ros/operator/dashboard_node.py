"""dashboard_node: the operator dashboard for a robot served by a toolkit_node.

    ros2 run rpent dashboard_node --ros-args -p robot:=dual_franka -p planner:=api -p cameras_node:=franka_sim
    ros2 launch rpent dual_franka.launch.py use_sim:=true dashboard:=true    # then open http://127.0.0.1:8080/

Tasks started from the page run their planner in this node against the toolkit node at
`toolkit_namespace` (the robot's flags are parameters, as for planner_node: planner, model,
max_turns, dashboard_port, dashboard_host, ...). The timeline comes from the toolkit node's `~/events`,
the camera views from image topics (`frame_topics: ["front=/cam/image_raw"]`, otherwise
`/<cameras_node>/<channel>/image_raw`, otherwise the toolkit node's observation images). Abort
cancels the running goal, so the arm stops. With `approve_motions`, the toolkit node asks this node
(`~/approve_motion`) and the operator approves or denies each motion on the page.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from rpent.dashboard.cli import serve_session
from rpent.dashboard.session import DashboardSession, dashboard_of
from rpent.runner.run import EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, default_output_dir
from rpent_ros import node_main
from rpent_ros.logging_bridge import forward_python_logging
from rpent_ros.operator.remote_robot import ImageTopics, RemoteRobot, RemoteSpec, ToolkitEvents
from rpent_ros.params import Param, declare_robot_parameters, frame_topics, package_file
from rpent_ros.signals import shield_shutdown
from rpent_ros.spinning import BackgroundSpin
from rpent_ros.toolkit.approval import serve_approvals
from rpent_ros.toolkit.client import RosToolkit

log = logging.getLogger("rpent.dashboard_node")
DEFAULT_ROS_PORT = 8080  # 8765 is the MCP bridge's default in the launch files


DASHBOARD_PARAMETERS = (
    Param("toolkit_namespace", "/toolkit", "namespace of the toolkit_node the page's tasks run against"),
    Param("cameras_node", "", "node whose <channel>/image_raw topics feed the camera views (empty: the toolkit "
          "node's observation images)"),
    Param("frame_topics", None, "camera views from these image topics: 'channel=/topic' entries", kind="str[]"),
)


class DashboardNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("dashboard", automatically_declare_parameters_from_overrides=True, **kwargs)
        found = declare_robot_parameters(self, DASHBOARD_PARAMETERS, flag_defaults={"dashboard_port": DEFAULT_ROS_PORT})
        spec, args, own = found.spec, found.namespace, found.values
        namespace = own["toolkit_namespace"] or "/toolkit"
        if getattr(args, "recipe", None):
            args.recipe = package_file(args.recipe)
        if args.output_dir is None:
            args.output_dir = str(default_output_dir(f"{spec.name}-dashboard"))
        self.args = args
        channels = [c.name for c in dashboard_of(spec).frame_channels]
        topics = frame_topics(channels, list(own["frame_topics"] or []), namespace, own["cameras_node"])
        self.remote = RosToolkit(self, namespace)
        self.frames = ImageTopics(self, topics)
        self.tool_events = ToolkitEvents(self, namespace)
        self.session = DashboardSession(args=args, spec=RemoteSpec(spec, self.remote, self.frames),  # type: ignore[arg-type]
                                        robot=RemoteRobot(self.remote, self.tool_events),  # type: ignore[arg-type]
                                        output_root=Path(args.output_dir))
        self.tool_events.forward = self.session.sink.publish
        # The toolkit node's approve_motions requests land on this page.
        self.approvals = serve_approvals(self, self.session.interaction)
        self.get_logger().info(f"dashboard for robot '{spec.name}' against {namespace}; camera topics {topics}")

    def shutdown(self) -> None:
        """Abort a running task and write its record (safe to call twice)."""
        self.session.stop()


def main(args: list[str] | None = None) -> None:
    # uvicorn owns Ctrl-C/SIGTERM here: the session must abort the task and save its record first.
    node_main.check_security(args)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    forward_python_logging()
    node = node_main.build("dashboard_node", DashboardNode)  # a bad parameter: its name and rule, exit 2
    executor = MultiThreadedExecutor(num_threads=8)
    executor.add_node(node)
    spinning = BackgroundSpin(executor)
    try:
        code = serve_session(node.args, node.session, on_stopping=shield_shutdown)
        # `rpent run --dashboard` exits 130/143 on Ctrl-C/SIGTERM; a launched node that stopped when
        # asked has finished cleanly (launch counts any other code as a node that died).
        raise SystemExit(EXIT_OK if code in (EXIT_INTERRUPTED, EXIT_TERMINATED) else code)
    finally:
        spinning.stop()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

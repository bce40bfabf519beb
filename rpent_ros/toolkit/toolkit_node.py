"""toolkit_node: hosts a robot's Toolkit and serves every tool as a ROS 2 action.

    ros2 run rpent toolkit_node --ros-args -p robot:=franka -p sim:=true
    ros2 action send_goal /toolkit/tools/get_state rpent/action/CallTool "{}" --feedback
    ros2 action send_goal /toolkit/call_tool rpent/action/CallTool "{tool: move_by, arguments_json: '{\"dz_m\": 0.05}'}"

Goals go into the toolkit's own scheduler when accepted (read-only goals overlap, exclusive goals
queue in order); a ROS cancel cancels exactly that goal's call (rpent_ros/toolkit/goals.py); how each
goal ends is one rule (rpent_ros/toolkit/goal_status.py).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rclpy
from geometry_msgs.msg import PoseStamped
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_srvs.srv import Trigger

from rpent.record.run_record import RunRecord
from rpent.runner.logs import FanOutSink, ProgressSink
from rpent.runner.run import default_output_dir
from rpent.srv import CloseTask, GetStatus, ListTools, NewTask
from rpent.tools.stop_latch import robot_latch
from rpent_ros import node_main
from rpent_ros.logging_bridge import forward_python_logging
from rpent_ros.params import (
    Param,
    declare_robot_parameters,
    flag_errors_as_parameters,
    parse_robot_config,
)
from rpent_ros.runtime.robot_ros import start_inprocess_telemetry
from rpent_ros.security.exposure import exposure_warning
from rpent_ros.signals import shield_shutdown
from rpent_ros.spinning import BackgroundSpin
from rpent_ros.toolkit.approval import DEFAULT_SERVICE, RosApprovalChannel
from rpent_ros.toolkit.conversions import tools_json
from rpent_ros.toolkit.events import RosEventSink
from rpent_ros.toolkit.goal_qos import MAX_GOALS
from rpent_ros.toolkit.goals import ToolkitGoals

log = logging.getLogger("rpent.toolkit_node")


def toolkit_parameters() -> tuple[Param, ...]:
    """toolkit_node's own parameters (its robot's flags come on top, from declare_robot_parameters)."""
    return (
        Param("runtime_mode", "inprocess", "inprocess: the robot's runtime lives in this node; ros: arms, grippers and "
              "cameras live in runtime nodes (franka_arm_node, ...) reached over RuntimeCall", choices=("inprocess", "ros")),
        Param("cameras_node", "", "with runtime_mode ros: serve every camera from this node (<node>/<camera>/call) "
              "instead of the camera nodes the robot declares (empty: as declared)"),
        Param("publish_rate_hz", 30.0, "with runtime_mode inprocess: joint states and TF of its arms per second",
              low=0.1, high=1000.0),
        Param("camera_rate_hz", 0.0, "with runtime_mode inprocess: camera topics (image, depth, camera_info, points) "
              "per second; each picture costs a render or a grab (0: none)", low=0.0, high=60.0),
        Param("action_clips", False, "record an MP4 clip per action for a dashboard's timeline"),
        Param("approval_service", DEFAULT_SERVICE, "service asked before each motion when approve_motions is set "
              "(a dashboard node's operator)"),
        Param("max_goals", MAX_GOALS, "unfinished goals held at once (the action QoS depth); more are refused, not lost",
              low=1, high=100000),
        Param("state_dir", "", "where the robot's latched stop outlives this node, so a restart comes up stopped "
              "(empty: $RPENT_STATE_DIR, else $XDG_STATE_HOME/rpent, else ~/.local/state/rpent)"),
    )


class ToolkitNode(Node):
    """The ROS node that owns one robot's Toolkit and its run record, and serves the toolkit's API.

    It builds the robot exactly as `rpent run` does, from ROS parameters that mirror the robot's flags
    (`robot:=`, the robot's own, and its own: `runtime_mode`, `max_goals`, `approval_service`, ...):
    with `runtime_mode:=inprocess` the arms and cameras run inside this node (and it publishes their
    rviz telemetry), with `runtime_mode:=ros` they run in the robot's runtime nodes and this node
    drives them through proxies. Tools are served as CallTool actions (`~/tools/<name>` and
    `~/call_tool`, through the toolkit's own scheduler: rpent_ros/toolkit/goals.py), and the services
    are the rest of the Toolkit API: `~/list_tools`, `~/status` (finish result, solved()),
    `~/new_task` and `~/close_task` (the current record closed and a fresh toolkit opened, so each
    planner or dashboard task gets a record of its own). The record is claimed before anything
    starts; `shutdown()` stops motion, saves the record and stops the runtime it started.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("toolkit", automatically_declare_parameters_from_overrides=True, **kwargs)
        # Its own parameters and its robot's flags, declared with descriptions and rules (rpent_ros/params.py).
        found = declare_robot_parameters(self, toolkit_parameters())
        own = found.values
        max_goals = own["max_goals"]
        self.robot, self.spec, namespace = found.robot, found.spec, found.namespace
        if namespace.output_dir is None:
            namespace.output_dir = str(default_output_dir(self.spec.name))
        self.config = parse_robot_config(self.spec, namespace)
        # Before anything starts: a used output_dir is refused unless `resume:=true` continues its record.
        #: The record the current toolkit writes (a fresh one per task: ~/new_task, ~/close_task).
        self.record = RunRecord.open(self.config.output_dir, resume=bool(getattr(namespace, "resume", False)),
                                     option="parameter output_dir", resume_option="resume:=true")
        self._base_output_dir = self.config.output_dir
        # action_clips: per-action MP4 clips for a dashboard that links them from its timeline.
        clips = own["action_clips"]
        self.ros_events = RosEventSink(self, clips=clips)
        self.events = FanOutSink(ProgressSink(log), self.ros_events)
        # Robots that need an operator's yes before a motion (approve_motions) ask the dashboard node.
        approval_service = own["approval_service"]
        self.events.approval_channel = RosApprovalChannel(self, approval_service)
        self.runtime_mode = own["runtime_mode"]
        self.runtime_kwargs: dict[str, Any] = {}
        if self.runtime_mode == "inprocess":
            self.runtime_kwargs = self.spec.init_runtime(self.config, selection=None, events=self.events)
            # Arms inside this node get the arm nodes' rviz telemetry (robot_description, TF, joint states).
            rate = own["publish_rate_hz"]
            # Cameras too, on request (camera_rate_hz > 0): colour, depth, CameraInfo, points, TF.
            camera_rate = own["camera_rate_hz"]
            start_inprocess_telemetry(self, self.spec, self.runtime_kwargs.get("runtime"), rate, camera_rate)
        elif self.runtime_mode == "ros":
            from rpent_ros.runtime.remote import build_remote_runtime

            # The robot declares which runtime nodes serve its parts; proxies reach them.
            with flag_errors_as_parameters():
                self.runtime_kwargs = build_remote_runtime(self, self.spec, namespace, self.config, events=self.events,
                                                           cameras_node=own["cameras_node"])
        else:
            raise ValueError(f"parameter runtime_mode: must be 'inprocess' or 'ros', got {self.runtime_mode!r}")
        # The latched stop outlives every task's toolkit and this node (rpent.tools.stop_latch).
        self.stop_latch = robot_latch(self.spec.name, Path(own["state_dir"]) if own["state_dir"] else None)
        self.toolkit = self._new_toolkit()

        # Serialises record swaps (~/new_task, ~/close_task), which wait for running calls. Goals and
        # cancels never take it: they only read self.toolkit, which a swap replaces in one step.
        self._task_lock = threading.Lock()
        self.goals = ToolkitGoals(self, lambda: self.toolkit, [t.name for t in self.toolkit.list_tools()],
                                  max_goals=max_goals, poses=_arm_poses(self, self.runtime_kwargs.get("runtime")))
        group = ReentrantCallbackGroup()
        self.create_service(ListTools, "~/list_tools", self._list_tools, callback_group=group)
        self.create_service(GetStatus, "~/status", self._status, callback_group=group)
        self.create_service(NewTask, "~/new_task", self._new_task, callback_group=group)
        self.create_service(CloseTask, "~/close_task", self._close_task, callback_group=group)
        # The latch: anyone the policy lets reach the toolkit may stop it; only the operator's enclaves
        # may release it (rpent_ros/security/policy.py).
        self.create_service(Trigger, "~/stop", self._stop, callback_group=group)
        self.create_service(Trigger, "~/release_stop", self._release_stop, callback_group=group)
        self._tasks = 1
        exposed = exposure_warning()
        if exposed is not None:
            self.get_logger().warning(f"toolkit: {exposed}")
        self.get_logger().info(
            f"robot '{self.spec.name}': {len(self.goals.servers) - 1} tools served; record in {self.config.output_dir}"
        )

    def _new_toolkit(self) -> Any:
        toolkit = self.robot.get_toolkit(runtime_kwargs=self.runtime_kwargs, dashboard_events=self.events,
                                         config=self.config)
        toolkit.use_stop_latch(self.stop_latch)
        return toolkit

    def _stop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        event = self.toolkit.stop(f"ROS {self.get_fully_qualified_name()}/stop", "a call of the stop service")
        response.success, response.message = True, event["line"]
        return response

    def _release_stop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        event = self.toolkit.release_stop(f"ROS {self.get_fully_qualified_name()}/release_stop")
        response.success = event is not None
        response.message = "released" if event is not None else "the stop was not latched"
        return response

    def _list_tools(self, request: ListTools.Request, response: ListTools.Response) -> ListTools.Response:
        response.tools_json = tools_json(self.toolkit.list_tools())
        return response

    def _new_task(self, request: NewTask.Request, response: NewTask.Response) -> NewTask.Response:
        """Close the current record and start a fresh toolkit, so the next planner starts clean."""
        with self._task_lock:
            output_dir = request.output_dir or str(self._next_default_dir())
            try:
                self._reopen(Path(output_dir))
            except Exception as exc:
                response.ok, response.error = False, f"{type(exc).__name__}: {exc}"
                return response
        response.ok, response.output_dir = True, output_dir
        self.get_logger().info(f"new task: record in {output_dir}")
        return response

    def _next_default_dir(self) -> Path:
        # A resumed output_dir may hold task folders of an earlier node: never reuse one.
        while True:
            self._tasks += 1
            path = self._base_output_dir / f"task-{self._tasks:03d}"
            if not path.exists():
                return path

    def _reopen(self, output_dir: Path) -> Path | None:
        """Close the current record (running calls finish, the video is saved) and open one in `output_dir`.

        Returns the closed record's episode video. Call with `_task_lock` held. `output_dir` must be new or
        empty, or claimed by the node that asked for it (the dashboard node's task folder, where it
        writes run.log and result.json); anything else is refused (RecordError) before the current
        record is closed, so the node keeps serving it.
        """
        record = RunRecord.adopt(output_dir)
        episode = self.toolkit.close(timeout=60)
        self.record = record
        self.config.output_dir = output_dir
        self.toolkit = self._new_toolkit()
        return episode

    def _close_task(self, request: CloseTask.Request, response: CloseTask.Response) -> CloseTask.Response:
        """Write the recipe (if tagged), close the record, open a fresh one; then announce it on ~/events."""
        with self._task_lock:
            closed_dir = self.config.output_dir
            recipe = None
            try:
                recipe = self.toolkit.write_recipe(request.recipe_tag) if request.recipe_tag else None
            except Exception as exc:
                response.error = f"recipe not written: {type(exc).__name__}: {exc}"
            try:
                episode = self._reopen(self._next_default_dir())
            except Exception as exc:
                response.ok, response.error = False, f"{type(exc).__name__}: {exc}"
                return response
        response.ok = not response.error
        response.output_dir, response.episode, response.recipe = str(closed_dir), str(episode or ""), str(recipe or "")
        # Same publisher as the tool events, reliable and in order: a client that sees this event has
        # seen every event of the closed record.
        self.ros_events.publish("task_closed", {"output_dir": response.output_dir, "episode": response.episode,
                                                "recipe": response.recipe})
        return response

    def _status(self, request: GetStatus.Request, response: GetStatus.Response) -> GetStatus.Response:
        try:
            solved = self.toolkit.solved()
        except Exception as exc:  # a broken sim must not break the status service
            solved = f"error: {exc}"
        response.status_json = json.dumps(
            {"finish_result": self.toolkit.finish_result, "solved": solved, "closed": self.toolkit.closed,
             **self.toolkit.stop_record()}
        )
        return response

    def shutdown(self) -> None:
        """Stop motion, save the record, stop the runtime (called once on exit)."""
        try:
            self.toolkit.cancel_active_and_wait(timeout=10, reason="node shutting down")
            self.toolkit.close(timeout=30)
        finally:
            if self.runtime_mode == "inprocess":  # runtime nodes own their runtimes otherwise
                self.spec.stop_runtime(self.runtime_kwargs)


def _arm_poses(node: Node, runtime: Any) -> Callable[[], list[PoseStamped]] | None:
    """Each arm's TCP pose in its base frame `<arm>_link0` (the frame rviz shows it in), for goal feedback."""
    arms = getattr(runtime, "arms", None)
    if not isinstance(arms, dict) or not arms:
        return None

    def read() -> list[PoseStamped]:
        stamp = node.get_clock().now().to_msg()
        poses = []
        for name, arm in arms.items():
            pose = arm.state().pose
            msg = PoseStamped()
            msg.header.stamp, msg.header.frame_id = stamp, f"{name}_link0"
            msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = pose.position
            o = msg.pose.orientation
            o.x, o.y, o.z, o.w = pose.quaternion
            poses.append(msg)
        return poses

    return read


def main(args: list[str] | None = None) -> None:
    # The executor keeps spinning while the node shuts down: with the arms in runtime nodes, stopping a
    # motion and hearing that it stopped are ROS messages. So rclpy's own handler (which would shut
    # the context down at once) is off, and Ctrl-C/SIGTERM only wake the main thread.
    node_main.check_security(args)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    forward_python_logging()
    node: ToolkitNode | None = None
    spinning: BackgroundSpin | None = None
    stopping = threading.Event()
    try:
        # A bad parameter: its name and rule, exit 2; Ctrl-C while it connects (even inside an import): exit 0.
        node = node_main.build("toolkit_node", ToolkitNode)
        # Goals hold no thread (see goals.py); the threads serve cancels (whose stop hooks may call
        # runtime nodes and wait for their answer), services, feedback and telemetry.
        executor = MultiThreadedExecutor(num_threads=8)
        executor.add_node(node)
        spinning = BackgroundSpin(executor)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stopping.set())
        while not stopping.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        logging.getLogger("rpent.toolkit_node").exception("toolkit_node failed: %s", exc)
        raise
    finally:
        shield_shutdown()  # a second Ctrl-C must not cut the record short
        if node is not None:
            node.shutdown()
        if spinning is not None:
            spinning.stop()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

"""planner_node: runs a built-in planner against a remote toolkit_node and writes the run's record.

    ros2 run rpent planner_node --ros-args -p robot:=franka -p planner:=api -p task:="Pick up the cube."
    ros2 run rpent planner_node --ros-args -p robot:=toy -p planner:=replay -p recipe:=/path/recipe.jsonl

The robot parameter selects the prompts (the same templates `rpent run` uses); the tools, their
validation and the robot itself live in the toolkit node at `toolkit_namespace`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from rpent.cli.artifacts import write_json
from rpent.cli.run import default_output_dir, make_planner
from rpent.planner.base import AbortRequest
from rpent.robot import load_robot
from rpent_ros.logging_bridge import forward_python_logging
from rpent_ros.params import namespace_from_params
from rpent_ros.signals import shield_shutdown
from rpent_ros.spinning import BackgroundSpin
from rpent_ros.toolkit_client import RosToolkit

log = logging.getLogger("rpent.planner_node")
NODE_ONLY = ("toolkit_namespace", "planner", "new_task")


class PlannerNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("planner", automatically_declare_parameters_from_overrides=True, **kwargs)
        params = {n: p.value for n, p in self.get_parameters_by_prefix("").items()}
        robot_name = self.get_parameter_or("robot", Parameter("robot", value="toy")).value
        self.toolkit_namespace = params.get("toolkit_namespace", "/toolkit")
        self.robot = load_robot(robot_name)
        self.spec = self.robot.get_robot_spec()
        namespace = namespace_from_params(self.spec, {k: v for k, v in params.items() if k not in NODE_ONLY})
        namespace.planner = params.get("planner", namespace.planner)
        if namespace.output_dir is None:
            namespace.output_dir = str(default_output_dir(f"{self.spec.name}-planner"))
        self.args = namespace
        self.config = self.spec.parse_config(namespace)
        self.planner = make_planner(namespace, self.spec)
        self.toolkit = RosToolkit(self, self.toolkit_namespace)
        # A long-lived toolkit node may hold the previous task's finish: start a clean record first.
        self.new_task = bool(params.get("new_task", True))
        self.inputs: Any = None
        self.summary: dict[str, Any] | None = None

    def run_task(self) -> dict[str, Any]:
        import queue

        started = time.time()
        self.toolkit.wait_ready()
        if self.new_task:
            log.info("toolkit record for this task: %s", self.toolkit.new_task())
        system_prompt, user_message = self.spec.prompts.render(self.config.prompt_vars)
        self.inputs = queue.Queue()
        log.info("planning with %s against %s", self.args.planner, self.toolkit_namespace)
        result = self.planner.solve(
            system_prompt=system_prompt, user_message=user_message, toolkit=self.toolkit,
            max_turns=self.args.max_turns, input_queue=self.inputs,
        )
        output = self.config.output_dir
        output.mkdir(parents=True, exist_ok=True)
        write_json(output / "transcript.json", result.transcript)
        self.summary = {
            **result.to_dict(),
            "robot": self.spec.name,
            "task": self.config.task,
            "planner": self.args.planner,
            "toolkit_namespace": self.toolkit_namespace,
            "solved": self.toolkit.solved(),
            "wall_time_s": round(time.time() - started, 3),
        }
        write_json(output / "result.json", self.summary)
        log.info("planner finished: %s (%s)", result.status.value, result.stop_reason)
        return self.summary

    def abort(self, reason: str) -> None:
        if self.inputs is not None:
            self.inputs.put(AbortRequest(reason))
        self.toolkit.cancel_active_and_wait(timeout=10, reason=reason)


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    forward_python_logging()
    node = PlannerNode()
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    spinning = BackgroundSpin(executor)
    try:
        node.run_task()
    except (KeyboardInterrupt, ExternalShutdownException):
        shield_shutdown()
        node.abort("planner_node interrupted")
    finally:
        shield_shutdown()
        spinning.stop()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

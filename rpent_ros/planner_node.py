"""planner_node: runs a built-in planner against a remote toolkit_node and writes the run's record.

    ros2 run rpent planner_node --ros-args -p robot:=franka -p planner:=api -p task:="Pick up the cube."
    ros2 run rpent planner_node --ros-args -p robot:=toy -p planner:=replay -p recipe:=/path/recipe.jsonl

The robot parameter selects the prompts (the same templates `rpent run` uses); the tools, their
validation and the robot itself live in the toolkit node at `toolkit_namespace`.
"""

from __future__ import annotations

import logging
import queue
import time
from typing import Any

from rclpy.node import Node

from rpent.planner.base import AbortRequest
from rpent.record.atomic import write_json
from rpent.runner.run import default_output_dir, make_planner
from rpent_ros import node_main
from rpent_ros.params import (
    Param,
    declare_robot_parameters,
    flag_errors_as_parameters,
    package_file,
    parse_robot_config,
)
from rpent_ros.toolkit_client import RosToolkit

log = logging.getLogger("rpent.planner_node")
PLANNER_PARAMETERS = (
    Param("toolkit_namespace", "/toolkit", "namespace of the toolkit_node whose tools the planner calls"),
    Param("new_task", True, "ask the toolkit node for a fresh record (~/new_task) before planning: a long-lived "
          "node may hold the previous task's finish"),
)


class PlannerNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("planner", automatically_declare_parameters_from_overrides=True, **kwargs)
        found = declare_robot_parameters(self, PLANNER_PARAMETERS)
        self.toolkit_namespace = found.values["toolkit_namespace"]
        self.new_task = found.values["new_task"]
        self.robot, self.spec, namespace = found.robot, found.spec, found.namespace
        # A recipe named as in the checkout (robots/franka/recipes/...) is found in the installed package too.
        namespace.recipe = package_file(namespace.recipe) if namespace.recipe else namespace.recipe
        if namespace.output_dir is None:
            namespace.output_dir = str(default_output_dir(f"{self.spec.name}-planner"))
        self.args = namespace
        self.config = parse_robot_config(self.spec, namespace)
        with flag_errors_as_parameters():
            self.planner = make_planner(namespace, self.spec)
        self.toolkit = RosToolkit(self, self.toolkit_namespace)
        self.inputs: Any = None
        self.summary: dict[str, Any] | None = None

    def run_task(self) -> dict[str, Any]:
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
    node_main.init(args)
    node = node_main.build("planner_node", PlannerNode)
    spinning = node_main.Spinning(node, threads=4)
    interrupted = False
    try:
        node.run_task()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the context is still valid, so the cancel reaches the toolkit node
        interrupted = True
    finally:
        spinning.close((lambda: node.abort("planner_node interrupted")) if interrupted else None)


if __name__ == "__main__":
    main()

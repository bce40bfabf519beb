"""planner_node: runs a built-in planner against a remote toolkit_node and writes the run's record.

    ros2 run rpent planner_node --ros-args -p robot:=franka -p planner:=api -p task:="Pick up the cube."
    ros2 run rpent planner_node --ros-args -p robot:=toy -p planner:=replay -p recipe:=/path/recipe.jsonl

The robot parameter selects the prompts (the same templates `rpent run` uses); the tools, their
validation and the robot itself live in the toolkit node at `toolkit_namespace`. Its own record
(run.log, transcript.json, result.json) is a RunRecord in `output_dir`: one run per directory, as for
`rpent run`, and `resume:=true` continues one as a new segment (transcript-2.json, result-2.json).
"""

from __future__ import annotations

import logging
import queue
import time
from typing import Any

from rclpy.node import Node

from rpent.planner.base import AbortRequest
from rpent.record.run_record import RunRecord
from rpent.record.segments import RecordError
from rpent.runner.run import default_output_dir, make_planner
from rpent_ros import node_main
from rpent_ros.params import (
    Param,
    declare_robot_parameters,
    flag_errors_as_parameters,
    package_file,
    parse_robot_config,
)
from rpent_ros.toolkit.client import RosToolkit

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
        self.record: RunRecord | None = None
        self.inputs: Any = None
        self.summary: dict[str, Any] | None = None

    def run_task(self) -> dict[str, Any]:
        """Plan one task against the toolkit node into this node's record; RecordError (before the
        toolkit is asked for anything) when output_dir is used and resume is not set."""
        started = time.time()
        self.toolkit.wait_ready()
        # Claimed once the toolkit node is up: a launch puts this record inside the toolkit node's
        # output_dir, which that node claims as it starts (it would refuse a directory holding ours).
        self.record = RunRecord.open(self.config.output_dir, resume=bool(getattr(self.args, "resume", False)),
                                     option="parameter output_dir", resume_option="resume:=true")
        with self.record.run_log():
            return self._run_task(self.record, started)

    def _run_task(self, record: RunRecord, started: float) -> dict[str, Any]:
        if self.new_task:
            log.info("toolkit record for this task: %s", self.toolkit.new_task())
        system_prompt, user_message = self.spec.prompts.render(self.config.prompt_vars)
        self.inputs = queue.Queue()
        log.info("planning with %s against %s", self.args.planner, self.toolkit_namespace)
        result = self.planner.solve(
            system_prompt=system_prompt, user_message=user_message, toolkit=self.toolkit,
            max_turns=self.args.max_turns, input_queue=self.inputs,
        )
        record.write_transcript(result.transcript)
        self.summary = {
            **result.to_dict(),
            "robot": self.spec.name,
            "task": self.config.task,
            "planner": self.args.planner,
            "toolkit_namespace": self.toolkit_namespace,
            "solved": self.toolkit.solved(),
            "wall_time_s": round(time.time() - started, 3),
            "output_dir": str(record.output_dir),
            "segment": record.number,
        }
        record.write_result(self.summary)
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
    refused: RecordError | None = None
    try:
        node.run_task()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the context is still valid, so the cancel reaches the toolkit node
        interrupted = True
    except RecordError as exc:  # a used output_dir: nothing was asked of the toolkit
        refused = exc
    finally:
        spinning.close((lambda: node.abort("planner_node interrupted")) if interrupted else None)
    if refused is not None:
        node_main.refuse_start("planner_node", refused)


if __name__ == "__main__":
    main()

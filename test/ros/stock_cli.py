"""The stock `ros2 action send_goal` on a toolkit's CallTool actions, as a person runs it in a terminal: its
output read as it comes, Ctrl-C as a keyboard sends it. Used by the ROS tests and bench/bench_policy.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml
from output_lines import OutputLines


class SendGoal(OutputLines):
    """`ros2 action send_goal <action> rpent/action/CallTool <goal> --feedback`, SIGINT at its default
    disposition. `action` is /toolkit/call_tool (then `tool` names the tool) or /toolkit/tools/<tool>."""

    # A second Ctrl-C this long after a first one ros2cli ignored. Its handler cancels only a goal whose
    # handle reads ACCEPTED or EXECUTING, and a client that handled the goal's response late (a loaded
    # machine) dropped the statuses that came before: it reads UNKNOWN until the server's next status
    # message (goals.STATUS_AGAIN_S, 0.5 s), and a person's first press does nothing, their second does.
    PRESS_AGAIN_S = 1.0

    def __init__(self, action: str, arguments: dict, tool: str | None = None, cwd: Path | None = None,
                 env: dict | None = None) -> None:
        goal = (f"tool: {tool}, " if tool else "") + f"arguments_json: '{json.dumps(arguments)}'"
        super().__init__(["ros2", "action", "send_goal", action, "rpent/action/CallTool", f"{{{goal}}}", "--feedback"],
                         cwd=cwd, env={**(env or os.environ), "PYTHONUNBUFFERED": "1"})  # lines as a terminal shows them
        self.pressed_at: float | None = None  # wall time of the last Ctrl-C: the ROS stamps' and joint record's clock
        self.pressed_perf: float | None = None  # the same on perf_counter, the clock of the arm's stop times

    @classmethod
    def of_tool(cls, tool: str, arguments: dict, **kwargs) -> SendGoal:
        """The tool's own action, /toolkit/tools/<tool>."""
        return cls(f"/toolkit/tools/{tool}", arguments, **kwargs)

    def wait_for(self, text: str, timeout_s: float) -> None:
        assert self.wait_for_text(text, timeout_s), f"no {text!r} within {timeout_s} s:\n{self.output[-3000:]}"

    def finished(self, timeout_s: float) -> str:
        """The whole output once the CLI said how the goal finished and exited."""
        self.wait_for("Goal finished with status:", timeout_s)
        self.proc.wait(30)
        return self.output

    def ctrl_c(self, timeout_s: float = 30) -> int:
        """Ctrl-C once the client has said the goal was accepted, and again if it did not start to cancel;
        the CLI's exit code."""
        self.wait_for("Goal accepted with ID", 60)
        self._press()
        if not self.wait_for_text("Canceling goal...", self.PRESS_AGAIN_S) and self.proc.poll() is None:
            self._press()
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {timeout_s} s after Ctrl-C:\n{self.output}") from None

    def _press(self) -> None:
        # ros2cli's Ctrl-C handler spins the node again from inside the signal handler; a signal that lands
        # while the CLI runs one of its action client's callbacks (printing a feedback message) leaves that
        # spin waiting for ever on the callback group the interrupted callback holds, with the cancel sent
        # (docs/ros.md). The CLI spends almost all its time asleep in its wait for the next message, so a
        # person's press lands there; so do the tests', rather than at whatever moment their reader thread
        # wakes, which follows the CLI's own prints.
        self._until_asleep(2.0)
        self.pressed_at, self.pressed_perf = time.time(), time.perf_counter()
        os.kill(self.proc.pid, signal.SIGINT)

    def _until_asleep(self, timeout_s: float) -> None:
        """Until the CLI's main thread sleeps (state S in /proc), at most `timeout_s`."""
        stat = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/stat")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                state = stat.read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return  # gone: the press is moot
            if state == "S":
                return
            time.sleep(0.001)  # polls a process on this machine's other core; a busy loop would slow the CLI

    def printed_result(self) -> dict:
        """The CallTool result as the CLI printed it (YAML between "Result:" and the goal's status). A goal
        is judged on this, not on its last feedback: rclpy's client drops feedback that arrives before it
        handled the goal's response, which a CLI starved of CPU does for a goal refused at once."""
        output = self.output
        start = output.rindex("Result:\n") + len("Result:\n")
        end = output.index("Goal finished with status:", start)
        return yaml.safe_load(output[start:end].lstrip())  # ros2cli indents only the first line

    def result(self) -> dict:
        """The tool's action_result, from the CallTool result's result_json."""
        return json.loads(self.printed_result()["result_json"])["action_result"]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

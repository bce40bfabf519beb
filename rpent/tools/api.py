"""ToolkitAPI: what planners, the MCP bridge, TaskRun, the dashboard and the ROS nodes use of a toolkit.

Three implementations, one contract (test/toolkit_conformance.py runs the same cases against each):

- `rpent.tools.Toolkit`: the robot's tools in this process;
- `rpent_ros.toolkit.client.RosToolkit`: a toolkit_node's tools over ROS 2 actions (planner_node, mcp_bridge_node);
- `rpent_ros.operator.remote_robot.RemoteTask`: one dashboard task's part of a toolkit_node (its own record on the node).

Where they differ, the docstrings below say so. Extras some toolkits offer (`state`, `scene_state()`,
`approvals()`) are not part of the contract: callers look them up with getattr.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from rpent.memory import MemoryManager
    from rpent.tools.result import ToolResult

#: `on_stage(stage, message, progress)`: called from the thread the call runs in (or the ROS client's),
#: at every stage change; "done" comes once, when `result()` no longer waits.
StageCallback = Callable[[str, str, "float | None"], Any]


@runtime_checkable
class ToolInfo(Protocol):
    """What a caller reads of one tool (rpent.tools.Tool, or RosToolkit's RemoteTool)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def input_schema(self) -> dict[str, Any]: ...
    @property
    def readonly(self) -> bool: ...

    def validate(self, arguments: Mapping[str, Any]) -> Any:
        """The arguments checked here, before anything is sent; ToolArgumentError naming each field and rule."""

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class CallHandle(Protocol):
    """One submitted call (rpent.tools.ToolCall, or RosToolkit's RemoteCall)."""

    @property
    def id(self) -> int:
        """Unique within its toolkit (client): `ToolkitAPI.cancel(id)` names it."""

    @property
    def name(self) -> str: ...
    @property
    def stage(self) -> str: ...

    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> ToolResult:
        """Wait for the result; TimeoutError if it is not there within `timeout` seconds."""

    def cancel(self, reason: str = "cancelled") -> bool:
        """Drop the call if it is still queued, stop it at its next safe boundary if it runs; False if it had ended."""


@runtime_checkable
class ToolkitAPI(Protocol):
    """A robot's tools as a planner, the MCP bridge or TaskRun sees them. Calls never raise: a refusal,
    a failure or a cancel is a ToolResult with its error."""

    @property
    def output_dir(self) -> Path | None:
        """Where this toolkit's record is written, if it is known here (a RosToolkit learns it from new_task)."""

    @property
    def memory(self) -> MemoryManager | None:
        """The robot's memory when this process holds it; None where a toolkit node keeps it."""

    def list_tools(self, include_read_image: bool = True) -> Sequence[ToolInfo]: ...

    def get_tool(self, name: str) -> ToolInfo | None: ...

    def submit(self, name: str, arguments: Mapping[str, Any] | str | None = None, *,
               on_stage: StageCallback | None = None) -> CallHandle:
        """Queue the call now (its place in line is fixed here) and run it in the background."""

    def execute_tool(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolResult:
        """Run one call and wait for its result."""

    def cancel(self, call_id: int, reason: str = "cancelled") -> bool:
        """Cancel the call `submit` returned with this id; False if there is none or it had ended."""

    def cancel_active_and_wait(self, timeout: float | None = None, reason: str = "cancelled by operator") -> bool:
        """Cancel every queued and running call and wait for them to end; False if some still ran after
        `timeout`. A Toolkit also stops admitting calls until `resume_calls()`; over ROS only this
        client's calls are cancelled and the node goes on admitting."""

    def resume_calls(self) -> None:
        """Admit calls again after cancel_active_and_wait (nothing to do where admission is not paused)."""

    @property
    def finish_result(self) -> dict[str, Any] | None:
        """The accepted `finish` call's data, None before one was accepted."""

    def solved(self) -> bool | None:
        """The robot's own verdict on the task; None where it cannot tell."""

    def write_recipe(self, recipe_tag: str) -> Path:
        """Write the successful robot calls as a recipe; its path. Over ROS the node writes it as it
        closes its record (~/close_task)."""

    def close(self, timeout: float | None = None) -> Path | None:
        """Refuse new calls for good, let queued and running ones end; the episode video, if one was saved here."""

    @property
    def closed(self) -> bool: ...

"""The planner contract: what every planner is given, what it returns, and how it reaches tools.

A planner reads `toolkit.list_tools()`, lets a model (or a recipe) choose calls, runs them through
the toolkit, and stops when `toolkit.finish_result` is set or a limit is reached.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import importlib
import logging
import queue
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# Option checks live in rpent.option_checks; plugins that import them from here still find them.
from rpent.option_checks import check_max_turns
from rpent.option_checks import check_positive as check_positive

# The interface names the async bridge rpent.planner.base.execute_tool; it is defined in core.
from rpent.tools.async_call import execute_tool as execute_tool

if TYPE_CHECKING:
    from rpent.tools.api import ToolkitAPI

log = logging.getLogger(__name__)


# -- operator input ----------------------------------------------------------------------------


@dataclass(frozen=True)
class OperatorMessage:
    """Text the operator typed while the planner runs; the model sees it at the next turn boundary."""

    text: str


@dataclass(frozen=True)
class AbortRequest:
    """Stop now: the active tool call is cancelled and the run ends with status `aborted`."""

    reason: str | None = None


OperatorInput = OperatorMessage | AbortRequest
# Planners run in their own thread (and event loop), so a plain thread-safe queue is the channel.
InputQueue = queue.Queue  # of OperatorInput


class OperatorInbox:
    """Reads a planner's input queue in a background thread for the length of one run.

    Messages wait here until the planner takes them at a turn boundary (`take_messages`); an abort
    request is remembered (`abort_reason`) and `on_abort(reason)` is called at once from the reader
    thread, so the planner can cancel what it is doing. The reader calls task_done() after filing
    each item: `input_queue.join()` returning means the planner holds every item put so far.
    """

    def __init__(self, input_queue: queue.Queue[OperatorInput] | None,
                 on_abort: Callable[[str], Any] | None = None) -> None:
        self._queue = input_queue
        self._on_abort = on_abort
        self._lock = threading.Lock()
        self._messages: list[str] = []
        self.abort_reason: str | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> OperatorInbox:
        if self._queue is not None and self._reader is None:
            self._reader = threading.Thread(target=self._read, name="planner-inbox", daemon=True)
            self._reader.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop reading; items put after this stay in the queue for the next run."""
        if self._reader is None or self._queue is None:
            return
        self._queue.put(_STOP_READING)
        self._reader.join(timeout_s)
        self._reader = None

    def take_messages(self) -> list[str]:
        with self._lock:
            messages, self._messages = self._messages, []
        return messages

    def _read(self) -> None:
        # The only consumer of the queue during the run: a blocking get keeps an abort immediate.
        assert self._queue is not None
        while True:
            item = self._queue.get()
            try:
                if item is _STOP_READING:
                    return
                if isinstance(item, AbortRequest):
                    self.abort_reason = item.reason or "operator abort"
                    if self._on_abort is not None:
                        self._on_abort(self.abort_reason)
                elif isinstance(item, OperatorMessage):
                    with self._lock:
                        self._messages.append(item.text)
                else:
                    log.warning("ignoring unknown operator input %r", item)
            except Exception:  # the reader must survive a broken abort callback
                log.exception("handling operator input %r failed", item)
            finally:
                self._queue.task_done()


_STOP_READING = object()


# -- result ------------------------------------------------------------------------------------


class PlannerStatus(str, enum.Enum):
    FINISHED = "finished"          # the robot's finish tool was accepted (see finish_result)
    ABORTED = "aborted"            # the operator asked to stop
    TURN_LIMIT = "turn_limit"      # max_turns model turns without a finish
    TIME_LIMIT = "time_limit"      # the wall-time budget ran out
    TOKEN_LIMIT = "token_limit"    # the token budget ran out
    MODEL_ENDED = "model_ended"    # the model stopped calling tools without finishing
    REFUSED = "refused"            # the model refused to continue
    ERROR = "error"                # the model service failed beyond retries, or a planner bug


@dataclass
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return (self.input_tokens + self.output_tokens
                + self.cache_creation_input_tokens + self.cache_read_input_tokens)

    def add(self, other: TokenUsage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_creation_input_tokens += other.cache_creation_input_tokens
        self.cache_read_input_tokens += other.cache_read_input_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass
class PlannerResult:
    """How a run ended.

    `finish_result` is a copy of `toolkit.finish_result` (the accepted finish payload with its
    robot-specific fields, e.g. operator_aborted, operator_notes), or None if no finish was accepted.
    `stop_reason` says in words why the planner stopped. `transcript` is the conversation with
    images replaced by file paths or placeholders (what the runner writes to transcript.json).
    """

    status: PlannerStatus
    stop_reason: str
    finish_result: dict[str, Any] | None = None
    turns: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.status is PlannerStatus.FINISHED

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "stop_reason": self.stop_reason,
            "finish_result": self.finish_result,
            "turns": self.turns,
            "usage": self.usage.to_dict(),
            "error": self.error,
        }


# -- planner -----------------------------------------------------------------------------------


class Planner(ABC):
    """Drives one task to a finish. `solve` blocks; run it in the thread that owns the planner."""

    name: str = "planner"

    @abstractmethod
    def solve(
        self,
        *,
        system_prompt: str,
        user_message: str,
        toolkit: ToolkitAPI,
        max_turns: int,
        input_queue: queue.Queue[OperatorInput] | None = None,
        dashboard_interaction: Any = None,
    ) -> PlannerResult:
        """Run until the toolkit accepts a finish, a limit is reached, or the operator aborts.

        `input_queue` carries OperatorMessage / AbortRequest items put there by other threads.
        `dashboard_interaction` is the dashboard's interaction handle (None without a dashboard);
        planners that cannot use it ignore it.
        """


class AsyncPlanner(Planner):
    """A planner whose loop is a coroutine: `solve` runs it on a fresh event loop in the calling thread."""

    def solve(
        self,
        *,
        system_prompt: str,
        user_message: str,
        toolkit: ToolkitAPI,
        max_turns: int,
        input_queue: queue.Queue[OperatorInput] | None = None,
        dashboard_interaction: Any = None,
    ) -> PlannerResult:
        """Blocks until the run ends; call it from a thread without a running event loop."""
        check_max_turns(max_turns)
        return asyncio.run(self._solve(system_prompt, user_message, toolkit, max_turns, input_queue))

    @abstractmethod
    async def _solve(
        self,
        system_prompt: str,
        user_message: str,
        toolkit: ToolkitAPI,
        max_turns: int,
        input_queue: queue.Queue[OperatorInput] | None,
    ) -> PlannerResult: ...


class ScriptPlanner(Planner):
    """A planner that follows a script, not a model: it reads no prompt, so `run` gets only what a
    script drives with (the toolkit, the turn budget, the operator's queue)."""

    def solve(
        self,
        *,
        system_prompt: str,
        user_message: str,
        toolkit: ToolkitAPI,
        max_turns: int,
        input_queue: queue.Queue[OperatorInput] | None = None,
        dashboard_interaction: Any = None,
    ) -> PlannerResult:
        check_max_turns(max_turns)
        return self.run(toolkit, max_turns, input_queue)

    @abstractmethod
    def run(self, toolkit: ToolkitAPI, max_turns: int, input_queue: queue.Queue[OperatorInput] | None) -> PlannerResult:
        """Drive the toolkit through the script; at most `max_turns` tool calls."""


# -- registry ----------------------------------------------------------------------------------

PLUGIN_NAME = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def planner_arg(value: str) -> str:
    """argparse type of --planner: a registry name or a plugin's package.module:Class (imported later)."""
    if value in PLANNERS or PLUGIN_NAME.fullmatch(value):
        return value
    raise argparse.ArgumentTypeError(f"must be {planner_arg.rule}, got {value!r}")


# Imported lazily: each planner pulls in its own SDK (anthropic, claude-agent-sdk, codex, ...).
PLANNERS: dict[str, str] = {
    "api": "rpent.planner.api:ApiPlanner",
    "claude_code": "rpent.planner.claude_code:ClaudeCodePlanner",
    "codex": "rpent.planner.codex:CodexPlanner",
    "replay": "rpent.planner.replay:ReplayPlanner",
}
# The rule in words, for the CLI's error and the ROS parameter's description alike.
planner_arg.rule = f"one of {', '.join(sorted(PLANNERS))} or package.module:Class"


def build_planner(name: str, **options: Any) -> Planner:
    """Create a planner by registry name ("api", "claude_code", "codex", "replay") or as a plugin.

    A plugin is named "package.module:Class": the module is imported and Class, a Planner subclass,
    is called with `options` (the model flags, and a sweep's `planner_options` under `rpent eval`).
    `rpent run --planner package.module:Class` and `rpent eval --planner ...` take the same names.
    """
    target = PLANNERS.get(name, name if ":" in name else None)
    if target is None:
        raise ValueError(f"planner: unknown planner {name!r} (known: {', '.join(sorted(PLANNERS))}, "
                         "or 'package.module:Class')")
    module_name, _, class_name = target.partition(":")
    module = importlib.import_module(module_name)
    planner_class = getattr(module, class_name, None)
    if not (isinstance(planner_class, type) and issubclass(planner_class, Planner)):
        raise ValueError(f"planner: {target} is not a Planner subclass")
    return planner_class(**options)

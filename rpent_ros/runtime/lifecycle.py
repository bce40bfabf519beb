"""Managed (lifecycle) runtime nodes: what a node serves in each lifecycle state.

    unconfigured  nothing connected; every call is refused with that reason
    inactive      connected: state, checks, wait and stop are served, motions are refused
    active        everything is served

configure connects, activate admits motions, deactivate refuses new ones and stops those running,
cleanup disconnects (the ROS 2 managed-node convention: `ros2 lifecycle set /arm_left activate`).
The RuntimeCall action exists in every state, so a client learns why a call was refused instead of
waiting for a server that is not there.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rpent.runtime.arm import RuntimeFault

UNCONFIGURED, INACTIVE, ACTIVE, FINALIZED = "unconfigured", "inactive", "active", "finalized"


@dataclass(frozen=True)
class Command:
    """The last command a managed runtime was given, for /diagnostics."""

    method: str
    outcome: str  # "ok", or the error text
    at_s: float  # time.monotonic()


class ManagedRuntime:
    """Stands in for a runtime object (arm, gripper, camera) and serves it as the lifecycle state allows.

    `gated` are the methods that act (motions; a camera's captures): served only while active. A
    gated call that returns at once (an arm's start_*) runs under the lock that deactivation takes,
    so whatever it started is stopped by the deactivation that follows; a gated call that waits for
    its motion (a gripper's move) gets a cancel event that deactivation sets.
    """

    def __init__(self, label: str, node_name: str, gated: frozenset[str], commands: frozenset[str] = frozenset(),
                 acts: str = "motions") -> None:
        self.label = label
        self.acts = acts  # what `gated` does, in words
        self.node_name = node_name
        self.gated = gated
        self.commands = commands | gated | {"stop"}  # recorded as "last command"
        self.lifecycle_state = UNCONFIGURED
        self.target: Any = None
        self.functions: dict[str, Callable[..., Any]] = {}
        self.failures = 0
        self.last_error = ""
        self.last_command: Command | None = None
        self._lock = threading.Lock()
        self._running: set[threading.Event] = set()

    # --- lifecycle ------------------------------------------------------------------------------
    def attach(self, target: Any, functions: Mapping[str, Callable[..., Any]] | None = None) -> None:
        """Serve `target`'s methods, and `functions` (name: function(target, ...)) beside them."""
        with self._lock:
            self.target, self.lifecycle_state = target, INACTIVE
            self.functions = dict(functions or {})

    def activate(self) -> None:
        with self._lock:
            if self.target is None:
                raise RuntimeFault(f"{self.label}: cannot activate, nothing is connected")
            self.lifecycle_state = ACTIVE

    def deactivate(self) -> None:
        """Refuse new motions from now on, then stop the running ones."""
        with self._lock:
            if self.lifecycle_state == ACTIVE:
                self.lifecycle_state = INACTIVE
            running, target = list(self._running), self.target
        for event in running:
            event.set()
        stop = getattr(target, "stop", None)
        if callable(stop):
            stop()

    def detach(self, state: str = UNCONFIGURED) -> Any:
        """Forget the runtime object (deactivate() has stopped it) and hand it back to be closed."""
        with self._lock:
            target, self.target, self.lifecycle_state = self.target, None, state
            running = list(self._running)
        for event in running:
            event.set()
        return target

    # --- what RuntimeServer calls ---------------------------------------------------------------
    def stop(self) -> None:
        """Always served: with nothing connected there is nothing to stop."""
        target = self.target
        if target is not None:
            self._recorded("stop", target.stop)

    def health(self) -> dict[str, Any] | None:
        """The runtime's own health readings (FrankyArm.health, ...), if it has any; not a command."""
        return self._reading("health")

    def clock_s(self) -> float | None:
        """The runtime's own clock (an arm's: the robot's, FrankyArm.clock_s), None if it has none or
        nothing is connected; not a command. The leases on streamed calls run on it."""
        return self._reading("clock_s")

    def _reading(self, name: str) -> Any:
        read = getattr(self.target, name, None)
        return read() if callable(read) else None

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)

        # `cancel` in the signature: RuntimeServer hands every call its goal's cancel event.
        def call(*args: Any, cancel: threading.Event | None = None, **kwargs: Any) -> Any:
            return self._call(method, args, kwargs, cancel)

        return call

    def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], cancel: threading.Event | None) -> Any:
        with self._lock:
            gated = method in self.gated
            if self.target is None:
                self._refuse(method, f"(nothing connected; `ros2 lifecycle set {self.node_name} configure`)")
            if gated and self.lifecycle_state != ACTIVE:
                self._refuse(method, f"and acts only while active (`ros2 lifecycle set {self.node_name} activate`)")
            function = (functools.partial(self.functions[method], self.target) if method in self.functions
                        else getattr(self.target, method))
            takes_cancel = "cancel" in inspect.signature(function).parameters
            if gated and not takes_cancel:
                return self._recorded(method, lambda: function(*args, **kwargs))
            if takes_cancel:
                cancel = cancel or threading.Event()
                kwargs["cancel"] = cancel
                if gated:
                    self._running.add(cancel)
        try:
            return self._recorded(method, lambda: function(*args, **kwargs))
        finally:
            if cancel is not None:
                with self._lock:
                    self._running.discard(cancel)

    def _refuse(self, method: str, why: str) -> None:
        reason = f"{self.label}: {method} refused: {self.node_name} is {self.lifecycle_state} {why}"
        if method in self.commands:
            self.last_command = Command(method, f"refused: {self.node_name} is {self.lifecycle_state}", time.monotonic())
        raise RuntimeFault(reason)

    def _recorded(self, method: str, run: Callable[[], Any]) -> Any:
        try:
            result = run()
        except Exception as exc:
            self.failures += 1
            self.last_error = f"{method}: {type(exc).__name__}: {exc}"
            if method in self.commands:
                self.last_command = Command(method, f"{type(exc).__name__}: {exc}", time.monotonic())
            raise
        if method in self.commands:
            self.last_command = Command(method, "ok", time.monotonic())
        return result

"""Runtime Protocols (Arm, Gripper, Camera, Policy) implemented over a runtime node's RuntimeCall
action, so a toolkit node drives arms that live in other nodes or on other machines."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rclpy.node import Node

from rpent.action import RuntimeCall
from rpent.runtime.arm import RuntimeFault, TrajectoryFailure
from rpent_ros.action_client import ThreadSafeActionClient
from rpent_ros.runtime.codec import decode_result, encode_call
from rpent_ros.runtime.image_msgs import image_msg_to_rgb
from rpent_ros.runtime.lease import LEASED_METHODS, RENEW_S, LeaseRenewer, Relay

log = logging.getLogger(__name__)

_LIVENESS_PERIOD_S = 0.2
_GONE_AFTER_S = 1.0  # DDS graph updates lag a little; a restart within this is not "gone"


class RemoteRuntimeError(RuntimeFault):
    """The runtime node reported an error (its text names the remote exception)."""


class RemoteTrajectoryFailure(RemoteRuntimeError, TrajectoryFailure):
    """The runtime node's arm reported a TrajectoryFailure: kept as one, so the toolkit's motion plans
    again after it over ROS as it does in process."""


def remote_error(text: str) -> RemoteRuntimeError:
    """The exception for a runtime node's error text (`<name>.<method>: <Type>: <message>`)."""
    kind = text.split(": ", 2)[1] if text.count(": ") >= 2 else ""
    return RemoteTrajectoryFailure(text) if kind == TrajectoryFailure.__name__ else RemoteRuntimeError(text)


class RuntimeProxy:
    """Calls `<node>/<name>/call`; method calls block until the remote call ends.

    A `cancel=` threading.Event argument is not sent: setting it cancels the remote goal, which
    stops the remote runtime at once. Nor is an `on_frame=` callable: it gets each picture the
    remote call sends as feedback (RuntimeServer). A leased call (rpent_ros.runtime.lease) is renewed
    by the thread that waits for it, and released when it is cancelled; made while this thread serves a
    leased call, it starts only once that call's caller renewed within LEASE_S and is renewed as that
    caller renews (relayed).
    """

    def __init__(self, node: Node, action_name: str, name: str | None = None, timeout_s: float = 120.0) -> None:
        self.node = node
        self.action_name = action_name
        self.name = name or action_name.strip("/").split("/")[-2]
        self.timeout_s = timeout_s
        self._client = ThreadSafeActionClient(node, RuntimeCall, action_name)
        self._active: set[Any] = set()
        self._gone = False  # the server vanished during a call; cleared when it is back
        self._lock = threading.Lock()
        self._lease: LeaseRenewer | None = None  # made with the first leased call

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        if not self._client.wait_for_server(timeout_sec=timeout_s):
            raise RemoteRuntimeError(f"runtime node action {self.action_name} did not appear within {timeout_s} s")

    def call(self, method: str, *args: Any, cancel: threading.Event | None = None,
             on_frame: Callable[[Any], None] | None = None, **kwargs: Any) -> Any:
        if self._gone and not self._client.server_is_ready():  # fail at once, e.g. stop() during shutdown
            raise RemoteRuntimeError(f"{self.action_name}: the runtime node is gone ({method} not sent)")
        done = threading.Event()
        box: dict[str, Any] = {}

        def on_result(future: Any) -> None:
            box["response"] = future.result()
            done.set()

        def on_goal(future: Any) -> None:
            handle = future.result()
            if not handle.accepted:
                box["error"] = f"{self.action_name}: goal {method} rejected"
                done.set()
                return
            box["handle"] = handle
            handle.get_result_async().add_done_callback(on_result)

        feedback = None
        if on_frame is not None:
            kwargs["on_frame"] = True

            def feedback(message: Any) -> None:
                for image in message.feedback.images:
                    on_frame(image_msg_to_rgb(image))

        goal = RuntimeCall.Goal(method=method, args_json=encode_call(args, kwargs))
        lease = self._leasing() if method in LEASED_METHODS else None
        relay = Relay.of_this_thread() if lease is not None else None
        if relay is not None:
            # Nothing moves while it waits; a caller silent for good ends the served call's lease (WALL_CEILING_S).
            while not relay.supervised():
                if relay.ended() or (cancel is not None and cancel.is_set()):
                    raise RemoteRuntimeError(f"{self.action_name}: {method} not sent: the call it serves ended "
                                             "while its caller was silent")
                time.sleep(0.005)
        self._client.send_goal_async(goal, feedback_callback=feedback).add_done_callback(on_goal)
        started = time.monotonic()
        next_check, gone_since, renewed = started + _LIVENESS_PERIOD_S, None, 0.0
        while not done.wait(0.005 if cancel is not None or lease is not None else 0.05):
            now = time.monotonic()
            # A motion (cancel given) may run for minutes, so it has no overall timeout.
            if cancel is None and now - started > self.timeout_s:
                raise RemoteRuntimeError(f"{self.action_name}: {method} gave no answer within {self.timeout_s} s")
            if cancel is not None and cancel.is_set() and "handle" in box and not box.get("cancel_sent"):
                box["cancel_sent"] = True
                if lease is not None:  # stops the call at once, past the serving node's executor
                    lease.release(box["handle"].goal_id)
                box["handle"].cancel_goal_async()
            elif lease is not None and "handle" in box and not box.get("cancel_sent") and (
                    relay.due() if relay is not None else now - renewed >= RENEW_S):
                renewed = now
                lease.renew(box["handle"].goal_id)
            # A runtime node that went away (Ctrl-C on the launch, a crash) never answers: end the
            # call with that cause instead of waiting for ever.
            if now >= next_check:
                next_check = now + _LIVENESS_PERIOD_S
                if self._client.server_is_ready():
                    gone_since = None
                elif gone_since is None:
                    gone_since = now
                elif now - gone_since > _GONE_AFTER_S:
                    self._gone = True
                    raise RemoteRuntimeError(f"{self.action_name}: the runtime node went away during {method}")
        if "error" in box:
            raise RemoteRuntimeError(box["error"])
        result = box["response"].result
        if result.is_error:
            raise remote_error(f"{self.name}.{method}: {result.error}")
        return decode_result(result.result_json)

    def _leasing(self) -> LeaseRenewer:
        with self._lock:
            if self._lease is None:
                self._lease = LeaseRenewer(self.node, self.action_name)
            return self._lease

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda *args, **kwargs: self.call(method, *args, **kwargs)

    def stop(self) -> None:
        """Send the runtime's stop and return: it is its own goal, served concurrently with a running
        wait(). Nothing waits for its answer (a failure is logged when it comes): stop is called from a
        cancel's callbacks (a ROS cancel of a goal, the latched stop), which must not wait behind another
        node's executor; a policy's cancel already reached the arm past it (its lease's release)."""
        if self._gone and not self._client.server_is_ready():  # fail at once, e.g. during shutdown
            raise RemoteRuntimeError(f"{self.action_name}: the runtime node is gone (stop not sent)")

        def on_result(future: Any) -> None:
            result = future.result().result
            if result.is_error:
                log.warning("%s.stop failed: %s", self.name, result.error)

        def on_goal(future: Any) -> None:
            handle = future.result()
            if handle.accepted:
                handle.get_result_async().add_done_callback(on_result)
            else:
                log.warning("%s: the stop goal was rejected", self.action_name)

        goal = RuntimeCall.Goal(method="stop", args_json=encode_call((), {}))
        self._client.send_goal_async(goal).add_done_callback(on_goal)

    def close(self) -> None:
        """The runtime belongs to its node; closing the proxy leaves it running."""

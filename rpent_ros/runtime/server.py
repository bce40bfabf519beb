"""Serve a runtime object (arm, gripper, camera, policy) over a cancellable RuntimeCall action,
and publish its telemetry for rviz."""

from __future__ import annotations

import inspect
import logging
import threading
from contextlib import nullcontext
from functools import partial
from typing import Any

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from rpent.action import RuntimeCall
from rpent_ros.runtime.codec import decode_call, encode_result
from rpent_ros.runtime.image_msgs import frame_to_image_msg
from rpent_ros.runtime.lease import LEASED_METHODS, LeaseWatch, serving

log = logging.getLogger(__name__)

# The methods each kind of runtime exposes (the runtime Protocols of rpent.runtime), nothing else.
ARM_METHODS = frozenset({"state", "start_cartesian", "start_relative", "start_joints", "wait", "stop", "recover"})
GRIPPER_METHODS = frozenset({"state", "move", "grasp", "open", "stop"})
# capture_frame: colour with depth, intrinsics and pose where the camera has them (back_project).
CAMERA_METHODS = frozenset({"capture", "capture_frame"})
POLICY_METHODS = frozenset({"predict", "reset"})


class RuntimeServer:
    """`<node>/<name>/call`: goal {method, args_json} -> result {is_error, error, result_json}.

    A ROS cancel sets the call's cancel event (methods taking `cancel=` see it) and calls the
    target's `stop()` at once, from the cancelling thread. A leased call (rpent_ros.runtime.lease:
    a streamed motion) is stopped the same way when its caller stops renewing it, or releases it.
    A call sent with `on_frame: true` gets an `on_frame(rgb)` that sends each picture as feedback
    (stage "frame"), e.g. what a policy saw. `relays`: the leased calls served here make leased calls of
    their own (a policy's chunks), which relay their lease (rpent_ros.runtime.lease).
    """

    def __init__(self, node: Node, name: str, target: Any, methods: frozenset[str], group: ReentrantCallbackGroup,
                 relays: bool = False) -> None:
        self.node = node
        self.name = name
        self.target = target
        self.methods = methods
        self._cancel_events: dict[bytes, threading.Event] = {}
        self._lapsed: dict[bytes, str] = {}  # leased goals stopped because their lease lapsed, and why
        self._lock = threading.Lock()
        # A lease runs on the target's clock where it has one (an arm's: the robot's, rpent_ros.runtime.lease).
        self._lease = (LeaseWatch(node, f"{node.get_fully_qualified_name()}/{name}/call", self._lapse,
                                  clock=getattr(target, "clock_s", None), relays=relays)
                       if methods & LEASED_METHODS else None)
        self.server = ActionServer(
            node, RuntimeCall, f"~/{name}/call",
            execute_callback=self._execute,
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=self._cancel,
            callback_group=group,
        )

    def _execute(self, goal_handle: ServerGoalHandle) -> RuntimeCall.Result:
        key = bytes(goal_handle.goal_id.uuid)
        method = goal_handle.request.method
        cancel = threading.Event()
        with self._lock:
            self._cancel_events[key] = cancel
        leased = self._lease is not None and method in LEASED_METHODS
        if leased:
            self._lease.watch(key)
        result = RuntimeCall.Result()
        try:
            if method not in self.methods:
                raise ValueError(f"method: '{method}' is not served by {self.name} (served: {', '.join(sorted(self.methods))})")
            function = getattr(self.target, method)
            args, kwargs = decode_call(goal_handle.request.args_json)
            if "cancel" in inspect.signature(function).parameters:
                kwargs["cancel"] = cancel
            if kwargs.get("on_frame") is True:
                kwargs["on_frame"] = partial(self._send_frame, goal_handle)
            # The streamed calls a leased call makes in turn renew their leases as its caller renews it.
            with serving(partial(self._lease.renewed_at, key)) if leased else nullcontext():
                result.result_json = encode_result(function(*args, **kwargs))
        except Exception as exc:
            result.is_error = True
            result.error = f"{type(exc).__name__}: {exc}"
            log.warning("%s.%s failed: %s", self.name, method, result.error)
        finally:
            if leased:
                self._lease.forget(key)
            with self._lock:
                self._cancel_events.pop(key, None)
                lapsed = self._lapsed.pop(key, None)
        if lapsed is not None and not goal_handle.is_cancel_requested:
            result.is_error, result.error = True, f"stopped: {lapsed}"
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif result.is_error:
            goal_handle.abort()
        else:
            goal_handle.succeed()
        return result

    def _send_frame(self, goal_handle: ServerGoalHandle, rgb: Any) -> None:
        stamp = self.node.get_clock().now().to_msg()
        image = frame_to_image_msg(np.asarray(rgb), stamp=stamp, frame_id=self.name)
        goal_handle.publish_feedback(RuntimeCall.Feedback(stage="frame", images=[image]))

    def _cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        self._stop(bytes(goal_handle.goal_id.uuid), "cancel")
        return CancelResponse.ACCEPT

    def _lapse(self, key: bytes, why: str) -> None:
        """A leased call's caller is gone or done with it (LeaseWatch's thread)."""
        log.warning("%s: a streamed call stopped: %s", self.name, why)
        with self._lock:
            self._lapsed[key] = why
        self._stop(key, "lapsed lease")

    def _stop(self, key: bytes, cause: str) -> None:
        with self._lock:
            event = self._cancel_events.get(key)
        if event is not None:
            event.set()
        stop = getattr(self.target, "stop", None)
        if callable(stop):
            try:
                stop()
            except Exception:
                log.exception("%s.stop() on %s failed", self.name, cause)

    def close(self) -> None:
        if self._lease is not None:
            self._lease.close()

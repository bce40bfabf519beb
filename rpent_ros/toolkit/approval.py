"""Motion approval over ROS: the toolkit node asks, the dashboard node's operator answers.

`RosApprovalChannel` is a `rpent.runtime.arm.ApprovalChannel` for the toolkit node: each request is
a call of the `rpent/srv/ApproveMotion` service the dashboard node serves. No operator answering
(no dashboard running, or it went away) is a deny, so nothing moves without a yes.
"""

from __future__ import annotations

import logging
import threading
import time

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from rpent.dashboard.interaction import OperatorInteraction
from rpent.runtime.arm import OnCancel
from rpent.srv import ApproveMotion

log = logging.getLogger(__name__)
DEFAULT_SERVICE = "/dashboard/approve_motion"
# Slack for the service round trip on top of the operator's own timeout.
_TRANSPORT_SLACK_S = 5.0
_SERVICE_POLL_S = 0.05  # rclpy offers no event for a service appearing


class RosApprovalChannel:
    def __init__(self, node: Node, service: str = DEFAULT_SERVICE) -> None:
        self.service = service
        self.operator = f"dashboard node ({service})"  # who answers, for the approval's record
        self._client = node.create_client(ApproveMotion, service, callback_group=ReentrantCallbackGroup())

    def request(self, request_id: str, description: str, timeout_s: float, on_cancel: OnCancel | None = None) -> bool:
        withdrawn, wake = threading.Event(), threading.Event()  # wake: withdrawn or answered

        def withdraw() -> None:
            withdrawn.set()
            wake.set()

        unhook = on_cancel(withdraw) if on_cancel is not None else None
        try:
            return self._ask(request_id, description, timeout_s, withdrawn, wake)
        finally:
            if unhook is not None:
                unhook()

    def _ask(
        self, request_id: str, description: str, timeout_s: float, withdrawn: threading.Event, wake: threading.Event
    ) -> bool:
        if not self._service_ready(min(2.0, timeout_s), withdrawn):
            if not withdrawn.is_set():
                log.warning("motion not approved: no operator serves %s (start the dashboard node)", self.service)
            return False
        future = self._client.call_async(
            ApproveMotion.Request(request_id=request_id, description=description, timeout_s=float(timeout_s))
        )
        future.add_done_callback(lambda _f: wake.set())
        answered = wake.wait(timeout_s + _TRANSPORT_SLACK_S)
        if withdrawn.is_set() or not answered:
            # Stop waiting on the service: a response arriving later finds no future and approves nothing.
            future.cancel()
            if withdrawn.is_set():
                log.info("approval %s withdrawn (the call was cancelled); a later answer is ignored", request_id)
            else:
                log.warning("motion not approved: %s did not answer within %.0f s", self.service, timeout_s)
            return False
        response = future.result()
        if not response.approved:
            log.info("motion %s denied: %s", request_id, response.reason or "operator said no")
        return bool(response.approved)

    def _service_ready(self, timeout_s: float, withdrawn: threading.Event) -> bool:
        """Like `wait_for_service`, which polls too, but gives up the moment the call is cancelled."""
        deadline = time.monotonic() + timeout_s
        while not self._client.service_is_ready():
            if time.monotonic() >= deadline or withdrawn.wait(_SERVICE_POLL_S):
                return False
        return not withdrawn.is_set()


def serve_approvals(node: Node, interaction: OperatorInteraction, name: str = "~/approve_motion") -> object:
    """Answer ApproveMotion calls through the dashboard's operator requests (blocks one executor thread each)."""

    def answer(request: ApproveMotion.Request, response: ApproveMotion.Response) -> ApproveMotion.Response:
        response.approved = interaction.request(request.request_id, request.description, request.timeout_s)
        response.reason = "" if response.approved else "denied, unanswered in time, or the task was aborted"
        return response

    return node.create_service(ApproveMotion, name, answer, callback_group=ReentrantCallbackGroup())

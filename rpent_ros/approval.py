"""Motion approval over ROS: the toolkit node asks, the dashboard node's operator answers.

`RosApprovalChannel` is a `rpent.runtime.arm.ApprovalChannel` for the toolkit node: each request is
a call of the `rpent/srv/ApproveMotion` service the dashboard node serves. No operator answering
(no dashboard running, or it went away) is a deny, so nothing moves without a yes.
"""

from __future__ import annotations

import logging
import threading

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from rpent.dashboard.interaction import OperatorInteraction
from rpent.srv import ApproveMotion

log = logging.getLogger(__name__)
DEFAULT_SERVICE = "/dashboard/approve_motion"
# Slack for the service round trip on top of the operator's own timeout.
_TRANSPORT_SLACK_S = 5.0


class RosApprovalChannel:
    def __init__(self, node: Node, service: str = DEFAULT_SERVICE) -> None:
        self.service = service
        self._client = node.create_client(ApproveMotion, service, callback_group=ReentrantCallbackGroup())

    def request(self, request_id: str, description: str, timeout_s: float) -> bool:
        if not self._client.wait_for_service(timeout_sec=min(2.0, timeout_s)):
            log.warning("motion not approved: no operator serves %s (start the dashboard node)", self.service)
            return False
        done = threading.Event()
        future = self._client.call_async(
            ApproveMotion.Request(request_id=request_id, description=description, timeout_s=float(timeout_s))
        )
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s + _TRANSPORT_SLACK_S):
            future.cancel()
            log.warning("motion not approved: %s did not answer within %.0f s", self.service, timeout_s)
            return False
        response = future.result()
        if not response.approved:
            log.info("motion %s denied: %s", request_id, response.reason or "operator said no")
        return bool(response.approved)


def serve_approvals(node: Node, interaction: OperatorInteraction, name: str = "~/approve_motion") -> object:
    """Answer ApproveMotion calls through the dashboard's operator requests (blocks one executor thread each)."""

    def answer(request: ApproveMotion.Request, response: ApproveMotion.Response) -> ApproveMotion.Response:
        response.approved = interaction.request(request.request_id, request.description, request.timeout_s)
        response.reason = "" if response.approved else "denied, unanswered in time, or the task was aborted"
        return response

    return node.create_service(ApproveMotion, name, answer, callback_group=ReentrantCallbackGroup())

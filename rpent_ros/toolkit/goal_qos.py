"""QoS of the CallTool actions, sized for the goals a toolkit node holds, and how long results are kept.

rclpy's action services default to a history of 10 requests: a burst of more goal (or result, or
cancel) requests than that, arriving faster than the node takes them, silently loses the oldest ones
and their clients wait for an answer that never comes. Both ends keep as many requests as a node
accepts unfinished goals (at least MAX_GOALS); goals past that limit are refused, not lost. One client
sending more than MAX_GOALS goals at once would still lose the oldest: its own writer keeps that many.
"""

from __future__ import annotations

from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

#: Unfinished goals a toolkit node holds by default (parameter max_goals); RosToolkit sizes its end alike.
MAX_GOALS = 256
#: How long a result stays on the server for a late result request: rclpy's default, on purpose.
#: Jazzy's rcl_action measures it from the goal's acceptance, not its end, so a goal that lived longer
#: (queued behind motions, then run) expires the moment it ends, racing rclpy's own delivery of its
#: result: the result is lost and rclpy's executor stops on the KeyError. A shorter time would keep the
#: status messages small (each lists every goal still kept, and every client decodes each one: a
#: stream's 1,000th call took 49 ms against 15 ms for the first), but it would lose the results of
#: every goal that lived longer. RosToolkit asks again for a result that has not come RESULT_GRACE_S
#: after the status said its goal ended, and ends the call with the reason if the node lost it.
RESULT_KEEP_S = 900.0
RESULT_GRACE_S = 2.0


def _requests(depth: int) -> QoSProfile:
    # rclpy's services default, with room for `depth` requests in flight.
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def call_tool_server_qos(depth: int = MAX_GOALS) -> dict[str, Any]:
    """Keyword arguments for rclpy's ActionServer (QoS and result_timeout)."""
    profile = _requests(depth)
    return {"goal_service_qos_profile": profile, "result_service_qos_profile": profile,
            "cancel_service_qos_profile": profile, "feedback_pub_qos_profile": profile, "result_timeout": RESULT_KEEP_S}


def call_tool_client_qos(depth: int = MAX_GOALS) -> dict[str, Any]:
    """Keyword arguments for rclpy's ActionClient."""
    profile = _requests(depth)
    return {"goal_service_qos_profile": profile, "result_service_qos_profile": profile,
            "cancel_service_qos_profile": profile, "feedback_sub_qos_profile": profile}

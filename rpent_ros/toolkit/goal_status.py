"""How a CallTool goal ends: one rule, the ROS action convention, for every goal of a toolkit node.

- SUCCEEDED: the tool ran and returned its result (`is_error` false).
- CANCELED: a ROS cancel request reached the call before it ended, and the call did not complete
  (dropped from the queue, or stopped at a safe boundary).
- ABORTED: the node could not carry out the goal: `arguments_json` is not a JSON object, the tool is
  unknown, validation or the safety envelope refused the arguments, the toolkit was closed or paused,
  the operator or the node's shutdown stopped the call, or the tool failed.

So the status and `is_error` never disagree: SUCCEEDED exactly when `is_error` is false. The last
feedback of every goal has stage "done" and a message that starts with the status in lower case.
Kept free of rclpy so it is tested without ROS.
"""

from __future__ import annotations

SUCCEEDED, ABORTED, CANCELED = "succeeded", "aborted", "canceled"


def goal_outcome(*, is_error: bool, cancel_reached_call: bool) -> str:
    if not is_error:
        return SUCCEEDED
    return CANCELED if cancel_reached_call else ABORTED


def done_message(outcome: str, error: str | None) -> str:
    """The message of a goal's last feedback (stage "done")."""
    return f"{outcome}: {error}" if error else outcome

"""A goal's ROS states on the toolkit's schedule: ACCEPTED while queued, EXECUTING while its call runs.

rclpy (Jazzy) ties a goal's EXECUTING state to running its execute coroutine: `handle.execute()`
publishes EXECUTING and schedules the coroutine at once, and a coroutine that waits for a call is
re-run on every executor round (executors.py yields every pending task before it waits), a busy loop
per running goal. Nor does rclpy publish the status list when it accepts a goal (rclcpp does), so a
client learns of an ACCEPTED goal only from the next state change of some goal. A toolkit node's
goals therefore take these steps here, where the execute coroutine runs only once the call ended
and has nothing to wait for:

- `announce` a moment after acceptance (goals.ANNOUNCE_AFTER_S), and again every
  goals.STATUS_AGAIN_S while it is unfinished (a client drops a status that comes before it handled
  the goal's response): the status list goes out with the goal in it, ACCEPTED while it is queued;
- `start` when its call runs: EXECUTING, with no coroutine scheduled;
- `deliver` when its call ended: the execute coroutine is scheduled and sends the result.

Three private rclpy members are used, all stable since Foxy: `ServerGoalHandle._action_server` (its
server), `ActionServer._handle.publish_status()` and `ServerGoalHandle._update_state()`;
test/ros/test_goal_status_rclpy.py pins what stock clients see.
"""

from __future__ import annotations

from action_msgs.msg import GoalStatus
from rclpy.action.server import GoalEvent, RCLError, ServerGoalHandle


def announce(handle: ServerGoalHandle) -> None:
    """Publish the status list of the goal's server (with this goal in it, ACCEPTED)."""
    handle._action_server._handle.publish_status()


def server_key(handle: ServerGoalHandle) -> int:
    """The same for every goal of one action server."""
    return id(handle._action_server)


def announce_each_server(handles: list[ServerGoalHandle]) -> None:
    """One status message from each server that holds one of `handles`."""
    for handle in {server_key(h): h for h in handles}.values():
        announce(handle)


def start(handle: ServerGoalHandle) -> bool:
    """ACCEPTED -> EXECUTING, published. False if the goal is no longer ACCEPTED (a cancel came first)."""
    if handle.status != GoalStatus.STATUS_ACCEPTED:
        return False
    try:
        handle._update_state(GoalEvent.EXECUTE)
    except RCLError:  # a cancel moved it to CANCELING between the check and the transition
        return False
    return True


def deliver(handle: ServerGoalHandle, started: bool) -> None:
    """Run the server's execute callback for `handle` now (its call has ended)."""
    if started:
        handle._action_server.notify_execute(handle, None)  # already EXECUTING (or CANCELING): no second transition
    else:
        handle.execute()  # ACCEPTED -> EXECUTING first: rcl_action has no ACCEPTED -> ABORTED

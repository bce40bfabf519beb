"""Leases on streamed calls: a policy's motion never outlives the node that supervises it.

A leased RuntimeCall (LEASED_METHODS: the arm node's `run_joint_steps`, the vla_client_node's `run`)
runs only while its caller renews it. The caller's RuntimeProxy publishes a renewal on
`<action>/lease` every RENEW_S from the thread that waits for the call, so a caller that freezes
(SIGSTOP, a hung executor), dies or loses the network stops renewing. The serving node stops the call
when no renewal came for LEASE_S, as it stops a cancelled one (the call's cancel event and the
target's `stop()`); a caller that cancels also sends a release, which stops the call at once.

Renewals and releases are taken by a node of their own in the serving process, and one thread of its
own both takes them and judges the leases: the stop goes out from it without waiting behind the
serving node's executor, which may be busy with the very goals it would stop (a RuntimeCall's `stop`
is a goal like any other and queued behind them). It takes every renewal that has arrived before it
judges, so a process whose threads were held up (a loaded machine) does not count renewals that came
meanwhile as missing. The message is action_msgs/GoalInfo: the goal's id, and a stamp that is zero
for a release.

The lease runs on the robot's clock where the served runtime has one (an arm's `clock_s`: franky's
state time): what a lapse bounds is how far the arm moves unsupervised, and the arm moves in the
robot's time. On a real arm that is real time; franky-sim's runs slower on a loaded machine, where
the load that delays a renewal slows the simulation too (on the wall clock, a pick beside two busy
loops lapsed after "none for 0.24 s", its supervisor alive). Whatever the robot's clock reads, a
lease lapses after WALL_CEILING_S of this machine's; where the clock cannot be read (the link is
lost), after LEASE_S of this machine's.

A leased call made while serving a leased call (the vla_client_node's `run` sends the arm node each chunk
as a `run_joint_steps`) relays its own caller's lease instead of renewing on a timer: the chunk's lease
is renewed each time a renewal of the `run` arrives, and a chunk starts only once one arrived within
LEASE_S (nothing moves meanwhile). So the arm's lease, on the robot's clock, judges the whole chain: a
frozen or dead toolkit, or vla_client_node, stops the arm alike. The `run` has no robot clock of its
own; its own lease (a server made with `relays=True`) only ends a run whose caller has been silent
for WALL_CEILING_S (on the wall clock, a toolkit starved of the CPU for 0.22 s on a loaded machine
ended a pick whose arm, in franky-sim's slowed time, had moved for 0.11 s).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from action_msgs.msg import GoalInfo
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

log = logging.getLogger(__name__)

#: A leased call stops when its caller renewed nothing for this long.
LEASE_S = 0.2
#: ... and whatever the robot's clock reads, after this long on this machine's (a clock reading that stalled;
#: franky-sim's ran at 0.06-0.5x real time in a loaded dual-arm launch, docs/franka-vla.md).
WALL_CEILING_S = 5.0
#: How often a waiting caller renews: four renewals per lease, so one lost on the way costs nothing.
RENEW_S = 0.05
#: The calls that stream motion: they run only under a lease.
LEASED_METHODS = frozenset({"run_joint_steps", "run"})
# The watchdog sleeps until a renewal comes or the earliest lease could run out, and at most this long:
# less than LEASE_S, so a goal watched while it slept is judged in time. (It used to look every 10 ms:
# 4 % of a core in each serving node, idle or not, and a GIL the websocket reader and the step loop share.)
_IDLE_S = LEASE_S / 2
_PAST_S = 0.001  # wake just past a lease's end, so the judgement finds it ended
_TAKE_AT_ONCE = 50  # renewals taken in one go before the leases are judged (at most)
_QOS = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE)  # a release must not be lost


# When the leased call this thread serves was last renewed (monotonic s; None once it lapsed or ended),
# for the leased calls it makes in turn (RuntimeServer sets it, RuntimeProxy reads it).
_serving: ContextVar[Callable[[], float | None] | None] = ContextVar("rpent_serving_lease", default=None)


@contextmanager
def serving(renewed_at: Callable[[], float | None]) -> Iterator[None]:
    """The calling thread serves a leased call last renewed at `renewed_at()`."""
    token = _serving.set(renewed_at)
    try:
        yield
    finally:
        _serving.reset(token)


class Relay:
    """Passes the renewals of the leased call this thread serves on to a leased call it makes."""

    def __init__(self, renewed_at: Callable[[], float | None]) -> None:
        self._renewed_at = renewed_at
        self._passed = renewed_at()  # renewals from here on are passed on

    @classmethod
    def of_this_thread(cls) -> Relay | None:
        """The relay for a leased call made now, or None if this thread serves no leased call."""
        renewed_at = _serving.get()
        return cls(renewed_at) if renewed_at is not None else None

    def supervised(self) -> bool:
        """Its caller renewed within LEASE_S of this machine's clock: a new streamed call may start."""
        at = self._renewed_at()
        return at is not None and time.monotonic() - at < LEASE_S

    def ended(self) -> bool:
        """The served call's lease lapsed, was released, or the call ended."""
        return self._renewed_at() is None

    def due(self) -> bool:
        """A renewal came since the last one passed on (then it counts as passed on)."""
        at = self._renewed_at()
        if at is None or at == self._passed:
            return False
        self._passed = at
        return True


def lease_topic(action_name: str) -> str:
    """The lease topic of a RuntimeCall action (`/arm_left/left/call` -> `/arm_left/left/call/lease`)."""
    return f"{action_name.rstrip('/')}/lease"


class LeaseRenewer:
    """The caller's side: renewals and releases of its goals on one action's lease topic."""

    def __init__(self, node: Node, action_name: str) -> None:
        self._node = node
        self._publisher = node.create_publisher(GoalInfo, lease_topic(action_name), _QOS)

    def renew(self, goal_id: object) -> None:
        self._publisher.publish(GoalInfo(goal_id=goal_id, stamp=self._node.get_clock().now().to_msg()))

    def release(self, goal_id: object) -> None:
        """The caller is done with the goal (it cancels it): the serving node stops it at once."""
        self._publisher.publish(GoalInfo(goal_id=goal_id))


class LeaseWatch:
    """The serving side, for one RuntimeCall server: `on_lapse(key, why)` once for each watched goal whose
    lease ran out or was released, from a thread that does not wait for the serving node's executor.
    `clock` reads the robot's clock in seconds (None, or an exception, when it has none or cannot be read).
    `relays`: the calls served relay their lease to the streamed calls they make (see the module's doc);
    their own lease then lapses after WALL_CEILING_S of this machine's clock, and the relayed ones judge."""

    def __init__(self, node: Node, action_name: str, on_lapse: Callable[[bytes, str], None],
                 clock: Callable[[], float | None] | None = None, relays: bool = False) -> None:
        self._on_lapse = on_lapse
        self._clock = None if relays else clock
        self._lease_s = WALL_CEILING_S if relays else LEASE_S
        self._lock = threading.Lock()
        # watched goal -> when it was last renewed: (this machine's monotonic clock, the robot's clock or None)
        self._renewed: dict[bytes, tuple[float, float | None]] = {}
        self._released: set[bytes] = set()
        self._node = Node(f"{node.get_name()}_lease", namespace=node.get_namespace(), context=node.context,
                          start_parameter_services=False)
        self._node.create_subscription(GoalInfo, lease_topic(action_name), self._renewal, _QOS)
        self._executor = SingleThreadedExecutor(context=node.context)
        self._executor.add_node(self._node)
        self._running = True
        self._thread = threading.Thread(target=self._watch, name="rpent-lease", daemon=True)
        self._thread.start()

    def watch(self, key: bytes) -> None:
        """A leased goal starts: it has LEASE_S for its first renewal."""
        at = self._now()
        with self._lock:
            self._renewed[key] = at

    def renewed_at(self, key: bytes) -> float | None:
        """When the watched goal was last renewed (monotonic s, its start counts), None if it is not watched."""
        with self._lock:
            at = self._renewed.get(key)
        return at[0] if at is not None else None

    def forget(self, key: bytes) -> None:
        with self._lock:
            self._renewed.pop(key, None)
            self._released.discard(key)

    def _renewal(self, message: GoalInfo) -> None:
        key = bytes(message.goal_id.uuid)
        released = message.stamp.sec == 0 and message.stamp.nanosec == 0
        at = None if released else self._now()
        with self._lock:
            if key not in self._renewed:
                return  # not (or no longer) running here
            if at is None:
                self._released.add(key)
            else:
                self._renewed[key] = at
        if key in self._released:
            self._lapse(key, "released by its caller")

    def _watch(self) -> None:
        while self._running and self._node.context.ok():
            try:
                self._executor.spin_once(timeout_sec=self._sleep_s())
                lapsed = self._lapsed()
                if lapsed:  # first whatever else has arrived meanwhile (this thread was held up, say)
                    for _ in range(_TAKE_AT_ONCE):
                        self._executor.spin_once(timeout_sec=0.0)
                    lapsed = self._lapsed()
            except Exception:
                if not self._node.context.ok():
                    return  # the process is shutting down
                raise
            for key, silence in lapsed:
                self._lapse(key, f"its caller renewed its lease for {self._lease_s} s no more (none for {silence})")

    def _now(self) -> tuple[float, float | None]:
        robot = None
        if self._clock is not None:
            try:
                robot = self._clock()
            except Exception:
                robot = None  # unreadable (a lost link): this machine's clock judges
        return time.monotonic(), robot

    def _left(self, at: tuple[float, float | None], now: tuple[float, float | None]) -> tuple[float, str]:
        """How long the lease renewed at `at` has left at `now` (negative: lapsed), and the silence in words."""
        wall_s = now[0] - at[0]
        if at[1] is None or now[1] is None:
            return self._lease_s - wall_s, f"{wall_s:.2f} s"
        robot_s = now[1] - at[1]
        return (min(LEASE_S - robot_s, WALL_CEILING_S - wall_s),
                f"{robot_s:.2f} s of the robot's clock, {wall_s:.2f} s of this machine's")

    def _sleep_s(self) -> float:
        # The robot's clock runs at most as fast as this machine's: sleeping what is left of a lease on this
        # machine's clock never sleeps past its end.
        with self._lock:
            renewed = list(self._renewed.values())
        if not renewed:
            return _IDLE_S
        now = self._now()
        left = min(self._left(at, now)[0] for at in renewed)
        return min(_IDLE_S, max(0.0, left) + _PAST_S)

    def _lapsed(self) -> list[tuple[bytes, str]]:
        with self._lock:
            renewed = list(self._renewed.items())
        if not renewed:
            return []
        now = self._now()
        lapsed = []
        for key, at in renewed:
            left, silence = self._left(at, now)
            if left < 0:
                lapsed.append((key, silence))
        return lapsed

    def _lapse(self, key: bytes, why: str) -> None:
        with self._lock:
            if self._renewed.pop(key, None) is None:
                return  # lapsed once already
            self._released.discard(key)
        try:
            self._on_lapse(key, why)
        except Exception:
            log.exception("stopping a call whose lease lapsed failed")

    def close(self) -> None:
        self._running = False
        self._thread.join(5.0)
        self._executor.shutdown()
        self._node.destroy_node()

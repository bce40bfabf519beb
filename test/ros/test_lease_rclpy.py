"""A streamed call runs only under its caller's lease (rpent_ros/runtime/lease.py): a runtime node stops it
when its caller stops renewing, and at once when its caller cancels, past the node's busy executor.

The serving node runs on an executor of two threads of its own, as a runtime node's process does (node_main),
so a test can keep them busy; the caller is a RuntimeProxy, as in the toolkit and the vla_client_node.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from rpent_ros.runtime import lease
from rpent_ros.runtime.proxy import RemoteRuntimeError, RuntimeProxy
from rpent_ros.runtime.runtime_node import RuntimeNode
from rpent_ros.spinning import BackgroundSpin

from .goals import wait_until

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]

CONTROL_PERIOD_S = 1 / 15


class Streaming:
    """An arm whose `run_joint_steps` streams until stopped (its cancel event or stop()); `hold` keeps an
    executor thread of the serving node busy until released, as a long `wait` goal does."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped_at: float | None = None
        self._stop = threading.Event()
        self.holding = threading.Event()
        self.released = threading.Event()

    def run_joint_steps(self, cancel: threading.Event) -> dict[str, Any]:
        self._stop.clear()
        self.started.set()
        while not (cancel.is_set() or self._stop.wait(0.001)):
            pass
        return {"stopped": "stopped"}

    def hold(self) -> str:
        self.holding.set()
        self.released.wait(30)
        return "held"

    def stop(self) -> None:
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()
        self._stop.set()


class StreamingWithClock(Streaming):
    """... on a robot whose clock the test sets (franky-sim's on a loaded machine runs slower than real
    time, or stalls); None reads as a clock that cannot be read (a lost link)."""

    def __init__(self) -> None:
        super().__init__()
        self.robot_s: float | None = 0.0

    def clock_s(self) -> float:
        if self.robot_s is None:
            raise RuntimeError("lost connection to the robot")
        return self.robot_s


def serve(ros, target: Streaming):
    """(the target, a RuntimeProxy to it): the serving node spun by two threads of its own."""
    ros(Node("lease_rclpy_context_holder"))  # rclpy initialised by the `ros` fixture
    node = RuntimeNode("streamer")
    node.serve("arm", target, frozenset({"run_joint_steps", "hold", "stop"}))
    spin = BackgroundSpin(MultiThreadedExecutor(num_threads=2))
    spin.executor.add_node(node)
    proxy = RuntimeProxy(ros(Node("caller")), "/streamer/arm/call", "arm")
    proxy.wait_ready(30)
    try:
        yield target, proxy
    finally:
        target.released.set()
        node.shutdown()
        spin.stop()
        node.destroy_node()


@pytest.fixture
def streamer(ros):
    yield from serve(ros, Streaming())


@pytest.fixture
def streamer_with_clock(ros):
    yield from serve(ros, StreamingWithClock())


def start_call(proxy: RuntimeProxy, method: str, cancel: threading.Event) -> tuple[threading.Thread, dict[str, Any]]:
    """`method` called through `proxy` on a thread of its own; the outcome gets its result or its error."""
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["result"] = proxy.call(method, cancel=cancel)
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, outcome


def start_streaming(proxy: RuntimeProxy, cancel: threading.Event) -> tuple[threading.Thread, dict[str, Any]]:
    return start_call(proxy, "run_joint_steps", cancel)


def test_a_call_whose_caller_stops_renewing_is_stopped_within_the_lease(streamer, monkeypatch):
    target, proxy = streamer
    thread, outcome = start_streaming(proxy, threading.Event())
    assert target.started.wait(30)
    # Renewed, it runs on well past its lease.
    assert not thread.join(5 * lease.LEASE_S) and target.stopped_at is None
    renewals: list[float] = []
    renew = lease.LeaseRenewer.renew

    def frozen(self, goal_id):  # the caller freezes (SIGSTOP, a hung thread) after this renewal
        if not renewals:
            renewals.append(time.monotonic())
            renew(self, goal_id)

    monkeypatch.setattr(lease.LeaseRenewer, "renew", frozen)
    wait_until(lambda: target.stopped_at is not None, 10, "the call stopped")
    thread.join(10)
    lapsed_after = target.stopped_at - renewals[0]
    print(f"\nstopped {lapsed_after * 1000:.0f} ms after the last renewal (lease {lease.LEASE_S * 1000:.0f} ms)")
    assert lease.LEASE_S <= lapsed_after < lease.LEASE_S + 0.1, lapsed_after
    assert isinstance(outcome.get("error"), RemoteRuntimeError) and "renewed its lease" in str(outcome["error"]), outcome


def freeze_caller(monkeypatch, action: str | None = None) -> list[float]:
    """The caller (of `action`; of any if None) freezes (SIGSTOP, a hung thread) after its next renewal;
    the list gets its time."""
    renewals: list[float] = []
    renew = lease.LeaseRenewer.renew

    def frozen(self, goal_id):
        if action is not None and self._publisher.topic_name != lease.lease_topic(action):
            renew(self, goal_id)
        elif not renewals:
            renewals.append(time.monotonic())
            renew(self, goal_id)

    monkeypatch.setattr(lease.LeaseRenewer, "renew", frozen)
    return renewals


def test_a_lease_runs_on_the_robot_s_clock_where_the_runtime_has_one(streamer_with_clock, monkeypatch):
    """What a lapse bounds is how far the arm moves unsupervised, and it moves in the robot's time: a caller
    starved on a loaded machine, where franky-sim's clock slows as well, keeps its lease for LEASE_S of
    the robot's clock."""
    target, proxy = streamer_with_clock
    thread, outcome = start_streaming(proxy, threading.Event())
    assert target.started.wait(30)
    renewals = freeze_caller(monkeypatch)
    wait_until(lambda: renewals, 10, "the caller's last renewal")
    # The robot's clock stands still for twice the lease of this machine's: the call goes on.
    assert not thread.join(2 * lease.LEASE_S) and target.stopped_at is None
    advanced = time.monotonic()
    target.robot_s += 1.5 * lease.LEASE_S
    wait_until(lambda: target.stopped_at is not None, 10, "the call stopped")
    print(f"\nstopped {(target.stopped_at - advanced) * 1000:.0f} ms after the robot's clock passed the lease")
    thread.join(10)
    assert "of the robot's clock" in str(outcome.get("error")), outcome


def test_a_lease_lapses_on_this_machine_s_clock_when_the_robot_s_stalls_or_cannot_be_read(streamer_with_clock,
                                                                                          monkeypatch):
    target, proxy = streamer_with_clock
    for robot_s, bound_s in ((0.0, lease.WALL_CEILING_S), (None, lease.LEASE_S)):  # stalled, then unreadable
        target.robot_s, target.stopped_at = robot_s, None
        target.started.clear()
        monkeypatch.undo()
        thread, outcome = start_streaming(proxy, threading.Event())
        assert target.started.wait(30)
        renewals = freeze_caller(monkeypatch)
        wait_until(lambda: target.stopped_at is not None, 30, "the call stopped")
        thread.join(10)
        lapsed_after = target.stopped_at - renewals[0]
        print(f"\nrobot's clock {robot_s}: stopped {lapsed_after * 1000:.0f} ms after the last renewal")
        assert lapsed_after >= bound_s, (robot_s, lapsed_after)
        assert isinstance(outcome.get("error"), RemoteRuntimeError) and "renewed its lease" in str(outcome["error"])


def test_a_cancelled_call_is_stopped_within_a_control_period_while_the_node_s_executor_is_busy(streamer):
    """The caller's cancel also releases the lease: the stop goes out from the node's lease thread, not
    behind the goals that keep its executor busy (the cancel request itself waits for a free thread)."""
    target, proxy = streamer
    cancel = threading.Event()
    thread, outcome = start_streaming(proxy, cancel)
    assert target.started.wait(30)
    # The node's other executor thread held too: a cancel request now waits for a free thread.
    threading.Thread(target=proxy.call, args=("hold",), daemon=True).start()
    assert target.holding.wait(30)
    cancelled = time.monotonic()
    cancel.set()
    wait_until(lambda: target.stopped_at is not None, 10, "the call stopped")
    latency = target.stopped_at - cancelled
    print(f"\ncancel -> stop {latency * 1000:.1f} ms with the serving node's executor busy")
    assert latency < CONTROL_PERIOD_S, latency
    target.released.set()
    thread.join(10)
    assert "result" in outcome or isinstance(outcome.get("error"), RemoteRuntimeError), outcome


class Relaying:
    """A vla_client_node's `run`: once `infer` is set (its inference done), one chunk on the arm."""

    def __init__(self, arm: RuntimeProxy) -> None:
        self.arm = arm
        self.infer = threading.Event()
        self.infer.set()

    def run(self, cancel: threading.Event) -> dict[str, Any]:
        self.infer.wait(30)
        return self.arm.call("run_joint_steps", cancel=cancel)


@pytest.fixture
def relayed(ros):
    """(the arm, the relaying `run`, a RuntimeProxy to that run): caller -> relaying node -> arm node, each
    node on an executor of its own, as toolkit -> vla_client_node -> arm node."""
    arm_side = serve(ros, StreamingWithClock())
    target, _ = next(arm_side)
    node = RuntimeNode("relaying")
    relaying = Relaying(RuntimeProxy(node, "/streamer/arm/call", "arm"))
    node.serve("policy", relaying, frozenset({"run"}), relays=True)
    spin = BackgroundSpin(MultiThreadedExecutor(num_threads=2))
    spin.executor.add_node(node)
    proxy = RuntimeProxy(ros(Node("outer_caller")), "/relaying/policy/call", "policy")
    proxy.wait_ready(30)
    relaying.arm.wait_ready(30)
    try:
        yield target, relaying, proxy
    finally:
        relaying.infer.set()
        node.shutdown()
        spin.stop()
        node.destroy_node()
        next(arm_side, None)


def start_run(proxy: RuntimeProxy, cancel: threading.Event | None = None) -> tuple[threading.Thread, dict[str, Any]]:
    return start_call(proxy, "run", cancel or threading.Event())


def test_a_relayed_chunk_stops_on_the_robot_s_clock_when_the_supervisor_of_the_run_freezes(relayed, monkeypatch):
    """The toolkit -> vla_client_node lease has no robot clock: judged on this machine's, a toolkit starved of the
    CPU for 0.22 s on a loaded machine ended a pick (twice) whose arm had moved for 0.11 s in franky-sim's slowed
    time. The vla_client_node renews the chunk's lease on the arm as the toolkit renews its run, so the arm's lease
    judges the chain on the robot's clock."""
    target, _, proxy = relayed
    thread, outcome = start_run(proxy)
    assert target.started.wait(30)
    renewals = freeze_caller(monkeypatch, "/relaying/policy/call")  # the toolkit freezes; its vla node runs on
    wait_until(lambda: renewals, 10, "the supervisor's last renewal")
    # The robot's clock stands still for twice the lease of this machine's: the arm goes on.
    assert not thread.join(2 * lease.LEASE_S) and target.stopped_at is None
    advanced = time.monotonic()
    target.robot_s += 1.5 * lease.LEASE_S
    wait_until(lambda: target.stopped_at is not None, 10, "the arm stopped")
    print(f"\nthe arm stopped {(target.stopped_at - advanced) * 1000:.0f} ms after the robot's clock passed the lease")
    thread.join(10)
    assert "of the robot's clock" in str(outcome.get("error")), outcome


def test_a_chunk_starts_only_once_the_supervisor_of_the_run_renewed(relayed, monkeypatch):
    """A supervisor that froze during an inference never sees the arm move again: the next chunk waits for a
    renewal (the arm at rest meanwhile), and the run ends when its own lease runs out (WALL_CEILING_S)."""
    target, relaying, proxy = relayed
    relaying.infer.clear()
    thread, outcome = start_run(proxy)
    renewals = freeze_caller(monkeypatch, "/relaying/policy/call")
    wait_until(lambda: renewals, 10, "the supervisor's last renewal")
    assert not thread.join(2 * lease.LEASE_S)  # its last renewal is older than a lease now
    relaying.infer.set()
    thread.join(lease.WALL_CEILING_S + 10)
    assert not thread.is_alive() and not target.started.is_set(), outcome
    assert "renewed its lease" in str(outcome.get("error")), outcome


def test_a_relayed_chunk_stops_at_once_when_the_supervisor_of_the_run_cancels(relayed):
    target, _, proxy = relayed
    cancel = threading.Event()
    thread, outcome = start_run(proxy, cancel)
    assert target.started.wait(30)
    cancelled = time.monotonic()
    cancel.set()
    wait_until(lambda: target.stopped_at is not None, 10, "the arm stopped")
    print(f"\ncancel of the run -> the arm's stop {(target.stopped_at - cancelled) * 1000:.1f} ms")
    thread.join(10)
    assert not thread.is_alive() and ("result" in outcome or isinstance(outcome.get("error"), RemoteRuntimeError))

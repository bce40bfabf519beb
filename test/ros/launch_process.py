"""`ros2 launch` and `graph_client.py` as subprocesses, for the tests of who may reach a launch's nodes.

`prefix` runs a command somewhere else (`ip netns exec NS`); every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECURITY_VARIABLES = ("ROS_SECURITY_ENABLE", "ROS_SECURITY_STRATEGY", "ROS_SECURITY_KEYSTORE",
                      "ROS_SECURITY_ENCLAVE_OVERRIDE")


def environment(*, secured_by: Path | None = None, unset: Sequence[str] = (), **values: str) -> dict[str, str]:
    """This process's environment without any security setting, then `secured_by`'s (Enforce) and `values`."""
    env = {k: v for k, v in os.environ.items() if k not in SECURITY_VARIABLES and k not in unset}
    if secured_by is not None:
        env.update(ROS_SECURITY_ENABLE="true", ROS_SECURITY_STRATEGY="Enforce", ROS_SECURITY_KEYSTORE=str(secured_by))
    env.update(values)
    return env


def make_keystore(directory: Path, *extra: str) -> Path:
    """`rpent ros-security init DIR` as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "rpent", "ros-security", "init", str(directory), *extra],
                          capture_output=True, text=True, timeout=180, env=environment())
    assert done.returncode == 0, done.stdout + done.stderr
    return directory


class Launch:
    """`ros2 launch rpent <file> args...` in its own process group, its output in `log`.

    It runs in a session of its own unless `own_session` is False. Linux's scheduler groups a session's
    processes (autogroup): a launch in a session of its own gets one session's share of the CPU beside
    this process's session, however many processes it runs. A benchmark that compares a launch's node
    with a process of its own needs both in one session, or it measures the grouping."""

    def __init__(self, launch_file: str, *args: str, log: Path, env: Mapping[str, str],
                 prefix: Sequence[str] = (), own_session: bool = True) -> None:
        self.log = log
        group = {"start_new_session": True} if own_session else {"process_group": 0}
        self.proc = subprocess.Popen([*prefix, "ros2", "launch", "rpent", launch_file, *args], env=dict(env),
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
                                     **group)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pause = threading.Event()
        while time.monotonic() < deadline:
            if text in self.text():
                return
            if self.proc.poll() is not None:
                break
            pause.wait(0.5)
        raise AssertionError(f"no {text!r} in the launch's output within {timeout_s} s:\n{self.text()[-6000:]}")

    def pid_of(self, node_name: str) -> int:
        """The process of the launch's node `node_name` (its command line remaps `__node:=<name>`)."""
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if os.getpgid(int(entry.name)) == self.proc.pid and f"__node:={node_name}".encode() in argv:
                    return int(entry.name)
            except (OSError, ProcessLookupError):
                continue
        raise AssertionError(f"no process of node {node_name} in the launch")

    def wait_exit(self, timeout_s: float) -> int:
        return self.proc.wait(timeout_s)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def client(mode: str, target: str, *rest: str, env: Mapping[str, str], enclave: str | None = None,
           name: str = "graph_client", timeout_s: float = 15.0, prefix: Sequence[str] = (),
           options: Sequence[str] = ()) -> dict:
    """Run graph_client.py; its JSON report."""
    ros_args = ["--ros-args", "--enclave", enclave] if enclave else []
    done = subprocess.run([*prefix, sys.executable, str(HERE / "graph_client.py"), mode, target, *rest,
                           "--timeout", str(timeout_s), "--name", name, *options, *ros_args],
                          capture_output=True, text=True, env=dict(env), timeout=timeout_s + 60)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"graph_client {mode} {target} reported nothing (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return json.loads(lines[-1])


def clients_at_once(*calls: Mapping) -> list[dict]:
    """Run several graph_client.py processes at once (each call a mapping of `client`'s arguments, its
    positional ones under "args"); their reports in the order given. For the checks that something does
    NOT happen: each waits out its whole timeout, and they are independent of each other."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(client, *call["args"], **{k: v for k, v in call.items() if k != "args"})
                   for call in calls]
        return [future.result() for future in futures]


class JointRecord:
    """The simulator's own record of both arms' joints (franka_sim_node's joint_record parameter)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lines: list[dict] = []
        self._read = 0  # bytes of the file parsed into _lines (whole lines only)

    def lines(self) -> list[dict]:
        """Every record so far (50 a second: only what was appended since the last look is parsed)."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as file:
            file.seek(self._read)
            chunk = file.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self._read += len(whole)
        self._lines += [json.loads(line) for line in whole.splitlines() if line.strip()]
        return self._lines  # appended to, never changed: callers only read it

    def turning(self, arm: str, joint: int, since: float, rad_s: float) -> bool:
        """The last two records, both made after `since` (wall time), show `arm`'s `joint` turning faster than
        `rad_s` on the simulator's clock."""
        lines = self.lines()[-2:]
        if len(lines) < 2 or lines[0]["t"] <= since or lines[1]["sim_s"] <= lines[0]["sim_s"]:
            return False
        turned = lines[1]["arms"][arm][joint] - lines[0]["arms"][arm][joint]
        return abs(turned) / (lines[1]["sim_s"] - lines[0]["sim_s"]) > rad_s

    def rest_after(self, arm: str, pressed: float, *, ended: bool = False) -> tuple[float, float] | None:
        """(robot seconds, wall seconds) from the wall-clock moment `pressed` until `arm` is at rest, judged on
        the simulator's own clock (wall time `t`, simulated time `sim_s`) from its true joint velocities `dq`:
        the first record from which on, for at least 0.5 robot seconds, every joint is at rest as franky
        judges it (robots.franka.hardware.franky_arm.at_rest). None until it has come to rest.

        The robot's clock, because franky-sim runs below real time here (two simulated arms need about 1.4
        cores at real time: FACTS.md), so a stop and the arm's deceleration take longer on the wall clock
        than on the robot's; on a real arm the two clocks are one.

        `ended`: the simulator has stopped recording (a killed node ends its launch: launch_helpers'
        end_when_one_dies), so a run of records at rest up to the record's end counts from 0.1 robot
        seconds on; a slow simulator may record less than 0.5 s of the rest before the launch stops it."""
        from robots.franka.hardware.franky_arm import at_rest

        # From the record before `pressed` on (a test polls this 50 records a second into its run).
        lines = self.lines()
        first = next((i for i in range(len(lines) - 1, -1, -1) if lines[i]["t"] <= pressed), 0)
        samples = [(r["t"], r["sim_s"], at_rest(r["dq"][arm])) for r in lines[first:]]
        before = [s for s in samples if s[0] <= pressed]
        after = [s for s in samples if s[0] > pressed]
        if not before or not after:
            return None
        (t0, sim0, _), (t1, sim1, _) = before[-1], after[0]
        pressed_sim = sim0 + (sim1 - sim0) * (pressed - t0) / (t1 - t0)
        resting_from = None  # the first record of the last unbroken run of records at rest
        for i, (_, _, rest) in enumerate(samples):
            if not rest:
                resting_from = None
            elif resting_from is None:
                resting_from = i
        if resting_from is None:
            return None
        t, sim, _ = samples[resting_from]
        if samples[-1][1] - sim < (0.1 if ended else 0.5):
            return None  # not at rest for long enough yet (a nod's reversal passes through rest)
        sim = max(sim, pressed_sim)
        return sim - pressed_sim, max(t, pressed) - pressed

    def largest_change(self, since: float) -> float:
        """The largest joint change (rad) of any arm between the first record at or after `since` and any later one."""
        records = [r for r in self.lines() if r["t"] >= since]
        assert len(records) >= 2, f"the simulator recorded no joints after {since} ({len(self.lines())} records)"
        first = records[0]["arms"]
        return max(abs(q - q0) for r in records for arm, qs in r["arms"].items() for q, q0 in zip(qs, first[arm], strict=True))

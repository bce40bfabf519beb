"""Who on the network reaches a launch: two hosts of the test's own (network namespaces joined by a veth
pair), the launch on one, a client on the other.

Closed by default: without network:=subnet the other host sees nothing. With network:=subnet and no
security it can move the simulated arm (the threat, shown); with security:=true it cannot, while a
node of the lab's keystore on that host still can. Cyclone DDS picks the veth itself in each
namespace (CYCLONEDDS_URI unset there), as on a lab machine. Needs root and iproute2's `ip`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
if shutil.which("ros2") is None:
    pytest.skip("the ros2 command is not on PATH", allow_module_level=True)
if os.geteuid() != 0 or shutil.which("ip") is None:
    pytest.skip("network namespaces need root and iproute2's ip", allow_module_level=True)

from .launch_process import JointRecord, Launch, client, clients_at_once, environment, make_keystore

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(900)]
MOVE = json.dumps({"arm": "left", "dz_m": 0.02})
# Inside each namespace: its own loopback, Cyclone on whatever interface it finds (the veth).
HOST_ENV = {"unset": ("CYCLONEDDS_URI",), "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def hosts():
    """Two namespaces, robot (10.231.x.1) and laptop (10.231.x.2), on one veth link of their own."""
    tag = uuid.uuid4().hex[:6]
    robot, laptop = f"rpent-robot-{tag}", f"rpent-laptop-{tag}"
    subnet = 100 + int(tag, 16) % 100
    _ip("netns", "add", robot)
    _ip("netns", "add", laptop)
    try:
        _ip("link", "add", f"vr{tag}", "type", "veth", "peer", "name", f"vl{tag}")
        _ip("link", "set", f"vr{tag}", "netns", robot)
        _ip("link", "set", f"vl{tag}", "netns", laptop)
        for ns, dev, address in ((robot, f"vr{tag}", f"10.231.{subnet}.1/24"), (laptop, f"vl{tag}", f"10.231.{subnet}.2/24")):
            _ip("-n", ns, "addr", "add", address, "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield {"robot": ["ip", "netns", "exec", robot], "laptop": ["ip", "netns", "exec", laptop]}
    finally:
        subprocess.run(["ip", "netns", "delete", robot], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "delete", laptop], capture_output=True, timeout=30)


def _launch(hosts, tmp_path, *args: str) -> tuple[Launch, JointRecord]:
    record = JointRecord(tmp_path / "joints.jsonl")
    launch = Launch("dual_franka.launch.py", "use_sim:=true", "sim_hosts:=127.0.0.1,127.0.0.2",
                    f"output_dir:={tmp_path / 'run'}", f"sim_joint_record:={record.path}", *args,
                    log=tmp_path / "launch.log", env=environment(unset=("CYCLONEDDS_URI",)), prefix=hosts["robot"])
    launch.wait_for("tools served", 240)
    return launch, record


def _from_laptop(hosts, mode: str, target: str, *rest: str, secured_by=None, **kwargs) -> dict:
    env = environment(secured_by=secured_by, **HOST_ENV)
    return client(mode, target, *rest, env=env, prefix=hosts["laptop"], **kwargs)


def test_by_default_another_host_does_not_see_the_launch(hosts, tmp_path):
    launch, _ = _launch(hosts, tmp_path)
    try:
        # On the robot's own host the toolkit answers: the launch is up.
        local = client("discover", "/toolkit/call_tool", env=environment(unset=("CYCLONEDDS_URI",)),
                       prefix=hosts["robot"], timeout_s=30)
        assert local == {"found": True}
        assert _from_laptop(hosts, "discover", "/toolkit/call_tool", timeout_s=20) == {"found": False}
    finally:
        launch.stop()


def test_with_network_subnet_and_no_security_another_host_moves_the_arm(hosts, tmp_path):
    launch, record = _launch(hosts, tmp_path, "network:=subnet")
    try:
        assert "reachable from other machines (ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET) without DDS security" in launch.text()
        assert "security:=true keystore:=DIR" in launch.text()
        started = time.time()
        report = _from_laptop(hosts, "call", "move_by", MOVE, timeout_s=60)
        assert report.get("ok") is True, report
        assert record.largest_change(started) > 0.005  # the threat: a stranger's laptop moved the arm
    finally:
        launch.stop()


def test_with_network_subnet_and_security_only_the_lab_s_keystore_reaches_the_arm(hosts, tmp_path):
    keystore = make_keystore(tmp_path / "keystore")
    launch, record = _launch(hosts, tmp_path, "network:=subnet", "security:=true", f"keystore:={keystore}")
    try:
        assert "without DDS security" not in launch.text()
        started = time.time()
        # Two stranger's clients, at once: each waits its whole 20 s for what never appears.
        laptop = {"env": environment(**HOST_ENV), "prefix": hosts["laptop"], "timeout_s": 20}
        found, refused = clients_at_once({"args": ("discover", "/toolkit/call_tool"), **laptop},
                                         {"args": ("call", "move_by", MOVE), **laptop})
        assert found == {"found": False}
        assert "did not appear" in refused.get("exception", ""), refused
        assert record.largest_change(started) < 1e-3
        # The lab's own planner on that host, with the lab's keystore, is let in.
        report = _from_laptop(hosts, "call", "move_by", MOVE, secured_by=keystore, enclave="/rpent/planner",
                              name="planner", timeout_s=60)
        assert report.get("ok") is True, report
    finally:
        launch.stop()

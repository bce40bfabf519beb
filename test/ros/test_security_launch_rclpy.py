"""`ros2 launch rpent dual_franka.launch.py use_sim:=true security:=true keystore:=DIR`: the arms obey
only the lab's own nodes (SROS2, Enforce, an enclave per node, the shipped policy).

One secured launch serves the module. Every client is a process of its own (graph_client.py, the
stock `ros2` command, `ros2 run rpent planner_node`), secured or not as each case says, and what
moved is read from franky-sim's own joint record, not from the ROS graph.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
pytest.importorskip("sros2", reason="sros2 not importable: ROS 2 is not sourced")
if shutil.which("ros2") is None:
    pytest.skip("the ros2 command is not on PATH", allow_module_level=True)

from sim_process import free_sim_hosts

from .launch_process import JointRecord, Launch, client, clients_at_once, environment, make_keystore

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(600)]
STILL_RAD = 1e-3  # the simulated arms at rest move less than this (their PD hold)
MOVE = json.dumps({"arm": "left", "dz_m": 0.02})
# The secured launch and every client of this module meet on a ROS domain of their own: an unsecured
# /toolkit/call_tool that another test of the session left on the suite's domain (its in-process nodes
# live as long as pytest) would otherwise be "discovered" by the unsecured client and fail the case for
# the wrong reason. Security, not the domain, is what each case tests: within the domain nothing differs.
# The keystores are made for it (sros2 writes the domain into the governance, which refuses any other).
DOMAIN = str((int(os.environ.get("ROS_DOMAIN_ID", "0")) + 101) % 233)


def domain_env(**values: object) -> dict[str, str]:
    """launch_process.environment on this module's own domain."""
    return environment(**values, ROS_DOMAIN_ID=DOMAIN)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    base = tmp_path_factory.mktemp("secured")
    keystore = make_keystore(base / "keystore", "--domain-id", DOMAIN)
    record = JointRecord(base / "joints.jsonl")
    launch = Launch("dual_franka.launch.py", "use_sim:=true", f"sim_hosts:={','.join(free_sim_hosts(200, 224, 2))}",
                    f"output_dir:={base / 'run'}", f"sim_joint_record:={record.path}", "security:=true",
                    f"keystore:={keystore}", log=base / "launch.log", env=domain_env())
    try:
        launch.wait_for("tools served", 240)
        yield {"base": base, "keystore": keystore, "record": record, "launch": launch,
               "secured": domain_env(secured_by=keystore)}
    finally:
        launch.stop()
        print(launch.text()[-5000:])  # shown by pytest when a test failed


def steps(secured) -> int:
    path = secured["base"] / "run" / "steps.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_planner_in_its_enclave_runs_a_task_through_the_toolkit(secured, tmp_path):
    recipe = tmp_path / "lift.jsonl"
    recipe.write_text(json.dumps({"tool": "move_by", "arguments": {"arm": "left", "dz_m": 0.03}}) + "\n"
                      + json.dumps({"tool": "finish", "arguments": {"status": "success", "summary": "Lifted 3 cm."}}) + "\n")
    started = time.time()
    done = subprocess.run(
        ["ros2", "run", "rpent", "planner_node", "--ros-args", "--enclave", "/rpent/planner", "-p", "robot:=dual_franka",
         "-p", "planner:=replay", "-p", f"recipe:={recipe}", "-p", f"output_dir:={tmp_path / 'planner'}"],
        env=secured["secured"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "planner" / "result.json").read_text())
    # The replay stops at a failed call without a finish: result.json's stop_reason names the call.
    assert (result.get("finish_result") or {}).get("status") == "success", result
    assert secured["record"].largest_change(started) > 0.01  # the left arm really moved


def test_a_node_without_security_neither_discovers_the_toolkit_nor_reaches_it(secured):
    before, started = steps(secured), time.time()
    # The stock CLI, unsecured, waits for a server it never finds: its goal is never sent. It waits
    # beside the discovering client, not after it: both wait out their whole 15 s.
    cli = subprocess.Popen(["ros2", "action", "send_goal", "/toolkit/call_tool", "rpent/action/CallTool",
                            f"{{tool: move_by, arguments_json: '{MOVE}'}}"], env=domain_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    report = client("discover", "/toolkit/call_tool", env=domain_env(), timeout_s=15)
    assert report == {"found": False}
    try:
        out, _ = cli.communicate(timeout=max(1.0, 15 - (time.time() - started)))
    except subprocess.TimeoutExpired:
        cli.kill()
        out, _ = cli.communicate()
    assert "Waiting for an action server" in out and "Goal accepted" not in out, out
    assert steps(secured) == before
    assert secured["record"].largest_change(started) < STILL_RAD


def test_the_monitor_enclave_reads_telemetry_but_its_goal_is_refused(secured):
    started = time.time()
    report = client("listen", "/joint_states,/tf", env=secured["secured"], enclave="/rpent/monitor",
                    name="monitor_probe", timeout_s=30)
    assert report["counts"]["/joint_states"] >= 3 and report["counts"]["/tf"] >= 3, report
    before = steps(secured)
    # Its permissions hold no action: the stock CLI (its enclave named as the ros2 command takes it)
    # cannot even make the client of /toolkit/call_tool.
    monitor = domain_env(secured_by=secured["keystore"], ROS_SECURITY_ENCLAVE_OVERRIDE="/rpent/monitor")
    done = subprocess.run(["ros2", "action", "send_goal", "/toolkit/call_tool", "rpent/action/CallTool",
                           f"{{tool: move_by, arguments_json: '{MOVE}'}}"], env=monitor, capture_output=True, text=True,
                          timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "Goal accepted" not in out, out
    assert "failed to create" in out, out
    report = client("call", "move_by", MOVE, env=secured["secured"], enclave="/rpent/monitor", name="monitor_probe")
    assert "exception" in report and "failed to create" in report["exception"], report
    assert steps(secured) == before
    assert secured["record"].largest_change(started) < STILL_RAD


def test_a_certificate_from_another_keystore_is_refused(secured, tmp_path):
    other = make_keystore(tmp_path / "other-keystore", "--domain-id", DOMAIN)
    started = time.time()
    # Two of its clients at once: each waits its whole 15 s for what never appears.
    # The same node name: the planner enclave's permissions name the planner's node.
    stranger = {"env": domain_env(secured_by=other), "enclave": "/rpent/planner", "name": "planner", "timeout_s": 15}
    found, refused = clients_at_once({"args": ("discover", "/toolkit/call_tool"), **stranger},
                                     {"args": ("call", "move_by", MOVE), **stranger})
    assert found == {"found": False}
    assert "did not appear" in refused.get("exception", ""), refused
    assert secured["record"].largest_change(started) < STILL_RAD


def test_the_planner_latches_the_stop_but_only_the_dashboard_releases_it(secured):
    planner = {"env": secured["secured"], "enclave": "/rpent/planner", "name": "planner"}
    dashboard = {"env": secured["secured"], "enclave": "/rpent/dashboard", "name": "dashboard"}
    stopped = client("trigger", "/toolkit/stop", **planner, timeout_s=30)
    try:
        assert stopped.get("success") is True and stopped["message"].endswith("an operator must release it"), stopped
        started = time.time()
        refused = client("call", "move_by", MOVE, **planner, timeout_s=60)
        assert refused.get("ok") is False and refused["error"] == stopped["message"], refused
        assert secured["record"].largest_change(started) < STILL_RAD
        # Its permissions hold no release: it cannot even make the service's client.
        denied = client("trigger", "/toolkit/release_stop", **planner, timeout_s=15)
        assert "failed to create" in denied.get("exception", ""), denied
        assert client("call", "move_by", MOVE, **planner, timeout_s=60)["error"] == stopped["message"]
    finally:
        released = client("trigger", "/toolkit/release_stop", **dashboard, timeout_s=30)
    assert released.get("success") is True, released
    started = time.time()
    moved = client("call", "move_by", MOVE, **planner, timeout_s=60)
    assert moved.get("ok") is True, moved
    assert secured["record"].largest_change(started) > 0.005
    # In the record of the task the toolkit serves (a planner's task may have opened a fresh one).
    events = [json.loads(line) for path in sorted((secured["base"] / "run").rglob("stop_events.jsonl"))
              for line in path.read_text().splitlines()]
    assert [(e["event"], e["by"]) for e in events] == [("stop", "ROS /toolkit/stop"),
                                                      ("release", "ROS /toolkit/release_stop")]


def test_the_secured_launch_started_each_node_in_its_own_enclave(secured):
    text = secured["launch"].text()
    for enclave in ("launch", "toolkit", "arm_left", "arm_right", "gripper_left", "gripper_right", "franka_sim"):
        assert f"Found security directory: {secured['keystore']}/enclaves/rpent/{enclave}" in text, enclave

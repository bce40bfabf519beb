"""The shipped SROS2 policy, and what a node or launch does with a keystore it cannot use: one line naming
the file, before anything starts, never a silent fall-back to no security."""

from __future__ import annotations

import datetime
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("sros2", reason="sros2 not importable: ROS 2 is not sourced")
if shutil.which("ros2") is None:
    pytest.skip("the ros2 command is not on PATH", allow_module_level=True)

from rpent_ros.security.deployments import BUNDLED, policy_for
from rpent_ros.security.keystore import SecurityConfigError, check_enclave

from .launch_process import Launch, environment, make_keystore

pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def keystore(tmp_path_factory):
    return make_keystore(tmp_path_factory.mktemp("keystore") / "keystore")


def _grants(enclave: str) -> dict[str, set[str]]:
    """mode -> names of one enclave of the shipped policy."""
    policy = ET.parse(ROOT / "config" / "security" / "policy.xml").getroot()
    [element] = [e for e in policy.iter("enclave") if e.get("path") == enclave]
    grants: dict[str, set[str]] = {}
    for group in element.iter():
        for mode, value in group.attrib.items():
            if value == "ALLOW":
                grants.setdefault(mode, set()).update(child.text for child in group)
    return grants


def test_the_shipped_policy_is_the_one_the_bundled_deployments_make():
    shipped = (ROOT / "config" / "security" / "policy.xml").read_text()
    assert policy_for(BUNDLED) == shipped, "regenerate: rpent ros-security policy --bundled > config/security/policy.xml"


def test_only_the_toolkit_calls_the_arms_and_only_the_lab_s_clients_call_the_toolkit():
    policy = ET.parse(ROOT / "config" / "security" / "policy.xml").getroot()
    enclaves = [e.get("path") for e in policy.iter("enclave")]
    arm_calls = {"/arm_left/left/call", "/arm_right/right/call", "/arm_arm/arm/call"}
    for enclave in enclaves:
        calls = _grants(enclave).get("call", set())
        if enclave == "/rpent/toolkit":
            assert arm_calls <= calls
        elif enclave.startswith("/rpent/vla_"):  # a policy node drives its own arm only
            arm = enclave.removeprefix("/rpent/vla_")
            assert calls & arm_calls == {f"/arm_{arm}/{arm}/call"}, (enclave, calls)
        else:
            assert not calls & arm_calls, (enclave, calls)
        toolkit_goal = "/toolkit/call_tool" in calls
        assert toolkit_goal == (enclave in ("/rpent/planner", "/rpent/dashboard", "/rpent/mcp_bridge")), enclave
    monitor = _grants("/rpent/monitor")
    assert set(monitor) == {"publish", "subscribe", "reply"}  # no request, call or execute
    assert monitor["publish"] == {"/rosout", "/parameter_events"}
    assert {"/joint_states", "/tf", "/tf_static", "/diagnostics", "/*/image_raw", "/keep_out_zones"} <= monitor["subscribe"]
    own = {"describe_parameters", "get_parameter_types", "get_parameters", "list_parameters", "set_parameters",
           "set_parameters_atomically", "get_type_description"}  # each node's own parameter and type services
    assert {name.rsplit("/", 1)[1] for name in monitor["reply"]} == own | {"reset_time"}, monitor["reply"]
    # ... and rviz's own Reset button (rviz serves reset_time), for rviz only
    assert {name for name in monitor["reply"] if name.endswith("/reset_time")} == {"/rviz*/reset_time"}
    # Keep-out zones come from the arm nodes (and the toolkit, with the arms in process), no one else.
    publishing_zones = {e for e in enclaves if "/keep_out_zones" in _grants(e).get("publish", set())}
    assert publishing_zones == {"/rpent/toolkit", "/rpent/arm_left", "/rpent/arm_right", "/rpent/arm_arm"}


def test_a_missing_enclave_stops_the_launch_before_any_node_starts(keystore, tmp_path):
    broken = tmp_path / "keystore"
    shutil.copytree(keystore, broken, symlinks=True)
    shutil.rmtree(broken / "enclaves" / "rpent" / "arm_left")
    launch = Launch("dual_franka.launch.py", "use_sim:=true", "security:=true", f"keystore:={broken}",
                    f"output_dir:={tmp_path / 'run'}", log=tmp_path / "launch.log", env=environment())
    try:
        code = launch.wait_exit(120)
    finally:
        launch.stop()
    text = launch.text()
    assert code != 0, text
    assert f"enclave /rpent/arm_left: {broken}/enclaves/rpent/arm_left/cert.pem is missing" in text, text
    assert "process started" not in text, text


def test_security_without_a_keystore_is_refused_at_launch(tmp_path):
    launch = Launch("franka.launch.py", "use_sim:=true", "security:=true", log=tmp_path / "launch.log",
                    env=environment())  # and no ROS_SECURITY_KEYSTORE to fall back on
    try:
        code = launch.wait_exit(120)
    finally:
        launch.stop()
    assert code != 0 and "launch argument keystore: required with security:=true" in launch.text(), launch.text()
    assert "process started" not in launch.text()


def _node_by_hand(keystore: Path, enclave: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["ros2", "run", "rpent", "toolkit_node", "--ros-args", "--enclave", enclave, "-p", "robot:=toy",
                           "-p", f"output_dir:={tmp_path / 'run'}"],
                          env=environment(secured_by=keystore), capture_output=True, text=True, timeout=120)


def test_a_node_started_by_hand_in_an_enclave_the_keystore_lacks_exits_2_naming_the_file(keystore, tmp_path):
    done = _node_by_hand(keystore, "/rpent/nobody", tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"toolkit_node: enclave /rpent/nobody: {keystore}/enclaves/rpent/nobody/cert.pem is missing (an enclave the "
        f"keystore's policy lacks: add the node to the policy, then rpent ros-security init {keystore} --policy FILE)"]
    assert not (tmp_path / "run").exists()  # nothing started


def _expired_certificate(path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "/rpent/toolkit")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=30))
            .not_valid_after(now - datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    path.unlink()
    path.write_bytes(cert.public_bytes(Encoding.PEM))


def test_an_expired_certificate_is_refused_naming_it(keystore, tmp_path):
    expired = tmp_path / "keystore"
    shutil.copytree(keystore, expired, symlinks=True)
    cert = expired / "enclaves" / "rpent" / "toolkit" / "cert.pem"
    _expired_certificate(cert)
    with pytest.raises(SecurityConfigError, match=r"certificate .*/enclaves/rpent/toolkit/cert.pem expired on"):
        check_enclave(expired, "/rpent/toolkit")
    done = _node_by_hand(expired, "/rpent/toolkit", tmp_path)
    assert done.returncode == 2 and "cert.pem expired on" in done.stderr, done.stdout + done.stderr

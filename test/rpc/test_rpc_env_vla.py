"""Env and VLA over RPC: typed clients, argument checks, and the scripted reference policy."""

from __future__ import annotations

import numpy as np
import pytest
from rpc_fixtures import PointReachEnv, running

from rpent.rpc import RpcRemoteError
from rpent.rpc.facades.env import BaseEnvClient
from rpent.rpc.facades.reference_vla import ReferenceVLAFacade, ScriptedReachPolicy
from rpent.rpc.facades.vla import BaseVLAClient, BaseVLAFacade
from rpent.runtime.env import Env, Policy, StepResult

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["http", "socket"])
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param


def test_env_client_is_an_env_and_drives_the_remote_simulator(protocol: str) -> None:
    env = PointReachEnv()
    with running(env, f"{protocol}://127.0.0.1:0") as server, BaseEnvClient(server.endpoint) as client:
        assert isinstance(client, Env)
        obs = client.reset(seed=3)
        assert np.allclose(obs["robot0_eef_pos"], env.eef) and obs["agentview_image"].dtype == np.uint8
        result = client.step(np.array([1.0, 0, 0, 0, 0, 0, -1]))
        assert isinstance(result, StepResult) and result.info == {"steps": 1} and result.done is False
        assert np.isclose(result.observation["robot0_eef_pos"][0], obs["robot0_eef_pos"][0] + 0.05)
        assert client.cameras() == ["agentview", "wrist"]
        frame = client.render("wrist", width=16, height=8)
        assert frame.shape == (8, 16, 3) and frame[0, 0, 1] == 200
        assert client.success() is False


@pytest.mark.parametrize(
    ("action", "rule"),
    [
        ([0.1] * 6, "action: must have 7 components, got 6"),
        ([[0.1] * 7], "action: must be 1-D"),
        ([0, 0, float("nan"), 0, 0, 0, 1], "must be finite"),
    ],
)
def test_bad_actions_are_refused_naming_the_field_before_the_simulator_steps(action: list, rule: str) -> None:
    env = PointReachEnv()
    with running(env, "socket://127.0.0.1:0") as server, BaseEnvClient(server.endpoint) as client:
        client.reset()
        with pytest.raises((RpcRemoteError, ValueError), match=rule):
            client.step(action)
        # Sent raw, past the client's own check, the server refuses it the same way.
        with pytest.raises(RpcRemoteError, match=rule):
            client.call("step", [np.asarray(action)])
    assert env.steps == 0


def test_render_of_an_unknown_camera_names_the_available_ones() -> None:
    with running(PointReachEnv(), "http://127.0.0.1:0") as server, BaseEnvClient(server.endpoint) as client:
        with pytest.raises(RpcRemoteError, match="camera: 'top' is not one of 'agentview', 'wrist'"):
            client.render("top")
        with pytest.raises(RpcRemoteError, match="width: must be an integer from 1 to 4096"):
            client.render("wrist", width=0)


def test_scripted_policy_reaches_toward_the_target_and_closes_when_near() -> None:
    policy = ScriptedReachPolicy(metres_per_unit=0.05, grasp_radius_m=0.02)
    assert isinstance(policy, Policy)
    far = policy.predict({"robot0_eef_pos": np.zeros(3), "target_pos": np.array([0.5, -0.01, 0.0])}, "reach")
    assert far.shape == (1, 7) and far.dtype == np.float32
    assert far[0, 0] == 1.0 and np.isclose(far[0, 1], -0.2) and far[0, 6] == -1.0  # saturated x, open
    near = policy.predict({"robot0_eef_pos": np.zeros(3), "target_pos": np.array([0.01, 0, 0])}, "reach")
    assert near[0, 6] == 1.0
    away = policy.predict({"robot0_eef_pos": np.zeros(3), "target_pos": np.array([0.3, 0, 0])}, "reach")
    assert away[0, 6] == 1.0  # stays closed once grasped, until reset
    policy.reset()
    assert policy.predict({"robot0_eef_pos": np.zeros(3), "target_pos": np.ones(3)}, "reach")[0, 6] == -1.0


def test_scripted_policy_names_the_missing_observation_key() -> None:
    with pytest.raises(ValueError, match="key 'target_pos' is missing"):
        ScriptedReachPolicy().predict({"robot0_eef_pos": np.zeros(3)}, "reach")


def test_vla_facade_checks_the_instruction_and_normalises_the_action_chunk(protocol: str) -> None:
    class OneAction(BaseVLAFacade):
        def predict(self, observation, instruction):  # type: ignore[no-untyped-def]
            return [0.0] * 7  # a single vector: becomes a chunk of one

        def reset(self) -> None:
            pass

    with running(OneAction(), f"{protocol}://127.0.0.1:0") as server, BaseVLAClient(server.endpoint) as client:
        assert isinstance(client, Policy)
        chunk = client.predict({"x": np.zeros(2)}, "pick up the bowl")
        assert chunk.shape == (1, 7) and chunk.dtype == np.float32
        with pytest.raises(RpcRemoteError, match="instruction: must be a string"):
            client.call("predict", [{}, 5])
        client.reset()


def test_reference_vla_closes_the_loop_over_rpc_until_the_env_reports_success(protocol: str) -> None:
    env = PointReachEnv(target=(0.3, -0.2, 0.1))
    vla = ReferenceVLAFacade(ScriptedReachPolicy(chunk_size=2))
    other = "socket" if protocol == "http" else "http"
    with (
        running(env, f"{protocol}://127.0.0.1:0") as env_server,
        running(vla, f"{other}://127.0.0.1:0") as vla_server,
        BaseEnvClient(env_server.endpoint) as env_client,
        BaseVLAClient(vla_server.endpoint) as policy,
    ):
        obs = env_client.reset(seed=0)
        policy.reset()
        solved = False
        for _ in range(30):
            for action in policy.predict(obs, "reach the red target and grasp it"):
                result = env_client.step(action)
                obs = result.observation
            if env_client.success():
                solved = True
                break
    assert solved and 0 < env.steps <= 60

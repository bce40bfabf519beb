"""`rpent calibrate` refuses bad flags before anything starts, naming the flag and the rule (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rpent.cli.main import main


def _error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["calibrate", *args])
    assert code == 2
    return capsys.readouterr().err


def test_a_robot_without_calibration_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--robot: toy has no camera calibration" in _error(capsys, "--robot", "toy")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--board", "5by4"], "--board: expected COLSxROWS such as 5x4, got '5by4'"),
        (["--board", "2x4"], "--board: need at least 3 x 3 squares, got 2 x 4"),
        (["--board-square-mm", "0"], "--board-square-mm: must be > 0, got 0 mm"),
        (["--board-marker-mm", "70"], "--board-marker-mm: must be > 0 and smaller than the square (60 mm), got 70 mm"),
        (["--board-dictionary", "DICT_9X9"], "--board-dictionary: unknown ArUco dictionary 'DICT_9X9'"),
        (["--config", "/nonexistent/franka.yaml"], "--config: no such file /nonexistent/franka.yaml"),
        (["--camera", "nope"], "--camera: no camera named 'nope' in the simulated scene; known: ['front', 'top', 'wrist']"),
    ],
)
def test_bad_flags_are_refused_naming_the_flag(capsys: pytest.CaptureFixture[str], flags: list[str], message: str) -> None:
    err = _error(capsys, "--robot", "franka", "--sim", "--camera", "front", "--auto", "8", *flags)
    assert message in err


def test_a_bad_poses_file_and_a_zero_auto_count_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    poses = tmp_path / "poses.yaml"
    poses.write_text("- {joints_rad: [0, 0]}\n")
    err = _error(capsys, "--robot", "franka", "--sim", "--camera", "wrist", "--poses", str(poses))
    assert f"--poses: {poses} entry 0: joints_rad: List should have at least 7 items" in err
    assert "--auto: the number of poses must be at least 1, got 0" in _error(
        capsys, "--robot", "franka", "--sim", "--camera", "wrist", "--auto", "0"
    )


def test_poses_come_from_a_file_or_auto_never_both(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["calibrate", "--robot", "franka", "--camera", "front", "--auto", "3", "--poses", str(tmp_path / "p.yaml")])
    assert exit_info.value.code == 2
    assert "--poses: not allowed with argument --auto" in capsys.readouterr().err

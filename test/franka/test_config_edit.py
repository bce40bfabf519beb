"""A calibration result goes into the deployment YAML: the rest of the file stays as it was, the old one is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from robots.franka import kinematics
from robots.franka.calibration.config_edit import write_camera_transform
from robots.franka.config import CONFIG_DIR, load_franka_config

FIXED = kinematics.transform((1.35, 0.012, 0.75), (-2.1, 0.02, 1.57))
WRIST = kinematics.transform((0.05, 0.0, 0.07), (0.0, -0.25, 0.0))

BLOCK_CONFIG = """\
# Lab 3, bench B.
arms:
  - name: arm
    host: 172.16.0.2   # FCI
cameras:
  - name: front        # the D435 on the tripod
    device: 2
    T_base_camera: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
  # the wrist D405 comes next
  - name: wrist
    kind: realsense
    mount: wrist
safety_file: franka_safety.yaml   # relative to this file
"""


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    shutil.copy(CONFIG_DIR / "franka_safety.yaml", tmp_path / "franka_safety.yaml")
    path = tmp_path / "franka.yaml"
    path.write_text(BLOCK_CONFIG)
    return path


def _camera(path: Path, name: str):
    return next(c for c in load_franka_config(path).cameras if c.name == name)


def test_transforms_replace_and_join_block_entries_keeping_every_comment(deployment: Path) -> None:
    write_camera_transform(deployment, "front", "T_base_camera", FIXED)
    result = write_camera_transform(deployment, "wrist", "T_flange_camera", WRIST, fields={"mount": "wrist"})
    text = deployment.read_text()
    for comment in ("# Lab 3, bench B.", "# FCI", "# the D435 on the tripod", "# the wrist D405 comes next",
                    "# relative to this file"):  # fmt: skip
        assert comment in text
    assert result.comments_kept and not result.added_entry
    assert np.allclose(_camera(deployment, "front").transform(), FIXED, atol=1e-6)
    assert np.allclose(_camera(deployment, "wrist").transform(), WRIST, atol=1e-6)
    assert _camera(deployment, "wrist").kind == "realsense"
    assert text.count("mount: wrist") == 1  # already there: not added twice


def test_the_old_file_is_kept_as_a_backup(deployment: Path) -> None:
    first = write_camera_transform(deployment, "front", "T_base_camera", FIXED)
    second = write_camera_transform(deployment, "front", "T_base_camera", WRIST)
    assert first.backup.read_text() == BLOCK_CONFIG
    assert first.backup != second.backup
    assert np.allclose(np.asarray(yaml.safe_load(second.backup.read_text())["cameras"][0]["T_base_camera"]), FIXED, atol=1e-6)


def test_the_bundled_flow_style_entry_becomes_a_block_and_a_new_camera_is_appended(tmp_path: Path) -> None:
    for name in ("franka.yaml", "franka_safety.yaml"):
        shutil.copy(CONFIG_DIR / name, tmp_path / name)
    path = tmp_path / "franka.yaml"
    before = yaml.safe_load(path.read_text())
    write_camera_transform(path, "front", "T_base_camera", FIXED)
    added = write_camera_transform(path, "wrist", "T_flange_camera", WRIST, fields={"mount": "wrist"})
    assert added.added_entry and added.comments_kept
    after = yaml.safe_load(path.read_text())
    front = after["cameras"][0]
    assert {k: v for k, v in front.items() if k != "T_base_camera"} == before["cameras"][0]
    assert {k: v for k, v in after.items() if k != "cameras"} == {k: v for k, v in before.items() if k != "cameras"}
    assert path.read_text().startswith("# One Franka arm.")
    config = load_franka_config(path)
    assert [c.name for c in config.cameras] == ["front", "wrist"]
    assert np.allclose(config.cameras[1].transform(), WRIST, atol=1e-6) and config.cameras[1].mount == "wrist"


def test_a_result_the_config_would_reject_is_not_written(deployment: Path) -> None:
    # "front" is a fixed camera: a flange transform on it does not validate, so nothing changes.
    with pytest.raises(ValueError, match="T_flange_camera is for mount: wrist"):
        write_camera_transform(deployment, "front", "T_flange_camera", WRIST)
    assert deployment.read_text() == BLOCK_CONFIG
    assert sorted(p.name for p in deployment.parent.iterdir()) == ["franka.yaml", "franka_safety.yaml"]


def test_a_file_without_a_block_camera_list_is_rewritten_and_says_comments_were_lost(deployment: Path) -> None:
    deployment.write_text("# only arms\narms: [{name: arm}]\ncameras: []\nsafety_file: franka_safety.yaml\n")
    result = write_camera_transform(deployment, "top", "T_base_camera", FIXED, fields={"mount": "fixed"})
    assert not result.comments_kept and result.added_entry
    assert np.allclose(_camera(deployment, "top").transform(), FIXED, atol=1e-6)

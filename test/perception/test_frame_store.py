"""Observation frames are kept per step, in memory and on disk, under the images' own names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robots.franka.frame_store import FrameStore
from rpent.record.segments import segment_file_name
from rpent.runtime.camera import CameraFrame, Intrinsics

K = Intrinsics(8, 6, 5.0, 5.0, 3.5, 2.5)


def _frame(camera: str, depth: float | None, pose_x: float = 0.0) -> CameraFrame:
    pose = np.eye(4)
    pose[0, 3] = pose_x
    return CameraFrame(
        camera, np.zeros((6, 8, 3), np.uint8), None if depth is None else np.full((6, 8), depth, np.float32),
        K, pose, "arm_link0", 1.0,
    )


def test_record_describes_each_image_in_order() -> None:
    store = FrameStore()
    described = store.record(3, "move_to", [_frame("front", 1.0), _frame("usb", None)])
    assert described == [
        {"name": "front", "width": 8, "height": 6, "depth": True, "back_project": True, "step": 3},
        {"name": "usb", "width": 8, "height": 6, "depth": False, "back_project": False, "step": 3},
    ]


def test_latest_step_is_the_newest_for_that_camera() -> None:
    store = FrameStore()
    store.record(2, "move_to", [_frame("front", 1.0), _frame("wrist", 0.3)])
    store.record(5, "capture_images", [_frame("front", 2.0)])
    assert store.get("front", -1).step == 5 and float(store.get("front", -1).depth_m[0, 0]) == 2.0
    assert store.get("wrist", -1).step == 2
    with pytest.raises(KeyError, match="no observation step 4"):
        store.get("front", 4)
    with pytest.raises(KeyError, match="step 5 has no image of camera 'wrist'"):
        store.get("wrist", 5)


def test_evicted_steps_are_read_back_from_disk_with_segment_names(tmp_path: Path) -> None:
    folder = tmp_path / "depth"
    store = FrameStore(folder, lambda name: segment_file_name(name, 2), keep=2)
    for step in (1, 2, 3):
        store.record(step, "move_to", [_frame("front", float(step), pose_x=step / 10)])
    assert sorted(p.name for p in folder.iterdir()) == [f"0000{s}_move_to_front-2.npz" for s in (1, 2, 3)]
    old = store.get("front", 1)  # no longer in memory
    assert float(old.depth_m[3, 4]) == 1.0 and old.T_base_camera[0, 3] == pytest.approx(0.1)
    saved = np.load(folder / "00001_move_to_front-2.npz")
    assert np.allclose(saved["K"], K.matrix()) and str(saved["base_frame"]) == "arm_link0"


def test_a_depth_file_is_never_replaced(tmp_path: Path) -> None:
    folder = tmp_path / "depth"
    FrameStore(folder).record(1, "move_to", [_frame("front", 1.0)])
    with pytest.raises(FileExistsError):
        FrameStore(folder).record(1, "move_to", [_frame("front", 2.0)])
    assert int(np.load(folder / "00001_move_to_front.npz")["depth"][0, 0]) == 10000  # 0.1 mm units


def test_depth_on_disk_keeps_a_tenth_of_a_millimetre_and_no_reading_stays_none(tmp_path: Path) -> None:
    depth = np.array([[0.0, np.nan, 0.12345, 1.23456, 7.0, -1.0]], np.float32)
    frame = CameraFrame("front", np.zeros((1, 6, 3), np.uint8), depth, Intrinsics(6, 1, 5.0, 5.0, 2.5, 0.0))
    store = FrameStore(tmp_path / "depth", keep=1)
    store.record(1, "move_to", [frame])
    store.record(2, "move_to", [frame])
    back = store.get("front", 1).depth_m
    assert back[0].tolist() == pytest.approx([0.0, 0.0, 0.1235, 1.2346, 0.0, 0.0], abs=1e-6)


def test_without_a_folder_an_evicted_step_says_it_is_gone() -> None:
    store = FrameStore(keep=1)
    store.record(1, "move_to", [_frame("front", 1.0)])
    store.record(2, "move_to", [_frame("front", 2.0)])
    with pytest.raises(KeyError, match="step 1's depth is no longer kept"):
        store.get("front", 1)
    assert float(store.get("front", 2).depth_m[0, 0]) == 2.0

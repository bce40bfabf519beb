"""The back_project tool through the Toolkit, on stand-in cameras whose geometry is known exactly:
what it returns, what the observation tells the model, and the error for each thing that can be wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robots.dual_franka.toolkit import DualFrankaToolkit
from robots.franka.config import ArmConfig, FrankaConfig
from robots.franka.runtime import FrankaRuntime
from robots.franka.safety import SafetyEnvelope
from robots.franka.toolkit import CAMERA_ENTRY_FIELDS, FrankaToolkit
from rpent.runtime.camera import CameraFrame, Intrinsics
from rpent.runtime.types import ArmState, Pose
from rpent.tools.images import decode_png

W, H = 80, 60
K = Intrinsics(W, H, 70.0, 70.0, (W - 1) / 2, (H - 1) / 2)
# A camera 1 m above the base origin looking straight down: optical x = base -y, y = base -x, z = base -z.
LOOK_DOWN = np.array([[0.0, -1.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])


class _Arm:
    def __init__(self, name: str) -> None:
        self.name = name
        # The toolkit reads each arm's envelope for its tools' ranges, as it does FrankyArm's.
        self.envelope = SafetyEnvelope(arm_name=name)

    def state(self) -> ArmState:
        return ArmState(Pose((0.5, 0.0, 0.4)), (0.0,) * 7)

    def recover(self) -> bool:
        return True


class _Camera:
    """Colour, and optionally a depth plane `depth` metres away with or without a known pose."""

    def __init__(self, name: str, depth: float | None, pose: np.ndarray | None = LOOK_DOWN, base: str = "arm_link0"):
        self.name, self.width, self.height = name, W, H
        self.depth, self.pose, self.base = depth, pose, base
        self.holes: tuple[slice, slice] | None = None

    def capture(self) -> np.ndarray:
        return np.full((H, W, 3), 90, np.uint8)

    def capture_frame(self) -> CameraFrame:
        depth = None
        if self.depth is not None:
            depth = np.full((H, W), self.depth, np.float32)
            if self.holes is not None:
                depth[self.holes] = 0.0
        return CameraFrame(self.name, self.capture(), depth, K, self.pose, self.base, 0.0)

    def close(self) -> None: ...


def _runtime(cameras: list, arms: dict[str, tuple[float, float, float]] | None = None) -> FrankaRuntime:
    arms = arms or {"arm": (0.0, 0.0, 0.0)}
    return FrankaRuntime(
        arms={name: _Arm(name) for name in arms},
        grippers={},
        cameras=cameras,
        arm_configs={name: ArmConfig(name=name, base_xyz_m=xyz) for name, xyz in arms.items()},
        safety=FrankaConfig().safety(),
    )


@pytest.fixture
def kit(tmp_path: Path):
    cams = [_Camera("depthcam", 0.8), _Camera("usb", None, pose=None), _Camera("nocal", 0.8, pose=None)]
    toolkit = FrankaToolkit(robot=_runtime(cams), output_dir=tmp_path / "run")
    yield toolkit
    toolkit.close(timeout=10)


def test_capture_images_describes_each_image_in_image_order(kit: FrankaToolkit) -> None:
    result = kit.execute_tool("capture_images", {})
    cameras = result.data["cameras"]
    assert [c["name"] for c in cameras] == ["depthcam", "usb", "nocal"]
    assert all(sorted(c) == CAMERA_ENTRY_FIELDS for c in cameras)
    assert [(c["depth"], c["back_project"]) for c in cameras] == [(True, True), (False, False), (True, False)]
    assert [decode_png(png).shape for png in result.images] == [(H, W, 3)] * 3
    step = cameras[0]["step"]
    assert [Path(p).name for p in result.image_paths] == [f"{step:05d}_capture_images_{c}.png" for c in ("depthcam", "usb", "nocal")]
    # Depth is kept beside the image it belongs to; the colour-only camera has none.
    assert sorted(p.name for p in (kit.output_dir / "depth").iterdir()) == [
        f"{step:05d}_capture_images_depthcam.npz", f"{step:05d}_capture_images_nocal.npz",
    ]  # fmt: skip


def test_back_project_gives_the_point_under_the_pixel_in_the_base_frame(kit: FrankaToolkit) -> None:
    step = kit.execute_tool("capture_images", {}).data["cameras"][0]["step"]
    row, col = 10, 70
    result = kit.execute_tool("back_project", {"camera": "depthcam", "row": row, "col": col})
    assert result.error is None, result.error
    # 0.8 m down from 1 m: z 0.2; image right (col) is base -y, image down (row) is base -x.
    expected = [-(row - K.cy) * 0.8 / K.fy, -(col - K.cx) * 0.8 / K.fx, 0.2]
    assert result.data["xyz_m"] == pytest.approx(expected, abs=1e-4)
    assert result.data == {**result.data, "frame": "arm_link0", "camera": "depthcam", "step": step,
                           "depth_m": pytest.approx(0.8), "calibrated": True}  # fmt: skip


def test_an_observation_lists_its_cameras_with_the_call_id_as_step(kit: FrankaToolkit) -> None:
    result = kit.execute_tool("recover", {})
    assert result.error is None, result.error
    cameras = result.data["cameras"]
    step = cameras[0]["step"]
    assert Path(result.image_paths[0]).name == f"{step:05d}_recover_depthcam.png"
    assert kit.execute_tool("back_project", {"camera": "depthcam", "row": 30, "col": 40, "step": step}).data["step"] == step


def test_step_keeps_the_depth_of_that_picture_after_the_scene_changed(kit: FrankaToolkit) -> None:
    camera = kit.robot.cameras[0]
    first = kit.execute_tool("capture_images", {}).data["cameras"][0]["step"]
    camera.depth = 0.5  # something moved under the camera
    kit.execute_tool("capture_images", {})
    args = {"camera": "depthcam", "row": 30, "col": 40}
    assert kit.execute_tool("back_project", {**args, "step": first}).data["depth_m"] == pytest.approx(0.8)
    assert kit.execute_tool("back_project", args).data["depth_m"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"camera": "usb", "row": 1, "col": 1}, "camera 'usb' at step {step}: no depth for this camera"),
        ({"camera": "nocal", "row": 1, "col": 1}, "camera 'nocal' at step {step}: uncalibrated camera"),
        ({"camera": "depthcam", "row": 60, "col": 1}, "outside the 80 x 60 image of camera 'depthcam'"),
        ({"camera": "depthcam", "row": 1, "col": 80}, "(row 0..59, col 0..79)"),
        ({"camera": "front", "row": 1, "col": 1}, "unknown camera 'front'; cameras: ['depthcam', 'usb', 'nocal']"),
        ({"camera": "depthcam", "row": 1, "col": 1, "step": 999}, "no observation step 999"),
    ],
)
def test_each_refusal_names_its_reason(kit: FrankaToolkit, arguments: dict, message: str) -> None:
    step = kit.execute_tool("capture_images", {}).data["cameras"][0]["step"]
    result = kit.execute_tool("back_project", arguments)
    assert result.error is not None and message.format(step=step) in result.error, result.error


def test_no_valid_depth_around_the_pixel_is_refused(kit: FrankaToolkit) -> None:
    kit.robot.cameras[0].holes = (slice(20, 41), slice(30, 51))
    kit.execute_tool("capture_images", {})
    result = kit.execute_tool("back_project", {"camera": "depthcam", "row": 30, "col": 40, "radius": 6})
    assert "no valid depth within 6 pixels of (row 30, col 40)" in result.error
    wider = kit.execute_tool("back_project", {"camera": "depthcam", "row": 30, "col": 40, "radius": 12})
    assert wider.error is None and wider.data["depth_m"] == pytest.approx(0.8)


def test_before_any_picture_back_project_says_to_take_one(kit: FrankaToolkit) -> None:
    result = kit.execute_tool("back_project", {"camera": "depthcam", "row": 1, "col": 1})
    assert "no images were shown yet" in result.error


@pytest.mark.parametrize(
    ("field", "value"), [("row", "5"), ("row", -1), ("col", 1.5), ("radius", 41), ("step", -2), ("camera", "")]
)
def test_inputs_are_strictly_typed(kit: FrankaToolkit, field: str, value: object) -> None:
    arguments = {"camera": "depthcam", "row": 1, "col": 1, field: value}
    result = kit.execute_tool("back_project", arguments)
    assert result.error is not None and field in result.error, result.error


def test_dual_back_project_gives_the_point_in_the_chosen_arms_frame(tmp_path: Path) -> None:
    runtime = _runtime([_Camera("front", 0.8, base="left_link0")], {"left": (0.0, 0.25, 0.0), "right": (0.0, -0.25, 0.0)})
    kit = DualFrankaToolkit(robot=runtime)
    try:
        kit.execute_tool("capture_images", {})
        left = kit.execute_tool("back_project", {"arm": "left", "camera": "front", "row": 30, "col": 40})
        right = kit.execute_tool("back_project", {"arm": "R", "camera": "front", "row": 30, "col": 40})
        assert left.data["frame"] == "left_link0" and right.data["frame"] == "right_link0"
        # The same point: 0.5 m further along +y seen from the right arm's base.
        assert np.subtract(right.data["xyz_m"], left.data["xyz_m"]) == pytest.approx([0.0, 0.5, 0.0], abs=1e-4)
    finally:
        kit.close(timeout=10)

"""Random table scenes for franky-sim: the objects at seeded positions and yaws, each one graspable
from above and in view of the fixed cameras.

`random_scene(seed, base, envelopes)` keeps everything of `base` (arms, table, cameras, the objects'
names, sizes and colours) and draws new poses for the objects, the same ones for the same seed.
An object is accepted where

- the arm that is to pick it reaches it from above: the safety envelope (the one the run uses)
  passes the whole pick, from the home joints to a pose above the object, down to the grasp with
  the hand turned to the object's yaw, and back up. Positions keep `EDGE_MARGIN_M` inside the
  workspace box, so a target estimated a little off is still not refused;
- it stands on the table clear of its neighbours: `GRASP_CLEARANCE_M` between centres, so an open
  hand straddling one object lands on none of the others;
- every fixed camera has it whole in its image, and no other object in front of it.

The arms at home may still hide part of the table from the overhead camera (as they do in the
fixed scene): a planner looks after moving the arm out of the way, as in a lab.

Which arm picks what: every object is within reach of at least one arm, and the first object (the
red cube, which the default tasks pick, with the first arm on dual_franka) within the first arm's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from robots.franka.safety import SafetyEnvelope
from robots.franka.sim.simulator import SimCamera, SimObject, SimScene
from rpent.runtime.arm import MotionRefused
from rpent.runtime.types import Pose

# Centre to centre: the open hand spans 8 cm between the fingers plus ~1 cm per finger, so one
# centred on an object reaches ~5 cm out along its closing axis; a neighbour's half diagonal
# (<= 3.2 cm) and a margin for an estimate that is a centimetre off fit in the rest.
GRASP_CLEARANCE_M = 0.10
EDGE_MARGIN_M = 0.03       # kept inside the workspace box (x, y)
TABLE_MARGIN_M = 0.01      # between an object's outline and the table's edge
APPROACH_HEIGHT_M = 0.10   # the pre-grasp pose, above the object's top
IMAGE_MARGIN = 0.05        # of the half-width of an image kept free around an object
MAX_DRAWS_PER_OBJECT = 400


class SceneLayoutError(RuntimeError):
    """No layout satisfying every rule was found for an object (the limits leave no room)."""


def random_scene(
    seed: int,
    base: SimScene,
    envelopes: Sequence[SafetyEnvelope],
    home_joints: Sequence[Sequence[float]],
    image_aspect: float = 4 / 3,
) -> SimScene:
    """`base` with its objects placed at random for `seed` (an integer >= 0).

    `envelopes[i]` / `home_joints[i]` belong to the arm at `base.arm_positions[i]`; `image_aspect`
    is width / height of the fixed cameras' images.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"sim_seed: must be an integer >= 0, got {seed!r}")
    if len(envelopes) != len(base.arm_positions) or len(home_joints) != len(base.arm_positions):
        raise ValueError(
            f"arms: the scene has {len(base.arm_positions)} arms, got {len(envelopes)} envelopes "
            f"and {len(home_joints)} home configurations"
        )
    rng = np.random.default_rng(seed)
    cameras = [_ProjectedCamera(cam, image_aspect) for cam in base.cameras]
    placed: list[SimObject] = []
    footprints: list[list[tuple[float, float, float, float]]] = []  # per camera: image box of each placed object
    for index, obj in enumerate(base.objects):
        arms = [0] if index == 0 else list(range(len(base.arm_positions)))
        for _ in range(MAX_DRAWS_PER_OBJECT):
            arm = int(rng.choice(arms))
            candidate = _draw(rng, obj, base, envelopes[arm], arm)
            if not _clear_of(candidate, placed):
                continue
            boxes = [cam.image_box(_corners(candidate)) for cam in cameras]
            if any(box is None for box in boxes) or any(
                _overlap(box, other[i]) for other in footprints for i, box in enumerate(boxes)  # type: ignore[arg-type]
            ):
                continue
            if not _pick_passes(candidate, envelopes[arm], base.arm_positions[arm], home_joints[arm]):
                continue
            placed.append(candidate)
            footprints.append(boxes)  # type: ignore[arg-type]
            break
        else:
            raise SceneLayoutError(
                f"sim_seed {seed}: no place for {obj.name!r} after {MAX_DRAWS_PER_OBJECT} draws "
                "(workspace, table, clearance and camera rules leave no room)"
            )
    return dataclasses.replace(base, objects=tuple(placed), seed=seed)


def grasp_yaw_rad(object_yaw_deg: float) -> float:
    """Yaw of a top-down hand (roll pi, pitch 0) whose fingers close across a box turned by
    `object_yaw_deg`: a box looks the same every 90 degrees, so the turn nearest zero, in [-pi/4, pi/4)."""
    return math.radians((object_yaw_deg + 45.0) % 90.0 - 45.0)


def _draw(rng: np.random.Generator, obj: SimObject, scene: SimScene, envelope: SafetyEnvelope, arm: int) -> SimObject:
    """A pose on the table inside arm `arm`'s workspace (world frame), at rest on the table top."""
    box = envelope.limits.workspace_m
    base_xy = np.asarray(scene.arm_positions[arm][:2], float)
    outline = obj.size_m / math.sqrt(2) + TABLE_MARGIN_M  # half diagonal: any yaw stays on the table
    centre, half = np.asarray(scene.table_center_xy, float), np.asarray(scene.table_half_size_xy, float)
    low = np.maximum(base_xy + np.array([box.x[0], box.y[0]]) + EDGE_MARGIN_M, centre - half + outline)
    high = np.minimum(base_xy + np.array([box.x[1], box.y[1]]) - EDGE_MARGIN_M, centre + half - outline)
    if np.any(low >= high):
        raise SceneLayoutError(f"{obj.name!r}: arm {arm}'s workspace and the table do not overlap")
    x, y = rng.uniform(low, high)
    yaw = float(rng.uniform(-180.0, 180.0))
    z = scene.table_top_z + obj.size_m / 2
    return dataclasses.replace(obj, position=(round(float(x), 4), round(float(y), 4), z), yaw_deg=round(yaw, 2))


def _clear_of(candidate: SimObject, placed: Sequence[SimObject]) -> bool:
    return all(math.dist(candidate.position[:2], other.position[:2]) >= GRASP_CLEARANCE_M for other in placed)


def _pick_passes(obj: SimObject, envelope: SafetyEnvelope, arm_position: Sequence[float], home: Sequence[float]) -> bool:
    """The envelope accepts home -> above -> grasp -> above for this object (arm base frame)."""
    x, y, z = np.asarray(obj.position, float) - np.asarray(arm_position, float)
    rpy = (math.pi, 0.0, grasp_yaw_rad(obj.yaw_deg))
    above = Pose.from_rpy((x, y, z + obj.size_m / 2 + APPROACH_HEIGHT_M), rpy)
    grasp = Pose.from_rpy((x, y, z), rpy)
    try:
        envelope.check_cartesian_motion(home, [above, grasp, above])
    except MotionRefused:
        return False
    return True


def _corners(obj: SimObject) -> np.ndarray:
    """The eight corners of a box object (world frame), 8 x 3."""
    h = obj.size_m / 2
    c, s = math.cos(math.radians(obj.yaw_deg)), math.sin(math.radians(obj.yaw_deg))
    local = np.array([(dx, dy, dz) for dx in (-h, h) for dy in (-h, h) for dz in (-h, h)])
    turned = local @ np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
    return turned + np.asarray(obj.position, float)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


class _ProjectedCamera:
    """A fixed sim camera as a pinhole: where points land in its image, in units of the half-height."""

    def __init__(self, camera: SimCamera, aspect: float) -> None:
        self.position = np.asarray(camera.position, float)
        forward = np.asarray(camera.target, float) - self.position
        forward /= np.linalg.norm(forward)
        right = np.cross(forward, (0.0, 0.0, 1.0))
        if np.linalg.norm(right) < 1e-6:  # straight down: the scene builder's choice of image "up"
            right = np.cross(forward, (-1.0, 0.0, 0.0))
        right /= np.linalg.norm(right)
        self.axes = np.stack([right, np.cross(right, forward), forward])  # rows: image right, up, view
        self.half_height = math.tan(math.radians(camera.fovy_deg) / 2)
        self.half_width = self.half_height * aspect

    def image_box(self, points: np.ndarray) -> tuple[float, float, float, float] | None:
        """Bounding box (u0, v0, u1, v1) of the points' images, None unless all lie well inside."""
        local = (points - self.position) @ self.axes.T
        if np.any(local[:, 2] <= 0):
            return None
        u, v = local[:, 0] / local[:, 2], local[:, 1] / local[:, 2]
        limit_u, limit_v = self.half_width * (1 - IMAGE_MARGIN), self.half_height * (1 - IMAGE_MARGIN)
        if np.any(np.abs(u) > limit_u) or np.any(np.abs(v) > limit_v):
            return None
        return float(u.min()), float(v.min()), float(u.max()), float(v.max())

"""How an episode's stream becomes a dataset's features: DROID's names and units, or RPent's own.

`droid` (one arm): the features openpi's `LeRobotDROIDDataConfig` repacks, so a DROID model fine-tunes
on the dataset as it is:
    exterior_image_1_left, exterior_image_2_left (the first again when the run had one exterior camera:
    wrist_image_left      openpi's repack reads both), videos at DROID's 180 x 320, scaled and padded (never stretched)
    joint_position (7)    measured joints [rad]
    gripper_position (1)  measured: 1 - width / max width (0 open, 1 closed)
    actions (8)           joint velocity in DROID's units (one unit: 0.2 rad per 15 Hz step, 3 rad/s), clipped
                          to [-1, 1], then the gripper position commanded
    the task text         the episode's task, which openpi uses as the prompt

`rpent` (any number of arms, names prefixed by the arm): every camera at its own size as
observation.images.<camera>; observation.state (per arm: 7 joints, gripper position), observation.velocity
(joint velocities [rad/s]), observation.ee_pose (per arm: x, y, z, qx, qy, qz, qw in the arm's base
frame), action (per arm: 7 joint velocities [rad/s], the gripper position commanded), and call_id, the
tool call the frame belongs to (-1: none).

The joint velocity an action holds: for a policy's step, the velocity the arm was sent (after shaping);
otherwise the velocity the arm ran to the next sample (the joints' change over the time between the two),
which is what a DROID policy would have had to command; at a stretch's last frame, the measured one.
The gripper position commanded: the last grasp (1) or move (1 - width / max width) sent, else the measured one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from rpent.dataset import CONVENTIONS
from rpent.dataset.episodes import GAP_PERIODS, Episode, ExportError

#: DROID's action unit: 0.2 rad per control step at 15 Hz (robots.franka.policy.droid drives a robot by it).
DROID_JOINT_DELTA_RAD = 0.2
DROID_CONTROL_HZ = 15.0
DROID_IMAGE_HW = (180, 320)
JOINTS = 7


@dataclass(frozen=True)
class Feature:
    key: str
    dtype: str  # "float32", "int64" or "video"
    shape: tuple[int, ...]
    names: list[str] | None = None
    camera: str | None = None  # a video's camera in the stream
    size_hw: tuple[int, int] | None = None  # a video's size; None: the camera's own


@dataclass
class Layout:
    convention: str
    features: list[Feature] = field(default_factory=list)

    @property
    def videos(self) -> list[Feature]:
        return [f for f in self.features if f.dtype == "video"]

    @property
    def values(self) -> list[Feature]:
        return [f for f in self.features if f.dtype != "video"]


def layout(episode: Episode, convention: str) -> Layout:
    """The features of a dataset of episodes like `episode` (load_episodes checked that they are alike)."""
    header = episode.stream.header
    arms = list(header.get("arms", {}))
    cameras = header.get("cameras", [])
    if convention == "droid":
        if len(arms) != 1:
            raise ExportError(f"{episode.run}: --convention droid: the run has {len(arms)} arms ({', '.join(arms)}); "
                              "DROID's features describe one arm (use --convention rpent)")
        exterior = [c for c in cameras if c["role"] == "exterior"]
        wrist = [c for c in cameras if c["role"] == "wrist" and c.get("arm") in (arms[0], None)]
        if not exterior or not wrist:
            raise ExportError(f"{episode.run}: --convention droid needs an exterior and a wrist camera; the run has "
                              f"{[c['name'] for c in cameras]}")
        h, w = DROID_IMAGE_HW
        # openpi's repack reads exterior_image_2_left whether or not a policy uses it (DROID policies look at
        # the first): a run with one exterior camera gives it that camera's picture again.
        pair = (exterior + exterior)[:2]
        videos = [Feature(f"exterior_image_{n}_left", "video", (h, w, 3), ["height", "width", "channels"],
                          camera["name"], DROID_IMAGE_HW) for n, camera in enumerate(pair, start=1)]
        videos.append(Feature("wrist_image_left", "video", (h, w, 3), ["height", "width", "channels"],
                              wrist[0]["name"], DROID_IMAGE_HW))
        return Layout(convention, [
            *videos,
            Feature("joint_position", "float32", (JOINTS,), [f"joint_{j + 1}" for j in range(JOINTS)]),
            Feature("gripper_position", "float32", (1,), ["gripper_position"]),
            Feature("actions", "float32", (JOINTS + 1,), [f"joint_{j + 1}_velocity" for j in range(JOINTS)]
                    + ["gripper_position"]),
        ])
    if convention != "rpent":
        raise ExportError(f"--convention: must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    per_arm = lambda names: [f"{arm}.{n}" for arm in arms for n in names]  # noqa: E731
    joints = [f"joint_{j + 1}" for j in range(JOINTS)]
    return Layout(convention, [
        *(Feature(f"observation.images.{c['name']}", "video", (c["height"], c["width"], 3),
                  ["height", "width", "channels"], c["name"]) for c in cameras),
        Feature("observation.state", "float32", (len(arms) * (JOINTS + 1),), per_arm([*joints, "gripper_position"])),
        Feature("observation.velocity", "float32", (len(arms) * JOINTS,), per_arm([f"{j}_velocity" for j in joints])),
        Feature("observation.ee_pose", "float32", (len(arms) * 7,), per_arm(["x", "y", "z", "qx", "qy", "qz", "qw"])),
        Feature("action", "float32", (len(arms) * (JOINTS + 1),), per_arm([*[f"{j}_velocity" for j in joints],
                                                                            "gripper_position"])),
        Feature("call_id", "int64", (1,), ["call_id"]),
    ])


def values(episode: Episode, lay: Layout) -> dict[str, np.ndarray]:
    """Every non-video feature of `episode`, one row per frame."""
    samples = episode.stream.samples
    arms = list(episode.stream.header.get("arms", {}))
    rows = episode.samples
    q = {arm: np.array([s["arms"][arm]["q"] for s in samples], dtype=float) for arm in arms}
    ran = {arm: _ran_velocity(samples, arm, q[arm], episode.stream.hz) for arm in arms}
    gripper = {arm: np.array([_or_zero(s["arms"][arm].get("gripper_position")) for s in samples]) for arm in arms}
    commanded = {arm: np.array([_commanded_gripper(s["arms"][arm]) for s in samples]) for arm in arms}
    out: dict[str, np.ndarray] = {}
    if lay.convention == "droid":
        arm = arms[0]
        units = ran[arm][rows] / (DROID_JOINT_DELTA_RAD * DROID_CONTROL_HZ)
        out["joint_position"] = q[arm][rows]
        out["gripper_position"] = gripper[arm][rows, None]
        out["actions"] = np.concatenate([np.clip(units, -1.0, 1.0), commanded[arm][rows, None]], axis=1)
    else:
        dq = {arm: np.array([s["arms"][arm]["dq"] for s in samples], dtype=float) for arm in arms}
        ee = {arm: np.array([s["arms"][arm]["ee"] for s in samples], dtype=float) for arm in arms}
        out["observation.state"] = np.concatenate([np.c_[q[a][rows], gripper[a][rows]] for a in arms], axis=1)
        out["observation.velocity"] = np.concatenate([dq[a][rows] for a in arms], axis=1)
        out["observation.ee_pose"] = np.concatenate([ee[a][rows] for a in arms], axis=1)
        out["action"] = np.concatenate([np.c_[ran[a][rows], commanded[a][rows]] for a in arms], axis=1)
        out["call_id"] = np.array([[s["calls"][0][0] if s.get("calls") else -1] for s in samples], dtype=np.int64)[rows]
    return {key: value.astype(np.int64 if key == "call_id" else np.float32) for key, value in out.items()}


def video_frames(episode: Episode, feature: Feature) -> Iterator[np.ndarray]:
    """The feature's pictures, one per frame of the episode (a resampled sample's picture repeats)."""
    assert feature.camera is not None
    rows = episode.samples
    wanted = 0
    for index, picture in enumerate(episode.stream.frames(feature.camera)):
        image = picture if feature.size_hw is None else fit(picture, feature.size_hw)
        while wanted < len(rows) and rows[wanted] == index:
            yield image
            wanted += 1
        if wanted == len(rows):
            return


def fit(rgb: np.ndarray, size_hw: tuple[int, int]) -> np.ndarray:
    """`rgb` scaled to fit `size_hw` and padded with black around it (as DROID's and openpi's images are)."""
    import av

    h, w = size_hw
    scale = min(h / rgb.shape[0], w / rgb.shape[1])
    nh, nw = max(2, round(rgb.shape[0] * scale)), max(2, round(rgb.shape[1] * scale))
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[:, :, :3]), format="rgb24")
    scaled = frame.reformat(width=nw, height=nh, interpolation="AREA").to_ndarray(format="rgb24")
    out = np.zeros((h, w, 3), dtype=np.uint8)
    top, left = (h - nh) // 2, (w - nw) // 2
    out[top:top + nh, left:left + nw] = scaled
    return out


def _ran_velocity(samples: Sequence[dict], arm: str, q: np.ndarray, hz: float) -> np.ndarray:
    """Per sample: the policy step's velocity, else the joints' change to the next sample over the time
    between them, else (a stretch's last sample) the measured velocity."""
    t = np.array([s["t"] for s in samples], dtype=float)
    out = np.array([s["arms"][arm]["dq"] for s in samples], dtype=float)
    for j in range(len(samples) - 1):
        dt = t[j + 1] - t[j]
        if 0 < dt <= GAP_PERIODS / hz:  # the next sample follows without a pause
            out[j] = (q[j + 1] - q[j]) / dt
    for j, s in enumerate(samples):
        action = s["arms"][arm].get("action") or {}
        if action.get("source") == "policy" and action.get("joint_velocity") is not None:
            out[j] = action["joint_velocity"]
    return out


def _commanded_gripper(arm_entry: dict) -> float:
    action = arm_entry.get("action") or {}
    if action.get("gripper") is not None:
        return float(action["gripper"])
    return _or_zero(arm_entry.get("gripper_position"))


def _or_zero(value: float | None) -> float:
    return 0.0 if value is None else float(value)

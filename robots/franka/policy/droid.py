"""openpi's DROID convention: what a DROID policy server is sent and what its actions mean for a Franka.

A DROID policy (openpi's pi0/pi0.5-DROID, ``serve_policy.py --env=DROID``) is sent one exterior
camera and the wrist camera, each resized with padding to 224 x 224 uint8 (openpi-client's
``image_tools``), the seven measured joint angles, the gripper position (0 open, 1 closed: one
minus the opening over the hand's maximum opening) and the instruction. It answers an action
chunk: rows of seven joint velocities in [-1, 1] and a gripper position. DROID's own controller
turns a joint velocity of 1 into 0.2 rad per control step at 15 Hz, added to the measured joints;
the client clips every action to [-1, 1] and binarises the gripper at 0.5, and executes the first
8 actions of a chunk before asking again.

A policy trained on absolute joint targets (`joint_position`) sends the seven targets themselves.
Nothing here talks to a robot or a server: robots.franka.policy.loop does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

EXTERIOR_IMAGE_KEY = "observation/exterior_image_1_left"
WRIST_IMAGE_KEY = "observation/wrist_image_left"
JOINT_POSITION_KEY = "observation/joint_position"
GRIPPER_POSITION_KEY = "observation/gripper_position"
PROMPT_KEY = "prompt"
IMAGE_PX = 224
CONTROL_HZ = 15.0
OPEN_LOOP_HORIZON = 8
#: The joint change per control step of a joint velocity action of 1 (DROID's robot_ik).
MAX_JOINT_DELTA_RAD = 0.2
GRIPPER_CLOSE_ABOVE = 0.5
#: A joint velocity action beyond this many units is refused, not clipped: DROID's client clips to
#: [-1, 1], which absorbs a checkpoint's small overshoot, but no DROID policy sends 1.5 (4.5 rad/s).
FAR_OVER_UNITS = 1.5
ACTION_DIM = 8

ActionSpace = Literal["joint_velocity", "joint_position"]
ACTION_SPACES: tuple[str, ...] = ("joint_velocity", "joint_position")


class PolicyReplyError(ValueError):
    """The policy's reply is not a usable action chunk (missing, wrongly shaped, NaN or inf)."""


def policy_image(rgb: np.ndarray) -> np.ndarray:
    """A camera picture as DROID policies are sent it: padded (never stretched) to 224 x 224, uint8."""
    from openpi_client import image_tools

    image = np.asarray(rgb)
    if image.ndim != 3 or image.shape[-1] < 3:
        raise ValueError(f"camera image: must have shape (H, W, 3), got {image.shape}")
    image = np.ascontiguousarray(image[..., :3])
    return image_tools.convert_to_uint8(image_tools.resize_with_pad(image, IMAGE_PX, IMAGE_PX))


def gripper_position(width_m: float, max_width_m: float) -> float:
    """DROID's gripper reading: 0 fully open, 1 closed."""
    if max_width_m <= 0:
        return 0.0
    return float(np.clip(1.0 - width_m / max_width_m, 0.0, 1.0))


def observation(
    exterior_rgb: np.ndarray, wrist_rgb: np.ndarray, joints_rad: Any, gripper: float, prompt: str
) -> dict[str, Any]:
    """The dict one inference sends (images already at the policy size)."""
    return {
        EXTERIOR_IMAGE_KEY: exterior_rgb,
        WRIST_IMAGE_KEY: wrist_rgb,
        JOINT_POSITION_KEY: np.asarray(joints_rad, dtype=np.float64).reshape(7),
        GRIPPER_POSITION_KEY: np.asarray([gripper], dtype=np.float64),
        PROMPT_KEY: str(prompt),
    }


def action_chunk(reply: Mapping[str, Any], horizon: int) -> np.ndarray:
    """The first `horizon` rows of the reply's ``actions`` as (n, 8) float64, or PolicyReplyError."""
    if "actions" not in reply:
        keys = ", ".join(sorted(map(str, reply))) or "none"
        raise PolicyReplyError(f"reply has no 'actions' (keys: {keys})")
    try:
        chunk = np.asarray(reply["actions"], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PolicyReplyError(f"reply 'actions' is not numeric: {exc}") from None
    if chunk.ndim != 2 or chunk.shape[0] < 1 or chunk.shape[1] != ACTION_DIM:
        raise PolicyReplyError(
            f"reply 'actions' must have shape (T, {ACTION_DIM}): 7 joint values and the gripper, got {chunk.shape}"
        )
    chunk = chunk[:horizon]
    bad = ~np.isfinite(chunk)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise PolicyReplyError(f"reply 'actions'[{row}][{col}] is {chunk[row, col]}: every action value must be finite")
    return chunk


def joint_target(action: np.ndarray, joints_rad: np.ndarray, action_space: str) -> np.ndarray:
    """The joint configuration one action asks for from the measured `joints_rad`.

    joint_velocity: clipped to [-1, 1] as DROID's client does, then 0.2 rad per unit added to the
    measured joints (DROID's controller). joint_position: the seven values are the target.
    """
    joints = np.asarray(action[:7], dtype=np.float64)
    if action_space == "joint_position":
        return joints
    return np.asarray(joints_rad, dtype=np.float64) + np.clip(joints, -1.0, 1.0) * MAX_JOINT_DELTA_RAD


def gripper_closes(action: np.ndarray) -> bool:
    """DROID's binarised gripper command: close above 0.5, else open."""
    return bool(float(np.clip(action[-1], -1.0, 1.0)) > GRIPPER_CLOSE_ABOVE)

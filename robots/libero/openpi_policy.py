"""A LIBERO policy served by openpi: the observation its LIBERO checkpoints were trained on, and replanning.

openpi's LIBERO example sends both camera images as robosuite delivers them turned by 180
degrees, padded and resized to 224 px, uint8; the state is the end-effector position, its
orientation as an axis-angle vector and the two finger joint positions (8 values); the prompt is
the task's instruction. It then executes the first 5 actions of each returned chunk and asks
again. This module rebuilds that from our observation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from robots.libero.openpi_options import OpenpiOptions
from robots.libero.sim import ACTION_DIM
from robots.libero.vla import PolicyInputError
from rpent.rpc.errors import RpcProtocolError
from rpent.rpc.facades.vla import as_action_chunk
from rpent.rpc.transport.vla_openpi import OpenpiPolicyClient

#: LIBERO's datasets were rendered at 256 x 256; openpi shrinks that to its image size.
CAMERA_PX = 256
AGENTVIEW, WRIST = "agentview_image", "robot0_eye_in_hand_image"


def policy_image(upright: np.ndarray, size_px: int) -> np.ndarray:
    """A camera image as openpi's LIBERO policies saw it in training, from an upright render.

    robosuite (and so LIBERO's datasets) keeps OpenGL's bottom-up row order, which openpi turns
    by 180 degrees; MuJoCo's renderer, used here, already returns rows top-down. Measured on
    libero_object: robosuite's frame matches ours flipped top to bottom. Flipping rows and then
    turning by 180 degrees leaves a left-right mirror of the upright image.
    """
    from openpi_client import image_tools

    image = np.asarray(upright)
    if image.ndim != 3 or image.shape[-1] != 3:
        raise PolicyInputError(f"camera image: must have shape (H, W, 3), got {image.shape}")
    robosuite_rows = image[::-1]
    trained_view = np.ascontiguousarray(robosuite_rows[::-1, ::-1])
    return image_tools.convert_to_uint8(image_tools.resize_with_pad(trained_view, size_px, size_px))


def libero_state(observation: Mapping[str, Any]) -> np.ndarray:
    """End-effector position (3), axis-angle orientation (3) and finger joint positions (2), world frame."""
    # robosuite's own conversion, the one openpi's example reproduces: it keeps the angle in
    # [0, 2 pi), so a gripper pointing down (w near 0) never flips the axis the way scipy's
    # shortest-rotation vector does.
    from robosuite.utils.transform_utils import quat2axisangle

    try:
        parts = [
            np.asarray(observation["robot0_eef_pos"], np.float64).reshape(3),
            quat2axisangle(np.asarray(observation["robot0_eef_quat"], np.float64).reshape(4)),
            np.asarray(observation["robot0_gripper_qpos"], np.float64).reshape(2),
        ]
    except KeyError as exc:
        raise PolicyInputError(f"observation: {exc.args[0]!r} is missing (needed for the openpi state)") from None
    return np.concatenate(parts)


class OpenpiLiberoPolicy:
    """``rpent.runtime.env.Policy`` over an openpi websocket policy server, for LIBERO scenes."""

    #: Camera size run_vla renders for this policy (before the resize to ``options.image_px``).
    camera_px = CAMERA_PX

    def __init__(self, client: OpenpiPolicyClient, options: OpenpiOptions | None = None) -> None:
        self.client = client
        self.options = options or OpenpiOptions()

    def observation(self, observation: Mapping[str, Any], instruction: str) -> dict[str, Any]:
        """The dict sent to the server for one robosuite-keyed observation with both camera images."""
        missing = [key for key in (AGENTVIEW, WRIST) if key not in observation]
        if missing:
            raise PolicyInputError(
                "with_images: the openpi policy needs the agent-view and wrist images; call run_vla with with_images=true"
            )
        o = self.options
        return {
            o.image_key: policy_image(observation[AGENTVIEW], o.image_px),
            o.wrist_image_key: policy_image(observation[WRIST], o.image_px),
            o.state_key: libero_state(observation),
            o.prompt_key: str(instruction),
        }

    def predict(self, observation: Mapping[str, Any], instruction: str) -> np.ndarray:
        reply = self.client.infer(self.observation(observation, instruction))
        where = {"endpoint": str(self.client.endpoint), "method": "infer"}
        if "actions" not in reply:
            keys = ", ".join(sorted(map(str, reply))) or "none"
            raise RpcProtocolError(f"reply has no 'actions' (keys: {keys})", **where)
        try:
            chunk = as_action_chunk(reply["actions"], who="reply 'actions'")
        except (ValueError, TypeError) as exc:
            raise RpcProtocolError(str(exc), **where) from None
        if chunk.shape[1] != ACTION_DIM:
            raise RpcProtocolError(
                f"reply 'actions': LIBERO actions have {ACTION_DIM} components, got shape {chunk.shape}", **where
            )
        steps = self.options.replan_steps
        if chunk.shape[0] < steps:
            raise RpcProtocolError(
                f"reply 'actions': the chunk has {chunk.shape[0]} actions, fewer than --openpi-replan-steps {steps}",
                **where,
            )
        return chunk[:steps]

    def reset(self) -> None:
        """Nothing to forget: openpi servers keep no per-episode state for a client (its client's reset is empty)."""

    def interrupt(self) -> None:
        """Abandon a pending inference (run_vla calls it on cancel)."""
        self.client.interrupt()

    def close(self) -> None:
        self.client.close()

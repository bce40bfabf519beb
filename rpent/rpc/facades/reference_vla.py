"""Reference VLA server: a SCRIPTED STAND-IN for a real vision-language-action model.

It loads no weights and looks at no image. It cheats on purpose, with privileged simulator
state found in the observation: it moves the end effector straight toward a target position
and closes the gripper once near it. It exists so that the whole VLA path (observation over
the wire, a server, action chunks back, env steps) runs in tests and demos on machines
without a model; a real VLA server subclasses the same BaseVLAFacade.

    python -m rpent.rpc.facades.reference_vla --endpoint socket://127.0.0.1:0 \
        --eef-key robot0_eef_pos --target-key akita_black_bowl_1_pos

Actions follow LIBERO's convention: 7-D OSC_POSE deltas (x, y, z, roll, pitch, yaw; 1.0 is
``--metres-per-unit`` metres) plus a gripper command (-1 open, +1 close).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import numpy as np

from rpent.rpc.facades.vla import BaseVLAFacade
from rpent.rpc.transport.server import facade_main

GRIPPER_OPEN = -1.0
GRIPPER_CLOSE = 1.0


def _position(observation: Mapping[str, Any], key: str) -> np.ndarray:
    if key not in observation:
        raise ValueError(
            f"observation: key {key!r} is missing (the scripted stand-in needs privileged sim state; "
            f"keys present: {', '.join(sorted(map(str, observation)))})"
        )
    pos = np.asarray(observation[key], dtype=np.float64).reshape(-1)
    if pos.shape[0] < 3 or not np.all(np.isfinite(pos[:3])):
        raise ValueError(f"observation: {key!r} must hold a finite position with at least 3 components")
    return pos[:3]


class ScriptedReachPolicy:
    """Reach toward ``target_key``'s position, then close the gripper and keep it closed.

    Implements rpent.runtime.env.Policy. Not a learned model: see the module docstring.
    """

    def __init__(
        self,
        *,
        eef_key: str = "robot0_eef_pos",
        target_key: str = "target_pos",
        metres_per_unit: float = 0.05,
        grasp_radius_m: float = 0.02,
        chunk_size: int = 1,
    ) -> None:
        if metres_per_unit <= 0 or grasp_radius_m <= 0 or chunk_size < 1:
            raise ValueError("metres_per_unit and grasp_radius_m must be > 0 and chunk_size >= 1")
        self.eef_key = eef_key
        self.target_key = target_key
        self.metres_per_unit = metres_per_unit
        self.grasp_radius_m = grasp_radius_m
        self.chunk_size = chunk_size
        self._gripper_closed = False

    def predict(self, observation: Mapping[str, Any], instruction: str) -> np.ndarray:
        offset = _position(observation, self.target_key) - _position(observation, self.eef_key)
        if float(np.linalg.norm(offset)) <= self.grasp_radius_m:
            self._gripper_closed = True  # latched: the object moves with the hand after a grasp
        action = np.zeros(7, dtype=np.float32)
        # Proportional, saturating at one unit per step; the chunk repeats the step, so the
        # gain shrinks with the chunk to avoid overshooting inside one chunk.
        action[:3] = np.clip(offset / (self.metres_per_unit * self.chunk_size), -1.0, 1.0)
        action[6] = GRIPPER_CLOSE if self._gripper_closed else GRIPPER_OPEN
        return np.repeat(action[None, :], self.chunk_size, axis=0)

    def reset(self) -> None:
        self._gripper_closed = False


class ReferenceVLAFacade(BaseVLAFacade):
    """Serves ScriptedReachPolicy (a stand-in, not a model) over rpent.rpc."""

    def __init__(self, policy: ScriptedReachPolicy | None = None) -> None:
        super().__init__()
        self.policy = policy or ScriptedReachPolicy()

    def predict(self, observation: Mapping[str, Any], instruction: str) -> np.ndarray:
        return self.policy.predict(observation, instruction)

    def reset(self) -> None:
        self.policy.reset()

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--eef-key", default="robot0_eef_pos", help="observation key of the end-effector position")
        parser.add_argument("--target-key", default="target_pos", help="observation key of the target position")
        parser.add_argument("--metres-per-unit", type=float, default=0.05, help="metres moved per unit of action")
        parser.add_argument("--grasp-radius-m", type=float, default=0.02, help="close the gripper within this distance")
        parser.add_argument("--chunk-size", type=int, default=1, help="actions returned per predict call")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReferenceVLAFacade:
        return cls(
            ScriptedReachPolicy(
                eef_key=args.eef_key,
                target_key=args.target_key,
                metres_per_unit=args.metres_per_unit,
                grasp_radius_m=args.grasp_radius_m,
                chunk_size=args.chunk_size,
            )
        )


main = facade_main(ReferenceVLAFacade, "Reference VLA server: a scripted reaching stand-in that needs no model weights.")


if __name__ == "__main__":
    raise SystemExit(main())

"""The toy world: a gripper over a 0.6 m x 0.6 m table with a few blocks and a bin.

Motion is simulated in small time steps so it takes real time, can be cancelled between steps and
produces video frames, like a real arm would.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

TABLE_M = 0.6
BLOCK_M = 0.04
IMAGE_PX = 160


@dataclass
class Block:
    name: str
    color: tuple[int, int, int]
    xyz: list[float]


@dataclass
class ToyWorld:
    """The state of the toy robot and its table; one lock guards everything."""

    speed_m_s: float = 0.5
    step_s: float = 0.02
    gripper_xyz: list[float] = field(default_factory=lambda: [0.3, 0.3, 0.2])
    gripper_open: bool = True
    holding: str | None = None
    bin_xy: tuple[float, float] = (0.5, 0.1)
    bin_half_m: float = 0.05
    blocks: dict[str, Block] = field(
        default_factory=lambda: {
            "red": Block("red", (220, 40, 40), [0.1, 0.45, BLOCK_M / 2]),
            "blue": Block("blue", (40, 80, 220), [0.25, 0.15, BLOCK_M / 2]),
        }
    )
    lock: threading.RLock = field(default_factory=threading.RLock)
    stops: int = 0

    def state(self) -> dict[str, object]:
        with self.lock:
            return {
                "gripper_xyz_m": [round(v, 4) for v in self.gripper_xyz],
                "gripper_open": self.gripper_open,
                "holding": self.holding,
                "blocks": {name: [round(v, 4) for v in b.xyz] for name, b in self.blocks.items()},
                "bin_xy_m": list(self.bin_xy),
            }

    def move_to(
        self, target: tuple[float, float, float], *, should_stop: Callable[[float], bool], on_step: Callable[[], None]
    ) -> bool:
        """Move in straight-line steps at `speed_m_s`; `should_stop(dt)` waits one step and says whether to stop.

        Returns False if stopped before reaching the target.
        """
        with self.lock:
            start = list(self.gripper_xyz)
        distance = math.dist(start, target)
        steps = max(1, math.ceil(distance / (self.speed_m_s * self.step_s)))
        for i in range(1, steps + 1):
            if should_stop(self.step_s):
                with self.lock:
                    self.stops += 1
                return False
            with self.lock:
                self.gripper_xyz = [s + (t - s) * i / steps for s, t in zip(start, target, strict=True)]
                if self.holding:
                    held = self.blocks[self.holding]
                    held.xyz = [self.gripper_xyz[0], self.gripper_xyz[1], self.gripper_xyz[2] - BLOCK_M / 2]
            on_step()
        return True

    def grasp(self) -> str | None:
        """Close the gripper; picks up a block whose top is within 2 cm of the fingers."""
        with self.lock:
            self.gripper_open = False
            gx, gy, gz = self.gripper_xyz
            for block in self.blocks.values():
                bx, by, bz = block.xyz
                if math.hypot(gx - bx, gy - by) < BLOCK_M / 2 and abs(gz - (bz + BLOCK_M / 2)) < 0.02:
                    self.holding = block.name
                    return block.name
            return None

    def release(self) -> str | None:
        with self.lock:
            self.gripper_open = True
            dropped, self.holding = self.holding, None
            if dropped is not None:
                block = self.blocks[dropped]
                block.xyz[2] = BLOCK_M / 2  # falls onto the table (or into the bin)
            return dropped

    def reset(self) -> str:
        """Put the gripper (open, holding nothing) and every block back where a new world has them."""
        start = ToyWorld()
        with self.lock:
            self.gripper_xyz, self.gripper_open, self.holding = start.gripper_xyz, True, None
            self.blocks = start.blocks
            return f"gripper open at {self.gripper_xyz}, blocks back at their start: {', '.join(sorted(self.blocks))}"

    def in_bin(self, name: str) -> bool:
        with self.lock:
            x, y, z = self.blocks[name].xyz
            bx, by = self.bin_xy
            return abs(x - bx) <= self.bin_half_m and abs(y - by) <= self.bin_half_m and z <= BLOCK_M

    def render_top(self) -> np.ndarray:
        """A top-down RGB image of the table: bin outline, blocks, gripper cross."""
        scale = IMAGE_PX / TABLE_M
        image = np.full((IMAGE_PX, IMAGE_PX, 3), 235, np.uint8)

        def px(v: float) -> int:
            return int(np.clip(v * scale, 0, IMAGE_PX - 1))

        with self.lock:
            bx, by = self.bin_xy
            x0, x1, y0, y1 = px(bx - self.bin_half_m), px(bx + self.bin_half_m), px(by - self.bin_half_m), px(by + self.bin_half_m)
            image[y0:y1, x0] = image[y0:y1, x1] = image[y0, x0:x1] = image[y1, x0:x1] = (90, 90, 90)
            half = BLOCK_M / 2
            for block in self.blocks.values():
                x, y, _ = block.xyz
                image[px(y - half) : px(y + half), px(x - half) : px(x + half)] = block.color
            gx, gy, _ = self.gripper_xyz
            cx, cy = px(gx), px(gy)
            image[max(cy - 6, 0) : cy + 7, cx] = image[cy, max(cx - 6, 0) : cx + 7] = (0, 0, 0)
        return image

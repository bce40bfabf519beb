"""Port for cameras: anything that returns an RGB uint8 frame on request."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Camera(Protocol):
    """A camera that captures one RGB frame (H x W x 3, uint8) per call."""

    name: str
    width: int
    height: int

    def capture(self) -> np.ndarray: ...

    def close(self) -> None: ...

"""The one place that turns camera arrays into PNG bytes (and back, for tests and read_image).

Their files in the run's record are named by rpent.record.images."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def encode_png(rgb: np.ndarray, *, compress_level: int = 1) -> bytes:
    """Encode an HxWx3 (RGB) or HxW (grey) uint8 array as PNG.

    Level 1 compression: camera frames are noisy, higher levels cost many milliseconds per frame
    and save little.
    """
    array = np.asarray(rgb)
    if array.dtype != np.uint8:
        raise ValueError(f"image must be uint8, got {array.dtype}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] in (3, 4))):
        raise ValueError(f"image must be HxW, HxWx3 or HxWx4, got shape {array.shape}")
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(buffer, format="PNG", compress_level=compress_level)
    return buffer.getvalue()


def decode_png(png: bytes) -> np.ndarray:
    """Decode PNG bytes into an array (RGB, RGBA or grey as stored)."""
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image)


def is_png(data: bytes) -> bool:
    return data[:8] == b"\x89PNG\r\n\x1a\n"

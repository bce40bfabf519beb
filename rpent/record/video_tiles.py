"""Several cameras in one video: each frame a grid of the views, each labelled with its camera's name.

The layout is fixed by the first set of views (an MP4's size cannot change): one tile per camera in
the order given, all tiles the size of the first view, as close to square a grid as fits. A later
set may lack a camera (its tile keeps the last picture it had); a camera the layout does not know is
left out and logged once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

import numpy as np
from PIL import Image, ImageDraw, ImageFont

log = logging.getLogger(__name__)

_LABEL_HEIGHT_FRACTION = 0.09  # of a tile's height: readable at 320 x 240 and at 1280 x 720
_LABEL_PAD_PX = 3


class Tiler:
    def __init__(self, names: list[str], tile_width: int, tile_height: int) -> None:
        if not names:
            raise ValueError("record_frame: a mapping of camera views needs at least one camera")
        self.names = names
        self.tile = (tile_width, tile_height)
        self.columns = math.ceil(math.sqrt(len(names)))
        self.rows = math.ceil(len(names) / self.columns)
        self.canvas = np.zeros((tile_height * self.rows, tile_width * self.columns, 3), np.uint8)
        self._font = ImageFont.load_default(size=max(10, round(tile_height * _LABEL_HEIGHT_FRACTION)))
        self._unknown: set[str] = set()

    @classmethod
    def for_views(cls, views: Mapping[str, np.ndarray]) -> Tiler:
        first = next(iter(views.values()))
        return cls(list(views), first.shape[1], first.shape[0])

    def compose(self, views: Mapping[str, np.ndarray]) -> np.ndarray:
        """The grid with these views in their tiles (the others as they last were); a new array."""
        for name, rgb in views.items():
            if name not in self.names:
                if name not in self._unknown:
                    self._unknown.add(name)
                    log.warning("video: camera %r was not in the episode video's first frame (%s); left out",
                                name, ", ".join(self.names))
                continue
            index = self.names.index(name)
            row, column = divmod(index, self.columns)
            width, height = self.tile
            self.canvas[row * height : (row + 1) * height, column * width : (column + 1) * width] = self._labelled(name, rgb)
        return self.canvas.copy()

    def _labelled(self, name: str, rgb: np.ndarray) -> np.ndarray:
        image = Image.fromarray(np.ascontiguousarray(rgb[:, :, :3]))
        if image.size != self.tile:
            image = image.resize(self.tile)
        draw = ImageDraw.Draw(image)
        _left, _top, right, bottom = draw.textbbox((_LABEL_PAD_PX, _LABEL_PAD_PX), name, font=self._font)
        draw.rectangle((0, 0, right + _LABEL_PAD_PX, bottom + _LABEL_PAD_PX), fill=(0, 0, 0))
        draw.text((_LABEL_PAD_PX, _LABEL_PAD_PX), name, fill=(255, 255, 255), font=self._font)
        return np.asarray(image)

"""images/ in the record: every image a tool returned, named by step (call), tool and camera:
`images/00005_grasp_front.png`; a resumed segment N's files end in -N (00005_grasp_front-2.png).
Images another call saved on an earlier step (an analysis of that step's scene) carry that step's
name and the saving tool's: `images/00005_move_to_segment-agentview.png`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from rpent.record.segments import Segment

IMAGES_FOLDER = "images"
# A step's own pictures are never replaced: a later artifact saved under a taken name gets .2, .3 ...
_MAX_COPIES = 1000


def image_labels(names: Sequence[str], count: int) -> list[str]:
    """The file-name part of each of `count` images: its (camera) name where given, made safe for a
    file name, else its index; a name given twice gets its index after it (`front_3`)."""
    labels: list[str] = []
    for index in range(count):
        name = names[index] if index < len(names) else ""
        label = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name)).strip("-.") or str(index)
        labels.append(f"{label}_{index}" if label in labels else label)
    return labels


def image_file_name(call_id: int, tool: str, label: str) -> str:
    """`00005_grasp_front.png`: the call, the tool and what the image shows (see image_labels)."""
    return f"{call_id:05d}_{tool}_{label}.png"


def save_images(
    segment: Segment, step: int, tool: str, images: Sequence[bytes], names: Sequence[str], *, by: str | None = None
) -> list[Path]:
    """Write each PNG as images/<step>_<tool>_<label>.png of this segment; the paths, in image order.

    `by`: the tool that saves these on an earlier step (`step`, `tool`: that step's): its name goes
    before each label, and no file is replaced (a taken name gets `.2`, `.3` ... before `.png`), so the
    step's own pictures and earlier artifacts stay.
    """
    folder = segment.output_dir / IMAGES_FOLDER
    folder.mkdir(exist_ok=True)
    paths = []
    for png, label in zip(images, image_labels(names, len(images)), strict=True):
        # Call ids restart with each segment; the segment suffix keeps every name unique in the record.
        path = folder / segment.name(image_file_name(step, tool, label if by is None else f"{by}-{label}"))
        if by is None:
            path.write_bytes(png)
        else:
            path = _write_new(path, png)
        paths.append(path)
    return paths


def _write_new(path: Path, data: bytes) -> Path:
    for copy in range(1, _MAX_COPIES + 1):
        candidate = path if copy == 1 else path.with_name(f"{path.stem}.{copy}{path.suffix}")
        try:
            handle = open(candidate, "xb")  # noqa: SIM115 - exclusive: what is there stays
        except FileExistsError:
            continue
        with handle:
            handle.write(data)
        return candidate
    raise FileExistsError(f"{path}: {_MAX_COPIES} files of that name already")

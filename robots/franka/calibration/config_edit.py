"""Writing a calibration result into a deployment YAML, keeping everything else as it was.

No round-trip YAML library is installed (ruamel.yaml is not a dependency), so the edit is made in
the text: PyYAML's node marks say where the camera's entry and its fields are, and only those
characters change, so comments and layout elsewhere survive. The edited text must load to exactly
the old data plus the new fields, and validate as a FrankaConfig, or nothing is written. Where the
text cannot be edited in place (no `cameras` list in block style), the file is re-emitted with
yaml.safe_dump, which keeps the data but drops the comments, and the result says so.

The old file is kept next to it as <name>.bak-<time> before the new one atomically replaces it. The
edited text may also go into another file (a simulator calibration into <config>.sim.yaml).
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robots.franka.config import load_franka_config

DECIMALS = 6  # micrometres and microradians: far below what any calibration resolves


@dataclass(frozen=True)
class WriteResult:
    path: Path
    backup: Path | None  # None: `path` was a new file
    comments_kept: bool
    added_entry: bool


def write_camera_transform(
    path: str | Path, camera: str, key: str, matrix: np.ndarray, *, fields: dict[str, Any] | None = None,
    into: str | Path | None = None,
) -> WriteResult:
    """Set `key` (T_base_camera / T_flange_camera) of camera `camera` in the YAML at `path` to `matrix`.

    `fields` are set only where the entry lacks them (e.g. mount: wrist, which T_flange_camera needs);
    a camera without an entry gets a new one with its name, `fields` and the transform. With `into`,
    the edited text goes there instead (a new file, or one replaced with a backup) and `path` stays.
    """
    path = Path(path)
    target = Path(into) if into is not None else path
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError(f"--config: {path} is not a YAML mapping")
    rows = [[float(_number(v)) for v in row] for row in np.asarray(matrix, dtype=float)]
    expected = copy.deepcopy(data)
    cameras = expected.setdefault("cameras", [])
    if not isinstance(cameras, list):
        raise ValueError(f"--config: {path}: cameras must be a list")
    entry = next((c for c in cameras if isinstance(c, dict) and c.get("name") == camera), None)
    added = entry is None
    if entry is None:
        entry = {"name": camera}
        cameras.append(entry)
    missing = {k: v for k, v in (fields or {}).items() if k not in entry}
    entry.update(missing)
    entry[key] = rows

    new_text = _edit_in_place(text, camera, key, rows, missing)
    comments_kept = new_text is not None and _loads(new_text) == expected
    if not comments_kept:
        new_text = yaml.safe_dump(expected, sort_keys=False, default_flow_style=None, width=120)
    assert new_text is not None
    return WriteResult(target, _replace(target, new_text, mode_of=path), comments_kept, added)


def _loads(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _replace(path: Path, text: str, mode_of: Path) -> Path | None:
    """Validate `text` as a FrankaConfig, back up `path` (if it exists), then atomically put `text` in
    its place (with the permissions of `mode_of`); the backup's path."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        load_franka_config(tmp)  # relative paths in it resolve against the same folder as the original
        shutil.copymode(mode_of, tmp)
        backup = _backup_name(path) if path.exists() else None
        if backup is not None:
            shutil.copy2(path, backup)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return backup


def _backup_name(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    counter = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{counter}")
        counter += 1
    return candidate


# --- the in-place edit -------------------------------------------------------------------------------
def _edit_in_place(text: str, camera: str, key: str, rows: list[list[float]], missing: dict[str, Any]) -> str | None:
    """The text with the camera's fields set, or None where no in-place edit applies."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if not isinstance(root, yaml.MappingNode):
        return None
    cameras = next((v for k, v in root.value if k.value == "cameras"), None)
    if not isinstance(cameras, yaml.SequenceNode) or cameras.flow_style or not cameras.value:
        return None
    item = next((i for i in cameras.value if isinstance(i, yaml.MappingNode) and _name(i) == camera), None)
    if item is None:
        return _append_entry(text, cameras, camera, key, rows, missing)
    if item.flow_style:
        return _rewrite_flow_entry(text, item, key, rows, missing)
    return _set_block_fields(text, item, key, rows, missing)


def _name(item: yaml.MappingNode) -> Any:
    return next((v.value for k, v in item.value if k.value == "name" and isinstance(v, yaml.ScalarNode)), None)


def _end(node: yaml.Node) -> int:
    """Where a node's own text ends (block collections' marks run on to the next token)."""
    if isinstance(node, yaml.SequenceNode | yaml.MappingNode) and not node.flow_style and node.value:
        last = node.value[-1]
        return _end(last[1] if isinstance(last, tuple) else last)
    return node.end_mark.index


def _number(value: float) -> str:
    text = f"{value:.{DECIMALS}f}"
    return text.removeprefix("-") if float(text) == 0 else text  # no "-0.000000"


def _matrix_text(rows: Sequence[Sequence[float]], indent: int) -> str:
    cells = [f"[{', '.join(_number(v) for v in row)}]" for row in rows]
    return "[" + (",\n" + " " * (indent + 1)).join(cells) + "]"


def _scalar_text(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 30).strip().removesuffix("...").strip()


def _line_end(text: str, index: int) -> int:
    """End of the line holding `index` (after any trailing comment): where a new line can go."""
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline


def _set_block_fields(text: str, item: yaml.MappingNode, key: str, rows: list[list[float]], missing: dict[str, Any]) -> str:
    indent = item.value[0][0].start_mark.column
    existing = next((v for k, v in item.value if k.value == key), None)
    lines = [f"{name}: {_scalar_text(value)}" for name, value in missing.items()]
    if existing is None:
        lines.append(f"{key}: {_matrix_text(rows, indent + len(key) + 2)}")
    at = _line_end(text, _end(item))
    if lines:
        text = text[:at] + "".join(f"\n{' ' * indent}{line}" for line in lines) + text[at:]
    if existing is not None:  # before `at`, so its marks still hold
        matrix = _matrix_text(rows, existing.start_mark.column)
        text = text[: existing.start_mark.index] + matrix + text[_end(existing) :]
    return text


def _rewrite_flow_entry(text: str, item: yaml.MappingNode, key: str, rows: list[list[float]], missing: dict[str, Any]) -> str:
    """A one-line `- {name: ..., ...}` entry becomes a block mapping with the new fields (values keep their text)."""
    indent = item.start_mark.column
    lines = [f"{text[k.start_mark.index:_end(k)]}: {text[v.start_mark.index:_end(v)]}" for k, v in item.value if k.value != key]
    lines += [f"{name}: {_scalar_text(value)}" for name, value in missing.items()]
    lines.append(f"{key}: {_matrix_text(rows, indent + len(key) + 2)}")
    return text[: item.start_mark.index] + ("\n" + " " * indent).join(lines) + text[item.end_mark.index :]


def _append_entry(
    text: str, cameras: yaml.SequenceNode, camera: str, key: str, rows: list[list[float]], missing: dict[str, Any]
) -> str:
    first = cameras.value[0]
    line_start = text.rfind("\n", 0, first.start_mark.index) + 1
    dash = text.find("-", line_start, first.start_mark.index)
    if dash < 0:
        return text
    content = first.start_mark.column
    fields = [f"name: {_scalar_text(camera)}"] + [f"{n}: {_scalar_text(v)}" for n, v in missing.items()]
    fields.append(f"{key}: {_matrix_text(rows, content + len(key) + 2)}")
    entry = " " * (dash - line_start) + "-" + " " * (content - (dash - line_start) - 1) + ("\n" + " " * content).join(fields)
    at = _line_end(text, _end(cameras))
    return text[:at] + "\n" + entry + text[at:]

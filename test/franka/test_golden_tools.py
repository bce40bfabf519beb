"""Golden contract of every Franka tool: schemas, descriptions, result fields, image order.

The baseline is test/franka/golden/franka_tools.json. Any difference fails, except paths listed
in ALLOWED_CHANGES (dotted, e.g. "dual_franka.tools.move_to.description"). To accept a deliberate
change, regenerate with RPENT_UPDATE_GOLDEN=1 and review the diff of the JSON file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from robots.dual_franka.toolkit import DUAL_SIM_IMAGE_ORDER, DualFrankaToolkit
from robots.franka.toolkit import (
    CAMERA_ENTRY_FIELDS,
    OBSERVATION_FIELDS,
    RESULT_FIELDS,
    SIM_IMAGE_ORDER,
    FrankaToolkit,
)

BASELINE = Path(__file__).parent / "golden" / "franka_tools.json"
ALLOWED_CHANGES: set[str] = set()


def _contract() -> dict[str, Any]:
    contract: dict[str, Any] = {}
    kits = (("franka", FrankaToolkit, SIM_IMAGE_ORDER), ("dual_franka", DualFrankaToolkit, DUAL_SIM_IMAGE_ORDER))
    for key, kit, image_order in kits:
        contract[key] = {
            "tools": {
                t.name: {
                    "description": t.description,
                    "readonly": t.readonly,
                    "input_schema": t.input_schema,
                    "result_fields": RESULT_FIELDS[t.name],
                }
                for t in kit.tools
            },
            "observation_fields": OBSERVATION_FIELDS,
            "camera_entry_fields": CAMERA_ENTRY_FIELDS,
            "image_order": image_order,
            "image_path_pattern": "images/<call_id:05d>_<tool>_<index>.png",
            "depth_path_pattern": "depth/<call_id:05d>_<tool>_<index>.npz",
        }
    return json.loads(json.dumps(contract))


def _differences(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            sub = f"{path}.{key}" if path else key
            if key not in old or key not in new:
                out.append(sub)
            else:
                out.extend(_differences(old[key], new[key], sub))
        return out
    return [] if old == new else [path]


def _allowed(path: str) -> bool:
    return any(path == p or path.startswith(p + ".") for p in ALLOWED_CHANGES)


def test_franka_tool_contract_matches_the_golden_baseline() -> None:
    current = _contract()
    if os.environ.get("RPENT_UPDATE_GOLDEN") == "1":
        BASELINE.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    baseline = json.loads(BASELINE.read_text())
    changed = [p for p in _differences(baseline, current) if not _allowed(p)]
    assert not changed, "tool contract changed (regenerate with RPENT_UPDATE_GOLDEN=1 if deliberate): " + ", ".join(changed)


def test_every_tool_declares_its_result_fields() -> None:
    for kit in (FrankaToolkit, DualFrankaToolkit):
        assert {t.name for t in kit.tools} <= set(RESULT_FIELDS)


def test_difference_finder_reports_nested_changes() -> None:
    old = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    new = {"a": {"b": 2, "c": [1, 2]}, "e": 1}
    assert _differences(old, new) == ["a.b", "d", "e"]

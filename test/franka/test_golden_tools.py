"""Golden contract of every Franka tool: schemas, descriptions, result fields, image order.

The baseline, test/franka/golden/franka_tools.json, is frozen: the contract robot packages and
recipes were written against. A difference fails unless it is one of ALLOWED_DIFFERENCES, the
kinds the interface allows (an optional input that now also accepts null; a schema that now
rejects unknown arguments). To accept another deliberate change, a person regenerates the file
(RPENT_UPDATE_GOLDEN=1, refused when the variable CI is set) and reviews its diff.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from robots.dual_franka.toolkit import DUAL_SIM_IMAGE_ORDER, DualFrankaToolkit
from robots.franka.toolkit import (
    CAMERA_ENTRY_FIELDS,
    OBSERVATION_FIELDS,
    RESULT_FIELDS,
    SIM_IMAGE_ORDER,
    FrankaToolkit,
)

BASELINE = Path(__file__).parent / "golden" / "franka_tools.json"
UPDATE_VARIABLE = "RPENT_UPDATE_GOLDEN"
NULL = {"type": "null"}


def _without_null(schema: Any) -> Any:
    """The schema with null taken out of what it accepts (and a null default with it)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if isinstance(out.get("anyOf"), list) and NULL in out["anyOf"]:
        variants = [v for v in out.pop("anyOf") if v != NULL]
        if len(variants) == 1 and isinstance(variants[0], dict):
            out.update(variants[0])
        else:
            out["anyOf"] = variants
    if isinstance(out.get("type"), list) and "null" in out["type"]:
        kinds = [k for k in out["type"] if k != "null"]
        out["type"] = kinds[0] if len(kinds) == 1 else kinds
    if "default" in out and out["default"] is None:
        del out["default"]
    return out


def _accepts_null(schema: Any) -> bool:
    return isinstance(schema, dict) and (NULL in schema.get("anyOf", []) or "null" in (schema.get("type") or []))


def optional_input_also_accepts_null(path: list[str], old: Any, new: Any, tool_schema: dict[str, Any]) -> bool:
    """`...input_schema.properties.<name>`: an input the model may leave out now also takes null."""
    if len(path) < 2 or path[-2] != "properties" or path[-3:-2] != ["input_schema"]:
        return False
    optional = path[-1] not in tool_schema.get("required", [])
    return optional and _accepts_null(new) and _without_null(new) == _without_null(old)


def unknown_arguments_now_rejected(path: list[str], old: Any, new: Any, tool_schema: dict[str, Any]) -> bool:
    """`...input_schema.additionalProperties`: added as false (never removed, never made true)."""
    return path[-2:] == ["input_schema", "additionalProperties"] and old is _MISSING and new is False


_MISSING = object()
Rule = Callable[[list[str], Any, Any, dict[str, Any]], bool]
#: Every kind of difference from the baseline that the interface allows; nothing else passes.
ALLOWED_DIFFERENCES: dict[str, Rule] = {
    "an optional input that also accepts null": optional_input_also_accepts_null,
    "rejection of unknown arguments (additionalProperties: false)": unknown_arguments_now_rejected,
}


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
            "image_path_pattern": "images/<call_id:05d>_<tool>_<camera>.png",
            "depth_path_pattern": "depth/<call_id:05d>_<tool>_<camera>.npz",
        }
    return json.loads(json.dumps(contract))


def _differences(old: Any, new: Any, path: str = "") -> list[str]:
    """Every dotted path where `new` differs from `old`, unless an allowed difference explains it."""
    return [".".join(p) for p in _walk(old, new, [], {})]


def _walk(old: Any, new: Any, path: list[str], schema: dict[str, Any]) -> list[list[str]]:
    if path[-1:] == ["input_schema"] and isinstance(new, dict):
        schema = new
    if any(rule(path, old, new, schema) for rule in ALLOWED_DIFFERENCES.values()):
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[list[str]] = []
        for key in sorted(set(old) | set(new)):
            out.extend(_walk(old.get(key, _MISSING), new.get(key, _MISSING), [*path, key], schema))
        return out
    return [] if old == new else [path]


def test_franka_tool_contract_matches_the_golden_baseline() -> None:
    current = _contract()
    if os.environ.get(UPDATE_VARIABLE) == "1":
        update_baseline(current, os.environ)
    changed = _differences(json.loads(BASELINE.read_text()), current)
    assert not changed, (
        "the Franka tool contract differs from the frozen baseline beyond the allowed differences "
        f"({'; '.join(ALLOWED_DIFFERENCES)}): {', '.join(changed)}"
    )


def update_baseline(current: dict[str, Any], environ: Any, baseline: Path = BASELINE) -> None:
    """Rewrite the baseline for a person to review; in CI a contract change must fail, not be absorbed."""
    if environ.get("CI"):
        pytest.fail(f"{UPDATE_VARIABLE}=1: refused because the variable CI is set; regenerate the "
                    f"baseline on a workstation and commit the reviewed diff")
    baseline.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    pytest.skip(f"{UPDATE_VARIABLE}=1: rewrote {baseline}; review its diff (nothing was compared)")


def test_every_tool_declares_its_result_fields() -> None:
    for kit in (FrankaToolkit, DualFrankaToolkit):
        assert {t.name for t in kit.tools} <= set(RESULT_FIELDS)


def test_difference_finder_reports_nested_changes() -> None:
    old = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    new = {"a": {"b": 2, "c": [1, 2]}, "e": 1}
    assert _differences(old, new) == ["a.b", "d", "e"]


def _tool(properties: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    return {"t": {"input_schema": {"type": "object", "properties": properties, "required": required, **extra}}}


def test_only_the_listed_kinds_of_difference_are_allowed() -> None:
    number = {"type": "number", "description": "Speed."}
    nullable = {"anyOf": [{"type": "number"}, NULL], "default": None, "description": "Speed."}
    path = "t.input_schema.properties.speed"
    assert _differences(_tool({"speed": number}, []), _tool({"speed": nullable}, [])) == []
    required = _differences(_tool({"speed": number}, ["speed"]), _tool({"speed": nullable}, ["speed"]))
    assert required and all(p.startswith(path + ".") for p in required)  # a required input may not change
    changed = {"anyOf": [{"type": "string"}, NULL], "default": None, "description": "Speed."}
    assert _differences(_tool({"speed": number}, []), _tool({"speed": changed}, [])) != []
    assert _differences(_tool({}, []), _tool({}, [], additionalProperties=False)) == []
    closed = _tool({}, [], additionalProperties=False)
    assert _differences(closed, _tool({}, [])) == ["t.input_schema.additionalProperties"]
    assert _differences(closed, _tool({}, [], additionalProperties=True)) == ["t.input_schema.additionalProperties"]


def test_the_update_path_refuses_to_run_in_ci(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text("{}")
    with pytest.raises(pytest.fail.Exception, match="refused because the variable CI is set"):
        update_baseline({"a": 1}, {"CI": "true", UPDATE_VARIABLE: "1"}, baseline)
    assert baseline.read_text() == "{}"
    with pytest.raises(pytest.skip.Exception, match="review its diff"):
        update_baseline({"a": 1}, {UPDATE_VARIABLE: "1"}, baseline)
    assert json.loads(baseline.read_text()) == {"a": 1}

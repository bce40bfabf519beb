"""The task form: a robot's `TaskField`s, validated into the values its CLI flags would carry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rpent.robot.spec import TaskField


class TaskFormError(ValueError):
    """A task form value is invalid; the message names the field and the rule."""


def field_to_dict(field: TaskField) -> dict[str, Any]:
    return {"name": field.name, "label": field.label, "kind": field.kind, "default": field.default,
            "choices": list(field.choices), "help": field.help}


def validate_fields(fields: Sequence[TaskField], raw: Mapping[str, Any]) -> dict[str, Any]:
    """Coerce each submitted value to its field's kind; a missing or blank value takes the default."""
    if not isinstance(raw, Mapping):
        raise TaskFormError("fields: must be an object of field name -> value")
    known = {f.name: f for f in fields}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise TaskFormError(f"fields.{unknown[0]}: unknown field (known: {', '.join(known) or 'none'})")
    values: dict[str, Any] = {}
    for field in fields:
        value = raw.get(field.name)
        if value is None or (isinstance(value, str) and not value.strip()):
            values[field.name] = field.default
            continue
        values[field.name] = _coerce(field, value)
    return values


def _coerce(field: TaskField, value: Any) -> Any:
    where = f"fields.{field.name}"
    if field.kind == "text":
        if not isinstance(value, str):
            raise TaskFormError(f"{where}: must be text")
        return value.strip()
    if field.kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "on", "off", "1", "0"):
            return value.lower() in ("true", "on", "1")
        raise TaskFormError(f"{where}: must be true or false, got {value!r}")
    if field.kind in ("int", "float"):
        if isinstance(value, bool):
            raise TaskFormError(f"{where}: must be a number, got {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise TaskFormError(f"{where}: must be a number, got {value!r}") from None
        if field.kind == "int":
            if not number.is_integer():
                raise TaskFormError(f"{where}: must be a whole number, got {value!r}")
            return int(number)
        return number
    if field.kind == "choice":
        if str(value) not in [str(c) for c in field.choices]:
            raise TaskFormError(f"{where}: must be one of {list(field.choices)}, got {value!r}")
        return next(c for c in field.choices if str(c) == str(value))
    raise TaskFormError(f"{where}: unsupported field kind {field.kind!r}")

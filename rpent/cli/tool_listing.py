"""`rpent tools` for a person: each tool's name and one-line description, then its parameters with
type, range, default and description, one line each. The JSON schemas stay behind --schema/--json."""

from __future__ import annotations

from typing import Any

from rpent.tools import Tool

_TYPES = {"number": "number", "integer": "integer", "string": "text", "boolean": "true/false", "object": "object"}


def tool_listing(tools: list[Tool]) -> str:
    blocks = []
    for tool in tools:
        summary = tool.description.split("\n", 1)[0].strip()
        head = f"{tool.name}{' (read-only)' if tool.readonly else ''}: {summary}"
        rows = parameter_rows(tool.input_schema)
        width = max((len(name) for name, _, _ in rows), default=0)
        kinds = max((len(kind) for _, kind, _ in rows), default=0)
        lines = [head] + [f"  {name:<{width}}  {kind:<{kinds}}  {text}".rstrip() for name, kind, text in rows]
        blocks.append("\n".join(lines if rows else [head, "  (no parameters)"]))
    return "\n\n".join(blocks) + "\n"


def parameter_rows(schema: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(name, "type range, required / default ...", description) for each parameter of an input schema."""
    required = set(schema.get("required", []))
    defs = schema.get("$defs", {})
    rows = []
    for name, prop in (schema.get("properties") or {}).items():
        value = _without_null(_resolve(prop, defs))
        kind = describe_type(value, defs)
        if name in required:
            kind += ", required"
        elif "default" in prop and prop["default"] is not None:
            kind += f", default {_show(prop['default'])}"
        else:  # not required: pydantic writes it as anyOf [..., null] with a null default
            kind += ", optional"
        rows.append((name, kind, " ".join(str(prop.get("description", "")).split())))
    return rows


def describe_type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """`number [0.3, 0.7]`, `list of 7 numbers`, `one of left, right`, `text`..."""
    schema = _resolve(schema, defs)
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return "one of " + ", ".join(_show(v) for v in values)
    if "anyOf" in schema:
        return " or ".join(describe_type(part, defs) for part in schema["anyOf"])
    kind = schema.get("type")
    if kind == "array":
        items = describe_type(schema.get("items", {}), defs) if schema.get("items") else "values"
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        count = f"{lo} " if lo is not None and lo == hi else ""
        if not count and (lo is not None or hi is not None):
            count = f"{lo or 0} to {hi} " if hi is not None else f"at least {lo} "
        return f"list of {count}{_plural(items)}"
    text = _TYPES.get(kind, str(kind or "value"))
    interval = _interval(schema)
    if kind == "string" and (schema.get("minLength") or schema.get("maxLength")):
        interval = f"{schema.get('minLength', 0)} to {schema.get('maxLength', '...')} characters"
    return f"{text} {interval}" if interval else text


def _interval(schema: dict[str, Any]) -> str:
    lo, lo_open = (schema["exclusiveMinimum"], True) if "exclusiveMinimum" in schema else (schema.get("minimum"), False)
    hi, hi_open = (schema["exclusiveMaximum"], True) if "exclusiveMaximum" in schema else (schema.get("maximum"), False)
    if lo is None and hi is None:
        return ""
    if hi is None:
        return f"{'>' if lo_open else '>='} {_show(lo)}"
    if lo is None:
        return f"{'<' if hi_open else '<='} {_show(hi)}"
    return f"{'(' if lo_open else '['}{_show(lo)}, {_show(hi)}{')' if hi_open else ']'}"


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without its `null` alternative (pydantic's `anyOf [..., {"type": "null"}]` of an optional input)."""
    parts = schema.get("anyOf")
    if isinstance(parts, list) and {"type": "null"} in parts:
        rest = [p for p in parts if p != {"type": "null"}]
        return {**rest[0]} if len(rest) == 1 else {"anyOf": rest}
    return schema


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return {**defs.get(ref.rsplit("/", 1)[1], {}), **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _plural(text: str) -> str:
    word, _, rest = text.partition(" ")
    plural = {"text": "texts", "true/false": "true/false values"}.get(word, word + "s")
    return f"{plural} {rest}".strip()


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)

"""One steps.jsonl line from one step record: strict JSON, valid UTF-8 and bounded in size, whatever it holds.

Values are written as they are where JSON can carry them; otherwise (readers may rely on these):

- ``{"__float__": "nan" | "inf" | "-inf"}``: a non-finite float (the rpent.rpc codec's marker; JSON
  has no literal for it).
- ``{"__truncated__": "steps/00042-arguments.json", "bytes": 9000012, "head": "..."}``: a field
  whose JSON text was too long for the line (over MAX_FIELD_BYTES, or among the largest of a line over
  MAX_LINE_BYTES). The file, relative to the log's folder, holds the field's JSON text; "bytes" is its
  size and "head" its first characters. ``"__truncated__": null`` with a "reason" when nothing was
  saved (the file could not be written, or the value is past the depth or integer limit).
- ``{"__dict__": {...}}`` wraps a dict of the record that itself has a marker key.
- Text UTF-8 cannot carry (lone surrogates) is written as the six characters ``\\udXXX``; U+0085,
  U+2028 and U+2029, which some readers take for line ends, as JSON escapes; keys that
  are not strings are written as JSON writes them (1 -> "1", None -> "null") or, for other types,
  as their repr; tuples become lists, NumPy values lists and numbers, sets sorted lists, bytes
  "<N bytes>", other objects their str().

A value that cannot be read or printed (an object whose str() raises, a mapping that fails when
iterated) is written as ``{"__truncated__": null, "reason": "could not be written: ..."}``. A record
that still cannot be encoded (no memory for it, no stack left) becomes a reduced line: segment, call_id, tool, started_at, ended_at, error and "reduced"
saying why, made of values that always encode.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from rpent.record.values import describe_exception, json_default, utf8_text

MAX_FIELD_BYTES = 64 * 1024
MAX_LINE_BYTES = 64 * 1024
# Deeper values are cut (arguments past tool.MAX_ARGUMENT_DEPTH are refused long before this).
MAX_DEPTH = 200
# Python refuses to print integers of more than ~4300 digits; JSON readers round past 2**53 anyway.
_MAX_INT_BITS = 4096
_HEAD_CHARS = 200

FLOAT = "__float__"
TRUNCATED = "__truncated__"
DICT = "__dict__"
_MARKERS = frozenset((FLOAT, TRUNCATED, DICT))
_NONFINITE = {math.inf: "inf", -math.inf: "-inf"}

# Saves one field's JSON text beside the log; returns its name relative to the log's folder.
SaveField = Callable[[str, bytes], str]


def encode_line(record: Mapping[str, Any], save_field: SaveField) -> bytes:
    """The record as one line (no newline); never raises."""
    try:
        return _full_line(record, save_field)
    except Exception as exc:  # whatever the record holds, the call keeps its line
        return reduced_line(record, f"the full record could not be encoded: {describe_exception(exc)}")


def reduced_line(record: Mapping[str, Any], reason: str) -> bytes:
    """The fields a step must always keep, each forced into a value that encodes."""
    get = record.get if type(record) is dict else (lambda _key: None)
    line = {
        "segment": _small_int(get("segment")),
        "call_id": _small_int(get("call_id")),
        "tool": _short_text(get("tool"), 200),
        "started_at": _finite(get("started_at")),
        "ended_at": _finite(get("ended_at")),
        "error": _short_text(get("error"), 4000),
        "reduced": _short_text(reason, 2000),
    }
    return _dumps(line)


def _full_line(record: Mapping[str, Any], save_field: SaveField) -> bytes:
    parts: dict[str, bytes] = {}
    for key, value in record.items():
        parts[_key(key)] = _dumps(plain(value))
    saved: set[str] = set()

    def save(name: str) -> None:
        parts[name] = _dumps(_truncation(parts[name], name, save_field))
        saved.add(name)

    for name in [n for n, part in parts.items() if len(part) > MAX_FIELD_BYTES]:
        save(name)
    while _line_size(parts) > MAX_LINE_BYTES:
        remaining = [n for n in parts if n not in saved]
        if not remaining:
            break
        save(max(remaining, key=lambda n: len(parts[n])))
    return b"{" + b", ".join(_dumps(name) + b": " + part for name, part in parts.items()) + b"}"


def _line_size(parts: dict[str, bytes]) -> int:
    # Braces, separators and quoted names; names are short ASCII here.
    return 2 + sum(len(name) + 6 + len(part) for name, part in parts.items())


def _truncation(text: bytes, name: str, save_field: SaveField) -> dict[str, Any]:
    marker: dict[str, Any] = {TRUNCATED: None, "bytes": len(text), "head": _head(text)}
    try:
        marker[TRUNCATED] = save_field(name, text)
    except Exception as exc:
        marker["reason"] = f"could not save the full value: {describe_exception(exc)}"
    return marker


def _head(text: bytes) -> str:
    head = text[: _HEAD_CHARS * 4].decode("utf-8", errors="ignore")[:_HEAD_CHARS]
    # A JSON string field reads better without its quotes.
    return head[1:] if head.startswith('"') else head


def _dumps(value: Any) -> bytes:
    return _one_line(json.dumps(value, ensure_ascii=False, allow_nan=False)).encode("utf-8")


# JSON leaves these unescaped inside strings, but str.splitlines (and some JSONL readers) ends a line
# at each; escaped, a line is one line for every reader. They never occur outside strings.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def _one_line(text: str) -> str:
    if text.isascii() or not any(chr(code) in text for code in _LINE_BREAKS):
        return text
    return text.translate(_LINE_BREAKS)


def plain(value: Any, depth: int = 0) -> Any:
    """`value` as plain JSON values, markers where JSON cannot carry it (see the module docstring)."""
    kind = type(value)
    if kind is str:
        return utf8_text(value)
    if value is None or kind is bool:
        return value
    if kind is int:
        if value.bit_length() > _MAX_INT_BITS:
            return {TRUNCATED: None, "reason": f"an integer of {value.bit_length()} bits"}
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        return {FLOAT: "nan" if math.isnan(value) else _NONFINITE[value]}
    if depth >= MAX_DEPTH:
        return {TRUNCATED: None, "reason": f"nested deeper than {MAX_DEPTH} levels"}
    try:
        return _plain_other(value, depth)
    except Exception as exc:  # only this value is lost, not the line
        return {TRUNCATED: None, "reason": f"could not be written: {describe_exception(exc)}"}


def _plain_other(value: Any, depth: int) -> Any:
    if isinstance(value, Mapping):
        out = {_key(k): plain(v, depth + 1) for k, v in list(value.items())}
        return {DICT: out} if not _MARKERS.isdisjoint(out) else out
    if isinstance(value, (list, tuple)):
        return [plain(item, depth + 1) for item in list(value)]
    # Subclasses (NumPy's float64, IntEnum, str subclasses) are written as their plain base value.
    for base in (bool, int, float, str):
        if isinstance(value, base):
            return plain(base(value), depth)
    return plain(json_default(value), depth + 1)


def _key(key: Any) -> str:
    if type(key) is str:
        return utf8_text(key)
    if key is None or isinstance(key, bool):
        return json.dumps(bool(key) if key is not None else None)
    if isinstance(key, int):
        return str(int(key))
    if isinstance(key, float):
        return json.dumps(float(key))  # as json.dumps writes keys: 1.5 -> "1.5", nan -> "NaN"
    if isinstance(key, str):
        return utf8_text(str(key))
    return _short_text(key, 200) or "None"


def _short_text(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    try:
        text = value if type(value) is str else repr(value)
    except Exception:
        text = None
    if type(text) is not str:
        text = f"<unprintable {type(value).__name__}>"
    return utf8_text(text[:limit])


def _small_int(value: Any) -> int | None:
    return value if type(value) is int and value.bit_length() <= 64 else None


def _finite(value: Any) -> float | None:
    return value if type(value) is float and math.isfinite(value) else None


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def field_file_stem(call_id: Any, name: str, segment: int = 1) -> str:
    """`00042-arguments` (`00042-arguments-2` in segment 2): the file name a saved field starts from."""
    prefix = f"{call_id:05d}" if type(call_id) is int and call_id >= 0 else "call"
    stem = f"{prefix}-{_UNSAFE_NAME.sub('_', name)[:40] or 'field'}"
    return stem if segment == 1 else f"{stem}-{segment}"

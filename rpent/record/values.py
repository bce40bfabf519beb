"""How any value and any exception is written down as text: the run's record, the model-facing
result text, dashboard events and ROS messages all use these, so none of them fails on an odd value."""

from __future__ import annotations

from typing import Any


def json_default(value: Any) -> Any:
    """`json.dumps(..., default=json_default)`: what JSON cannot carry, as something it can.

    NumPy arrays and scalars as lists and numbers, sets as sorted lists, bytes as `"<N bytes>"`,
    anything else (Paths, enums, objects) as its str()."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)


def describe_exception(exc: BaseException) -> str:
    """`TypeName: message` for an error text, even when the exception cannot print its message."""
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable message>"
    return utf8_text(f"{type(exc).__name__}: {message}")


def utf8_text(value: Any) -> Any:
    """`value`, a text with lone surrogates (which a model or a fuzzed path can carry) written as `\\udXXX`
    so that UTF-8 can carry it: a log file or console would drop the whole line. Anything else as it is."""
    if type(value) is not str or value.isascii():
        return value
    try:
        value.encode("utf-8")  # most non-ASCII text is whole: one pass, no copy
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")

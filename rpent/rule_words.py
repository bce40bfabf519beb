"""The house's words for a broken rule, whoever checked it: `<field>: must be >= 1, got 0`.

Our own checks write them directly (`--max-turns: must be >= 1, got 0`); values that pydantic or
argparse refused are put into the same words here, so no refusal reads in a library's phrasing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# pydantic error type -> (the rule, with {name} from the error's ctx, whether to add "got <input>").
_PYDANTIC_RULES: dict[str, str] = {
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}",
    "less_than": "must be < {lt}",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "string_too_short": "must be at least {min_length} characters",
    "list_type": "must be a list",
    "too_short": "must have at least {min_length} items",
    "too_long": "must have at most {max_length} items",
    "literal_error": "must be one of {expected}",
    "missing": "required",
}


def pydantic_rule(error: Mapping[str, Any]) -> str:
    """What one pydantic error (an entry of `ValidationError.errors()`) says, in the house's words,
    with the value it got; the library's message where there is no house wording for its type."""
    template = _PYDANTIC_RULES.get(str(error.get("type")))
    if template is None:
        return str(error.get("msg", "invalid")).removeprefix("Value error, ")
    try:
        rule = template.format(**(error.get("ctx") or {}))
    except (KeyError, IndexError):
        return str(error.get("msg", "invalid"))
    if error.get("type") == "missing":
        return rule
    return f"{rule}, got {error.get('input')!r}"


_ARGUMENT = re.compile(r"argument (?P<flags>[^:]+): (?P<rest>.*)", re.DOTALL)
_INVALID = re.compile(r"invalid (?P<kind>\w+) value: (?P<value>.*)", re.DOTALL)
_CHOICE = re.compile(r"invalid choice: (?P<value>.*?) \(choose from (?P<choices>.*)\)", re.DOTALL)
_KINDS = {"int": "must be a whole number", "float": "must be a number"}


def argparse_value_rule(message: str) -> str | None:
    """argparse's refusal of a flag's value (`argument --repeats: invalid int value: 'abc'`) as
    `--repeats: must be a whole number, got 'abc'`; None for other messages (an unknown flag, a
    missing one), which argparse's usage explains better."""
    match = _ARGUMENT.fullmatch(message.strip())
    if match is None:
        return None
    flag = match["flags"].split("/")[0]
    rest = match["rest"]
    invalid = _INVALID.fullmatch(rest)
    if invalid is not None:
        return f"{flag}: {_KINDS.get(invalid['kind'], 'must be a ' + invalid['kind'])}, got {invalid['value']}"
    choice = _CHOICE.fullmatch(rest)
    if choice is not None:
        choices = ", ".join(c.strip().strip("'") for c in choice["choices"].split(","))
        return f"{flag}: must be one of {choices}, got {choice['value']}"
    if rest.startswith(("expected ", "ignored explicit argument", "not allowed with")):
        return f"{flag}: {rest}"
    if "required" in rest or "unrecognized" in rest:
        return None
    return f"{flag}: {rest}"  # a type function's own refusal (ArgumentTypeError), already in our words

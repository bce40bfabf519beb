"""Checks of the options of every part that talks to a model (planners, RobotAgent): each refusal names
the option and the rule it broke. Core, so the MCP client checks its options as the planners do."""

from __future__ import annotations


def check_max_turns(max_turns: int) -> None:
    """How many turns a run may take: at least one."""
    check_integer("max_turns", max_turns, 1)


def check_integer(field: str, value: int, minimum: int) -> None:
    """Reject anything but an int of at least `minimum`, naming the option (a bool is not a count)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{field}: must be an integer >= {minimum}, got {value!r}")


def check_positive(field: str, value: float | None, *, optional: bool = True) -> None:
    """Reject a non-positive option, naming it (None passes when the option is optional)."""
    if value is None and optional:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{field}: must be a positive number, got {value!r}")

"""Narrow a tool's numeric parameters to limits known only at run time (a robot's safety envelope),
so the schema a model reads and the validation that refuses a call state the same range.

    narrowed = with_bounds(move_to, {"x_m": Bounds(ge=0.30, le=0.70)})

Bounds only narrow: each one is intersected with the range the tool declares, so a looser
configured limit never widens what the tool itself accepts.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
from pydantic import Field
from pydantic.fields import FieldInfo

from rpent.tools.tool import Tool, ToolDefinitionError, _build_tool


@dataclass(frozen=True)
class Bounds:
    """A numeric range: lower bound `ge` (or exclusive `gt`), upper bound `le` (or exclusive `lt`)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None


def with_bounds(tool: Tool, bounds: Mapping[str, Bounds]) -> Tool:
    """`tool` with the named numeric parameters narrowed to `bounds`; parameters it lacks are ignored."""
    hints = typing.get_type_hints(tool.fn, include_extras=True)
    annotations: dict[str, Any] = {}
    for name, wanted in bounds.items():
        if name not in hints or name == "ctx":
            continue
        annotations[name] = _narrowed(hints[name], wanted, f"tool '{tool.name}' parameter '{name}'")
    if not annotations:
        return tool
    return _build_tool(tool.fn, name=tool.name, description=tool.description, outcome=tool.outcome,
                       annotations=annotations)


def _narrowed(annotation: Any, wanted: Bounds, where: str) -> Any:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        arms = get_args(annotation)
        if type(None) not in arms or len(arms) != 2:
            raise ToolDefinitionError(f"{where}: only a number or an optional number can be bounded")
        number = next(a for a in arms if a is not type(None))
        return typing.Optional[_narrowed(number, wanted, where)]  # noqa: UP045 - rebuilt from parts
    base, metadata = annotation, []
    if origin is Annotated:
        base, *metadata = get_args(annotation)
    if base not in (int, float):
        raise ToolDefinitionError(f"{where}: only a number or an optional number can be bounded, not {base!r}")
    declared = _declared(metadata)
    kept = [m for m in metadata if not isinstance(m, (FieldInfo, *_BOUND_TYPES))]  # e.g. validators
    description = next((m.description for m in metadata if isinstance(m, FieldInfo) and m.description), None)
    return Annotated[(base, *kept, Field(description=description, **_intersect(declared, wanted)))]


_BOUND_TYPES = (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)


def _declared(metadata: list[Any]) -> Bounds:
    found: dict[str, float] = {}
    for item in metadata:
        for constraint in (item.metadata if isinstance(item, FieldInfo) else [item]):
            for key in ("ge", "gt", "le", "lt"):
                if isinstance(constraint, getattr(annotated_types, key.capitalize())):
                    found[key] = getattr(constraint, key)
    return Bounds(**found)


def _intersect(declared: Bounds, wanted: Bounds) -> dict[str, float]:
    """The tighter lower and the tighter upper bound of the two (a tie keeps the exclusive one)."""
    out: dict[str, float] = {}
    lowers = [(v, k) for k, v in (("ge", declared.ge), ("gt", declared.gt), ("ge", wanted.ge), ("gt", wanted.gt))
              if v is not None]
    uppers = [(v, k) for k, v in (("le", declared.le), ("lt", declared.lt), ("le", wanted.le), ("lt", wanted.lt))
              if v is not None]
    if lowers:
        value, key = max(lowers, key=lambda vk: (vk[0], vk[1] == "gt"))
        out[key] = value
    if uppers:
        value, key = min(uppers, key=lambda vk: (vk[0], vk[1] != "lt"))
        out[key] = value
    return out

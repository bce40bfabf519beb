"""`@tool` and `@readonly`: a typed, documented Python function becomes a Tool with a derived schema."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import docstring_parser
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    WrapValidator,
    create_model,
)
from pydantic.fields import FieldInfo

from rpent.tools.arguments import JSON_SCALARS, describe_problem, json_problems
from rpent.tools.context import ToolContext

_READONLY_ATTR = "__rpent_readonly__"
_CTX = "ctx"
# Arguments are JSON the model wrote against the published schema: validate them strictly, so
# that `false` is not 0.0 and "0.1" is not 0.1 (lax mode coerced both and the arm moved).
# Strict mode alone still takes Decimal and numpy scalars and, from Python's json module, NaN;
# `json_problems` (rpent.tools.arguments) refuses those before pydantic sees them.
_ARGS_CONFIG = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
_INPUT_VALIDATORS = (BeforeValidator, PlainValidator, WrapValidator)


class ToolDefinitionError(TypeError):
    """A function cannot become a tool (raised at decoration time)."""


class ToolArgumentError(ValueError):
    """Arguments do not fit a tool's schema; the message names each field and the rule it broke."""


@dataclass(frozen=True, eq=False)
class Tool:
    """A callable the model may use: name, description, schema, and the handler behind them."""

    name: str
    description: str
    fn: Callable[..., Any]
    args_schema: type[BaseModel]
    input_schema: dict[str, Any]
    readonly: bool = False
    #: Fields of the tool's result that say whether its action did what it was asked (`reached`,
    #: `grasped`): one reported false marks the call `failed` (see Toolkit and ToolResult.outcome).
    outcome: tuple[str, ...] = ()
    # Parameters that may be omitted, whose type does not itself admit None: null means "the default".
    _null_means_default: tuple[tuple[str, FieldInfo], ...] = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Keep the decorated function callable as a plain function (tests, composition).
        return self.fn(*args, **kwargs)

    def validate(self, arguments: Mapping[str, Any]) -> BaseModel:
        """Validate raw arguments; raise ToolArgumentError naming the fields and rules broken.

        Strictly, as the JSON the schema describes: a number is an int or a finite float (not a bool
        or a numeric string), an integer an int, an array a list; nothing JSON cannot carry
        (bytes, Decimal, numpy scalars, tuples, NaN, inf) is taken.
        """
        if _CTX in arguments:
            raise ToolArgumentError(
                f"invalid arguments for tool '{self.name}': 'ctx' is supplied by the executor and cannot be passed"
            )
        problems = list(json_problems(arguments))
        if problems:
            raise ToolArgumentError(_describe(self, problems))
        try:
            # strict=True here as well: it reaches nested models, whose own config may be lax.
            model = self.args_schema.model_validate(dict(arguments), strict=True)
        except ValidationError as exc:
            raise ToolArgumentError(describe_validation_error(self, exc)) from None
        for name, info in self._null_means_default:
            if getattr(model, name) is None:
                setattr(model, name, info.get_default(call_default_factory=True))
        return model

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "readonly": self.readonly,
        }


def describe_validation_error(tool: Tool, exc: ValidationError) -> str:
    return _describe(tool, exc.errors(include_url=False))


def _describe(tool: Tool, errors: Iterable[Mapping[str, Any]]) -> str:
    allowed = ", ".join(tool.args_schema.model_fields) or "none"
    parts = [describe_problem(error, allowed) for error in errors]
    return f"invalid arguments for tool '{tool.name}': " + "; ".join(parts)


def readonly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a tool as read-only: it may run alongside other read-only tools and captures no observation.

    Place it below `@tool` (it marks the function `@tool` then wraps); above `@tool` works too.
    """
    if isinstance(fn, Tool):
        return Tool(**{**fn.__dict__, "readonly": True})
    setattr(fn, _READONLY_ATTR, True)
    return fn


@typing.overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@typing.overload
def tool(
    *, name: str | None = None, description: str | None = None, outcome: Sequence[str] = ()
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
    outcome: Sequence[str] = (),
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function with a Google-style docstring into a Tool.

    The function must take a required keyword-only `ctx: ToolContext[...]`; every other parameter
    needs a type annotation (constraints via pydantic `Field`, as the default or inside `Annotated`).
    `outcome` names the boolean fields of its result that report whether the action succeeded
    (`@tool(outcome=["grasped"])`).
    """

    def decorate(function: Callable[..., Any]) -> Tool:
        return _build_tool(function, name=name, description=description, outcome=outcome)

    return decorate(fn) if fn is not None else decorate


def _build_tool(fn: Callable[..., Any], *, name: str | None, description: str | None,
                outcome: Sequence[str] = (), annotations: Mapping[str, Any] | None = None) -> Tool:
    """`annotations`: replacements for some parameters' annotations (see rpent.tools.bounds)."""
    tool_name = name or fn.__name__
    where = f"tool '{tool_name}' ({fn.__module__}.{fn.__qualname__})"
    signature = inspect.signature(fn)
    hints = {**_resolve_hints(fn, signature, where), **(annotations or {})}
    doc = docstring_parser.parse(inspect.getdoc(fn) or "", style=docstring_parser.DocstringStyle.GOOGLE)
    param_docs = {p.arg_name: " ".join((p.description or "").split()) for p in doc.params}

    _check_ctx(signature, where)
    fields: dict[str, Any] = {}
    null_means_default: list[tuple[str, FieldInfo]] = []
    for param in signature.parameters.values():
        if param.name == _CTX:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"{where}: *args/**kwargs are not allowed; declare each parameter")
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"{where}: parameter '{param.name}' is positional-only; tools take named arguments")
        if param.name not in hints:
            raise ToolDefinitionError(f"{where}: parameter '{param.name}' has no type annotation")
        annotation = hints[param.name]
        if not _json_can_carry(annotation):
            raise ToolDefinitionError(
                f"{where}: parameter '{param.name}' is {annotation!r}, which cannot arrive as JSON: use str, int,"
                " float, bool, None, Literal, list[...] (also for tuples), dict[str, ...] or a pydantic model"
            )
        doc_text = param_docs.get(param.name)
        if param.default is param.empty:
            field_type, default = annotation, ...
        else:
            default = param.default
            field_type = annotation if _admits_none(annotation) else typing.Optional[annotation]  # noqa: UP045
            if not _admits_none(annotation):
                info = default if isinstance(default, FieldInfo) else Field(default)
                null_means_default.append((param.name, info))
            if isinstance(default, FieldInfo) and default.is_required():
                raise ToolDefinitionError(f"{where}: parameter '{param.name}' has a Field default with no value")
        if doc_text and not _has_description(annotation, default):
            field_type = Annotated[field_type, Field(description=doc_text)]
        fields[param.name] = (field_type, default)

    model_name = "".join(part.capitalize() for part in tool_name.split("_")) + "Args"
    try:
        args_schema = create_model(model_name, __config__=_ARGS_CONFIG, **fields)
        input_schema = _clean_schema(args_schema.model_json_schema())
    except Exception as exc:  # pydantic raises several types for unusable annotations
        raise ToolDefinitionError(f"{where}: cannot derive a schema: {exc}") from exc

    text = description or "\n\n".join(p for p in (doc.short_description, doc.long_description) if p)
    if not text:
        raise ToolDefinitionError(f"{where}: needs a docstring; it is the description the model reads")
    return Tool(
        name=tool_name,
        description=text.strip(),
        fn=fn,
        args_schema=args_schema,
        input_schema=input_schema,
        readonly=bool(getattr(fn, _READONLY_ATTR, False)),
        outcome=_outcome_fields(outcome, where),
        _null_means_default=tuple(null_means_default),
    )


def _outcome_fields(outcome: Sequence[str], where: str) -> tuple[str, ...]:
    if isinstance(outcome, str) or not all(isinstance(name, str) and name for name in outcome):
        raise ToolDefinitionError(f"{where}: outcome must be a list of result field names, got {outcome!r}")
    return tuple(outcome)


def _resolve_hints(fn: Callable[..., Any], signature: inspect.Signature, where: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        pass
    # A forward reference inside ctx's annotation (ToolContext["MyRuntime"]) need not resolve:
    # resolve the other parameters one by one.
    hints: dict[str, Any] = {}
    namespace = getattr(fn, "__globals__", {})
    for param in signature.parameters.values():
        if param.name == _CTX or param.annotation is param.empty:
            continue
        annotation = param.annotation
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)
            except Exception as exc:
                raise ToolDefinitionError(f"{where}: cannot resolve the annotation of '{param.name}': {exc}") from exc
        hints[param.name] = annotation
    return hints


def _check_ctx(signature: inspect.Signature, where: str) -> None:
    ctx = signature.parameters.get(_CTX)
    if ctx is None:
        raise ToolDefinitionError(f"{where}: needs a required keyword-only parameter 'ctx: ToolContext'")
    if ctx.kind is not ctx.KEYWORD_ONLY or ctx.default is not ctx.empty:
        raise ToolDefinitionError(f"{where}: 'ctx' must be keyword-only with no default (put it after '*')")
    annotation = ctx.annotation
    if annotation is ctx.empty:
        raise ToolDefinitionError(f"{where}: 'ctx' needs the annotation ToolContext[...]")
    is_context = (
        annotation.split("[")[0].strip().endswith("ToolContext")
        if isinstance(annotation, str)
        else (annotation is ToolContext or get_origin(annotation) is ToolContext)
    )
    if not is_context:
        raise ToolDefinitionError(f"{where}: 'ctx' must be annotated as ToolContext[...], not {annotation!r}")


def _admits_none(annotation: Any) -> bool:
    if annotation is None or annotation is type(None) or annotation is Any:
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return _admits_none(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(_admits_none(arg) for arg in get_args(annotation))
    return False


def _json_can_carry(annotation: Any, seen: frozenset[type] = frozenset()) -> bool:
    """Whether strict validation can take this type from JSON values (it takes no str for an Enum or Path)."""
    if annotation in JSON_SCALARS or annotation in (Any, None, list, dict):
        return True
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        # A validator that runs on the raw input decides what it takes; pydantic publishes that
        # as its json_schema_input_type.
        return any(isinstance(m, _INPUT_VALIDATORS) for m in args[1:]) or _json_can_carry(args[0], seen)
    if origin in (Union, types.UnionType):
        return all(_json_can_carry(arg, seen) for arg in args)
    if origin is Literal:
        return all(type(arg) in JSON_SCALARS for arg in args)
    if origin is list:
        return _json_can_carry(args[0], seen)
    if origin is dict:
        return args[0] is str and _json_can_carry(args[1], seen)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation in seen or all(
            _json_can_carry(Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation, seen | {annotation})
            for f in annotation.model_fields.values()
        )
    return False


def _has_description(annotation: Any, default: Any) -> bool:
    if isinstance(default, FieldInfo) and default.description:
        return True
    if get_origin(annotation) is Annotated:
        return any(isinstance(m, FieldInfo) and m.description for m in get_args(annotation)[1:])
    return False


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles: noise for the model, and they churn with renames."""

    def strip(node: Any, *, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            cleaned = {}
            for key, value in node.items():
                if key == "title" and not in_properties and isinstance(value, str):
                    continue
                cleaned[key] = strip(value, in_properties=(key in ("properties", "$defs")))
            return cleaned
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node

    cleaned = strip(schema)
    cleaned.setdefault("properties", {})
    cleaned["additionalProperties"] = False
    return cleaned

"""Check a remote tool's arguments against its published JSON schema, as strictly as the toolkit's own
validation (no rclpy here, tested without ROS).

A toolkit node publishes each tool's `input_schema`; test/core/test_schema_agreement.py holds every
bundled tool's schema and `Tool.validate` to accepting exactly the same arguments, with a Draft 2020-12
validator whose "number" is a finite int or float (never a bool) and whose "integer" is an int. So
RosToolkit refuses here what the node would refuse there, before anything is sent, in the words
pydantic uses there ("invalid arguments for tool 'move_to': x_m: Input should be less than or equal
to 0.6 (got 5)"). Values a JSON text cannot carry (tuples, bytes, NaN, numpy scalars) are refused too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

from rpent.tools import ToolArgumentError
from rpent.tools.arguments import describe_problem, is_json_number, json_problems, quote_input
from rpent.tools.call_values import arguments_mapping

_CHECKER = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many({
    "number": lambda _checker, value: is_json_number(value),
    "integer": lambda _checker, value: type(value) is int and is_json_number(value),
})
StrictValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_CHECKER)

_TYPE_WORDS = {"number": "number", "integer": "integer", "string": "string", "boolean": "boolean",
               "array": "list", "object": "dictionary", "null": "None"}
_BOUNDS = {"maximum": "less than or equal to", "exclusiveMaximum": "less than",
           "minimum": "greater than or equal to", "exclusiveMinimum": "greater than"}


class ArgumentChecker:
    """The arguments check of one tool, built once from its published schema."""

    def __init__(self, tool: str, schema: Mapping[str, Any]) -> None:
        self.tool = tool
        self.schema = dict(schema)
        self._validator = StrictValidator(self.schema)
        names = list(self.schema.get("properties", {}))
        self._allowed = ", ".join(names) or "none"
        self._order = {name: index for index, name in enumerate(names)}  # problems in field order, as pydantic
    def check(self, arguments: Any) -> dict[str, Any]:
        """The arguments as a JSON object, or ToolArgumentError naming each field and the rule it broke."""
        mapping = arguments_mapping(arguments, self.tool)
        # The toolkit's own check of what JSON can carry, so both refuse such values in the same words.
        problems = [describe_problem(problem, self._allowed) for problem in json_problems(mapping)]
        if not problems:
            # One problem per place, the first found, as pydantic reports them (jsonschema may find two: a
            # string outside an enum breaks "enum" and "type"; "required" comes once per missing name).
            first: dict[str, str] = {}
            for error in self._validator.iter_errors(mapping):
                for problem in self._describe(error):
                    first.setdefault(problem.split(":")[0], problem)
            problems = sorted(first.values(), key=lambda text: self._order.get(text.split(":")[0].split(".")[0], len(self._order)))
        if problems:
            raise ToolArgumentError(f"invalid arguments for tool '{self.tool}': " + "; ".join(problems))
        return mapping

    def _describe(self, error: ValidationError) -> Iterator[str]:
        where = ".".join(str(part) for part in error.absolute_path)
        kind, rule = error.validator, error.validator_value
        if kind == "required":
            for name in rule:
                if name not in error.instance:
                    yield f"{_join(where, name)}: required argument is missing"
        elif kind == "additionalProperties":
            known = set(error.schema.get("properties", {}))
            for name in error.instance:
                if name not in known:
                    yield f"{_join(where, name)}: unknown argument (allowed: {self._allowed})"
        elif kind == "anyOf" and error.context:
            # As pydantic: the errors of the branch the value's type fits (a list: the array branch), else
            # of the first branch (an Optional[float] given a string: "should be a valid number").
            branches: dict[int, list[ValidationError]] = {}
            for inner in error.context:
                branches.setdefault(inner.relative_schema_path[0], []).append(inner)
            fitting = [b for b in branches.values() if not any(e.validator == "type" and not e.relative_path for e in b)]
            for inner in (fitting or list(branches.values()))[0]:
                yield from self._describe(inner)
        else:
            yield f"{where or 'arguments'}: {_rule(kind, rule, error)} (got {quote_input(error.instance)})"


def _rule(kind: Any, rule: Any, error: ValidationError) -> str:
    if kind == "type":
        return f"Input should be a valid {_TYPE_WORDS.get(rule, rule)}"
    if kind in _BOUNDS:
        return f"Input should be {_BOUNDS[kind]} {rule}"
    if kind in ("minLength", "maxLength"):
        return f"String should have at {'least' if kind == 'minLength' else 'most'} {rule} character{'s' * (rule != 1)}"
    if kind in ("minItems", "maxItems"):
        bound = "least" if kind == "minItems" else "most"
        return f"List should have at {bound} {rule} item{'s' * (rule != 1)} after validation, not {len(error.instance)}"
    if kind == "enum":
        options = [repr(option) for option in rule]
        return "Input should be " + (", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0])
    if kind == "pattern":
        return f"String should match pattern '{rule}'"
    return error.message


def _join(where: str, name: str) -> str:
    return (f"{where}.{name}" if where else name) or "arguments"  # pydantic's name for an empty location

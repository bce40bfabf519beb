"""steps.jsonl keeps exactly one strict-JSON line per call, whatever the call was, and no line is huge."""

from __future__ import annotations

import io
import json
import logging
import math
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from rpent.record import step_line
from rpent.record.step_record import StepRecord
from rpent.record.steps import MAX_LINE_BYTES, StepLog, read_steps, saved_value
from rpent.tools import ToolContext, ToolResult, tool
from rpent.tools.arguments import MAX_ARGUMENT_DEPTH

from .toolkits import GATE_TOOLS, Gates, ObservingToolkit


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_lines(output_dir: Path) -> list[dict[str, Any]]:
    """Every line of steps.jsonl, parsed as strict JSON from strict UTF-8 (raises on anything else)."""
    raw = (output_dir / "steps.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line.decode("utf-8"), parse_constant=_refuse_constant) for line in raw.split(b"\n")[:-1]]


def nested_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class Opaque:
    """Neither str() nor repr() works."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__


class HostileMapping(Mapping[str, Any]):
    """A mapping that admits to keys but fails when asked for them."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("no items")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no keys")

    def __len__(self) -> int:
        return 1

    def __contains__(self, key: object) -> bool:
        return False


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


EMITTED = {
    "cycle": lambda: {"loop": _cycle()},
    "deep": lambda: {"deep": nested_list(5000)},
    "nan": lambda: {"x": math.nan, "y": [math.inf, -math.inf]},
    "surrogate": lambda: {"text": "a\ud800b"},
    "huge": lambda: {"text": "é" * 200_000},
    "tuple_key": lambda: {(1, 2): 1},
    "bytes": lambda: {"blob": b"\x00" * 10},
    "opaque": lambda: {"o": Opaque()},
    "not_a_dict": lambda: ToolResult(data=[1, 2]),  # type: ignore[arg-type]
    "text_images": lambda: ToolResult(images=["not png"]),  # type: ignore[list-item]
}


@tool
def emit(kind: str, *, ctx: ToolContext[Gates]) -> Any:
    """Return a result of the named awkward kind, or raise an exception that cannot be printed.

    Args:
        kind: One of the EMITTED kinds, or "unprintable".
    """
    if kind == "unprintable":
        raise Unprintable()
    return EMITTED[kind]()


class HostileToolkit(ObservingToolkit):
    tools = [*GATE_TOOLS, emit]


@pytest.fixture
def kit(tmp_path):
    toolkit = HostileToolkit(robot=Gates(), output_dir=tmp_path)
    yield toolkit
    toolkit.close()


# ---- the reproductions from issue 13 --------------------------------------------------------


def test_a_non_string_argument_key_leaves_one_line_and_the_error_names_the_key(kit, tmp_path):
    result = kit.execute_tool("read_image", {"path": "abc", (1, 2): 1})
    assert "argument names should be strings (got (1, 2))" in result.error
    (step,) = strict_lines(tmp_path)
    assert step["tool"] == "read_image"
    assert step["error"] == result.error
    assert step["arguments"] == {"path": "abc", "(1, 2)": 1}


def test_a_lone_surrogate_in_the_arguments_leaves_one_line_with_it_escaped(kit, tmp_path):
    first = kit.execute_tool("write_text_file", {"path": "\ud800", "text": "x"})
    second = kit.execute_tool("write_text_file", {"path": "\ud800"})
    assert first.is_error and not first.error.startswith("internal error")
    assert "text: required argument is missing" in second.error
    steps = strict_lines(tmp_path)
    assert [s["call_id"] for s in steps] == [1, 2]
    assert [s["arguments"]["path"] for s in steps] == ["\\ud800", "\\ud800"]  # the six characters, not U+D800


def test_deeply_nested_json_text_is_refused_before_the_tool_runs(kit, tmp_path):
    text = '{"label": ' + "[" * 100_000 + "]" * 100_000 + "}"
    result = kit.execute_tool("work", text)
    assert result.error == f"invalid arguments for tool 'work': JSON nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    assert kit.robot.started == []
    (step,) = strict_lines(tmp_path)
    assert step["error"] == result.error
    # The 200 kB argument text is saved beside the log, not written into the line.
    assert saved_value(tmp_path / "steps.jsonl", step["arguments"]) == text


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 5000])
def test_deeply_nested_arguments_are_refused_naming_the_limit(kit, tmp_path, depth):
    result = kit.execute_tool("work", {"label": nested_list(depth)})
    assert f"label: nested deeper than {MAX_ARGUMENT_DEPTH} levels" in result.error
    assert kit.robot.started == []
    assert len(strict_lines(tmp_path)) == 1


def test_arguments_at_the_depth_limit_are_validated_as_usual(kit):
    result = kit.execute_tool("work", {"label": nested_list(MAX_ARGUMENT_DEPTH - 1)})
    assert "label: Input should be a valid string" in result.error


# ---- strict JSON ----------------------------------------------------------------------------


def test_non_finite_numbers_are_written_as_float_markers(kit, tmp_path):
    kit.execute_tool("nope", {"a": math.nan, "b": [math.inf, -math.inf], "c": 1.5})
    (step,) = strict_lines(tmp_path)
    assert step["arguments"] == {
        "a": {"__float__": "nan"},
        "b": [{"__float__": "inf"}, {"__float__": "-inf"}],
        "c": 1.5,
    }


def test_user_data_that_looks_like_a_marker_is_wrapped(kit, tmp_path):
    kit.execute_tool("nope", {"__float__": "nan"})
    (step,) = strict_lines(tmp_path)
    assert step["arguments"] == {"__dict__": {"__float__": "nan"}}


def test_unicode_line_separators_are_escaped_so_any_line_splitter_sees_one_line(kit, tmp_path):
    label = "a\u2028b\u2029c\x85d"
    assert not kit.execute_tool("work", {"label": label}).is_error
    text = (tmp_path / "steps.jsonl").read_text(encoding="utf-8")
    assert len(text.splitlines()) == 1  # str.splitlines also splits at U+2028, U+2029 and U+0085
    assert read_steps(tmp_path / "steps.jsonl")[0]["arguments"]["label"] == label


# ---- size -----------------------------------------------------------------------------------


def test_a_field_over_64_kb_is_saved_beside_the_log_and_the_line_stays_small(kit, tmp_path):
    label = "x" * 9_000_000
    assert not kit.execute_tool("work", {"label": label}).is_error
    raw = (tmp_path / "steps.jsonl").read_bytes()
    assert len(raw) <= MAX_LINE_BYTES + 1
    (step,) = strict_lines(tmp_path)
    marker = step["arguments"]
    assert marker["__truncated__"] == "steps/00001-arguments.json"
    validated = {"label": label, "block": False}  # the arguments as validated, defaults included
    assert marker["bytes"] == len(json.dumps(validated))
    assert marker["head"].startswith('{"label": "xxx')
    assert saved_value(tmp_path / "steps.jsonl", marker) == validated
    assert step["result"].startswith('{"observed_after": "work"')  # the 60 kB model-facing text stays inline


def test_saved_values_never_overwrite_each_other(tmp_path):
    # Two logs in one folder whose calls share ids.
    for _ in range(2):
        steps = StepLog(tmp_path / "steps.jsonl")
        steps.append(StepRecord(call_id=1, tool="t", arguments="y" * 100_000))
        steps.close()
    files = [s["arguments"]["__truncated__"] for s in strict_lines(tmp_path)]
    assert len(set(files)) == 2
    assert all(saved_value(tmp_path / "steps.jsonl", s["arguments"]) == "y" * 100_000 for s in strict_lines(tmp_path))


def test_the_largest_fields_are_saved_until_the_line_fits(tmp_path):
    steps = StepLog(tmp_path / "steps.jsonl")
    # Three fields of 40 kB each: none is over the field limit, together they are over the line limit.
    steps.append(StepRecord(call_id=7, tool="t", arguments="a" * 40_000, result="b" * 41_000, error="c" * 39_000))
    steps.close()
    (step,) = strict_lines(tmp_path)
    assert len((tmp_path / "steps.jsonl").read_bytes()) <= MAX_LINE_BYTES + 1
    assert step["result"]["__truncated__"] == "steps/00007-result.json"
    assert step["arguments"]["__truncated__"] == "steps/00007-arguments.json"
    assert step["error"] == "c" * 39_000


# ---- results and handlers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("cycle", "result could not be encoded: ValueError: Circular reference detected"),
        ("deep", "result could not be encoded: RecursionError: "),
        ("tuple_key", "result could not be encoded: TypeError: keys must be str"),
        ("opaque", "result could not be encoded: RuntimeError: no repr"),
        ("not_a_dict", "TypeError: the tool returned a ToolResult whose data is a list, not a dict"),
        ("text_images", "TypeError: the tool returned a ToolResult whose images[0] is a str, not PNG bytes"),
        ("unprintable", "Unprintable: <unprintable message>"),
    ],
)
def test_a_result_that_cannot_be_encoded_is_an_error_naming_the_cause(kit, tmp_path, kind, error):
    result = kit.execute_tool("emit", {"kind": kind})
    assert result.error.startswith(error)
    json.loads(result.to_text())
    (step,) = strict_lines(tmp_path)
    assert step["error"].startswith(error)
    assert not kit.execute_tool("work", {"label": "alive"}).is_error


def test_lone_surrogates_in_a_result_are_escaped_for_the_model_and_the_log(kit, tmp_path):
    result = kit.execute_tool("emit", {"kind": "surrogate"})
    assert result.error is None
    text = result.to_text()
    text.encode("utf-8")  # valid UTF-8, whatever the tool returned
    assert '"a\\ud800b"' in text
    (step,) = strict_lines(tmp_path)
    assert step["result"] == text


def test_a_value_that_cannot_be_written_is_marked_and_the_rest_of_the_line_kept(kit, tmp_path):
    kit.execute_tool("nope", {"a": 1, "o": Opaque(), "m": HostileMapping()})
    kit.execute_tool("nope", HostileMapping())
    first, second = strict_lines(tmp_path)
    assert first["arguments"] == {
        "a": 1,
        "o": {"__truncated__": None, "reason": "could not be written: RuntimeError: no repr"},
        "m": {"__truncated__": None, "reason": "could not be written: RuntimeError: no keys"},
    }
    assert second["arguments"] == {"__truncated__": None, "reason": "could not be written: RuntimeError: no keys"}
    assert second["error"].startswith("unknown tool 'nope'")


def test_a_record_that_cannot_be_encoded_leaves_a_reduced_line(kit, tmp_path, monkeypatch):
    def out_of_memory(value, depth=0):
        raise MemoryError("no room for the record")

    monkeypatch.setattr(step_line, "plain", out_of_memory)
    result = kit.execute_tool("nope", {"a": 1})
    (step,) = strict_lines(tmp_path)
    assert step == {
        "segment": 1,
        "call_id": 1,
        "tool": "nope",
        "started_at": step["started_at"],
        "ended_at": step["ended_at"],
        "error": result.error,
        "reduced": "the full record could not be encoded: MemoryError: no room for the record",
    }
    assert step["started_at"] <= step["ended_at"] <= time.time()


def test_a_tool_name_that_is_not_a_string_is_refused_with_one_line(kit, tmp_path):
    result = kit.execute_tool(["work"], {"label": "x"})  # type: ignore[arg-type]
    assert result.error == "tool name must be a string, got list"
    (step,) = strict_lines(tmp_path)
    assert step["tool"] == ["work"]


def test_a_refusal_naming_a_lone_surrogate_is_logged_on_a_strict_utf8_console(kit, tmp_path):
    # A console or log file is UTF-8: a refusal line carrying the raw text would be lost ("Logging error").
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    handler = logging.StreamHandler(stream)
    handler.handleError = lambda record: pytest.fail(f"the refusal could not be logged: {record.msg}")
    logger = logging.getLogger("rpent.tools")
    logger.addHandler(handler)
    try:
        result = kit.execute_tool("\ud800", {"\udfff": 1})
        kit.execute_tool("work", {"\udfff": 1})
    finally:
        logger.removeHandler(handler)
    assert result.error.startswith("unknown tool")
    lines = stream.buffer.getvalue().decode("utf-8").splitlines()
    assert len(lines) == 2 and "(\\ud800) refused: unknown tool '\\ud800'" in lines[0], lines
    assert lines[1].startswith("call 2 (work) refused") and "\\udfff" in lines[1], lines


def test_a_call_after_close_still_leaves_its_line(kit, tmp_path):
    kit.close()
    assert "toolkit is closed" in kit.execute_tool("work", {"label": "late"}).error
    (step,) = strict_lines(tmp_path)
    assert step["arguments"] == {"label": "late"}


def test_a_torn_last_line_does_not_swallow_the_next_record(tmp_path):
    (tmp_path / "steps.jsonl").write_bytes(b'{"call_id": 1, "tool": "wo')  # a crash mid-write
    steps = StepLog(tmp_path / "steps.jsonl")
    steps.append(StepRecord(call_id=1, tool="work"))
    steps.close()
    (step,) = read_steps(tmp_path / "steps.jsonl")
    assert {key: step[key] for key in ("segment", "call_id", "tool")} == {"segment": 1, "call_id": 1, "tool": "work"}


def test_run_log_keeps_a_line_carrying_a_lone_surrogate(tmp_path):
    # A tool's error can carry a path a model sent; run.log is UTF-8 and must not drop the line.
    from rpent.record.run_log import RUN_LOG, RunLog
    from rpent.record.segments import open_segment
    from rpent.record.values import describe_exception

    with RunLog(open_segment(tmp_path / "run")):
        logging.getLogger("rpent.tools.toolkit").warning("read_text_file raised %s", OSError("no file '\udc80'"))
        logging.getLogger("rpent.tools.toolkit").warning("then %s", "the next line")
    lines = (tmp_path / "run" / RUN_LOG).read_text(encoding="utf-8").splitlines()
    assert lines[-2].endswith("read_text_file raised no file '\\udc80'") and lines[-1].endswith("then the next line")
    assert describe_exception(ValueError("\ud800")) == "ValueError: \\ud800"

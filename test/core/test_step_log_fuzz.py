"""Fuzzed calls against a recording toolkit: every call leaves one strict, bounded line in steps.jsonl."""

from __future__ import annotations

import json
import math
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rpent.record.steps import MAX_LINE_BYTES, saved_value
from rpent.tools import ToolResult

from .test_step_log import EMITTED, HostileMapping, HostileToolkit, Opaque, nested_list, strict_lines
from .toolkits import Gates

REAL_TOOLS = ["read_image", "write_text_file", "read_text_file", "list_dir"]
TOY_TOOLS = ["work", "peek", "fail", "paint", "finish", "emit"]
ODD_NAMES: list[Any] = ["nope", "", "\ud800", "x" * 100_000, "READ_IMAGE", 7, None, ("work",), b"work"]
KEYS: list[Any] = [
    "path", "text", "label", "block", "meet", "frames", "status", "summary", "kind", "max_bytes", "ctx", "x", "",
    "\udfff", "é", 1, 1.5, None, True, (1, 2), frozenset({3}), math.nan,
]  # fmt: skip
# Paths the tools may meet; record files (steps.jsonl, images/) are only ever read, see the report in
# issue 13: a model that may write into the output directory can also replace steps.jsonl.
PATHS = ["a.txt", "images", ".", "..", "/etc/passwd", "\ud800", "x" * 5000, "nope/../../x", "steps.jsonl", "steps", ""]


class CallFuzzer:
    """Seeded generator of awkward (name, arguments) pairs."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def name(self) -> Any:
        roll = self.rng.random()
        if roll < 0.4:
            return self.rng.choice(REAL_TOOLS)
        if roll < 0.85:
            return self.rng.choice(TOY_TOOLS)
        return self.rng.choice(ODD_NAMES)

    def scalar(self) -> Any:
        rng = self.rng
        return rng.choice(
            [
                None, True, False, 0, -1, rng.randint(-(10**6), 10**6), 10**400, 2**64,
                rng.uniform(-1e6, 1e6), 1e308, math.nan, math.inf, -math.inf, -0.0,
                "", "label", "a\ud800b", "\udc00", "é" * rng.randint(1, 30), "\x00\x1f\"\\", "💥", "\u2028\x85\u2029",
                np.float64(math.nan), np.int64(3), np.array([math.nan, 1.0]), Decimal("1.5"), b"\xff\x00",
                {1, 2}, Opaque(),
            ]
        )  # fmt: skip

    def value(self, depth: int = 0) -> Any:
        rng = self.rng
        roll = rng.random()
        if roll < 0.005:
            return "s" * rng.randint(70_000, 300_000)  # over the 64 kB field limit
        if roll < 0.01:
            return nested_list(rng.choice([50, 101, 3000]))
        if roll < 0.012:
            loop: list[Any] = []
            loop.append(loop)
            return loop
        if depth > 3 or roll < 0.6:
            return self.scalar()
        if roll < 0.8:
            return [self.value(depth + 1) for _ in range(rng.randint(0, 4))]
        if roll < 0.95:
            return {self.key(): self.value(depth + 1) for _ in range(rng.randint(0, 4))}
        return tuple(self.value(depth + 1) for _ in range(rng.randint(0, 3)))

    def key(self) -> Any:
        return self.rng.choice(KEYS)

    def well_formed(self, name: Any) -> dict[str, Any]:
        rng = self.rng
        return {
            "read_image": lambda: {"path": rng.choice(PATHS)},
            "read_text_file": lambda: {"path": rng.choice(PATHS), "max_bytes": rng.randint(1, 200_000)},
            "list_dir": lambda: {"path": rng.choice(PATHS)},
            # Writes go to names no record file has; text may be awkward.
            "write_text_file": lambda: {
                "path": rng.choice(["a.txt", "\ud800", "..", "/tmp/x", ""]),
                "text": rng.choice(["", "x", "\ud800", "é" * 100]),
            },
            "work": lambda: {"label": rng.choice(["a", "\ud800", "x" * 80_000])},
            "peek": lambda: {"label": "p"},
            "fail": lambda: {"message": rng.choice(["boom", "\ud800"])},
            "paint": lambda: {"frames": rng.randint(1, 3)},
            "finish": lambda: {"status": rng.choice(["success", "failure", "maybe"]), "summary": "s"},
            "emit": lambda: {"kind": rng.choice([*EMITTED, "unprintable"])},
        }.get(name, dict)()

    def arguments(self, name: Any) -> Any:
        rng = self.rng
        roll = rng.random()
        if roll < 0.35:
            args: Any = self.well_formed(name)
            if rng.random() < 0.3:
                args[self.key()] = self.value()
        elif roll < 0.75:
            args = {self.key(): self.value() for _ in range(rng.randint(0, 5))}
        elif roll < 0.85:
            args = self._json_text(name)
        elif roll < 0.88:
            args = "{" * rng.choice([10, 100_000]) + '"'
        elif roll < 0.9:
            args = HostileMapping()
        else:
            args = self.value()
        if isinstance(args, dict) and args.get("block") is True:
            args["block"] = False  # a blocking call would wait for a release no fuzz case sends
        return args

    def _json_text(self, name: Any) -> str | bytes:
        rng = self.rng
        choice = rng.random()
        if choice < 0.3:
            depth = rng.choice([99, 100, 101, 2000, 100_000])
            return '{"label": ' + "[" * depth + "]" * depth + "}"
        if choice < 0.4:
            return b'{"path": "\xff\xfe"}'
        if choice < 0.5:
            return '{"label": NaN, "x": Infinity}'
        if choice < 0.6:
            return '{"label": 1' + "0" * 5000 + "}"
        return json.dumps(self.well_formed(name))


def fuzz(toolkit: HostileToolkit, calls: int, seed: int) -> list[ToolResult]:
    fuzzer = CallFuzzer(seed)
    results = []
    for _ in range(calls):
        name = fuzzer.name()
        results.append(toolkit.execute_tool(name, fuzzer.arguments(name)))
    return results


def check_record(output_dir: Path, calls: int, results: list[ToolResult]) -> dict[str, int]:
    raw = (output_dir / "steps.jsonl").read_bytes()
    sizes = [len(line) for line in raw.split(b"\n")[:-1]]
    steps = strict_lines(output_dir)
    assert len(raw.decode("utf-8").splitlines()) == len(steps)  # a line for every splitter
    lost = calls - len(steps)
    assert lost == 0, f"{lost} of {calls} calls left no line"
    assert sorted(s["call_id"] for s in steps) == list(range(1, calls + 1))
    assert max(sizes) <= MAX_LINE_BYTES, f"a line of {max(sizes)} bytes"
    saved = 0
    for step in steps:
        for value in step.values():
            if isinstance(value, dict) and isinstance(value.get("__truncated__"), str):
                saved_value(output_dir / "steps.jsonl", value)  # exists and is strict JSON
                saved += 1
    for result in results:
        assert isinstance(result, ToolResult)
        result.to_text().encode("utf-8")  # what the model reads: always text, always valid UTF-8
        assert not (result.error or "").startswith("internal error"), result.error
    reduced = sum("reduced" in step for step in steps)
    assert reduced == 0  # an awkward value costs only itself; the reduced line is the last resort
    return {"lines": len(steps), "max_line_bytes": max(sizes), "saved_values": saved, "reduced_lines": reduced}


def run_fuzz(tmp_path: Path, calls: int, seed: int) -> dict[str, int]:
    toolkit = HostileToolkit(robot=Gates(), output_dir=tmp_path)
    try:
        results = fuzz(toolkit, calls, seed)
    finally:
        toolkit.close()
    figures = check_record(tmp_path, calls, results)
    print(f"fuzz seed {seed}: {calls} calls, {figures}")
    return figures


def test_fuzzed_calls_each_leave_one_strict_bounded_line(tmp_path):
    figures = run_fuzz(tmp_path, 1000, seed=13)
    assert figures["saved_values"] > 0  # the generator did reach the size limit


@pytest.mark.slow
def test_ten_thousand_fuzzed_calls_lose_no_line(tmp_path):
    run_fuzz(tmp_path, 10_000, seed=1313)

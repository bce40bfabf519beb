"""`rpent run --robot libero` end to end: the runner starts the env_server, replays a recipe, stops it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from libero_helpers import requires_libero

pytestmark = [requires_libero, pytest.mark.slow]

RECIPES = Path(__file__).resolve().parents[2] / "robots" / "libero" / "recipes"


@pytest.mark.timeout(300)
def test_replayed_recipe_solves_libero_spatial_task_0_through_the_runner(tmp_path):
    from rpent.cli.main import main

    out = tmp_path / "run"
    code = main(
        [
            "run",
            "--robot",
            "libero",
            "--suite",
            "libero_spatial",
            "--task-id",
            "0",
            "--planner",
            "replay",
            "--recipe",
            str(RECIPES / "libero_spatial_task0_pick_place.jsonl"),
            "--output-dir",
            str(out),
            "--quiet",
        ]
    )
    result = json.loads((out / "result.json").read_text())
    assert code == 0, result
    assert result["solved"] is True
    assert (out / "episode.mp4").stat().st_size > 10_000
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [s["tool"] for s in steps][-1] == "finish"

"""What the dashboard form offers to run (planners, recipes, reset), and how it refuses and warns.

A session started as `rpent run --robot toy --dashboard` (no --planner, no --recipe) must be able
to start a task: replay with the robot's bundled recipe is always offered.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from dashboard_support import TOY_RECIPE

DONE = lambda s: bool(s["task"]) and s["task"]["status"] not in ("running", "aborting")  # noqa: E731


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_without_planner_flags_the_form_offers_replay_with_the_bundled_recipe_and_says_why_not_api(served_factory) -> None:
    served = served_factory()
    spec = served.client.get("/api/spec").json()
    planners = {p["name"]: p for p in spec["planners"]}
    assert planners["replay"]["available"] and planners["replay"]["recipes"] == [str(TOY_RECIPE)]
    assert not planners["api"]["available"] and "ANTHROPIC_API_KEY" in planners["api"]["reason"]
    assert spec["default_planner"] == "replay" and spec["default_recipe"] == str(TOY_RECIPE)
    # The form's defaults start a task (it used to answer "--recipe: required with --planner replay").
    response = served.client.post("/api/tasks", json={"fields": {}, "planner": "replay", "recipe": str(TOY_RECIPE)})
    assert response.status_code == 201, response.text
    state = served.wait_state(DONE)
    assert state["task"]["planner"] == "replay" and state["task"]["recipe"] == str(TOY_RECIPE)
    assert state["task"]["solved"] is True


@pytest.mark.parametrize(("choice", "message"), [
    ({"planner": "api"}, "planner: api is not available here ("),  # then the planner's own reason
    ({"planner": "gpt"}, "planner: must be one of ['api', 'claude_code', 'codex', 'replay'], got 'gpt'"),
    ({"planner": "replay", "recipe": "/etc/passwd"}, "recipe: must be one of the offered recipes"),
    ({"planner": "replay", "reset": "yes"}, "reset: must be true or false, got 'yes'"),
])
def test_a_refused_start_answers_400_naming_the_field_and_is_logged(served_factory, caplog: pytest.LogCaptureFixture,
                                                                      choice: dict, message: str) -> None:
    served = served_factory()
    with caplog.at_level(logging.WARNING, logger="rpent.dashboard"):
        response = served.client.post("/api/tasks", json={"fields": {}, **choice})
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)
    assert any(r.getMessage().startswith("refused to start a task: " + message) for r in caplog.records)
    assert served.session.snapshot()["task"] is None  # nothing started


def test_finish_success_with_solved_false_is_flagged_on_the_page_state_and_in_the_record(served_factory,
                                                                                        tmp_path: Path) -> None:
    # The bundled recipe puts the red block in the bin; this task asks for the blue one.
    served = served_factory("--target-block", "blue")
    assert served.client.post("/api/tasks", json={"fields": {}}).status_code == 201
    task = served.wait_state(DONE)["task"]
    assert task["finish"]["status"] == "success" and task["solved"] is False
    assert task["summary"]["disagreement"].startswith("finish=success but solved()=False")
    run_log = (tmp_path / "runs" / "task-001" / "run.log").read_text()
    assert "finish=success but solved()=False" in run_log

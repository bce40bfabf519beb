"""The dashboard's HTTP API against the toy robot: tasks, records, abort, operator requests."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
from dashboard_support import TOY_RECIPE

from rpent.dashboard.cli import DashboardServer
from rpent.dashboard.interaction import OperatorInteraction, StaleRequest, interaction_from
from rpent.robot import ConfigError

pytestmark = pytest.mark.timeout(90)

REPLAY = ("--planner", "replay", "--recipe", str(TOY_RECIPE))


def ended(state: dict) -> bool:
    return bool(state["task"]) and state["task"]["status"] not in ("running", "aborting")


def test_tasks_run_one_after_another_on_the_shared_world_and_write_the_run_record(served_factory) -> None:
    served = served_factory(*REPLAY)
    world = served.session._shared_kwargs["world"]
    assert served.client.post("/api/tasks", json={"fields": {}}).json() == {"task_id": "task-001"}
    state = served.wait_state(ended)
    task = state["task"]
    assert task["status"] == "finished" and task["solved"] is True and task["finish"]["status"] == "success"
    assert [r["tool"] for r in task["timeline"]][:3] == ["get_state", "move_to", "move_to"]
    assert all(r["status"] == "ok" for r in task["timeline"])
    assert task["counters"]["tool_calls"] == len(task["timeline"]) and task["counters"]["turns"] == 8
    record = Path(served.session.output_root) / "task-001"
    for name in ("run.log", "steps.jsonl", "episode.mp4", "result.json", "recipe_toy.jsonl"):
        assert (record / name).is_file(), name
    assert served.client.get(task["artifacts"]["steps.jsonl"]).text == (record / "steps.jsonl").read_text()
    move = next(r for r in task["timeline"] if r["tool"] == "move_to")
    assert served.client.get(move["clip"]).status_code == 200
    assert served.client.get(move["images"][0]).headers["content-type"] == "image/png"
    # The next task reuses the same (shared) world object.
    assert served.client.post("/api/tasks", json={"fields": {"task": "Again."}}).status_code == 201
    state = served.wait_state(lambda s: ended(s) and s["task"]["id"] == "task-002")
    assert served.session._shared_kwargs["world"] is world
    assert [t["id"] for t in state["tasks"]] == ["task-001", "task-002"]
    assert json.loads((Path(served.session.output_root) / "task-002" / "result.json").read_text())["task"] == "Again."


def test_artifact_paths_cannot_leave_the_task_record(served_factory) -> None:
    served = served_factory(*REPLAY)
    served.client.post("/api/tasks", json={"fields": {}})
    served.wait_state(ended)
    assert served.client.get("/artifacts/task-001/..%2F..%2Fetc%2Fpasswd").status_code == 404
    assert served.client.get("/artifacts/task-009/result.json").status_code == 404


def test_bad_form_values_are_refused_naming_the_field_and_nothing_starts(served_factory) -> None:
    served = served_factory(*REPLAY)
    response = served.client.post("/api/tasks", json={"fields": {"task": 7}})
    assert response.status_code == 400 and "fields.task" in response.json()["error"]
    response = served.client.post("/api/tasks", json={"fields": {"speed": 3}})
    assert response.status_code == 400 and "fields.speed: unknown field" in response.json()["error"]
    assert served.session.snapshot()["task"] is None


def test_a_second_task_is_refused_while_one_runs_and_abort_stops_the_motion(served_factory) -> None:
    served = served_factory(*REPLAY, "--speed", "0.01")  # 1 cm/s: the first move takes many seconds
    world = served.session._shared_kwargs["world"]
    served.client.post("/api/tasks", json={"fields": {}})
    served.wait_state(lambda s: any(r["tool"] == "move_to" and r["status"] == "running" for r in (s["task"] or {}).get("timeline", [])))
    assert served.client.post("/api/tasks", json={"fields": {}}).status_code == 409
    assert served.client.post("/api/task/abort", json={"reason": "test abort"}).json() == {"aborted": True}
    # abort returns once the motion has stopped short of its target, and the gripper stays put.
    stopped_at = list(world.gripper_xyz)
    assert world.stops == 1 and stopped_at != [0.1, 0.45, 0.1]
    state = served.wait_state(ended)
    assert list(world.gripper_xyz) == stopped_at
    task = state["task"]
    assert task["status"] == "aborted" and task["finish"]["operator_aborted"] is True
    assert next(r for r in task["timeline"] if r["tool"] == "move_to")["error"].startswith("cancelled")
    assert served.client.post("/api/task/abort", json={}).status_code == 409  # nothing runs now


def test_notes_land_in_the_finish_result(served_factory) -> None:
    served = served_factory(*REPLAY, "--speed", "0.2")
    served.client.post("/api/tasks", json={"fields": {}})
    served.wait_state(lambda s: bool(s["task"] and s["task"]["timeline"]))
    assert served.client.post("/api/task/note", json={"text": "cube was chipped"}).status_code == 200
    state = served.wait_state(ended, timeout_s=60)
    assert state["task"]["finish"]["operator_notes"] == ["cube was chipped"]
    assert json.loads((Path(served.session.output_root) / "task-001" / "result.json").read_text())[
        "finish_result"]["operator_notes"] == ["cube was chipped"]


def test_an_answer_to_an_approval_counts_once_and_stale_ids_authorise_nothing(served_factory) -> None:
    served = served_factory(*REPLAY)
    operator = interaction_from(served.session.events)
    assert operator is served.session.interaction
    results: list[bool] = []
    asking = threading.Thread(target=lambda: results.append(operator.request_approval("move to x=0.4", 20)))
    asking.start()
    state = served.wait_state(lambda s: len(s["requests"]) == 1)
    request_id = state["requests"][0]["id"]
    assert served.client.post(f"/api/requests/{request_id}", json={"answer": "yes"}).status_code == 400
    assert served.client.post(f"/api/requests/{request_id}", json={"approve": False}).json() == {"outcome": "denied"}
    asking.join(10)
    assert results == [False]
    replay = served.client.post(f"/api/requests/{request_id}", json={"approve": True})
    assert replay.status_code == 409 and "not pending" in replay.json()["error"]
    assert served.session.snapshot()["requests"] == []


def test_approval_times_out_as_denied_and_a_late_approve_is_refused() -> None:
    events: list[tuple[str, dict]] = []
    operator = OperatorInteraction(lambda kind, payload: events.append((kind, payload)))
    assert operator.request_approval("close the gripper", timeout_s=0.05) is False
    request_id = events[0][1]["id"]
    assert [k for k, _ in events] == ["operator_request", "operator_request_closed"]
    assert events[1][1]["outcome"] == "timed_out"
    with pytest.raises(StaleRequest):
        operator.respond(request_id, approve=True)


def test_abort_denies_a_motion_waiting_for_approval(served_factory) -> None:
    served = served_factory(*REPLAY, "--speed", "0.01")
    served.client.post("/api/tasks", json={"fields": {}})
    served.wait_state(lambda s: bool(s["task"] and s["task"]["timeline"]))
    results: list[bool] = []
    asking = threading.Thread(target=lambda: results.append(served.session.interaction.request_approval("move", 30)))
    asking.start()
    served.wait_state(lambda s: len(s["requests"]) == 1)
    served.client.post("/api/task/abort", json={})
    asking.join(10)
    assert results == [False]


def test_a_non_loopback_address_needs_a_token(served_factory) -> None:
    served = served_factory(*REPLAY)
    # Refused before any socket is bound: no traffic leaves loopback.
    with pytest.raises(ConfigError, match=r"--host: .* token is required"):
        DashboardServer(served.session, host="0.0.0.0", port=0)
    server = DashboardServer(served.session, host="127.0.0.1", port=0, token="s3cret").start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as client:
            assert client.get("/api/state").status_code == 401
            assert client.get("/api/state", headers={"Authorization": "Bearer s3cret"}).status_code == 200
            assert client.get("/?token=wrong").status_code == 401
            page = client.get("/?token=s3cret")
            assert page.status_code == 200 and "rpent_dashboard_token" in page.headers["set-cookie"]
            assert client.get("/api/state").status_code == 200  # the cookie now carries the token
    finally:
        server.stop()


def test_other_web_pages_cannot_drive_the_robot_through_the_operators_browser(served_factory) -> None:
    served = served_factory(*REPLAY)
    # A cross-site "simple" POST (no CORS preflight) is refused before anything starts.
    simple = served.client.post("/api/tasks", content='{"fields": {}}', headers={"Content-Type": "text/plain"})
    assert simple.status_code == 415
    foreign = served.client.post("/api/tasks", json={"fields": {}}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    # DNS rebinding: the page's own name arrives as Host.
    assert served.client.get("/api/state", headers={"Host": "evil.example"}).status_code == 400
    assert served.session.snapshot()["task"] is None
    same_origin = served.client.post("/api/tasks", json={"fields": {}}, headers={"Origin": served.base_url})
    assert same_origin.status_code == 201


def test_the_stop_button_stops_the_motion_refuses_every_motion_and_only_release_lets_them_run(served_factory) -> None:
    served = served_factory(*REPLAY, "--speed", "0.01")  # 1 cm/s: the first move takes many seconds
    world = served.session._shared_kwargs["world"]
    served.client.post("/api/tasks", json={"fields": {}})
    served.wait_state(lambda s: any(r["tool"] == "move_to" and r["status"] == "running" for r in (s["task"] or {}).get("timeline", [])))
    stopped = served.client.post("/api/stop", json={"reason": "a hand in the cell"}).json()
    assert stopped["latched"] is True and stopped["line"].startswith("stopped by the dashboard at ")
    assert stopped["line"].endswith("(a hand in the cell): an operator must release it")
    # The task's toolkit follows the robot's latch: its motion is cancelled, and every motion after is refused.
    state = served.wait_state(ended)
    assert state["stop_latch"] == {"latched": True, "line": stopped["line"], "by": "the dashboard",
                                   "reason": "a hand in the cell"}
    moves = [r for r in state["task"]["timeline"] if r["tool"] == "move_to"]
    assert moves[0]["status"] != "ok" and all(r["status"] != "ok" for r in moves)
    result = json.loads((Path(served.session.output_root) / "task-001" / "result.json").read_text())
    assert result["stop_latch"]["latched"] is True and [e["event"] for e in result["stop_events"]] == ["stop"]
    # A task started while stopped fails at its scene reset (it would move the arm), naming the latch.
    stopped_at = list(world.gripper_xyz)
    served.client.post("/api/tasks", json={"fields": {"task": "While stopped."}})
    state = served.wait_state(lambda s: ended(s) and s["task"]["id"] == "task-002")
    assert list(world.gripper_xyz) == stopped_at  # nothing moved
    assert stopped["line"] in json.dumps(state["task"]), state["task"]
    assert served.client.post("/api/stop/release", json={}).json() == {"released": True}
    assert served.client.post("/api/stop/release", json={}).status_code == 409
    assert served.session.snapshot()["stop_latch"]["latched"] is False
    served.client.post("/api/tasks", json={"fields": {"task": "Released."}})
    state = served.wait_state(lambda s: s["task"]["id"] == "task-003" and any(
        r["tool"] == "move_to" and r["status"] == "running" for r in s["task"]["timeline"]))
    assert state["task"]["reset"]["status"] == "done"  # the reset and the motions run again
    assert served.client.post("/api/task/abort", json={"reason": "enough"}).json() == {"aborted": True}

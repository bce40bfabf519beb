"""The dashboard in a real browser (headless Chromium driven by Playwright) against the toy robot.

Screenshots of the main views go to test-artifacts/dashboard/.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from browser_support import NEEDS_CHROMIUM, SHOTS, WAIT_MS, open_dashboard, shot
from dashboard_support import TOY_RECIPE
from fakes import FakeModelServer, Reply, Text, ToolUse

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    NEEDS_CHROMIUM,
]

REPLAY = ("--planner", "replay", "--recipe", str(TOY_RECIPE))


def send_from_operator_panel(page: Any, field: str, button: str, text: str) -> None:
    """Type `text` into the panel's `field`, press `button`, and wait until the operator log shows it:
    the page echoes only what the session accepted, so the test goes on once the server has it."""
    page.fill(f"[data-testid={field}]", text)
    page.click(f"[data-testid={button}]")
    page.wait_for_selector(f"[data-testid=operator-log] li:has-text('{text}')", timeout=WAIT_MS)


def test_start_a_task_from_the_form_and_watch_frames_and_timeline(served_factory, page: Any) -> None:
    served = served_factory(*REPLAY, "--speed", "0.3")
    open_dashboard(page, served)
    assert page.inner_text("[data-testid=components]").count("ready") == 1
    # The live camera view shows a picture before any task runs.
    # data-frame is set in the load handler, which runs after naturalWidth is already known.
    page.wait_for_function("(img => img.naturalWidth > 0 && img.dataset.frame !== undefined)"
                           "(document.querySelector('[data-testid=frame-top]'))", timeout=WAIT_MS)
    first_frame = int(page.get_attribute("[data-testid=frame-top]", "data-frame"))
    page.fill("#field-task", "Put the red block in the bin, gently.")
    shot(page, "01-ready")
    page.click("[data-testid=start-task]")
    page.wait_for_selector("[data-testid=timeline-row][data-tool=move_to]", timeout=WAIT_MS)
    # While the arm moves the view updates.
    page.wait_for_function(f"Number(document.querySelector('[data-testid=frame-top]').dataset.frame) > {first_frame}",
                           timeout=WAIT_MS)
    shot(page, "02-running")
    page.wait_for_selector("[data-testid=task-status]:has-text('finished')", timeout=WAIT_MS)
    assert page.inner_text("[data-testid=finish-status]") == "success"
    assert page.inner_text("[data-testid=solved]") == "true"
    rows = page.query_selector_all("[data-testid=timeline-row]")
    assert [r.get_attribute("data-tool") for r in rows][:2] == ["get_state", "move_to"]
    assert all(r.get_attribute("data-status") == "ok" for r in rows)
    assert page.query_selector("[data-testid=timeline-row][data-tool=move_to] a[data-clip]") is not None
    links = {a.get_attribute("data-artifact"): a.get_attribute("href") for a in page.query_selector_all("#artifacts a")}
    assert {"episode.mp4", "steps.jsonl", "recipe"} <= set(links)
    assert served.client.get(links["steps.jsonl"]).status_code == 200
    assert served.session.snapshot()["task"]["fields"]["task"] == "Put the red block in the bin, gently."
    shot(page, "03-finished")


def test_abort_mid_motion_stops_the_arm_and_marks_the_task_aborted(served_factory, page: Any) -> None:
    served = served_factory(*REPLAY, "--speed", "0.01")  # the first move would take ~30 s
    world = served.session._shared_kwargs["world"]
    open_dashboard(page, served)
    page.click("[data-testid=start-task]")
    page.wait_for_selector("[data-testid=timeline-row][data-tool=move_to][data-status=running]", timeout=WAIT_MS)
    send_from_operator_panel(page, "note-input", "add-note", "stopped on purpose")
    page.click("[data-testid=abort]")
    page.wait_for_selector("[data-testid=task-status]:has-text('aborted')", timeout=WAIT_MS)
    assert world.stops == 1 and world.gripper_xyz != [0.1, 0.45, 0.1]
    # The cancelled call reads as cancelled, with the reason, in the console's words; never as an error.
    row = page.query_selector("[data-testid=timeline-row][data-tool=move_to]")
    assert row.get_attribute("data-status") == "cancelled"
    assert row.query_selector(".pill").inner_text() == "cancelled"
    assert "operator pressed Abort" in row.inner_text() and "error" not in row.inner_text()
    # The task list says "aborted" once, not "aborted / aborted" (the run's status and the finish status).
    history = page.inner_text("[data-testid=task-history] li[data-task=task-001]")
    assert history.count("aborted") == 1, history
    finish = served.session.snapshot()["task"]["finish"]
    assert finish["operator_aborted"] is True and finish["operator_notes"] == ["stopped on purpose"]
    shot(page, "04-aborted")


def test_message_typed_in_the_page_reaches_the_planner_at_the_next_turn(
    served_factory, page: Any, model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RPENT_TEST_MODEL_KEY", "test-key")
    served = served_factory("--planner", "api", "--model", "fake-model", "--base-url", model_server.base_url,
                            "--api-key-env", "RPENT_TEST_MODEL_KEY")
    message_shown = threading.Event()
    seen_in_request: list[dict] = []

    def first(body: dict) -> Reply:
        # Hold the model's first turn open until the operator's message is queued for the planner.
        assert message_shown.wait(60), "the test never sent the operator message"
        served.session._task.inputs.join()
        return Reply([Text("I will look at the table before moving anything."), ToolUse("get_state", {})])

    def second(body: dict) -> Reply:
        seen_in_request.append(body["messages"][-1])
        return Reply([ToolUse("finish", {"status": "failure", "summary": "stopped as the operator asked"})])

    model_server.script(first, second)
    open_dashboard(page, served)
    page.click("[data-testid=start-task]")
    page.wait_for_selector("[data-testid=task-status]:has-text('running')", timeout=WAIT_MS)
    send_from_operator_panel(page, "message-input", "send-message", "the red block is slippery, stop after looking")
    message_shown.set()
    page.wait_for_selector("[data-testid=planner-text]:has-text('I will look at the table')", timeout=WAIT_MS)
    page.wait_for_selector("[data-testid=task-status]:has-text('finished')", timeout=WAIT_MS)
    texts = [b.get("text") for b in seen_in_request[0]["content"] if b.get("type") == "text"]
    assert "Message from the operator: the red block is slippery, stop after looking" in texts
    assert page.inner_text("[data-testid=finish-status]") == "failure"
    assert served.session.snapshot()["task"]["counters"]["turns"] == 2
    page.wait_for_selector("[data-testid=counters] dd[data-counter=turns]:has-text('2')", timeout=WAIT_MS)
    shot(page, "05-message")


def test_each_task_starts_from_the_initial_scene_and_the_task_list_says_finish_and_solved(served_factory, page: Any) -> None:
    served = served_factory(*REPLAY)
    open_dashboard(page, served)
    assert page.is_checked("[data-testid=reset-check]")  # the toy resets its table by default
    for n in (1, 2):  # the second pick finds the red block where the first one found it
        page.click("[data-testid=start-task]")
        page.wait_for_selector(f"[data-testid=task-title]:has-text('task-00{n}')", timeout=WAIT_MS)
        page.wait_for_selector("[data-testid=task-status]:has-text('finished')", timeout=WAIT_MS)
        assert page.inner_text("[data-testid=reset-status]") == "done"
        assert page.inner_text("[data-testid=finish-status]") == "success"
        assert page.inner_text("[data-testid=solved]") == "true"
        assert page.get_attribute("[data-testid=timeline-row][data-tool=grasp]", "data-status") == "ok"
    rows = [" ".join(li.inner_text().split()) for li in page.query_selector_all("[data-testid=task-history] li")]
    assert rows == ["task-001 finished finish success · solved() yes", "task-002 finished finish success · solved() yes"]
    shot(page, "08-second-task-after-reset")


def test_timeline_rows_are_compact_and_each_view_is_labelled_with_its_camera(served_factory, page: Any) -> None:
    served = served_factory(*REPLAY)
    open_dashboard(page, served)
    page.click("[data-testid=start-task]")
    page.wait_for_selector("[data-testid=task-status]:has-text('finished')", timeout=WAIT_MS)
    rows = page.query_selector_all("[data-testid=timeline-row]")
    assert len(rows) >= 8
    heights = [r.bounding_box()["height"] for r in rows]
    assert max(heights) <= 48, heights  # one line each, thumbnails included
    moved = page.query_selector("[data-testid=timeline-row][data-tool=move_to]")
    thumbs = moved.query_selector_all(".thumb")
    assert [t.get_attribute("data-camera") for t in thumbs] == ["top"]  # the toy's one camera
    assert [t.query_selector("span").inner_text() for t in thumbs] == ["top"]
    assert thumbs[0].query_selector("img").evaluate("img => img.naturalWidth") > 0


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_operator_approves_or_denies_a_motion_request_in_the_page(served_factory, page: Any, decision: str) -> None:
    # The toy has no approval mode of its own: a request is made the way a robot's approval channel does.
    served = served_factory(*REPLAY)
    operator = served.session.interaction
    open_dashboard(page, served)
    results: list[bool] = []
    asking = threading.Thread(
        target=lambda: results.append(operator.request("arm-7", "move_to x=0.40 y=0.10 z=0.15 (22 cm)", 30)))
    asking.start()
    page.wait_for_selector("[data-testid=request][data-kind=approval]:has-text('move_to x=0.40')", timeout=WAIT_MS)
    shot(page, f"06-approval-{decision}")
    page.click(f"[data-testid=request] [data-testid={decision}]")
    asking.join(30)
    assert results == [decision == "approve"]
    page.wait_for_selector("[data-testid=request]", state="detached", timeout=WAIT_MS)


def test_operator_answers_a_planner_question_in_the_page(served_factory, page: Any) -> None:
    served = served_factory(*REPLAY)
    open_dashboard(page, served)
    answers: list[str | None] = []
    asking = threading.Thread(target=lambda: answers.append(served.session.interaction.ask("Which block first?", 30)))
    asking.start()
    page.wait_for_selector("[data-testid=request][data-kind=question]:has-text('Which block first?')", timeout=WAIT_MS)
    page.fill("[data-testid=request] [data-testid=answer-input]", "the blue one")
    shot(page, "07-question")
    page.click("[data-testid=request] [data-testid=answer]")
    asking.join(30)
    assert answers == ["the blue one"]
    page.wait_for_selector("[data-testid=request]", state="detached", timeout=WAIT_MS)


def test_page_keeps_working_after_the_event_stream_reconnects(served_factory, page: Any) -> None:
    served = served_factory(*REPLAY)
    open_dashboard(page, served)
    # Reopen the stream from the last event the page applied (what it does after a dropped
    # connection); events published meanwhile are neither lost nor applied twice.
    page.evaluate("S.source.close()")
    served.session.sink.publish("operator_note_probe", {"while": "disconnected"})
    page.evaluate("connect()")
    page.click("[data-testid=start-task]")
    page.wait_for_selector("[data-testid=task-status]:has-text('finished')", timeout=WAIT_MS)
    rows = page.query_selector_all("[data-testid=timeline-row]")
    assert len(rows) == len(served.session.snapshot()["task"]["timeline"])
    assert os.path.isdir(SHOTS)

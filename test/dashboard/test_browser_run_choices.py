"""The task form's run choices, refusals and warnings in headless Chromium (toy robot)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from browser_support import CHROMIUM, WAIT_MS, open_dashboard, shot
from dashboard_support import TOY_RECIPE

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)"),
]


def test_the_page_loads_without_a_missing_file_and_serves_its_icon(served_factory, page: Any) -> None:
    served = served_factory()
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    open_dashboard(page, served)
    icon = page.get_attribute("link[rel=icon]", "href")
    assert served.client.get(icon).status_code == 200
    response = served.client.get("/favicon.ico")  # what browsers ask for when a page names none
    assert response.status_code == 200 and response.headers["content-type"].startswith("image/svg+xml")
    assert failed == []


def test_the_form_shows_what_will_run_and_a_refusal_from_the_server(served_factory, page: Any, tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    recipe = tmp_path / "mine.jsonl"
    shutil.copy(TOY_RECIPE, recipe)
    served = served_factory("--recipe", str(recipe))
    open_dashboard(page, served)
    assert page.input_value("[data-testid=planner-select]") == "replay"
    assert page.input_value("[data-testid=recipe-select]") == str(recipe)  # the command line's, first
    page.select_option("[data-testid=recipe-select]", str(TOY_RECIPE))
    assert page.inner_text("[data-testid=run-preview]") == \
        "Will run: scene reset, then replay of robots/toy/recipes/red_block_in_bin.jsonl."
    page.select_option("[data-testid=recipe-select]", str(recipe))
    recipe.unlink()  # moved away after the page was opened
    with caplog.at_level(logging.WARNING, logger="rpent.dashboard"):
        page.click("[data-testid=start-task]")
        page.wait_for_function("document.querySelector('[data-testid=form-error]').textContent.length > 0",
                               timeout=WAIT_MS)
    shown = page.inner_text("[data-testid=form-error]")
    assert str(recipe) in shown
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")] == [
        f"refused to start a task: {shown}"]
    shot(page, "refused-recipe")


def test_finish_success_that_solved_denies_is_shown_as_a_warning(served_factory, page: Any) -> None:
    served = served_factory("--target-block", "blue")  # the bundled recipe moves the red block
    open_dashboard(page, served)
    page.click("[data-testid=start-task]")
    page.wait_for_selector("[data-testid=task-status]:has-text('finished')", timeout=WAIT_MS)
    warning = page.locator("[data-testid=disagreement]")
    assert warning.is_visible()
    assert "finish=success but solved()=False" in warning.inner_text()
    row = page.locator("[data-testid=task-history] li[data-task=task-001]")
    assert "finish and solved() disagree" in row.inner_text() and row.get_attribute("class") == "disagree"
    shot(page, "finish-solved-disagree")


def test_the_reset_is_one_labelled_checkbox_and_the_preview_says_plainly_what_runs(served_factory, page: Any) -> None:
    served = served_factory()
    open_dashboard(page, served)
    control = page.locator("[data-testid=reset-control]")
    check, text = page.locator("[data-testid=reset-check]"), control.locator("span")
    assert text.inner_text() == "Reset the scene first"
    # The box sits on its label's line (not alone above a block of bold text), and the label toggles it.
    box, line = check.bounding_box(), text.bounding_box()
    assert abs((box["y"] + box["height"] / 2) - (line["y"] + line["height"] / 2)) < 4 and box["x"] < line["x"]
    assert line["height"] < 24 and control.bounding_box()["height"] < 30  # one line
    assert page.inner_text("[data-testid=reset-label]") == "gripper open at its start, blocks back where they started"
    assert page.is_checked("[data-testid=reset-check]")
    preview = page.locator("[data-testid=run-preview]")
    assert preview.inner_text() == "Will run: scene reset, then replay of robots/toy/recipes/red_block_in_bin.jsonl."
    text.click()
    assert not page.is_checked("[data-testid=reset-check]")
    assert preview.inner_text() == "Will run: replay of robots/toy/recipes/red_block_in_bin.jsonl, without a reset."
    # Recipes are named as typed from where the dashboard started; the full path is the tooltip.
    option = page.locator("[data-testid=recipe-select] option").first
    assert option.inner_text() == "robots/toy/recipes/red_block_in_bin.jsonl" and option.get_attribute("title") == str(TOY_RECIPE)
    shot(page, "reset-and-preview")

"""Each call's StepRecord: what `_capture_observation` returned is saved on it, its steps.jsonl line is
written from it, and a read-only analysis of a step's scene saves its images on that step."""

from __future__ import annotations

import json
from typing import Any

from rpent.record.step_record import StepRecord
from rpent.record.steps import read_steps
from rpent.tools import ToolContext, ToolResult, readonly, tool
from rpent.tools.images import decode_png, encode_png

from .toolkits import GATE_TOOLS, Gates, ObservingToolkit


@tool
@readonly
def look_back(*, ctx: ToolContext[Gates]) -> dict[str, Any]:
    """Keep the step the robot was last observed after."""
    ctx.state.setdefault("seen", []).append(ctx.last_step)
    return {"step": ctx.last_step.call_id}


@tool
@readonly
def analyse(*, ctx: ToolContext[Gates]) -> ToolResult:
    """An analysis of the scene the last observation showed (as LIBERO's segment is)."""
    import numpy as np

    png = encode_png(np.full((4, 4, 3), 200, np.uint8))
    return ToolResult(data={"step": ctx.last_step.call_id}, images=[png], image_names=["front"],
                      source_step=ctx.last_step)


def kit(tmp_path, gates: Gates) -> ObservingToolkit:
    return ObservingToolkit(robot=gates, output_dir=tmp_path, tools=[*GATE_TOOLS, look_back, analyse])


def test_capture_observation_saves_the_steps_record_and_its_line_is_written_from_it(tmp_path):
    toolkit = kit(tmp_path, Gates())
    toolkit.execute_tool("look_back")
    toolkit.execute_tool("work", {"label": "a"})
    toolkit.execute_tool("look_back")
    toolkit.execute_tool("peek", {"label": "read-only: no observation"})
    toolkit.execute_tool("look_back")
    toolkit.close()
    start, after_work, still = toolkit.state["seen"]
    assert (start.call_id, start.tool) == (0, "start")  # before any action: the scene as the run found it
    assert isinstance(after_work, StepRecord) and still is after_work  # a read-only call is no observation step
    assert (after_work.call_id, after_work.tool) == (2, "work")
    assert after_work.observation == {"observed_after": "work", "action": {"label": "a"},
                                      "elapsed_s": after_work.elapsed_s}
    assert after_work.elapsed_s > 0 and after_work.status == "ok" and after_work.images == ["00002_work_0.png"]
    line = next(s for s in read_steps(tmp_path / "steps.jsonl") if s["call_id"] == 2)
    assert line == json.loads(json.dumps({"segment": 1, **after_work.line()}))
    assert json.loads(after_work.result)["observed_after"] == "work"


def test_an_analysis_of_a_steps_scene_saves_its_images_on_that_step_not_under_its_own_call(tmp_path):
    toolkit = kit(tmp_path, Gates())
    before = toolkit.execute_tool("analyse")  # call 1: no action yet, so the start's scene (step 0)
    toolkit.execute_tool("work", {"label": "a"})  # call 2: an observation step with its own picture
    own = (tmp_path / "images" / "00002_work_0.png").read_bytes()
    first, second = toolkit.execute_tool("analyse"), toolkit.execute_tool("analyse")  # calls 3 and 4
    toolkit.execute_tool("look_back")
    toolkit.close()
    images = sorted(p.name for p in (tmp_path / "images").iterdir())
    assert images == ["00000_start_analyse-front.png", "00002_work_0.png", "00002_work_analyse-front.2.png",
                      "00002_work_analyse-front.png"]
    assert (tmp_path / "images" / "00002_work_0.png").read_bytes() == own  # the step's own picture stays
    assert (before.data, first.data, second.data) == ({"step": 0}, {"step": 2}, {"step": 2})
    assert [p.rsplit("/", 1)[1] for p in first.image_paths + second.image_paths] == [
        "00002_work_analyse-front.png", "00002_work_analyse-front.2.png"]
    assert decode_png((tmp_path / "images" / "00002_work_analyse-front.2.png").read_bytes()).shape == (4, 4, 3)
    (step,) = toolkit.state["seen"]
    assert step.call_id == 2 and step.artifacts == ["00002_work_analyse-front.png", "00002_work_analyse-front.2.png"]
    lines = {s["call_id"]: s for s in read_steps(tmp_path / "steps.jsonl")}
    assert lines[3]["images"] == ["00002_work_analyse-front.png"]  # the analysing call's line names them
    assert lines[4]["images"] == ["00002_work_analyse-front.2.png"]

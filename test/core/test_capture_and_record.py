"""Observation capture, finish, recipes, steps.jsonl, saved images and the episode video."""

from __future__ import annotations

import json
import threading

import av
import pytest

from rpent.dashboard.events import RecordingEventSink
from rpent.record.steps import read_steps
from rpent.tools.images import decode_png

from .toolkits import Gates, ObservingToolkit

NOT_WITHIN = 0.2


@pytest.fixture
def gates() -> Gates:
    return Gates()


def test_robot_tool_result_is_replaced_by_the_observation(gates):
    kit = ObservingToolkit(robot=gates)
    result = kit.execute_tool("work", {"label": "a"})
    assert result.data["observed_after"] == "work"
    assert result.data["action"] == {"label": "a"}
    assert len(result.images) == 1 and decode_png(result.images[0]).shape == (8, 8, 3)
    assert kit.captures[0].arguments == {"label": "a", "block": False}


def test_capture_runs_after_a_handler_error_and_keeps_the_error(gates):
    kit = ObservingToolkit(robot=gates)
    result = kit.execute_tool("fail", {"message": "gripper jammed"})
    assert result.error == "RuntimeError: gripper jammed"
    assert result.data["observed_after"] == "fail"
    assert len(result.images) == 1


def test_readonly_common_and_finish_tools_do_not_capture(gates, tmp_path):
    kit = ObservingToolkit(robot=gates, output_dir=tmp_path)
    kit.execute_tool("peek", {"label": "r"})
    kit.execute_tool("write_text_file", {"path": str(tmp_path / "note.txt"), "text": "hi"})
    kit.execute_tool("list_dir", {"path": str(tmp_path)})
    kit.execute_tool("finish", {"status": "success", "summary": "done"})
    assert kit.captures == []
    kit.close()


def test_capture_failure_is_reported_without_losing_the_action(gates):
    class Broken(ObservingToolkit):
        def _capture_observation(self, *, command, result, elapsed_s):
            raise OSError("camera unplugged")

    result = Broken(robot=gates).execute_tool("work", {"label": "a"})
    assert result.data == {"label": "a"}
    assert result.error == "observation capture failed: OSError: camera unplugged"


def test_a_call_is_active_until_its_capture_finished(gates):
    kit = ObservingToolkit(robot=gates)
    kit.capture_gate = threading.Event()
    first = kit.submit("work", {"label": "e1"})
    assert gates.started_event("e1").wait(5)
    second = kit.submit("work", {"label": "e2"})
    assert not gates.started_event("e2").wait(NOT_WITHIN)
    assert first.stage == "capturing"
    kit.capture_gate.set()
    first.result(timeout=5)
    second.result(timeout=5)
    assert gates.started == ["e1", "e2"]


def test_stages_are_reported_in_order(gates):
    kit = ObservingToolkit(robot=gates)
    stages = []
    kit.submit("work", {"label": "a"}, on_stage=lambda stage, message, progress: stages.append(stage)).result(5)
    assert stages == ["queued", "running", "capturing", "done"]


def test_finish_stores_its_payload_without_the_marker_and_keeps_admission_open(gates):
    kit = ObservingToolkit(robot=gates)
    assert kit.finish_result is None
    result = kit.execute_tool("finish", {"status": "success", "summary": "cube lifted"})
    assert result.data == {"status": "success", "summary": "cube lifted", "operator_notes": []}
    assert kit.finish_result == {"status": "success", "summary": "cube lifted", "operator_notes": []}
    assert not kit.execute_tool("work", {"label": "after finish"}).is_error


def test_rejected_finish_is_not_stored(gates):
    kit = ObservingToolkit(robot=gates)
    assert kit.execute_tool("finish", {"status": "maybe"}).is_error
    assert kit.finish_result is None


def test_solved_is_unknown_for_the_base_toolkit(gates):
    assert ObservingToolkit(robot=gates).solved() is None


def test_recipe_lists_successful_robot_calls_in_completion_order(gates, tmp_path):
    kit = ObservingToolkit(robot=gates, output_dir=tmp_path)
    kit.execute_tool("work", {"label": "a"})
    kit.execute_tool("fail", {})
    kit.execute_tool("peek", {"label": "look"})
    kit.execute_tool("work", {"label": "bad", "oops": 1})
    kit.execute_tool("read_text_file", {"path": "missing.txt"})
    kit.execute_tool("work", {"label": "b"})
    kit.execute_tool("finish", {"status": "success"})
    path = kit.write_recipe("pick")
    assert path == tmp_path / "recipe_pick.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [
        {"tool": "work", "arguments": {"label": "a", "block": False}},
        {"tool": "peek", "arguments": {"label": "look", "block": False, "meet": False}},
        {"tool": "work", "arguments": {"label": "b", "block": False}},
    ]
    assert not list(tmp_path.glob(".recipe_pick*"))  # no temporary file left behind
    kit.close()


def test_recipe_keeps_arguments_that_utf8_cannot_encode(gates, tmp_path):
    kit = ObservingToolkit(robot=gates, output_dir=tmp_path)
    kit.execute_tool("work", {"label": "\ud800 cube"})
    kit.execute_tool("work", {"label": "Würfel"})
    lines = kit.write_recipe("odd").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["arguments"]["label"] for line in lines] == ["\ud800 cube", "Würfel"]
    assert "Würfel" in lines[1]  # readable text stays readable
    kit.close()


def test_recipe_tag_is_validated(gates, tmp_path):
    kit = ObservingToolkit(robot=gates, output_dir=tmp_path)
    with pytest.raises(ValueError, match="recipe_tag"):
        kit.write_recipe("../escape")
    kit.close()


def test_steps_jsonl_has_one_line_per_call_with_images(gates, tmp_path):
    kit = ObservingToolkit(robot=gates, output_dir=tmp_path)
    kit.execute_tool("work", {"label": "a"})
    kit.execute_tool("work", {"nope": 1})
    steps = read_steps(tmp_path / "steps.jsonl")
    assert [s["tool"] for s in steps] == ["work", "work"]
    first, second = steps
    assert first["arguments"] == {"label": "a", "block": False}
    assert first["error"] is None and json.loads(first["result"])["observed_after"] == "work"
    assert first["images"] == ["00001_work_0.png"]
    assert (tmp_path / "images" / "00001_work_0.png").read_bytes()[:4] == b"\x89PNG"
    assert first["duration_s"] >= 0 and first["ended_at"] >= first["started_at"]
    assert "unknown argument" in second["error"]
    kit.close()


def test_result_carries_the_saved_image_paths(gates, tmp_path):
    kit = ObservingToolkit(robot=gates, output_dir=tmp_path)
    result = kit.execute_tool("work", {"label": "a"})
    assert result.image_paths == [str(tmp_path / "images" / "00001_work_0.png")]
    kit.close()


def _decoded_frames(path) -> list:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]


def test_close_saves_recorded_frames_as_a_playable_h264_mp4(gates, tmp_path):
    kit = ObservingToolkit(robot=gates, output_dir=tmp_path)
    kit.execute_tool("paint", {"frames": 12})
    episode = kit.close()
    assert episode == tmp_path / "episode.mp4"
    frames = _decoded_frames(episode)
    assert len(frames) == 12
    assert frames[0].shape == (120, 160, 3)
    # The red square survives encoding.
    assert frames[5][60, 25, 0] > 200 and frames[5][60, 25, 1] < 60


def test_no_frames_no_video(gates, tmp_path):
    kit = ObservingToolkit(robot=gates, output_dir=tmp_path)
    kit.execute_tool("work", {"label": "a"})
    assert kit.close() is None
    assert not (tmp_path / "episode.mp4").exists()


def test_dashboard_events_and_per_action_clips(gates, tmp_path):
    sink = RecordingEventSink()
    kit = ObservingToolkit(robot=gates, output_dir=tmp_path, dashboard_events=sink)
    kit.execute_tool("paint", {"frames": 5})
    kit.execute_tool("work", {"label": "no frames"})
    kit.execute_tool("finish", {"status": "success", "summary": "ok"})
    kit.close()
    assert sink.kinds() == [
        "tool_started", "tool_finished", "tool_started", "tool_finished",
        "tool_started", "finish", "tool_finished", "toolkit_closed",
    ]
    painted = sink.events[1][1]
    assert painted["tool"] == "paint" and painted["clip"].endswith("00001_paint.mp4")
    assert len(_decoded_frames(painted["clip"])) == 5
    assert sink.events[3][1]["clip"] is None
    assert sink.events[5][1]["finish_result"]["summary"] == "ok"


def test_a_broken_event_sink_does_not_break_calls(gates):
    class Broken:
        enabled = True

        def publish(self, kind, payload):
            raise RuntimeError("socket closed")

    kit = ObservingToolkit(robot=gates, dashboard_events=Broken())
    assert not kit.execute_tool("work", {"label": "a"}).is_error

"""One run per output directory: a toolkit never writes into another run's record, and a record is
continued only when asked (`open_segment(..., resume=True)`), as a new segment whose files are its own."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import av
import pytest

from rpent.dashboard.events import RecordingEventSink
from rpent.record.segments import RecordError, adopt_segment, open_segment
from rpent.record.steps import read_steps

from .toolkits import Gates, ObservingToolkit


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_segment(out: Path) -> ObservingToolkit:
    """work (an image), paint (an image, frames, a clip), finish, a recipe: every kind of file a segment makes."""
    kit = ObservingToolkit(robot=Gates(), output_dir=out, dashboard_events=RecordingEventSink())
    assert not kit.execute_tool("work", {"label": "a"}).is_error
    assert not kit.execute_tool("paint", {"frames": 6}).is_error
    assert not kit.execute_tool("finish", {"status": "success"}).is_error
    kit.write_recipe("pick")
    kit.close()
    return kit


def _frames(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_toolkit_refuses_an_output_dir_that_already_holds_files(tmp_path):
    (tmp_path / "notes.txt").write_text("someone else's")
    with pytest.raises(RecordError) as refused:
        ObservingToolkit(robot=Gates(), output_dir=tmp_path)
    message = str(refused.value)
    assert message.startswith("output_dir: ") and "is not empty" in message and "\n" not in message
    assert _files(tmp_path) == {"notes.txt": b"someone else's"}  # nothing was added


def _claim_in_another_process(out: Path) -> None:
    code = "import sys; from rpent.record.segments import open_segment; open_segment(sys.argv[1])"
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, timeout=60)


# A finished record, or a segment another process claimed (e.g. `rpent run` still starting its runtime).
@pytest.mark.parametrize("used_by", [_one_segment, _claim_in_another_process], ids=["finished", "claimed"])
def test_a_toolkit_is_refused_a_record_in_use_and_leaves_it_unchanged(tmp_path, used_by):
    out = tmp_path / "run"
    used_by(out)
    before = _files(out)
    with pytest.raises(RecordError, match="is not empty"):
        ObservingToolkit(robot=Gates(), output_dir=out)
    assert _files(out) == before


def test_toolkit_refuses_an_output_dir_that_is_a_regular_file(tmp_path):
    path = tmp_path / "run"
    path.write_text("not a directory")
    with pytest.raises(RecordError, match=r"^output_dir: .*run is a file"):
        ObservingToolkit(robot=Gates(), output_dir=path)
    assert path.read_text() == "not a directory"


def test_resumed_segment_writes_its_own_files_and_never_touches_the_first(tmp_path):
    out = tmp_path / "run"
    _one_segment(out)
    before = _files(out)
    assert open_segment(out, resume=True).number == 2
    _one_segment(out)
    after = _files(out)

    for name, data in before.items():  # the append-only logs grew; everything else is byte-identical
        assert after[name].startswith(data) if name in ("steps.jsonl", "segments.jsonl") else after[name] == data
    assert sorted(set(after) - set(before)) == [
        "clips/00002_paint-2.mp4", "episode-2.mp4", "images/00001_work_0-2.png", "images/00002_paint_0-2.png",
        "recipe_pick-2.jsonl",
    ]
    assert _frames(out / "episode.mp4") == 6 and _frames(out / "episode-2.mp4") == 6

    steps = read_steps(out / "steps.jsonl")
    assert [(s["segment"], s["call_id"], s["tool"]) for s in steps] == [
        (1, 1, "work"), (1, 2, "paint"), (1, 3, "finish"), (2, 1, "work"), (2, 2, "paint"), (2, 3, "finish"),
    ]
    names = [name for s in steps for name in s["images"]]
    assert len(names) == len(set(names)) == 4  # an image name points at one picture, whatever the segment
    assert all((out / "images" / name).is_file() for name in names)
    ledger = [json.loads(line) for line in (out / "segments.jsonl").read_text().splitlines()]
    assert [(m["segment"], "claimed_at" in m, "toolkit_at" in m) for m in ledger] == [
        (1, True, True),  # the first toolkit claimed the empty directory itself
        (2, True, False), (2, False, True),  # claimed by open_segment, then attached by the toolkit
    ]


def test_third_segment_follows_the_second(tmp_path):
    out = tmp_path / "run"
    _one_segment(out)
    open_segment(out, resume=True)
    _one_segment(out)
    segment = open_segment(out, resume=True)
    assert segment.number == 3
    assert segment.file("result.json") == out / "result-3.json"
    kit = _one_segment(out)
    assert kit.segment == segment
    assert (out / "episode-3.mp4").is_file() and (out / "recipe_pick-3.jsonl").is_file()


def test_resume_of_a_missing_or_empty_directory_starts_segment_one(tmp_path):
    missing, empty = tmp_path / "missing" / "run", tmp_path / "empty"
    empty.mkdir()
    for out in (missing, empty):
        assert open_segment(out, resume=True).number == 1
        _one_segment(out)
        assert (out / "episode.mp4").is_file() and (out / "images" / "00001_work_0.png").is_file()
        assert {s["segment"] for s in read_steps(out / "steps.jsonl")} == {1}


def test_resume_refuses_a_directory_that_is_not_a_run_record(tmp_path):
    (tmp_path / "thesis.tex").write_text("\\begin{document}")
    with pytest.raises(RecordError) as refused:
        open_segment(tmp_path, resume=True, option="--output-dir")
    message = str(refused.value)
    assert message.startswith("--output-dir: ") and "not an RPent run record" in message and "\n" not in message
    assert _files(tmp_path) == {"thesis.tex": b"\\begin{document}"}


def test_of_two_simultaneous_openers_of_an_empty_directory_exactly_one_gets_it(tmp_path):
    for trial in range(200):
        out = tmp_path / f"run{trial}"
        barrier = threading.Barrier(2)
        outcomes: list[object] = []

        def race(out: Path = out, barrier: threading.Barrier = barrier, outcomes: list[object] = outcomes) -> None:
            barrier.wait(timeout=5)
            try:
                outcomes.append(open_segment(out).number)
            except RecordError:
                outcomes.append("refused")

        threads = [threading.Thread(target=race) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        assert sorted(outcomes, key=str) == [1, "refused"], trial


def test_simultaneous_resumes_get_distinct_segments(tmp_path):
    out = tmp_path / "run"
    _one_segment(out)
    barrier = threading.Barrier(4)
    numbers: list[int] = []

    def resume() -> None:
        barrier.wait(timeout=5)
        numbers.append(open_segment(out, resume=True).number)

    threads = [threading.Thread(target=resume) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert sorted(numbers) == [2, 3, 4, 5]


def test_an_adopted_claim_is_written_by_one_toolkit_only(tmp_path):
    # The ROS dashboard node claims a task folder and asks the toolkit node (another process) to write it.
    out = tmp_path / "task-001"
    _claim_in_another_process(out)
    assert adopt_segment(out).number == 1
    kit = _one_segment(out)
    assert kit.segment.number == 1 and (out / "episode.mp4").is_file()
    with pytest.raises(RecordError, match="is not empty"):
        adopt_segment(out)  # a toolkit writes it now: nobody else may
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(RecordError, match="is not empty"):
        adopt_segment(tmp_path / "other")  # not a claimed record at all

"""One run per --output-dir, as a person types the commands: a used directory is refused with exit 2
and left as it was; `--resume` adds a segment beside the first and overwrites nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import av
import pytest

from rpent.record.segments import RecordError
from rpent.record.steps import read_steps

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "robots" / "toy" / "recipes" / "red_block_in_bin.jsonl"
TOOLS = [json.loads(line)["tool"] for line in RECIPE.read_text().splitlines()]


def rpent(*args: str | Path, module: str = "rpent") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def toy_run(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return rpent("run", "--robot", "toy", "--planner", "replay", "--recipe", RECIPE, "--speed", "2",
                 "--output-dir", out, "--quiet", *extra)


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def one_error_line(process: subprocess.CompletedProcess[str]) -> str:
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1, process.stderr
    assert "Traceback" not in process.stderr
    return lines[0]


def frames(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_a_second_run_into_a_used_directory_exits_2_and_changes_nothing(tmp_path):
    out = tmp_path / "run"
    assert toy_run(out).returncode == 0
    before = snapshot(out)
    second = toy_run(out)
    assert second.returncode == 2
    line = one_error_line(second)
    assert line.startswith("rpent: error: --output-dir: ") and "is not empty" in line and "--resume" in line
    assert snapshot(out) == before


def test_resume_appends_a_second_segment_and_overwrites_nothing(tmp_path):
    out = tmp_path / "run"
    assert toy_run(out).returncode == 0
    before = snapshot(out)
    resumed = toy_run(out, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    after = snapshot(out)

    for name, (data, _) in before.items():
        if name in ("steps.jsonl", "run.log", "segments.jsonl"):  # append-only
            assert after[name][0].startswith(data), name
        else:
            assert after[name] == before[name], name
    new = set(after) - set(before)
    assert {"episode-2.mp4", "result-2.json", "transcript-2.json", "recipe_toy-2.jsonl"} <= new
    assert not {n for n in new if "/" not in n} - {"episode-2.mp4", "result-2.json", "transcript-2.json", "recipe_toy-2.jsonl"}
    assert all(n.endswith("-2.png") for n in new if n.startswith("images/"))

    steps = read_steps(out / "steps.jsonl")
    assert [(s["segment"], s["tool"]) for s in steps] == [(1, t) for t in [*TOOLS, "finish"]] + [(2, t) for t in [*TOOLS, "finish"]]
    images = [name for s in steps for name in s["images"]]
    assert len(images) == len(set(images))  # no image name shared by the two segments
    for step in steps:
        for name in step["images"]:
            assert ((out / "images" / name).is_file(), name.endswith("-2.png")) == (True, step["segment"] == 2)

    first, second = (json.loads((out / name).read_text()) for name in ("result.json", "result-2.json"))
    assert (first["segment"], second["segment"]) == (1, 2)
    assert second["status"] == "finished" and second["episode"] == str(out / "episode-2.mp4")
    assert second["recipe"] == str(out / "recipe_toy-2.jsonl")
    assert frames(out / "episode.mp4") > 10 and frames(out / "episode-2.mp4") > 10
    transcript = json.loads((out / "transcript-2.json").read_text())
    assert [t["tool"] for t in transcript] == [*TOOLS, "finish"]

    log = (out / "run.log").read_text()
    headers = [line for line in log.splitlines() if line.startswith("=====")]
    assert len(headers) == 2 and "segment 1" in headers[0] and "segment 2" in headers[1] and "--resume" in headers[1]
    assert log.index(headers[1]) > log.index("task ended")  # the second segment's lines follow its header


def test_output_dir_that_is_a_regular_file_exits_2_with_one_line(tmp_path):
    path = tmp_path / "run"
    path.write_text("my notes\n")
    process = toy_run(path)
    assert process.returncode == 2
    line = one_error_line(process)
    assert line.startswith("rpent: error: --output-dir: ") and "is a file" in line
    assert path.read_text() == "my notes\n"


def test_output_dir_under_a_regular_file_exits_2_with_one_line(tmp_path):
    (tmp_path / "notes").write_text("x")
    process = toy_run(tmp_path / "notes" / "run")
    assert process.returncode == 2
    assert one_error_line(process).startswith("rpent: error: --output-dir: ")


def test_resume_of_a_directory_that_is_not_a_run_record_exits_2(tmp_path):
    (tmp_path / "data.csv").write_text("a,b\n")
    process = toy_run(tmp_path, "--resume")
    assert process.returncode == 2
    line = one_error_line(process)
    assert line.startswith("rpent: error: --output-dir: ") and "not an RPent run record" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv"]


def test_resume_of_a_missing_directory_is_an_ordinary_first_run(tmp_path):
    out = tmp_path / "run"
    assert toy_run(out, "--resume").returncode == 0
    assert (out / "result.json").is_file() and (out / "episode.mp4").is_file()
    assert not list(out.glob("*-2.*"))
    assert {s["segment"] for s in read_steps(out / "steps.jsonl")} == {1}


def test_serve_mcp_refuses_a_used_output_dir_with_exit_2(tmp_path):
    (tmp_path / "steps.jsonl").write_text("")
    process = rpent("serve-mcp", "--robot", "toy", "--output-dir", tmp_path)
    assert process.returncode == 2
    line = one_error_line(process)
    assert "error: --output-dir: " in line and "is not empty" in line and "--resume" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["steps.jsonl"]


def test_dashboard_refuses_a_used_output_dir_before_serving(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    process = rpent("run", "--robot", "toy", "--dashboard", "--port", "0", "--output-dir", tmp_path, "--quiet")
    assert process.returncode == 2
    line = one_error_line(process)
    assert line.startswith("rpent: error: --output-dir: ") and "--resume" in line
    assert "rpent dashboard:" not in process.stdout  # it never served


def _mcp_session(out: Path, *extra: str) -> list[str]:
    """Start `python -m rpent serve-mcp` as an MCP client does, look once, let the server close its record."""
    import anyio
    import mcp
    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rpent", "serve-mcp", "--robot", "toy", "--output-dir", str(out), *extra],
        env={"RPENT_MEMORY_DIR": os.environ["RPENT_MEMORY_DIR"], "PYTHONUNBUFFERED": "1"}, cwd=str(ROOT),
    )

    async def main() -> list[str]:
        async with mcp.Client(params) as client:
            result = await client.call_tool("capture_image", {})
            assert not result.is_error
            return [line for line in result.content[0].text.splitlines() if ".png" in line]

    return anyio.run(main)


def test_serve_mcp_resume_adds_a_segment_whose_images_are_its_own(tmp_path):
    out = tmp_path / "served"
    first = _mcp_session(out)
    picture = (out / "images" / "00001_capture_image_top.png").read_bytes()
    second = _mcp_session(out, "--resume")
    assert "00001_capture_image_top.png" in first[0] and "00001_capture_image_top-2.png" in second[0]
    assert (out / "images" / "00001_capture_image_top.png").read_bytes() == picture
    steps = read_steps(out / "steps.jsonl")
    assert [(s["segment"], s["images"]) for s in steps] == [
        (1, ["00001_capture_image_top.png"]), (2, ["00001_capture_image_top-2.png"]),
    ]


def test_dashboard_resume_numbers_new_tasks_after_the_old_ones(tmp_path):
    from rpent.cli.main import build_parser
    from rpent.dashboard.session import DashboardSession
    from rpent.robot import load_robot

    module = load_robot("toy")
    spec = module.get_robot_spec()
    root = tmp_path / "runs"

    def session(*extra: str) -> DashboardSession:
        args = build_parser(spec).parse_args(["run", "--robot", "toy", "--planner", "replay", "--recipe", str(RECIPE),
                                              "--speed", "2", "--output-dir", str(root), *extra])
        return DashboardSession(args=args, spec=spec, robot=module, output_root=root)

    def one_task(dashboard: DashboardSession) -> str:
        dashboard.start()
        try:
            task_id = dashboard.start_task({"task": "Put the red block in the bin."})
            assert dashboard.wait_task(60)
        finally:
            dashboard.stop()
        return task_id

    assert one_task(session()) == "task-001"
    before = snapshot(root)
    with pytest.raises(RecordError, match=r"^--output-dir: .* is not empty; .*--resume"):
        session()  # a used root without --resume
    assert one_task(session("--resume")) == "task-002"
    assert {k: v for k, v in snapshot(root).items() if k.startswith("task-001/")} == before
    assert json.loads((root / "task-002" / "result.json").read_text())["status"] == "finished"
    assert [s["segment"] for s in read_steps(root / "task-002" / "steps.jsonl")] == [1] * (len(TOOLS) + 1)

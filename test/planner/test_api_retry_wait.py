"""A gateway that asks for a long wait (529 with `Retry-After: 100000`) cannot hold `rpent run --planner api`:
each retry is logged with its wait, a wait past the documented cap ends the run at once with one clear
line. The real anthropic SDK against the scripted model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import Failure, FakeModelServer, Reply, ToolUse

from rpent.planner.api import DEFAULT_MAX_RETRY_WAIT_S

ROOT = Path(__file__).resolve().parents[2]
FINISH = Reply([ToolUse("finish", {"status": "success", "summary": "done"})])


def _run(server: FakeModelServer, out: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "RPENT_MODEL")}
    return subprocess.run(
        [sys.executable, "-m", "rpent", "run", "--robot", "toy", "--planner", "api", "--base-url", server.base_url,
         "--model", "fake-model", "--output-dir", str(out), "--memory-dir", str(out.parent / "memory")],
        cwd=ROOT, env={**env, "ANTHROPIC_API_KEY": "test-key"}, capture_output=True, text=True, timeout=timeout,
    )


@pytest.mark.timeout(90)
def test_a_retry_after_beyond_the_cap_ends_the_run_at_once_saying_so(model_server: FakeModelServer, tmp_path):
    model_server.script(Failure(529, retry_after_s=100000))
    done = _run(model_server, tmp_path / "run", timeout=40)  # it must not sleep: the cap is far below the timeout
    assert done.returncode == 1, done.stderr
    line = (f"the model service (OverloadedError 529) asks to retry in 100000 s, more than the "
            f"{DEFAULT_MAX_RETRY_WAIT_S:.0f} s the api planner waits (max_retry_wait_s); giving up")
    assert [entry for entry in done.stderr.splitlines() if line in entry], done.stderr
    assert len(model_server.model_requests) == 1
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "error" and line in result["stop_reason"]


@pytest.mark.timeout(90)
def test_each_retry_is_logged_with_its_wait(model_server: FakeModelServer, tmp_path):
    model_server.script(Failure(529, retry_after_s=0.2), Failure(429, retry_after_s=0.3), FINISH)
    done = _run(model_server, tmp_path / "run")
    assert done.returncode == 1, done.stderr  # the toy's scene is not solved by a bare finish
    retries = [line for line in done.stderr.splitlines() if "model request failed" in line]
    assert len(retries) == 2, done.stderr
    assert retries[0].endswith("model request failed (OverloadedError 529); retry 1/6 in 0.20 s (the service's Retry-After)")
    assert retries[1].endswith("model request failed (RateLimitError 429); retry 2/6 in 0.30 s (the service's Retry-After)")
    assert len(model_server.model_requests) == 3

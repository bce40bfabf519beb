"""A reduced run of bench/soak_servers.py: live servers in child processes keep their guarantees under abuse."""

from __future__ import annotations

import importlib.util
import signal
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak_servers.py"


def _soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak_servers", SOAK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rpc_servers_answer_every_malformed_request_drop_every_stalled_connection_and_stay_small() -> None:
    soak = _soak()
    report = soak.run_soak(
        frames=300, stalled=60, tool_calls=0, read_timeout_s=0.5, idle_timeout_s=1.0, max_connections=16
    )
    for protocol, outcomes in report["malformed"]["outcomes"].items():
        assert set(outcomes) <= {"answered", "closed"}, (protocol, report["malformed"]["unexpected"])
        assert sum(outcomes.values()) == 300
    ends = report["stalled"]["ends"]
    assert set(ends) <= {"refused", "dropped stalled", "dropped idle"}, report["stalled"]["by_mode"]
    assert sum(ends.values()) == 60 and min(ends.get(k, 0) for k in ("refused", "dropped stalled", "dropped idle")) > 0
    assert report["stalled"]["longest_s"] < 1.0 + 0.5 + 5
    assert report["normal_call_after"] is True
    assert report["rss_growth_mb"] < soak.RSS_GROWTH_AIM_MB, report


def test_fuzzed_tool_calls_against_a_live_mcp_server_each_leave_one_strict_step_line(tmp_path: Path) -> None:
    report = _soak().fuzzed_tool_calls(150, tmp_path)
    # The soak stops the server with SIGTERM, which ends serve-mcp as it ends `rpent run`: the record
    # saved, exit 128 + SIGTERM (docs/mcp.md).
    assert report["failures"] == [] and report["server_exit_code"] == 128 + signal.SIGTERM
    assert report["reached_toolkit"] > 100
    assert report["lost_step_lines"] == 0, report
    assert report["strict_json_lines"] == report["step_lines"]

"""Every command of the README's "Using it" section that needs no API key runs as printed and exits
with the code the README documents (0; 130 for a dashboard stopped with Ctrl-C)."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .cli_support import REPO, rpent_env

RPENT = Path(sys.executable).parent / "rpent"  # the console script `. .venv/bin/activate` puts on PATH
KEY_PLANNERS = {"api", "claude_code", "codex"}


def using_it_commands() -> list[list[str]]:
    """The indented command block(s) of README.md's "## Using it" section, comments removed."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Using it\n", 1)[1].split("\n## ", 1)[0]
    lines = [line[4:] for line in section.splitlines() if line.startswith("    ") and line.strip()]
    return [shlex.split(line, comments=True) for line in lines]


def _skip_reason(argv: list[str]) -> str | None:
    if argv[0] == ".":
        return "a shell built-in; the test runs .venv/bin/rpent, which is what it puts on PATH"
    if "--planner" in argv and argv[argv.index("--planner") + 1] in KEY_PLANNERS:
        return "needs an API key (ANTHROPIC_API_KEY or OPENAI_API_KEY)"
    return None


def _is_server(argv: list[str]) -> bool:
    return "--dashboard" in argv or (argv[1:2] == ["serve-mcp"] and "--http" in argv)


def test_the_section_is_found_and_names_its_commands():
    commands = using_it_commands()
    assert len(commands) >= 8
    assert all(argv[0] in ("rpent", ".") for argv in commands), commands


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("argv", using_it_commands(), ids=lambda argv: " ".join(argv)[:70])
def test_readme_command_runs_as_printed(argv, tmp_path):
    reason = _skip_reason(argv)
    if reason:
        pytest.skip(reason)
    assert argv[0] == "rpent"
    # A scratch working directory: runs/ lands there; robots/ resolves the README's relative recipe paths.
    (tmp_path / "robots").symlink_to(REPO / "robots")
    command = [str(RPENT), *argv[1:]]
    if not _is_server(argv):
        done = subprocess.run(command, cwd=tmp_path, env=rpent_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        return
    # Servers: the printed port may be taken on a shared machine, so port 0 (a free one); the test waits
    # until the server says where it listens, then stops it with Ctrl-C as its operator would.
    if "--port" in command:
        command[command.index("--port") + 1] = "0"
    proc = subprocess.Popen(command, cwd=tmp_path, env=rpent_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        for line in proc.stdout:  # bounded by the test's timeout if the server never comes up
            seen.append(line)
            if re.search(r"(rpent dashboard:|MCP server listening on) http://127\.0\.0\.1:\d+", line):
                break
        else:
            raise AssertionError(f"{' '.join(argv)} ended before serving:\n{''.join(seen)}")
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    # Ctrl-C: 130, the README's code for an interrupted run, dashboard or serve-mcp alike.
    assert proc.returncode == 130, f"{' '.join(argv)} exited {proc.returncode}:\n{''.join(seen)}{rest}"

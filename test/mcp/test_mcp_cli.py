"""`rpent serve-mcp` (in-process as `rpent.cli.main.main`, as a server as `python -m rpent serve-mcp`): refusals,
stdout hygiene, HTTP port 0, signals."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import mcp
import pytest
from mcp_support import far_move_running, read_steps, serve_args, server_env

from rpent.cli.main import main as rpent_main

pytestmark = pytest.mark.timeout(60)


def main(argv: list[str]) -> int:
    return rpent_main(["serve-mcp", *argv])


def test_non_loopback_host_is_refused_before_the_robot_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "never"
    code = main(["--robot", "toy", "--http", "--host", "0.0.0.0", "--output-dir", str(out)])
    assert code == 2
    assert "--host: '0.0.0.0' is not a loopback address" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("robot", [["--robot", "toy"], ["--robot=toy"]])
def test_robot_flags_are_validated_naming_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str], robot: list[str]) -> None:
    code = main([*robot, "--speed", "5", "--output-dir", str(tmp_path / "never")])
    assert code == 2
    assert "--speed: must be > 0 and <= 2 m/s, got 5.0" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def test_unknown_robot_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--robot", "no_such_robot"]) == 2
    assert "unknown robot 'no_such_robot'" in capsys.readouterr().err


@pytest.mark.slow
def test_start_up_noise_on_stdout_is_sent_to_stderr() -> None:
    # stdio mode wraps robot start-up in this guard: Python prints and C-level writes alike.
    script = (
        "import os, sys\n"
        "from rpent.mcp.transports import stdout_to_stderr\n"
        "with stdout_to_stderr():\n"
        "    print('python noise')\n"
        "    os.write(1, b'driver noise\\n')\n"
        "print('wire')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout == "wire\n"
    assert "python noise" in done.stderr and "driver noise" in done.stderr


class _Server:
    """`python -m rpent serve-mcp ... --http --port 0` in a subprocess; stderr is read in a thread."""

    def __init__(self, out: Path, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *serve_args(out, "--http", "--port", "0", *extra)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **server_env()},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)

    def url(self, timeout_s: float = 30.0) -> str:
        while True:
            line = self.lines.get(timeout=timeout_s)
            found = re.search(r"MCP server listening on (http://127\.0\.0\.1:\d+/mcp)", line)
            if found:
                return found.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.mark.slow
def test_http_on_port_0_reports_the_bound_url_and_sigterm_saves_the_record(tmp_path: Path) -> None:
    out = tmp_path / "served"
    server = _Server(out)
    try:
        url = server.url()

        async def main_() -> mcp.types.CallToolResult:
            async with mcp.Client(url) as client:
                return await client.call_tool("capture_image", {})

        result = asyncio.run(main_())
        assert result.is_error is False and [c.type for c in result.content] == ["text", "image"]
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(30) == 143, "".join(server.stderr)  # terminated by SIGTERM, as rpent run
    finally:
        server.stop()
    assert server.proc.stdout is not None and server.proc.stdout.read() == ""  # logs never go to stdout
    assert [s["tool"] for s in read_steps(out)] == ["capture_image"]
    assert (out / "images" / "00001_capture_image_top.png").is_file()


@pytest.mark.slow
def test_sigterm_during_a_motion_stops_the_robot_before_the_server_exits(tmp_path: Path) -> None:
    out = tmp_path / "served"
    server = _Server(out, "--speed", "0.02")
    try:
        url = server.url()

        async def main_() -> None:
            async with mcp.Client(url) as client:
                moving = await far_move_running(client)
                server.proc.send_signal(signal.SIGTERM)
                # The motion is cancelled at the signal, so its answer still goes out before the shutdown.
                result = await moving
                assert result.is_error is True
                assert "cancelled: MCP server shutting down" in result.content[0].text

        asyncio.run(main_())
        assert server.proc.wait(30) == 143, "".join(server.stderr)
    finally:
        server.stop()
    (step,) = read_steps(out)
    assert step["tool"] == "move_to" and step["cancelled"] is True
    x, y, _ = json.loads(step["result"])["gripper_xyz_m"]
    assert x < 0.4 and y < 0.4  # stopped at the signal, well short of (0.55, 0.55): it started at (0.3, 0.3)


def test_a_busy_port_is_refused_before_the_robot_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = tmp_path / "never"
        code = main(["--robot", "toy", "--http", "--port", str(port), "--output-dir", str(out)])
    assert code == 2
    assert f"--port: cannot listen on 127.0.0.1:{port}: Address already in use" in capsys.readouterr().err
    assert not out.exists()

"""A node executable interrupted while its modules still import ends quietly with 0 (ROS-free).

A launch that stops at once (a node that cannot start ends it) sends SIGINT to nodes that may still be
importing rclpy; each executable starts through rpent_ros.entry.run so that is a quiet exit, not a
KeyboardInterrupt traceback and status 1.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "rpent_ros" / "scripts").iterdir())


def _run_entry(tmp_path: Path, module_text: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "slow_node.py").write_text(module_text)
    code = "from rpent_ros.entry import run; run('slow_node')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"})


def test_an_interrupt_while_the_node_module_imports_ends_it_with_0_and_no_traceback(tmp_path):
    done = _run_entry(tmp_path, "raise KeyboardInterrupt  # as SIGINT arriving mid-import\n")
    assert (done.returncode, done.stderr) == (0, "")


def test_the_node_runs_once_imported_and_its_own_failures_still_show(tmp_path):
    done = _run_entry(tmp_path, "def main():\n    print('started')\n    raise RuntimeError('boom')\n")
    assert done.stdout == "started\n"
    assert done.returncode == 1 and "RuntimeError: boom" in done.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_every_node_executable_starts_through_entry_run(script):
    calls = [node for node in ast.walk(ast.parse(script.read_text())) if isinstance(node, ast.Call)]
    assert [getattr(c.func, "id", None) for c in calls] == ["run"], script.name
    imports = [n for n in ast.parse(script.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [(n.module, [a.name for a in n.names]) for n in imports] == [("rpent_ros.entry", ["run"])], script.name
    module, *function = [a.value for a in calls[0].args]
    path = ROOT / (module.replace(".", "/") + ".py")  # read, not imported: the node modules need rclpy
    assert path.is_file(), module
    source = path.read_text()
    assert f"def {function[0] if function else 'main'}(" in source, script.name

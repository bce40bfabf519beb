"""Set-up says what it installs and shows progress; installing the package raises no setuptools warnings."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .cli_support import REPO

PIP_STUB = """#!/usr/bin/env bash
# Stands in for .venv/bin/python: answers `-m pip install ...` the way pip prints a fresh install.
case "$*" in
  *"--upgrade pip"*) exit 0 ;;
  *"-e .[dev]"*)
    echo "Obtaining file://$PWD"
    echo "Requirement already satisfied: numpy>=1.26 in ./.venv/lib/site-packages"
    echo "Collecting franky-sim==1.0.4"
    echo "  Downloading franky_sim-1.0.4-py3-none-any.whl (12.0 MB)"
    echo "Installing collected packages: franky-sim"
    exit "${STUB_PIP_RC:-0}" ;;
  *"--no-deps openpi-client=="*)
    echo "Collecting openpi-client==0.1.2"
    echo "Installing collected packages: openpi-client"
    exit 0 ;;
esac
echo "unexpected: $*" >&2; exit 3
"""
NPM_STUB = """#!/usr/bin/env bash
echo "added 3 packages in 2s"
"""
DPKG_STUB = """#!/usr/bin/env bash
printf 'install ok installed'
"""


def _stub(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _setup_in_a_stub_checkout(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts/setup.sh", checkout / "scripts/setup.sh")
    (checkout / "package.json").write_text("{}\n")
    _stub(checkout / ".venv/bin/python", PIP_STUB)
    bin_dir = tmp_path / "bin"
    _stub(bin_dir / "npm", NPM_STUB)
    _stub(bin_dir / "dpkg-query", DPKG_STUB)
    return subprocess.run(["bash", str(checkout / "scripts/setup.sh")], cwd=checkout, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", **env})


def test_setup_names_each_long_phase_and_passes_on_pips_progress(tmp_path):
    done = _setup_in_a_stub_checkout(tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "setup: pip install -e .[dev]: rpent and every extra" in out and "several minutes" in out
    assert "  pip: Collecting franky-sim==1.0.4" in out and "  pip:   Downloading franky_sim" in out
    assert "Requirement already satisfied" not in out  # a re-run stays short
    assert "setup: pip install --no-deps openpi-client==0.1.2" in out and "  pip: Collecting openpi-client" in out
    assert "setup: npm ci: the pinned Codex CLI" in out and "  npm: added 3 packages" in out
    assert out.rstrip().splitlines()[-1].startswith("setup: done in ")


def test_setup_stops_when_pip_fails(tmp_path):
    done = _setup_in_a_stub_checkout(tmp_path, STUB_PIP_RC="1")
    assert done.returncode != 0
    assert "setup: done" not in done.stdout and "npm ci" not in done.stdout


@pytest.mark.slow
def test_building_the_package_raises_no_setuptools_warnings_and_keeps_the_data_files(tmp_path):
    # A copy of the tracked files, so the build leaves nothing in the checkout; setup.py as pip runs it.
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    copy = tmp_path / "src"
    for name in filter(None, tracked):
        source = REPO / name.decode()
        if source.is_file():
            (copy / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, copy / name.decode())
    done = subprocess.run([sys.executable, "-W", "default", "setup.py", "build_py"], cwd=copy,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    noise = [line for line in (done.stdout + done.stderr).splitlines()
             if "absent from" in line or "as data is deprecated" in line or "Warning" in line]
    assert not noise, noise
    built = copy / "build/lib"
    for data in ("robots/toy/prompts/system.md", "robots/toy/recipes/red_block_in_bin.jsonl",
                 "robots/franka/recipes/pick_cube.jsonl", "rpent/dashboard/static/index.html"):
        assert (built / data).is_file(), data

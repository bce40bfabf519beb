"""The ToolkitAPI contract (test/toolkit_conformance.py) held by the in-process Toolkit of the toy robot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from toolkit_conformance import CASES, SPEED_M_S, START, Case

from robots.toy.runtime import ToyWorld
from robots.toy.toolkit import ToyToolkit


@pytest.fixture
def toolkit(tmp_path: Path) -> Iterator[ToyToolkit]:
    kit = ToyToolkit(robot=ToyWorld(speed_m_s=SPEED_M_S, gripper_xyz=list(START)), output_dir=tmp_path / "record")
    try:
        yield kit
    finally:
        kit.cancel_active_and_wait(timeout=30, reason="test over")
        kit.close(timeout=30)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_the_in_process_toolkit_keeps_the_toolkit_api(case: Case, toolkit: ToyToolkit) -> None:
    case(toolkit)

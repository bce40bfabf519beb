"""Planner plugins the eval tests load by name (`--planner eval_plugins:GatedReplayPlanner`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rpent.planner.base import PlannerResult, PlannerStatus, TokenUsage
from rpent.planner.replay import ReplayPlanner

GATE_TIMEOUT_S = 120.0


class GatedReplayPlanner(ReplayPlanner):
    """A replay that first announces its process (`<gate_dir>/started-<pid>`) and waits for
    `<gate_dir>/open`: the test can kill the worker while an episode is certainly running."""

    def __init__(self, *, recipe: str, gate_dir: str, spawn_server: bool = False, **_model_options: Any) -> None:
        super().__init__(recipe=recipe)
        self.gate = Path(gate_dir)
        self.spawn_server = spawn_server

    def solve(self, **kwargs: Any) -> PlannerResult:
        if self.spawn_server:  # stands in for a simulator server the episode started (LIBERO's env_server)
            server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            (self.gate / f"server-{server.pid}").write_text(str(server.pid))
        (self.gate / f"started-{os.getpid()}").write_text(str(os.getpid()))
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not (self.gate / "open").exists():
            if time.monotonic() > deadline:
                return PlannerResult(PlannerStatus.TIME_LIMIT, "the test never opened the gate")
            time.sleep(0.05)  # a file is the only channel from the test into a Ray worker
        return super().solve(**kwargs)


TOY_RECIPE = Path(__file__).resolve().parents[2] / "robots/toy/recipes/red_block_in_bin.jsonl"


class RecipeReplayPlanner(ReplayPlanner):
    """Replay as a plugin: its recipe from planner_options (rpent eval), else the toy's."""

    def __init__(self, *, recipe: str | Path = TOY_RECIPE, **_model_options: Any) -> None:
        super().__init__(recipe=recipe)


class TokenSpendingReplayPlanner(RecipeReplayPlanner):
    """A replay that reports `tokens_per_episode` tokens used, as a model planner would."""

    def __init__(self, *, tokens_per_episode: int, **options: Any) -> None:
        super().__init__(**options)
        self.tokens = tokens_per_episode

    def solve(self, **kwargs: Any) -> PlannerResult:
        result = super().solve(**kwargs)
        result.usage = TokenUsage(input_tokens=self.tokens)
        return result

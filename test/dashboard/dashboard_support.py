"""Shared by the dashboard tests: a toy-robot session served on 127.0.0.1 from a background thread.

A module of its own (not conftest): several test folders have a conftest, and `from conftest import`
would pick whichever was imported first."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

# test/ holds shared helper packages (fakes); the stdlib owns the name `test`.
_TEST_DIR = str(Path(__file__).resolve().parents[1])
if _TEST_DIR not in sys.path:
    sys.path.insert(0, _TEST_DIR)

from rpent.cli.main import build_parser  # noqa: E402
from rpent.dashboard.cli import DashboardServer  # noqa: E402
from rpent.dashboard.session import DashboardSession  # noqa: E402
from rpent.robot import load_robot  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TOY_RECIPE = REPO / "robots" / "toy" / "recipes" / "red_block_in_bin.jsonl"


def toy_args(output_dir: Path, *extra: str) -> Any:
    module = load_robot("toy")
    parser = build_parser(module.get_robot_spec())  # includes the dashboard flags
    return parser.parse_args(["run", "--robot", "toy", "--output-dir", str(output_dir), *extra])


class Served:
    """A started session and its server; `client` talks to it over HTTP."""

    def __init__(self, session: DashboardSession, server: DashboardServer) -> None:
        self.session = session
        self.server = server
        self.base_url = f"http://127.0.0.1:{server.port}"
        self.client = httpx.Client(base_url=self.base_url, timeout=10)

    def wait_state(self, predicate: Callable[[dict[str, Any]], bool], timeout_s: float = 20.0) -> dict[str, Any]:
        """Wait until the session's snapshot satisfies `predicate` (re-checked on every event)."""
        state = self.session.sink.wait_for(predicate, timeout_s)
        if state is None:
            raise AssertionError(f"state never matched; last state: {json.dumps(self.session.snapshot())[:3000]}")
        return state


@contextmanager
def serving(start: Callable[..., Served]) -> Iterator[Callable[..., Served]]:
    """A factory of served sessions (each made by `start`); all of them are stopped on exit."""
    started: list[Served] = []

    def make(*args: Any, **kwargs: Any) -> Served:
        served = start(*args, **kwargs)
        started.append(served)
        return served

    try:
        yield make
    finally:
        for served in started:
            served.client.close()
            served.server.stop()
            served.session.stop()


def serve(tmp_path: Path, *extra: str, bus_capacity: int = 4096) -> Served:
    module = load_robot("toy")
    spec = module.get_robot_spec()
    args = toy_args(tmp_path / "runs", *extra)
    session = DashboardSession(args=args, spec=spec, robot=module, output_root=tmp_path / "runs",
                               bus_capacity=bus_capacity)
    session.start()
    server = DashboardServer(session, host="127.0.0.1", port=0).start()
    return Served(session, server)



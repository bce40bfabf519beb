"""Dashboard fixtures: a toy-robot session served on 127.0.0.1 from a background thread."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# test/ holds shared helper packages (fakes); the stdlib owns the name `test`.
_TEST_DIR = str(Path(__file__).resolve().parents[1])
if _TEST_DIR not in sys.path:
    sys.path.insert(0, _TEST_DIR)

from dashboard_support import Served, serve, serving  # noqa: E402
from fakes.fixtures import model_server, model_server_process  # noqa: E402,F401


@pytest.fixture
def served_factory(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    with serving(lambda *extra, bus_capacity=4096: serve(tmp_path, *extra, bus_capacity=bus_capacity)) as make:
        yield make


# Browser fixtures (browser, page) for the browser tests; imported last: they use Served from here.
from browser_support import browser, page  # noqa: E402,F401

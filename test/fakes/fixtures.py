"""pytest fixtures for the fakes; import them into a conftest.py (``from fakes.fixtures import *``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .model_server import FakeModelServer

__all__ = ["model_server", "model_server_process"]


@pytest.fixture(scope="session")
def model_server_process() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def model_server(model_server_process: FakeModelServer) -> Iterator[FakeModelServer]:
    """A running scripted model server, empty for each test; a test fails if the client strayed
    from the script (errors raised inside turn functions are re-raised here)."""
    model_server_process.reset()
    yield model_server_process
    try:
        model_server_process.raise_errors()
    finally:
        model_server_process.reset()

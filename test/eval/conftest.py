"""Ray for the eval tests: loopback only, its own session folders, as few starts as possible."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from eval_helpers import MADE_TEMP_DIRS, REPO, free_port, running_head, short_temp_dir

from rpent.eval.cluster import prepare_environment

# Before anything imports ray: the loopback-only single-machine mode is read at import time.
prepare_environment(loopback=True)
# One token for every Ray of this session (local instances, the head, drivers in subprocesses): a
# process reads its token once, and ~/.ray/auth_token is the developer's, not the tests'.
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)

HERE = Path(__file__).resolve().parent
RAY_BIN = str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="session", autouse=True)
def _remove_ray_temp_dirs():
    yield
    for path in MADE_TEMP_DIRS:  # Ray's session folders (logs, sockets) of the instances the tests started
        shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class Head:
    address: str
    pid: int  # the `ray start --block` process: the head's processes are below it
    temp_dir: Path  # its sessions: logs/ names each worker's files after its pid


@pytest.fixture(scope="module")
def worker_env():
    """Workers import the test planners in this folder (Ray workers inherit the driver's environment)."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), str(REPO), old]))
    yield
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def ray_head(worker_env):
    """`ray start --head --node-ip-address=127.0.0.1` on a free port, in its own temp dir, stopped after
    (eval_helpers.running_head)."""
    temp_dir = short_temp_dir("rh-")
    port = free_port()
    argv = [RAY_BIN, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
            "--include-dashboard=false", f"--temp-dir={temp_dir}", "--disable-usage-stats", "--block"]
    # From a folder of its own, as a lab's head is: workers start there, not in the checkout.
    with running_head(argv, env=dict(os.environ), cwd=temp_dir, temp_dir=temp_dir) as head:
        yield Head(f"127.0.0.1:{port}", head.pid, temp_dir)

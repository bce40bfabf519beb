"""Where episodes run: a Ray cluster given by address, or a local one on loopback for the sweep's length.

A local instance listens on 127.0.0.1 only, with no dashboard, no metrics export and no usage
reporting. Ray turns a node address of 127.0.0.1 into the machine's routable address unless it runs
as a single-machine cluster (its Windows/macOS mode, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0), which
Ray reads when it is imported: so this module sets the environment before the first `import ray`.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rpent.eval.sweep import SweepError

LOOPBACK = "127.0.0.1"
SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def is_loopback_address(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def prepare_environment(loopback: bool) -> None:
    """Environment for Ray in this process and the processes it starts; before Ray is imported."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no reports leave the machine
    if not loopback:
        return
    if "ray" in sys.modules:
        from ray._private import ray_constants

        if ray_constants.ENABLE_RAY_CLUSTER:
            raise RuntimeError(f"ray was imported before {SINGLE_MACHINE_ENV}=0 was set; a loopback-only "
                               "Ray cannot start in this process (import rpent.eval before ray)")
    os.environ[SINGLE_MACHINE_ENV] = "0"


@contextmanager
def ray_cluster(address: str | None, *, num_cpus: int | None, temp_dir: Path | None = None) -> Iterator[dict]:
    """Connect to `address`, or start a local loopback instance and stop it on the way out."""
    loopback = address is None or is_loopback_address(address)
    prepare_environment(loopback)
    import ray

    if ray.is_initialized():
        raise RuntimeError("ray is already initialised in this process")
    from ray.exceptions import AuthenticationError

    common = {"log_to_driver": False, "configure_logging": False, "namespace": "rpent-eval"}
    try:
        if address is None:
            # "local": always a new instance, never one found through /tmp/ray or RAY_ADDRESS.
            context = ray.init(address="local", num_cpus=num_cpus, _node_ip_address=LOOPBACK, include_dashboard=False,
                               _temp_dir=str(temp_dir) if temp_dir else None, **common)
        else:
            with _native_stderr_held():
                context = ray.init(address=address, **common)
    except AuthenticationError:
        ray.shutdown()
        raise SweepError(f"--ray-address: the Ray cluster at {address} needs its token and none was found: "
                         f"set RAY_AUTH_TOKEN, or put the token in ~/.ray/auth_token (`ray get-auth-token` on the "
                         f"head prints it; docs/eval.md)") from None
    except (ConnectionError, RuntimeError) as exc:
        ray.shutdown()
        # A refused token looks like an unreachable cluster to the client: say what else it may need.
        raise SweepError(f"--ray-address: cannot reach a Ray cluster at {address} ({_first_line(exc)}); a cluster "
                         "with token authentication also needs RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN or "
                         "~/.ray/auth_token; docs/eval.md)") from None
    try:
        yield dict(context.address_info)
    finally:
        ray.shutdown()  # stops the processes of a local instance; only disconnects from a cluster


@contextmanager
def _native_stderr_held() -> Iterator[None]:
    """While connecting, Ray's C++ client writes a warning straight to file descriptor 2 once a
    second that the cluster refuses it (a missing or wrong token), for about 20 s. Hold those back:
    a failed connect is then the one line the caller prints; after a successful one they are written
    out as they came."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        ok = False
        try:
            yield
            ok = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if ok:
                held.seek(0)
                sys.stderr.write(held.read().decode(errors="replace"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

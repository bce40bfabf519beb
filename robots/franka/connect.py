"""Connecting to franky objects without risking a hang.

A franky Robot or Gripper constructor blocks forever when another client already holds
the robot (seen against franky-sim), so construction runs in a daemon thread with a deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from rpent.runtime.arm import RuntimeFault

T = TypeVar("T")


def connect_with_timeout(factory: Callable[[], T], what: str, host: str, timeout_s: float) -> T:
    """Run `factory` in a daemon thread; raise RuntimeFault naming the host if it fails or hangs."""
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = factory()
        except BaseException as exc:  # reported to the caller below
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"connect-{what}-{host}", daemon=True).start()
    if not done.wait(timeout_s):
        raise RuntimeFault(
            f"could not connect to the Franka {what} at {host} within {timeout_s:.1f} s "
            "(is the robot reachable, FCI enabled, and no other client connected?)"
        )
    if "error" in box:
        exc = box["error"]
        raise RuntimeFault(f"could not connect to the Franka {what} at {host}: {exc}") from exc  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]

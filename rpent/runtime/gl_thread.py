"""The one thread of this process that talks to OpenGL: offscreen rendering of simulated cameras.

An OpenGL context belongs to the thread that made it current, so a renderer must be made, used and
freed on one thread. One thread per renderer is not enough: Mesa's software rasteriser (llvmpipe,
swrast_dri.so of Mesa 22.3, what EGL renders with on a machine without a GPU) crashes the whole
process with SIGSEGV in glReadPixels when two threads render through their own contexts at once.
franka_sim_node, whose four cameras each rendered on a thread of their own, died of it in about one
launch in forty. So every context of the process lives on this thread, and renders one at a time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_on_it = threading.local()


def on_gl_thread(fn: Callable[[], T], timeout_s: float | None = 30.0) -> T:
    """fn() on the GL thread, its result or its exception here. Called on that thread, it runs at once
    (a render that needs another GL call must not wait for itself)."""
    global _pool
    if getattr(_on_it, "value", False):
        return fn()
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rpent-gl", initializer=_mark)
        pool = _pool
    return pool.submit(fn).result(timeout=timeout_s)


def _mark() -> None:
    _on_it.value = True


def _forget_in_child() -> None:
    # A forked child has no copy of the thread: it starts its own on first use.
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)

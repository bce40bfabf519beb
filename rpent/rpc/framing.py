"""Length-prefixed pickle frames: the wire format of the ``socket`` transport.

A frame is ``b"RPF1" | uint32 n_parts | n_parts x uint64 length | parts...`` (big-endian).
Part 0 is a pickle (protocol 5) stream; the other parts are its out-of-band buffers, so a
contiguous NumPy array goes from memory to the socket and back without being copied into
the pickle, and arrives writable.

Pickle runs code while loading: only ever read frames from trusted peers. That is why
socket servers bind loopback unless told otherwise (see docs/rpc.md).
"""

from __future__ import annotations

import pickle
import socket
import struct
import time
from typing import Any

MAGIC = b"RPF1"
_HEAD = struct.Struct("!4sI")
_LEN = struct.Struct("!Q")
DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024
MAX_PARTS = 65536
# Below this size joining parts costs less than an extra syscall.
_COALESCE_BYTES = 64 * 1024


class FrameError(Exception):
    """A frame that breaks the format (bad magic, too many parts, too large, unpicklable)."""

    def __init__(self, message: str, *, in_sync: bool) -> None:
        super().__init__(message)
        # in_sync: the byte stream is still aligned on a frame boundary, so the
        # connection can carry on after an error reply.
        self.in_sync = in_sync


class ConnectionClosed(ConnectionError):
    """The peer closed the connection (cleanly between frames, or mid-frame)."""


def encode_frame(obj: Any) -> list[memoryview | bytes]:
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    parts: list[memoryview | bytes] = [data]
    parts.extend(buf.raw() for buf in buffers)
    header = bytearray(_HEAD.pack(MAGIC, len(parts)))
    for part in parts:
        header += _LEN.pack(part.nbytes if isinstance(part, memoryview) else len(part))
    return [bytes(header), *parts]


def send_frame(sock: socket.socket, obj: Any, *, deadline: float | None = None) -> None:
    send_encoded(sock, encode_frame(obj), deadline=deadline)


def send_encoded(sock: socket.socket, chunks: list[memoryview | bytes], *, deadline: float | None = None) -> None:
    """Send a frame made by :func:`encode_frame` (so encoding errors surface before any byte is sent)."""
    total = sum(c.nbytes if isinstance(c, memoryview) else len(c) for c in chunks)
    if total <= _COALESCE_BYTES:
        _set_deadline(sock, deadline)
        sock.sendall(b"".join(chunks))
        return
    views = [memoryview(c).cast("B") for c in chunks]
    while views:
        _set_deadline(sock, deadline)
        sent = sock.sendmsg(views[:512])
        while sent:
            if sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0
        while views and views[0].nbytes == 0:
            views.pop(0)


def _set_deadline(sock: socket.socket, deadline: float | None) -> None:
    if deadline is None:
        return
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("deadline passed")
    sock.settimeout(remaining)


def _recv_into(sock: socket.socket, buf: bytearray | memoryview, deadline: float | None, *, at_start: bool) -> None:
    view = memoryview(buf).cast("B")
    got = 0
    while got < view.nbytes:
        _set_deadline(sock, deadline)
        n = sock.recv_into(view[got:])
        if n == 0:
            if at_start and got == 0:
                raise ConnectionClosed("peer closed the connection")
            raise ConnectionClosed("peer closed the connection in the middle of a frame")
        got += n


def recv_frame(
    sock: socket.socket,
    *,
    max_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    deadline: float | None = None,
) -> Any:
    """Read one frame and unpickle it.

    Raises ConnectionClosed on EOF, FrameError on a malformed or oversized frame (checked
    before any large allocation), TimeoutError/OSError from the socket.
    """
    head = bytearray(_HEAD.size)
    _recv_into(sock, head, deadline, at_start=True)
    magic, n_parts = _HEAD.unpack(head)
    if magic != MAGIC:
        raise FrameError(f"not an rpent frame (starts with {bytes(head[:4])!r}, expected {MAGIC!r})", in_sync=False)
    if not 1 <= n_parts <= MAX_PARTS:
        raise FrameError(f"frame has {n_parts} parts (allowed 1-{MAX_PARTS})", in_sync=False)
    lengths_raw = bytearray(_LEN.size * n_parts)
    _recv_into(sock, lengths_raw, deadline, at_start=False)
    lengths = [length for (length,) in _LEN.iter_unpack(lengths_raw)]
    total = sum(lengths)
    if total > max_bytes:
        raise FrameError(f"frame of {total} bytes exceeds the limit of {max_bytes} bytes", in_sync=False)
    parts = [bytearray(length) for length in lengths]
    for part in parts:
        _recv_into(sock, part, deadline, at_start=False)
    try:
        return pickle.loads(parts[0], buffers=parts[1:])
    except Exception as exc:
        raise FrameError(f"frame does not unpickle ({type(exc).__name__}: {exc})", in_sync=True) from None

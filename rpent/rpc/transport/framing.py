"""Length-prefixed pickle frames: the wire format of the ``socket`` transport.

A frame is ``b"RPF1" | uint32 n_parts | n_parts x uint64 length | parts...`` (big-endian).
Part 0 is a pickle (protocol 5) stream; the other parts are its out-of-band buffers, so a
contiguous NumPy array goes from memory to the socket and back without being copied into
the pickle, and arrives writable.

Pickle runs code while loading: only ever read frames from trusted peers. That is why
socket servers bind loopback unless told otherwise (see docs/rpc.md).

A reader never trusts the declared lengths with memory: each part is read into a buffer sized
to what has already arrived on the socket (at least 64 KiB), which doubles only once it is full,
so a peer that declares 255 MiB and sends 1 KB makes the reader hold 64 KiB. The frame limit is
checked on the declared total before any part is read.
"""

from __future__ import annotations

import fcntl
import pickle
import socket
import struct
import termios
import time
from typing import Any

from rpent.rpc.transport.limits import DEFAULT_MAX_FRAME_BYTES

MAGIC = b"RPF1"
_HEAD = struct.Struct("!4sI")
_LEN = struct.Struct("!Q")
MAX_PARTS = 65536
# Below this size joining parts costs less than an extra syscall.
_COALESCE_BYTES = 64 * 1024
_MIN_CHUNK = 64 * 1024


class FrameError(Exception):
    """A frame that breaks the format (bad magic, too many parts, too large, unpicklable)."""

    def __init__(self, message: str, *, in_sync: bool) -> None:
        super().__init__(message)
        # in_sync: the byte stream is still aligned on a frame boundary, so the
        # connection can carry on after an error reply.
        self.in_sync = in_sync


class ConnectionClosed(ConnectionError):
    """The peer closed the connection (cleanly between frames, or mid-frame)."""


class IdleTimeout(TimeoutError):
    """No byte of a new frame arrived within the idle timeout (nothing was in flight)."""


class FrameStalled(TimeoutError):
    """A frame had begun, then no byte arrived within the read timeout."""


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


class _Waits:
    """How long each read may wait: a whole-call deadline (clients), and per-read timeouts
    before a frame begins (idle) and inside it (stall) (servers)."""

    def __init__(self, deadline: float | None, idle_timeout_s: float | None, read_timeout_s: float | None) -> None:
        self.deadline = deadline
        self.idle_timeout_s = idle_timeout_s
        self.read_timeout_s = read_timeout_s
        self._by_deadline = False

    def arm(self, sock: socket.socket, started: bool) -> None:
        timeout = self.read_timeout_s if started else self.idle_timeout_s
        self._by_deadline = False
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("deadline passed")
            if timeout is None or remaining < timeout:
                timeout, self._by_deadline = remaining, True
        if timeout is not None:
            sock.settimeout(timeout)

    def expired(self, started: bool) -> TimeoutError:
        if self._by_deadline:
            return TimeoutError("deadline passed")
        if started:
            return FrameStalled(f"stalled: no bytes for {self.read_timeout_s:g} s in the middle of a frame")
        return IdleTimeout(f"idle: no request for {self.idle_timeout_s:g} s")


def _recv_into(sock: socket.socket, buf: bytearray | memoryview, waits: _Waits, *, started: bool) -> None:
    with memoryview(buf) as whole:
        view = whole.cast("B")
        got = 0
        while got < view.nbytes:
            begun = started or got > 0
            waits.arm(sock, begun)
            try:
                n = sock.recv_into(view[got:])
            except TimeoutError:
                raise waits.expired(begun) from None
            if n == 0:
                if not begun:
                    raise ConnectionClosed("peer closed the connection")
                raise ConnectionClosed("peer closed the connection in the middle of a frame")
            got += n
        view.release()


def _arrived(sock: socket.socket) -> int:
    """Bytes waiting in the socket's receive buffer."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


def _recv_part(sock: socket.socket, length: int, waits: _Waits) -> bytearray:
    """One part, in a buffer sized to what has arrived, doubling only once the bytes so far are in."""
    part = bytearray(min(length, max(_MIN_CHUNK, _arrived(sock))))
    _recv_into(sock, part, waits, started=True)
    while len(part) < length:
        filled = len(part)
        # bytes(n) is calloc'd (untouched pages), and a large bytearray grows by realloc: cheap.
        part.extend(bytes(min(filled, length - filled)))
        with memoryview(part) as view:
            _recv_into(sock, view[filled:], waits, started=True)
    return part


def recv_frame(
    sock: socket.socket,
    *,
    max_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    deadline: float | None = None,
    idle_timeout_s: float | None = None,
    read_timeout_s: float | None = None,
) -> Any:
    """Read one frame and unpickle it.

    ``deadline`` bounds the whole read (a client's call timeout); ``idle_timeout_s`` bounds the
    wait for a frame's first byte and ``read_timeout_s`` every later wait (a server's limits).
    Raises ConnectionClosed on EOF, FrameError on a malformed or oversized frame (the size is
    checked before any part is read), IdleTimeout / FrameStalled / TimeoutError, OSError.
    """
    waits = _Waits(deadline, idle_timeout_s, read_timeout_s)
    head = bytearray(_HEAD.size)
    _recv_into(sock, head, waits, started=False)
    magic, n_parts = _HEAD.unpack(head)
    if magic != MAGIC:
        raise FrameError(f"not an rpent frame (starts with {bytes(head[:4])!r}, expected {MAGIC!r})", in_sync=False)
    if not 1 <= n_parts <= MAX_PARTS:
        raise FrameError(f"frame has {n_parts} parts (allowed 1-{MAX_PARTS})", in_sync=False)
    lengths_raw = bytearray(_LEN.size * n_parts)
    _recv_into(sock, lengths_raw, waits, started=True)
    lengths = [length for (length,) in _LEN.iter_unpack(lengths_raw)]
    total = sum(lengths)
    if total > max_bytes:
        raise FrameError(f"frame of {total} bytes exceeds the limit of {max_bytes} bytes", in_sync=False)
    parts = [_recv_part(sock, length, waits) if length else bytearray() for length in lengths]
    try:
        return pickle.loads(parts[0], buffers=parts[1:])
    except Exception as exc:
        raise FrameError(f"frame does not unpickle ({type(exc).__name__}: {exc})", in_sync=True) from None

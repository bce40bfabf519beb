"""The ``socket`` transport server: pickle frames over TCP, one thread per connection, up to a cap.

Request frame: ``(method, args, kwargs)``. Reply frame: ``("ok", result)`` or
``("error", {"type", "message", "traceback"})``. A malformed frame or call gets an error reply;
the connection is closed only when the byte stream can no longer be trusted to be aligned, when
the peer stalls in the middle of a frame (after an error reply), or when it sends nothing for the
idle timeout. Past ``max_connections`` a new connection gets an ``RpcServerBusy`` error frame and
is closed, so idle sockets cannot pile up threads.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from rpent.rpc.facade import MalformedCall, MethodNotFound, RemoteFailure, RpcFacade
from rpent.rpc.transport.endpoint import Endpoint
from rpent.rpc.transport.framing import (
    ConnectionClosed,
    FrameError,
    FrameStalled,
    IdleTimeout,
    encode_frame,
    recv_frame,
    send_encoded,
    send_frame,
)
from rpent.rpc.transport.limits import ServerLimits
from rpent.rpc.transport.server_base import RpcServer

log = logging.getLogger(__name__)

# Short: the refusal is a few hundred bytes into an empty send buffer, and the accept loop waits on it.
_REFUSAL_SEND_S = 1.0


class SocketRpcServer(RpcServer):
    def __init__(
        self,
        facade: RpcFacade,
        endpoint: Endpoint,
        *,
        trust_network: bool = False,
        limits: ServerLimits | None = None,
    ) -> None:
        super().__init__(facade, endpoint, protocol="socket", opted_in=trust_network, limits=limits)
        self._conns: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._conns_lock = threading.Lock()
        self._accept_thread: threading.Thread | None = None

    def _open_connections(self) -> int:
        with self._conns_lock:
            return len(self._conns)

    def _start_serving(self) -> None:
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"rpc-accept {self.endpoint}", daemon=True
        )
        self._accept_thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # listener shut down by stop()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(target=self._serve_connection, args=(conn,), name="rpc-conn", daemon=True)
            with self._conns_lock:
                if self._stopping:
                    conn.close()
                    return
                busy = len(self._conns) >= self.limits.max_connections
                if not busy:
                    self._conns.add(conn)
                    self._threads.add(thread)
            if busy:
                self._refuse(conn)
            else:
                thread.start()

    def _refuse(self, conn: socket.socket) -> None:
        self._counters.add("refused")
        limit = self.limits.max_connections
        failure = RemoteFailure(
            "RpcServerBusy", f"server busy: {limit} connections open (the limit is {limit}); try again later"
        )
        try:
            conn.settimeout(_REFUSAL_SEND_S)
            send_frame(conn, ("error", failure.to_dict()))
            _discard_pending(conn)  # so the close is a FIN after the refusal, not a reset that could lose it
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            conn.close()

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            while self._serve_one(conn):
                pass
        finally:
            with self._conns_lock:
                self._conns.discard(conn)
                self._threads.discard(threading.current_thread())
            conn.close()

    def _serve_one(self, conn: socket.socket) -> bool:
        """Read one request and answer it; False when the connection is done."""
        limits = self.limits
        try:
            request = recv_frame(
                conn,
                max_bytes=limits.max_frame_bytes,
                idle_timeout_s=limits.idle_timeout_s,
                read_timeout_s=limits.read_timeout_s,
            )
        except FrameError as exc:
            self._counters.add("rejected")
            self._reply(conn, _protocol_error(str(exc)))
            return exc.in_sync
        except IdleTimeout:
            self._counters.add("dropped_idle")
            return False
        except FrameStalled as exc:
            self._counters.add("dropped_stalled")
            self._reply(conn, _protocol_error(f"{exc}; closing the connection"))
            return False
        except (ConnectionClosed, OSError):
            return False
        self._call_started()
        try:
            return self._reply(conn, self._handle(request))
        finally:
            self._call_finished()

    def _handle(self, request: Any) -> tuple[str, Any]:
        if not (isinstance(request, tuple) and len(request) == 3):
            self._counters.add("rejected")
            return _protocol_error("request must be a (method, args, kwargs) tuple")
        method, args, kwargs = request
        try:
            return ("ok", self.facade.dispatch(method, args, kwargs))
        except (MalformedCall, MethodNotFound) as exc:
            self._counters.add("rejected")
            return ("error", RemoteFailure.from_exception(exc).to_dict())
        except Exception as exc:
            log.debug("rpc %s raised", method, exc_info=True)
            return ("error", RemoteFailure.from_exception(exc).to_dict())

    def _reply(self, conn: socket.socket, reply: tuple[str, Any]) -> bool:
        try:
            chunks = encode_frame(reply)
        except Exception as exc:
            failure = RemoteFailure("RpcProtocolError", f"reply could not be encoded ({type(exc).__name__}: {exc})")
            chunks = encode_frame(("error", failure.to_dict()))
        try:
            # A peer that stops reading a reply is dropped like one that stops sending a request.
            conn.settimeout(self.limits.read_timeout_s)
            send_encoded(conn, chunks)
        except OSError:
            return False
        return True

    def _stop_serving(self, timeout_s: float) -> None:
        _shutdown_socket(self._listener)
        self._listener.close()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout_s)
        self._wait_idle(timeout_s)
        with self._conns_lock:
            conns = list(self._conns)
            threads = list(self._threads)
        for conn in conns:
            _shutdown_socket(conn)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(timeout_s)


def _protocol_error(message: str) -> tuple[str, dict[str, str]]:
    return ("error", RemoteFailure("RpcProtocolError", message).to_dict())


def _discard_pending(conn: socket.socket, limit: int = 1 << 20) -> None:
    discarded = 0
    conn.setblocking(False)  # with a timeout set, Python would wait for data despite MSG_DONTWAIT
    try:
        while discarded < limit and (chunk := conn.recv(65536)):
            discarded += len(chunk)
    except OSError:  # nothing (more) to read
        pass


def _shutdown_socket(sock: socket.socket) -> None:
    # shutdown() (unlike close()) wakes a thread blocked in accept()/recv() on Linux.
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass

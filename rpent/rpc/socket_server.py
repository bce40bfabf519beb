"""The ``socket`` transport server: pickle frames over TCP, one thread per connection.

Request frame: ``(method, args, kwargs)``. Reply frame: ``("ok", result)`` or
``("error", {"type", "message", "traceback"})``. A malformed frame gets an error reply; the
connection is closed only when the byte stream can no longer be trusted to be aligned.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from rpent.rpc.endpoint import Endpoint
from rpent.rpc.facade import RemoteFailure, RpcFacade
from rpent.rpc.framing import DEFAULT_MAX_FRAME_BYTES, ConnectionClosed, FrameError, recv_frame, send_frame
from rpent.rpc.server_base import RpcServer

log = logging.getLogger(__name__)


class SocketRpcServer(RpcServer):
    def __init__(
        self,
        facade: RpcFacade,
        endpoint: Endpoint,
        *,
        trust_network: bool = False,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        super().__init__(facade, endpoint, protocol="socket", trust_network=trust_network)
        self.max_frame_bytes = max_frame_bytes
        self._conns: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._conns_lock = threading.Lock()
        self._accept_thread: threading.Thread | None = None

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
                self._conns.add(conn)
                self._threads.add(thread)
            thread.start()

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            while True:
                try:
                    request = recv_frame(conn, max_bytes=self.max_frame_bytes)
                except FrameError as exc:
                    self._reply(conn, ("error", {"type": "RpcProtocolError", "message": str(exc), "traceback": ""}))
                    if exc.in_sync:
                        continue
                    return
                except (ConnectionClosed, OSError):
                    return
                self._call_started()
                try:
                    if not self._reply(conn, self._handle(request)):
                        return
                finally:
                    self._call_finished()
        finally:
            with self._conns_lock:
                self._conns.discard(conn)
                self._threads.discard(threading.current_thread())
            conn.close()

    def _handle(self, request: Any) -> tuple[str, Any]:
        if not (isinstance(request, tuple) and len(request) == 3):
            failure = RemoteFailure("RpcProtocolError", "request must be a (method, args, kwargs) tuple")
            return ("error", failure.to_dict())
        method, args, kwargs = request
        try:
            return ("ok", self.facade.dispatch(method, args, kwargs))
        except Exception as exc:
            log.debug("rpc %s raised", method, exc_info=True)
            return ("error", RemoteFailure.from_exception(exc).to_dict())

    def _reply(self, conn: socket.socket, reply: tuple[str, Any]) -> bool:
        try:
            send_frame(conn, reply)
        except (ConnectionError, OSError):
            return False
        except Exception as exc:
            failure = RemoteFailure("RpcProtocolError", f"reply could not be encoded ({type(exc).__name__}: {exc})")
            try:
                send_frame(conn, ("error", failure.to_dict()))
            except Exception:
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


def _shutdown_socket(sock: socket.socket) -> None:
    # shutdown() (unlike close()) wakes a thread blocked in accept()/recv() on Linux.
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass

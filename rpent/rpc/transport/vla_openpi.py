"""openpi's websocket policy protocol, client side, with every wait bounded.

An openpi policy server (``scripts/serve_policy.py``) sends its metadata as soon as a client
connects, then answers each observation dict with a dict holding ``actions``, all as
msgpack-numpy binary messages; a text message is the server's traceback. openpi-client's
``WebsocketClientPolicy`` speaks this, but waits without limit for the metadata and for every
reply: the subclass below adds the limits. Failures surface as rpent.rpc errors naming the
endpoint, so a tool reports them like any other VLA transport's.

openpi-client (and its websockets and msgpack) load only when a websocket endpoint is used.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any

from rpent.rpc.errors import RpcConnectionError, RpcError, RpcProtocolError, RpcRemoteError, RpcTimeout
from rpent.rpc.transport.vla_endpoint import WebsocketEndpoint

log = logging.getLogger(__name__)

#: Time for the TCP connect, the websocket handshake and the server's metadata. openpi-client's own default.
DEFAULT_CONNECT_TIMEOUT_S = 10.0
#: Time for one inference. A pi0 server answers in 0.1-0.5 s on a GPU, but its first call may compile.
DEFAULT_INFER_TIMEOUT_S = 60.0
#: Largest message accepted from the server: replies are action chunks of a few kB; this keeps a
#: broken server from filling memory (openpi-client itself accepts any size).
MAX_REPLY_BYTES = 16 * 2**20


def _bounded_policy_class() -> type:
    import websockets.protocol
    import websockets.sync.client
    from openpi_client import msgpack_numpy
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    class BoundedWebsocketClientPolicy(WebsocketClientPolicy):
        """WebsocketClientPolicy whose connect, metadata and replies each have a deadline."""

        def __init__(
            self, uri: str, *, api_key: str | None, connect_timeout_s: float, infer_timeout_s: float, direct: bool
        ) -> None:
            self._connect_timeout_s = connect_timeout_s
            self._infer_timeout_s = infer_timeout_s
            self._direct = direct
            self._expired = threading.Event()
            self._watchdog = _Watchdog(lambda: (self._expired.set(), self.abort()))
            try:
                super().__init__(host=uri, api_key=api_key)
            except BaseException:
                self._watchdog.close()
                raise

        def _wait_for_server(self) -> tuple[Any, dict]:
            headers = {"Authorization": f"Api-Key {self._api_key}"} if self._api_key else None
            conn = websockets.sync.client.connect(
                self._uri,
                compression=None,
                max_size=MAX_REPLY_BYTES,
                additional_headers=headers,
                open_timeout=self._connect_timeout_s,
                legacy=True,  # the connection itself, as openpi-client expects (websockets 17 asks to say so)
                # A loopback server is never reached through the environment's HTTP proxy.
                **({"proxy": None} if self._direct else {}),
            )
            try:
                metadata = msgpack_numpy.unpackb(conn.recv(timeout=self._connect_timeout_s))
            except BaseException:
                conn.close()
                raise
            return conn, metadata

        def infer(self, obs: dict) -> dict:
            try:
                data = self._packer.pack(obs)
            except (TypeError, ValueError) as exc:
                raise _UnsendableObservation(f"{type(exc).__name__}: {exc}") from exc
            # One deadline for the send and the reply. A send has none of its own: to a server that
            # stops reading, it blocks once the socket buffers fill, so a watchdog cuts the socket.
            deadline = time.monotonic() + self._infer_timeout_s
            self._expired.clear()
            self._watchdog.arm(deadline)
            try:
                self._ws.send(data)
                response = self._ws.recv(timeout=max(deadline - time.monotonic(), 0.0))
            except Exception:
                if self._expired.is_set():
                    raise TimeoutError("infer deadline passed") from None
                raise
            finally:
                self._watchdog.disarm()
            if isinstance(response, str):
                raise _ServerTraceback(response)
            return msgpack_numpy.unpackb(response)

        def abort(self) -> None:
            """Cut the TCP connection at once, from any thread: a blocked send or receive fails now."""
            try:
                self._ws.socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

        def close(self) -> None:
            self._watchdog.close()
            self._ws.close()

        @property
        def open(self) -> bool:
            return self._ws.state is websockets.protocol.State.OPEN

    return BoundedWebsocketClientPolicy


class _Watchdog:
    """Calls `on_expiry` once an armed deadline passes; one thread for a connection's every call
    (a timer thread per inference cost more than the rest of our client's overhead).

    Arming wakes the thread only when it would not wake by itself before the new deadline: with one
    timeout for every call, each deadline lies after the one the thread sleeps towards, so a run of
    inferences wakes it once per timeout, not once per inference: no thread switch, and no wait for the
    GIL, inside a 15 Hz loop's round trip."""

    def __init__(self, on_expiry: Any) -> None:
        self._on_expiry = on_expiry
        self._deadline: float | None = None
        self._wakes_at: float | None = None  # when the thread's wait ends by itself; None: only when woken
        self._closed = False
        self._changed = threading.Condition()
        threading.Thread(target=self._run, name="rpent-openpi-watchdog", daemon=True).start()

    def arm(self, deadline: float) -> None:
        with self._changed:
            self._deadline = deadline
            if self._wakes_at is None or self._wakes_at > deadline:
                self._changed.notify()

    def disarm(self) -> None:
        with self._changed:
            self._deadline = None

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._closed and (self._deadline is None or self._deadline > time.monotonic()):
                    self._wakes_at = self._deadline
                    self._changed.wait(None if self._deadline is None else self._deadline - time.monotonic())
                self._wakes_at = None
                if self._closed:
                    return
                self._deadline = None
            self._on_expiry()


class _ServerTraceback(Exception):
    """The server answered with text: openpi's server sends its traceback that way, then closes."""


class _UnsendableObservation(Exception):
    """The observation holds a value msgpack-numpy cannot encode (an object array, a custom class)."""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else "(empty message)"


class OpenpiPolicyClient:
    """One openpi policy server. Connects on first use; after any failure the next call reconnects.

    Errors: RpcConnectionError (refused, unreachable, closed mid-call), RpcTimeout (no metadata or
    no reply in time), RpcProtocolError (not a websocket policy server, an undecodable reply),
    RpcRemoteError (the server's policy raised). Thread-safe.
    """

    def __init__(
        self,
        endpoint: WebsocketEndpoint,
        *,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        infer_timeout_s: float = DEFAULT_INFER_TIMEOUT_S,
        api_key: str | None = None,
    ) -> None:
        if connect_timeout_s <= 0:
            raise ValueError(f"connect_timeout_s: must be > 0, got {connect_timeout_s}")
        if infer_timeout_s <= 0:
            raise ValueError(f"infer_timeout_s: must be > 0, got {infer_timeout_s}")
        self.endpoint = endpoint
        self.connect_timeout_s = connect_timeout_s
        self.infer_timeout_s = infer_timeout_s
        self._api_key = api_key
        self._policy: Any = None
        self._metadata: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._interrupted = False
        self._pending = False

    @property
    def metadata(self) -> dict[str, Any] | None:
        """What the server sent on connect (None before the first connection)."""
        return self._metadata

    def connect(self) -> dict[str, Any]:
        """Connect now (``infer`` does it when needed) and return the server's metadata."""
        with self._lock:
            self._ensure_connected()
            assert self._metadata is not None
            return self._metadata

    def infer(self, observation: Mapping[str, Any]) -> dict[str, Any]:
        """Send one observation, return the server's reply dict (it holds ``actions``)."""
        with self._lock:
            self._ensure_connected()
            self._interrupted = False
            self._pending = True
            try:
                reply = self._policy.infer(dict(observation))
            except BaseException as exc:
                self._pending = False
                self._drop()
                if self._interrupted:
                    raise RpcConnectionError(
                        "interrupted: the call was cancelled", endpoint=str(self.endpoint), method="infer"
                    ) from None
                raise self._error(exc, "infer") from None
            self._pending = False
            if not isinstance(reply, dict):
                raise RpcProtocolError(
                    f"reply must be a msgpack map, got {type(reply).__name__}",
                    endpoint=str(self.endpoint),
                    method="infer",
                )
            return reply

    def interrupt(self) -> None:
        """From another thread (a cancel): make a pending ``infer`` fail now instead of at its deadline.

        It cuts the connection, which wakes the waiting call; the next call reconnects. A
        connect in progress still runs to its own deadline.
        """
        policy = self._policy  # no lock: the waiting call holds it
        if policy is not None and self._pending:
            self._interrupted = True
            try:
                policy.abort()
            except Exception:
                log.debug("interrupting the call to %s failed", self.endpoint, exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> OpenpiPolicyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_connected(self) -> None:
        if self._policy is not None and not self._policy.open:
            # Closed while idle (a restarted server, a dropped network): start over rather than fail.
            log.info("openpi policy server at %s closed the idle connection: reconnecting", self.endpoint)
            self._drop()
        if self._policy is not None:
            return
        cls = _bounded_policy_class()
        try:
            self._policy = cls(
                str(self.endpoint),
                api_key=self._api_key,
                connect_timeout_s=self.connect_timeout_s,
                infer_timeout_s=self.infer_timeout_s,
                direct=self.endpoint.is_loopback,
            )
        except BaseException as exc:
            raise self._error(exc, "connect") from None
        metadata = self._policy.get_server_metadata()
        self._metadata = metadata if isinstance(metadata, dict) else {"metadata": metadata}
        log.info("openpi policy server at %s: metadata %s", self.endpoint, self._metadata)

    def _drop(self) -> None:
        policy, self._policy = self._policy, None
        if policy is not None:
            try:
                policy.close()
            except Exception:  # already broken: closing is best effort
                log.debug("closing the connection to %s failed", self.endpoint, exc_info=True)

    def _error(self, exc: BaseException, method: str) -> BaseException:
        """The rpent.rpc error for a failure of ``method``; KeyboardInterrupt and the like pass through."""
        import msgpack
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
        from websockets.frames import CloseCode

        where = {"endpoint": str(self.endpoint), "method": method}
        if not isinstance(exc, Exception):
            return exc
        if isinstance(exc, RpcError):
            return exc
        if isinstance(exc, _ServerTraceback):
            text = str(exc)
            return RpcRemoteError("PolicyServerError", _last_line(text), remote_traceback=text, **where)
        if isinstance(exc, _UnsendableObservation):
            return RpcProtocolError(f"observation cannot be sent as msgpack-numpy: {exc}", **where)
        if isinstance(exc, TimeoutError):
            wait = "metadata after connecting" if method == "connect" else "reply"
            limit = self.connect_timeout_s if method == "connect" else self.infer_timeout_s
            return RpcTimeout(f"no {wait} within {limit:g} s", **where)
        if isinstance(exc, ConnectionClosed):
            if exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:
                return RpcProtocolError(f"reply is larger than {MAX_REPLY_BYTES // 2**20} MiB", **where)
            if exc.rcvd is None:
                how = "the connection was cut without a websocket close (the server died or the network dropped)"
            else:
                reason = f": {exc.rcvd.reason}" if exc.rcvd.reason else ""
                how = f"the server closed the connection (websocket close code {exc.rcvd.code}{reason})"
            return RpcConnectionError(how, **where)
        if isinstance(exc, (InvalidHandshake, InvalidURI)):
            return RpcProtocolError(f"not an openpi websocket policy server: {exc}", **where)
        if isinstance(exc, ssl.SSLCertVerificationError):
            return RpcConnectionError(
                f"TLS: {exc.verify_message or exc} (a private CA's certificate can be trusted with SSL_CERT_FILE)",
                **where,
            )
        if isinstance(exc, ssl.SSLError):
            return RpcConnectionError(f"TLS: {exc} (is the server serving wss://, not ws://?)", **where)
        if isinstance(exc, ConnectionRefusedError):
            return RpcConnectionError("connection refused: is openpi's serve_policy.py running there?", **where)
        if isinstance(exc, OSError):
            return RpcConnectionError(f"cannot reach the server: {exc.strerror or exc}", **where)
        if isinstance(exc, (msgpack.exceptions.UnpackException, ValueError, TypeError, KeyError)):
            what = "metadata" if method == "connect" else "reply"
            return RpcProtocolError(f"{what} is not msgpack-numpy: {type(exc).__name__}: {exc}", **where)
        return RpcError(f"{type(exc).__name__}: {exc}", **where)

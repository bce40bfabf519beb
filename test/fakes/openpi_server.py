"""A scripted openpi-style websocket policy server on 127.0.0.1, for tests (LIBERO and Franka policies).

It speaks the protocol of openpi's serve_policy.py (metadata on connect, one msgpack-numpy reply
per observation) with the `websockets` package and openpi-client's codec. What it answers is up
to `script(observation, call_index)`, which returns a reply: a dict (sent packed), raw bytes or
text (sent as they are), or one of the faults below.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from openpi_client import msgpack_numpy
from websockets.frames import Frame, Opcode
from websockets.sync.server import ServerConnection, serve

#: Reply that makes the server send the first half of a frame, then drop the TCP connection.
CUT_MID_MESSAGE = object()
#: Reply that makes the server close the websocket cleanly instead of answering.
CLOSE = object()
#: Reply that makes the server never answer (until the test ends).
SILENCE = object()

Script = Callable[[dict[str, Any], int], Any]


class ThenClose:
    """Send `reply`, then close the websocket cleanly (`closed` is set once the close handshake is done)."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.closed = threading.Event()


def chunk(*actions: list[float], repeat: int = 1) -> dict[str, Any]:
    return {"actions": np.repeat(np.asarray(actions, dtype=np.float32), repeat, axis=0)}


class ScriptedPolicyServer:
    def __init__(self, script: Script, *, metadata: dict[str, Any] | None = None, ssl: Any = None) -> None:
        self.script = script
        self.metadata = metadata if metadata is not None else {"policy": "scripted", "action_horizon": 10}
        self.observations: list[dict[str, Any]] = []
        self.connections = 0
        self._released = threading.Event()
        self._server = serve(self._handle, "127.0.0.1", 0, compression=None, max_size=None, ssl=ssl)
        self.port = self._server.socket.getsockname()[1]
        self.endpoint = f"{'wss' if ssl else 'ws'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="openpi-test-server", daemon=True)

    def __enter__(self) -> ScriptedPolicyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._server.shutdown()
        self._thread.join(timeout=10)

    def _handle(self, ws: ServerConnection) -> None:
        self.connections += 1
        ws.send(msgpack_numpy.packb(self.metadata))
        for message in ws:
            observation = msgpack_numpy.unpackb(message)
            index = len(self.observations)
            self.observations.append(observation)
            reply = self.script(observation, index)
            if reply is CUT_MID_MESSAGE:
                frame = Frame(Opcode.BINARY, msgpack_numpy.packb(chunk([0.0] * 7, repeat=10))).serialize(
                    mask=False, extensions=[]
                )
                ws.socket.sendall(frame[: len(frame) // 2])
                ws.socket.shutdown(socket.SHUT_RDWR)  # FIN after half a frame: no websocket close
                return
            if reply is CLOSE:
                ws.close()
                return
            if reply is SILENCE:
                self._released.wait(60)
                return
            then_close = reply if isinstance(reply, ThenClose) else None
            if then_close is not None:
                reply = then_close.reply
            ws.send(reply if isinstance(reply, (bytes, str)) else msgpack_numpy.packb(reply))
            if then_close is not None:
                ws.close()
                then_close.closed.set()
                return


class StalledReaderServer:
    """Accepts one websocket, sends metadata, then never reads again: a client's sends back up and block.

    Its receive buffer is kept small so that one large message fills it.
    """

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(1)
        self.endpoint = f"ws://127.0.0.1:{self._listener.getsockname()[1]}"
        self._released = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="openpi-stalled-server", daemon=True)

    def __enter__(self) -> StalledReaderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._thread.join(timeout=10)
        self._listener.close()

    def _serve(self) -> None:
        from websockets.server import ServerProtocol

        conn, _ = self._listener.accept()
        with conn:
            protocol = ServerProtocol()
            events: list[Any] = []
            while not events:  # the handshake request
                data = conn.recv(65536)
                if not data:
                    return
                protocol.receive_data(data)
                events = protocol.events_received()
            protocol.send_response(protocol.accept(events[0]))
            protocol.send_binary(msgpack_numpy.packb({"policy": "stalled"}))
            for data in protocol.data_to_send():
                conn.sendall(data)
            self._released.wait(60)

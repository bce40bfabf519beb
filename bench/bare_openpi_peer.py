"""Bare openpi-client in a process of its own, as a lab's own DROID script runs it: bench_policy.py's peer
for the vla_client_node's inference round trip.

    python bench/bare_openpi_peer.py ws://127.0.0.1:PORT OBSERVATION.msgpack

Connects with openpi-client's WebsocketClientPolicy, then for each line read on stdin sends the
observation (msgpack-numpy, as the node sent it) and prints the round trip in seconds, one line each;
ends at the end of stdin. The trigger comes from the bench, once per node inference, so this connection
idles between calls as the node's does.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from openpi_client import msgpack_numpy
from openpi_client.websocket_client_policy import WebsocketClientPolicy


def main() -> None:
    endpoint, observation_file = sys.argv[1], Path(sys.argv[2])
    observation = msgpack_numpy.unpackb(observation_file.read_bytes())
    policy = WebsocketClientPolicy(host=endpoint)
    print("ready", flush=True)
    try:
        for _ in sys.stdin:
            start = time.perf_counter()
            policy.infer(observation)
            print(time.perf_counter() - start, flush=True)
    finally:
        policy._ws.close()  # openpi-client has no close of its own


if __name__ == "__main__":
    main()

"""The dashboard accepts connections once its URL is known: `rpent run --dashboard` prints the URL before
uvicorn's loop starts, and a client that connects at once must be queued, not refused."""

from __future__ import annotations

import socket
from pathlib import Path

from dashboard_support import toy_args

from rpent.dashboard.cli import DashboardServer
from rpent.dashboard.session import DashboardSession
from rpent.robot import load_robot


def test_a_client_connecting_before_the_server_loop_runs_is_queued_not_refused(tmp_path: Path) -> None:
    module = load_robot("toy")
    session = DashboardSession(args=toy_args(tmp_path / "runs"), spec=module.get_robot_spec(), robot=module,
                               output_root=tmp_path / "runs")
    server = DashboardServer(session, host="127.0.0.1", port=0)  # constructed, not yet serving
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5):
            pass
    finally:
        server._sock.close()

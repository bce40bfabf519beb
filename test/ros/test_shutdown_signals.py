"""A node whose shutdown hangs says where, when `ros2 launch` escalates to SIGTERM. Needs no ROS."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

# Shutdown has begun (rpent_ros.node_main.Spinning.close), then the main thread waits on something
# that never comes, as a node whose record or motion does not finish would.
HANGING = textwrap.dedent("""
    import threading
    from rpent_ros.signals import shield_shutdown

    def waiting_for_the_arm():
        print("stopping", flush=True)  # from in here, so the stack names this function whenever SIGTERM comes
        threading.Event().wait()

    shield_shutdown()
    waiting_for_the_arm()
""")


def test_a_sigterm_during_a_hung_shutdown_dumps_where_every_thread_waits_and_ends_it():
    node = subprocess.Popen([sys.executable, "-c", HANGING], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert node.stdout.readline().strip() == "stopping"
        node.send_signal(signal.SIGINT)  # the launch's second Ctrl-C: ignored once shutdown began
        node.send_signal(signal.SIGTERM)
        _, stderr = node.communicate(timeout=30)
    finally:
        node.kill()
    assert node.returncode == -signal.SIGTERM  # SIGINT did nothing; SIGTERM ended it, as before
    assert "Current thread" in stderr and "in waiting_for_the_arm" in stderr, stderr

"""JointStateReader: an arm's latest measured joints from /joint_states, for a node that is not the arm's."""

from __future__ import annotations

import threading

from rclpy.node import Node
from sensor_msgs.msg import JointState

from rpent.runtime.arm import RuntimeFault


class JointStateReader:
    """The latest measured joints of one arm (`<arm>_joint1..<count>` on /joint_states), e.g. for a
    wrist camera in another node than its arm."""

    def __init__(self, node: Node, arm: str, count: int = 7) -> None:
        self.arm = arm
        self.names = [f"{arm}_joint{i}" for i in range(1, count + 1)]
        self._positions: dict[str, float] = {}
        self._lock = threading.Lock()
        node.create_subscription(JointState, "/joint_states", self._receive, 10)

    def _receive(self, msg: JointState) -> None:
        with self._lock:
            self._positions.update((n, float(p)) for n, p in zip(msg.name, msg.position, strict=False) if n in self.names)

    def __call__(self) -> list[float]:
        with self._lock:
            missing = [n for n in self.names if n not in self._positions]
            if missing:
                raise RuntimeFault(f"arm {self.arm}: no joint states yet on /joint_states ({', '.join(missing)})")
            return [self._positions[n] for n in self.names]

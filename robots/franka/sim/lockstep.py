"""Lock-step: while a motion runs, the simulated robot's clock waits for its client.

A real FR3 sends its state every millisecond and expects the answer within that millisecond; a late
client is the client's problem (franky extrapolates, Ruckig may give up with -111, the robot reflexes).
On a busy test machine the franky client is late often, so a simulator that keeps the wall clock
turns machine load into different results. Here, while an arm is in a motion, the next physics step
waits until that arm's client has answered the last state it was sent, so every control step the
client sees is exactly 1 ms of robot time later than the one before, however slow the machine is.
Idle arms (no motion) impose nothing: the simulation then keeps the wall clock (FrankaSim.speed).

A client that answers nothing for `patience_s` of wall time (frozen, killed without closing its
connection) is left behind: the simulation runs on for the other arms and the robot's own hold
controller, as a real arm would not wait either, and waits for it again once it answers.

A motion also ends as on a real arm: at rest. libfranka answers a finish whose motion generator still
commands motion with a reflex ("Motion finished commanded, but the robot is still moving!"); franky-sim
accepts any finish, so code that ends motions at speed would pass every simulated test and fail on
the robot. Here such a finish is refused the same way: the Move is answered ReflexAborted (franky
raises it from join_motion), the arm holds where it is, and the refusal is counted.
"""

from __future__ import annotations

import logging
import select
import socket
import struct
import time
from collections.abc import Iterable, Sequence
from typing import Any

from franky_sim.franka_robot_protocol import BaseCommand, MoveStatus, RobotCommand, UDPCommand
from franky_sim.franka_robot_server import ControlMode, FrankaRobotServer

log = logging.getLogger(__name__)

# Wall-clock seconds a moving arm's client may take to answer one state before the simulation runs on
# without it. Far above any scheduling delay of a loaded machine (tens of ms), far below what a
# frozen client costs the other arm's motion.
PATIENCE_S = 0.5
# How long one wait for a late client's answer blocks before it looks again (also at `running`).
_POLL_S = 0.005
_MESSAGE_ID = struct.Struct("<Q")  # every libfranka UDP command starts with the id of the state it answers
_FINISHED_AT = 313  # the byte of motion_generation_finished in a libfranka UDP command (UDPCommand.STRUCT)
# The largest commanded speed a finishing motion may still have: a motion generator that ends at rest
# commands exactly zero (Ruckig's target); anything above this is a motion cut off at speed.
FINISH_AT_REST_RAD_S = 1e-3  # joint motions
FINISH_AT_REST_M_S = 1e-4  # Cartesian motions
_CONTROL_PERIOD_S = 0.001


class LockstepRobotServer(FrankaRobotServer):
    """franky-sim's FCI server for one arm that knows which state its client answered last."""

    def __init__(self, robot: Any, hostname_candidates: Iterable[str]) -> None:
        self.answered_id = -1  # before super(): init() resets the connection state through _reset_state
        self._awaited_since: float | None = None
        self._awaited_answer = -1
        self._given_up = False
        self._motion_id = 0
        self._motion_first_state = 0
        self.left_behind = 0  # waits given up on (the client answered nothing for PATIENCE_S)
        self.finished_moving = 0  # finishes refused as a real arm refuses them (a motion ended at speed)
        self._previous_command: tuple[int, bytes] | None = None  # (motion id, the last command of that motion)
        super().__init__(robot, hostname_candidates)

    # --- franky-sim hooks ----------------------------------------------------------------------
    def _handle_udp_command(self, command_data: bytes) -> None:
        message_id = _MESSAGE_ID.unpack_from(command_data)[0]
        self.answered_id = max(self.answered_id, message_id)
        if message_id > 0 and self.current_motion_id:
            if command_data[_FINISHED_AT] and self._still_moving(command_data):
                self._refuse_finish()
                return
            self._previous_command = (self.current_motion_id, command_data)
        super()._handle_udp_command(command_data)

    def _still_moving(self, finish: bytes) -> bool:
        """The finishing command still commands motion (for position modes: against the command before)."""
        mode = self._FrankaRobotServer__control_mode
        cmd = UDPCommand.from_bytes(finish)
        previous = self._previous_command
        before = UDPCommand.from_bytes(previous[1]) if previous and previous[0] == self.current_motion_id else None
        if mode == ControlMode.VELOCITY:
            return max(abs(v) for v in cmd.dq_c) > FINISH_AT_REST_RAD_S
        if mode == ControlMode.CARTESIAN_VELOCITY:
            return max(abs(v) for v in cmd.O_dP_EE_c[:3]) > FINISH_AT_REST_M_S
        if before is None:
            return False
        if mode == ControlMode.POSITION:
            return max(abs(a - b) for a, b in zip(cmd.q_c, before.q_c, strict=True)) / _CONTROL_PERIOD_S > FINISH_AT_REST_RAD_S
        if mode == ControlMode.CARTESIAN_POSITION:  # column-major 4x4: the translation is elements 12-14
            moved = max(abs(cmd.O_T_EE_c[i] - before.O_T_EE_c[i]) for i in (12, 13, 14))
            return moved / _CONTROL_PERIOD_S > FINISH_AT_REST_M_S
        return False

    def _refuse_finish(self) -> None:
        motion_id = self.current_motion_id
        self.stop_motion(send_preemption_signal=False)  # the arm holds where it is, as after a reflex
        BaseCommand.send_response(self._tcp_socket, RobotCommand.kMove, motion_id, MoveStatus.kReflexAborted)
        self.reset_current_motion_id()
        self._previous_command = None
        self.finished_moving += 1
        log.warning("franky-sim arm at %s: its client finished a motion while it still moved: refused as the "
                    "robot refuses it (a reflex: Motion finished commanded, but the robot is still moving!)",
                    self.hostname)

    def _reset_state(self) -> None:  # a new client: nothing answered yet
        super()._reset_state()
        self.answered_id, self._motion_id = -1, 0
        self._awaited_since = None
        self._previous_command = None

    # --- the clock -----------------------------------------------------------------------------
    @property
    def _last_sent_id(self) -> int:
        return self._FrankaServer__message_id - 1  # franky-sim numbers states from 0, counting up after each send

    def awaits_answer(self, now: float, patience_s: float = PATIENCE_S) -> bool:
        """True while this arm is in a motion and its client has not answered the last state yet."""
        if not self.current_motion_id or not self.udp_connected:
            self._awaited_since = None
            return False
        if self.current_motion_id != self._motion_id:  # a new motion: its states are numbered from the next one
            self._motion_id, self._motion_first_state = self.current_motion_id, self._last_sent_id + 1
        # libfranka answers no state before its control loop runs: it first waits for a state that shows the
        # motion started, then for one more. Waiting before its first answer would hold both sides forever.
        if self.answered_id < self._motion_first_state or self.answered_id >= self._last_sent_id:
            self._awaited_since = None
            return False
        if self._awaited_since is None or self._awaited_answer != self.answered_id:
            self._awaited_since, self._awaited_answer, self._given_up = now, self.answered_id, False
            return True
        if self._given_up:
            return False
        if now - self._awaited_since <= patience_s:
            return True
        self._given_up = True  # until the client answers (that changes answered_id)
        self.left_behind += 1
        log.warning("franky-sim arm at %s: its client answered no state for %.1f s; the simulation runs on "
                    "without waiting for it until it answers again", self.hostname, patience_s)
        return False

    def describe(self) -> str:
        """This arm's client as the clock sees it, in words (a stalled simulation's log)."""
        if not self.udp_connected:
            return f"{self.hostname}: no client"
        motion = f"in motion {self.current_motion_id}" if self.current_motion_id else "idle"
        waiting = " (given up on)" if self._given_up else ""
        return (f"{self.hostname}: {motion}, answered state {self.answered_id} of {self._last_sent_id} sent{waiting}, "
                f"left behind {self.left_behind} times")

    def sockets(self) -> list[socket.socket]:
        """What the client's next answer or command arrives on (UDP commands, TCP requests such as a stop)."""
        return [s for s in (self._FrankaServer__udp_socket, self._FrankaServer__tcp_socket) if s is not None]


def wait_for_answers(late: Sequence[LockstepRobotServer], timeout_s: float = _POLL_S) -> None:
    """Block (without the GIL) until one of the late clients sent something, or `timeout_s` passed."""
    sockets = [s for server in late for s in server.sockets()]
    if not sockets:
        time.sleep(timeout_s)
        return
    try:
        select.select(sockets, [], [], timeout_s)
    except (OSError, ValueError):  # a socket closed meanwhile: the next round sees the disconnect
        pass

"""franky-sim in this process: one or more FR3 arms, a table, graspable cubes and fixed cameras.

The simulator speaks the real libfranka protocol on 127.0.0.x, so the same franky code drives
it and a real robot. Stepping runs in our own thread under a lock, so cameras and ground-truth
readers see whole physics steps, never half-written ones. While an arm moves, the simulation keeps
time with that arm's client (robots.franka.sim.lockstep); idle, it keeps the wall clock.

Run standalone (e.g. to test a client against a separate process):
    python -m robots.franka.sim --arms 2
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np
from franky_sim import SimulationServer
from franky_sim.franka_gripper_protocol import GripperCommandStatus
from franky_sim.franka_server import BaseCommand

from robots.franka.sim.lockstep import LockstepRobotServer, wait_for_answers
from robots.franka.sim.stall_watch import StallWatch
from robots.franka.sim.world import WorldPart, build_world, mujoco_camera_pose
from rpent.runtime.arm import RuntimeFault

log = logging.getLogger(__name__)

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class SimObject:
    """A free-floating box; `size_m` is the full edge length, `yaw_deg` its turn about the vertical."""

    name: str
    position: Vec3
    size_m: float = 0.045
    rgba: tuple[float, float, float, float] = (0.85, 0.1, 0.1, 1.0)
    mass_kg: float = 0.05
    yaw_deg: float = 0.0


@dataclass(frozen=True)
class SimCamera:
    """A fixed camera looking from `position` at `target` (world frame)."""

    name: str
    position: Vec3
    target: Vec3
    fovy_deg: float = 50.0


@dataclass(frozen=True)
class SimWristCamera:
    """A camera on arm `arm_index`'s hand, looking from `position` at `target` (both in the hand frame:
    z along the approach axis, fingers closing along y).

    The default sits beside the hand housing, like a RealSense D405 on a bracket, and looks past the
    fingertips at the ground ~0.2 m beyond them, so it sees what the gripper is about to grasp.
    """

    name: str
    arm_index: int = 0
    position: Vec3 = (0.065, 0.0, 0.03)
    target: Vec3 = (0.0, 0.0, 0.30)
    fovy_deg: float = 60.0


TABLE_TOP_Z_M = 0.20
SWITCH_INTERVAL_S = 0.0005


@dataclass(frozen=True)
class SimScene:
    """The world. Arms sit at `arm_positions`; a pose in an arm's base frame is world minus that.

    `seed` is None for the fixed scene below, else the seed robots.franka.sim.scene_layout placed the
    objects with (recorded with each run so a scene can be rebuilt).
    """

    arm_positions: tuple[Vec3, ...] = ((0.0, 0.0, 0.0),)
    table_center_xy: tuple[float, float] = (0.55, 0.0)
    table_half_size_xy: tuple[float, float] = (0.25, 0.45)
    table_top_z: float = TABLE_TOP_Z_M
    objects: tuple[SimObject, ...] = (
        SimObject("cube", (0.50, 0.0, TABLE_TOP_Z_M + 0.0225)),
        SimObject("green_cube", (0.45, 0.17, TABLE_TOP_Z_M + 0.02), 0.04, (0.1, 0.7, 0.2, 1.0)),
        SimObject("blue_cube", (0.58, -0.17, TABLE_TOP_Z_M + 0.02), 0.04, (0.15, 0.3, 0.85, 1.0)),
    )
    cameras: tuple[SimCamera, ...] = (
        # Holds the whole arm at home (its top is at z 0.86 m) above the table, and stays close
        # and low enough that a board held by the hand fills the view for hand-eye calibration.
        SimCamera("front", (1.4, 0.0, 0.82), (0.45, 0.0, 0.45), fovy_deg=58.0),
        SimCamera("top", (0.55, 0.0, 1.45), (0.55, 0.0, 0.2), fovy_deg=45.0),
    )
    seed: int | None = None
    wrist_cameras: tuple[SimWristCamera, ...] = (SimWristCamera("wrist", 0),)
    # A ChArUco board for hand-eye calibration (robots.franka.calibration.sim_board's SimBoard), or none.
    board: WorldPart | None = None

    @classmethod
    def dual(cls, spacing_m: float = 0.5) -> SimScene:
        half = spacing_m / 2
        return cls(
            arm_positions=((0.0, half, 0.0), (0.0, -half, 0.0)),
            table_half_size_xy=(0.25, 0.6),
            wrist_cameras=(SimWristCamera("left_wrist", 0), SimWristCamera("right_wrist", 1)),
        )


def _abort_pending_on_stop(gripper_server: Any) -> None:
    """Make the simulated hand answer an interrupted move/grasp with "aborted", as a real one does.

    franky-sim 1.0.4 drops the pending command on stop without answering it, so the client's
    call never returns and its connection blocks every later command (and its own teardown).
    """
    original_stop = gripper_server.stop

    def stop(command_id: int, tcp_socket: Any) -> None:
        if gripper_server._pending_command_id is not None and gripper_server._pending_tcp_socket is not None:
            BaseCommand.send_response(
                gripper_server._pending_tcp_socket,
                gripper_server._pending_command_type,
                gripper_server._pending_command_id,
                GripperCommandStatus.kAborted,
                command_type_struct="H",
                status_type_struct="H",
            )
        original_stop(command_id, tcp_socket)

    gripper_server.stop = stop


def default_hostnames() -> Iterator[str]:
    """Loopback addresses to try for the simulated arms, in order (busy ones are skipped)."""
    for b in range(1, 255):
        yield f"127.0.0.{b}"


class _ServerOfStartedSimulation(SimulationServer):
    """franky-sim's server for a simulation compiled beforehand (SimulationServer.init binds, then compiles),
    with arm servers that keep lock-step with their clients."""

    robot_servers: list[LockstepRobotServer]

    def init(self) -> None:
        for robot in self.sim.robots:
            server = LockstepRobotServer(robot, self._remaining_hostname_candidates)
            server.init()
            self.robot_servers.append(server)


class FrankaSim:
    """Owns the MuJoCo world and the franky-sim servers; `hosts[i]` is arm i's FCI address."""

    def __init__(
        self, scene: SimScene | None = None, hostnames: Iterable[str] | None = None, speed: float | None = 1.0,
        lockstep: bool = True,
    ) -> None:
        self.scene = scene or SimScene()
        self._hostnames = list(hostnames) if hostnames is not None else default_hostnames()
        # Simulated seconds per wall-clock second at most (None: as fast as the CPU allows). A loaded
        # machine runs the simulation slower than asked; settable while it runs.
        self.speed = speed
        # While an arm moves, each physics step waits for its client's answer to the last state (its
        # clock is the robot's); False keeps the wall clock whatever the clients do (a bench that
        # wants a real robot's indifference to a late client). Settable while it runs.
        self.lockstep = lockstep
        self.lock = threading.Lock()
        self._ticked = threading.Condition(self.lock)  # notified after each physics step
        self._sim: Any = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._stall_watch: StallWatch | None = None
        self._running = False
        self.steps = 0  # physics steps taken (the stall watch reads it)
        self.hosts: list[str] = []
        self.fault: BaseException | None = None

    # --- building ----------------------------------------------------------------------------
    def start(self) -> FrankaSim:
        """Build the world and serve it (build, then serve)."""
        return self.build().serve()

    def build(self) -> FrankaSim:
        """Compile the world without serving it: model and data exist, no client can connect yet.

        Make the cameras between build and serve: a MuJoCo render context takes the GIL for a few
        hundred ms while it is made, and a simulation served meanwhile stops stepping, so a connected
        franky client reading its state times out (libfranka: UDP receive: Timeout) and is lost.
        """
        self._sim = build_world(self.scene)
        self._sim.start()
        return self

    def serve(self) -> FrankaSim:
        """Bind each arm's FCI address and start stepping."""
        if self._sim is None:
            self.build()
        self._server = _ServerOfStartedSimulation(self._sim, hostname_candidates=self._hostnames)
        try:
            self._server.init()
        except OSError as exc:
            raise RuntimeFault(f"franky-sim could not bind a loopback address: {exc}") from exc
        self.hosts = [rs.hostname for rs in self._server.robot_servers]
        for rs in self._server.robot_servers:
            gripper_server = getattr(rs, "_FrankaRobotServer__gripper_server", None)
            if gripper_server is not None:
                _abort_pending_on_stop(gripper_server)
        # The stepping thread is busy Python: with the default 5 ms GIL switch interval every
        # franky call or render in another thread waits up to 5 ms per GIL hand-over. A shorter
        # interval (process-wide, so only with an in-process sim) keeps tool calls and stops prompt.
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="franky-sim", daemon=True)
        self._thread.start()
        self._stall_watch = StallWatch(self._thread, lambda: self.steps, self._describe)
        return self

    def _loop(self) -> None:
        next_tick = time.perf_counter()
        servers = self._server.robot_servers
        try:
            while self._running:
                with self.lock:
                    for server in servers:
                        server.process_commands()
                # Lock-step: a moving arm's next step waits for its client's answer (lock released,
                # so cameras and readers go on meanwhile).
                while self._running and self.lockstep:
                    now = time.perf_counter()
                    late = [server for server in servers if server.awaits_answer(now)]
                    if not late:
                        break
                    wait_for_answers(late)
                    with self.lock:
                        for server in servers:
                            server.process_commands()
                with self.lock:
                    self._sim.step()
                    self.steps += 1
                    for server in servers:
                        server.send_state()
                    self._ticked.notify_all()
                speed = self.speed
                if speed:
                    next_tick += 0.001 / speed
                    delay = next_tick - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    else:
                        next_tick = time.perf_counter()  # behind (slow machine): do not try to catch up
        except BaseException as exc:  # surfaced through `fault`; clients see a network timeout
            # Said first (a waiter that sees `fault` finds it logged): every client only sees its states
            # stop (libfranka: UDP receive: Timeout), every arm at once.
            log.exception("franky-sim stopped stepping at t=%.3f s; every arm's client will lose its connection",
                          float(self._sim.data.time))
            self.fault = exc

    def _describe(self) -> str:
        """What a stalled simulation's log says beside the stepping thread's stack. Read without the lock
        (`time_s` takes it): a stall may be the lock's."""
        servers = self._server.robot_servers if self._server is not None else []
        return (f"t={float(self._sim.data.time):.3f} s, lockstep {'on' if self.lockstep else 'off'}, lock "
                f"{'held' if self.lock.locked() else 'free'}; " + "; ".join(server.describe() for server in servers))

    # --- reading the world ---------------------------------------------------------------------
    @property
    def model(self) -> Any:
        return self._sim.model

    @property
    def data(self) -> Any:
        return self._sim.data

    @property
    def time_s(self) -> float:
        with self.lock:
            return float(self._sim.data.time)

    def wait_until(self, time_s: float, wall_timeout_s: float = 30.0) -> float:
        """Block until the simulated clock reaches `time_s` (judging on the robot's clock, not the wall's);
        returns the simulated time then. TimeoutError when the simulation stalls for `wall_timeout_s`."""
        deadline = time.monotonic() + wall_timeout_s
        with self._ticked:
            while self._sim.data.time < time_s:
                left = deadline - time.monotonic()
                if left <= 0 or self.fault is not None or not self._running:
                    raise TimeoutError(f"the simulation did not reach t={time_s:.3f} s (it is at "
                                       f"{self._sim.data.time:.3f} s){'' if self.fault is None else f': {self.fault!r}'}")
                self._ticked.wait(min(left, 0.1))
            return float(self._sim.data.time)

    @property
    def clients_left_behind(self) -> int:
        """How often a moving arm's client answered nothing for robots.franka.sim.lockstep.PATIENCE_S and
        the simulation ran on without it (0 in a healthy run)."""
        return sum(server.left_behind for server in self._server.robot_servers) if self._server is not None else 0

    @property
    def finishes_refused(self) -> int:
        """Motions a client finished while the arm still moved, refused as a real arm refuses them
        (robots.franka.sim.lockstep; 0 in a healthy run)."""
        return sum(server.finished_moving for server in self._server.robot_servers) if self._server is not None else 0

    def body_position(self, name: str) -> np.ndarray:
        """World position [m] of a body (e.g. "cube"), read between physics steps."""
        body_id = mujoco.mj_name2id(self._sim.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body_id < 0:
            raise KeyError(f"no body named {name!r} in the simulated scene")
        with self.lock:
            return self._sim.data.xpos[body_id].copy()

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World position [m] and orientation (3 x 3) of a body, read between physics steps."""
        body_id = mujoco.mj_name2id(self._sim.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body_id < 0:
            raise KeyError(f"no body named {name!r} in the simulated scene")
        with self.lock:
            return self._sim.data.xpos[body_id].copy(), self._sim.data.xmat[body_id].reshape(3, 3).copy()

    def hand_tcp_in_arm_frame(self, arm_index: int = 0) -> np.ndarray:
        """Ground truth of arm `arm_index`'s TCP (the Franka Hand's fingertip centre) in its base frame:
        MuJoCo's own pose of the simulated hand body, whatever franky reports. 4 x 4."""
        body_id = mujoco.mj_name2id(self._sim.model, mujoco.mjtObj.mjOBJ_BODY, f"robot{arm_index}_hand")
        if body_id < 0:
            raise KeyError(f"no hand body for arm {arm_index} in the simulated scene")
        with self.lock:
            position = self._sim.data.xpos[body_id].copy()
            rotation = self._sim.data.xmat[body_id].reshape(3, 3).copy()
        pose = np.eye(4)
        pose[:3, :3] = rotation
        pose[:3, 3] = position + rotation[:, 2] * 0.1034 - self.arm_position(arm_index)
        return pose

    def arm_joints(self, arm_index: int = 0) -> np.ndarray:
        """Arm `arm_index`'s seven joint angles as simulated (what franky reports as measured q)."""
        with self.lock:
            return self._sim.data.qpos[self._arm_qpos_addresses(arm_index)].copy()

    def arm_joint_velocities(self, arm_index: int = 0) -> np.ndarray:
        """Arm `arm_index`'s seven joint velocities as simulated [rad/s]."""
        with self.lock:
            model = self._sim.model
            return self._sim.data.qvel[[int(model.jnt_dofadr[i]) for i in self._arm_joint_ids(arm_index)]].copy()

    def _arm_qpos_addresses(self, arm_index: int) -> list[int]:
        return [int(self._sim.model.jnt_qposadr[i]) for i in self._arm_joint_ids(arm_index)]

    def _arm_joint_ids(self, arm_index: int) -> list[int]:
        model = self._sim.model
        ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"robot{arm_index}_fr3_joint{i}") for i in range(1, 8)]
        if min(ids) < 0:
            raise KeyError(f"no arm {arm_index} in the simulated scene")
        return ids

    def camera_pose_in_arm_frame(self, name: str, arm_index: int = 0) -> np.ndarray:
        """Ground truth of camera `name`'s optical frame (OpenCV: x right, y down, z forward) in arm
        `arm_index`'s base frame, as MuJoCo renders it now. 4 x 4."""
        cam_id = mujoco.mj_name2id(self._sim.model, mujoco.mjtObj.mjOBJ_CAMERA, name)
        if cam_id < 0:
            raise KeyError(f"no camera named {name!r} in the simulated scene")
        with self.lock:
            pose = mujoco_camera_pose(self._sim.data, cam_id)
        pose[:3, 3] -= self.arm_position(arm_index)
        return pose

    def arm_position(self, index: int) -> np.ndarray:
        return np.asarray(self.scene.arm_positions[index], float)

    def object_in_arm_frame(self, name: str, arm_index: int = 0) -> np.ndarray:
        """Body position in the base frame of arm `arm_index` (arms are placed without rotation)."""
        return self.body_position(name) - self.arm_position(arm_index)

    # --- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        self._running = False
        if self._stall_watch is not None:
            self._stall_watch.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        if self._server is not None:
            for rs in self._server.robot_servers:
                rs.cleanup()
            self._server = None

    def __enter__(self) -> FrankaSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def scene_model(scene: SimScene | None = None) -> tuple[Any, Any]:
    """The scene's MuJoCo (model, data) with no servers and no stepping: for geometry checks and
    benches that pose the arms themselves (set qpos, then mujoco.mj_forward)."""
    built = FrankaSim(scene).build()
    return built.model, built.data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m robots.franka.sim",
        description="Run franky-sim with the RPent table scene; prints 'READY <host>...' once the arms are served "
                    "and runs until SIGINT or SIGTERM.")
    parser.add_argument("--arms", type=int, choices=(1, 2), default=1)
    parser.add_argument("--host", action="append", default=[], help="loopback address to bind (repeatable)")
    parser.add_argument("--wall-clock", action="store_true",
                        help="keep the wall clock during motions too, whether or not the clients keep up "
                             "(default: a moving arm's simulation waits for its client, robots.franka.sim.lockstep)")
    args = parser.parse_args(argv)
    scene = SimScene() if args.arms == 1 else SimScene.dual()
    try:
        sim = FrankaSim(scene, hostnames=args.host or None, lockstep=not args.wall_clock).start()
    except RuntimeFault as exc:
        print(f"franky-sim: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    # Both signals end it the same way, also when it was started with SIGINT ignored (a script's `cmd &`).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("READY " + " ".join(sim.hosts), flush=True)
    try:
        stop.wait()
    finally:
        sim.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

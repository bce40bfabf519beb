"""The Franka toolkit: an observation after every action, and the simulator's success check."""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

from robots.franka import actions
from robots.franka.frame_store import DEPTH_FOLDER, FrameStore
from robots.franka.hardware.franky_arm import FrankyArm
from robots.franka.recording import FrankaRecording, camera_roles
from robots.franka.runtime import FrankaRuntime
from robots.franka.sim import scene_record
from robots.franka.tool_bounds import envelope_tools
from robots.franka.tools import FRANKA_TOOLS
from rpent.tools import Command, Toolkit, ToolResult

# Success: the target cube's bottom at least this far above the table top.
LIFT_MARGIN_M = 0.05
# A cancelled call's observation waits at most this long for the stopped arms to come to rest.
CANCEL_SETTLE_S = 1.0


class FrankaToolkit(Toolkit):
    tools = FRANKA_TOOLS
    robot: FrankaRuntime
    #: The robot the record's stream names (rpent export lerobot keeps one robot per dataset).
    robot_name = "franka"

    def __init__(self, *, target_object: str = "cube", record_hz: float = 0.0, task: str | None = None,
                 exterior_camera: str | None = None, **kwargs: Any) -> None:
        """`record_hz` > 0: the record gets the fixed-rate stream (robots.franka.recording) of this task."""
        robot = kwargs.get("robot")
        if kwargs.get("tools") is None and robot is not None:
            # The schema states the ranges these arms' envelopes enforce (robots.franka.tool_bounds).
            kwargs["tools"] = envelope_tools(self.tools, {name: arm.envelope.limits for name, arm in robot.arms.items()})
        super().__init__(**kwargs)
        self.target_object = target_object
        # Depth and camera poses of every observation, for back_project; on disk beside images/ with
        # the same (segment-aware) names, so a resumed run's files never collide.
        depth_folder = self.output_dir / DEPTH_FOLDER if self.output_dir is not None else None
        file_name = self.segment.name if self.segment is not None else (lambda name: name)
        self.state[actions.FRAMES_STATE_KEY] = FrameStore(depth_folder, file_name)
        # The task starts now (a dashboard session runs several tasks on one simulator).
        self._scene_at_start = self._object_poses()
        self.recording: FrankaRecording | None = None
        if record_hz > 0 and self.segment is not None and self.robot is not None and self.robot.arms and all(
                isinstance(arm, FrankyArm) for arm in self.robot.arms.values()):
            # Arms in this process only: a toolkit node's arms are proxies (which answer any attribute with a
            # remote call), and sampling them over ROS at 15 Hz would cost the graph more than the record is worth.
            header = {"robot": self.robot_name, "task": task, "started_at": round(time.time(), 3),
                      "cameras": camera_roles(self.robot, exterior_camera)}
            self.recording = FrankaRecording(self.robot, self.output_dir, self.segment.number, hz=record_hz,
                                             acting=self.acting_calls, header=header)

    def _on_close(self) -> None:
        if self.recording is not None:
            self.recording.close()

    def _on_acting(self) -> None:
        if self.recording is not None:
            self.recording.call_started()

    def _halt_robot(self) -> list[str]:
        self.robot.stop_all()  # raises naming every device that did not take the stop
        return sorted(self.robot.arms)

    def _capture_observation(
        self, *, command: Command, result: ToolResult, elapsed_s: float
    ) -> tuple[dict[str, Any], dict[str, bytes]]:
        if result.error is not None and result.error.startswith("cancelled"):
            # A stopped arm decelerates for a moment: observe where it came to rest, not mid-stop
            # (bounded, so a call that cannot settle still returns; its state then says moving).
            deadline = time.monotonic() + CANCEL_SETTLE_S
            for arm in self.robot.arms.values():
                arm.settled_state(timeout_s=max(0.0, deadline - time.monotonic()))
        with self.recording.paused() if self.recording is not None else nullcontext():
            return self._observe(command, result, elapsed_s)

    def _observe(self, command: Command, result: ToolResult, elapsed_s: float) -> tuple[dict[str, Any], dict[str, bytes]]:
        observation: dict[str, Any] = {
            "action": command.name,
            "action_result": result.data,
            "elapsed_s": round(elapsed_s, 3),
            "arms": actions.arm_states(self.robot),
        }
        cameras, pngs = actions.observe_cameras(
            self.robot, actions.frame_store(self.state), command.call_id, command.name
        )
        observation["cameras"] = cameras
        return observation, pngs

    def _object_poses(self) -> dict[str, Any] | None:
        sim = self.robot.sim
        return None if sim is None else scene_record.object_poses(sim, list(self.robot.arms))

    def scene_state(self) -> dict[str, Any] | None:
        """Where the simulated objects were when this task started and where they are now."""
        if self._scene_at_start is None:
            return None  # no ground truth on real hardware
        return {"seed": self.robot.sim.scene.seed, "start": self._scene_at_start, "end": self._object_poses()}

    def solved(self) -> bool | None:
        sim = self.robot.sim
        if sim is None:
            return None  # no ground truth on real hardware
        obj = next(o for o in sim.scene.objects if o.name == self.target_object)
        bottom_z = float(sim.body_position(obj.name)[2]) - obj.size_m / 2
        return bottom_z > sim.scene.table_top_z + LIFT_MARGIN_M


# The result contract of each tool (frozen by test/franka/test_golden_tools.py and checked
# against real results in the simulator). Non-readonly tools return an observation whose
# `action_result` holds these fields; read-only tools return them directly.
RESULT_FIELDS: dict[str, list[str]] = {
    "move_to": ["arm", "cause", "orientation_error_deg", "pose", "position_error_m", "reached", "target"],
    "move_by": ["arm", "cause", "orientation_error_deg", "pose", "position_error_m", "reached", "target"],
    "move_joints": [
        "arm", "cause", "joint_error_rad", "joints_rad", "orientation_error_deg", "pose", "position_error_m",
        "reached", "target",
    ],
    "home": ["arms"],
    "move_both_to": ["arms"],
    "move_both_by": ["arms"],
    "open_gripper": ["arm", "grasped", "width_m"],
    "move_gripper": ["arm", "grasped", "width_m"],
    "grasp": ["arm", "grasped", "width_m"],
    "get_state": ["arms", "stop_latch"],
    "capture_images": ["cameras"],
    "back_project": ["calibrated", "camera", "depth_m", "frame", "step", "xyz_m"],
    "run_policy": [
        "action_space", "arm", "control", "grasped", "gripper_width_m", "inference_log", "inferences", "joints_rad",
        "motion", "pose", "steps", "stopped",
    ],
    "recover": ["recovered"],
    "stop": ["cancelled_calls", "halted", "latched", "line"],
    "finish": ["operator_aborted", "operator_notes", "status", "summary"],
}
OBSERVATION_FIELDS = ["action", "action_result", "arms", "cameras", "elapsed_s"]
# Each entry of `cameras` (observations and capture_images) describes one image, in image order.
CAMERA_ENTRY_FIELDS = ["back_project", "depth", "height", "name", "step", "width"]
# Images of an observation or of capture_images: one PNG per camera, in this order (sim cameras;
# on hardware, the order of `cameras` in the config), at the camera's full resolution, uncropped.
# Saved as images/<call id>_<tool>_<camera>.png (00005_grasp_front.png); a depth camera's depth and
# pose beside it as depth/<call id>_<tool>_<camera>.npz (segment N of a resumed run: <name>-N.png / .npz).
SIM_IMAGE_ORDER = ["front", "top", "wrist"]

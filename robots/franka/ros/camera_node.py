"""camera_node: one camera of a Franka deployment as a managed runtime node, with its rviz topics.

    ros2 run rpent camera_node --ros-args -p name:=front -p device:=0
    ros2 run rpent camera_node --ros-args -p name:=wrist -p config:=/path/franka.yaml   # e.g. a RealSense

The Franka's because its cameras are described in the Franka deployment YAML (robots.franka.config:
device, calibration, mount on an arm) and opened by robots.franka.runtime. It publishes colour,
depth, CameraInfo, point cloud and TF frame (rpent_ros.runtime.camera_topics has the topics and frames).
"""

from __future__ import annotations

from typing import Any

from rpent.robot import ConfigError
from rpent.runtime.camera import capture_frame
from rpent_ros import node_main
from rpent_ros.params import Param
from rpent_ros.runtime.joint_states import JointStateReader
from rpent_ros.runtime.managed_node import ManagedRuntimeNode
from rpent_ros.runtime.server import CAMERA_METHODS
from rpent_ros.runtime.telemetry import CameraTelemetry


class CameraNode(ManagedRuntimeNode):
    """One camera: USB/UVC through OpenCV (colour) or a RealSense D4xx (colour + aligned depth).

    With `config` (a deployment YAML, as the toolkit node reads) the camera entry named `name`
    gives everything, calibration included; otherwise the parameters do, uncalibrated. A wrist
    camera's pose at capture time uses its arm's joints from /joint_states. Configure opens the
    device; captures (and the picture topics) run only while active.
    """

    kind = "camera"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("camera", [
            Param("name", "front", "the camera's name: its topics ~/<name>/..., frame <name>_optical_frame, "
                  "RuntimeCall at ~/<name>/call"),
            Param("config", "", "deployment YAML whose camera entry `name` gives device, calibration and mount "
                  "(then the device parameters below are not used)"),
            Param("publish_rate_hz", 5.0, "pictures per second on the camera's topics while active", low=0.1, high=120.0),
            Param("cloud_stride", 2, "point cloud keeps every n-th pixel in each direction (0: no cloud)",
                  low=0, high=64),
            Param("kind", "opencv", "camera driver", choices=("opencv", "realsense")),
            Param("device", "0", "OpenCV device index or path; a RealSense recording (.bag) to play back",
                  numbers_as_text=True),
            Param("serial", "", "RealSense serial number (empty: the only one connected)"),
            Param("width", 640, "image width in pixels", low=1, high=8192),
            Param("height", 480, "image height in pixels", low=1, high=8192),
            Param("fps", 30.0, "frames per second asked of the device", low=0.1, high=1000.0),
        ], CAMERA_METHODS, CAMERA_METHODS, acts="captures", **kwargs)
        self.camera_config, self.first_arm = self._camera_config()
        self._joint_readers: dict[str, JointStateReader] = {}
        self.telemetry: CameraTelemetry | None = None

    def hardware_id(self) -> str:
        return str(self.params.get("serial") or self.params.get("device") or self.runtime_name)

    def _camera_config(self) -> tuple[Any, str]:
        from robots.franka.config import CameraConfig, load_franka_config

        p = self.params
        if p["config"]:
            franka = load_franka_config(p["config"])
            cam = franka.camera(self.runtime_name)
            if cam is None:
                known = [c.name for c in franka.cameras]
                raise ConfigError(f"parameter name: no camera {self.runtime_name!r} in {p['config']} (cameras: {known})")
            return cam, franka.arms[0].name
        device = p["device"]
        return CameraConfig(name=self.runtime_name, kind=p["kind"], device=int(device) if device.isdigit() else device,
                            serial=p["serial"] or None, width=p["width"], height=p["height"], fps=p["fps"]), "arm"

    def _joints_of(self, arm: str) -> JointStateReader:
        if arm not in self._joint_readers:
            self._joint_readers[arm] = JointStateReader(self, arm)
        return self._joint_readers[arm]

    def connect(self) -> Any:
        from robots.franka.runtime import device_camera

        return device_camera(self.camera_config, self.first_arm, self._joints_of)

    def start_telemetry(self, camera: Any) -> None:
        if self.telemetry is None:
            self.telemetry = CameraTelemetry(self, self.runtime_name, cloud_stride=self.params["cloud_stride"])
            self.diagnostics.watch(self.telemetry.health)  # pictures that cannot go out: ERROR, counted
        telemetry = self.telemetry
        telemetry.mount = getattr(camera, "mount", None)
        self.every(self.params["publish_rate_hz"], lambda: telemetry.publish(capture_frame(camera)), active_only=True)


def camera_main(args: list[str] | None = None) -> None:
    node_main.run_runtime_node("camera_node", CameraNode, args)

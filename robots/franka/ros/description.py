"""The FR3 URDF for rviz, renamed for one arm, and its forward kinematics (numpy; no rclpy here).

The Franka's own description, so it lives with the robot (robots.franka.ros): rpent_ros's
ArmTelemetry publishes whatever description it is given (the URDF string and link transforms).

rviz draws a RobotModel from a URDF string plus one TF per link. Neither robot_state_publisher nor
a franka_description package is assumed, so the arm node loads the URDF itself (franky-sim's
`assets/fr3.urdf` by default, or a lab's franka_description output), renames every link and joint
for the arm (`fr3_joint1` -> `left_joint1`, `fr3_link0` -> `left_link0`), points relative mesh
paths at absolute `file://` URIs, and computes each link's transform from the measured joints with
the transform math of robots.franka.kinematics (the safety envelope's FR3 chain; a test keeps the
two in agreement).

The published tree is rooted at `<prefix>_link0`, the frame franky reports O_T_EE in: links above
it in the file (franky-sim's `base`, a xacro's `world`) are dropped, so two arms never share a
frame name and each arm is placed in `world` by one static transform.

Frames of the franky-sim URDF, and franky's end effector: `fr3_link8` is the flange (`fr3_link7`
+ 0.107 m along z); `fr3_hand` is the flange turned -45 deg about z; `fr3_hand_tcp` is the hand +
0.1034 m along z. franky-sim's O_T_EE is flange * (rpy 0 0 -pi/4, xyz 0 0 0.1034) with NE_T_EE
= identity, i.e. exactly `<prefix>_hand_tcp`, the frame a real FR3 with a Franka Hand reports as
EE under Desk's default end-effector settings.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

# One geometry for the arm: rviz's link transforms use the same math as the safety envelope.
from robots.franka.kinematics import axis_angle_matrix, transform
from rpent.runtime.types import quat_from_matrix

ARM_JOINT_COUNT = 7
#: The dual setup's arm names, in the order of SimScene.dual()'s arm_positions.
DUAL_ARM_NAMES = ("left", "right")
_MOVING = ("revolute", "continuous", "prismatic")
# Elements that name a link or joint in an attribute other than `name`.
_REFERENCES = {"parent": "link", "child": "link", "mimic": "joint", "gazebo": "reference"}


class UrdfError(ValueError):
    """A URDF that cannot describe an FR3 arm; the message names the file and what is missing."""


def franky_sim_urdf() -> Path:
    """The FR3 URDF shipped in the installed franky-sim package (read in place, never copied)."""
    try:
        import franky_sim
    except ImportError as exc:
        raise UrdfError(
            "urdf: franky-sim is not installed, so there is no default FR3 URDF "
            "(pip install rpent[sim], or pass the URDF of your franka_description)"
        ) from exc
    path = Path(franky_sim.__file__).resolve().parent / "assets" / "fr3.urdf"
    if not path.is_file():
        raise UrdfError(f"urdf: franky-sim {getattr(franky_sim, '__version__', '')} has no {path}")
    return path


@cache
def sim_base_xyz() -> dict[str, tuple[float, float, float]]:
    """Where franky-sim puts the two arms of the dual setup, in the world frame: read from the scene
    itself (SimScene.dual), so rviz and the simulator cannot disagree. Imported when first asked:
    robots.franka.sim.simulator loads MuJoCo and franky-sim (installed beside franky by rpent[sim])."""
    from robots.franka.sim.simulator import SimScene

    return dict(zip(DUAL_ARM_NAMES, SimScene.dual().arm_positions, strict=True))


def base_xyz_for(arm_name: str) -> tuple[float, float, float]:
    """Default placement of an arm's link0 in `world`: where franky-sim puts an arm of that name
    (any other name, e.g. the single arm, sits at the origin)."""
    return sim_base_xyz().get(arm_name, (0.0, 0.0, 0.0))


def three_numbers(field: str, value: object) -> tuple[float, float, float]:
    """`[x, y, z]` (or roll, pitch, yaw) from a parameter; anything else is refused naming `field`."""
    try:
        numbers = tuple(float(v) for v in value)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        numbers = ()
    if len(numbers) != 3 or not all(math.isfinite(v) for v in numbers):
        raise ValueError(f"{field}: must be 3 finite numbers, got {value!r}")
    return numbers  # type: ignore[return-value]


# --- the description ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Joint:
    """One URDF joint, already renamed for the arm. `origin` is parent -> joint frame at q = 0."""

    name: str
    kind: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    mimic: tuple[str, float, float] | None = None  # (joint, multiplier, offset)

    def motion(self, position: float) -> np.ndarray:
        """parent -> child at joint position `position` (rad or m)."""
        if self.kind in ("revolute", "continuous"):
            moved = np.eye(4)
            moved[:3, :3] = axis_angle_matrix(self.axis, position)
            return self.origin @ moved
        if self.kind == "prismatic":
            moved = np.eye(4)
            moved[:3, 3] = self.axis * position
            return self.origin @ moved
        return self.origin


@dataclass(frozen=True)
class LinkTransform:
    parent: str
    child: str
    matrix: np.ndarray

    @property
    def translation(self) -> tuple[float, float, float]:
        x, y, z = self.matrix[:3, 3]
        return (float(x), float(y), float(z))

    @property
    def quaternion(self) -> tuple[float, float, float, float]:
        return quat_from_matrix(self.matrix[:3, :3])


@dataclass(frozen=True)
class ArmDescription:
    """One arm's URDF (renamed, rooted at `<prefix>_link0`) and its kinematic tree."""

    prefix: str
    urdf: str
    source: Path
    root_link: str
    joints: tuple[Joint, ...]  # parents before children
    arm_joints: tuple[str, ...]  # `<prefix>_joint1..7`
    finger_joints: tuple[str, ...]  # driven by the gripper width (empty without a hand)

    @property
    def links(self) -> tuple[str, ...]:
        return (self.root_link, *(j.child for j in self.joints))

    def joint_positions(self, arm_q: Sequence[float] = (), gripper_width_m: float | None = None) -> dict[str, float]:
        """Positions of the driven joints: the 7 arm joints, and each finger at half the width."""
        arm_q = [float(q) for q in arm_q]
        if arm_q and len(arm_q) != len(self.arm_joints):
            raise ValueError(f"arm_q: expected {len(self.arm_joints)} joint positions, got {len(arm_q)}")
        positions = dict(zip(self.arm_joints, arm_q, strict=False))
        if gripper_width_m is not None:
            for name in self.finger_joints:
                positions[name] = float(gripper_width_m) / 2
        return positions

    def resolved(self, positions: Mapping[str, float]) -> dict[str, float]:
        """Positions of every moving joint that `positions` determines, mimic joints included."""
        result = {}
        for joint in self.joints:
            if joint.kind in _MOVING:
                position = self._position(joint, positions)
                if position is not None:
                    result[joint.name] = position
        return result

    def transforms(self, positions: Mapping[str, float], moving_only: bool = True) -> list[LinkTransform]:
        """parent -> child of every moving joint whose position is known (mimic joints follow their
        leader); with `moving_only=False` also every fixed joint."""
        result = []
        for joint in self.joints:
            if joint.kind not in _MOVING:
                if not moving_only:
                    result.append(LinkTransform(joint.parent, joint.child, joint.origin))
                continue
            position = self._position(joint, positions)
            if position is not None:
                result.append(LinkTransform(joint.parent, joint.child, joint.motion(position)))
        return result

    def link_pose(self, link: str, positions: Mapping[str, float]) -> np.ndarray:
        """Pose of `link` in the root link frame (`<prefix>_link0`), i.e. the frame O_T_EE is given in."""
        by_child = {j.child: j for j in self.joints}
        if link != self.root_link and link not in by_child:
            raise KeyError(f"link {link!r} is not in the {self.prefix} arm's description")
        pose = np.eye(4)
        while link != self.root_link:
            joint = by_child[link]
            position = self._position(joint, positions) if joint.kind in _MOVING else 0.0
            if position is None:
                raise ValueError(f"positions: joint {joint.name!r} (above link {link!r}) has no position")
            pose = joint.motion(position) @ pose
            link = joint.parent
        return pose

    def _position(self, joint: Joint, positions: Mapping[str, float]) -> float | None:
        if joint.mimic is not None:
            leader, multiplier, offset = joint.mimic
            return None if leader not in positions else multiplier * positions[leader] + offset
        return positions.get(joint.name)


def load_arm_description(prefix: str, urdf_path: str | Path | None = None, source_prefix: str | None = None) -> ArmDescription:
    """Load a URDF (default: franky-sim's FR3) and rename it for the arm `prefix`.

    `source_prefix` is the prefix of the arm's names in the file (default: found from the joint
    named `<something>joint1`, e.g. `fr3_`).
    """
    if not prefix or not prefix.replace("_", "").isalnum():
        raise ValueError(f"prefix: must be a non-empty name of letters, digits and '_', got {prefix!r}")
    path = Path(urdf_path).expanduser().resolve() if urdf_path else franky_sim_urdf()
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise UrdfError(f"urdf {path}: cannot read: {exc}") from exc
    if root.tag != "robot":
        raise UrdfError(f"urdf {path}: root element is <{root.tag}>, expected <robot>")
    joints = {j.get("name", ""): j for j in root.findall("joint")}
    src = source_prefix if source_prefix is not None else _source_prefix(path, joints)
    arm_joints = [f"{src}joint{i}" for i in range(1, ARM_JOINT_COUNT + 1)]
    for name in arm_joints:
        joint = joints.get(name)
        if joint is None:
            raise UrdfError(f"urdf {path}: no joint named {name!r} (an FR3 arm needs {arm_joints[0]}..{arm_joints[-1]}); "
                            f"joints in the file: {', '.join(sorted(joints)) or 'none'}")
        if joint.get("type") not in ("revolute", "continuous"):
            raise UrdfError(f"urdf {path}: joint {name!r} is {joint.get('type')!r}, expected revolute")
    root_link = f"{src}link0"
    _keep_subtree(path, root, root_link)
    rename = _renamer(src, prefix)
    for element in root.iter():
        name = element.get("name")
        # Link and joint names always; other names (visuals, actuators) only if they carry the arm's prefix.
        if name and (element.tag in ("link", "joint") or name.startswith(src)):
            element.set("name", rename(name))
        reference = _REFERENCES.get(element.tag)
        if reference and element.get(reference):
            element.set(reference, rename(element.get(reference, "")))
        if element.tag == "mesh" and element.get("filename"):
            element.set("filename", _mesh_uri(path, element.get("filename", "")))
    ET.indent(root)  # the dropped comments leave blank lines behind
    parsed = _parse_joints(path, root)
    finger_joints = tuple(j.name for j in parsed if j.kind == "prismatic" and j.mimic is None
                          and j.name.startswith(f"{prefix}_finger_joint"))
    return ArmDescription(
        prefix=prefix,
        urdf=ET.tostring(root, encoding="unicode"),
        source=path,
        root_link=rename(root_link),
        joints=parsed,
        arm_joints=tuple(rename(n) for n in arm_joints),
        finger_joints=finger_joints,
    )


def description_or_none(node: Any, arm_name: str, path: str = "") -> ArmDescription | None:
    """The arm's URDF for rviz: `path` (a lab's franka_description output) must load; franky-sim's is
    optional, and without it `node` logs why rviz gets no robot model."""
    try:
        return load_arm_description(arm_name, path or None)
    except UrdfError as exc:
        if path:  # a file the user named must be usable
            raise
        node.get_logger().warning(f"{exc}; rviz gets joint states and frames but no robot model")
        return None


def _source_prefix(path: Path, joints: Mapping[str, ET.Element]) -> str:
    candidates = sorted(n[: -len("joint1")] for n, j in joints.items()
                        if n.endswith("joint1") and j.get("type") in ("revolute", "continuous")
                        and not n.endswith("finger_joint1"))
    if len(candidates) != 1:
        found = ", ".join(f"{c}joint1" for c in candidates) or "none"
        raise UrdfError(f"urdf {path}: cannot tell the arm's name prefix: expected one revolute joint named "
                        f"'<prefix>joint1' (e.g. fr3_joint1), found {found}; pass the prefix explicitly")
    return candidates[0]


def _renamer(src: str, prefix: str) -> Callable[[str], str]:
    def rename(name: str) -> str:
        return f"{prefix}_{name[len(src):]}" if src and name.startswith(src) else f"{prefix}_{name}"

    return rename


def _keep_subtree(path: Path, root: ET.Element, root_link: str) -> None:
    """Drop every link and joint that is not at or below `root_link`."""
    links = {link.get("name") for link in root.findall("link")}
    if root_link not in links:
        raise UrdfError(f"urdf {path}: no link named {root_link!r} (the arm's base)")
    children: dict[str, list[ET.Element]] = {}
    for joint in root.findall("joint"):
        children.setdefault(_link_of(path, joint, "parent"), []).append(joint)
    keep_links, keep_joints, todo = {root_link}, set(), [root_link]
    while todo:
        for joint in children.get(todo.pop(), []):
            keep_joints.add(id(joint))
            child = _link_of(path, joint, "child")
            if child not in keep_links:
                keep_links.add(child)
                todo.append(child)
    for element in list(root):
        if (element.tag == "link" and element.get("name") not in keep_links) or (
            element.tag == "joint" and id(element) not in keep_joints
        ):
            root.remove(element)


def _link_of(path: Path, joint: ET.Element, which: str) -> str:
    element = joint.find(which)
    if element is None or not element.get("link"):
        raise UrdfError(f"urdf {path}: joint {joint.get('name')!r} has no <{which} link=...>")
    return element.get("link", "")


def _mesh_uri(path: Path, filename: str) -> str:
    """Relative and absolute paths become file:// URIs (rviz resolves only URIs); package:// stays."""
    if "://" in filename:
        return filename
    return (path.parent / filename).resolve().as_uri()


def _floats(path: Path, element: ET.Element | None, attribute: str, default: str, count: int = 3) -> list[float]:
    text = default if element is None else element.get(attribute, default)
    try:
        values = [float(v) for v in text.split()]
    except ValueError:
        values = []
    if len(values) != count:
        raise UrdfError(f"urdf {path}: {attribute}={text!r} must be {count} numbers")
    return values


def _parse_joints(path: Path, root: ET.Element) -> tuple[Joint, ...]:
    parsed = {}
    for element in root.findall("joint"):
        name, kind = element.get("name", ""), element.get("type", "")
        if kind not in (*_MOVING, "fixed"):
            raise UrdfError(f"urdf {path}: joint {name!r} has type {kind!r}; supported: revolute, continuous, "
                            "prismatic, fixed")
        origin = element.find("origin")
        axis = np.array(_floats(path, element.find("axis"), "xyz", "1 0 0"))
        if kind in _MOVING:
            norm = float(np.linalg.norm(axis))
            if norm < 1e-9:
                raise UrdfError(f"urdf {path}: joint {name!r} has a zero axis")
            axis = axis / norm
        mimic = element.find("mimic")
        parsed[name] = Joint(
            name=name,
            kind=kind,
            parent=_link_of(path, element, "parent"),
            child=_link_of(path, element, "child"),
            origin=transform(_floats(path, origin, "xyz", "0 0 0"), _floats(path, origin, "rpy", "0 0 0")),
            axis=axis,
            mimic=None if mimic is None else (
                mimic.get("joint", ""), float(mimic.get("multiplier", "1")), float(mimic.get("offset", "0"))),
        )
    # Parents before children, so a walk down the list meets every link after its parent.
    by_parent: dict[str, list[Joint]] = {}
    for joint in parsed.values():
        by_parent.setdefault(joint.parent, []).append(joint)
    ordered: list[Joint] = []
    roots = {j.parent for j in parsed.values()} - {j.child for j in parsed.values()}
    todo = sorted(roots)
    while todo:
        for joint in by_parent.get(todo.pop(0), []):
            ordered.append(joint)
            todo.append(joint.child)
    return tuple(ordered)

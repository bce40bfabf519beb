"""The FR3 URDF the arm nodes give rviz, and its forward kinematics (ROS-free: runs in CI without rclpy).

The FK is checked against the robot two ways: against franky's end-effector pose O_T_EE read from
franky-sim over the real FCI protocol (a simulator in a subprocess), and link by link against the
MuJoCo model franky-sim simulates and the cameras render, for both arms of the dual scene in world
coordinates. franky's EE on the FR3 with the Franka Hand is `<arm>_hand_tcp`: the flange
(`<arm>_link8`) turned -45 deg about z and moved 0.1034 m along z (franky-sim's NE_T_EE is identity).
"""

from __future__ import annotations

import math
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
import yaml
from sim_process import franka_sim_process

from robots.franka.kinematics import transform
from robots.franka.ros.description import (
    UrdfError,
    base_xyz_for,
    franky_sim_urdf,
    load_arm_description,
    sim_base_xyz,
    three_numbers,
)
from rpent.runtime.types import ArmState, quat_angle, quat_from_matrix, quat_from_rpy

if TYPE_CHECKING:
    from robots.franka.hardware.franky_arm import FrankyArm

pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim]): it ships the FR3 URDF")

REPO = Path(__file__).resolve().parents[2]
HOME = (0.0, 0.0, 0.0, -1.57, 0.0, 1.57, 0.785)
POS_TOL_M = 0.001
ANGLE_TOL_RAD = 0.01
# Settled: joints 1-6 within 0.3 mrad of the target; joint 7 (which does not move the TCP's position)
# rests ~2 mrad off in the sim and chatters.
SETTLED_RAD = (0.0003,) * 6 + (0.005,)


def _names(urdf: str) -> tuple[set[str], set[str]]:
    root = ET.fromstring(urdf)
    return {e.get("name", "") for e in root.findall("link")}, {e.get("name", "") for e in root.findall("joint")}


def _write_urdf_without(tmp_path: Path, joint_name: str) -> Path:
    root = ET.parse(franky_sim_urdf()).getroot()
    root.remove(next(j for j in root.findall("joint") if j.get("name") == joint_name))
    path = tmp_path / "broken.urdf"
    ET.ElementTree(root).write(path)
    return path


# --- renaming ------------------------------------------------------------------------------------
def test_links_and_joints_are_renamed_for_the_arm_and_rooted_at_link0() -> None:
    left = load_arm_description("left")
    links, joints = _names(left.urdf)
    assert left.root_link == "left_link0"
    assert left.arm_joints == tuple(f"left_joint{i}" for i in range(1, 8))
    assert left.finger_joints == ("left_finger_joint1",)  # finger_joint2 mimics it
    assert {f"left_link{i}" for i in range(9)} | {"left_hand", "left_hand_tcp", "left_leftfinger", "left_rightfinger"} <= links
    assert all(name.startswith("left_") for name in links | joints)
    assert "base" not in links and "left_base" not in links  # above link0: dropped, placed in world by TF instead
    root = ET.fromstring(left.urdf)
    for joint in root.findall("joint"):  # every reference points at a link that exists
        assert joint.find("parent").get("link") in links and joint.find("child").get("link") in links
    mimic = root.find("joint[@name='left_finger_joint2']/mimic")
    assert mimic is not None and mimic.get("joint") == "left_finger_joint1"


def test_two_arms_share_no_frame_or_joint_name() -> None:
    left, right = load_arm_description("left"), load_arm_description("right")
    left_links, left_joints = _names(left.urdf)
    right_links, right_joints = _names(right.urdf)
    assert not (left_links & right_links) and not (left_joints & right_joints)
    assert right.arm_joints[0] == "right_joint1"


def test_mesh_filenames_become_file_uris_of_existing_files() -> None:
    meshes = [m.get("filename", "") for m in ET.fromstring(load_arm_description("left").urdf).iter("mesh")]
    assert len(meshes) >= 10
    for uri in meshes:
        parsed = urlparse(uri)
        assert parsed.scheme == "file", uri
        assert Path(unquote(parsed.path)).is_file(), uri


def test_a_lab_urdf_keeps_package_uris_and_its_own_prefix(tmp_path: Path) -> None:
    # A franka_description output names meshes package://franka_description/...; rviz resolves those itself.
    text = franky_sim_urdf().read_text().replace("fr3_", "fr3v2_").replace(
        'filename="meshes/link1_vis.dae"', 'filename="package://franka_description/meshes/fr3/visual/link1.dae"')
    path = tmp_path / "lab.urdf"
    path.write_text(text)
    described = load_arm_description("right", path)
    uris = [m.get("filename") for m in ET.fromstring(described.urdf).iter("mesh")]
    assert "package://franka_description/meshes/fr3/visual/link1.dae" in uris
    assert described.arm_joints[6] == "right_joint7" and described.root_link == "right_link0"


def test_urdf_missing_an_arm_joint_is_refused_naming_the_joint(tmp_path: Path) -> None:
    with pytest.raises(UrdfError, match=r"broken\.urdf: no joint named 'fr3_joint5'"):
        load_arm_description("left", _write_urdf_without(tmp_path, "fr3_joint5"))


def test_urdf_without_an_arm_is_refused_saying_what_was_expected(tmp_path: Path) -> None:
    path = tmp_path / "table.urdf"
    path.write_text('<robot name="table"><link name="top"/></robot>')
    with pytest.raises(UrdfError, match=r"table\.urdf: cannot tell the arm's name prefix.*'<prefix>joint1'"):
        load_arm_description("left", path)
    with pytest.raises(UrdfError, match=r"missing\.urdf: cannot read"):
        load_arm_description("left", tmp_path / "missing.urdf")


def test_bad_prefix_and_bad_vectors_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="prefix"):
        load_arm_description("left arm")
    with pytest.raises(ValueError, match=r"parameter base_xyz: must be 3 finite numbers"):
        three_numbers("parameter base_xyz", [0.0, 0.25])
    assert three_numbers("parameter base_xyz", [0, 1, 2]) == (0.0, 1.0, 2.0)


# --- kinematics ----------------------------------------------------------------------------------
def test_quaternion_from_matrix_matches_rpy_for_any_rotation_including_half_turns() -> None:
    rng = np.random.default_rng(1)
    cases = [(math.pi, 0.0, 0.0), (0.0, math.pi, 0.0), (0.0, 0.0, math.pi), (math.pi, 0.0, math.pi / 2)]
    cases += [tuple(rng.uniform(-math.pi, math.pi, 3)) for _ in range(50)]
    for rpy in cases:
        assert quat_angle(quat_from_matrix(transform((0, 0, 0), rpy)[:3, :3]), quat_from_rpy(*rpy)) < 1e-6


def test_fingers_open_to_the_gripper_width() -> None:
    arm = load_arm_description("left")
    for width in (0.0, 0.03, 0.08):
        positions = arm.joint_positions(HOME, gripper_width_m=width)
        hand = np.linalg.inv(arm.link_pose("left_hand", positions))
        left = (hand @ arm.link_pose("left_leftfinger", positions))[:3, 3]
        right = (hand @ arm.link_pose("left_rightfinger", positions))[:3, 3]
        assert left[1] == pytest.approx(width / 2) and right[1] == pytest.approx(-width / 2)


def test_transforms_cover_each_moving_joint_whose_position_is_known() -> None:
    arm = load_arm_description("left")
    arm_only = {t.child for t in arm.transforms(arm.joint_positions(HOME))}
    assert arm_only == {f"left_link{i}" for i in range(1, 8)}
    fingers = {t.child for t in arm.transforms(arm.joint_positions(gripper_width_m=0.04))}
    assert fingers == {"left_leftfinger", "left_rightfinger"}
    fixed = {t.child for t in arm.transforms({}, moving_only=False)}
    assert {"left_link8", "left_hand", "left_hand_tcp"} <= fixed
    # Every link but the root has exactly one transform among moving + fixed: rviz can place them all.
    every = arm_only | fingers | fixed
    assert every == set(arm.links) - {"left_link0"}
    with pytest.raises(ValueError, match="arm_q: expected 7"):
        arm.joint_positions((0.0, 0.1))


@pytest.mark.parametrize("arm_index, name", [(0, "left"), (1, "right")])
def test_links_match_franky_sims_mujoco_model_in_world(arm_index: int, name: str) -> None:
    """The world rviz shows is the one franky-sim simulates (and its cameras render), link by link."""
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo comes with franky-sim")
    from franky_sim.mujoco_simulator import MujocoSimulator

    from robots.franka.sim.simulator import SimScene

    sim = MujocoSimulator()
    for position in SimScene.dual().arm_positions:
        sim.add_robot(position=position)
    model = mujoco.MjModel.from_xml_string(ET.tostring(sim.scene, encoding="unicode"))
    data = mujoco.MjData(model)
    prefix = f"robot{arm_index}_"
    arm_qpos = [model.joint(f"{prefix}fr3_joint{i}").qposadr[0] for i in range(1, 8)]
    finger_qpos = [model.joint(f"{prefix}finger_joint{i}").qposadr[0] for i in (1, 2)]
    arm = load_arm_description(name)
    world_from_link0 = transform(base_xyz_for(name))
    bodies = {"fr3_link1": "link1", "fr3_link4": "link4", "fr3_link7": "link7", "hand": "hand",
              "left_finger": "leftfinger", "right_finger": "rightfinger"}
    rng = np.random.default_rng(arm_index)
    for _ in range(10):
        q, width = rng.uniform(-1.5, 1.5, 7), rng.uniform(0.0, 0.08)
        data.qpos[arm_qpos], data.qpos[finger_qpos] = q, width / 2
        mujoco.mj_kinematics(model, data)
        positions = arm.joint_positions(q, gripper_width_m=width)
        for body, link in bodies.items():
            index = model.body(prefix + body).id
            fk = world_from_link0 @ arm.link_pose(f"{name}_{link}", positions)
            assert np.linalg.norm(fk[:3, 3] - data.xpos[index]) < 1e-6, (body, q)
            assert np.abs(fk[:3, :3] - data.xmat[index].reshape(3, 3)).max() < 1e-6, (body, q)


def test_default_arm_placement_is_where_franky_sim_puts_the_arms() -> None:
    pytest.importorskip("mujoco", reason="robots.franka.sim.simulator needs MuJoCo")
    from robots.franka.sim.simulator import SimScene

    # dual_franka gives franky-sim the hosts [left, right] in that order.
    assert (sim_base_xyz()["left"], sim_base_xyz()["right"]) == SimScene.dual().arm_positions
    assert base_xyz_for("right") == SimScene.dual().arm_positions[1]
    assert base_xyz_for("arm") == SimScene().arm_positions[0]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_hand_tcp_matches_frankys_end_effector_pose_over_fci() -> None:
    pytest.importorskip("franky", reason="franky-control is not installed (pip install rpent[sim])")
    from robots.franka.hardware.franky_arm import FrankyArm
    from robots.franka.safety import SafetyEnvelope
    from robots.franka.safety_limits import ArmLimits

    # Poses far from the default workspace, so the whole arm is exercised: a wide envelope.
    wide = SafetyEnvelope(ArmLimits(workspace_m={"x": (-1.0, 1.0), "y": (-1.0, 1.0), "z": (0.0, 1.2)},
                                    max_tilt_deg=180, table={"top_z_m": 0.0}), "left")
    # The same simulator process test/franka uses, on addresses of its own.
    with franka_sim_process(*(f"127.0.0.{b}" for b in range(141, 146))) as (_proc, host):
        arm = FrankyArm(host, name="left", envelope=wide, connect_timeout_s=10)
        try:
            described = load_arm_description("left")
            targets = [HOME, (0.3, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5), (-0.5, 0.3, -0.3, -1.8, -0.4, 2.2, -0.3)]
            for target in targets:
                arm.start_joints([target], speed_factor=0.3)
                assert arm.wait(timeout_s=60).finished
                state = _settled(arm, target, timeout_s=30)
                # franky's own O_T_EE of the settled arm (the pose ArmState reports is computed from q).
                reported = arm._robot.state.O_T_EE
                tcp = described.link_pose("left_hand_tcp", described.joint_positions(state.joints))
                assert math.dist(tcp[:3, 3], reported.translation) < POS_TOL_M
                assert quat_angle(quat_from_matrix(tcp[:3, :3]), reported.quaternion) < ANGLE_TOL_RAD
        finally:
            arm.close()


def _settled(arm: FrankyArm, target: tuple[float, ...], timeout_s: float) -> ArmState:
    """The first state with each joint within its SETTLED_RAD of the target.

    franky-sim computes O_T_EE from the commanded joints (q_d), not the measured ones (q): right after
    a motion ends the simulated joints still lag the command, and O_T_EE runs up to ~4 cm ahead of the
    arm mid-motion. Once the joints have settled the two agree to well under a millimetre.
    """
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        state = arm.state()
        if all(abs(q - goal) < tol for q, goal, tol in zip(state.joints, target, SETTLED_RAD, strict=True)):
            return state
        assert time.monotonic() < deadline, f"joints did not settle at {target}: {state.joints}"
        pause.wait(0.05)


# --- rviz ------------------------------------------------------------------------------------
def test_rviz_config_draws_both_arms_in_world_with_cameras_and_observation() -> None:
    config = yaml.safe_load((REPO / "config" / "rpent.rviz").read_text())["Visualization Manager"]
    assert config["Global Options"]["Fixed Frame"] == "world"
    displays = [d for d in config["Displays"] if d.get("Enabled", True)]
    models = {d["Description Topic"]["Value"]: d for d in displays if d["Class"] == "rviz_default_plugins/RobotModel"}
    assert set(models) == {"/left/robot_description", "/right/robot_description"}
    for model in models.values():  # the arm nodes publish the URDF once, latched
        assert model["Description Source"] == "Topic"
        assert model["Description Topic"]["Durability Policy"] == "Transient Local"
    assert any(d["Class"] == "rviz_default_plugins/TF" for d in displays)
    images = {d["Topic"]["Value"] for d in displays if d["Class"] == "rviz_default_plugins/Image"}
    assert images == {"/franka_sim/front/image_raw", "/franka_sim/top/image_raw", "/toolkit/observation/image_0"}
    # Every simulated camera's depth as points (franka_sim_node), coloured from the image.
    clouds = {d["Topic"]["Value"]: d for d in displays if d["Class"] == "rviz_default_plugins/PointCloud2"}
    assert set(clouds) == {f"/franka_sim/{c}/points" for c in ("front", "top", "left_wrist", "right_wrist")}
    assert all(d["Color Transformer"] == "RGB8" for d in clouds.values())
    _shows_the_latched_keep_out_zones(displays)


def test_single_arm_rviz_config_draws_the_in_process_arm_and_its_observations() -> None:
    config = yaml.safe_load((REPO / "config" / "franka.rviz").read_text())["Visualization Manager"]
    assert config["Global Options"]["Fixed Frame"] == "world"
    displays = [d for d in config["Displays"] if d.get("Enabled", True)]
    models = [d for d in displays if d["Class"] == "rviz_default_plugins/RobotModel"]
    # The franka robot's one arm is named "arm" (config/franka.yaml); the toolkit node latches its URDF.
    assert [m["Description Topic"]["Value"] for m in models] == ["/arm/robot_description"]
    assert models[0]["Description Topic"]["Durability Policy"] == "Transient Local"
    images = {d["Topic"]["Value"] for d in displays if d["Class"] == "rviz_default_plugins/Image"}
    assert images == {"/toolkit/observation/image_0", "/toolkit/observation/image_1"}
    # The in-process cameras' depth as points, published by the toolkit node (camera_rate_hz).
    clouds = {d["Topic"]["Value"] for d in displays if d["Class"] == "rviz_default_plugins/PointCloud2"}
    assert clouds == {"/toolkit/front/points", "/toolkit/top/points", "/toolkit/wrist/points"}
    _shows_the_latched_keep_out_zones(displays)


def _shows_the_latched_keep_out_zones(displays: list[dict]) -> None:
    """Arm nodes (or the toolkit node, in process) latch their zones once at start, one message each."""
    [zones] = [d for d in displays if d["Class"] == "rviz_default_plugins/MarkerArray"]
    assert zones["Topic"]["Value"] == "/keep_out_zones"
    assert zones["Topic"]["Durability Policy"] == "Transient Local" and zones["Topic"]["Reliability Policy"] == "Reliable"
    assert zones["Topic"]["Depth"] >= 2  # both arm nodes' messages, when they arrive together

"""Franka's reset between dashboard tasks: a simulated scene goes back to how it started, a real arm home.

Arms go home through the same checks as the `home` tool (safety envelope, clearance between arms);
in the simulator the objects are then put back at their initial poses, at rest, so the next task
meets the scene the first one met.
"""

from __future__ import annotations

import mujoco

from robots.franka.motion import GRIPPER_TIMEOUT_S, MOTION_TIMEOUT_S, check_clearance, plan_joints
from robots.franka.runtime import FrankaRuntime
from rpent.robot.scene_reset import SceneReset
from rpent.runtime.arm import RuntimeFault


def scene_reset_for(runtime: FrankaRuntime) -> SceneReset:
    if runtime.sim is not None:
        return SceneReset("grippers open, arms home, objects back where they started",
                          lambda: reset_sim_scene(runtime), default=True)
    # A real gripper keeps what it holds: opening it over the table would drop the object anywhere.
    return SceneReset("arms home; a held object stays held", lambda: home_arms(runtime, open_grippers=False),
                      default=False)


def home_arms(runtime: FrankaRuntime, *, open_grippers: bool) -> str:
    for name, gripper in runtime.grippers.items() if open_grippers else ():
        outcome = gripper.open(timeout_s=GRIPPER_TIMEOUT_S)
        if not outcome.finished:
            raise RuntimeFault(f"{name}: the gripper did not open: {outcome.detail or 'stopped'}")
    plans = [plan_joints(arm, runtime.arm_configs[name].home_joints_rad, None, what="home joints")
             for name, arm in runtime.arms.items()]
    check_clearance(runtime, plans)
    for plan in plans:
        plan.launch()
    for plan in plans:
        outcome = plan.arm.wait(MOTION_TIMEOUT_S)
        if not outcome.finished:
            raise RuntimeFault(f"{plan.arm.name}: did not reach home: {outcome.detail or 'stopped'}")
        plan.arm.settled_state()
    return f"{len(plans)} arm(s) home"


def reset_sim_scene(runtime: FrankaRuntime) -> str:
    homed = home_arms(runtime, open_grippers=True)
    sim = runtime.sim
    assert sim is not None
    model, data = sim.model, sim.data
    names = [obj.name for obj in sim.scene.objects]
    with sim.lock:  # between physics steps
        for name in names:
            joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"{name}_joint")
            if joint < 0:
                raise RuntimeFault(f"the simulated scene has no joint for object {name!r}")
            q, v = int(model.jnt_qposadr[joint]), int(model.jnt_dofadr[joint])
            data.qpos[q:q + 7] = model.qpos0[q:q + 7]  # a free joint: position and quaternion
            data.qvel[v:v + 6] = 0.0
        mujoco.mj_forward(model, data)
    return f"{homed}; objects back at their initial poses: {', '.join(names) or 'none'}"

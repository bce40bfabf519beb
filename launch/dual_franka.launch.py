"""Two Franka arms as ROS 2 nodes, a toolkit node serving their tools, and optional planner, MCP bridge,
dashboard, rviz.

    ros2 launch rpent dual_franka.launch.py use_sim:=true                       # franky-sim, simulated cameras
    ros2 launch rpent dual_franka.launch.py left_ip:=172.16.0.2 right_ip:=172.16.1.2
    ros2 launch rpent dual_franka.launch.py use_sim:=true planner:=replay recipe:=/path/recipe.jsonl
    ros2 launch rpent dual_franka.launch.py use_sim:=true mcp_bridge:=true mcp_port:=8765
    ros2 launch rpent dual_franka.launch.py use_sim:=true dashboard:=true planner:=api  # http://127.0.0.1:8080/
    ros2 launch rpent dual_franka.launch.py use_sim:=true sim_seed:=4 runtime_state:=inactive
    ros2 launch rpent dual_franka.launch.py use_sim:=true vla_endpoint:=ws://gpu-host:8000    # run_policy

The arm, gripper and camera nodes are managed nodes, taken to `runtime_state` (default active).
A node that dies ends the launch; the others stop their motion and save their records.
"""

from launch import LaunchDescription
from rpent_ros.launch_helpers import (
    DASHBOARD_ARGUMENTS,
    RUNTIME_STATE_ARGUMENT,
    SIM_SEED_ARGUMENT,
    dashboard_node,
    dashboard_on,
    describe,
    planner_and_bridge,
    ros_node,
    rviz_node,
    sim_seed,
)
from rpent_ros.runtime.launch_actions import cameras_node_of, robot_runtime_nodes, runtime_node_actions

ARGUMENTS = [
    ("use_sim", "false", "true: start franky-sim with two arms on sim_hosts and simulated cameras"),
    ("sim_hosts", "127.0.0.1,127.0.0.2", "with use_sim: the loopback addresses franky-sim binds for the left and right arm"),
    ("sim_joint_record", "", "with use_sim: a file franky-sim appends both arms' true joint positions and "
                             "velocities to, 50 times a second (JSON lines): what moved, whatever the ROS graph says"),
    SIM_SEED_ARGUMENT,
    RUNTIME_STATE_ARGUMENT,
    ("config", "", "deployment YAML: arms (FCI hosts), cameras, safety file; the arm, gripper and camera nodes are the "
                   "ones it names (default config/franka_dual.yaml)"),
    ("left_ip", "", "FCI address of the left arm (default: its host in `config`; ignored with use_sim)"),
    ("right_ip", "", "FCI address of the right arm (default: its host in `config`; ignored with use_sim)"),
    ("runtime_mode", "ros", "ros: arms, grippers, cameras in their own nodes; inprocess: all inside the toolkit node"),
    ("safety_file", "", "safety envelope YAML (default: config/franka_safety.yaml)"),
    ("approve_motions", "false", "true: every motion waits for operator approval"),
    ("vla_endpoint", "", "openpi policy server for run_policy, e.g. ws://gpu-host:8000 (serve_policy.py --env=DROID); "
                         "with runtime_mode ros a vla_client_node per arm holds the connection"),
    ("output_dir", "", "where the toolkit node writes the run record (default runs/<robot>-<time>)"),
    ("rviz", "false", "true: start rviz2 with config/rpent.rviz (both arms drawn from /<arm>/robot_description)"),
    ("urdf", "", "FR3 URDF for rviz (default: the one franky-sim ships; for package:// meshes, your franka_description)"),
]


def _sim_hosts(get, arms):
    hosts = [h.strip() for h in get("sim_hosts").split(",")]
    if len(hosts) != len(arms) or not all(h.startswith("127.") for h in hosts):
        raise ValueError(f"launch argument sim_hosts: must be {len(arms)} loopback addresses 'a,b', got {get('sim_hosts')!r}")
    return dict(zip(arms, hosts, strict=True))


def _nodes(get):
    use_sim = get("use_sim").lower() == "true"
    mode = get("runtime_mode")
    safety = {"safety_file": get("safety_file")} if get("safety_file") else {}
    seed = sim_seed(get) if use_sim else {}
    # The robot's flags, as the toolkit node gets them: its runtime nodes are declared from the same ones.
    flags = {"sim": use_sim, **safety, **({"config": get("config")} if get("config") else {}),
             **({"vla_endpoint": get("vla_endpoint")} if get("vla_endpoint") else {})}
    nodes = []
    cameras_node = ""
    if mode == "ros":
        parts = robot_runtime_nodes("dual_franka", flags)
        arms = [p.name for p in parts if p.protocol == "arm"]
        ips = _sim_hosts(get, arms) if use_sim else {a: get(f"{a}_ip") for a in ("left", "right") if get(f"{a}_ip")}

        def deployment(part):
            if part.node_type == "franka_sim_node":
                record = {"joint_record": get("sim_joint_record")} if get("sim_joint_record") else {}
                return {"hosts": [ips[a] for a in arms], **seed, **safety, **record}
            if part.protocol not in ("arm", "gripper"):
                return {}
            params = {**({"ip": ips[part.name]} if part.name in ips else {}), **safety}
            # An arm's placement is the deployment YAML's (robots.franka.components), where the toolkit puts it too.
            return {**params, **({"urdf": get("urdf")} if get("urdf") else {})}

        nodes += runtime_node_actions(get, parts, deployment)
        cameras_node = cameras_node_of(parts)
    toolkit_params = {"robot": "dual_franka", "runtime_mode": mode, **flags, "action_clips": dashboard_on(get),
                      "approve_motions": get("approve_motions").lower() == "true",
                      **(seed if mode == "inprocess" else {})}
    if get("output_dir"):
        toolkit_params["output_dir"] = get("output_dir")
    nodes.append(ros_node(get, package="rpent", executable="toolkit_node", name="toolkit", parameters=[toolkit_params],
                          output="screen"))
    nodes += planner_and_bridge(get, "dual_franka")
    if dashboard_on(get):
        # Camera topics exist only when the cameras run in their own node.
        nodes.append(dashboard_node(get, "dual_franka", cameras_node))
    if get("rviz").lower() == "true":
        nodes.append(rviz_node(get, "rpent.rviz"))
    return nodes


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(describe(ARGUMENTS, _nodes, DASHBOARD_ARGUMENTS))

"""What RPent launch files share: the planner node, MCP bridge and dashboard on request, runtime
nodes taken through their lifecycle, one rule for a node that dies (the launch ends, the others stop
cleanly), and who can reach the nodes (rpent_ros/launch_graph.py: this machine only unless opened,
each node in its own SROS2 enclave with security:=true)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown, matches_action
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

from rpent_ros.launch_graph import GRAPH_ARGUMENTS, Graph, apply

Argument = tuple[str, str, str]

PLANNER_ARGUMENTS: list[Argument] = [
    ("planner", "none", "none | api | claude_code | codex | replay: start a planner node against the toolkit"),
    ("task", "", "task for the planner (default: the robot's default task)"),
    ("recipe", "", "recipe JSONL for planner:=replay"),
    ("mcp_bridge", "false", "true: serve the toolkit's tools over MCP (streamable HTTP on 127.0.0.1)"),
    ("mcp_port", "8765", "port of the MCP bridge"),
]

RUNTIME_STATES = ("active", "inactive", "unconfigured")
RUNTIME_STATE_ARGUMENT: Argument = (
    "runtime_state", "active", "active | inactive | unconfigured: the lifecycle state the launch takes the arm, gripper "
                               "and camera nodes to (inactive or unconfigured: a lab's own lifecycle manager takes over)")
SIM_SEED_ARGUMENT: Argument = (
    "sim_seed", "", "with use_sim: place the scene's objects at random for this seed (an integer >= 0; "
                    "default the fixed scene), as `rpent run --sim --sim-seed N`")

DASHBOARD_ARGUMENTS: list[Argument] = [
    ("dashboard", "false", "true: serve the operator dashboard on 127.0.0.1 (its tasks use `planner`, default api; "
                           "no planner node is started then)"),
    ("dashboard_port", "8080", "port of the dashboard"),
]


def dashboard_on(get: Callable[[str], str]) -> bool:
    return get("dashboard").lower() == "true"


def ros_node(get: Callable[[str], str], *, enclave: str | None = None, lifecycle: bool = False, **node: Any) -> Node:
    """A launch_ros Node (or LifecycleNode) of this package's launches: with security:=true it runs in the
    enclave /rpent/<enclave or its name>, which `describe` checks in the keystore before anything starts."""
    name = enclave or node["name"]
    ros_arguments = Graph.from_arguments(get).ros_arguments(name)
    action = (LifecycleNode if lifecycle else Node)(**node, **({"ros_arguments": ros_arguments} if ros_arguments else {}))
    action.rpent_enclave = name  # read by describe(); launch_ros expands the node's own name only when it runs
    return action


def dashboard_node(get: Callable[[str], str], robot: str, cameras_node: str = "") -> Node:
    """The dashboard against /toolkit; camera views from `/<cameras_node>/<channel>/image_raw`."""
    planner = get("planner") if get("planner") != "none" else "api"
    params: dict[str, Any] = {"robot": robot, "planner": planner, "toolkit_namespace": "/toolkit",
                              "dashboard_port": int(get("dashboard_port")), "cameras_node": cameras_node}
    if get("recipe"):
        params["recipe"] = get("recipe")
    if get("output_dir"):  # beside the toolkit node's own task-NNN records, not among them
        params["output_dir"] = f"{get('output_dir')}/dashboard"
    return ros_node(get, package="rpent", executable="dashboard_node", name="dashboard", parameters=[params], output="screen")


def planner_and_bridge(get: Callable[[str], str], robot: str, **planner_params: Any) -> list[Node]:
    """The optional planner_node and mcp_bridge_node for `robot`, both against /toolkit."""
    nodes = []
    if get("planner") != "none" and not dashboard_on(get):
        params = {"robot": robot, "planner": get("planner"), "toolkit_namespace": "/toolkit", **planner_params}
        for key in ("task", "recipe"):
            if get(key):
                params[key] = get(key)
        if get("output_dir"):  # transcript and result.json beside the toolkit node's record
            params["output_dir"] = f"{get('output_dir')}/planner"
        nodes.append(ros_node(get, package="rpent", executable="planner_node", name="planner", parameters=[params],
                              output="screen"))
    if get("mcp_bridge").lower() == "true":
        nodes.append(ros_node(get, package="rpent", executable="mcp_bridge_node", name="mcp_bridge", output="screen",
                              parameters=[{"transport": "http", "port": int(get("mcp_port")),
                                           "toolkit_namespace": "/toolkit"}]))
    return nodes


def managed_node(get: Callable[[str], str], **node: Any) -> list[Any]:
    """A managed runtime node, taken to `runtime_state`: configure at start, activate once configured."""
    from launch_ros.event_handlers import OnStateTransition
    from launch_ros.events.lifecycle import ChangeState
    from lifecycle_msgs.msg import Transition

    state = get("runtime_state")
    if state not in RUNTIME_STATES:
        raise ValueError(f"launch argument runtime_state: must be one of {', '.join(RUNTIME_STATES)}, got {state!r}")
    action = ros_node(get, lifecycle=True, namespace="", **node)

    def change(transition: int) -> EmitEvent:
        return EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(action), transition_id=transition))

    entities: list[Any] = [action]
    if state == "active":  # registered before the configure below can finish
        entities.append(RegisterEventHandler(OnStateTransition(
            target_lifecycle_node=action, start_state="configuring", goal_state="inactive",
            entities=[change(Transition.TRANSITION_ACTIVATE)])))
    if state != "unconfigured":
        entities.append(change(Transition.TRANSITION_CONFIGURE))
    return entities


def sim_seed(get: Callable[[str], str]) -> dict[str, int]:
    """The `sim_seed` launch argument as a node parameter ({} when not given)."""
    text = get("sim_seed").strip()
    if not text:
        return {}
    if not text.isdigit():
        raise ValueError(f"launch argument sim_seed: must be an integer >= 0, got {text!r}")
    return {"sim_seed": int(text)}


def end_when_one_dies(entities: Sequence[Any]) -> list[Any]:
    """`entities`, and for each node among them: if it exits with an error, the launch shuts down
    (SIGINT to the others, which stop their motion and save their records) instead of running on
    without it. A node that ends with 0 (a planner that finished) leaves the others running."""

    def on_exit(event: Any, context: Any) -> list[Any] | None:
        if event.returncode == 0 or context.is_shutdown:
            return None
        return [EmitEvent(event=Shutdown(reason=f"{event.process_name} exited with code {event.returncode}"))]

    watched = [e for e in entities if isinstance(e, Node)]
    return [*entities, *(RegisterEventHandler(OnProcessExit(target_action=node, on_exit=on_exit)) for node in watched)]


def describe(arguments: Sequence[Argument], nodes: Callable[[Callable[[str], str]], list[Any]],
             extra: Sequence[Argument] = ()) -> list[Any]:
    """Declare `arguments` (+ the planner ones and `extra`) and build the nodes from their values at launch time."""

    def build(context: Any, *args: Any, **kwargs: Any) -> list[Any]:
        def get(name: str) -> str:
            return LaunchConfiguration(name).perform(context)

        # `ros2 launch` passes any name:=value on as a configuration: a typo would be ignored unseen.
        unknown = sorted(set(context.launch_configurations) - {d.name for d in declared})
        if unknown:
            raise ValueError(f"launch argument {unknown[0]}: not an argument of this launch file (`ros2 launch "
                             "rpent <file> --show-args` lists them)")

        graph = Graph.from_arguments(get)
        entities = nodes(get)
        # Every enclave before any process starts: a missing one names its file, nothing runs unsecured.
        graph.check(sorted({e.rpent_enclave for e in entities if hasattr(e, "rpent_enclave")}))
        apply(graph, context)
        return end_when_one_dies(entities)

    declared = [DeclareLaunchArgument(n, default_value=d, description=t)
                for n, d, t in [*arguments, *PLANNER_ARGUMENTS, *extra, *GRAPH_ARGUMENTS]]
    return [*declared, OpaqueFunction(function=build)]


def rviz_node(get: Callable[[str], str], config_name: str) -> Node:
    """rviz2 with one of this package's configs (config/<config_name>), in the read-only monitor enclave."""
    from ament_index_python.packages import get_package_share_directory

    config = f"{get_package_share_directory('rpent')}/config/{config_name}"
    # opencv-python points QT_QPA_PLATFORM_PLUGIN_PATH at its own Qt's plugins when imported (a script
    # that started this launch, say): rviz's Qt 5 then aborts ("Could not load the Qt platform plugin").
    qt = {"QT_QPA_PLATFORM_PLUGIN_PATH": ""} if "cv2" in os.environ.get("QT_QPA_PLATFORM_PLUGIN_PATH", "") else {}
    # Niced: rendering (software OpenGL on a machine without a GPU takes a core) yields to the nodes that
    # drive the arms and to franky-sim, whose FCI link drops after 1 s without a state message.
    return ros_node(get, enclave="monitor", package="rviz2", executable="rviz2", arguments=["-d", config],
                    output="screen", prefix="nice -n 10", **({"additional_env": qt} if qt else {}))

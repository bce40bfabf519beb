"""The SROS2 access-control policy of an RPent deployment: one enclave per node, least privilege.

Who may do what (docs/ros.md, "Security"):
- the planner, dashboard and MCP bridge send goals to the toolkit's actions and call its services;
- only the toolkit calls the runtime nodes' RuntimeCall actions (and a VLA client node the actions of
  the arm, hand and cameras it drives), and renews the leases of the streamed ones it waits for;
- the runtime nodes serve those actions, publish telemetry (an arm node its keep-out zones too) and answer
  their lifecycle services;
- the monitor (rviz, `ros2 topic echo`) reads telemetry, TF, keep-out zones, images and /diagnostics, nothing else;
- anyone who reaches the toolkit may latch its stop (`/toolkit/stop`); only the dashboard and the operator's
  terminal (the `operator` enclave) may release it (`/toolkit/release_stop`);
- the launch process drives the runtime nodes' lifecycle.

Each node runs in the enclave `/rpent/<node name>`. A policy is built from the runtime nodes a robot
declares (RobotSpec.runtime_nodes), so a lab's own cameras or arms get their own enclaves; names are
absolute (no `~`), and `*` matches any characters, `/` included (DDS-Security's fnmatch). Kept free of
rclpy: only XML.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

ENCLAVE_PREFIX = "/rpent"
#: Nodes of every deployment, besides the runtime nodes a robot declares.
TOOLKIT, PLANNER, DASHBOARD, MCP_BRIDGE, MONITOR, LAUNCH = ("toolkit", "planner", "dashboard", "mcp_bridge", "monitor",
                                                            "launch")
#: The operator's terminal: `ros2 service call /toolkit/stop` and `/toolkit/release_stop`, nothing else.
OPERATOR = "operator"
#: The toolkit's own helper node in the same process (rpent_ros/runtime/lifecycle_client.py).
_PROBE = "rpent_lifecycle_probe"
#: Nodes whose names change from run to run, per enclave that hosts them.
_MONITOR_NODES = ("rviz*", "transform_listener_impl_*", "_ros2cli_*", "monitor*")
_LAUNCH_NODES = ("launch_ros_*",)
_PARAMETER_SERVICES = ("describe_parameters", "get_parameter_types", "get_parameters", "list_parameters",
                       "set_parameters", "set_parameters_atomically", "get_type_description")
_LIFECYCLE_SERVICES = ("change_state", "get_state", "get_available_states", "get_available_transitions",
                       "get_transition_graph")
_TOOLKIT_SERVICES = ("list_tools", "status", "new_task", "close_task", "stop")
#: The latched stop's release (rpent.tools.stop_latch): the operator's enclaves only, the dashboard and the
#: operator's terminal; not the planner, the MCP bridge or the monitor.
_RELEASE = "release_stop"
_OPERATOR_NODES = ("_ros2cli_*", "rpent_operator*")
#: The arms' keep-out zones as rviz markers, latched by each arm node (in process: the toolkit).
_ZONES = "/keep_out_zones"
#: What telemetry means for the monitor: joints, TF, robot descriptions, keep-out zones, images and point
#: clouds, diagnostics.
_TELEMETRY = ("/joint_states", "/tf", "/tf_static", "/*/robot_description", _ZONES, "/diagnostics", "/*/image_raw",
              "/*/camera_info", "/*/depth/image_raw", "/*/depth/camera_info", "/*/points")


def enclave_of(node_name: str) -> str:
    """The enclave a node runs in."""
    return f"{ENCLAVE_PREFIX}/{node_name}"


@dataclass(frozen=True)
class RuntimeNode:
    """A runtime node of the deployment: its name and the names of the parts it serves (`left`, `front`)."""

    name: str
    parts: tuple[str, ...]
    arms: tuple[str, ...] = ()  # parts that are arms: each publishes /<arm>/robot_description
    calls: tuple[str, ...] = ()  # runtime actions it calls itself (a VLA client node drives its arm's)


@dataclass
class _Grants:
    """What one enclave may do; each set holds ROS names."""

    publish: set[str] = field(default_factory=set)
    subscribe: set[str] = field(default_factory=set)
    request: set[str] = field(default_factory=set)
    reply: set[str] = field(default_factory=set)
    call: set[str] = field(default_factory=set)
    execute: set[str] = field(default_factory=set)

    def node_basics(self, *nodes: str) -> None:
        """What every rclpy/rclcpp node needs: rosout, parameter events, its parameter and type services."""
        self.publish |= {"/rosout", "/parameter_events"}
        self.subscribe |= {"/parameter_events", "/clock"}
        self.reply |= {f"/{node}/{service}" for node in nodes for service in _PARAMETER_SERVICES}

    def toolkit_client(self) -> None:
        self.call |= {f"/{TOOLKIT}/call_tool", f"/{TOOLKIT}/tools/*"}
        self.request |= {f"/{TOOLKIT}/{service}" for service in _TOOLKIT_SERVICES}
        self.subscribe.add(f"/{TOOLKIT}/events")


def _grants(runtime: Sequence[RuntimeNode]) -> dict[str, _Grants]:
    grants: dict[str, _Grants] = {}

    toolkit = grants[TOOLKIT] = _Grants()
    toolkit.node_basics(TOOLKIT, _PROBE)
    toolkit.execute |= {f"/{TOOLKIT}/call_tool", f"/{TOOLKIT}/tools/*"}
    toolkit.reply |= {f"/{TOOLKIT}/{service}" for service in (*_TOOLKIT_SERVICES, _RELEASE)}
    # Its events and observation images, and with runtime_mode:=inprocess the arms' and cameras' telemetry.
    toolkit.publish |= {f"/{TOOLKIT}/*", "/joint_states", "/tf", "/tf_static", "/*/robot_description", _ZONES,
                        "/diagnostics"}
    toolkit.subscribe |= {"/joint_states", "/tf", "/tf_static"}
    toolkit.call |= {f"/{node.name}/{part}/call" for node in runtime for part in node.parts}
    # It renews (and releases) the lease of each streamed call it waits for (rpent_ros/runtime/lease.py).
    toolkit.publish |= {f"/{node.name}/{part}/call/lease" for node in runtime if _streams(node) for part in node.parts}
    toolkit.request |= {f"/{node.name}/get_state" for node in runtime}  # waits until they are configured
    toolkit.request.add(f"/{DASHBOARD}/approve_motion")  # an operator's yes before a motion

    for name in (PLANNER, MCP_BRIDGE):
        client = grants[name] = _Grants()
        client.node_basics(name)
        client.toolkit_client()

    dashboard = grants[DASHBOARD] = _Grants()
    dashboard.node_basics(DASHBOARD)
    dashboard.toolkit_client()
    dashboard.subscribe |= {f"/{TOOLKIT}/observation/*", *(f"/{node.name}/*/image_raw" for node in runtime)}
    dashboard.reply.add(f"/{DASHBOARD}/approve_motion")
    dashboard.request.add(f"/{TOOLKIT}/{_RELEASE}")

    operator = grants[OPERATOR] = _Grants()
    operator.node_basics(*_OPERATOR_NODES)
    operator.request |= {f"/{TOOLKIT}/{service}" for service in ("stop", _RELEASE, "status")}

    streaming = {node.name for node in runtime if _streams(node)}
    for node in runtime:
        served = grants[node.name] = _Grants()
        served.node_basics(node.name)
        served.execute |= {f"/{node.name}/{part}/call" for part in node.parts}
        served.reply |= {f"/{node.name}/{service}" for service in _LIFECYCLE_SERVICES}
        served.publish |= {f"/{node.name}/*", "/joint_states", "/tf", "/tf_static", "/diagnostics",
                           *(f"/{arm}/robot_description" for arm in node.arms)}
        if node.arms:
            served.publish.add(_ZONES)
        served.subscribe.add("/joint_states")  # a wrist camera's pose follows its arm
        if _streams(node):
            served.subscribe.add(f"/{node.name}/*/call/lease")  # its streamed calls' leases
        served.call |= set(node.calls)
        served.publish |= {f"{call}/lease" for call in node.calls if call.strip("/").split("/")[0] in streaming}

    monitor = grants[MONITOR] = _Grants()
    monitor.node_basics(*_MONITOR_NODES)
    monitor.reply.add("/rviz*/reset_time")  # rviz's own "Reset" button, served by rviz
    monitor.subscribe |= {*_TELEMETRY, f"/{TOOLKIT}/observation/*"}

    launch = grants[LAUNCH] = _Grants()
    launch.node_basics(*_LAUNCH_NODES)
    launch.request |= {f"/{node.name}/{service}" for node in runtime for service in ("change_state", "get_state")}
    launch.subscribe |= {f"/{node.name}/transition_event" for node in runtime}
    return grants


def _streams(node: RuntimeNode) -> bool:
    """It serves streamed calls, which run under a lease: an arm node's run_joint_steps, a VLA client
    node's run (it calls other runtime nodes)."""
    return bool(set(node.arms) & set(node.parts) or node.calls)


def build_policy(runtime: Iterable[RuntimeNode]) -> str:
    """The policy XML (sros2's format, version 0.2.0) for a deployment with these runtime nodes."""
    merged: dict[str, RuntimeNode] = {}
    for node in runtime:  # the same node may come from several deployments: the union of its parts
        seen = merged.get(node.name)
        merged[node.name] = node if seen is None else RuntimeNode(
            node.name, tuple(sorted({*seen.parts, *node.parts})), tuple(sorted({*seen.arms, *node.arms})),
            tuple(sorted({*seen.calls, *node.calls})))
    root = ET.Element("policy", version="0.2.0")
    enclaves = ET.SubElement(root, "enclaves")
    for name, grants in sorted(_grants(sorted(merged.values(), key=lambda n: n.name)).items()):
        enclave = ET.SubElement(enclaves, "enclave", path=enclave_of(name))
        profile = ET.SubElement(ET.SubElement(enclave, "profiles"), "profile", ns="/", node=name)
        _rules(profile, "topics", "topic", [("publish", grants.publish), ("subscribe", grants.subscribe)])
        _rules(profile, "services", "service", [("reply", grants.reply), ("request", grants.request)])
        _rules(profile, "actions", "action", [("call", grants.call), ("execute", grants.execute)])
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _rules(profile: ET.Element, group: str, item: str, modes: list[tuple[str, set[str]]]) -> None:
    """One element per distinct set of modes: names allowed both ways are listed once with both."""
    names = sorted({n for _, allowed in modes for n in allowed})
    by_modes: dict[tuple[str, ...], list[str]] = {}
    for name in names:
        by_modes.setdefault(tuple(mode for mode, allowed in modes if name in allowed), []).append(name)
    for mode_set, listed in sorted(by_modes.items()):
        element = ET.SubElement(profile, group, {mode: "ALLOW" for mode in mode_set})
        for name in listed:
            ET.SubElement(element, item).text = name


def enclaves_of(policy_xml: str) -> list[str]:
    """The enclave paths a policy names."""
    return [e.get("path", "") for e in ET.fromstring(policy_xml).iter("enclave")]

"""When a node's graph reaches beyond this machine unsecured (the toolkit node's warning), and which
enclave rcl will use: read from the variables and arguments ROS 2 Jazzy reads. Needs no ROS."""

from __future__ import annotations

import pytest

from rpent_ros.security.exposure import discovery_reach, exposure_warning
from rpent_ros.security.keystore import enclave_from_arguments


@pytest.mark.parametrize(("env", "reach"), [
    ({}, "ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET"),  # Jazzy's default
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT"}, "ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET"),
    ({"ROS_LOCALHOST_ONLY": "1"}, None),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, None),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"}, None),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_STATIC_PEERS": "10.0.0.5"}, "ROS_STATIC_PEERS=10.0.0.5"),
    # Humble's DDS reads ROS_LOCALHOST_ONLY alone: Jazzy's range does not confine it.
    ({"ROS_DISTRO": "humble", "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, "ROS_LOCALHOST_ONLY unset (Humble: the subnet)"),
    ({"ROS_DISTRO": "humble", "ROS_LOCALHOST_ONLY": "1"}, None),
])
def test_discovery_reaches_beyond_the_machine_only_for_subnet_or_static_peers(env, reach):
    assert discovery_reach(env) == reach


def test_an_open_unsecured_graph_is_named_with_the_argument_that_secures_it():
    warning = exposure_warning({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "ROS_DOMAIN_ID": "3"})
    assert warning is not None
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET" in warning and "ROS_DOMAIN_ID 3" in warning
    assert "security:=true keystore:=DIR" in warning


def test_a_secured_or_local_graph_gives_no_warning():
    assert exposure_warning({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "ROS_SECURITY_ENABLE": "true"}) is None
    assert exposure_warning({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}) is None


@pytest.mark.parametrize(("argv", "enclave"), [
    (["toolkit_node"], "/"),
    (["toolkit_node", "--ros-args", "--enclave", "/rpent/toolkit"], "/rpent/toolkit"),
    (["toolkit_node", "--ros-args", "-p", "robot:=toy", "-e", "/rpent/planner"], "/rpent/planner"),
    (["toolkit_node", "--enclave", "/not/a/ros/arg"], "/"),
])
def test_the_enclave_is_the_one_rcl_reads_from_the_ros_arguments(argv, enclave, monkeypatch):
    monkeypatch.delenv("ROS_SECURITY_ENCLAVE_OVERRIDE", raising=False)
    assert enclave_from_arguments(argv) == enclave


def test_the_enclave_override_variable_wins(monkeypatch):
    monkeypatch.setenv("ROS_SECURITY_ENCLAVE_OVERRIDE", "/rpent/monitor")
    assert enclave_from_arguments(["x", "--ros-args", "--enclave", "/rpent/toolkit"]) == "/rpent/monitor"


@pytest.mark.parametrize(("distro", "network", "expected", "absent"), [
    ("humble", "localhost", {"ROS_LOCALHOST_ONLY": "1"}, "ROS_AUTOMATIC_DISCOVERY_RANGE"),
    ("humble", "subnet", {"ROS_LOCALHOST_ONLY": "0"}, "ROS_AUTOMATIC_DISCOVERY_RANGE"),
    ("jazzy", "localhost", {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, "ROS_LOCALHOST_ONLY"),
    ("jazzy", "subnet", {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}, "ROS_LOCALHOST_ONLY"),
])
def test_a_launch_sets_the_switch_its_distro_obeys(distro, network, expected, absent):
    from rpent_ros.launch_graph import GRAPH_ARGUMENTS, Graph

    arguments = {name: default for name, default, _ in GRAPH_ARGUMENTS} | {"network": network}
    env = Graph.from_arguments(arguments.__getitem__).environment(distro)
    assert expected.items() <= env.items() and absent not in env
    # What the launch sets is what the toolkit node's exposure check reads as closed or open.
    assert (discovery_reach({"ROS_DISTRO": distro, **env}) is None) == (network == "localhost")

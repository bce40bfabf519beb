"""Robots are found by module name and by entry point; nothing central lists them."""

from __future__ import annotations

import textwrap

import pytest

from rpent.robot import RobotNotFound, list_robots, load_robot


def test_robot_is_found_as_a_module_of_the_robots_package():
    module = load_robot("toy")
    assert module.__name__ == "robots.toy"
    assert module.get_robot_spec().name == "toy"
    assert "toy" in list_robots()


def test_robot_is_found_through_the_entry_point_group(tmp_path, monkeypatch):
    package = tmp_path / "labbot_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            """
            from robots.toy.robot_spec import ToySpec, get_toolkit

            class LabSpec(ToySpec):
                name = "labbot"

            def get_robot_spec():
                return LabSpec()
            """
        )
    )
    dist = tmp_path / "labbot-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: labbot\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[rpent.robots]\nlabbot = labbot_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    assert "labbot" in list_robots()
    module = load_robot("labbot")
    assert module.get_robot_spec().name == "labbot"


def test_unknown_robot_names_the_installed_ones():
    with pytest.raises(RobotNotFound, match=r"unknown robot 'warp_drive' \(installed: .*toy"):
        load_robot("warp_drive")


@pytest.mark.parametrize("name", ["", "../toy", "Toy", "toy.tools"])
def test_malformed_robot_names_are_refused(name):
    with pytest.raises(RobotNotFound, match="not a robot name"):
        load_robot(name)

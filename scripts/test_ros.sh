#!/usr/bin/env bash
# Build this package with colcon into a fresh workspace outside the checkout, then run the ROS tests
# (test/ros) against that build with RPENT_REQUIRE_ROS=1: a ROS test that would skip fails instead, and
# test/ros/test_ros_tests_ran.py checks that the rclpy, launch and launch_pytest tests ran. Extra
# arguments go to pytest (e.g. -k toolkit_load). CI runs it after scripts/test.sh.
#
# ROS 2: the one already sourced (ROS_DISTRO set; .venv must then hold what ROS needs, see README),
# else the prebuilt Jazzy in ../shared/ros (RPENT_ROS_DIR overrides the folder): its install.sh unpacks
# it (with rviz2) into /opt/ros/jazzy and apt-installs its run-time libraries (as root, or with sudo), and its
# requirements.txt goes into .venv, which runs colcon, the rosidl generators and the tests.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
started=$SECONDS
[ -x .venv/bin/python ] || bash scripts/setup.sh
# First on PATH: colcon, pytest, and the python3 that CMake and the installed node scripts pick.
export PATH="$repo/.venv/bin:$PATH"

if [ -z "${ROS_DISTRO:-}" ]; then
  ros_dir="${RPENT_ROS_DIR:-$repo/../shared/ros}"
  if [ ! -f "$ros_dir/install.sh" ]; then
    echo "test_ros: no ROS 2 is sourced and $ros_dir/install.sh does not exist" >&2
    exit 2
  fi
  # --with-rviz: rviz2 and Xvfb too, for the test of rviz in the monitor enclave (test_rviz_launch_rclpy.py).
  env_sh=$(bash "$ros_dir/install.sh" --with-rviz | tail -1)
  echo "test_ros: pip install -r $ros_dir/requirements.txt"
  python -m pip install -q -r "$ros_dir/requirements.txt"
  # shellcheck disable=SC1090
  source "$env_sh"  # keeps a ROS_DOMAIN_ID set before (concurrent runs on one machine need their own)
fi
if ! command -v colcon >/dev/null; then
  echo "test_ros: colcon is missing (python -m pip install colcon-common-extensions)" >&2
  exit 2
fi

ws=$(mktemp -d "${TMPDIR:-/tmp}/rpent-ros-ws.XXXXXX")
trap 'rm -rf "$ws"' EXIT
echo "test_ros: colcon build into $ws (ROS 2 $ROS_DISTRO, ROS_DOMAIN_ID ${ROS_DOMAIN_ID:-0})"
colcon --log-base "$ws/log" build --base-paths "$repo" --build-base "$ws/build" --install-base "$ws/install"
set +u  # colcon's setup scripts read unset variables
# shellcheck disable=SC1091
source "$ws/install/setup.bash"
set -u
# The ros2 command's first line names the interpreter ROS was built for, which need not hold ROS's
# Python requirements (.venv does): the tests' `ros2 launch` runs it with .venv's python, like the rest.
mkdir -p "$ws/bin"
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$repo/.venv/bin/python" "$(command -v ros2)" > "$ws/bin/ros2"
chmod +x "$ws/bin/ros2"
export PATH="$ws/bin:$PATH"
echo "test_ros: built in $((SECONDS - started)) s"

export MUJOCO_GL="${MUJOCO_GL:-egl}" RPENT_REQUIRE_ROS=1
# The pytest executable, not `python -m pytest`: that would put the checkout first on sys.path, and its
# rpent (without the generated interfaces) ahead of the one colcon installed.
status=0
pytest test/ros "$@" || status=$?
echo "test_ros: exit $status after $((SECONDS - started)) s"
exit $status

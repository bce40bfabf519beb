#!/usr/bin/env bash
# Set up, then run the whole test suite. Extra arguments go to pytest (e.g. -m "not slow").
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh"
cd "$repo"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
# DDS stays on this machine whenever a ROS test runs.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
exec .venv/bin/python -m pytest "$@"

#!/usr/bin/env bash
# Set up, then run the whole test suite. Extra arguments go to pytest (e.g. -m "not slow").
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh"
cd "$repo"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
# DDS stays on this machine whenever a ROS test runs.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# Two test files at a time (pytest-xdist; RPENT_TEST_WORKERS=1: one): most tests wait on simulators,
# servers and subprocesses, and the suite holds on a busy machine (the simulator keeps time with its
# client), so two workers on two cores halve the wall time. A file stays on one worker: its module-wide
# fixtures (a launch, a Ray head) start once.
workers="${RPENT_TEST_WORKERS:-2}"
if [ "$workers" = 1 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile "$@"

#!/usr/bin/env bash
# Set up, then run the main job: a simulated robot solves its task and leaves a full run record.
# Without a model key the bundled recipe is replayed; with ANTHROPIC_API_KEY set, Claude plans.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh"
cd "$repo"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
out="runs/demo-$(date +%Y%m%d-%H%M%S)"
# The simulated Franka: franky-sim on loopback, the real franky client, offscreen MuJoCo cameras.
robot_args=(--robot franka --sim --task "Pick up the red cube and lift it 10 cm above the table.")
recipe="robots/franka/recipes/pick_cube.jsonl"
if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  planner_args=(--planner api)
else
  echo "demo: no ANTHROPIC_API_KEY: replaying the bundled recipe $recipe"
  planner_args=(--planner replay --recipe "$recipe")
fi
.venv/bin/rpent run "${robot_args[@]}" "${planner_args[@]}" --output-dir "$out" "$@"
echo "demo: the run's record is in $out (result.json, steps.jsonl, episode.mp4, images/)"

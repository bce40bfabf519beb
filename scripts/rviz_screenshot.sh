#!/usr/bin/env bash
# docs/images/rviz_keep_out_zones.png: rviz with config/rpent.rviz drawing both simulated arms and the keep-out
# zones of a safety file that names a shelf beside the table (left arm only), a monitor cart (right arm only) and
# the shipped file's front camera tripod (every arm), in rpent.rviz's own view. Runs `dual_franka.launch.py use_sim:=true rviz:=true` on a virtual screen (Xvfb), as
# test/ros/test_rviz_launch_rclpy.py does, and saves the rviz window once the zones are drawn.
#
#   ROS_DOMAIN_ID=71 scripts/rviz_screenshot.sh [OUT.png]     # default: docs/images/rviz_keep_out_zones.png
#
# Builds this package with colcon into a temporary workspace first, with ROS 2 as scripts/test_ros.sh finds it
# (the one sourced, else ../shared/ros installed --with-rviz). Takes 1-3 minutes on two cores.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out="$(realpath -m "${1:-docs/images/rviz_keep_out_zones.png}")"
export PATH="$repo/.venv/bin:$PATH"

if [ -z "${ROS_DISTRO:-}" ]; then
  ros_dir="${RPENT_ROS_DIR:-$repo/../shared/ros}"
  env_sh=$(bash "$ros_dir/install.sh" --with-rviz | tail -1)
  # shellcheck disable=SC1090
  source "$env_sh"
fi
for tool in colcon rviz2 Xvfb; do
  command -v "$tool" >/dev/null || { echo "rviz_screenshot: $tool is missing (see scripts/test_ros.sh)" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rpent-rviz-shot.XXXXXX")
pids=()
cleanup() {  # the launch (then Xvfb) as Ctrl-C stops it: its nodes stop and save their records; killed after 30 s
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -INT -- "-$pid" 2>/dev/null || continue
    for _ in $(seq 60); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
colcon --log-base "$work/log" build --base-paths "$repo" --build-base "$work/build" --install-base "$work/install" \
  > "$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
set +u  # colcon's setup scripts read unset variables
# shellcheck disable=SC1091
source "$work/install/setup.bash"
set -u

# The shipped envelope with zones a lab might have beside the table (world frame, metres).
python - "$work/safety.yaml" <<'EOF'
import sys

import yaml

from robots.franka.config import DEFAULT_SAFETY_FILE

safety = yaml.safe_load(DEFAULT_SAFETY_FILE.read_text())
safety["keep_out"] = [
    *safety.get("keep_out", []),  # the shipped file's front camera tripod
    {"name": "shelf", "box": {"x_m": [0.2, 0.5], "y_m": [0.62, 0.9], "z_m": [0.0, 0.9]}, "arms": ["left"]},
    {"name": "monitor_cart", "box": {"x_m": [0.45, 0.75], "y_m": [-0.85, -0.65], "z_m": [0.0, 0.75]}, "arms": ["right"]},
]
open(sys.argv[1], "w").write(yaml.safe_dump(safety))
EOF
# Two loopback addresses where franky-sim's ports are free (other runs may hold 127.0.0.1 and .2).
hosts=$(python -c '
import socket
free = []
for b in range(241, 255):
    try:
        for port in (1337, 1338):
            with socket.socket() as probe:
                probe.bind((f"127.0.0.{b}", port))
    except OSError:
        continue
    free.append(f"127.0.0.{b}")
print(",".join(free[:2]))')

display=$(python -c 'import os; print(next(n for n in range(90, 200) if not os.path.exists(f"/tmp/.X11-unix/X{n}") and not os.path.exists(f"/tmp/.X{n}-lock")))')
setsid Xvfb ":$display" -screen 0 1600x1000x24 -nolisten tcp >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 100); do [ -e "/tmp/.X11-unix/X$display" ] && break; sleep 0.1; done
# The ros2 command run by .venv's python, which holds ROS's Python requirements (as scripts/test_ros.sh does).
DISPLAY=":$display" LIBGL_ALWAYS_SOFTWARE=1 setsid python "$(command -v ros2)" launch rpent dual_franka.launch.py \
  use_sim:=true rviz:=true "sim_hosts:=$hosts" "safety_file:=$work/safety.yaml" "output_dir:=$work/run" \
  > "$work/launch.log" 2>&1 & pids+=($!)
echo "rviz_screenshot: launched on display :$display, franky-sim on $hosts (log $work/launch.log)"

# Once the tools are served: one capture_images call, so the "Last observation" panel has a picture; then wait
# until the 3D view shows the zones' translucent red, let it render a few frames more and keep the rviz window.
python - ":$display" "$work/launch.log" "$out" "${pids[-1]}" <<'EOF'
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import ImageGrab

display, log, out, launch = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])


def running(pid: int) -> bool:
    """Alive and not a zombie (the launch is the shell's child: it stays in /proc until the shell reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


deadline = time.monotonic() + 300
while "tools served" not in log.read_text(errors="replace"):
    if not running(launch) or time.monotonic() > deadline:
        sys.exit(f"rviz_screenshot: the launch did not serve its tools:\n{log.read_text()[-3000:]}")
    time.sleep(1)
subprocess.run([sys.executable, shutil.which("ros2"), "action", "send_goal", "/toolkit/tools/capture_images",
                "rpent/action/CallTool", "{tool: capture_images, arguments_json: '{}'}"],
               stdout=subprocess.DEVNULL, timeout=120, check=True)
deadline, red = time.monotonic() + 120, 0.0
while time.monotonic() < deadline:
    shot = ImageGrab.grab(xdisplay=display).convert("RGB")
    rgb = np.asarray(shot).astype(int)
    view = rgb[:, rgb.shape[1] // 4:]  # right of the Displays and image docks
    red = float(((view[..., 0] - view[..., 1] > 50) & (view[..., 1] < 0.6 * view[..., 0])).mean())
    if red > 0.003:
        break
    time.sleep(2)
else:
    sys.exit(f"rviz_screenshot: no keep-out zone drawn in 120 s (red share {red:.4f})")
time.sleep(5)
shot = ImageGrab.grab(xdisplay=display).convert("RGB")
lit = np.argwhere(np.asarray(shot).sum(axis=2) > 0)  # Xvfb's root window is black: keep the rviz window
(top, left), (bottom, right) = lit.min(axis=0), lit.max(axis=0)
out.parent.mkdir(parents=True, exist_ok=True)
shot.crop((int(left), int(top), int(right) + 1, int(bottom) + 1)).save(out, optimize=True)
print(f"rviz_screenshot: {out} (red share of the 3D view {red:.4f})")
EOF

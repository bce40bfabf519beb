#!/usr/bin/env bash
# Set up a machine for RPent: system libraries from Debian, a virtualenv with every extra.
# Idempotent and quick when everything is already there. Source it or run it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# EGL + Mesa: MuJoCo renders offscreen with MUJOCO_GL=egl (franky-sim cameras, LIBERO).
# Chromium: the dashboard's real-browser tests (driven by Playwright; no browser download).
# ffmpeg: ffprobe checks, as a player would, that videos cut off by a crash still play (test/video_probe.py).
apt_packages=(libegl1 libegl-mesa0 libgl1-mesa-dri libgles2 chromium ffmpeg)
missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# Node.js with npm runs the pinned Codex CLI (some machines ship a Node.js that bundles npm).
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
echo "setup: pip install -e .[dev]"
.venv/bin/python -m pip install -q -e ".[dev]"

# The Codex CLI is an npm package; pinned, installed into the repo (node_modules is git-ignored).
if [ -f package.json ]; then
  echo "setup: npm ci"
  npm ci --silent --no-audit --no-fund >/dev/null
fi
echo "setup: done"

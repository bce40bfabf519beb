#!/usr/bin/env bash
# Set up a machine for RPent: system libraries from Debian, a virtualenv with every extra.
# Idempotent and quick when everything is already there. Source it or run it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
started=$SECONDS

# Long phases say what they install and pass on the tools' own progress lines (a fresh machine takes
# minutes); on a machine that is already set up they stay short.
say() { echo "setup: $*"; }
# pip prints one line per requirement already present: keep what is new or slow (Collecting,
# Downloading, Building, Installing) so a fresh install shows progress and a re-run stays short.
# (grep finding nothing to pass on is not a failure; pip's own exit status still is, through pipefail.)
pip_progress() { { grep --line-buffered -v -e '^Requirement already satisfied' -e '^Obtaining file:' || true; } | sed -u 's/^/  pip: /'; }

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
  say "installing Debian packages: ${missing[*]} (apt-get; a minute or two)"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}" \
    | { grep --line-buffered -e '^Unpacking' -e '^Setting up' || true; } | sed -u 's/^/  apt: /'
fi

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$python" -m venv .venv
fi
say "upgrading pip in .venv"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
say "pip install -e .[dev]: rpent and every extra (franky + franky-sim, MuJoCo/LIBERO, RealSense, Anthropic/MCP"
say "  SDKs, web server, pytest, ruff, Playwright); several minutes on a fresh machine, seconds when up to date"
.venv/bin/python -m pip install --progress-bar off -e ".[dev]" 2>&1 | pip_progress
# openpi-client without its declared dependencies: its numpy < 2 cap would downgrade NumPy (and
# OpenCV) for everything; the .[openpi] extra above brings what it needs (see setup.py).
say "pip install --no-deps openpi-client==0.1.2 (openpi websocket policy servers)"
.venv/bin/python -m pip install --progress-bar off --no-deps "openpi-client==0.1.2" 2>&1 | pip_progress

# The Codex CLI is an npm package; pinned, installed into the repo (node_modules is git-ignored).
if [ -f package.json ]; then
  say "npm ci: the pinned Codex CLI into node_modules/"
  npm ci --no-audit --no-fund 2>&1 | sed -u 's/^/  npm: /'
fi
say "done in $((SECONDS - started)) s"

#!/usr/bin/env bash
# The Debian / Ubuntu packages memsight needs at run time, installed where missing:
#   the window:             libx11-6 libxkbcommon-x11-0 libwayland-client0 (X11 / Wayland)
#   rendering (window and `memsight screenshot`, also without a GPU):
#                           libegl1 libegl-mesa0 libgl1-mesa-dri (Mesa's llvmpipe)
#   Chinese / Japanese text: fontconfig fonts-wqy-microhei (any CJK font will do)
# With --gui-tests, also what driving the real window needs: xvfb xdotool imagemagick.
# Usage: scripts/install-deps.sh [--gui-tests]   (as root, or with sudo available)
set -euo pipefail

packages=(libx11-6 libxkbcommon-x11-0 libwayland-client0 libegl1 libegl-mesa0 libgl1-mesa-dri
          fontconfig fonts-wqy-microhei)
if [ "${1:-}" = "--gui-tests" ]; then
    packages+=(xvfb xdotool imagemagick)
fi

missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"

#!/usr/bin/env bash
# The real window, as a user starts it, under Xvfb: a snapshot in a Chinese folder opens, the
# window appears and stays up (no glyph panic), View -> colour by category is clicked with
# xdotool, and a picture of the screen is taken and checked to be more than one colour.
# Needs: xvfb xdotool imagemagick (scripts/install-deps.sh --gui-tests). Usage:
#   scripts/gui-smoke.sh [path/to/memsight] [output.png]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/debug/memsight}"
shot="${2:-$(mktemp --suffix=.png)}"
for tool in Xvfb xdotool import; do
    command -v "$tool" >/dev/null || { echo "gui-smoke: $tool missing (scripts/install-deps.sh --gui-tests)" >&2; exit 1; }
done

work="$(mktemp -d)"
display=":$((90 + RANDOM % 9))"
cleanup() {
    [ -n "${app:-}" ] && kill "$app" 2>/dev/null || true
    [ -n "${xvfb:-}" ] && kill "$xvfb" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/中文目录"
snapshot="$work/中文目录/内存快照.pkl"
"$bin" gen --scenario transformer-leak --events 20000 -o "$snapshot" 2>/dev/null

Xvfb "$display" -screen 0 1400x900x24 >"$work/xvfb.log" 2>&1 &
xvfb=$!
sleep 1
export DISPLAY="$display" WGPU_BACKEND=gl
"$bin" "$snapshot" >"$work/app.log" 2>&1 &
app=$!

# The window appears within 60 s…
window=""
for _ in $(seq 60); do
    window="$(xdotool search --name '^memsight$' 2>/dev/null | head -1 || true)"
    [ -n "$window" ] && break
    kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app exited:" >&2; cat "$work/app.log" >&2; exit 1; }
    sleep 1
done
[ -n "$window" ] || { echo "gui-smoke: no window within 60 s" >&2; exit 1; }
sleep 5
# … and stays up while it draws the Chinese tab label, the chart and the findings.
kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app died while drawing:" >&2; cat "$work/app.log" >&2; exit 1; }

# View -> colour allocations by category (the menu's positions at this window size).
xdotool windowfocus "$window" 2>/dev/null || true
xdotool mousemove 56 12 click 1
sleep 1
xdotool mousemove 120 158 click 1
sleep 1
xdotool key Escape
sleep 2
kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app died after the menu:" >&2; cat "$work/app.log" >&2; exit 1; }

import -window root "$shot"
colours="$(convert "$shot" -format %k info:)"
if [ "$colours" -lt 50 ]; then
    echo "gui-smoke: the screen has $colours colours: nothing drawn?" >&2
    exit 1
fi
echo "gui-smoke: window up, menu used, $colours colours on screen: $shot"

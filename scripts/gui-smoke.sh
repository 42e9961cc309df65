#!/usr/bin/env bash
# The real window, as a user starts it, under Xvfb: a snapshot in a Chinese folder opens, the
# window appears and stays up (no glyph panic), View -> colour by category is clicked with
# xdotool, and a picture of the screen is taken and checked to be more than one colour. Then,
# with no desktop portal (no D-Bus session, as on plain X11, remote X, containers, WSL): Ctrl+O
# must put a file dialog on screen (memsight's own), a snapshot is opened through it (typed into
# its File field), and File -> Export chart as PNG… writes the PNG where the dialog says. Then
# File -> Compare with… -> the first file opens a compare tab, and Ctrl+E exports that view.
# View -> What if opens the What-if panel, and a setting clicked there replays the trace.
# Last, an msMemScope recording (a generated msmemscope_*_ascend folder in a Chinese folder) opens
# as the window's file; View -> colour by owner and View -> Memory by owner change the screen.
# Then the pool follows segment steps, read from the app's MEMSIGHT_UI_LOG: ] steps through the
# segment_map events of an expandable-segment NPU file, each outlined in view; and with a block
# pinned (a row of the Blocks table), [ goes to the segment_alloc before and the pool outlines that
# segment, not the pinned block's. Last, a run (a folder of snapshots, one per rank, in a Chinese
# folder) opens as a run tab at 1400×900 and 900×600, and a double-click on its heat map opens a file.
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
    # GUI_SMOKE_KEEP=DIR keeps the exported pictures, to look at them.
    [ -n "${GUI_SMOKE_KEEP:-}" ] && mkdir -p "$GUI_SMOKE_KEEP" && find "$work" -name '*.png' -exec cp {} "$GUI_SMOKE_KEEP" \;
    [ -n "${app:-}" ] && kill "$app" 2>/dev/null || true
    [ -n "${xvfb:-}" ] && kill "$xvfb" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

await_window() {  # APP_LOG WHAT: waits up to 60 s for $app's window (sets $window), then 5 s more
    window=""
    for _ in $(seq 60); do
        window="$(xdotool search --name '^memsight' 2>/dev/null | head -1 || true)"
        [ -n "$window" ] && break
        if ! kill -0 "$app" 2>/dev/null; then
            echo "gui-smoke: the app exited on $2:" >&2
            cat "$1" >&2
            # Say whether the X server was still there (a lost server is not the app's doing).
            if kill -0 "$xvfb" 2>/dev/null; then
                echo "gui-smoke: Xvfb $display was still running" >&2
            else
                echo "gui-smoke: Xvfb $display had exited; its log:" >&2
                cat "$work/xvfb.log" >&2
            fi
            exit 1
        fi
        sleep 1
    done
    [ -n "$window" ] || { echo "gui-smoke: no window for $2 within 60 s" >&2; exit 1; }
    sleep 5
}

mkdir -p "$work/中文目录"
snapshot="$work/中文目录/内存快照.pkl"
"$bin" gen --scenario transformer-leak --events 20000 -o "$snapshot" 2>/dev/null

cp "$snapshot" "$work/snap.pkl"
mkdir -p "$work/config"

# -noreset: the server stays as it is when its last client disconnects (an app quits between
# two checks); without it, Xvfb resets at each such moment.
Xvfb "$display" -screen 0 1400x900x24 -noreset >"$work/xvfb.log" 2>&1 &
xvfb=$!
sleep 1
export DISPLAY="$display" WGPU_BACKEND=gl XDG_CONFIG_HOME="$work/config"
# No desktop portal can answer: no session bus.
unset DBUS_SESSION_BUS_ADDRESS XDG_RUNTIME_DIR
bin="$(realpath "$bin")"
(cd "$work" && exec "$bin" "$snapshot") >"$work/app.log" 2>&1 &
app=$!

# The window appears within 60 s…
await_window "$work/app.log" "$snapshot"
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

# View -> What if (the menu's last row): the What-if panel appears (on the right) and replays the
# trace under the file's settings; a click on its expandable_segments box replays it again while
# the window stays live; View -> What if closes it.
xdotool windowfocus "$window" 2>/dev/null || true
import -window root "$work/before-whatif.png"
xdotool mousemove 56 12 click 1
sleep 1
xdotool mousemove 150 268 click 1
sleep 5
import -window root "$work/whatif.png"
changed="$(compare -metric AE "$work/before-whatif.png" "$work/whatif.png" null: 2>&1 || true)"
if awk -v n="${changed%% *}" 'BEGIN { exit !(n + 0 < 20000) }'; then
    echo "gui-smoke: View -> What if changed only $changed pixels: no What-if panel" >&2
    exit 1
fi
xdotool mousemove 1066 157 click 1
sleep 4
kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app died replaying a what-if:" >&2; cat "$work/app.log" >&2; exit 1; }
import -window root "$work/whatif-expandable.png"
toggled="$(compare -metric AE "$work/whatif.png" "$work/whatif-expandable.png" null: 2>&1 || true)"
if awk -v n="${toggled%% *}" 'BEGIN { exit !(n + 0 < 2000) }'; then
    echo "gui-smoke: the expandable_segments box changed only $toggled pixels" >&2
    exit 1
fi
xdotool mousemove 56 12 click 1
sleep 1
xdotool mousemove 150 268 click 1
sleep 2
echo "gui-smoke: View -> What if opened its panel ($changed pixels changed), a setting replayed ($toggled pixels changed)"

# Ctrl+O: a dialog appears (the screen changes) although no portal runs.
xdotool windowfocus "$window" 2>/dev/null || true
import -window root "$work/before-open.png"
xdotool key ctrl+o
sleep 2
import -window root "$work/open-dialog.png"
changed="$(compare -metric AE "$work/before-open.png" "$work/open-dialog.png" null: 2>&1 || true)"
if [ "${changed%% *}" -lt 20000 ] 2>/dev/null; then
    echo "gui-smoke: Ctrl+O changed only $changed pixels: no dialog appeared" >&2
    exit 1
fi
# memsight's browser is centred, 640x420, its File field 44 px above its bottom edge.
xdotool mousemove 700 596 click 1
sleep 0.5
xdotool type --delay 40 snap.pkl
xdotool key Return
opened=""
for _ in $(seq 30); do
    grep -q "snap.pkl" "$work/config/memsight/recent" 2>/dev/null && { opened=1; break; }
    sleep 1
done
[ -n "$opened" ] || { echo "gui-smoke: snap.pkl was not opened through the dialog" >&2; cat "$work/app.log" >&2; exit 1; }
sleep 3

# File -> Export chart as PNG… (the menu's sixth row), then Enter in the dialog's File field
# (the suggested name).
xdotool mousemove 18 12 click 1
sleep 1
xdotool mousemove 80 140 click 1
sleep 2
xdotool mousemove 700 596 click 1
sleep 0.5
xdotool key End Return
png="$work/snap-device0-timeline.png"
for _ in $(seq 20); do
    [ -s "$png" ] && break
    sleep 1
done
[ -s "$png" ] || { echo "gui-smoke: the chart export wrote no $png" >&2; ls -la "$work" >&2; exit 1; }
size="$(identify -format '%wx%h' "$png")"
kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app died during open/export:" >&2; cat "$work/app.log" >&2; exit 1; }
echo "gui-smoke: Ctrl+O showed a dialog without a portal ($changed pixels changed), opened snap.pkl through it, exported the chart ($size PNG)"

# File -> Compare with… (below the exports) -> the other open file: a compare tab of snap.pkl (A)
# and 内存快照.pkl (B); then Ctrl+E exports the compare view under both names.
import -window root "$work/before-compare.png"
xdotool mousemove 18 12 click 1
sleep 1
xdotool mousemove 60 195
sleep 1
xdotool mousemove 200 195
sleep 0.3
xdotool mousemove 280 195 click 1
sleep 5
import -window root "$work/compare.png"
changed="$(compare -metric AE "$work/before-compare.png" "$work/compare.png" null: 2>&1 || true)"
# (ImageMagick may print a large count as 1.0e+06: compared as a number, not as text.)
if awk -v n="${changed%% *}" 'BEGIN { exit !(n + 0 < 100000) }'; then
    echo "gui-smoke: File -> Compare with… changed only $changed pixels: no compare tab" >&2
    exit 1
fi
xdotool windowfocus "$window" 2>/dev/null || true
xdotool key ctrl+e
sleep 2
xdotool mousemove 700 596 click 1
sleep 0.5
xdotool key End Return
png="$work/snap-vs-内存快照-compare-chart.png"
for _ in $(seq 20); do
    [ -s "$png" ] && break
    sleep 1
done
[ -s "$png" ] || { echo "gui-smoke: the compare export wrote no $png" >&2; ls -la "$work" >&2; exit 1; }
kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app died in the compare tab:" >&2; cat "$work/app.log" >&2; exit 1; }
echo "gui-smoke: File -> Compare with… opened a compare tab ($changed pixels changed), exported it ($(identify -format '%wx%h' "$png") PNG)"

# An msMemScope recording: the app started on a folder as msMemScope writes it.
kill "$app" 2>/dev/null || true
wait "$app" 2>/dev/null || true
recording="$work/中文目录/训练记录"
"$bin" gen --format memscope --devices 2 --events 30000 -o "$recording" 2>/dev/null
(cd "$work" && exec "$bin" "$recording") >"$work/app-memscope.log" 2>&1 &
app=$!
await_window "$work/app-memscope.log" "the msMemScope recording"
xdotool windowfocus "$window" 2>/dev/null || true
import -window root "$work/memscope.png"
# View -> colour by owner (the row below "category"), then View -> Memory by owner (the last row).
xdotool mousemove 56 12 click 1
sleep 1
xdotool mousemove 120 181 click 1
sleep 1
xdotool key Escape
sleep 2
import -window root "$work/memscope-owner-colours.png"
recoloured="$(compare -metric AE "$work/memscope.png" "$work/memscope-owner-colours.png" null: 2>&1 || true)"
if awk -v n="${recoloured%% *}" 'BEGIN { exit !(n + 0 < 20000) }'; then
    echo "gui-smoke: View -> colour by owner changed only $recoloured pixels" >&2
    exit 1
fi
xdotool mousemove 56 12 click 1
sleep 1
xdotool mousemove 150 313 click 1
sleep 1
xdotool key Escape
sleep 3
import -window root "$work/memscope-owners.png"
changed="$(compare -metric AE "$work/memscope-owner-colours.png" "$work/memscope-owners.png" null: 2>&1 || true)"
if awk -v n="${changed%% *}" 'BEGIN { exit !(n + 0 < 20000) }'; then
    echo "gui-smoke: View -> Memory by owner changed only $changed pixels: no window" >&2
    exit 1
fi
kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app died on the msMemScope recording:" >&2; cat "$work/app-memscope.log" >&2; exit 1; }
echo "gui-smoke: an msMemScope folder opened; colour by owner ($recoloured pixels changed), Memory by owner ($changed pixels changed)"

# The pool follows segment steps (issue 22). The app writes what each click did to
# MEMSIGHT_UI_LOG (one line per change: the selected event, its action and address, the pinned
# block, the segment the pool outlines and whether it is in view).
start_logged() {  # FILE LOG: the app on FILE, logging to LOG; sets $app and $window
    kill "$app" 2>/dev/null || true
    wait "$app" 2>/dev/null || true
    (cd "$work" && MEMSIGHT_UI_LOG="$2" exec "$bin" "$1") >"$work/app-steps.log" 2>&1 &
    app=$!
    await_window "$work/app-steps.log" "$1"
    # The pointer rests on the findings panel (no tooltip over the chart); the keys go to the window.
    xdotool mousemove 120 500
    xdotool windowfocus "$window" 2>/dev/null || true
}
last_line() { tail -1 "$1" 2>/dev/null || true; }

# 1. Expandable segments on an NPU file: ] steps to each segment_map, and the pool outlines the
# range just mapped, in view. The corpus file where present, else a generated expandable run.
fixtures="${MEMSIGHT_FIXTURES:-../shared/fixtures}"
expandable="$fixtures/snapshots/npu_snapshot_expandable.pkl"
if [ ! -f "$expandable" ]; then
    expandable="$work/expandable.pkl"
    "$bin" gen --scenario expandable --events 20000 -o "$expandable" 2>/dev/null
fi
expandable="$(realpath "$expandable")"
log="$work/steps-expandable.log"
start_logged "$expandable" "$log"
for k in 1 2 3; do
    xdotool key bracketright
    sleep 1.5
    line="$(last_line "$log")"
    case "$line" in
        *"action=segment_map "*) ;;
        *) echo "gui-smoke: ] (step $k) did not land on a segment_map: $line" >&2; exit 1 ;;
    esac
    case "$line" in
        *"outlined=0x"*"(hidden)"*|*"outlined=none"*) echo "gui-smoke: the segment_map of step $k is not outlined in view: $line" >&2; exit 1 ;;
    esac
    # The event list shows the event stepped to (it lagged one step behind until the pointer
    # moved, issue 36).
    event="$(sed -n 's/.* event=\([0-9]*\) .*/\1/p' <<<"$line")"
    case "$line" in
        *" list=$event "*) ;;
        *) echo "gui-smoke: after ] (step $k) the event list does not show event $event: $line" >&2; exit 1 ;;
    esac
done
import -window root "$work/segment-map-step.png"
echo "gui-smoke: ] steps through segment_map on $(basename "$expandable"), each outlined in view and shown by the event list: $line"

# 1b. The Segments tab (beside Pool and Blocks under the chart of the 1400x860 window): a band
# clicked brings the Pool tab forward after the event that reserved that range, nothing pinned,
# and the pool outlines the range (range=ADDRESS+BYTES), in view.
xdotool mousemove 1120 613 click 1
sleep 2
xdotool mousemove 1210 750 click 1
sleep 2
xdotool mousemove 120 500
sleep 1
line="$(last_line "$log")"
case "$line" in
    *"pinned=none range=0x"*"outlined=0x"*) ;;
    *) echo "gui-smoke: a band clicked in the Segments tab outlined no range in the pool: $line" >&2; exit 1 ;;
esac
case "$line" in
    *"(hidden)"*) echo "gui-smoke: the range clicked in the Segments tab is outlined out of view: $line" >&2; exit 1 ;;
esac
import -window root "$work/segments-click.png"
echo "gui-smoke: a band clicked in the Segments tab: the Pool tab outlines its range: $line"

# 2. A block pinned, then [ to the segment_alloc before it: the pool outlines that segment (the
# event's address), not the pinned block's. A click on the chart picks a late event; the Blocks
# tab lists the blocks live then, largest first; a click on the first row pins it.
log="$work/steps-pinned.log"
start_logged "$snapshot" "$log"
# (Positions in the 1400x860 window: the Blocks and Pool tabs above the pool, the table's first row.)
xdotool mousemove 1200 200 click 1
sleep 2
xdotool mousemove 1048 613 click 1
sleep 2
xdotool mousemove 1000 696 click 1
sleep 2
pinned="$(last_line "$log")"
case "$pinned" in
    *"pinned=none"*|"") echo "gui-smoke: a click on the Blocks table pinned nothing: $pinned" >&2; exit 1 ;;
esac
xdotool mousemove 993 613 click 1
sleep 2
xdotool mousemove 120 500
xdotool key bracketleft
sleep 2
line="$(last_line "$log")"
case "$line" in
    *"action=segment_alloc "*) ;;
    *) echo "gui-smoke: [ after pinning did not land on a segment_alloc: $line" >&2; exit 1 ;;
esac
event_addr="$(sed -n 's/.* event_addr=\(0x[0-9a-f]*\) .*/\1/p' <<<"$line")"
outlined="$(sed -n 's/.* outlined=\([^ ]*\)$/\1/p' <<<"$line")"
if [ "$outlined" != "$event_addr" ] || grep -q "pinned=none" <<<"$line"; then
    echo "gui-smoke: with a block pinned, the pool outlines $outlined, not the new segment $event_addr: $line" >&2
    exit 1
fi
import -window root "$work/segment-alloc-pinned.png"
kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app died stepping segments:" >&2; cat "$work/app-steps.log" >&2; exit 1; }
echo "gui-smoke: with a block pinned, [ went to a segment_alloc and the pool outlines it in view: $line"

# Ten tabs at 900x600: the tab bar scrolls, and Ctrl+Tab reaches every tab, the last included
# (the window's title names the tab shown).
kill "$app" 2>/dev/null || true
wait "$app" 2>/dev/null || true
tabs=()
for k in $(seq -w 1 10); do
    "$bin" gen --scenario steady --events 2000 --seed "$k" -o "$work/tab$k.pkl" 2>/dev/null
    tabs+=("$work/tab$k.pkl")
done
(cd "$work" && exec "$bin" "${tabs[@]}") >"$work/app-tabs.log" 2>&1 &
app=$!
await_window "$work/app-tabs.log" "ten files"
xdotool windowsize "$window" 900 600
sleep 3
xdotool mousemove 450 300
xdotool windowfocus "$window" 2>/dev/null || true
shown_tab() { sed -n 's/.*\(tab[0-9]*\.pkl\).*/\1/p' <<<"$(xdotool getwindowname "$window")"; }
# To the first tab (Ctrl+Tab wraps from the last), then through all ten in their order.
for _ in $(seq 10); do
    [ "$(shown_tab)" = "tab01.pkl" ] && break
    xdotool key ctrl+Tab
    sleep 1
done
[ "$(shown_tab)" = "tab01.pkl" ] || { echo "gui-smoke: Ctrl+Tab never showed the first tab (shown: $(shown_tab))" >&2; exit 1; }
seen=("tab01.pkl")
for _ in $(seq 9); do
    xdotool key ctrl+Tab
    sleep 1.5
    seen+=("$(shown_tab)")
done
expected="tab01.pkl tab02.pkl tab03.pkl tab04.pkl tab05.pkl tab06.pkl tab07.pkl tab08.pkl tab09.pkl tab10.pkl"
[ "${seen[*]}" = "$expected" ] || { echo "gui-smoke: Ctrl+Tab went ${seen[*]}, not $expected" >&2; exit 1; }
import -window root "$work/ten-tabs-900x600.png"
kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app died with ten tabs:" >&2; cat "$work/app-tabs.log" >&2; exit 1; }
echo "gui-smoke: ten tabs at 900x600; Ctrl+Tab went ${seen[*]}"

# A run: a folder of snapshots, one per rank and dump, in a Chinese folder, given on the command
# line, opens as a run tab (its title says so) at the screen's 1400×900 and stays drawn at 900×600;
# a double click on a cell of the heat map opens that rank's file in a tab of its own.
run_dir="$work/中文目录/八卡训练"
"$bin" gen --run --ranks 8 --iterations 2 -o "$run_dir" 2>/dev/null
kill "$app" 2>/dev/null || true
wait "$app" 2>/dev/null || true
(cd "$work" && exec "$bin" "$run_dir") >"$work/app-run.log" 2>&1 &
app=$!
await_window "$work/app-run.log" "$run_dir"
title="$(xdotool getwindowname "$window")"
case "$title" in
    *"八卡训练 (run)"*) ;;
    *) echo "gui-smoke: the run folder did not open as a run tab: the title is $title" >&2; exit 1 ;;
esac
for size in "1400 900" "900 600"; do
    # shellcheck disable=SC2086
    xdotool windowsize "$window" $size
    sleep 3
    import -window root "$work/run-${size/ /x}.png"
    colours="$(convert "$work/run-${size/ /x}.png" -format %k info:)"
    if [ "$colours" -lt 50 ]; then
        echo "gui-smoke: the run tab at ${size/ /×} has $colours colours: nothing drawn?" >&2
        exit 1
    fi
done
# The heat map's first cell (rank 0 at the first dump), below the controls: at 900×600 the
# controls take two lines. Double-click opens its file.
xdotool windowfocus "$window" 2>/dev/null || true
xdotool mousemove 130 145 click --repeat 2 --delay 80 1
for _ in $(seq 30); do
    title="$(xdotool getwindowname "$window")"
    [[ "$title" == *"rank0_memory_snapshot.pickle"* ]] && break
    sleep 1
done
[[ "$title" == *"rank0_memory_snapshot.pickle"* ]] || { echo "gui-smoke: a double-click on the heat map opened no file (title: $title)" >&2; exit 1; }
kill -0 "$app" 2>/dev/null || { echo "gui-smoke: the app died in the run tab:" >&2; cat "$work/app-run.log" >&2; exit 1; }
echo "gui-smoke: a run folder opened as a run tab at 1400×900 and 900×600; a double-click opened $title"

#!/usr/bin/env bash
# The real window on a large snapshot (issue 36): seconds from launch to the first chart on
# screen, and from a wheel step over the chart to a changed picture, measured from the outside
# (screenshots of the chart's area under Xvfb, as a user sees it), side by side with an older
# binary. Runs alternate between the binaries; medians are printed with their ratio.
#
# Usage: scripts/bench-window.sh [SCRATCH_DIR]
#   MEMSIGHT=path/to/memsight (default target/release/memsight), OLD=path/to/older/memsight,
#   EVENTS=5000000 (a `gen --scenario transformer` file of that many events), RUNS=3,
#   WHEELS=4 (wheel steps per run).
# Needs Xvfb, xdotool and ImageMagick (scripts/install-deps.sh --gui-tests). The screenshot
# loop polls every ~0.1 s plus the time `import` takes (about 0.05–0.1 s here): figures are
# within that.
set -euo pipefail
bin=${MEMSIGHT:-target/release/memsight}
old=${OLD:-}
events=${EVENTS:-5000000}
runs=${RUNS:-3}
wheels=${WHEELS:-4}
dir=${1:-$(mktemp -d)}
mkdir -p "$dir"
for tool in Xvfb xdotool import compare; do
    command -v "$tool" >/dev/null || { echo "bench-window: $tool missing" >&2; exit 1; }
done
file="$dir/transformer-$events.pickle"
[ -s "$file" ] || "$bin" gen --scenario transformer --events "$events" --seed 7 -o "$file" >/dev/null
echo "file: $file, $(($(stat -c %s "$file") / 1048576)) MB, $events events"
display=":$((70 + RANDOM % 9))"
Xvfb "$display" -screen 0 1400x900x24 -noreset >"$dir/xvfb.log" 2>&1 &
xvfb=$!
app=""
cleanup() {
    [ -n "$app" ] && kill "$app" 2>/dev/null || true
    kill "$xvfb" 2>/dev/null || true
}
trap cleanup EXIT
export DISPLAY="$display" WGPU_BACKEND=gl
sleep 2
# The chart's area in the 1400x860 window (left of it the findings, below it the event list).
crop=800x300+450+120
now() { date +%s.%N; }
shot() { import -window root -crop "$crop" +repage "$1" 2>/dev/null; }
: >"$dir/times.txt"
one_run() {  # NAME BINARY: first chart, then $wheels wheel steps; appends to times.txt
    local name=$1 binary=$2 start t covered black changed
    cat "$file" >/dev/null
    start=$(now)
    "$binary" "$file" >"$dir/app-$name.log" 2>&1 &
    app=$!
    # First chart: a tenth of the chart's area covered by bands (darker than 78 % grey; the
    # loading screen and "laying out…" over the step shading are lighter).
    for _ in $(seq 600); do
        shot "$dir/first.png"
        covered=$(convert "$dir/first.png" -colorspace Gray -threshold 78% -format '%[fx:1-mean]' info: 2>/dev/null || echo 0)
        # (Before the window maps, the screen is black: not a chart.)
        black=$(convert "$dir/first.png" -colorspace Gray -threshold 3% -format '%[fx:1-mean]' info: 2>/dev/null || echo 1)
        awk -v c="$covered" -v b="$black" 'BEGIN { exit !(c > 0.1 && b < 0.2) }' && break
        sleep 0.1
    done
    t=$(awk -v a="$(now)" -v b="$start" 'BEGIN { printf "%.3f", a - b }')
    awk -v c="$covered" -v b="$black" 'BEGIN { exit !(c > 0.1 && b < 0.2) }' || { echo "bench-window: $name drew no chart in 60 s" >&2; exit 1; }
    echo "$name first_chart $t" >>"$dir/times.txt"
    xdotool mousemove 850 270
    sleep 4
    for k in $(seq "$wheels"); do
        shot "$dir/before.png"
        start=$(now)
        # Alternately in and out: every step changes the picture.
        if [ $((k % 2)) -eq 1 ]; then xdotool click 4; else xdotool click 5; fi
        for _ in $(seq 300); do
            shot "$dir/after.png"
            changed=$(compare -metric AE "$dir/before.png" "$dir/after.png" null: 2>&1 || true)
            awk -v n="${changed%% *}" 'BEGIN { exit !(n + 0 > 2000) }' && break
            sleep 0.05
        done
        t=$(awk -v a="$(now)" -v b="$start" 'BEGIN { printf "%.3f", a - b }')
        echo "$name wheel_step $t" >>"$dir/times.txt"
        sleep 2
    done
    kill "$app" 2>/dev/null || true
    wait "$app" 2>/dev/null || true
    app=""
}
for _ in $(seq "$runs"); do
    one_run memsight "$bin"
    if [ -n "$old" ]; then one_run old "$old"; fi
done
python3 - "$dir/times.txt" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, what, seconds = line.split()
    runs.setdefault((name, what), []).append(float(seconds))
names = sorted({n for n, _ in runs}, key=lambda n: n != "memsight")
print(f"{'':10} {'first chart s (median, runs)':>34} {'wheel step s (median, steps)':>34}")
for n in names:
    cells = []
    for what in ("first_chart", "wheel_step"):
        v = runs.get((n, what), [])
        cells.append(f"{statistics.median(v):6.2f} ({', '.join(f'{x:.2f}' for x in v)})" if v else "-")
    print(f"{n:10} {cells[0]:>34} {cells[1]:>34}")
if "old" in names:
    for what in ("first_chart", "wheel_step"):
        a, b = runs[("memsight", what)], runs[("old", what)]
        print(f"memsight / old, {what}: {statistics.median(a) / statistics.median(b):.2f}x")
EOF

#!/usr/bin/env bash
# msMemScope reading speed (issue 35): `memsight stats` on a generated 1 M-row recording (one
# device), side by side with Python's `csv` module merely reading its rows and, where OLD is
# given, an older memsight binary. Five alternating runs; medians of wall time, user + system
# CPU and peak RSS, and the ratios. Where PHASES is given (the `memscope_phases` example), its
# time for reading the rows alone (the reader: split, parsed, in memory) is taken in the same
# rounds and set against Python's reading.
#
# Usage: scripts/bench-memscope.sh [SCRATCH_DIR]
#   MEMSIGHT=path/to/memsight (default target/release/memsight), OLD=path/to/older/memsight,
#   PHASES=target/release/examples/memscope_phases, OLD_PHASES=an older build of it,
#   ROWS=1000000.
set -euo pipefail
bin=${MEMSIGHT:-target/release/memsight}
old=${OLD:-}
phases=${PHASES:-}
old_phases=${OLD_PHASES:-}
rows=${ROWS:-1000000}
dir=${1:-$(mktemp -d)}
rec="$dir/recording"
rm -rf "$rec"
"$bin" gen --format memscope --devices 1 --events "$rows" --seed 1 -o "$rec" > /dev/null
csv=$(find "$rec" -name 'memscope_dump_*.csv' | head -1)
echo "recording: $csv, $(($(stat -c %s "$csv") / 1048576)) MB, $(($(wc -l < "$csv"))) lines"
cat > "$dir/read.py" <<'EOF'
import csv, sys
n = 0
with open(sys.argv[1], newline="", encoding="utf-8", errors="replace") as f:
    for _ in csv.reader(f):
        n += 1
print(n)
EOF
# Warm the page cache, so every contender reads from memory.
cat "$csv" > /dev/null
: > "$dir/times.txt"
: > "$dir/reader.txt"
run() {  # NAME COMMAND...: one timed run, "NAME wall cpu rss_kb" appended
  local name=$1
  shift
  /usr/bin/time -f "$name %e %U %S %M" -a -o "$dir/times.txt" "$@" > /dev/null
}
for _ in 1 2 3 4 5; do
  run memsight "$bin" stats "$rec"
  if [ -n "$old" ]; then run old "$old" stats "$rec"; fi
  run python-csv python3 "$dir/read.py" "$csv"
  if [ -n "$phases" ]; then
    "$phases" "$rec" 1 | awk '/read rows/ {print "reader", $3}' >> "$dir/reader.txt"
  fi
  if [ -n "$old_phases" ]; then
    "$old_phases" "$rec" 1 | awk '/read rows/ {print "old-reader", $3}' >> "$dir/reader.txt"
  fi
done
python3 - "$dir/times.txt" "$dir/reader.txt" <<'EOF'
import statistics, sys
readers = {}
for line in open(sys.argv[2]):
    name, wall = line.split()
    readers.setdefault(name, []).append(float(wall))
runs = {}
for line in open(sys.argv[1]):
    name, wall, user, system, rss = line.split()
    runs.setdefault(name, []).append((float(wall), float(user) + float(system), int(rss)))
m = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in runs.items()}
print(f"{'':11} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12}")
for k, (w, c, r) in m.items():
    print(f"{k:11} {w:8.2f} {c:8.2f} {r / 1024:12.0f}")
w, c, r = m["memsight"]
print(f"memsight / python-csv: wall {w / m['python-csv'][0]:.2f}x, CPU {c / m['python-csv'][1]:.2f}x")
for name, walls in readers.items():
    reading = statistics.median(walls)
    print(f"{name:11} {reading:8.3f} s reading the rows (median of {len(walls)}): "
          f"{reading / m['python-csv'][0]:.2f}x python-csv's wall time")
if "old" in m:
    print(f"memsight / old: wall {w / m['old'][0]:.2f}x, CPU {c / m['old'][1]:.2f}x, "
          f"peak RSS {r / m['old'][2]:.2f}x")
EOF

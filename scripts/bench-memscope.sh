#!/usr/bin/env bash
# msMemScope reading speed (issue 35): `memsight stats` on a generated 1 M-row recording (one
# device), side by side with Python's `csv` module merely reading its rows and, where OLD is
# given, an older memsight binary. Five alternating runs; medians of wall time, user + system
# CPU and peak RSS, and the ratios.
#
# Usage: scripts/bench-memscope.sh [SCRATCH_DIR]
#   MEMSIGHT=path/to/memsight (default target/release/memsight), OLD=path/to/older/memsight,
#   ROWS=1000000.
set -euo pipefail
bin=${MEMSIGHT:-target/release/memsight}
old=${OLD:-}
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
run() {  # NAME COMMAND...: one timed run, "NAME wall cpu rss_kb" appended
  local name=$1
  shift
  /usr/bin/time -f "$name %e %U %S %M" -a -o "$dir/times.txt" "$@" > /dev/null
}
for _ in 1 2 3 4 5; do
  run memsight "$bin" stats "$rec"
  if [ -n "$old" ]; then run old "$old" stats "$rec"; fi
  run python-csv python3 "$dir/read.py" "$csv"
done
awk '
  { wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " ($3 + $4); rss[$1] = rss[$1] " " $5 }
  function median(list,   a, n) { n = split(list, a, " "); asort(a); return a[int((n + 1) / 2)] }
  END {
    printf "%-11s %10s %10s %12s\n", "", "wall s", "CPU s", "peak RSS MB"
    for (k in wall) {
      w[k] = median(wall[k]); c[k] = median(cpu[k]); r[k] = median(rss[k])
      printf "%-11s %10.2f %10.2f %12.0f\n", k, w[k], c[k], r[k] / 1024
    }
    printf "memsight / python-csv: wall %.2fx, CPU %.2fx\n", w["memsight"] / w["python-csv"], c["memsight"] / c["python-csv"]
    if ("old" in w) printf "memsight / old: wall %.2fx, CPU %.2fx, peak RSS %.2fx\n", w["memsight"] / w["old"], c["memsight"] / c["old"], r["memsight"] / r["old"]
  }' "$dir/times.txt"

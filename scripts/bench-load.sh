#!/usr/bin/env bash
# Opening a snapshot, phase by phase (issue 37), side by side with an older commit: the
# `load_phases` example (read, unpickle, replay, the figures of `stats`, drop; medians) built
# here and, where OLD is given, the same example built at the older commit (the example uses
# only what d134d23 already had public: copy it into that checkout and build it there).
# The two binaries alternate, three times, each run taking the median of RUNS loads.
#
# Usage: scripts/bench-load.sh [FILE...]
#   NEW=target/release/examples/load_phases, OLD=path/to/older/load_phases, RUNS=3.
#   Without files: a generated `transformer` snapshot of 1 M events (scratch dir: $SCRATCH or a
#   temporary one), written with MEMSIGHT=target/release/memsight.
set -euo pipefail
new=${NEW:-target/release/examples/load_phases}
old=${OLD:-}
runs=${RUNS:-3}
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    dir=${SCRATCH:-$(mktemp -d)}
    mkdir -p "$dir"
    files=("$dir/transformer-1m.pickle")
    [ -s "${files[0]}" ] || "${MEMSIGHT:-target/release/memsight}" gen --scenario transformer \
        --events 1000000 --seed 7 -o "${files[0]}" >/dev/null 2>&1
fi
out=$(mktemp)
for file in "${files[@]}"; do
    cat "$file" >/dev/null
    for _ in 1 2 3; do
        "$new" "$file" "$runs" | sed "s|^|new\t$file\t|" >>"$out"
        if [ -n "$old" ]; then "$old" "$file" "$runs" | sed "s|^|old\t$file\t|" >>"$out"; fi
    done
done
python3 - "$out" <<'EOF'
import collections, re, statistics, sys
seconds = collections.defaultdict(list)
peak = collections.defaultdict(list)
files = []
for line in open(sys.argv[1]):
    who, file, text = line.rstrip("\n").split("\t", 2)
    if file not in files:
        files.append(file)
    m = re.match(r"\s*([\w ]+): ([0-9.]+) s$", text)
    if m:
        seconds[(file, m.group(1), who)].append(float(m.group(2)))
    m = re.match(r"\s*peak RSS: (\d+) kB", text)
    if m:
        peak[(file, who)].append(int(m.group(1)) / 1024)
phases = ["read", "unpickle", "replay", "stats", "drop", "sum"]
for file in files:
    print(f"\n{file}")
    print(f"{'phase':>10} {'new s':>8} {'old s':>8} {'new/old':>8}")
    for p in phases:
        n = seconds.get((file, p, "new"), [])
        o = seconds.get((file, p, "old"), [])
        nm = statistics.median(n) if n else float("nan")
        om = statistics.median(o) if o else float("nan")
        ratio = f"{nm / om:.2f}x" if o and om > 0 else "-"
        print(f"{p:>10} {nm:8.3f} {om:8.3f} {ratio:>8}")
    n, o = peak.get((file, "new"), []), peak.get((file, "old"), [])
    if n:
        print(f"{'peak MB':>10} {statistics.median(n):8.0f} {statistics.median(o) if o else float('nan'):8.0f}")
EOF
rm -f "$out"

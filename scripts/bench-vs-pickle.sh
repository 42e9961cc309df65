#!/usr/bin/env bash
# Issue 37's yardstick: opening a snapshot (unpickled while it is read, then replayed, as
# `memsight stats` and the app do) against Python's `pickle.load` of the same file, alternating
# ROUNDS times in one run (page cache warm). Each side runs in a fresh process; times are taken
# inside it (no interpreter or process start-up), peak memory is the process's high-water mark
# (memsight: after load + replay; Python: after `pickle.load`). Prints medians and ratios.
#
# Usage: scripts/bench-vs-pickle.sh FILE...
#   PHASES=target/release/examples/load_phases (cargo build --release -p memsight-core
#   --example load_phases), ROUNDS=7.
set -euo pipefail
phases=${PHASES:-target/release/examples/load_phases}
rounds=${ROUNDS:-7}
out=$(mktemp)
for file in "$@"; do
    cat "$file" >/dev/null
    for _ in $(seq "$rounds"); do
        "$phases" "$file" 1 --stream | sed "s|^|memsight\t$file\t|" >>"$out"
        python3 - "$file" <<'EOF' | sed "s|^|python\t$file\t|" >>"$out"
import pickle, resource, sys, time
with open(sys.argv[1], "rb") as f:
    t = time.perf_counter()
    pickle.load(f)
    print(f"pickle.load: {time.perf_counter() - t:.3f} s")
print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss} kB")
EOF
    done
done
python3 - "$out" <<'EOF'
import collections, re, statistics, sys
values = collections.defaultdict(list)
files = []
for line in open(sys.argv[1]):
    who, file, text = line.rstrip("\n").split("\t", 2)
    if file not in files:
        files.append(file)
    m = re.match(r"\s*([\w. ]+): ([0-9.]+) (s|kB)$", text)
    if m:
        values[(file, who, m.group(1).strip())].append(float(m.group(2)))
for file in files:
    v = lambda who, name: statistics.median(values[(file, who, name)])
    load = [a + b for a, b in zip(values[(file, "memsight", "unpickle")],
                                   values[(file, "memsight", "replay")])]
    load_s = statistics.median(load)
    py_s = v("python", "pickle.load")
    ours_mb = v("memsight", "peak RSS after replay") / 1024
    py_mb = v("python", "peak RSS") / 1024
    n = len(load)
    print(f"\n{file} ({n} rounds, medians)")
    print(f"  memsight load + replay: {load_s:.3f} s (unpickle {v('memsight', 'unpickle'):.3f} s, "
          f"replay {v('memsight', 'replay'):.3f} s), peak RSS {ours_mb:.0f} MB")
    print(f"  Python pickle.load:     {py_s:.3f} s, peak RSS {py_mb:.0f} MB")
    print(f"  ratio: time {load_s / py_s:.2f}x, memory {ours_mb / py_mb:.2f}x")
EOF
rm -f "$out"

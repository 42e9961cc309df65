#!/usr/bin/env bash
# Issue 37's yardstick: opening a snapshot (unpickled while it is read, then replayed, as
# `memsight stats` and the app do) against Python's `pickle.load` of the same file, alternating
# ROUNDS times in one run (page cache warm). Each side runs in a fresh process; times are taken
# inside it (no interpreter or process start-up), peak memory is the process's high-water mark
# (memsight: after load + replay; Python: after `pickle.load`). Prints medians and ratios.
#
# Usage: scripts/bench-vs-pickle.sh FILE...
#   PHASES=target/release/examples/load_phases (cargo build --release -p memsight-core
#   --example load_phases), ROUNDS=7; OLD_PHASES=the same example built at an older commit (copy
#   examples/load_phases.rs there) to alternate it too.
set -euo pipefail
phases=${PHASES:-target/release/examples/load_phases}
old_phases=${OLD_PHASES:-}
rounds=${ROUNDS:-7}
out=$(mktemp)
for file in "$@"; do
    cat "$file" >/dev/null
    for _ in $(seq "$rounds"); do
        "$phases" "$file" 1 --stream | sed "s|^|memsight\t$file\t|" >>"$out"
        if [ -n "$old_phases" ]; then
            "$old_phases" "$file" 1 --stream | sed "s|^|older\t$file\t|" >>"$out"
        fi
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
    py_s = v("python", "pickle.load")
    py_mb = v("python", "peak RSS") / 1024
    print(f"\n{file} ({len(values[(file, 'python', 'pickle.load')])} rounds, medians)")
    print(f"  Python pickle.load: {py_s:.3f} s, peak RSS {py_mb:.0f} MB")
    for who in ["memsight", "older"]:
        if not values[(file, who, "unpickle")]:
            continue
        load = sorted(a + b for a, b in zip(values[(file, who, "unpickle")],
                                            values[(file, who, "replay")]))
        load_s = statistics.median(load)
        ours_mb = v(who, "peak RSS after replay") / 1024
        print(f"  {who} load + replay: {load_s:.3f} s (range {load[0]:.3f}-{load[-1]:.3f} s; "
              f"unpickle {v(who, 'unpickle'):.3f} s, replay {v(who, 'replay'):.3f} s), "
              f"peak RSS {ours_mb:.0f} MB: time {load_s / py_s:.2f}x, memory "
              f"{ours_mb / py_mb:.2f}x pickle.load")
EOF
rm -f "$out"

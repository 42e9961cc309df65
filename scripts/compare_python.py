#!/usr/bin/env python3
"""Side-by-side: memsight loading and fully indexing a snapshot vs Python's pickle.load of the same
file, in the same run, interleaved; prints medians and ratios (wall time and peak memory).

    python3 scripts/compare_python.py [--events 1000000] [--runs 5] [--scenario steady]
    python3 scripts/compare_python.py --events 5000000 --runs 1 --memsight-only

The memsight side is `memsight stats FILE`: load, replay, checkpoints, report.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMSIGHT = os.path.join(ROOT, "target", "release", "memsight")
PYTHON_LOAD = ["python3", "-c", "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))"]


def measure(cmd):
    """Wall seconds and peak RSS (MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{cmd} failed with status {status}")
    return wall, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--scenario", default="steady")
    ap.add_argument("--memsight-only", action="store_true")
    args = ap.parse_args()

    subprocess.run(["cargo", "build", "--release", "-q", "--bin", "memsight"], cwd=ROOT, check=True)
    tmp = os.environ.get("TMPDIR", "/tmp")
    path = os.path.join(tmp, f"memsight-{args.scenario}-{args.events}.pickle")
    if not os.path.exists(path):
        subprocess.run([MEMSIGHT, "gen", "--scenario", args.scenario, "--events", str(args.events), "-o", path], check=True)
    print(f"file: {path} ({os.path.getsize(path) / 1e6:.1f} MB, {args.events} events)")

    ours, theirs = [], []
    for _ in range(args.runs):
        ours.append(measure([MEMSIGHT, "stats", path]))
        if not args.memsight_only:
            theirs.append(measure(PYTHON_LOAD + [path]))
    med = lambda runs, i: statistics.median(r[i] for r in runs)
    print(f"memsight stats (load + index): median {med(ours, 0):.3f} s, peak {med(ours, 1):.0f} MiB  (runs: "
          + ", ".join(f"{w:.3f}" for w, _ in ours) + ")")
    if theirs:
        print(f"python pickle.load:            median {med(theirs, 0):.3f} s, peak {med(theirs, 1):.0f} MiB  (runs: "
              + ", ".join(f"{w:.3f}" for w, _ in theirs) + ")")
        print(f"ratio memsight / python: time {med(ours, 0) / med(theirs, 0):.2f}x, peak memory {med(ours, 1) / med(theirs, 1):.2f}x")


if __name__ == "__main__":
    main()

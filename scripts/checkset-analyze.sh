#!/usr/bin/env bash
# Runs `memsight analyze` on every file of the doctor's check set (docs/check-set.md) into OUT_DIR,
# one text file per input, for an auditor to judge.
# Usage: scripts/checkset-analyze.sh OUT_DIR [MEMSIGHT_BINARY]
#   MEMSIGHT_FIXTURES   the real-file corpus (default ../shared/fixtures)
#   MEMSIGHT_CHECKSET   the fetched public files, first batch (default /work/checkset/public)
#   MEMSIGHT_CHECKSET2  the second batch (default /work/checkset/public2)
#   MEMSIGHT_CHECKSET3  the third batch (default /work/checkset/public3)
#   MEMSIGHT_CHECKSET4  the fourth batch (default /work/checkset/public4)
#   MEMSIGHT_CHECKSET5  the fifth batch (default /work/checkset/public5)
#   MEMSIGHT_CHECKSET6  the sixth batch (default /work/checkset/public6)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/checkset-analyze.sh OUT_DIR [MEMSIGHT_BINARY]}"
bin="${2:-target/debug/memsight}"
fixtures="${MEMSIGHT_FIXTURES:-../shared/fixtures}"
public="${MEMSIGHT_CHECKSET:-/work/checkset/public}"
public2="${MEMSIGHT_CHECKSET2:-/work/checkset/public2}"
public3="${MEMSIGHT_CHECKSET3:-/work/checkset/public3}"
public4="${MEMSIGHT_CHECKSET4:-/work/checkset/public4}"
public5="${MEMSIGHT_CHECKSET5:-/work/checkset/public5}"
public6="${MEMSIGHT_CHECKSET6:-/work/checkset/public6}"
mkdir -p "$out"
# The check set's rows: the fixture paths in the "Check set" table, the public files by name.
fixture_rows="$(sed -n '/^## Check set/,/^## How the check/p' docs/check-set.md |
    grep -oE '^\| (snapshots|profiler-more|profiler)/[^ |]+' | sed 's/^| //')"
public_rows="$(sed -n '/^## Check set/,/^## How the check/p' docs/check-set.md |
    grep -oE '^\| [A-Za-z0-9_]+\.pickle' | sed 's/^| //')"
for row in $fixture_rows; do
    name="$(echo "$row" | tr '/' '_')"
    "$bin" analyze "$fixtures/$row" > "$out/$name.txt" 2>&1 || true
done
for row in $public_rows; do
    if [ -f "$public/$row" ]; then
        "$bin" analyze "$public/$row" > "$out/public_$row.txt" 2>&1 || true
    elif [ -f "$public2/$row" ]; then
        "$bin" analyze "$public2/$row" > "$out/public2_$row.txt" 2>&1 || true
    elif [ -f "$public3/$row" ]; then
        "$bin" analyze "$public3/$row" > "$out/public3_$row.txt" 2>&1 || true
    elif [ -f "$public4/$row" ]; then
        "$bin" analyze "$public4/$row" > "$out/public4_$row.txt" 2>&1 || true
    elif [ -f "$public5/$row" ]; then
        "$bin" analyze "$public5/$row" > "$out/public5_$row.txt" 2>&1 || true
    elif [ -f "$public6/$row" ]; then
        "$bin" analyze "$public6/$row" > "$out/public6_$row.txt" 2>&1 || true
    else
        echo "missing: $public/$row (see docs/check-set.md for where to fetch it)" >&2
    fi
done
ls "$out" | wc -l

#!/usr/bin/env bash
# Runs `memsight analyze` on every file of the doctor's check set (docs/check-set.md) into OUT_DIR,
# one text file per input, for an auditor to judge.
# Usage: scripts/checkset-analyze.sh OUT_DIR [MEMSIGHT_BINARY]
#   MEMSIGHT_FIXTURES   the real-file corpus (default ../shared/fixtures)
#   MEMSIGHT_CHECKSET   the fetched public files, first batch (default /work/checkset/public)
#   MEMSIGHT_CHECKSETn  batch n, for n = 2..12 (default /work/checkset/publicn)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/checkset-analyze.sh OUT_DIR [MEMSIGHT_BINARY]}"
bin="${2:-target/debug/memsight}"
fixtures="${MEMSIGHT_FIXTURES:-../shared/fixtures}"
# Batch directories and the prefix their outputs get: public, public2, ..., public12.
batches=("public=${MEMSIGHT_CHECKSET:-/work/checkset/public}")
for n in 2 3 4 5 6 7 8 9 10 11 12; do
    var="MEMSIGHT_CHECKSET$n"
    batches+=("public$n=${!var:-/work/checkset/public$n}")
done
mkdir -p "$out"
# The check set's rows: the fixture paths in the "Check set" table, the public files by name.
fixture_rows="$(sed -n '/^## Check set/,/^## How the check/p' docs/check-set.md |
    grep -oE '^\| (snapshots|profiler-more|profiler)/[^ |]+' | sed 's/^| //')"
public_rows="$(sed -n '/^## Check set/,/^## How the check/p' docs/check-set.md |
    grep -oE '^\| [A-Za-z0-9_]+\.(pickle|pkl)' | sed 's/^| //')"
for row in $fixture_rows; do
    name="$(echo "$row" | tr '/' '_')"
    "$bin" analyze "$fixtures/$row" > "$out/$name.txt" 2>&1 || true
done
for row in $public_rows; do
    found=""
    for batch in "${batches[@]}"; do
        prefix="${batch%%=*}"
        dir="${batch#*=}"
        if [ -f "$dir/$row" ]; then
            "$bin" analyze "$dir/$row" > "$out/${prefix}_$row.txt" 2>&1 || true
            found=1
            break
        fi
    done
    [ -n "$found" ] || echo "missing: $row (see docs/check-set.md for where to fetch it)" >&2
done
ls "$out" | wc -l

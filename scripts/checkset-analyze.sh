#!/usr/bin/env bash
# Runs `memsight analyze` on every file of the doctor's check set (docs/check-set.md) into OUT_DIR,
# one text file per input, for an auditor to judge.
# Usage: scripts/checkset-analyze.sh OUT_DIR [MEMSIGHT_BINARY]
#   MEMSIGHT_FIXTURES   the real-file corpus (default ../shared/fixtures)
#   MEMSIGHT_CHECKSET   the fetched public files, first batch (default /work/checkset/public)
#   MEMSIGHT_CHECKSETn  batch n, for n = 2..15 (default /work/checkset/publicn);
#   MEMSIGHT_CHECKSET14H the fourteenth search's one file (default /work/checkset/public14h)
#   MEMSIGHT_CHECKSET16  batch 16, generated snapshots (default /work/checkset/synth16)
#   MEMSIGHT_CHECKSET17  batch 17, generated snapshots (default /work/checkset/synth17)
#   MEMSIGHT_CHECKSET18  batch 18, generated snapshots (default /work/checkset/synth18)
#   MEMSIGHT_CHECKSET19  batch 19, generated snapshots (default /work/checkset/synth19)
#   MEMSIGHT_CHECKSET20  batch 20, generated snapshots (default /work/checkset/synth20)
#   MEMSIGHT_CHECKSET21  batch 21, generated snapshots (default /work/checkset/synth21)
#   MEMSIGHT_CHECKSET22  batch 22, generated snapshots (default /work/checkset/synth22)
#   MEMSIGHT_CHECKSET23  batch 23, generated snapshots (default /work/checkset/synth23)
#   MEMSIGHT_CHECKSET24  batch 24, generated snapshots (default /work/checkset/synth24)
#   MEMSIGHT_CHECKSET25  batch 25, generated snapshots (default /work/checkset/synth25)
#   MEMSIGHT_CHECKSET26  batch 26, generated snapshots (default /work/checkset/synth26)
#   MEMSIGHT_CHECKSET27  batch 27, generated snapshots (default /work/checkset/synth27)
#   MEMSIGHT_CHECKSET28  batch 28, generated snapshots (default /work/checkset/synth28)
#   MEMSIGHT_CHECKSET29  batch 29, generated snapshots (default /work/checkset/synth29)
#   MEMSIGHT_CHECKSET30  batch 30, generated snapshots (default /work/checkset/synth30)
#   MEMSIGHT_CHECKSET31  batch 31, generated snapshots (default /work/checkset/synth31)
#   MEMSIGHT_CHECKSET32  batch 32, generated snapshots (default /work/checkset/synth32)
#   MEMSIGHT_CHECKSET33  batch 33, generated snapshots (default checkset/synth33, which
#                        `python3 checkset/synth33/gen/build.py` fills)
#   MEMSIGHT_CHECKSET34  batch 34, generated snapshots (default checkset/synth34, which
#                        `python3 checkset/synth34/gen/build.py` fills)
#   MEMSIGHT_CHECKSET35  batch 35, generated snapshots (default checkset/synth35, which
#                        `python3 checkset/synth35/gen/build.py` fills)
#   MEMSIGHT_CHECKSET36  batch 36, generated snapshots (default checkset/synth36, which
#                        `python3 checkset/synth36/gen/build.py` fills)
#   MEMSIGHT_CHECKSET37  batch 37, generated snapshots (default checkset/synth37, which
#                        `python3 checkset/synth37/gen/build.py` fills)
#   MEMSIGHT_CHECKSET38  batch 38, generated snapshots (default checkset/synth38, which
#                        `python3 checkset/synth38/gen/build.py` fills)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/checkset-analyze.sh OUT_DIR [MEMSIGHT_BINARY]}"
bin="${2:-target/debug/memsight}"
fixtures="${MEMSIGHT_FIXTURES:-../shared/fixtures}"
# Batch directories and the prefix their outputs get: public, public2, ..., public15.
batches=("public=${MEMSIGHT_CHECKSET:-/work/checkset/public}")
for n in 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
    var="MEMSIGHT_CHECKSET$n"
    batches+=("public$n=${!var:-/work/checkset/public$n}")
done
# The fourteenth search's one file, kept apart from its (empty) batch.
batches+=("public14h=${MEMSIGHT_CHECKSET14H:-/work/checkset/public14h}")
# Batch 16: generated snapshots (a helper's simulator, docs/check-set.md).
batches+=("synth16=${MEMSIGHT_CHECKSET16:-/work/checkset/synth16}")
batches+=("synth17=${MEMSIGHT_CHECKSET17:-/work/checkset/synth17}")
batches+=("synth18=${MEMSIGHT_CHECKSET18:-/work/checkset/synth18}")
batches+=("synth19=${MEMSIGHT_CHECKSET19:-/work/checkset/synth19}")
batches+=("synth20=${MEMSIGHT_CHECKSET20:-/work/checkset/synth20}")
batches+=("synth21=${MEMSIGHT_CHECKSET21:-/work/checkset/synth21}")
batches+=("synth22=${MEMSIGHT_CHECKSET22:-/work/checkset/synth22}")
batches+=("synth23=${MEMSIGHT_CHECKSET23:-/work/checkset/synth23}")
batches+=("synth24=${MEMSIGHT_CHECKSET24:-/work/checkset/synth24}")
batches+=("synth25=${MEMSIGHT_CHECKSET25:-/work/checkset/synth25}")
batches+=("synth26=${MEMSIGHT_CHECKSET26:-/work/checkset/synth26}")
batches+=("synth27=${MEMSIGHT_CHECKSET27:-/work/checkset/synth27}")
batches+=("synth28=${MEMSIGHT_CHECKSET28:-/work/checkset/synth28}")
batches+=("synth29=${MEMSIGHT_CHECKSET29:-/work/checkset/synth29}")
batches+=("synth30=${MEMSIGHT_CHECKSET30:-/work/checkset/synth30}")
batches+=("synth31=${MEMSIGHT_CHECKSET31:-/work/checkset/synth31}")
batches+=("synth32=${MEMSIGHT_CHECKSET32:-/work/checkset/synth32}")
batches+=("synth33=${MEMSIGHT_CHECKSET33:-checkset/synth33}")
batches+=("synth34=${MEMSIGHT_CHECKSET34:-checkset/synth34}")
batches+=("synth35=${MEMSIGHT_CHECKSET35:-checkset/synth35}")
batches+=("synth36=${MEMSIGHT_CHECKSET36:-checkset/synth36}")
batches+=("synth37=${MEMSIGHT_CHECKSET37:-checkset/synth37}")
batches+=("synth38=${MEMSIGHT_CHECKSET38:-checkset/synth38}")
mkdir -p "$out"
# The check set's rows: the fixture paths in the "Check set" table, the public files by name.
fixture_rows="$(sed -n '/^## Check set/,/^## How the check/p' docs/check-set.md |
    grep -oE '^\| (snapshots|profiler-more|profiler)/[^ |]+' | sed 's/^| //')"
# Public rows: snapshot files, and profiler rank folders (a name without an extension that is a
# folder of some batch; other rows of that shape are table headers).
public_rows="$(sed -n '/^## Check set/,/^## How the check/p' docs/check-set.md |
    grep -oE '^\| [A-Za-z0-9_]+(\.(pickle|pkl))? \|' | sed 's/^| //; s/ |$//')"
for row in $fixture_rows; do
    name="$(echo "$row" | tr '/' '_')"
    "$bin" analyze "$fixtures/$row" > "$out/$name.txt" 2>&1 || true
done
for row in $public_rows; do
    found=""
    for batch in "${batches[@]}"; do
        prefix="${batch%%=*}"
        dir="${batch#*=}"
        if [ -f "$dir/$row" ] || { [ -d "$dir/$row" ] && [ "$row" = "${row%.*}" ]; }; then
            "$bin" analyze "$dir/$row" > "$out/${prefix}_$row.txt" 2>&1 || true
            found=1
            break
        fi
    done
    if [ -z "$found" ] && [ "$row" != "${row%.*}" ]; then
        echo "missing: $row (see docs/check-set.md for where to fetch it)" >&2
    fi
done
ls "$out" | wc -l

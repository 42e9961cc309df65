#!/usr/bin/env bash
# Runs of many ranks (issue 34): time and peak memory of `memsight stats RUN --json` and
# `memsight analyze RUN --json` on generated runs of 64, 256 and 1,024 ranks (2 dumps each, small
# files), median of 3. Usage: scripts/bench-run.sh [SCRATCH_DIR]; MEMSIGHT=path/to/memsight.
set -euo pipefail
bin=${MEMSIGHT:-target/release/memsight}
dir=${1:-$(mktemp -d)}
# "SECONDS KB" of the median of three runs of memsight with these arguments.
median() {
  for _ in 1 2 3; do
    /usr/bin/time -f '%e %M' "$bin" "$@" > /dev/null 2>> "$dir/time.txt" || true
    tail -1 "$dir/time.txt"
  done | sort -n | sed -n 2p
}
printf '%-6s %-6s %-8s %-9s %-22s %-22s\n' ranks files size "MB/file" "stats: s, peak RSS" "analyze: s, peak RSS"
for ranks in 64 256 1024; do
  run="$dir/run$ranks"
  rm -rf "$run"
  "$bin" gen --run --ranks "$ranks" --iterations 2 --events 1000 -o "$run" 2>/dev/null
  files=$(find "$run" -name '*.pickle' | wc -l)
  bytes=$(find "$run" -name '*.pickle' -printf '%s\n' | awk '{s+=$1} END {print s}')
  stats=$(median stats "$run" --json)
  analyze=$(median analyze "$run" --json)
  printf '%-6s %-6s %-8s %-9s %-22s %-22s\n' "$ranks" "$files" "$((bytes / 1048576)) MB" \
    "$(awk -v b="$bytes" -v f="$files" 'BEGIN {printf "%.3f", b / f / 1048576}')" \
    "$(echo "$stats" | awk '{printf "%s s, %d MB", $1, $2 / 1024}')" \
    "$(echo "$analyze" | awk '{printf "%s s, %d MB", $1, $2 / 1024}')"
  rm -rf "$run"
done

# Real-sized files, where the corpus is: 64 and 256 ranks × 2 dumps, each rank a link to the same
# 3.9 MB training step (22,332 events), so only the reading counts.
fixture="${MEMSIGHT_FIXTURES:-../shared/fixtures}/snapshots/cuda_medium_512_training.pickle"
if [ -f "$fixture" ]; then
  fixture=$(realpath "$fixture")
  for ranks in 64 256; do
    run="$dir/real$ranks"
    rm -rf "$run"
    for it in 10 20; do
      mkdir -p "$run/iteration_$it"
      for ((r = 0; r < ranks; r++)); do
        ln -s "$fixture" "$run/iteration_$it/rank${r}_memory_snapshot.pickle"
      done
    done
    printf 'real files, %-4s ranks (%s files): analyze %s\n' "$ranks" "$((ranks * 2))" \
      "$(median analyze "$run" --json | awk '{printf "%s s, %d MB", $1, $2 / 1024}')"
    rm -rf "$run"
  done
  printf 'one such file alone: analyze %s\n' \
    "$(/usr/bin/time -f '%e %M' "$bin" analyze "$fixture" --json 2>&1 > /dev/null | tail -1 | awk '{printf "%s s, %d MB", $1, $2 / 1024}')"
fi

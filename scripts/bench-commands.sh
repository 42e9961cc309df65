#!/usr/bin/env bash
# Issue 37's "no other command slower": every command of two memsight binaries on the same files,
# alternating ROUNDS times in one run (page cache warm), wall time and peak RSS of each process
# (/usr/bin/time). Prints medians and the new / old ratios.
#
# Usage: NEW=target/release/memsight OLD=/path/to/old/memsight [ROUNDS=3] \
#          scripts/bench-commands.sh FILE OTHER_FILE
#   FILE: the snapshot every command reads; OTHER_FILE: the second recording of `diff`.
set -euo pipefail
new=${NEW:?NEW=the memsight binary to measure}
old=${OLD:?OLD=the memsight binary to compare with}
rounds=${ROUNDS:-3}
file=${1:?usage: bench-commands.sh FILE OTHER_FILE}
other=${2:?usage: bench-commands.sh FILE OTHER_FILE}
out=$(mktemp)
cat "$file" "$other" >/dev/null
commands=(
    "stats|stats $file"
    "analyze|analyze $file"
    "state|state $file --event 500000"
    "whatif|whatif $file"
    "diff|diff $file $other"
)
for _ in $(seq "$rounds"); do
    for entry in "${commands[@]}"; do
        name=${entry%%|*}
        args=${entry#*|}
        for who in new old; do
            bin=$new
            [ "$who" = old ] && bin=$old
            # shellcheck disable=SC2086 # the arguments are split on purpose
            /usr/bin/time -f "%e %M" -o "$out.one" "$bin" $args >/dev/null 2>&1 || true
            echo "$name $who $(cat "$out.one")" >>"$out"
        done
    done
done
python3 - "$out" <<'EOF'
import collections, statistics, sys
wall = collections.defaultdict(list)
rss = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    name, who, seconds, kb = line.split()
    if name not in order:
        order.append(name)
    wall[(name, who)].append(float(seconds))
    rss[(name, who)].append(int(kb) / 1024)
print(f"{'command':<9} {'new s':>7} {'old s':>7} {'ratio':>6} {'new MB':>7} {'old MB':>7} {'ratio':>6}")
for name in order:
    nw, ow = (statistics.median(wall[(name, w)]) for w in ("new", "old"))
    nm, om = (statistics.median(rss[(name, w)]) for w in ("new", "old"))
    print(f"{name:<9} {nw:7.2f} {ow:7.2f} {nw / ow:6.2f} {nm:7.0f} {om:7.0f} {nm / om:6.2f}")
EOF
rm -f "$out" "$out.one"

#!/usr/bin/env bash
# Builds the Python wheel — the native `memsight` program (the window and every command) and the
# `memsight` Python module — into target/wheels/ (the only wheel there afterwards).
#
#   scripts/build-wheel.sh          the wheel to hand to users: the `dist` profile, linked with
#                                   zig against glibc 2.17 (manylinux2014: any Linux of the last
#                                   ten years)
#   scripts/build-wheel.sh --quick  CI's: the `dev` profile the tests already built, stripped,
#                                   for this machine's glibc (seconds after `cargo test`)
#
# The build tools (maturin, zig) go into a virtual environment of their own, target/wheel-tools.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
case "${1:-}" in
    --quick) quick=true ;;
    "") ;;
    *) echo "usage: scripts/build-wheel.sh [--quick]" >&2; exit 2 ;;
esac

tools=target/wheel-tools
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
[ -x "$tools/bin/maturin" ] || "$tools/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2"
# Tested with ziglang 0.15.2 (maturin 1.16).
$quick || "$tools/bin/python" -c "import ziglang" 2>/dev/null \
    || "$tools/bin/pip" install --quiet --disable-pip-version-check "ziglang==0.15.2"

rm -rf target/wheels
if $quick; then
    "$tools/bin/maturin" build --profile dev --strip --out target/wheels
else
    # maturin finds zig through the ziglang package of its own environment.
    PATH="$PWD/$tools/bin:$PATH" "$tools/bin/maturin" build --profile dist --strip --zig \
        --compatibility manylinux2014 --out target/wheels
fi
ls -l target/wheels/*.whl

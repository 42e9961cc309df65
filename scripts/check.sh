#!/usr/bin/env bash
# Everything CI checks, in the order CI runs it. Run before committing: scripts/check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# egui_kittest renders with wgpu; the GL backend on Mesa's llvmpipe gives stable pixels without
# a GPU or a display.
export WGPU_BACKEND=gl

echo "== tests"
test_log="$(mktemp)"
# Tests that cannot run here (no corpus, no CJK font) append a line each: counted below.
MEMSIGHT_SKIP_LOG="$(mktemp)"
export MEMSIGHT_SKIP_LOG
trap 'rm -f "$test_log" "$MEMSIGHT_SKIP_LOG"' EXIT
cargo test --workspace 2>&1 | tee "$test_log"

echo "== the real window under Xvfb"
if command -v Xvfb >/dev/null && command -v xdotool >/dev/null && command -v import >/dev/null; then
    scripts/gui-smoke.sh target/debug/memsight
else
    echo "skipped: the real-window check needs xvfb xdotool imagemagick (scripts/install-deps.sh --gui-tests)"
    echo "gui-smoke: no Xvfb / xdotool / imagemagick" >> "$MEMSIGHT_SKIP_LOG"
fi

echo "== the Python wheel: built from the test build, installed in a fresh venv, its tests"
scripts/build-wheel.sh --quick
scripts/test-wheel.sh 2>&1 | tee -a "$test_log"

echo "== fmt"
cargo fmt --all -- --check

echo "== clippy"
cargo clippy --workspace --all-targets -- -D warnings

echo "== doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

echo "== the core has no UI crate in its dependency tree"
ui_crates='^(egui|eframe|egui_plot|egui_kittest|epaint|emath|ecolor|wgpu|winit|glow|glutin|rfd|accesskit)( |$)'
if cargo tree -p memsight-core -e normal,build --prefix none | grep -E "$ui_crates"; then
    echo "memsight-core depends on a UI crate (listed above): the core must know nothing of the screen" >&2
    exit 1
fi
echo "all checks passed"
# One closing line for the whole run: every test binary's counts and pytest's added up; a test
# that returned early because it could not run here counts as skipped, not passed.
skipped="$(wc -l < "$MEMSIGHT_SKIP_LOG")"
if [ "$skipped" -gt 0 ]; then
    echo "skipped tests (could not run here):"
    sed 's/^/  /' "$MEMSIGHT_SKIP_LOG"
fi
awk -v skipped="$skipped" '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     /^[0-9]+ (passed|failed|skipped)/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^skipped/) s += $i } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p - skipped, f, s + skipped }' "$test_log"

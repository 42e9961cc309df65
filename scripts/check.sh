#!/usr/bin/env bash
# Everything CI checks, in the order CI runs it. Run before committing: scripts/check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# egui_kittest renders with wgpu; the GL backend on Mesa's llvmpipe gives stable pixels without
# a GPU or a display.
export WGPU_BACKEND=gl

echo "== tests"
cargo test --workspace

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

//! Shared test helpers: where the real-file corpus is.

use std::path::PathBuf;

/// `../shared/fixtures` from the repository root, or `$MEMSIGHT_FIXTURES`.
pub fn fixtures_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MEMSIGHT_FIXTURES").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"),
        PathBuf::from,
    );
    if dir.join("snapshots").is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipped: corpus not found at {} (set MEMSIGHT_FIXTURES)",
            dir.display()
        );
        None
    }
}

/// A file or folder of the corpus (`kind`: `snapshots` or `profiler`), or `None` (with the skip
/// message) where the corpus is absent.
pub fn fixture(kind: &str, name: &str) -> Option<PathBuf> {
    fixtures_dir().map(|d| d.join(kind).join(name))
}

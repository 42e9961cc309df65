//! Shared test helpers: where the real-file corpus is.

use std::path::PathBuf;

pub use memsight_core::testing::fixtures_dir;

/// A file or folder of the corpus (`kind`: `snapshots` or `profiler`), or `None` (with the skip
/// message) where the corpus is absent.
pub fn fixture(kind: &str, name: &str) -> Option<PathBuf> {
    fixtures_dir().map(|d| d.join(kind).join(name))
}

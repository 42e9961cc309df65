//! For the project's own tests: where the real-file corpus is, and skips that show.
//!
//! A test that cannot run here (no corpus in a user's clone, no CJK font) calls [`skip`]: the
//! reason goes to stderr and, when `MEMSIGHT_SKIP_LOG` names a file, one line is appended there,
//! so `scripts/check.sh` counts skips in its closing line instead of passing them silently.

use std::io::Write as _;
use std::path::PathBuf;

/// Reports that the calling test did not run, and why.
pub fn skip(reason: &str) {
    eprintln!("skipped: {reason}");
    if let Some(log) = std::env::var_os("MEMSIGHT_SKIP_LOG")
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    {
        // One write per line: tests run in parallel, and appends of one write do not interleave.
        let line = format!(
            "{}: {reason}\n",
            std::thread::current().name().unwrap_or("?")
        );
        let _ = file.write_all(line.as_bytes());
    }
}

/// The real-file corpus: `$MEMSIGHT_FIXTURES`, else `../shared/fixtures` beside the repository;
/// `None` (and a [`skip`]) where it is absent.
pub fn fixtures_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MEMSIGHT_FIXTURES").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"),
        PathBuf::from,
    );
    if dir.join("snapshots").is_dir() {
        Some(dir)
    } else {
        skip(&format!(
            "corpus not found at {} (set MEMSIGHT_FIXTURES)",
            dir.display()
        ));
        None
    }
}

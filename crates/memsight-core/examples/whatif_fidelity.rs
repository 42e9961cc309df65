//! Fidelity of the what-if replay (issue 13, first part): for every snapshot given (or every
//! fixture snapshot), each device's trace replayed through the allocator model under the
//! recorded settings, next to what the file recorded; and the cross-check of the issue: the
//! `empty_cache` run replayed with expandable segments and without its releases, against the run
//! recorded with them. Release build:
//!
//! `cargo run --release -p memsight-core --example whatif_fidelity -- [FILE...]`

use std::path::PathBuf;

use memsight_core::whatif::{self, Recording, Settings};

fn main() {
    let mut files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if files.is_empty() {
        let Some(dir) = memsight_core::testing::fixtures_dir() else {
            eprintln!("no files given and no fixture corpus found");
            std::process::exit(2);
        };
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("snapshots"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        found.sort();
        files = found;
    }
    println!(
        "| file | device | settings | peak reserved: recorded / predicted (Δ) | segment allocs: recorded / predicted | segment frees: recorded / predicted | unused at peak: recorded / predicted | first divergence |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for path in &files {
        let loaded = match memsight_core::load_path(path, None) {
            Ok(snapshot) => memsight_core::Loaded::new(snapshot),
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                continue;
            }
        };
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        for (i, device) in loaded.snapshot.devices.iter().enumerate() {
            if device.trace.is_empty() {
                continue;
            }
            let recording = Recording::of(&loaded, i);
            let settings = Settings::recorded(&recording);
            let recorded = whatif::recorded(&recording);
            let predicted = whatif::predict(&recording, &settings);
            println!(
                "| {name} | {} | {} | {} / {} ({:+.1} %) | {} / {} | {} / {} | {} / {} | {} |",
                device.ordinal,
                settings.describe(),
                mib(recorded.peak_reserved_bytes),
                mib(predicted.peak_reserved_bytes),
                percent(predicted.peak_reserved_bytes, recorded.peak_reserved_bytes),
                recorded.segment_allocs,
                predicted.segment_allocs,
                recorded.segment_frees,
                predicted.segment_frees,
                mib(recorded.peak_fragmentation_bytes),
                mib(predicted.peak_fragmentation_bytes),
                predicted
                    .first_divergence_event
                    .map_or_else(|| "none".to_string(), |e| format!("event {e}")),
            );
        }
    }
    cross_check();
}

/// The cross-check: the run recorded without expandable segments and with `empty_cache`,
/// replayed with expandable segments and without its releases, against the same workload recorded
/// with them.
fn cross_check() {
    let Some(dir) = memsight_core::testing::fixtures_dir() else {
        return;
    };
    let load = |name: &str| {
        memsight_core::load_path(&dir.join("snapshots").join(name), None)
            .ok()
            .map(memsight_core::Loaded::new)
    };
    let (Some(plain), Some(expandable)) = (
        load("npu_snapshot_with_empty_cache.pkl"),
        load("npu_snapshot_expandable.pkl"),
    ) else {
        return;
    };
    let settings = Settings {
        expandable_segments: true,
        skip_releases: true,
        ..Settings::default()
    };
    let predicted = whatif::predict(&Recording::of(&plain, 0), &settings);
    let recorded = whatif::recorded(&Recording::of(&expandable, 0));
    println!(
        "\ncross-check: npu_snapshot_with_empty_cache.pkl with expandable segments and no releases \
         predicts {} peak reserved and {} segment_map; npu_snapshot_expandable.pkl recorded {} ({:+.1} %) and {}",
        mib(predicted.peak_reserved_bytes),
        predicted.segment_allocs,
        mib(recorded.peak_reserved_bytes),
        percent(predicted.peak_reserved_bytes, recorded.peak_reserved_bytes),
        recorded.segment_allocs
    );
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn percent(predicted: u64, recorded: u64) -> f64 {
    (predicted as f64 - recorded as f64) / (recorded as f64).max(1.0) * 100.0
}

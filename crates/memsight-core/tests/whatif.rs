//! The what-if replay's fidelity on real files (issue 13): the trace replayed through the
//! allocator model under the recorded settings must reproduce what the file recorded. The model is
//! also the generator's, so generated files prove nothing here: only real ones count.

mod common;

use memsight_core::whatif::{self, Settings};

/// Replays every traced device of the fixture `name` under its recorded settings and returns
/// (recorded, predicted) per device.
fn fidelity(name: &str) -> Option<Vec<(whatif::Outcome, whatif::Outcome)>> {
    let path = common::fixture("snapshots", name)?;
    let snapshot = memsight_core::load_path(&path, None).expect("the fixture loads");
    let loaded = memsight_core::Loaded::new(snapshot);
    Some(
        loaded
            .snapshot
            .devices
            .iter()
            .zip(&loaded.replays)
            .filter(|(d, _)| !d.trace.is_empty())
            .map(|(device, replay)| {
                let settings = Settings {
                    expandable_segments: whatif::recorded_expandable(device),
                    ..Settings::default()
                };
                (
                    whatif::recorded(device, replay),
                    whatif::predict(device, replay, &settings),
                )
            })
            .collect(),
    )
}

/// The bar: peak reserved within 1 %, segment allocations within 5 %.
fn assert_faithful(name: &str, recorded: &whatif::Outcome, predicted: &whatif::Outcome) {
    let off = |a: u64, b: u64| (a as f64 - b as f64).abs() / (b as f64).max(1.0);
    assert!(
        off(predicted.peak_reserved_bytes, recorded.peak_reserved_bytes) <= 0.01,
        "{name}: peak reserved {} predicted, {} recorded",
        predicted.peak_reserved_bytes,
        recorded.peak_reserved_bytes
    );
    assert!(
        off(predicted.segment_allocs, recorded.segment_allocs) <= 0.05
            || predicted.segment_allocs.abs_diff(recorded.segment_allocs) == 0,
        "{name}: {} segment allocations predicted, {} recorded",
        predicted.segment_allocs,
        recorded.segment_allocs
    );
}

#[test]
fn cuda_files_replay_as_recorded() {
    // Recorded figures, read from the files with Python's pickle: peak reserved (the replay's),
    // segment_alloc counts 152, 7, 638 and 0 (cuda_modern_compilectx's trace has none).
    for (name, segment_allocs) in [
        ("cuda_2023_no_time.pickle", 152),
        ("cuda_cppframes_snapshotevents.pickle", 7),
        ("cuda_ctx512_forward_mixed.pickle", 638),
        ("cuda_modern_compilectx.pickle", 0),
    ] {
        let Some(devices) = fidelity(name) else {
            memsight_core::testing::skip("corpus not found");
            return;
        };
        assert_eq!(devices.len(), 1, "{name}");
        let (recorded, predicted) = &devices[0];
        assert_eq!(recorded.segment_allocs, segment_allocs, "{name}");
        assert_faithful(name, recorded, predicted);
    }
}

/// `torch_npu`'s allocator differs from the model (not yet modelled: its segment sizes and page
/// size, workspace allocations): the replay is off by a few percent there. This test holds the
/// figures measured today so a change is seen; the bar is not met on these files yet.
#[test]
fn npu_files_replay_within_the_gap_measured_today() {
    for (name, peak_off_max, allocs_off_max) in [
        ("npu_snapshot_with_empty_cache.pkl", 0.03, 0.40),
        ("npu_snapshot_expandable.pkl", 0.05, 0.40),
    ] {
        let Some(devices) = fidelity(name) else {
            memsight_core::testing::skip("corpus not found");
            return;
        };
        let (recorded, predicted) = &devices[0];
        let off = |a: u64, b: u64| (a as f64 - b as f64).abs() / (b as f64).max(1.0);
        let peak_off = off(predicted.peak_reserved_bytes, recorded.peak_reserved_bytes);
        let allocs_off = off(predicted.segment_allocs, recorded.segment_allocs);
        assert!(
            peak_off <= peak_off_max && allocs_off <= allocs_off_max,
            "{name}: peak off {peak_off:.3}, segment allocations off {allocs_off:.3}"
        );
    }
}

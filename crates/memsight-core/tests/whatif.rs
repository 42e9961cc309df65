//! The what-if replay's fidelity on real files (issue 13): the trace replayed through the
//! allocator model under the recorded settings must reproduce what the file recorded. The model is
//! also the generator's, so generated files prove nothing here: only real ones count.

mod common;

use memsight_core::whatif::{self, Recording, Settings};

/// Replays every traced device of the fixture `name` under its recorded settings and returns
/// (recorded, predicted) per device.
fn fidelity(name: &str) -> Option<Vec<(whatif::Outcome, whatif::Outcome)>> {
    let path = common::fixture("snapshots", name)?;
    Some(fidelity_of(&memsight_core::Loaded::new(
        memsight_core::load_path(&path, None).expect("the fixture loads"),
    )))
}

/// (recorded, predicted) per traced device of `loaded`, under its recorded settings.
fn fidelity_of(loaded: &memsight_core::Loaded) -> Vec<(whatif::Outcome, whatif::Outcome)> {
    loaded
        .snapshot
        .devices
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.trace.is_empty())
        .map(|(i, _)| {
            let recording = Recording::of(loaded, i);
            let settings = Settings::recorded(&recording);
            (
                whatif::recorded(&recording),
                whatif::predict(&recording, &settings),
            )
        })
        .collect()
}

/// A `torch_npu` recording kept with the tests (`tests/data/npu_snapshots`, third-party: see its
/// README): the replay's reproducers that the corpus lacks.
fn npu_recording(name: &str) -> memsight_core::Loaded {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/npu_snapshots")
        .join(name);
    memsight_core::Loaded::new(memsight_core::load_path(&path, None).expect("the recording loads"))
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
    // Better than the bar: the model's reserved bytes follow the file after every alloc, and
    // hold as much unused at the peak.
    assert_eq!(predicted.first_divergence_event, None, "{name}");
    assert_eq!(
        predicted.peak_fragmentation_bytes, recorded.peak_fragmentation_bytes,
        "{name}"
    );
    // And so the figures compared where the peak was held before the trace (issue 36).
    assert_eq!(
        (
            predicted.reserved_at_peak_allocated_bytes,
            predicted.unused_at_peak_allocated_bytes,
            predicted.mean_reserved_bytes
        ),
        (
            recorded.reserved_at_peak_allocated_bytes,
            recorded.unused_at_peak_allocated_bytes,
            recorded.mean_reserved_bytes
        ),
        "{name}"
    );
}

/// Issue 36, item 2: `cuda_ctx256_fullstep`'s pool held its peak before the trace's first event.
/// Read with Python's pickle (the final segments, the trace walked back): 61,111,009,280 B
/// reserved before the trace and never more after it; allocated bytes peak at event 20,121 with
/// 61,025,026,048 B reserved. No setting changes that peak, so every output says so and
/// compares the reserved bytes at peak allocated, which expandable segments do lower.
#[test]
fn a_peak_held_before_the_trace_is_compared_where_settings_act() {
    let Some(path) = common::fixture("snapshots", "cuda_ctx256_fullstep.pickle") else {
        memsight_core::testing::skip("corpus not found");
        return;
    };
    let loaded = memsight_core::Loaded::new(
        memsight_core::load_path(&path, None).expect("the fixture loads"),
    );
    let recording = Recording::of(&loaded, 0);
    let recorded = whatif::recorded(&recording);
    assert_eq!(recorded.reserved_before_bytes, 61_111_009_280);
    assert_eq!(recorded.peak_reserved_bytes, 61_111_009_280);
    assert!(recorded.peak_held_before_trace());
    assert_eq!(recorded.reserved_at_peak_allocated_bytes, 61_025_026_048);
    let mut settings = Settings::recorded(&recording);
    assert_faithful(
        "cuda_ctx256_fullstep.pickle",
        &recorded,
        &whatif::predict(&recording, &settings),
    );
    settings.expandable_segments = true;
    let expandable = whatif::predict(&recording, &settings);
    assert_eq!(expandable.peak_reserved_bytes, 61_111_009_280);
    assert!(
        expandable.reserved_at_peak_allocated_bytes < recorded.reserved_at_peak_allocated_bytes,
        "{expandable:?}"
    );
    let (lines, note) = whatif::compared_lines(&recorded, &expandable);
    assert!(note.is_some_and(|n| n.contains("no setting changes it")));
    let peak = lines
        .iter()
        .find(|l| l.what == "peak reserved")
        .expect("a peak line");
    assert_eq!(peak.change.as_deref(), Some("before the trace"), "{peak:?}");
    // The unused bytes at that pre-trace moment are no one's to change: not shown.
    assert!(lines.iter().all(|l| l.what != "unused at peak"));
    let at = lines
        .iter()
        .find(|l| l.what == "at peak allocated")
        .expect("the line settings act on");
    assert!(
        at.change.as_deref().is_some_and(|c| c.starts_with('-')),
        "{at:?}"
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

/// `torch_npu`'s allocator pads every request by 32 bytes before rounding (the replay finds that
/// in the file's blocks): with it, both NPU files replay as recorded too. Recorded figures from
/// Python's pickle: 79 `segment_alloc` (54 `segment_free`) and 45 `segment_map`.
#[test]
fn npu_files_replay_as_recorded() {
    for (name, segment_allocs, segment_frees) in [
        ("npu_snapshot_with_empty_cache.pkl", 79, 54),
        ("npu_snapshot_expandable.pkl", 45, 0),
    ] {
        let Some(devices) = fidelity(name) else {
            memsight_core::testing::skip("corpus not found");
            return;
        };
        let (recorded, predicted) = &devices[0];
        assert_eq!(
            (recorded.segment_allocs, recorded.segment_frees),
            (segment_allocs, segment_frees),
            "{name}"
        );
        assert_faithful(name, recorded, predicted);
    }
}

/// The check across settings: the same 2,899 requests recorded without and with
/// expandable segments. Replaying the first with expandable segments and without its
/// `empty_cache()` calls must predict the second's peak reserved within 1 % (614 MiB; "no
/// change" would say 632 MiB) and its `segment_map` count within 10 % (45).
#[test]
fn expandable_segments_predicted_from_the_empty_cache_run() {
    let (Some(a), Some(b)) = (
        common::fixture("snapshots", "npu_snapshot_with_empty_cache.pkl"),
        common::fixture("snapshots", "npu_snapshot_expandable.pkl"),
    ) else {
        memsight_core::testing::skip("corpus not found");
        return;
    };
    let open =
        |path| memsight_core::Loaded::new(memsight_core::load_path(path, None).expect("loads"));
    let (a, b) = (open(&a), open(&b));
    let traced = |l: &memsight_core::Loaded| {
        l.snapshot
            .devices
            .iter()
            .position(|d| !d.trace.is_empty())
            .expect("a trace")
    };
    let (recording_a, recording_b) = (Recording::of(&a, traced(&a)), Recording::of(&b, traced(&b)));
    let settings = Settings {
        expandable_segments: true,
        skip_releases: true,
        ..Settings::default()
    };
    let predicted = whatif::predict(&recording_a, &settings);
    let recorded = whatif::recorded(&recording_b);
    assert_eq!(recorded.peak_reserved_bytes, 614 << 20);
    assert_eq!(recorded.segment_allocs, 45);
    assert_predicted_across_settings(&predicted, &recorded);
}

/// The bar across settings: peak reserved within 1 %, segment maps and unmaps within
/// 10 % of the run recorded under those settings.
fn assert_predicted_across_settings(predicted: &whatif::Outcome, recorded: &whatif::Outcome) {
    let off = |p: u64, r: u64| p.abs_diff(r) as f64 / (r as f64).max(1.0);
    assert!(
        off(predicted.peak_reserved_bytes, recorded.peak_reserved_bytes) <= 0.01,
        "{predicted:?}"
    );
    assert!(
        off(predicted.segment_allocs, recorded.segment_allocs) <= 0.10,
        "{predicted:?}"
    );
    assert!(
        off(predicted.segment_frees, recorded.segment_frees) <= 0.10,
        "{predicted:?}"
    );
}

/// Older `torch_npu` files carry no `allocator_settings`: the file's own evidence (its frames,
/// its blocks' padding) makes the replay `torch_npu`'s, so a 1 MiB request (+32 bytes) goes to the
/// large pool as it did. Replayed as `CUDA`'s, this file came out at 71 segment allocs and a peak
/// 5.7 % low. Recorded (Python's pickle): 52 `segment_alloc`, peak reserved 526 MiB.
#[test]
fn an_npu_file_without_allocator_settings_replays_as_recorded() {
    let loaded = npu_recording("snapshot_1768383987920985470.pkl");
    let devices = fidelity_of(&loaded);
    let (recorded, predicted) = &devices[0];
    assert_eq!(
        (recorded.segment_allocs, recorded.peak_reserved_bytes),
        (52, 526 << 20)
    );
    assert!(whatif::allocator_of(&Recording::of(&loaded, 0)).npu);
    assert_faithful("snapshot_1768383987920985470.pkl", recorded, predicted);
    assert_eq!(predicted.segment_allocs, 52);
}

/// `empty_cache()` with expandable segments unmaps every whole free page, also in the middle of a
/// segment; later requests map those holes again, lowest address first. The model followed only
/// the free tail and predicted 62 maps and 6 unmaps. Recorded (Python's pickle): 75
/// `segment_map`, 10 `segment_unmap`, peak reserved 614 MiB; the model now follows the file at
/// every alloc.
#[test]
fn expandable_segments_with_holes_replay_as_recorded() {
    let loaded = npu_recording("snapshot_with_empty_cache_expandable.pkl");
    let devices = fidelity_of(&loaded);
    let (recorded, predicted) = &devices[0];
    assert_eq!(
        (
            recorded.segment_allocs,
            recorded.segment_frees,
            recorded.peak_reserved_bytes
        ),
        (75, 10, 614 << 20)
    );
    assert_faithful(
        "snapshot_with_empty_cache_expandable.pkl",
        recorded,
        predicted,
    );
    assert_eq!(
        (predicted.segment_allocs, predicted.segment_frees),
        (75, 10)
    );
}

/// The cross-setting case: the `empty_cache` run without expandable segments, replayed
/// with them and with its `empty_cache()` calls, against the same workload recorded that way (75
/// maps, 10 unmaps, 614 MiB). Maps within 10 % (the model without holes said 61), peak within 1 %.
#[test]
fn expandable_segments_with_empty_cache_predicted_from_the_run_without_them() {
    let Some(path) = common::fixture("snapshots", "npu_snapshot_with_empty_cache.pkl") else {
        memsight_core::testing::skip("corpus not found");
        return;
    };
    let a = memsight_core::Loaded::new(memsight_core::load_path(&path, None).expect("loads"));
    let b = npu_recording("snapshot_with_empty_cache_expandable.pkl");
    let settings = Settings {
        expandable_segments: true,
        ..Settings::default()
    };
    let predicted = whatif::predict(&Recording::of(&a, 0), &settings);
    let recorded = whatif::recorded(&Recording::of(&b, 0));
    assert_eq!(
        (
            recorded.peak_reserved_bytes,
            recorded.segment_allocs,
            recorded.segment_frees
        ),
        (614 << 20, 75, 10)
    );
    assert_predicted_across_settings(&predicted, &recorded);
}

/// Where the file shows the device's capacity (an `oom` entry; a stall), the replay uses it and
/// predicts stalls and OOMs. Generated files share the model, so this checks the plumbing, not
/// the model: the recorded stall and OOM must come back under the recorded settings.
#[test]
fn the_capacity_a_file_shows_brings_stalls_and_ooms_into_the_prediction() {
    use memsight_core::r#gen::{Scenario, generate_loaded};
    for (scenario, stalls, ooms) in [(Scenario::Stall, 2, 0), (Scenario::Oom, 1, 1)] {
        let (_, loaded) = generate_loaded(scenario, 20_000, 1);
        let recording = Recording::of(&loaded, 0);
        let capacity = whatif::capacity_from_file(&recording).expect("the file shows it");
        // A stall bounds the capacity; an `oom` entry's free bytes measure it.
        assert_eq!(
            capacity.upper_bound,
            scenario == Scenario::Stall,
            "{scenario:?}"
        );
        let settings = Settings::recorded(&recording);
        assert_eq!(settings.capacity_bytes, Some(capacity.bytes));
        let recorded = whatif::recorded(&recording);
        let predicted = whatif::predict(&recording, &settings);
        assert_eq!(
            (recorded.stalls, recorded.ooms),
            (Some(stalls), Some(ooms)),
            "{scenario:?}"
        );
        assert_eq!(
            (predicted.stalls, predicted.ooms),
            (Some(stalls), Some(ooms)),
            "{scenario:?}: {}",
            capacity.source
        );
        assert_eq!(predicted.peak_reserved_bytes, recorded.peak_reserved_bytes);
    }
}

/// The predicted curve and pool agree with the outcome: the curve's maximum is the predicted
/// peak, and the pool after an event holds what the curve says.
#[test]
fn the_predicted_curve_and_pool_agree() {
    let Some(path) = common::fixture("snapshots", "npu_snapshot_with_empty_cache.pkl") else {
        memsight_core::testing::skip("corpus not found");
        return;
    };
    let loaded = memsight_core::Loaded::new(memsight_core::load_path(&path, None).expect("loads"));
    let recording = Recording::of(&loaded, 0);
    let mut settings = Settings::recorded(&recording);
    settings.expandable_segments = true;
    let prediction = whatif::predict_curve(&recording, &settings);
    assert_eq!(
        prediction.reserved_bytes.len(),
        recording.device.trace.len()
    );
    assert_eq!(
        prediction.reserved_bytes.iter().max().copied(),
        Some(prediction.outcome.peak_reserved_bytes)
    );
    let event = recording.device.trace.len() as u32 / 2;
    let pool = whatif::predicted_pool_after(&recording, &settings, Some(event));
    let reserved: u64 = pool.segments.iter().map(|s| s.total_size_bytes).sum();
    assert_eq!(reserved, prediction.reserved_bytes[event as usize]);
    assert_eq!(pool.totals.reserved_bytes as u64, reserved);
}

/// `torch_npu`'s workspace triples (`workspace_snapshot`, `segment_alloc`, `alloc`) are the
/// workspace allocator's memory, not the caching allocator's: neither counted as the pool's
/// segment allocations nor replayed through the model, which holds them as they were under any
/// settings. (A generated NPU file: this checks the replay's handling of the triple.)
#[test]
fn npu_workspace_triples_are_held_apart_from_the_pool() {
    use memsight_core::r#gen::{Scenario, generate_loaded};
    use memsight_core::model::Action;
    let (_, loaded) = generate_loaded(Scenario::Npu, 20_000, 1);
    let i = loaded
        .snapshot
        .devices
        .iter()
        .position(|d| d.trace.action.contains(&Action::WorkspaceSnapshot))
        .expect("the NPU scenario writes workspace triples");
    let recording = Recording::of(&loaded, i);
    let trace = &recording.device.trace;
    let triples = trace
        .action
        .windows(3)
        .filter(|w| {
            w == &[
                Action::WorkspaceSnapshot,
                Action::SegmentAlloc,
                Action::Alloc,
            ]
        })
        .count() as u64;
    assert!(triples > 0);
    let segment_allocs = trace
        .action
        .iter()
        .filter(|&&a| a == Action::SegmentAlloc)
        .count() as u64;
    let recorded = whatif::recorded(&recording);
    assert_eq!(recorded.segment_allocs, segment_allocs - triples);
    let settings = Settings::recorded(&recording);
    let predicted = whatif::predict(&recording, &settings);
    assert_faithful("generated npu", &recorded, &predicted);
    // Under expandable segments the workspace stays where it was: the prediction still holds it.
    let mut expandable = settings;
    expandable.expandable_segments = true;
    let pool = whatif::predicted_pool_after(&recording, &expandable, Some(trace.len() as u32 - 1));
    let workspace = trace
        .action
        .iter()
        .position(|&a| a == Action::WorkspaceSnapshot)
        .map(|w| trace.addr[w + 1])
        .expect("a triple");
    assert!(
        pool.segments
            .iter()
            .any(|s| s.address == workspace && !s.is_expandable),
        "the workspace segment is held as recorded"
    );
}

/// Older `torch_npu` files carry no `allocator_settings`, and a pool may hold no block whose
/// request shows the padding: the trace alone must tell `torch_npu`'s allocator from CUDA's (a
/// small block allocated right behind a live one sits its padded size further on), or a 1 MiB
/// request lands in the small pool the NPU never puts it in. With the final pool taken away,
/// the NPU file without `torch_npu` in its strings is still replayed as `torch_npu`'s, padded; the
/// CUDA files stay CUDA's.
#[test]
fn the_allocator_is_told_from_the_trace_when_nothing_else_says() {
    for (name, npu) in [
        ("npu_snapshot_expandable.pkl", true),
        ("cuda_2023_no_time.pickle", false),
        ("cuda_ctx512_forward_mixed.pickle", false),
    ] {
        let Some(path) = common::fixture("snapshots", name) else {
            memsight_core::testing::skip("corpus not found");
            return;
        };
        let mut snapshot = memsight_core::load_path(&path, None).expect("loads");
        assert!(
            !snapshot.strings.iter().any(|s| s.contains("torch_npu")),
            "{name}"
        );
        let traced = snapshot
            .devices
            .iter()
            .position(|d| !d.trace.is_empty())
            .expect("a trace");
        for segment in &mut snapshot.devices[traced].segments {
            segment.blocks.clear();
        }
        let loaded = memsight_core::Loaded::new(snapshot);
        let recording = Recording::of(&loaded, traced);
        let kind = whatif::allocator_of(&recording);
        assert_eq!(kind.npu, npu, "{name}: {kind:?}");
        assert_eq!(kind.pad_bytes, if npu { 32 } else { 0 }, "{name}");
        assert!(kind.why.contains("of the trace"), "{name}: {}", kind.why);
    }
}

/// A hand-written segment of an expandable run's final pool: address, bytes, and its blocks as
/// (address, bytes, live).
struct HandSegment {
    address: i128,
    size: i128,
    blocks: Vec<(i128, i128, bool)>,
}

/// A `CUDA` snapshot with `expandable_segments:True`: `segments` (large pool, stream 0),
/// device 0's trace of (action, address, bytes), and the free bytes its `oom` entry reports.
fn expandable_pickle(
    segments: &[HandSegment],
    events: &[(&str, i128, i128)],
    device_free: i128,
) -> std::io::Result<Vec<u8>> {
    let mut w = memsight_core::r#gen::PickleWriter::new(Vec::new(), 4)?;
    w.begin_dict();
    w.entry("segments", |w| {
        w.begin_list();
        for seg in segments {
            let _ = w.item();
            w.begin_dict();
            for (key, value) in [("address", seg.address), ("total_size", seg.size)] {
                let _ = w.entry(key, |w| w.int(value));
            }
            let _ = w.entry("segment_type", |w| w.str("large"));
            let _ = w.entry("is_expandable", |w| w.bool(true));
            let _ = w.entry("blocks", |w| {
                w.begin_list();
                for &(address, size, live) in &seg.blocks {
                    let _ = w.item();
                    w.begin_dict();
                    let _ = w.entry("address", |w| w.int(address));
                    let _ = w.entry("size", |w| w.int(size));
                    let _ = w.entry("requested_size", |w| w.int(if live { size } else { 0 }));
                    let state = if live { "active_allocated" } else { "inactive" };
                    let _ = w.entry("state", |w| w.str(state));
                    w.end_dict();
                    w.end_list_item();
                }
                w.end_list();
            });
            w.end_dict();
            w.end_list_item();
        }
        w.end_list();
    })?;
    w.entry("device_traces", |w| {
        w.begin_list();
        let _ = w.item();
        w.begin_list();
        for &(action, addr, size) in events {
            let _ = w.item();
            w.begin_dict();
            let _ = w.entry("action", |w| w.str(action));
            let _ = w.entry("addr", |w| w.int(addr));
            let _ = w.entry("size", |w| w.int(size));
            let _ = w.entry("stream", |w| w.int(0));
            if action == "oom" {
                let _ = w.entry("device_free", |w| w.int(device_free));
            }
            w.end_dict();
            w.end_list_item();
        }
        w.end_list();
        w.end_list_item();
        w.end_list();
    })?;
    w.entry("allocator_settings", |w| {
        w.begin_dict();
        let _ = w.entry("expandable_segments", |w| w.bool(true));
        w.end_dict();
    })?;
    w.end_dict();
    w.finish()
}

/// The issue's `CUDA` case, an expandable run that ends in an OOM (a real file, without a licence
/// to copy, was predicted 1.6 % low: see BENCHMARKS.md), rebuilt by hand with 20 MiB pages as
/// the allocator records it. A 150 MiB request does not fit under the 260 MiB capacity; the retry
/// releases the cache, which unmaps the free 100 MiB at the start of the segment (in the middle:
/// a live block follows), and maps 160 MiB at the end; a 60 MiB request then maps three pages of
/// that hole; a 50 MiB request finds no room and is the OOM (20 MiB free). Recorded reserved:
/// 100, 120, 20, 180, 240 MiB. A model that unmaps only a segment's free tail releases nothing,
/// fails the 150 MiB request and stays at 180 MiB.
#[test]
fn an_expandable_run_that_ends_in_an_oom_replays_as_recorded() {
    const MIB: i128 = 1 << 20;
    const BASE: i128 = 0x7f00_0000_0000;
    let events = [
        ("segment_map", BASE, 100 * MIB),
        ("alloc", BASE, 100 * MIB),
        ("segment_map", BASE + 100 * MIB, 20 * MIB),
        ("alloc", BASE + 100 * MIB, 20 * MIB),
        ("free_requested", BASE, 100 * MIB),
        ("free_completed", BASE, 100 * MIB),
        ("segment_unmap", BASE, 100 * MIB),
        ("segment_map", BASE + 120 * MIB, 160 * MIB),
        ("alloc", BASE + 120 * MIB, 150 * MIB),
        ("segment_map", BASE, 60 * MIB),
        ("alloc", BASE, 60 * MIB),
        ("oom", 0, 50 * MIB),
    ];
    // The final pool, as `snapshot()` lists an expandable segment: one entry per mapped run.
    let segments = [
        HandSegment {
            address: BASE,
            size: 60 * MIB,
            blocks: vec![(BASE, 60 * MIB, true)],
        },
        HandSegment {
            address: BASE + 100 * MIB,
            size: 180 * MIB,
            blocks: vec![
                (BASE + 100 * MIB, 20 * MIB, true),
                (BASE + 120 * MIB, 150 * MIB, true),
                (BASE + 270 * MIB, 10 * MIB, false),
            ],
        },
    ];
    let bytes = expandable_pickle(&segments, &events, 20 * MIB).expect("in memory");
    let snapshot = memsight_core::load_bytes(&bytes, std::path::Path::new("expandable_oom.pickle"))
        .unwrap_or_else(|e| panic!("{e}"));
    let loaded = memsight_core::Loaded::new(snapshot);
    let recording = Recording::of(&loaded, 0);
    let settings = Settings::recorded(&recording);
    assert!(settings.expandable_segments);
    assert_eq!(settings.capacity_bytes, Some(260 << 20));
    let (recorded, predicted) = (
        whatif::recorded(&recording),
        whatif::predict(&recording, &settings),
    );
    assert_eq!(
        (
            recorded.peak_reserved_bytes,
            recorded.segment_allocs,
            recorded.segment_frees
        ),
        (240 << 20, 4, 1)
    );
    assert_faithful("expandable_oom.pickle", &recorded, &predicted);
    assert_eq!(
        (
            predicted.segment_allocs,
            predicted.segment_frees,
            predicted.stalls,
            predicted.ooms
        ),
        (4, 1, Some(1), Some(1))
    );
}

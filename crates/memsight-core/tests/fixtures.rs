//! Every real snapshot of the corpus loads, and its figures match values computed independently
//! with Python's pickle module (`scripts/fixture_figures.py`, run on the same files).

#![expect(
    clippy::unreadable_literal,
    reason = "figures pasted as scripts/fixture_figures.py prints them"
)]

mod common;

use memsight_core::Loaded;
use memsight_core::category::Category;
use memsight_core::model::{BlockState, NO_TIME, WarningKind};
use memsight_core::report::StatsReport;

/// A segment as (address, size, blocks as (address, size, state)).
type SegmentShape = (u64, u64, Vec<(u64, u64, BlockState)>);

/// A first event as (action, addr, size, time).
type FirstEvent = (&'static str, u64, u64, Option<i64>);

struct Expected {
    file: &'static str,
    device: u32,
    trace_events: usize,
    actions: &'static [(&'static str, u64)],
    segments: usize,
    blocks: usize,
    /// reserved, allocated, active
    final_bytes: [i64; 3],
    peak_bytes: [i64; 3],
}

// From `python3 scripts/fixture_figures.py ../shared/fixtures/snapshots/*`.
const EXPECTED: &[Expected] = &[
    Expected {
        file: "cuda_2023_no_time.pickle",
        device: 0,
        trace_events: 10307,
        actions: &[
            ("alloc", 3505),
            ("free_completed", 3325),
            ("free_requested", 3325),
            ("segment_alloc", 152),
        ],
        segments: 215,
        blocks: 1079,
        final_bytes: [6471811072, 2285408452, 2285408452],
        peak_bytes: [6471811072, 5876132840, 5876132840],
    },
    Expected {
        file: "cuda_cppframes_snapshotevents.pickle",
        device: 0,
        trace_events: 5803,
        actions: &[
            ("alloc", 1935),
            ("free_completed", 1926),
            ("free_requested", 1926),
            ("segment_alloc", 7),
            ("snapshot", 9),
        ],
        segments: 10,
        blocks: 54,
        final_bytes: [134217728, 48748928, 48748928],
        peak_bytes: [134217728, 108258676, 108258676],
    },
    Expected {
        file: "cuda_ctx512_forward_mixed.pickle",
        device: 0,
        trace_events: 6765,
        actions: &[
            ("alloc", 2702),
            ("free_completed", 1414),
            ("free_requested", 1414),
            ("segment_alloc", 638),
            ("segment_free", 597),
        ],
        segments: 868,
        blocks: 1816,
        final_bytes: [40514879488, 39839792128, 39839792128],
        peak_bytes: [40514879488, 39860763648, 39860763648],
    },
    Expected {
        file: "cuda_legacy_list.pkl",
        device: 1,
        trace_events: 0,
        actions: &[],
        segments: 255,
        blocks: 2140,
        final_bytes: [3649044480, 3308174782, 3308174782],
        peak_bytes: [3649044480, 3308174782, 3308174782],
    },
    Expected {
        file: "cuda_modern_compilectx.pickle",
        device: 0,
        trace_events: 5163,
        actions: &[
            ("alloc", 1721),
            ("free_completed", 1721),
            ("free_requested", 1721),
        ],
        segments: 216,
        blocks: 455,
        final_bytes: [14180941824, 1373919236, 1373919236],
        peak_bytes: [14180941824, 13923997700, 13923997700],
    },
    Expected {
        file: "npu_snapshot_expandable.pkl",
        device: 0,
        trace_events: 8092,
        actions: &[
            ("alloc", 2899),
            ("free_completed", 2574),
            ("free_requested", 2574),
            ("segment_map", 45),
        ],
        segments: 2,
        blocks: 717,
        final_bytes: [643825664, 408384288, 408384288],
        peak_bytes: [643825664, 597327488, 597327488],
    },
    Expected {
        file: "npu_snapshot_with_empty_cache.pkl",
        device: 0,
        trace_events: 8180,
        actions: &[
            ("alloc", 2899),
            ("free_completed", 2574),
            ("free_requested", 2574),
            ("segment_alloc", 79),
            ("segment_free", 54),
        ],
        segments: 34,
        blocks: 685,
        final_bytes: [509607936, 408384288, 408384288],
        peak_bytes: [662700032, 597327488, 597327488],
    },
];

fn load(file: &str) -> Option<Loaded> {
    let path = common::fixture("snapshots", file)?;
    Some(Loaded::open(&path, None).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn every_fixture_matches_independent_figures() {
    for expected in EXPECTED {
        let Some(loaded) = load(expected.file) else {
            return;
        };
        let report = StatsReport::new(&loaded);
        assert_eq!(
            report.devices.len(),
            1,
            "{}: one device with data",
            expected.file
        );
        let d = &report.devices[0];
        let ctx = expected.file;
        assert_eq!(d.device, expected.device, "{ctx}");
        assert_eq!(d.trace_events, expected.trace_events, "{ctx}");
        let actions: Vec<(&str, u64)> = d.actions.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(actions, expected.actions, "{ctx}");
        assert_eq!(
            (d.segments, d.blocks),
            (expected.segments, expected.blocks),
            "{ctx}"
        );
        assert_eq!(
            [
                d.reserved_bytes_final,
                d.allocated_bytes_final,
                d.active_bytes_final
            ],
            expected.final_bytes,
            "{ctx}"
        );
        assert_eq!(
            [
                d.peak_reserved_bytes,
                d.peak_allocated_bytes,
                d.peak_active_bytes
            ],
            expected.peak_bytes,
            "{ctx}"
        );
    }
}

#[test]
fn real_files_replay_to_a_consistent_initial_state() {
    for expected in EXPECTED {
        let Some(loaded) = load(expected.file) else {
            return;
        };
        let disagreements: Vec<String> = loaded
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::TraceDisagreesWithSegments)
            .map(ToString::to_string)
            .collect();
        assert!(
            disagreements.is_empty(),
            "{}: {disagreements:?}",
            expected.file
        );
        let replay = &loaded.replays[0];
        assert!(
            replay.initial.allocated_bytes >= 0 && replay.initial.reserved_bytes >= 0,
            "{}",
            expected.file
        );
    }
}

/// Stacks and first events, read with Python's pickle (distinct stacks by frame content).
#[test]
fn stacks_are_interned_once_and_fields_survive() {
    let cases: &[(&str, usize, usize, Option<FirstEvent>)] = &[
        (
            "cuda_2023_no_time.pickle",
            152,
            263,
            Some(("alloc", 139936756924416, 8192000, None)),
        ),
        (
            "cuda_cppframes_snapshotevents.pickle",
            81,
            96,
            Some(("alloc", 139934094589952, 7864320, Some(1738780408787504))),
        ),
        (
            "cuda_ctx512_forward_mixed.pickle",
            110,
            98,
            Some((
                "segment_free",
                140625972297728,
                10485760,
                Some(1748733642760996),
            )),
        ),
        ("cuda_legacy_list.pkl", 11, 21, None),
        (
            "cuda_modern_compilectx.pickle",
            54,
            16,
            Some(("alloc", 47294971904, 25165824, Some(1776479641085368))),
        ),
        (
            "npu_snapshot_expandable.pkl",
            59,
            21,
            Some(("segment_map", 20697552257024, 41943040, None)),
        ),
        (
            "npu_snapshot_with_empty_cache.pkl",
            60,
            23,
            Some(("segment_alloc", 20617048883200, 44040192, None)),
        ),
    ];
    for &(file, stacks, depth, first) in cases {
        let Some(loaded) = load(file) else { return };
        let s = &loaded.snapshot;
        assert_eq!(s.stacks.len(), stacks, "{file}: distinct stacks");
        assert_eq!(
            s.stacks.iter().map(|st| st.len()).max().unwrap_or(0),
            depth,
            "{file}: deepest stack"
        );
        let device = &s.devices[0];
        match first {
            None => assert!(device.trace.is_empty()),
            Some((action, addr, size, time)) => {
                let t = &device.trace;
                assert_eq!(t.action[0].name(&s.strings), action, "{file}");
                assert_eq!((t.addr[0], t.size_bytes[0]), (addr, size), "{file}");
                assert_eq!(t.time_us[0], time.unwrap_or(NO_TIME), "{file}");
            }
        }
    }
}

#[test]
fn format_variants_are_recognised() {
    let Some(legacy) = load("cuda_legacy_list.pkl") else {
        return;
    };
    assert!(legacy.snapshot.format.legacy_list);
    assert_eq!(legacy.snapshot.devices[0].ordinal, 1);
    let Some(npu) = load("npu_snapshot_expandable.pkl") else {
        return;
    };
    assert!(!npu.snapshot.devices[0].trace.has_time());
    // Stream pointers are kept raw and numbered from 0.
    assert_eq!(npu.snapshot.streams, vec![1276474240]);
    assert!(
        npu.snapshot.devices[0]
            .segments
            .iter()
            .all(|s| s.is_expandable)
    );
    let Some(modern) = load("cuda_modern_compilectx.pickle") else {
        return;
    };
    let s = &modern.snapshot;
    assert!(s.devices[0].trace.has_time());
    assert_eq!(s.str(s.devices[0].trace.compile_context[0]), "N/A");
    assert!(
        s.allocator_settings
            .iter()
            .any(|(k, _)| k == "expandable_segments")
    );
    let cpp = load("cuda_cppframes_snapshotevents.pickle").expect("corpus present");
    let cpp_frames = cpp
        .snapshot
        .frames
        .iter()
        .filter(|f| cpp.snapshot.str(f.filename) == "??" && f.line == 0)
        .count();
    assert!(cpp_frames > 0, "C++ frames are kept");
}

/// The pool reconstructed at the last event is the file's own final pool, block for block.
#[test]
fn replay_lands_on_the_final_segments() {
    for expected in EXPECTED {
        let Some(loaded) = load(expected.file) else {
            return;
        };
        let (device, replay) = (&loaded.snapshot.devices[0], &loaded.replays[0]);
        let last = replay.event_count().checked_sub(1).map(|n| n as u32);
        let pool = replay.pool_after(device, last);
        assert!(pool.unplaced_blocks.is_empty(), "{}", expected.file);
        let got: Vec<SegmentShape> = pool
            .segments
            .iter()
            .map(|s| {
                (
                    s.address,
                    s.total_size_bytes,
                    s.blocks
                        .iter()
                        .map(|b| (b.address, b.size_bytes, b.state))
                        .collect(),
                )
            })
            .collect();
        let want: Vec<SegmentShape> = device
            .segments
            .iter()
            .map(|s| {
                (
                    s.address,
                    s.total_size_bytes,
                    s.blocks
                        .iter()
                        .map(|b| (b.address, b.size_bytes, b.state))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{}: segment count", expected.file);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{}: segment 0x{:x}", expected.file, w.0);
        }
    }
}

/// The pool after event N, rebuilt from checkpoints, agrees with the O(1) totals at every N.
#[test]
fn pool_state_agrees_with_totals_at_every_event() {
    for expected in EXPECTED {
        let Some(loaded) = load(expected.file) else {
            return;
        };
        let (device, replay) = (&loaded.snapshot.devices[0], &loaded.replays[0]);
        let events = std::iter::once(None).chain((0..replay.event_count() as u32).map(Some));
        for n in events.step_by(3) {
            let pool = replay.pool_after(device, n);
            let blocks = || pool.segments.iter().flat_map(|s| &s.blocks);
            let reserved: u64 = pool.segments.iter().map(|s| s.total_size_bytes).sum();
            let allocated: u64 = blocks()
                .filter(|b| b.state == BlockState::ActiveAllocated)
                .map(|b| b.requested_size_bytes)
                .sum();
            let active: u64 = blocks()
                .filter(|b| b.state != BlockState::Inactive)
                .map(|b| b.requested_size_bytes)
                .sum();
            let totals = replay.totals_after(n);
            assert_eq!(
                (reserved as i64, allocated as i64, active as i64),
                (
                    totals.reserved_bytes,
                    totals.allocated_bytes,
                    totals.active_bytes
                ),
                "{} after {n:?}",
                expected.file
            );
            for s in &pool.segments {
                let tiled: u64 = s.blocks.iter().map(|b| b.size_bytes).sum();
                assert_eq!(
                    tiled, s.total_size_bytes,
                    "{} after {n:?}: blocks tile segment 0x{:x}",
                    expected.file, s.address
                );
            }
        }
    }
}

/// The segment timeline's spans add up, after every event, to the reserved bytes; their highest
/// sum is the peak reserved that Python's pickle gives (`EXPECTED`).
#[test]
fn segment_spans_add_up_to_the_reserved_bytes() {
    for expected in EXPECTED {
        let Some(loaded) = load(expected.file) else {
            return;
        };
        let (device, replay) = (&loaded.snapshot.devices[0], &loaded.replays[0]);
        let spans = memsight_core::segments::spans(device);
        let reserved_after = |n: Option<u32>| -> i64 {
            spans
                .iter()
                .filter(|s| s.is_live_after(n))
                .map(|s| s.size_bytes as i64)
                .sum()
        };
        let mut peak = reserved_after(None);
        for e in 0..replay.event_count() as u32 {
            let r = reserved_after(Some(e));
            peak = peak.max(r);
            if e % 3 == 0 {
                assert_eq!(
                    r,
                    replay.totals_after(Some(e)).reserved_bytes,
                    "{} after {e}",
                    expected.file
                );
            }
        }
        if replay.event_count() > 0 {
            assert_eq!(peak, expected.peak_bytes[0], "{}", expected.file);
        }
    }
}

/// Blocks allocated in a range and not freed by its end, counted with Python's pickle by pairing
/// each `alloc` with the next `free_completed` at its address.
#[test]
fn range_analysis_finds_what_a_range_left_behind() {
    // (file, range, unreleased count, bytes, largest, smallest)
    type Case = (&'static str, (u32, u32), usize, u64, u64, u64);
    let cases: &[Case] = &[
        (
            "npu_snapshot_with_empty_cache.pkl",
            (1000, 3000),
            351,
            277_702_200,
            41_943_040,
            40,
        ),
        (
            "cuda_modern_compilectx.pickle",
            (0, 1393),
            269,
            11_894_554_624,
            327_680_000,
            32_768,
        ),
    ];
    for &(file, (first, last), count, bytes, largest, smallest) in cases {
        let Some(loaded) = load(file) else { return };
        let report = memsight_core::range::RangeReport::new(&loaded.replays[0], first, last);
        assert_eq!(
            (
                report.unreleased.len(),
                report.unreleased_bytes,
                report.largest_bytes,
                report.smallest_bytes
            ),
            (count, bytes, largest, smallest),
            "{file}"
        );
        let grouped: u64 = report.by_stack.iter().map(|g| g.bytes).sum();
        assert_eq!(grouped, bytes, "{file}: the groups add up");
        assert!(
            report.by_stack.windows(2).all(|w| w[0].bytes >= w[1].bytes),
            "{file}: largest first"
        );
    }
}

/// The pool the app shows after an event is the one `memsight state` prints (same core call), and
/// both agree with the figures replayed independently: totals after the event.
#[test]
fn pool_state_at_a_segment_alloc_contains_that_segment() {
    let Some(loaded) = load("cuda_ctx512_forward_mixed.pickle") else {
        return;
    };
    let (device, replay) = (&loaded.snapshot.devices[0], &loaded.replays[0]);
    // Event 701 is a segment_alloc (read with Python's pickle).
    let t = &device.trace;
    assert_eq!(
        t.action[701].name(&loaded.snapshot.strings),
        "segment_alloc"
    );
    let pool = replay.pool_after(device, Some(701));
    assert!(
        pool.segments
            .iter()
            .any(|s| s.address == t.addr[701] && s.total_size_bytes == t.size_bytes[701])
    );
    let categories = memsight_core::category::classify(&loaded.snapshot, device, replay);
    let report = memsight_core::report::StateReport::new(
        &loaded.snapshot,
        0,
        &pool,
        &categories.of_lifetime,
    );
    // Every live block has a category, every free gap none.
    for b in report.segments.iter().flat_map(|s| &s.blocks) {
        assert_eq!(b.category.is_some(), b.state != "inactive", "{}", b.address);
    }
    assert_eq!(
        report.reserved_bytes,
        replay.totals_after(Some(701)).reserved_bytes
    );
}

const MIB: u64 = 1 << 20;

/// The expert verdict on each fixture, from `../shared/docs/diagnosis-casebook.md` (read from the
/// raw data by hand), plus the fragmented `segment_alloc`s that `scripts/detector_figures.py`
/// counts with Python's pickle. Neither comes from memsight.
struct Verdict {
    file: &'static str,
    /// Leaks that must be found: the leaking line (`file:line` of the headline frame), bytes per
    /// iteration, iterations. No other leak may be reported.
    leaks: &'static [(&'static str, u64, u64)],
    /// `empty_cache()` calls: a note with this count, never an allocator stall.
    empty_cache_calls: usize,
    /// Peak reserved − peak allocated (MiB, the casebook's figure) where fragmentation may be
    /// noted at all; `None`: no fragmentation finding.
    fragmentation_gap_mib: Option<u64>,
    /// Fragmented `segment_alloc`s (count, first, last event), from `detector_figures.py` (its
    /// model of the allocator agrees with an auditor's on the files whose trace starts empty).
    fragmented_growth: Option<(usize, u32, u32)>,
    /// Peak allocated (MiB, the casebook's figure), where it gives one.
    peak_allocated_mib: Option<u64>,
    /// Words the peak finding must use for the phase, where the casebook names it.
    peak_phase: Option<&'static str>,
}

const CASEBOOK: &[Verdict] = &[
    // One forward + backward of a 22-layer transformer: the 88 mm_mat2_backward blocks are weight
    // gradients of one backward pass (no leak), the 122 MiB block the logits gradient (no
    // outlier); fragmentation at most a note, 568 MiB; the peak at the end of the forward pass.
    Verdict {
        file: "cuda_2023_no_time.pickle",
        leaks: &[],
        empty_cache_calls: 0,
        fragmentation_gap_mib: Some(568),
        fragmented_growth: Some((152, 26, 3705)),
        peak_allocated_mib: Some(5_604),
        peak_phase: Some("end of the forward pass"),
    },
    // A small image model, nothing to warn about: 25 MiB gap at the peak.
    Verdict {
        file: "cuda_cppframes_snapshotevents.pickle",
        leaks: &[],
        empty_cache_calls: 0,
        fragmentation_gap_mib: Some(25),
        fragmented_growth: Some((3, 99, 757)),
        peak_allocated_mib: Some(103),
        peak_phase: None,
    },
    // An explicit empty_cache() (597 segment_free, nothing waiting), then one forward pass: no
    // stall, no fragmentation worth a warning (≤ 812 MiB after the empty_cache), no leak.
    Verdict {
        file: "cuda_ctx512_forward_mixed.pickle",
        leaks: &[],
        empty_cache_calls: 1,
        fragmentation_gap_mib: Some(812),
        fragmented_growth: Some((590, 635, 6761)),
        peak_allocated_mib: Some(38_014),
        peak_phase: None,
    },
    Verdict {
        file: "cuda_legacy_list.pkl",
        leaks: &[],
        empty_cache_calls: 0,
        fragmentation_gap_mib: None,
        fragmented_growth: None,
        peak_allocated_mib: None,
        peak_phase: None,
    },
    Verdict {
        file: "cuda_modern_compilectx.pickle",
        leaks: &[],
        empty_cache_calls: 0,
        fragmentation_gap_mib: None,
        fragmented_growth: None,
        peak_allocated_mib: None,
        peak_phase: None,
    },
    // The torch_npu leak demo: 40 MiB per iteration from memory_leaks_demo.py:12, three
    // train_one_step iterations, one block each, never freed.
    Verdict {
        file: "npu_snapshot_expandable.pkl",
        leaks: &[("memory_leaks_demo.py:12", 40 * MIB, 3)],
        empty_cache_calls: 0,
        fragmentation_gap_mib: None,
        fragmented_growth: None,
        peak_allocated_mib: None,
        peak_phase: None,
    },
    // The same demo (line 11) with empty_cache() after each step: three explicit calls (info at
    // most), fragmentation 62 MiB at the peak, not 720 MiB (more than the 632 MiB reserved).
    Verdict {
        file: "npu_snapshot_with_empty_cache.pkl",
        leaks: &[("memory_leaks_demo.py:11", 40 * MIB, 3)],
        empty_cache_calls: 3,
        fragmentation_gap_mib: Some(62),
        fragmented_growth: Some((69, 15, 7453)),
        peak_allocated_mib: Some(570),
        peak_phase: None,
    },
];

/// Every verdict of the casebook holds: what must be found is, what must not be is not.
/// The peak finding of a loaded fixture (every traced file has one).
fn peak_finding(loaded: &Loaded) -> memsight_core::detect::Finding {
    memsight_core::detect::analyze(loaded)
        .into_iter()
        .find(|f| f.kind == memsight_core::detect::FindingKind::Peak)
        .expect("a peak finding")
}

/// Iterations from `snapshot` events: `cuda_cppframes_snapshotevents` has 9, at events 582, 1163,
/// 1743, 2323, 2903, 3483, 4063, 4643 and 5223 of 5,803 (read with Python's pickle): ten spans of
/// 580-582 events, the first before any snapshot. Ten iterations, and the peak (event 759) is
/// in the second; it was called "iteration 1 of 9".
#[test]
fn snapshot_events_count_the_iteration_before_the_first_one() {
    let Some(loaded) = load("cuda_cppframes_snapshotevents.pickle") else {
        return;
    };
    let (device, replay) = loaded.replay(0).expect("device 0");
    let categories = memsight_core::category::classify(&loaded.snapshot, device, replay);
    let steps = memsight_core::detect::steps::find(&loaded.snapshot, device, replay, &categories)
        .expect("iterations");
    assert_eq!(
        steps.bounds,
        [0, 582, 1163, 1743, 2323, 2903, 3483, 4063, 4643, 5223, 5803]
    );
    assert_eq!(steps.step_of(759), Some(1));
    let peak = peak_finding(&loaded);
    assert!(
        peak.summary
            .contains("iteration 2 of the trace's 10 iterations"),
        "{}",
        peak.summary
    );
}

/// The peak's call sites are source lines: on `cuda_ctx512_forward_mixed`, the blocks held right
/// after the peak event (6762) whose innermost frame outside torch and site-packages is
/// `transformer.py:22` are 452 (Python's pickle): 451 allocated in the trace (11,175,608,320
/// bytes, replaying `alloc` / `free_completed`) and one of 33,554,432 bytes at 0x7fedfa000000 that
/// the trace never touches, active in the final segment list with that line in its frames. They
/// came from a dozen stacks and were listed apart, each under 1 GiB; the finding also names the
/// line of the allocation that reached the peak, not the largest holder.
#[test]
fn the_peak_lists_call_sites_by_source_line() {
    let Some(loaded) = load("cuda_ctx512_forward_mixed.pickle") else {
        return;
    };
    let peak = peak_finding(&loaded);
    assert!(
        peak.summary.contains(&format!(
            "forward (/home/c-kaitwang/assignment1/cs336_basics/transformer.py:22) {} in 452 blocks",
            memsight_core::units::format_bytes(11_175_608_320 + 33_554_432)
        )),
        "{}",
        peak.summary
    );
    let (device, _) = loaded.replay(0).expect("device 0");
    assert_eq!(peak.focus_event, Some(6762));
    assert_eq!(peak.stack, device.trace.stack[6762]);
}

/// What the forward pass keeps for backward is freed in that iteration; a block still held when
/// its iteration is over is an input, a cache or a leak, not an activation. Figures from an
/// independent audit (Python's pickle): on `cuda_cppframes_snapshotevents` two never-freed
/// 7.5 MiB blocks from `counterfactuals.py:102` (the optimised input image) leave 26.8 MiB of
/// activation at the peak (26 %), not 41.8 MiB: one is the input Adam trains (a parameter), the
/// other retained (held past its iteration); its stackless block from before the trace of
/// cuBLAS's workspace size is a workspace. On `npu_snapshot_expandable` the leaked 41,943,040-byte blocks of events 1, 2932
/// and 5515 are retained, not activations.
#[test]
fn blocks_held_past_their_iteration_are_not_activations() {
    use memsight_core::category::{Category, classify};
    let (Some(cpp), Some(npu)) = (
        load("cuda_cppframes_snapshotevents.pickle"),
        load("npu_snapshot_expandable.pkl"),
    ) else {
        return;
    };
    let peak = peak_finding(&cpp);
    // Adam trains one of the two (its two 7.5 MiB state blocks and a 7.5 MiB gradient; the
    // model's weights are frozen, 246 KiB): a parameter, the trained input; the other stays
    // retained.
    assert!(
        peak.summary.contains("26.8 MiB activation (26%)")
            && peak.summary.contains("7.74 MiB parameter (7%)")
            && peak.summary.contains("7.50 MiB retained (7%)"),
        "{}",
        peak.summary
    );
    // Its stackless 8,519,680-byte block from before the trace is cuBLAS's default workspace
    // (the trace makes one of that size at event 209), not a weight: the weights are then
    // about 0.25 MiB, as the audit found (7.74 MiB with the trained input).
    let (device, replay) = cpp.replay(0).expect("device 0");
    let categories = classify(&cpp.snapshot, device, replay);
    let workspace = replay
        .lifetimes
        .iter()
        .position(|l| l.alloc_event.is_none() && l.requested_size_bytes == 8_519_680)
        .expect("the block from before the trace");
    assert_eq!(categories.of_lifetime[workspace], Category::Workspace);

    let (device, replay) = npu.replay(0).expect("device 0");
    let categories = classify(&npu.snapshot, device, replay);
    for event in [1, 2932, 5515] {
        let (id, l) = replay
            .lifetimes
            .iter()
            .enumerate()
            .find(|(_, l)| l.alloc_event == Some(event))
            .expect("a block allocated there");
        assert_eq!(l.requested_size_bytes, 41_943_040, "event {event}");
        assert_eq!(
            categories.of_lifetime[id],
            Category::Retained,
            "event {event}"
        );
    }
}

/// "With one iteration, a tool can only say that a leak cannot be judged" (the casebook): the
/// single-pass files (`cuda_2023_no_time`: one forward and backward; `cuda_ctx512`: one forward
/// pass; `cuda_modern_compilectx`, per an independent audit) say so in their peak finding; the
/// files with three or more iterations do not.
#[test]
fn single_pass_traces_say_a_leak_cannot_be_judged() {
    for (file, single_pass) in [
        ("cuda_2023_no_time.pickle", true),
        ("cuda_ctx512_forward_mixed.pickle", true),
        ("cuda_modern_compilectx.pickle", true),
        ("cuda_cppframes_snapshotevents.pickle", false),
        ("npu_snapshot_expandable.pkl", false),
        ("npu_snapshot_with_empty_cache.pkl", false),
    ] {
        let Some(loaded) = load(file) else {
            return;
        };
        let peak = peak_finding(&loaded);
        assert_eq!(
            peak.summary.contains("cannot be judged from this trace"),
            single_pass,
            "{file}: {}",
            peak.summary
        );
    }
}

/// The `empty_cache` note's "could have held" counts only new segments that fit in a released
/// one: on `cuda_ctx512_forward_mixed` the 597 released segments are at most 52,428,800 bytes,
/// and of the 638 new ones those that size or smaller total 11,681,136,640 bytes (Python's
/// pickle): the figure is at most that (it said 14.0 GiB, all that was released).
#[test]
fn the_released_cache_serves_only_segments_that_fit() {
    let Some(loaded) = load("cuda_ctx512_forward_mixed.pickle") else {
        return;
    };
    let note = memsight_core::detect::analyze(&loaded)
        .into_iter()
        .find(|f| f.kind == memsight_core::detect::FindingKind::EmptyCache)
        .expect("the empty_cache note");
    let figure = note
        .summary
        .split("could have held about ")
        .nth(1)
        .and_then(|rest| rest.split(" of them").next())
        .expect("the figure");
    let gib: f64 = figure.trim_end_matches(" GiB").parse().expect("GiB");
    assert!(
        gib * f64::from(1u32 << 30) <= 11_681_136_640.0 && gib > 1.0,
        "{}",
        note.summary
    );
}

/// cuBLAS's default workspace (8,519,680 bytes) allocated before the trace, with no stack: two
/// such blocks on `cuda_2023_no_time` and on `cuda_modern_compilectx` (Python's pickle, the final
/// segments), none traced. They are workspaces, so the 2023 file's weights are 1.00 GiB (an
/// independent audit's figure), not 1.02 GiB.
#[test]
fn cublas_workspaces_from_before_the_trace_are_no_weights() {
    for (file, parameter) in [
        ("cuda_2023_no_time.pickle", Some("1.00 GiB parameter (18%)")),
        ("cuda_modern_compilectx.pickle", None),
    ] {
        let Some(loaded) = load(file) else {
            return;
        };
        let peak = peak_finding(&loaded);
        assert!(
            peak.summary.contains("16.2 MiB workspace"),
            "{file}: {}",
            peak.summary
        );
        if let Some(parameter) = parameter {
            assert!(peak.summary.contains(parameter), "{file}: {}", peak.summary);
        }
    }
}

#[test]
fn the_casebook_verdicts_hold_on_every_fixture() {
    use memsight_core::detect::{FindingKind, Severity, analyze, fragmentation::fragmented_growth};
    use memsight_core::frames::headline_frame;
    for expected in CASEBOOK {
        let Some(loaded) = load(expected.file) else {
            return;
        };
        let file = expected.file;
        let findings = analyze(&loaded);
        let of_kind = |kind| findings.iter().filter(move |f| f.kind == kind);
        let busiest = loaded.snapshot.busiest_device().map(|d| d.ordinal);
        let (device, replay) = loaded
            .replay(busiest.expect("a device"))
            .expect("its replay");
        let peak_reserved = replay.peak_reserved.bytes as u64;

        // No fixture recorded an OOM, and none has an allocator stall or an outlier.
        for kind in [
            FindingKind::Oom,
            FindingKind::AllocatorStall,
            FindingKind::OutlierAllocation,
        ] {
            assert_eq!(
                of_kind(kind).count(),
                0,
                "{file}: {kind:?} in {findings:#?}"
            );
        }
        // Only a leak is worth a warning in this corpus.
        for f in &findings {
            assert!(
                f.severity == Severity::Info || f.kind == FindingKind::Leak,
                "{file}: {f:#?}"
            );
        }

        let leaks: Vec<(String, u64)> = of_kind(FindingKind::Leak)
            .map(|f| {
                (
                    headline_frame(&loaded.snapshot, f.stack).unwrap_or_default(),
                    f.bytes,
                )
            })
            .collect();
        assert_eq!(leaks.len(), expected.leaks.len(), "{file}: {leaks:?}");
        for (&(line, per_iteration, iterations), (frame, bytes)) in
            expected.leaks.iter().zip(&leaks)
        {
            assert!(frame.contains(line), "{file}: leak at {frame}, not {line}");
            assert_eq!(*bytes, per_iteration * iterations, "{file}");
        }

        let notes: Vec<_> = of_kind(FindingKind::EmptyCache).collect();
        if expected.empty_cache_calls == 0 {
            assert!(notes.is_empty(), "{file}: {notes:?}");
        } else {
            assert_eq!(notes.len(), 1, "{file}");
            let calls = format!(": {} time", expected.empty_cache_calls);
            assert!(
                notes[0].title.contains(&calls),
                "{file}: {}",
                notes[0].title
            );
        }

        let fragmentation: Vec<_> = of_kind(FindingKind::Fragmentation).collect();
        match expected.fragmentation_gap_mib {
            None => assert!(fragmentation.is_empty(), "{file}: {fragmentation:?}"),
            Some(gap_mib) => {
                assert!(fragmentation.len() <= 1, "{file}");
                if let Some(f) = fragmentation.first() {
                    assert!(
                        f.bytes <= peak_reserved,
                        "{file}: {} above the peak reserved",
                        f.bytes
                    );
                    // The casebook's figure, to the MiB (the 812 MiB of ctx512 is a bound).
                    if file.contains("ctx512") {
                        assert!(f.bytes <= gap_mib * MIB, "{file}: {}", f.bytes);
                    } else {
                        assert_eq!((f.bytes + MIB / 2) / MIB, gap_mib, "{file}");
                    }
                }
            }
        }
        let pad_bytes = memsight_core::whatif::allocator_of(&memsight_core::whatif::Recording {
            snapshot: &loaded.snapshot,
            device,
            replay,
        })
        .pad_bytes;
        let growth = fragmented_growth(&loaded.snapshot, device, replay, pad_bytes);
        let seen = (!growth.is_empty()).then(|| {
            (
                growth.len(),
                growth[0].segment_alloc_event,
                growth[growth.len() - 1].segment_alloc_event,
            )
        });
        assert_eq!(seen, expected.fragmented_growth, "{file}");

        check_peak(expected, &findings, busiest, replay);
        assert!(
            findings.len() <= memsight_core::detect::MAX_FINDINGS,
            "{file}"
        );
    }
}

/// The anatomy of the peak: one per device, adding up to the peak allocated bytes.
fn check_peak(
    expected: &Verdict,
    findings: &[memsight_core::detect::Finding],
    busiest: Option<u32>,
    replay: &memsight_core::DeviceReplay,
) {
    use memsight_core::detect::FindingKind;
    let file = expected.file;
    let peaks: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::Peak)
        .filter(|f| Some(f.device) == busiest)
        .collect();
    // A file without a trace holds only the pool at dump time: its peak is unknown.
    if replay.event_count() == 0 {
        assert!(peaks.is_empty(), "{file}: {peaks:?}");
        return;
    }
    assert_eq!(peaks.len(), 1, "{file}");
    let peak = peaks[0];
    assert_eq!(peak.bytes, replay.peak_allocated.bytes as u64, "{file}");
    assert_eq!(
        peak.breakdown.iter().map(|c| c.bytes).sum::<u64>(),
        peak.bytes,
        "{file}"
    );
    if let Some(mib) = expected.peak_allocated_mib {
        assert_eq!((peak.bytes + MIB / 2) / MIB, mib, "{file}");
    }
    if let Some(words) = expected.peak_phase {
        assert!(peak.summary.contains(words), "{file}: {}", peak.summary);
    }
}

/// Bytes of `category` in a peak finding's breakdown.
fn peak_bytes(peak: &memsight_core::detect::Finding, category: Category) -> u64 {
    peak.breakdown
        .iter()
        .find(|c| c.category == category)
        .map_or(0, |c| c.bytes)
}

/// `cuda_modern_compilectx` holds every weight twice from before the trace, with no stack
/// (Python's pickle, the final segments' requested sizes): 72 × 9,437,184, 96 × 2,359,296,
/// 4 × 30,720,000 and 50 × 3,072 bytes; its backward pass makes half as many blocks of each
/// size and frees them in the pass (a new gradient added into an existing `.grad`). Half of
/// them are gradients kept from an earlier step: 514,501,632 bytes (490.7 MiB, the audit's
/// figure), not weights. `cuda_2023_no_time` (a quantised model that dequantises 44 weights of
/// 2 MiB in backward, 9 % of its weights) has none.
#[test]
fn gradients_from_before_the_trace_are_told_from_weights() {
    let (Some(compiled), Some(quantised)) = (
        load("cuda_modern_compilectx.pickle"),
        load("cuda_2023_no_time.pickle"),
    ) else {
        return;
    };
    let peak = peak_finding(&compiled);
    // Alive through the forward pass (peak at event 1402, backward from 1418) and never freed
    // (the trace has no zero_grad: an audit found "zero_grad() frees them after it" unclear
    // there): the advice names them, says how they were told from weights (111 pairs:
    // 36 + 48 + 2 + 25), and with zero_grad(set_to_none=True) and what it saves; the trace has
    // no optimizer step, so the model's zero_grad (an audit found "optimizer.zero_grad"
    // assumed an optimizer).
    // At 4 % of the peak they follow the largest part's advice, not lead it (batch 33's
    // held-out audit: an xLSTM's 4 % of kept gradients advised before its 82 % of activations).
    assert!(
        !peak.suggestion.starts_with("Gradients")
            && peak.suggestion.contains(
                " Beside that: gradients from an earlier step (491 MiB, 4% of the peak) stay \
                 allocated through this whole forward pass and are never freed in the trace"
            )
            && peak.suggestion.contains(
            "They are gradients, not weights: 111 blocks from before the trace match the weights \
             one for one in size"
        ) && peak
            .suggestion
            .contains("call model.zero_grad(set_to_none=True) before the forward pass:"),
        "{}",
        peak.suggestion
    );
    assert_eq!(
        peak_bytes(&peak, Category::Gradient),
        36 * 9_437_184 + 48 * 2_359_296 + 2 * 30_720_000 + 25 * 3_072,
        "{:?}",
        peak.breakdown
    );
    let peak = peak_finding(&quantised);
    assert_eq!(
        peak_bytes(&peak, Category::Gradient),
        0,
        "{:?}",
        peak.breakdown
    );
}

/// `cuda_ctx512_forward_mixed` runs under autocast: at its peak (event 6762) the blocks made by
/// `at::autocast::cached_cast` with half the bytes of a weight from before the trace are
/// 65 × 5,120, 128 × 13,107,200, 96 × 52,428,800 and 1 × 51,200,000 bytes (Python's pickle,
/// `scripts/category_figures.py`): 6,762,419,200 bytes (6.30 GiB) of bf16 weight copies, which
/// an audit found counted as activations. Every layer's tensors are alive at the end of the
/// forward pass (32 softmax outputs of `transformer.py:138`): what autograd keeps where it
/// records (or a model's own lists, which the file cannot tell apart), and autograd would save
/// those copies for backward: the advice leads with what the pass keeps, does not offer
/// `cache_enabled=False` as a fix, and, autocast being on, does not suggest fp16 / bf16.
#[test]
fn autocast_weight_copies_are_named() {
    let Some(loaded) = load("cuda_ctx512_forward_mixed.pickle") else {
        return;
    };
    let peak = peak_finding(&loaded);
    assert_eq!(
        peak_bytes(&peak, Category::WeightCopy),
        65 * 5_120 + 128 * 13_107_200 + 96 * 52_428_800 + 51_200_000,
        "{:?}",
        peak.breakdown
    );
    let advice = &peak.suggestion;
    assert!(
        advice.starts_with("The largest part of the peak is tensors a pass keeps alive at once")
            && advice
                .contains("what a forward pass keeps for backward where autograd is recording")
            && advice.contains("activation checkpointing")
            && advice.contains("Autocast also made a 16-bit copy of each fp32 weight")
            && advice.contains("cache_enabled=False would not free them")
            && advice.contains("model.to(torch.bfloat16)")
            && !advice.contains("fp16 / bf16 tensors"),
        "{advice}"
    );
}

/// Peaks whose advice an audit found misfit: on the NPU leak demo the largest part is optimizer
/// state at 32 % (no part dominates), and 161 blocks from `_multi_tensor_adam` (`adam.py:703`,
/// 89.8 MiB, 16 %) are the optimizer step's temporaries: the advice names `foreach=False` /
/// `fused=True`, and never mixed precision for model state (it keeps fp32 weights, gradients and
/// Adam moments). On `cuda_cppframes_snapshotevents` no part reaches a third (activation 26 %):
/// nothing to advise beyond the call sites.
#[test]
fn peak_advice_fits_the_file() {
    let (Some(npu), Some(cpp)) = (
        load("npu_snapshot_expandable.pkl"),
        load("cuda_cppframes_snapshotevents.pickle"),
    ) else {
        return;
    };
    let advice = peak_finding(&npu).suggestion;
    assert!(
        advice.contains("multi-tensor (_foreach_*) temporaries hold 89.8 MiB (16% of the peak)")
            && advice.contains("foreach=False")
            && !advice.contains("Mixed precision"),
        "{advice}"
    );
    // The casebook: "nothing to warn about" (a 25 MiB gap at the peak): said, and the call
    // sites are only for a peak that must come down.
    let peak = peak_finding(&cpp);
    assert!(
        peak.suggestion.starts_with(
            "Only if the peak must come down (to fit a smaller device, a larger batch or longer \
             inputs): no one part dominates this peak (the largest, activation, is 26%)"
        ) && peak
            .summary
            .contains("Nothing on this device needs fixing for memory"),
        "{}",
        peak.suggestion
    );
    // Ten iterations (snapshot events), and the allocated low point of the 2nd to the 10th is
    // 48,748,928 bytes each time (Python's replay; an audit's 46.49 MiB): the verdict "no leak".
    assert!(
        peak.summary.contains(&format!(
            "No leak: the allocated low point of iterations 2 to 10 stays at {},",
            memsight_core::units::format_bytes(48_748_928)
        )),
        "{}",
        peak.summary
    );
    // The allocated maximum (108,258,676 bytes, an audit's replay) comes at events 759, 1339,
    // …, 5399, one in each iteration after a `snapshot` event at 582, 1163, …, 5223 (Python's
    // pickle): every iteration from the 2nd reaches the peak. A second audit found "where to
    // look first" advice out of place for a steady 103 MiB job: the advice says it is small.
    assert!(
        peak.summary.contains(&format!(
            "Each of these iterations also reaches the peak (its high point is {})",
            memsight_core::units::format_bytes(108_258_676)
        )) && peak.suggestion.ends_with(
            "At 103 MiB, this peak is small for today's GPUs and NPUs: lowering it matters on a \
             small device, one shared with other jobs, or where this run is a scaled-down copy \
             of a larger one (what grows with the batch, the sequence or the vocabulary here \
             grows there)."
        ),
        "{}\n{}",
        peak.summary,
        peak.suggestion
    );
}

/// Attention written out in the program keeps its seq × seq scores and probabilities: at the
/// peak of `cuda_ctx512_forward_mixed` (event 6762), blocks made inside the program's own
/// `scaled_dot_product_attention` (transformer.py) hold 8,547,991,552 bytes, 4,320,133,120 of them
/// from its softmax; on `cuda_modern_compilectx` (event 1402, model.py) 2,732,064,768 and
/// 2,430,074,880 (`scripts/category_figures.py`, Python's pickle; two audits found this
/// missing). The advice names `PyTorch`'s fused `scaled_dot_product_attention`. `cuda_2023_no_time`
/// runs Llama's attention from a library: no such advice.
#[test]
fn attention_written_out_in_the_program_is_named() {
    use memsight_core::units::format_bytes;
    for (file, script, bytes, softmax, percent) in [
        (
            "cuda_ctx512_forward_mixed.pickle",
            "transformer.py",
            8_547_991_552,
            4_320_133_120,
            21,
        ),
        (
            "cuda_modern_compilectx.pickle",
            "model.py",
            2_732_064_768,
            2_430_074_880,
            20,
        ),
    ] {
        let Some(loaded) = load(file) else {
            return;
        };
        let advice = peak_finding(&loaded).suggestion;
        assert!(
            advice.contains(&format!(
                "The program implements attention by hand (matmul and softmax): blocks made \
                 inside its own function scaled_dot_product_attention ({script}) hold {} \
                 ({percent}% of the peak), {} of them made by its softmax.",
                format_bytes(bytes),
                format_bytes(softmax)
            )) && advice.contains("torch.nn.functional.scaled_dot_product_attention"),
            "{file}: {advice}"
        );
    }
    // Autograd keeps every layer's scores there: the softmax line `transformer.py:138` has 32
    // blocks alive at the peak, one per layer (an audit's count). Under `no_grad` a layer frees
    // its own, and the advice says the scores are made while a layer runs instead.
    if let Some(loaded) = load("cuda_ctx512_forward_mixed.pickle") {
        let advice = peak_finding(&loaded).suggestion;
        assert!(
            advice.contains(
                "attention keeps the seq × seq scores and probabilities of every layer (here \
                 one softmax line has 32 blocks alive at the peak)"
            ),
            "{advice}"
        );
    }
    let Some(library) = load("cuda_2023_no_time.pickle") else {
        return;
    };
    let advice = peak_finding(&library).suggestion;
    assert!(!advice.contains("implements attention by hand"), "{advice}");
}

/// `cuda_legacy_list`'s blocks carry call stacks (805 of 2,140, Python's pickle): history was
/// recorded, the file is the segment list alone. The advice is to dump the snapshot with its
/// trace, not to start recording. The finding names what the live blocks are: 800 blocks from
/// `ptp_utils.py:258`, 1,172,455,424 B (1.09 GiB) in block sizes, as the pool's live total
/// counts them (1.08 GiB requested; an independent audit, Python's pickle).
#[test]
fn a_segment_list_with_stacks_is_told_to_dump_the_trace() {
    let Some(loaded) = load("cuda_legacy_list.pkl") else {
        return;
    };
    let findings = memsight_core::detect::analyze(&loaded);
    assert!(
        findings
            .iter()
            .any(|f| f.suggestion.contains("_dump_snapshot(path)")
                && f.suggestion.contains("history was recorded")
                && f.summary.contains(
                    "(/home/emarchidan/LayoutEditing/ptp_utils.py:258) 1.09 GiB in 800 blocks"
                )),
        "{findings:?}"
    );
}

/// Issue 32 (the casebook's audit of `cuda_decomfl_adam`): the 196 blocks of
/// `adam_forward.py:168` alive at the peak (event 11205), 500,957,184 bytes, were made by the
/// gradient estimator's `__init__` (events 218–431, Python's pickle) and live 11–15 k events of a
/// trace with no backward pass: long-lived state, not temporaries, and no "compute it in
/// chunks" advice for them.
#[test]
fn state_a_constructor_makes_is_not_temporary() {
    let Some(loaded) = load("cuda_decomfl_adam.pickle") else {
        return;
    };
    let peak = peak_finding(&loaded);
    assert_eq!(peak.events.0, 11205);
    assert_eq!(peak_bytes(&peak, Category::LongLived), 500_957_184);
    assert!(
        !peak.suggestion.contains("in chunks") || !peak.suggestion.contains("adam_forward.py:168"),
        "{}",
        peak.suggestion
    );
    // With no backward pass, what is kept to the end has no phase to tell it by: the idle
    // cache gives no split of it (the estimator's state, re-made in each update, would read
    // "activation").
    let findings = memsight_core::detect::analyze(&loaded);
    let idle = findings
        .iter()
        .find(|f| f.kind == memsight_core::detect::FindingKind::IdleCache)
        .expect("the idle cache at the end");
    assert!(
        !idle.summary.contains("still allocated at the end"),
        "{}",
        idle.summary
    );
}

/// Issue 32 (the casebook's audit of `cuda_4gpu_expandable_oom`): on device 1, 87 of the 111
/// traced blocks alive at the peak (event 420), 83,659,845,648 bytes, are freed only after the
/// `oom` at event 421 (Python's pickle): the exception's unwind freed them, so they are what
/// the forward pass held, activations as on device 2, not "100 % temporary". The failing
/// request runs under `nn.DataParallel`: the advice names `DistributedDataParallel`. The file's
/// `Optimizer.zero_grad#AdamW.zero_grad` annotation shows training.
#[test]
fn blocks_freed_by_an_oom_unwind_are_activations() {
    let Some(loaded) = load("cuda_4gpu_expandable_oom.pickle") else {
        return;
    };
    let findings = memsight_core::detect::analyze(&loaded);
    let peak = findings
        .iter()
        .find(|f| f.kind == memsight_core::detect::FindingKind::Peak && f.device == 1)
        .expect("device 1's peak");
    assert_eq!(
        peak_bytes(peak, Category::Temporary),
        0,
        "{:?}",
        peak.breakdown
    );
    assert!(peak_bytes(peak, Category::Activation) >= 83_659_845_648);
    let oom = findings
        .iter()
        .find(|f| f.kind == memsight_core::detect::FindingKind::Oom)
        .expect("the OOM");
    assert!(
        oom.suggestion.contains("DistributedDataParallel"),
        "{}",
        oom.suggestion
    );
    assert!(
        findings
            .iter()
            .filter(|f| f.kind == memsight_core::detect::FindingKind::Peak)
            .all(|f| !f.summary.contains("trace with no backward pass")),
        "{findings:#?}"
    );
}

/// Issue 32 (the casebook's audit of `cuda_medium_1024_training`): every weight is 1.58 GiB in
/// fp32, so autocast's bf16 copies can hold at most half of that; the real copies at the peak
/// are 95 × 2 MiB + 72 × 8 MiB = 766 MiB. The other 8 MiB casts are saved activations.
#[test]
fn weight_copies_never_exceed_a_copy_per_weight() {
    let Some(loaded) = load("cuda_medium_1024_training.pickle") else {
        return;
    };
    let peak = peak_finding(&loaded);
    let copies = peak_bytes(&peak, Category::WeightCopy);
    assert_eq!(
        copies,
        95 * (2 << 20) + 72 * (8 << 20),
        "{:?}",
        peak.breakdown
    );
    assert!(copies * 2 <= peak_bytes(&peak, Category::Parameter) + (1 << 20));
}

/// Issue 32 (the casebook's audit of `cuda_notrace_fragmented`): a dict with empty device traces
/// is what `_dump_snapshot` writes, not `memory_snapshot()`; only 3 of 2,524 live blocks carry
/// stacks (Python's pickle), so history was switched on just before the dump, and the advice is
/// to record with the default `enabled='all'` from the start. The idle figures stay exact.
#[test]
fn how_a_file_was_recorded_is_read_from_it() {
    let Some(loaded) = load("cuda_notrace_fragmented.pickle") else {
        return;
    };
    let findings = memsight_core::detect::analyze(&loaded);
    let idle = findings
        .iter()
        .find(|f| f.kind == memsight_core::detect::FindingKind::IdleCache)
        .expect("an idle-cache finding");
    assert!(
        idle.summary.contains("_dump_snapshot()")
            && idle
                .summary
                .contains("only 3 of its 2524 live blocks carry call stacks")
            && idle.summary.contains("switched on shortly before the dump")
            && !idle.summary.contains("memory_snapshot()")
            && idle.suggestion.contains("enabled='all'")
            && idle
                .summary
                .contains("5.88 GiB in 53 completely free segments"),
        "{idle:#?}"
    );
}

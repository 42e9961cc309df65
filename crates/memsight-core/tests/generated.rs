//! Generated snapshots of every scenario load back exactly as the generator's allocator model
//! recorded them, with protocol 4 and 5, plain and gzip; and the ground truth points at real
//! events. Runs everywhere (no corpus needed).

use std::collections::BTreeMap;
use std::path::Path;

use memsight_core::r#gen::{self, GenOptions, Generated, Scenario};
use memsight_core::model::{Action, BlockState, WarningKind};
use memsight_core::{Loaded, load_bytes, load_path};

/// A segment as (address, size, blocks as (address, size, allocated)).
type SegmentShape = (u64, u64, Vec<(u64, u64, bool)>);

fn generate(scenario: Scenario, events: usize, protocol: u8) -> (Generated, Loaded) {
    let g = r#gen::generate(&GenOptions {
        scenario,
        events,
        seed: 11,
        protocol,
        ..GenOptions::default()
    });
    let bytes = g.write_pickle(Vec::new()).expect("in-memory write");
    let snapshot = load_bytes(&bytes, Path::new(scenario.name())).unwrap_or_else(|e| panic!("{e}"));
    (g, Loaded::new(snapshot))
}

#[test]
fn every_scenario_round_trips_event_for_event() {
    for scenario in Scenario::ALL {
        for protocol in [4, 5] {
            let (g, loaded) = generate(scenario, 6000, protocol);
            let ctx = format!("{} protocol {protocol}", scenario.name());
            let s = &loaded.snapshot;
            assert_eq!(s.format.protocol, protocol, "{ctx}");
            assert_eq!(s.devices.len(), 1, "{ctx}");
            let t = &s.devices[0].trace;
            assert_eq!(t.len(), g.allocator.trace.len(), "{ctx}");
            let want_events = if scenario == Scenario::TracelessIdle {
                0
            } else {
                6000
            };
            assert_eq!(t.len(), want_events, "{ctx}");
            for (i, e) in g.allocator.trace.iter().enumerate() {
                assert_eq!(
                    (
                        t.action[i],
                        t.addr[i] * u64::from(e.action != Action::Oom),
                        t.size_bytes[i]
                    ),
                    (
                        e.action,
                        e.addr * u64::from(e.action != Action::Oom),
                        e.size
                    ),
                    "{ctx} event {i}"
                );
                assert_eq!(s.streams[t.stream[i] as usize], e.stream, "{ctx} event {i}");
            }
            let want: Vec<SegmentShape> = g
                .allocator
                .segments
                .iter()
                .filter(|(_, seg)| seg.size > 0)
                .map(|(&a, seg)| {
                    (
                        a,
                        seg.size,
                        seg.blocks
                            .iter()
                            .map(|(&b, blk)| (b, blk.size, blk.allocated))
                            .collect(),
                    )
                })
                .collect();
            let got: Vec<SegmentShape> = s.devices[0]
                .segments
                .iter()
                .map(|seg| {
                    (
                        seg.address,
                        seg.total_size_bytes,
                        seg.blocks
                            .iter()
                            .map(|b| {
                                (
                                    b.address,
                                    b.size_bytes,
                                    b.state == BlockState::ActiveAllocated,
                                )
                            })
                            .collect(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{ctx}: final segments");
            let disagreements: Vec<String> = loaded
                .warnings
                .iter()
                .filter(|w| w.kind == WarningKind::TraceDisagreesWithSegments)
                .map(ToString::to_string)
                .collect();
            // The edited file's trace disagrees with its segments by design.
            assert_eq!(
                disagreements.is_empty(),
                scenario != Scenario::Inconsistent,
                "{ctx}: {disagreements:?}"
            );
        }
    }
}

#[test]
fn ground_truth_points_at_the_injected_events() {
    let (g, loaded) = generate(Scenario::Leak, 20_000, 4);
    let s = &loaded.snapshot;
    let t = &s.devices[0].trace;
    let leak = g.truth.leak.as_ref().expect("leak truth");
    assert!(
        leak.alloc_events.len() >= 40,
        "one leak per step: {}",
        leak.alloc_events.len()
    );
    for &i in &leak.alloc_events {
        let i = i as usize;
        assert_eq!(t.action[i], Action::Alloc);
        assert_eq!(t.size_bytes[i], leak.bytes_per_step);
        let frames: Vec<(String, i64, String)> = s
            .stack_frames(t.stack[i])
            .map(|f| {
                (
                    s.str(f.filename).to_string(),
                    f.line,
                    s.str(f.name).to_string(),
                )
            })
            .collect();
        let truth: Vec<(String, i64, String)> = leak
            .stack
            .iter()
            .map(|f| (f.filename.clone(), i64::from(f.line), f.name.clone()))
            .collect();
        assert_eq!(frames, truth);
        // Never freed: the lifetime runs to the end.
        let lifetime = &loaded.replays[0].lifetimes[loaded.replays[0].event_lifetime[i] as usize];
        assert_eq!(lifetime.free_completed_event, None);
    }

    let (g, loaded) = generate(Scenario::Oom, 20_000, 4);
    let oom = g.truth.oom.as_ref().expect("oom truth");
    let t = &loaded.snapshot.devices[0].trace;
    assert_eq!(t.action[oom.event as usize], Action::Oom);
    assert_eq!(t.size_bytes[oom.event as usize], oom.requested_bytes);
    assert_eq!(
        t.oom_device_free_bytes,
        vec![(oom.event as u32, oom.device_free_bytes)]
    );

    let (g, loaded) = generate(Scenario::Stall, 60_000, 4);
    assert!(!g.truth.stalls.is_empty(), "the stall scenario stalls");
    let t = &loaded.snapshot.devices[0].trace;
    let replay = &loaded.replays[0];
    for stall in &g.truth.stalls {
        for i in stall.first_event..=stall.last_event {
            assert_eq!(t.action[i as usize], Action::SegmentFree, "event {i}");
        }
        let before = replay.totals_after(stall.first_event.checked_sub(1).map(|n| n as u32));
        let after = replay.totals_after(Some(stall.last_event as u32));
        assert_eq!(before.reserved_bytes as u64, stall.reserved_before_bytes);
        assert_eq!(after.reserved_bytes as u64, stall.reserved_after_bytes);
        assert_eq!(
            before.allocated_bytes, after.allocated_bytes,
            "allocated unchanged during a stall"
        );
    }
}

#[test]
fn npu_files_look_like_torch_npu() {
    let (_, loaded) = generate(Scenario::Npu, 5000, 4);
    let s = &loaded.snapshot;
    let t = &s.devices[0].trace;
    assert!(!t.has_time());
    assert_eq!(
        &t.action[..3],
        &[
            Action::WorkspaceSnapshot,
            Action::SegmentAlloc,
            Action::Alloc
        ]
    );
    assert_eq!(s.streams, vec![1_815_786_048]);
    assert!(s.annotations.is_empty() && s.allocator_settings.is_empty());
}

#[test]
fn annotations_and_settings_are_read() {
    let (g, loaded) = generate(Scenario::Expandable, 5000, 5);
    let s = &loaded.snapshot;
    assert!(s.annotations.len() >= 2 && s.annotations[0].name.starts_with("ProfilerStep#"));
    let expandable = s
        .allocator_settings
        .iter()
        .find(|(k, _)| k == "expandable_segments")
        .map(|(_, v)| v.clone());
    assert_eq!(
        expandable,
        Some(memsight_core::model::SettingValue::Bool(true))
    );
    let counts: BTreeMap<Action, usize> =
        g.allocator.trace.iter().fold(BTreeMap::new(), |mut m, e| {
            *m.entry(e.action).or_default() += 1;
            m
        });
    assert!(counts.contains_key(&Action::SegmentMap), "{counts:?}");
    assert!(s.devices[0].segments.iter().all(|seg| seg.is_expandable));
}

#[test]
fn gzip_files_load_transparently() {
    let dir = std::env::temp_dir().join(format!("memsight-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("steady.pickle.gz");
    let g = r#gen::generate(&GenOptions {
        scenario: Scenario::Steady,
        events: 3000,
        seed: 3,
        protocol: 4,
        ..GenOptions::default()
    });
    let truth = g
        .write_files(&path)
        .expect("write")
        .expect("a regular file has its truth beside it");
    let snapshot = load_path(&path, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(snapshot.format.gzip);
    assert_eq!(snapshot.devices[0].trace.len(), 3000);
    assert!(
        std::fs::read_to_string(&truth)
            .expect("truth written")
            .contains("\"scenario\": \"steady\"")
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn a_load_can_be_cancelled() {
    let g = r#gen::generate(&GenOptions {
        scenario: Scenario::Steady,
        events: 20_000,
        seed: 1,
        protocol: 4,
        ..GenOptions::default()
    });
    let bytes = g.write_pickle(Vec::new()).expect("in-memory write");
    let progress = memsight_core::LoadProgress::default();
    progress
        .cancel
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let err =
        memsight_core::load_reader(bytes.as_slice(), Path::new("big.pickle"), Some(&progress))
            .expect_err("cancelled");
    assert_eq!(err.to_string(), "loading was cancelled, in big.pickle");
    // Progress is reported while it runs.
    let progress = memsight_core::LoadProgress::default();
    memsight_core::load_reader(bytes.as_slice(), Path::new("big.pickle"), Some(&progress))
        .expect("loads");
    assert!(
        progress
            .bytes_read
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    assert!(
        progress
            .events_read
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
}

#[test]
fn range_analysis_finds_the_injected_leak() {
    let (g, loaded) = generate(Scenario::Leak, 20_000, 4);
    let leak = g.truth.leak.as_ref().expect("leak truth");
    let replay = &loaded.replays[0];
    let (first, last) = (leak.alloc_events[2] as u32, leak.alloc_events[12] as u32);
    let report = memsight_core::range::RangeReport::new(replay, first, last);
    // Every leaked allocation of the range is reported under the leak's stack, and that stack
    // holds no other allocation of the range.
    let leaked_here = leak
        .alloc_events
        .iter()
        .filter(|&&e| (u64::from(first)..=u64::from(last)).contains(&e))
        .count() as u64;
    let stack = loaded.snapshot.devices[0].trace.stack[leak.alloc_events[2] as usize];
    let group = report
        .by_stack
        .iter()
        .find(|g| g.stack == stack)
        .expect("the leak's stack is reported");
    assert_eq!(group.count, leaked_here);
    assert_eq!(group.bytes, leaked_here * leak.bytes_per_step);
}

/// The recall / false-alarm table in BENCHMARKS.md (`examples/detector_recall.rs`, same suite):
/// every injected leak, stall, OOM, fragmented `segment_alloc` and extreme request found, every
/// edited file flagged and every traceless pool's idle bytes found to the byte; the clean runs
/// quiet; fragmentation's false alarms (its free-byte estimate can run up to 1 MiB per unsplit
/// large block high) no more than recorded (22 of 1,431: the replaced-Adam loop added 39
/// fragmented `segment_alloc`s and no false alarm).
#[test]
fn detectors_hold_their_recall_over_the_seeded_suite() {
    let table = memsight_core::r#gen::score::score_suite(1..=10, 50_000);
    for row in &table {
        assert_eq!(row.missed(), 0, "{row:?}");
        let allowed = if row.kind == "fragmentation" { 22 } else { 0 };
        assert!(row.false_alarms <= allowed, "{row:?}");
    }
    let injected: Vec<usize> = table.iter().map(|r| r.injected).collect();
    assert_eq!(
        injected,
        [40, 1431, 20, 10, 10, 10, 10, 0],
        "the suite itself changed: {table:?}"
    );
}

/// The realistic transformer loop (layers sharing call sites, a varying op mix and sequence
/// lengths, gradient accumulation, `AdamW` state made in the first step, gradients kept until
/// `zero_grad`): clean runs give no leak, no stall, no outlier; the injected leak is found at its
/// call site — with annotations, and without them (iterations from the optimizer steps in the
/// stacks), with C++ frames (even seeds) and without (odd seeds: backward has no stacks).
#[test]
fn the_transformer_loop_is_judged_right_with_and_without_annotations() {
    use memsight_core::detect::{FindingKind, analyze};
    for seed in 1..=4 {
        for scenario in [Scenario::Transformer, Scenario::TransformerLeak] {
            let (g, loaded) = r#gen::generate_loaded(scenario, 40_000, seed);
            let mut bare = loaded.snapshot.clone();
            bare.annotations.clear();
            let bare = memsight_core::Loaded::new(bare);
            for (label, l) in [("annotated", &loaded), ("without annotations", &bare)] {
                let findings = analyze(l);
                let of_kind = |kind| {
                    findings
                        .iter()
                        .filter(move |f| f.kind == kind)
                        .collect::<Vec<_>>()
                };
                let case = format!("{} seed {seed} {label}", scenario.name());
                for kind in [
                    FindingKind::AllocatorStall,
                    FindingKind::OutlierAllocation,
                    FindingKind::Oom,
                ] {
                    assert!(of_kind(kind).is_empty(), "{case}: {findings:#?}");
                }
                let leaks = of_kind(FindingKind::Leak);
                match &g.truth.leak {
                    None => assert!(leaks.is_empty(), "{case}: {leaks:#?}"),
                    Some(truth) => {
                        assert_eq!(leaks.len(), 1, "{case}: {findings:#?}");
                        assert!(
                            truth.is_stack(&l.snapshot, leaks[0].stack),
                            "{case}: {leaks:#?}"
                        );
                        assert!(
                            leaks[0].title.contains("256 KiB per iteration"),
                            "{case}: {}",
                            leaks[0].title
                        );
                    }
                }
            }
        }
    }
}

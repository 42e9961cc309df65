//! Scores the detectors against the generator's ground truth over a seeded suite: for each kind,
//! how many injected problems were found, missed, and how many findings had nothing behind them.
//! `examples/detector_recall.rs` prints the table for BENCHMARKS.md; a test holds it.

use std::collections::BTreeSet;

use crate::detect::{self, FindingKind};

use super::{Scenario, generate_loaded};

/// One row of the table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Score {
    pub kind: &'static str,
    /// What counts as one injected problem.
    pub unit: &'static str,
    pub injected: usize,
    pub found: usize,
    pub false_alarms: usize,
}

impl Score {
    pub fn missed(&self) -> usize {
        self.injected.saturating_sub(self.found)
    }
}

/// Runs every scenario for every seed at `events` events and scores each kind.
#[expect(
    clippy::too_many_lines,
    reason = "one pass over the suite, a block per kind"
)]
pub fn score_suite(seeds: std::ops::RangeInclusive<u64>, events: usize) -> Vec<Score> {
    let mut leak = Score {
        kind: "leak",
        unit: "leaking call site (one per leak run, with and without annotations), matched by its full stack",
        ..Score::default()
    };
    let mut fragmentation = Score {
        kind: "fragmentation",
        unit: "segment_alloc made while the cache held enough in pieces",
        ..Score::default()
    };
    let mut stall = Score {
        kind: "allocator_stall",
        unit: "run with free-everything-and-retry bursts (one finding per device: the worst)",
        ..Score::default()
    };
    let mut oom = Score {
        kind: "oom",
        unit: "failed request (one per oom run)",
        ..Score::default()
    };
    let mut outlier = Score {
        kind: "outlier_allocation",
        unit: "largest request of an extreme-length step (fragmentation runs); false alarm: a flagged request that is no extreme input",
        ..Score::default()
    };
    let mut integrity = Score {
        kind: "integrity",
        unit: "edited file whose trace allocates far more than its segments hold (one per inconsistent run); false alarm: an integrity warning on any other run",
        ..Score::default()
    };
    let mut idle = Score {
        kind: "idle_cache",
        unit: "pool without a trace, mostly idle (one per traceless-idle run), found with its idle bytes to the byte",
        ..Score::default()
    };
    let mut clean = Score {
        kind: "problems, on the clean runs (steady, transformer, transformer with periodic cache releases, inference, late zero_grad, kept gradients, replaced Adam state; with and without annotations)",
        unit: "leak, stall or outlier finding, or any warning or error",
        ..Score::default()
    };
    for scenario in Scenario::ALL {
        for seed in seeds.clone() {
            let (g, loaded) = generate_loaded(scenario, events, seed);
            let truth = &g.truth;
            let findings = detect::analyze(&loaded);
            let s = &loaded.snapshot;
            let of_kind = |kind| findings.iter().filter(move |f| f.kind == kind);
            // The same recording without annotations: iterations must come from the stacks.
            let bare = {
                let mut snapshot = loaded.snapshot.clone();
                snapshot.annotations.clear();
                crate::Loaded::new(snapshot)
            };
            let bare_findings = detect::analyze(&bare);
            if matches!(
                scenario,
                Scenario::Steady
                    | Scenario::Transformer
                    | Scenario::TransformerReleases
                    | Scenario::TransformerInference
                    | Scenario::TransformerLateZeroGrad
                    | Scenario::TransformerKeptGrads
                    | Scenario::TransformerReplacedAdam
            ) {
                clean.false_alarms += findings
                    .iter()
                    .chain(&bare_findings)
                    .filter(|f| {
                        f.severity > detect::Severity::Info
                            || matches!(
                                f.kind,
                                FindingKind::Leak
                                    | FindingKind::AllocatorStall
                                    | FindingKind::OutlierAllocation
                            )
                    })
                    .count();
            }

            leak.injected += 2 * usize::from(truth.leak.is_some());
            for f in findings
                .iter()
                .chain(&bare_findings)
                .filter(|f| f.kind == FindingKind::Leak)
            {
                if truth.leak.as_ref().is_some_and(|l| l.is_stack(s, f.stack)) {
                    leak.found += 1;
                } else {
                    leak.false_alarms += 1;
                }
            }

            let device = &s.devices[0];
            // The releases scenario is a trap for the stall detector; its generator does not
            // track which segment_allocs its cache releases made fragmented (not scored here).
            // An edited trace and no trace have no growth to score.
            let unscored = matches!(
                scenario,
                Scenario::TransformerReleases | Scenario::Inconsistent | Scenario::TracelessIdle
            );
            let flagged: BTreeSet<u64> = if unscored {
                BTreeSet::new()
            } else {
                // The generator writes CUDA's allocator: no padding.
                detect::fragmentation::fragmented_growth(
                    &loaded.snapshot,
                    device,
                    &loaded.replays[0],
                    0,
                )
                .iter()
                .map(|f| u64::from(f.segment_alloc_event))
                .collect()
            };
            let injected: BTreeSet<u64> = if unscored {
                BTreeSet::new()
            } else {
                truth
                    .fragmented_segment_allocs
                    .iter()
                    .map(|f| f.segment_alloc_event)
                    .collect()
            };
            fragmentation.injected += injected.len();
            fragmentation.found += injected.intersection(&flagged).count();
            fragmentation.false_alarms += flagged.difference(&injected).count();

            stall.injected += usize::from(!truth.stalls.is_empty());
            for f in of_kind(FindingKind::AllocatorStall) {
                if truth
                    .stalls
                    .iter()
                    .any(|t| t.first_event == u64::from(f.events.0))
                {
                    stall.found += 1;
                } else {
                    stall.false_alarms += 1;
                }
            }

            oom.injected += usize::from(truth.oom.is_some());
            for f in of_kind(FindingKind::Oom) {
                if truth
                    .oom
                    .as_ref()
                    .is_some_and(|t| t.event == u64::from(f.events.0))
                {
                    oom.found += 1;
                } else {
                    oom.false_alarms += 1;
                }
            }

            let contradictions = findings
                .iter()
                .chain(&bare_findings)
                .filter(|f| f.kind == FindingKind::Integrity && f.severity > detect::Severity::Info)
                .count();
            if truth.inconsistent.is_some() {
                integrity.injected += 1;
                integrity.found += usize::from(contradictions > 0);
            } else {
                integrity.false_alarms += contradictions;
            }

            idle.injected += usize::from(truth.idle.is_some());
            // A traced pool's idle cache at the end is not what this row scores.
            let traceless = |ordinal: u32| {
                s.devices.iter().any(|d| {
                    d.ordinal == ordinal && !d.trace.action.contains(&crate::model::Action::Alloc)
                })
            };
            for f in of_kind(FindingKind::IdleCache).filter(|f| traceless(f.device)) {
                if truth.idle.as_ref().is_some_and(|t| t.idle_bytes == f.bytes) {
                    idle.found += 1;
                } else {
                    idle.false_alarms += 1;
                }
            }

            let trace = &device.trace;
            let flagged: Vec<&detect::Finding> = of_kind(FindingKind::OutlierAllocation).collect();
            if scenario == Scenario::Fragmentation
                && let Some(&largest) = truth
                    .extreme_requests
                    .iter()
                    .max_by_key(|&&e| trace.size_bytes[e as usize])
            {
                outlier.injected += 1;
                let size = trace.size_bytes[largest as usize];
                outlier.found += usize::from(flagged.iter().any(|f| f.bytes == size));
            }
            for f in flagged {
                let extreme = f
                    .focus_event
                    .is_some_and(|e| truth.extreme_requests.contains(&u64::from(e)));
                outlier.false_alarms += usize::from(!extreme);
            }
        }
    }
    vec![
        leak,
        fragmentation,
        stall,
        oom,
        outlier,
        integrity,
        idle,
        clean,
    ]
}

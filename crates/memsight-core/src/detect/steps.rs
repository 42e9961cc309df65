//! Training-step boundaries, which the leak and outlier detectors reason in.
//!
//! In order of trust: `ProfilerStep#N` annotations (files with times), `snapshot` events, and
//! failing both, the loop's own rhythm: a training loop allocates from the same call sites in the
//! same order every step, so a call site hit exactly once per step recurs at a steady interval.
//! The longest such interval that two or more call sites agree on is the step (or, where no two
//! agree, the longest one that recurs often). Its boundaries go where the fewest blocks cross
//! from one step into the next, and the steps must free most of what they allocate and come back
//! down to where they started — a layer of the forward pass also recurs steadily, but its
//! activations outlive it.

use rustc_hash::FxHashMap;

use crate::model::{Action, AnnotationStage, Device, NO_STACK, NO_TIME, Snapshot, StackId};
use crate::replay::DeviceReplay;

/// Where the boundaries came from, for the findings to say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepSource {
    Annotations,
    SnapshotEvents,
    /// Inferred from call sites that recur once per step.
    Rhythm,
}

/// Step k covers events `bounds[k]..bounds[k + 1]`; the last bound is the trace length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steps {
    pub bounds: Vec<u32>,
    pub source: StepSource,
}

impl Steps {
    pub fn count(&self) -> usize {
        self.bounds.len().saturating_sub(1)
    }

    /// The step holding event `e`; `None` before the first boundary.
    pub fn step_of(&self, e: u32) -> Option<usize> {
        self.bounds
            .partition_point(|&b| b <= e)
            .checked_sub(1)
            .filter(|&k| k < self.count())
    }
}

/// Fewest recurrences that make a call site's interval count as a rhythm.
const MIN_RECURRENCES: usize = 3;
/// A call site no other agrees with must recur this often to set the step on its own.
const LONE_RECURRENCES: usize = 6;
/// Every interval of a once-per-step call site lies within this factor of its median.
const INTERVAL_TOLERANCE: f64 = 0.25;
/// Two call sites agree on a step when their median intervals differ by at most this factor.
const AGREEMENT_TOLERANCE: f64 = 0.1;
/// Phases tried across one period when placing inferred boundaries.
const PHASES: u32 = 8;
/// An inferred step frees at least this share (per mille) of the bytes it allocates …
const MIN_FREED_IN_STEP_PER_MILLE: u64 = 500;
/// … and keeps at most this share (percent, median over steps) of how far it rises.
const MAX_KEPT_PERCENT: i64 = 50;

/// The device's steps, or `None` when nothing marks them.
pub fn find(snapshot: &Snapshot, device: &Device, replay: &DeviceReplay) -> Option<Steps> {
    let trace = &device.trace;
    let end = trace.len() as u32;
    let with_end = |mut bounds: Vec<u32>, source| {
        bounds.sort_unstable();
        bounds.dedup();
        bounds.retain(|&b| b < end);
        bounds.push(end);
        (bounds.len() >= 3).then_some(Steps { bounds, source })
    };
    if trace.has_time() {
        // Running maximum, so the search stays valid if the clock ever steps back.
        let mut latest = i64::MIN;
        let times: Vec<i64> = trace
            .time_us
            .iter()
            .map(|&t| {
                latest = latest.max(t);
                latest
            })
            .collect();
        let bounds = snapshot
            .annotations
            .iter()
            .filter(|a| {
                a.stage == AnnotationStage::Start
                    && a.name.starts_with("ProfilerStep")
                    && a.time_us != NO_TIME
            })
            .map(|a| times.partition_point(|&t| t < a.time_us) as u32)
            .collect();
        if let Some(steps) = with_end(bounds, StepSource::Annotations) {
            return Some(steps);
        }
    }
    let snapshots = (0..trace.len())
        .filter(|&i| trace.action[i] == Action::Snapshot)
        .map(|i| i as u32)
        .collect();
    if let Some(steps) = with_end(snapshots, StepSource::SnapshotEvents) {
        return Some(steps);
    }
    with_end(rhythm(device, replay)?, StepSource::Rhythm).filter(|steps| {
        freed_in_step_per_mille(steps, replay) >= MIN_FREED_IN_STEP_PER_MILLE
            && returns_to_baseline(steps, replay)
    })
}

/// Boundaries near each occurrence of a call site that recurs once per step.
fn rhythm(device: &Device, replay: &DeviceReplay) -> Option<Vec<u32>> {
    let trace = &device.trace;
    let mut seen: FxHashMap<StackId, Vec<u32>> = FxHashMap::default();
    for i in 0..trace.len() {
        if trace.action[i] == Action::Alloc && trace.stack[i] != NO_STACK {
            seen.entry(trace.stack[i]).or_default().push(i as u32);
        }
    }
    // (median interval, first occurrence, occurrences) of every steadily recurring call site.
    let mut steady: Vec<(f64, u32, &Vec<u32>)> = seen
        .values()
        .filter(|at| at.len() >= MIN_RECURRENCES)
        .filter_map(|at| {
            let mut gaps: Vec<u32> = at.windows(2).map(|w| w[1] - w[0]).collect();
            gaps.sort_unstable();
            let median = f64::from(gaps[gaps.len() / 2]);
            let steady = gaps
                .iter()
                .all(|&g| (f64::from(g) - median).abs() <= median * INTERVAL_TOLERANCE);
            (steady && median >= 2.0).then_some((median, at[0], at))
        })
        .collect();
    // Longest interval first.
    steady.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let agrees = |a: f64, b: f64| (a - b).abs() <= b * AGREEMENT_TOLERANCE;
    let anchor = (0..steady.len())
        .find(|&i| steady.iter().filter(|o| agrees(o.0, steady[i].0)).count() >= 2)
        .or_else(|| (0..steady.len()).find(|&i| steady[i].2.len() >= LONE_RECURRENCES))?;
    let period = steady[anchor].0;
    // Of the call sites that agree, the one that comes first in the step marks it.
    let first = steady
        .iter()
        .filter(|o| agrees(o.0, period))
        .min_by_key(|o| o.1)?;
    // It may sit anywhere in the step: try phases across one period and keep the one where
    // the fewest bytes cross from one step into the next.
    let period = period as u32;
    let end = trace.len() as u32;
    let phase_steps = |back: u32| {
        let mut bounds: Vec<u32> = first.2.iter().map(|&at| at.saturating_sub(back)).collect();
        bounds.dedup();
        bounds.push(end);
        Steps {
            bounds,
            source: StepSource::Rhythm,
        }
    };
    let back = (0..PHASES)
        .map(|k| period * k / PHASES)
        .max_by_key(|&back| {
            (
                freed_in_step_per_mille(&phase_steps(back), replay),
                std::cmp::Reverse(back),
            )
        })?;
    let mut bounds = phase_steps(back).bounds;
    bounds.pop();
    Some(bounds)
}

/// Of the bytes allocated in each step but the last (which the dump may cut off), the share
/// freed in the same step, in thousandths.
fn freed_in_step_per_mille(steps: &Steps, replay: &DeviceReplay) -> u64 {
    let (mut allocated, mut freed) = (0u64, 0u64);
    for l in &replay.lifetimes {
        let Some(step) = l.alloc_event.and_then(|e| steps.step_of(e)) else {
            continue;
        };
        if step + 1 >= steps.count() {
            continue;
        }
        allocated += l.requested_size_bytes;
        if l.free_requested_event
            .is_some_and(|f| f < steps.bounds[step + 1])
        {
            freed += l.requested_size_bytes;
        }
    }
    (freed * 1000).checked_div(allocated).unwrap_or(0)
}

/// Whether the allocated curve comes back down at the end of each step: a training step frees
/// its activations, so what it adds for good is small next to how far it rises in between. A
/// forward pass layer by layer keeps what each layer saves, and fails this.
fn returns_to_baseline(steps: &Steps, replay: &DeviceReplay) -> bool {
    let allocated = replay.allocated_bytes();
    let mut kept_percent: Vec<i64> = steps
        .bounds
        .windows(2)
        .filter(|w| w[0] < w[1] && w[1] as usize <= allocated.len())
        .map(|w| {
            let span = &allocated[w[0] as usize..w[1] as usize];
            let start = span[0];
            let rise = span.iter().max().copied().unwrap_or(start) - start;
            let kept = span[span.len() - 1] - start;
            if rise <= 0 {
                0
            } else {
                kept.max(0) * 100 / rise
            }
        })
        .collect();
    if kept_percent.is_empty() {
        return false;
    }
    kept_percent.sort_unstable();
    kept_percent[kept_percent.len() / 2] <= MAX_KEPT_PERCENT
}

#[cfg(test)]
mod tests {
    use super::{StepSource, find};
    use crate::detect::test_support::generated;
    use crate::r#gen::Scenario;
    use crate::model::AnnotationStage;

    #[test]
    fn steps_come_from_annotations_when_there_are_some() {
        let (_, loaded) = generated(Scenario::Steady, 20_000, 1);
        let device = &loaded.snapshot.devices[0];
        let steps = find(&loaded.snapshot, device, &loaded.replays[0]).expect("annotated");
        assert_eq!(steps.source, StepSource::Annotations);
        // Steps starting inside the trace, plus the one under way when it starts.
        let first_us = device.trace.time_us[0];
        let inside = loaded
            .snapshot
            .annotations
            .iter()
            .filter(|a| a.name.starts_with("ProfilerStep") && a.stage == AnnotationStage::Start)
            .filter(|a| a.time_us > first_us)
            .count();
        assert_eq!(steps.count(), inside + 1);
    }

    #[test]
    fn the_rhythm_of_the_loop_gives_the_steps_without_annotations() {
        for seed in 1..=3 {
            let (_, mut loaded) = generated(Scenario::Leak, 30_000, seed);
            let device = &loaded.snapshot.devices[0];
            let annotated = find(&loaded.snapshot, device, &loaded.replays[0]).expect("annotated");
            loaded.snapshot.annotations.clear();
            let device = &loaded.snapshot.devices[0];
            let inferred = find(&loaded.snapshot, device, &loaded.replays[0]).expect("a rhythm");
            assert_eq!(inferred.source, StepSource::Rhythm);
            // Same number of steps, give or take the partial ones at the ends.
            let (a, b) = (annotated.count() as i64, inferred.count() as i64);
            assert!(
                (a - b).abs() <= 2,
                "seed {seed}: annotated {a}, inferred {b}"
            );
            // Each inferred boundary lies inside a different annotated step.
            let steps_hit: std::collections::BTreeSet<_> = inferred.bounds[..inferred.count()]
                .iter()
                .filter_map(|&b| annotated.step_of(b))
                .collect();
            assert!(steps_hit.len() + 1 >= inferred.count(), "seed {seed}");
        }
    }

    #[test]
    fn a_forward_pass_layer_by_layer_is_not_a_training_loop() {
        // Drop the frees: every "step" keeps what it allocated, as layers keep activations.
        let (_, loaded) = generated(Scenario::Steady, 20_000, 2);
        let mut unannotated = loaded.snapshot.clone();
        unannotated.annotations.clear();
        let device = &unannotated.devices[0];
        assert!(
            find(&unannotated, device, &loaded.replays[0]).is_some(),
            "the loop itself has a rhythm"
        );
        let mut snapshot = loaded.snapshot.clone();
        snapshot.annotations.clear();
        let trace = &mut snapshot.devices[0].trace;
        for i in 0..trace.len() {
            if matches!(
                trace.action[i],
                crate::model::Action::FreeRequested | crate::model::Action::FreeCompleted
            ) {
                trace.action[i] = crate::model::Action::UserDefined;
            }
        }
        let kept = crate::Loaded::new(snapshot);
        let device = &kept.snapshot.devices[0];
        let steps = find(&kept.snapshot, device, &kept.replays[0]);
        assert_eq!(steps, None);
    }
}

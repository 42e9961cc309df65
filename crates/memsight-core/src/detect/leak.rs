//! Flags leaks: blocks allocated during one step that are still alive several steps later, from
//! one call stack, with their count growing step after step. State allocated once (weights,
//! optimizer state) is not a leak: it does not grow per step, so a call site must leave blocks
//! behind in at least [`MIN_LEAKING_STEPS`] different steps.
//!
//! Steps come from [`steps::find`]. A block left behind is one still alive [`STEPS_ALIVE`] steps
//! after its own; near the end of the trace, where fewer steps follow, one never freed. At least
//! one of a site's steps must have the full [`STEPS_ALIVE`] steps after it, so the blocks of the
//! last, unfinished step alone never make a leak.

use rustc_hash::FxHashMap;

use crate::model::{Device, Snapshot, StackId};
use crate::replay::DeviceReplay;
use crate::units::format_bytes;

use super::steps::{self, StepSource};
use super::{Finding, FindingKind, Severity};

/// A block counts as left behind when it outlives its step by this many steps.
const STEPS_ALIVE: usize = 2;
/// Steps that must each leave blocks behind from one call site.
const MIN_LEAKING_STEPS: usize = 3;

/// What one call stack left behind: the steps it leaked in, and the blocks' bytes, events and count.
struct Site {
    steps: Vec<usize>,
    /// Whether one of those steps was followed by `STEPS_ALIVE` whole steps in the trace.
    fully_seen: bool,
    bytes: u64,
    first: u32,
    last: u32,
    count: u64,
}

pub fn detect(snapshot: &Snapshot, device: &Device, replay: &DeviceReplay) -> Vec<Finding> {
    let Some(steps_found) = steps::find(snapshot, device, replay) else {
        return Vec::new();
    };
    let bounds = &steps_found.bounds;
    let steps = steps_found.count();
    if steps < MIN_LEAKING_STEPS {
        return Vec::new();
    }
    let peak_allocated = replay.peak_allocated.bytes.max(0) as u64;
    let mut sites: FxHashMap<StackId, Site> = FxHashMap::default();
    for l in &replay.lifetimes {
        let Some(alloc) = l.alloc_event else { continue };
        let Some(step) = steps_found.step_of(alloc) else {
            continue;
        };
        // Alive through STEPS_ALIVE later steps, or, where the trace ends sooner, never freed.
        let fully_seen = step + STEPS_ALIVE < steps;
        let left_behind = if fully_seen {
            l.free_completed_event
                .is_none_or(|f| f >= bounds[step + STEPS_ALIVE + 1])
        } else {
            l.free_requested_event.is_none()
        };
        if !left_behind {
            continue;
        }
        let site = sites.entry(l.stack).or_insert(Site {
            steps: Vec::new(),
            fully_seen: false,
            bytes: 0,
            first: alloc,
            last: alloc,
            count: 0,
        });
        // Lifetimes with an alloc event come in allocation order, so a site's steps arrive sorted.
        site.fully_seen |= fully_seen;
        if site.steps.last() != Some(&step) {
            site.steps.push(step);
        }
        site.bytes += l.requested_size_bytes;
        site.first = site.first.min(alloc);
        site.last = site.last.max(alloc);
        site.count += 1;
    }
    let mut findings: Vec<Finding> = sites
        .into_iter()
        .filter(|(_, site)| site.fully_seen && site.steps.len() >= MIN_LEAKING_STEPS)
        .map(|(stack, Site { steps: leaking_steps, bytes, first, last, count, .. })| {
            let per_step = bytes / leaking_steps.len() as u64;
            Finding {
                kind: FindingKind::Leak,
                // A leak too small to matter yet is still worth knowing, but not a warning.
                severity: if bytes * 100 >= peak_allocated {
                    Severity::Warning
                } else {
                    Severity::Info
                },
                device: device.ordinal,
                title: format!("Leak: {} per step from one call site", format_bytes(per_step as i64)),
                summary: format!(
                    "{count} blocks ({}) allocated in {} of {steps} steps ({}) were still alive {STEPS_ALIVE} steps later \
                     or never freed, all from the same call stack: memory that grows by about {} every step.",
                    format_bytes(bytes as i64),
                    leaking_steps.len(),
                    match steps_found.source {
                        StepSource::Annotations => "from ProfilerStep annotations",
                        StepSource::SnapshotEvents => "from snapshot events",
                        StepSource::Rhythm => "inferred from call sites that recur once per step",
                    },
                    format_bytes(per_step as i64)
                ),
                bytes,
                events: (first, last),
                focus_event: None,
                rank: None,
                time_range_us: None,
                stack,
                suggestion: "Something keeps a reference to these tensors (a list, a cache, a metrics accumulator): drop \
                             it, or keep scalars / CPU copies (`.item()`, `.cpu()`) instead of device tensors."
                    .to_string(),
            }
        })
        .collect();
    findings.sort_by_key(|f| (std::cmp::Reverse(f.bytes), f.stack));
    findings
}

#[cfg(test)]
mod tests {
    use crate::detect::test_support::generated;
    use crate::detect::{FindingKind, analyze};
    use crate::r#gen::Scenario;

    #[test]
    fn the_injected_leak_is_found_with_its_call_site() {
        for seed in 1..=4 {
            let (g, loaded) = generated(Scenario::Leak, 30_000, seed);
            let truth = g
                .truth
                .leak
                .as_ref()
                .expect("the leak scenario injects one");
            let leaks: Vec<_> = analyze(&loaded)
                .into_iter()
                .filter(|f| f.kind == FindingKind::Leak)
                .collect();
            assert_eq!(leaks.len(), 1, "seed {seed}: {leaks:?}");
            let s = &loaded.snapshot;
            let frames: Vec<(String, u32, String)> = s
                .stack_frames(leaks[0].stack)
                .map(|f| {
                    (
                        s.str(f.filename).to_string(),
                        f.line as u32,
                        s.str(f.name).to_string(),
                    )
                })
                .collect();
            let want: Vec<(String, u32, String)> = truth
                .stack
                .iter()
                .map(|f| (f.filename.clone(), f.line, f.name.clone()))
                .collect();
            assert_eq!(frames, want, "seed {seed}");
        }
    }

    #[test]
    fn state_allocated_once_and_clean_loops_are_no_leak() {
        for scenario in [
            Scenario::Steady,
            Scenario::Fragmentation,
            Scenario::Expandable,
        ] {
            for seed in 1..=3 {
                let (_, loaded) = generated(scenario, 30_000, seed);
                let leaks: Vec<_> = analyze(&loaded)
                    .into_iter()
                    .filter(|f| f.kind == FindingKind::Leak)
                    .collect();
                assert!(
                    leaks.is_empty(),
                    "{} seed {seed}: {leaks:?}",
                    scenario.name()
                );
            }
        }
    }
}

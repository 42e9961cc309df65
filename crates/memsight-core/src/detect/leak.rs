//! Flags leaks: blocks allocated during one step that are still alive several steps later, from
//! one call stack, with their count growing step after step. State allocated once (weights,
//! optimizer state) is not a leak: it does not grow per step, so a call site must leave blocks
//! behind in at least [`MIN_LEAKING_STEPS`] different steps.
//!
//! Steps come from `ProfilerStep#N` annotations (files with times) or, failing that, from
//! `snapshot` events; a file with neither gives no leak finding (inferring steps from the shape
//! of the allocated curve is still to do).

use rustc_hash::FxHashMap;

use crate::model::{Action, AnnotationStage, Device, NO_TIME, Snapshot, StackId};
use crate::replay::DeviceReplay;
use crate::units::format_bytes;

use super::{Finding, FindingKind, Severity};

/// A block counts as left behind when it outlives its step by this many steps.
const STEPS_ALIVE: usize = 2;
/// Steps that must each leave blocks behind from one call site.
const MIN_LEAKING_STEPS: usize = 3;

/// What one call stack left behind: the steps it leaked in, and the blocks' bytes, events and count.
struct Site {
    steps: Vec<usize>,
    bytes: u64,
    first: u32,
    last: u32,
    count: u64,
}

/// Step boundaries as event indices: step k is `bounds[k]..bounds[k + 1]`.
fn step_bounds(snapshot: &Snapshot, device: &Device) -> Vec<u32> {
    let trace = &device.trace;
    let mut bounds: Vec<u32> = Vec::new();
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
        bounds = snapshot
            .annotations
            .iter()
            .filter(|a| {
                a.stage == AnnotationStage::Start
                    && a.name.starts_with("ProfilerStep")
                    && a.time_us != NO_TIME
            })
            .map(|a| times.partition_point(|&t| t < a.time_us) as u32)
            .collect();
    }
    if bounds.len() < 2 {
        bounds = (0..trace.len())
            .filter(|&i| trace.action[i] == Action::Snapshot)
            .map(|i| i as u32)
            .collect();
    }
    bounds.sort_unstable();
    bounds.dedup();
    bounds.push(trace.len() as u32);
    bounds
}

pub fn detect(snapshot: &Snapshot, device: &Device, replay: &DeviceReplay) -> Vec<Finding> {
    let bounds = step_bounds(snapshot, device);
    if bounds.len() < MIN_LEAKING_STEPS + STEPS_ALIVE + 1 {
        return Vec::new();
    }
    let step_of = |e: u32| bounds.partition_point(|&b| b <= e).checked_sub(1);
    let steps = bounds.len() - 1;
    let mut sites: FxHashMap<StackId, Site> = FxHashMap::default();
    for l in &replay.lifetimes {
        let Some(alloc) = l.alloc_event else { continue };
        let Some(step) = step_of(alloc) else { continue };
        if step + STEPS_ALIVE >= steps {
            continue; // Too close to the end to tell.
        }
        let outlives = bounds[step + STEPS_ALIVE + 1];
        if l.free_completed_event.is_some_and(|f| f < outlives) {
            continue;
        }
        let site = sites.entry(l.stack).or_insert(Site {
            steps: Vec::new(),
            bytes: 0,
            first: alloc,
            last: alloc,
            count: 0,
        });
        // Lifetimes with an alloc event come in allocation order, so a site's steps arrive sorted.
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
        .filter(|(_, site)| site.steps.len() >= MIN_LEAKING_STEPS)
        .map(|(stack, Site { steps: leaking_steps, bytes, first, last, count })| {
            let per_step = bytes / leaking_steps.len() as u64;
            Finding {
                kind: FindingKind::Leak,
                severity: Severity::Warning,
                device: device.ordinal,
                title: format!("Leak: {} per step from one call site", format_bytes(per_step as i64)),
                summary: format!(
                    "{count} blocks ({}) allocated in {} of {steps} steps were still alive {STEPS_ALIVE}+ steps later, \
                     all from the same call stack: memory that grows by about {} every step.",
                    format_bytes(bytes as i64),
                    leaking_steps.len(),
                    format_bytes(per_step as i64)
                ),
                bytes,
                events: (first, last),
                focus_event: None,
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

//! Flags allocator stalls: bursts of `segment_free` / `segment_unmap` while allocated bytes stay
//! flat — the allocator emptying its cache (free-everything-and-retry on a failed request, or an
//! explicit `empty_cache()`, told apart by its call stack). Each cudaFree synchronizes the device, so a burst makes this rank
//! the slow one that holds every collective back.

use crate::model::{Action, Device, NO_TIME, Snapshot, StackId};
use crate::replay::DeviceReplay;
use crate::units::format_bytes;

use super::{Finding, FindingKind, Severity};

/// Fewest consecutive segment releases that make a burst.
const MIN_BURST_SEGMENTS: usize = 3;

/// Whether `stack` runs through an `empty_cache` call: the program emptied the cache itself.
pub(super) fn is_explicit_empty_cache(snapshot: &Snapshot, stack: StackId) -> bool {
    snapshot
        .stack_frames(stack)
        .any(|f| snapshot.str(f.name) == "empty_cache")
}

pub fn detect(snapshot: &Snapshot, device: &Device, replay: &DeviceReplay) -> Vec<Finding> {
    let trace = &device.trace;
    let releases = |i: usize| matches!(trace.action[i], Action::SegmentFree | Action::SegmentUnmap);
    let mut findings = Vec::new();
    let mut i = 0;
    while i < trace.len() {
        if !releases(i) {
            i += 1;
            continue;
        }
        let first = i;
        while i < trace.len() && releases(i) {
            i += 1;
        }
        let last = i - 1;
        if last + 1 - first < MIN_BURST_SEGMENTS {
            continue;
        }
        let before = replay.totals_after((first as u32).checked_sub(1));
        let after = replay.totals_after(Some(last as u32));
        if before.allocated_bytes != after.allocated_bytes {
            continue;
        }
        let freed = (before.reserved_bytes - after.reserved_bytes).max(0) as u64;
        let took = match (trace.time_us[first], trace.time_us[last]) {
            (a, b) if a != NO_TIME && b != NO_TIME => {
                format!(", taking {:.1} ms", (b - a) as f64 / 1e3)
            }
            _ => String::new(),
        };
        let followed_by_alloc = trace.action.get(last + 1) == Some(&Action::SegmentAlloc);
        let explicit = is_explicit_empty_cache(snapshot, trace.stack[first]);
        let (cause, suggestion) = if explicit {
            (
                ": an explicit empty_cache() call emptied the cache, and every segment the program needs again \
                 must be allocated anew",
                "Remove the empty_cache() call from the loop (or call it only when memory must be handed to another \
                 process): the allocator reuses cached segments far faster than cudaFree / cudaMalloc.",
            )
        } else if followed_by_alloc {
            (
                ", then a new segment was allocated: the cache was emptied to serve a request",
                "Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) avoid the \
                 free-everything-and-retry path; otherwise reduce fragmentation (bucket inputs by size).",
            )
        } else {
            (
                "",
                "Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) avoid the \
                 free-everything-and-retry path; otherwise reduce fragmentation (bucket inputs by size).",
            )
        };
        findings.push(Finding {
            kind: FindingKind::AllocatorStall,
            severity: Severity::Warning,
            device: device.ordinal,
            title: format!("Allocator stall: {} segments released", last + 1 - first),
            summary: format!(
                "Events {first}–{last} released {} segments ({}, reserved fell from {} to {}) while allocated bytes stayed at {}{took}{}.",
                last + 1 - first,
                format_bytes(freed as i64),
                format_bytes(before.reserved_bytes),
                format_bytes(after.reserved_bytes),
                format_bytes(after.allocated_bytes),
                cause
            ),
            bytes: freed,
            events: (first as u32, last as u32),
            focus_event: Some(last as u32),
            rank: None,
            time_range_us: None,
            stack: trace.stack[first],
            suggestion: suggestion.to_string(),
        });
    }
    findings
}

#[cfg(test)]
mod tests {
    use crate::detect::test_support::generated;
    use crate::detect::{FindingKind, analyze};
    use crate::r#gen::Scenario;

    #[test]
    fn every_injected_stall_is_found_with_its_events_and_bytes() {
        let mut injected = 0;
        for seed in 1..=4 {
            let (g, loaded) = generated(Scenario::Stall, 60_000, seed);
            let stalls: Vec<_> = analyze(&loaded)
                .into_iter()
                .filter(|f| f.kind == FindingKind::AllocatorStall)
                .collect();
            for truth in g
                .truth
                .stalls
                .iter()
                .filter(|s| s.last_event - s.first_event + 1 >= 3)
            {
                injected += 1;
                let found = stalls
                    .iter()
                    .find(|f| {
                        u64::from(f.events.0) == truth.first_event
                            && u64::from(f.events.1) == truth.last_event
                    })
                    .unwrap_or_else(|| {
                        panic!("seed {seed}: stall {truth:?} not found in {stalls:?}")
                    });
                assert_eq!(
                    found.bytes,
                    truth.reserved_before_bytes - truth.reserved_after_bytes
                );
            }
        }
        assert!(injected >= 4, "the scenario stalls: {injected}");
    }

    #[test]
    fn clean_runs_have_no_stall() {
        for seed in 1..=3 {
            let (_, loaded) = generated(Scenario::Steady, 20_000, seed);
            assert!(
                analyze(&loaded)
                    .iter()
                    .all(|f| f.kind != FindingKind::AllocatorStall),
                "seed {seed}"
            );
        }
    }
}

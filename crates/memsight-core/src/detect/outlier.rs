//! Flags outlier allocations: single requests far above what their call site usually asks (an
//! extreme input length, an unexpected shape), and the single block that holds a large share of
//! the allocated peak. The ones alive at the peak are what set it, so they rank higher.
//!
//! A call site often asks several sizes on purpose (an optimizer loop over parameters of every
//! size, a weight gradient and a workspace from one line), and repeats them every step. So an
//! outlier must be far above the site's median, rare among its requests, of a size the site asks
//! in one step only (see [`steps`]), and freed again: state kept for the whole run is sized by
//! the model, not by the input.

use rustc_hash::FxHashMap;

use crate::model::{Action, Device, NO_STACK, Snapshot, StackId};
use crate::replay::DeviceReplay;
use crate::units::format_bytes;

use super::steps;
use super::{Finding, FindingKind, Severity};

/// A call site needs this many requests before its usual size means anything.
const MIN_SITE_ALLOCS: usize = 8;
/// A request this many times its call site's median is an outlier …
const SITE_RATIO: u64 = 8;
/// … when it is also at least this big (small tensors vary a lot and matter little) …
const MIN_OUTLIER_BYTES: u64 = 1 << 20;
/// … and at least this share (percent) of the allocated peak …
const MIN_PEAK_PERCENT: u64 = 1;
/// … and rare: a site where more than this share (percent) of requests are that big simply
/// allocates tensors of several sizes (a weight gradient and a workspace from one line).
const MAX_OUTLIER_PERCENT: usize = 10;
/// Call sites reported, largest outlier first.
const MAX_SITES: usize = 3;
/// One block holding this share (percent) of the allocated peak is reported on its own.
const PEAK_SHARE_PERCENT: u64 = 25;
/// Peaks below this are too small for the share to matter.
const MIN_PEAK_BYTES: u64 = 256 << 20;

pub fn detect(snapshot: &Snapshot, device: &Device, replay: &DeviceReplay) -> Vec<Finding> {
    let trace = &device.trace;
    let mut sites: FxHashMap<StackId, Vec<(u64, u32)>> = FxHashMap::default();
    for i in 0..trace.len() {
        if trace.action[i] == Action::Alloc && trace.stack[i] != NO_STACK {
            sites
                .entry(trace.stack[i])
                .or_default()
                .push((trace.size_bytes[i], i as u32));
        }
    }
    let peak = replay.peak_allocated;
    let live_at_peak = alloc_events_live_at(device, replay, peak.event);
    let sets_peak = |event: u32| live_at_peak.binary_search(&event).is_ok();
    let steps = steps::find(snapshot, device, replay);
    // State kept for the whole run (weights, optimizer state) is sized by the model, not by the
    // input: only blocks freed again can be outliers.
    let freed = |event: u32| {
        let id = replay.event_lifetime[event as usize];
        replay
            .lifetimes
            .get(id as usize)
            .is_some_and(|l| l.free_requested_event.is_some())
    };

    let mut findings: Vec<Finding> = Vec::new();
    let mut reported: Vec<u32> = Vec::new();
    for (&stack, requests) in &mut sites {
        if requests.len() < MIN_SITE_ALLOCS {
            continue;
        }
        let (median, outliers) =
            site_outliers(requests, steps.as_ref(), &freed, peak.bytes.max(0) as u64);
        if outliers.len() * 100 > requests.len() * MAX_OUTLIER_PERCENT {
            continue;
        }
        let Some(&(largest, largest_event)) = outliers
            .iter()
            .max_by_key(|&&(s, e)| (s, std::cmp::Reverse(e)))
        else {
            continue;
        };
        reported.extend(outliers.iter().map(|&(_, e)| e));
        let at_peak = outliers.iter().any(|&(_, e)| sets_peak(e));
        findings.push(Finding {
            kind: FindingKind::OutlierAllocation,
            severity: if at_peak { Severity::Warning } else { Severity::Info },
            device: device.ordinal,
            title: format!(
                "Outlier allocation: {} from a call site that usually asks {}",
                format_bytes(largest as i64),
                format_bytes(median as i64)
            ),
            summary: format!(
                "{} of {} requests from this call site were {SITE_RATIO}× its median of {} or more; the largest, {} at \
                 event {largest_event}, is {:.0}× the median{}.",
                outliers.len(),
                requests.len(),
                format_bytes(median as i64),
                format_bytes(largest as i64),
                largest as f64 / median.max(1) as f64,
                if at_peak {
                    format!(
                        ", and outliers were alive at the allocated peak ({}): they set it",
                        format_bytes(peak.bytes)
                    )
                } else {
                    String::new()
                }
            ),
            bytes: largest,
            events: (
                outliers.iter().map(|&(_, e)| e).min().unwrap_or(largest_event),
                outliers.iter().map(|&(_, e)| e).max().unwrap_or(largest_event),
            ),
            focus_event: Some(largest_event),
            rank: None,
            time_range_us: None,
            stack,
            suggestion: "Check the input behind these requests (a sequence or batch far above the usual, an expand or \
                         broadcast before a cast): cap or bucket input sizes, or split the operation into chunks."
                .to_string(),
        });
    }

    findings.sort_by_key(|f| (std::cmp::Reverse(f.bytes), f.events));
    findings.truncate(MAX_SITES);

    findings.extend(peak_holder(device, replay, &reported));
    findings.sort_by_key(|f| {
        (
            std::cmp::Reverse(f.severity),
            std::cmp::Reverse(f.bytes),
            f.events,
        )
    });
    findings
}

/// Alloc events of the blocks alive right after `event`, sorted.
fn alloc_events_live_at(device: &Device, replay: &DeviceReplay, event: Option<u32>) -> Vec<u32> {
    let mut live: Vec<u32> = event
        .map(|e| {
            replay
                .live_after(device, Some(e))
                .iter()
                .filter_map(|&(_, id)| replay.lifetimes[id as usize].alloc_event)
                .collect()
        })
        .unwrap_or_default();
    live.sort_unstable();
    live
}

/// The median request of one call site, and its requests that stand out: far above the median,
/// big, of a size asked in one step only, and freed again.
fn site_outliers(
    requests: &[(u64, u32)],
    steps: Option<&steps::Steps>,
    freed: &dyn Fn(u32) -> bool,
    peak_bytes: u64,
) -> (u64, Vec<(u64, u32)>) {
    let mut request_sizes: Vec<u64> = requests.iter().map(|&(size, _)| size).collect();
    let mid = request_sizes.len() / 2;
    let median = *request_sizes.select_nth_unstable(mid).1;
    // The steps each size was asked in: a size asked in several steps is the site's pattern.
    let mut asked_in: FxHashMap<u64, (Option<usize>, bool)> = FxHashMap::default();
    for &(size, event) in requests {
        let step = steps.and_then(|s| s.step_of(event));
        asked_in
            .entry(size)
            .and_modify(|(first, several)| *several |= *first != step)
            .or_insert((step, false));
    }
    let outliers: Vec<(u64, u32)> = requests
        .iter()
        .copied()
        .filter(|&(size, event)| {
            !asked_in[&size].1
                && freed(event)
                && size >= MIN_OUTLIER_BYTES
                && size >= median.max(1) * SITE_RATIO
                && size * 100 >= peak_bytes * MIN_PEAK_PERCENT
        })
        .collect();
    (median, outliers)
}

/// The one block holding a large share of the allocated peak, unless a call-site finding
/// covers it already (`reported`: alloc events of reported outliers).
fn peak_holder(device: &Device, replay: &DeviceReplay, reported: &[u32]) -> Option<Finding> {
    let peak = replay.peak_allocated;
    if let Some(peak_event) = peak.event
        && peak.bytes as u64 >= MIN_PEAK_BYTES
        && let Some(big) = replay
            .live_after(device, Some(peak_event))
            .iter()
            .map(|&(_, id)| &replay.lifetimes[id as usize])
            .max_by_key(|l| (l.requested_size_bytes, std::cmp::Reverse(l.addr)))
        && big.requested_size_bytes * 100 >= peak.bytes as u64 * PEAK_SHARE_PERCENT
        && !big.alloc_event.is_some_and(|e| reported.contains(&e))
    {
        let event = big.alloc_event.unwrap_or(peak_event);
        return Some(Finding {
            kind: FindingKind::OutlierAllocation,
            severity: Severity::Info,
            device: device.ordinal,
            title: format!(
                "One block holds {}% of the allocated peak",
                big.requested_size_bytes * 100 / peak.bytes.max(1) as u64
            ),
            summary: format!(
                "At the allocated peak ({}, event {peak_event}) a single block of {}{} was alive: shrinking or \
                 freeing it earlier lowers the peak the most.",
                format_bytes(peak.bytes),
                format_bytes(big.requested_size_bytes as i64),
                big.alloc_event
                    .map_or_else(|| " (allocated before the trace)".to_string(), |e| format!(", allocated at event {e}"))
            ),
            bytes: big.requested_size_bytes,
            events: (event, peak_event),
            focus_event: Some(peak_event),
            rank: None,
            time_range_us: None,
            stack: big.stack,
            suggestion: "If this is a weight or buffer it is expected; if it is an activation or a temporary, chunk the \
                         operation or free it before the next large allocation."
                .to_string(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::detect::test_support::generated;
    use crate::detect::{FindingKind, analyze};
    use crate::r#gen::Scenario;

    #[test]
    fn extreme_inputs_are_flagged_and_nothing_else() {
        for seed in 1..=4 {
            let (g, loaded) = generated(Scenario::Fragmentation, 40_000, seed);
            let trace = &loaded.snapshot.devices[0].trace;
            let outliers: Vec<_> = analyze(&loaded)
                .into_iter()
                .filter(|f| f.kind == FindingKind::OutlierAllocation)
                .collect();
            let extreme = &g.truth.extreme_requests;
            for f in &outliers {
                let e = u64::from(f.focus_event.unwrap_or(u32::MAX));
                assert!(
                    extreme.contains(&e),
                    "seed {seed}: {f:?} is no extreme request"
                );
            }
            // The largest extreme request is always far above its site's median.
            if let Some(&largest) = extreme
                .iter()
                .max_by_key(|&&e| trace.size_bytes[e as usize])
            {
                let size = trace.size_bytes[largest as usize];
                assert!(
                    outliers.iter().any(|f| f.bytes == size),
                    "seed {seed}: the largest extreme request ({size} B at {largest}) was missed: {outliers:?}"
                );
            }
        }
    }

    #[test]
    fn uniform_inputs_have_no_outlier() {
        for scenario in [Scenario::Steady, Scenario::Leak, Scenario::Expandable] {
            for seed in 1..=3 {
                let (_, loaded) = generated(scenario, 30_000, seed);
                let found: Vec<_> = analyze(&loaded)
                    .into_iter()
                    .filter(|f| f.kind == FindingKind::OutlierAllocation)
                    .collect();
                assert!(
                    found.is_empty(),
                    "{} seed {seed}: {found:?}",
                    scenario.name()
                );
            }
        }
    }
}

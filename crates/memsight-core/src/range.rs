//! Range analysis, the leak hunt: the blocks allocated inside a range of events and not freed by
//! its end, grouped by call stack, largest first; and the blocks alive through the whole range.

use rustc_hash::FxHashMap;

use crate::model::StackId;
use crate::replay::{DeviceReplay, Lifetime, LifetimeId};

/// Allocations that share one call stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackGroup {
    pub stack: StackId,
    pub count: u64,
    pub bytes: u64,
    /// Lifetimes of the group, in allocation order.
    pub lifetimes: Vec<LifetimeId>,
}

/// What a range of events `[first, last]` left behind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeReport {
    pub first_event: u32,
    pub last_event: u32,
    /// Allocated inside the range and still live after `last`.
    pub unreleased: Vec<LifetimeId>,
    pub unreleased_bytes: u64,
    pub largest_bytes: u64,
    pub smallest_bytes: u64,
    /// `unreleased` grouped by call stack, most bytes first.
    pub by_stack: Vec<StackGroup>,
    /// Live before the range began and still live after it.
    pub alive_through: Vec<LifetimeId>,
    pub alive_through_bytes: u64,
}

impl RangeReport {
    /// Analyses the events `first..=last` (swapped if given backwards, clamped to the trace).
    pub fn new(replay: &DeviceReplay, first: u32, last: u32) -> Self {
        let n = replay.event_count() as u32;
        if n == 0 {
            return Self::default();
        }
        let (first, last) = (first.min(last).min(n - 1), first.max(last).min(n - 1));
        let freed_after_last = |l: &Lifetime| l.free_completed_event.is_none_or(|f| f > last);
        let mut unreleased = Vec::new();
        let mut alive_through = Vec::new();
        for (id, l) in replay.lifetimes.iter().enumerate() {
            let id = id as LifetimeId;
            match l.alloc_event {
                Some(a) if (first..=last).contains(&a) && freed_after_last(l) => {
                    unreleased.push(id);
                }
                Some(a) if a < first && freed_after_last(l) => alive_through.push(id),
                None if freed_after_last(l) => alive_through.push(id),
                _ => {}
            }
        }
        let size = |id: &LifetimeId| replay.lifetimes[*id as usize].requested_size_bytes;
        let mut groups: FxHashMap<StackId, StackGroup> = FxHashMap::default();
        for id in &unreleased {
            let stack = replay.lifetimes[*id as usize].stack;
            let group = groups.entry(stack).or_insert_with(|| StackGroup {
                stack,
                count: 0,
                bytes: 0,
                lifetimes: Vec::new(),
            });
            group.count += 1;
            group.bytes += size(id);
            group.lifetimes.push(*id);
        }
        let mut by_stack: Vec<StackGroup> = groups.into_values().collect();
        by_stack.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.stack.cmp(&b.stack)));
        Self {
            first_event: first,
            last_event: last,
            unreleased_bytes: unreleased.iter().map(size).sum(),
            largest_bytes: unreleased.iter().map(size).max().unwrap_or(0),
            smallest_bytes: unreleased.iter().map(size).min().unwrap_or(0),
            alive_through_bytes: alive_through.iter().map(size).sum(),
            unreleased,
            by_stack,
            alive_through,
        }
    }
}

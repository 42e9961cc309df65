//! Memory by owner: msMemScope's decomposition (`owner` is `A@B@C`, e.g. `PTA@gradient@ops`),
//! at the depth the user picks (1: the framework, 2: its component, …).
//!
//! At any event the bytes by owner add up exactly to the allocated bytes there: every live block
//! counts once, under its owner, [`NO_OWNER`] when the file names none, or [`BEFORE_TRACE`] for
//! blocks allocated before the recording began.

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::model::{BlockState, Device, Snapshot};
use crate::replay::DeviceReplay;

pub const NO_OWNER: &str = "(no owner)";
pub const BEFORE_TRACE: &str = "(allocated before the recording)";

/// The depth at which msMemScope's owners say what a block is: framework, component and its
/// kind (`PTA@model@weight`, `PTA@model@gradient`, `PTA@ops@aten`, `CANN@HCCL`); deeper levels are
/// the user's own tags. Charts colour by owner at this depth.
pub const NAMING_DEPTH: usize = 3;

/// Bytes of one owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OwnerBytes {
    pub owner: String,
    pub bytes: u64,
}

/// The first `depth` levels of `owner` (`PTA@gradient@ops` at depth 2: `PTA@gradient`); the
/// whole owner for depth 0.
pub fn at_depth(owner: &str, depth: usize) -> &str {
    if depth == 0 {
        return owner;
    }
    match owner.match_indices('@').nth(depth - 1) {
        Some((i, _)) => &owner[..i],
        None => owner,
    }
}

/// Whether any event of `device` names an owner.
pub fn has_owners(device: &Device) -> bool {
    device
        .trace
        .owner
        .iter()
        .any(|&o| o != crate::model::NO_STR)
}

/// The deepest owner level `device` uses (1 for `PTA`, 3 for `PTA@gradient@ops`).
pub fn max_depth(snapshot: &Snapshot, device: &Device) -> usize {
    let mut seen = rustc_hash::FxHashSet::default();
    device
        .trace
        .owner
        .iter()
        .filter(|&&o| o != crate::model::NO_STR && seen.insert(o))
        .map(|&o| snapshot.str(o).split('@').count())
        .max()
        .unwrap_or(0)
}

/// The owner of lifetime `id` at `depth`.
fn owner_of<'s>(
    snapshot: &'s Snapshot,
    device: &Device,
    replay: &DeviceReplay,
    id: usize,
    depth: usize,
) -> &'s str {
    match replay.lifetimes[id].alloc_event {
        None => BEFORE_TRACE,
        Some(event) => snapshot
            .owner(&device.trace, event as usize)
            .map_or(NO_OWNER, |o| at_depth(o, depth)),
    }
}

/// Allocated bytes by owner right after `event` (`None`: before the first), largest first; they
/// add up to the allocated bytes there.
pub fn bytes_by_owner(
    snapshot: &Snapshot,
    device: &Device,
    replay: &DeviceReplay,
    event: Option<u32>,
    depth: usize,
) -> Vec<OwnerBytes> {
    let mut sums: FxHashMap<&str, u64> = FxHashMap::default();
    for (_, id) in replay.live_after(device, event) {
        let lifetime = &replay.lifetimes[id as usize];
        if lifetime.state_after(event) != BlockState::ActiveAllocated {
            continue;
        }
        *sums
            .entry(owner_of(snapshot, device, replay, id as usize, depth))
            .or_default() += lifetime.requested_size_bytes;
    }
    let mut out: Vec<OwnerBytes> = sums
        .into_iter()
        .map(|(owner, bytes)| OwnerBytes {
            owner: owner.to_string(),
            bytes,
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.owner.cmp(&b.owner)));
    out
}

/// Allocated bytes by owner over time, for a stacked chart: the owners (largest at their own
/// peak first) and, per owner, its bytes after each of `samples` events (ascending indices).
pub fn series_by_owner(
    snapshot: &Snapshot,
    device: &Device,
    replay: &DeviceReplay,
    depth: usize,
    samples: &[u32],
) -> (Vec<String>, Vec<Vec<u64>>) {
    let trace = &device.trace;
    let mut index: FxHashMap<&str, usize> = FxHashMap::default();
    let mut owners: Vec<&str> = Vec::new();
    // Per lifetime: its owner's index; live bytes start with what was live before the trace.
    let mut lifetime_owner: Vec<usize> = Vec::with_capacity(replay.lifetimes.len());
    for id in 0..replay.lifetimes.len() {
        let name = owner_of(snapshot, device, replay, id, depth);
        let next = owners.len();
        let o = *index.entry(name).or_insert(next);
        if o == next {
            owners.push(name);
        }
        lifetime_owner.push(o);
    }
    let mut live = vec![0u64; owners.len()];
    for (_, id) in replay.live_after(device, None) {
        let l = &replay.lifetimes[id as usize];
        if l.state_after(None) == BlockState::ActiveAllocated {
            live[lifetime_owner[id as usize]] += l.requested_size_bytes;
        }
    }
    let mut series = vec![Vec::with_capacity(samples.len()); owners.len()];
    let mut next = samples.iter().peekable();
    for i in 0..trace.len() {
        let id = replay.event_lifetime[i];
        if id != crate::replay::NO_LIFETIME {
            let l = &replay.lifetimes[id as usize];
            let o = lifetime_owner[id as usize];
            if l.alloc_event == Some(i as u32) {
                live[o] += l.requested_size_bytes;
            } else if l.free_requested_event == Some(i as u32)
                || (l.free_requested_event.is_none() && l.free_completed_event == Some(i as u32))
            {
                live[o] = live[o].saturating_sub(l.requested_size_bytes);
            }
        }
        while next.peek().is_some_and(|&&s| s as usize == i) {
            next.next();
            for (o, s) in series.iter_mut().enumerate() {
                s.push(live[o]);
            }
        }
    }
    let owners: Vec<String> = owners.into_iter().map(str::to_string).collect();
    (owners, series)
}

#[cfg(test)]
mod tests {
    use super::at_depth;

    #[test]
    fn owners_cut_at_a_depth() {
        assert_eq!(at_depth("PTA@gradient@ops@memscope", 1), "PTA");
        assert_eq!(at_depth("PTA@gradient@ops@memscope", 2), "PTA@gradient");
        assert_eq!(at_depth("PTA@gradient", 5), "PTA@gradient");
        assert_eq!(at_depth("CANN@HCCL", 0), "CANN@HCCL");
    }
}

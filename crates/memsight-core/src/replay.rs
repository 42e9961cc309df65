//! Replay: what the pool looked like after any event.
//!
//! The trace is a ring buffer, so the state before its first event is reconstructed by undoing
//! the trace from the final segments. From there one forward pass gives
//! - allocated / active / reserved bytes after every event (stored, so a query is O(1));
//! - every allocation's [`Lifetime`] (the lifecycle chart's input);
//! - checkpoints of the full pool, spaced so that their total size stays proportional to the
//!   trace, from which [`DeviceReplay::pool_after`] replays at most one interval.
//!
//! Byte totals count requested bytes, like the trace (see the format doc): a final block counts
//! by its `requested_size`.

use std::collections::BTreeMap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::model::{
    Action, BlockState, Device, PoolId, Snapshot, StackId, StreamId, Warning, WarningKind,
};

/// Id of a lifetime in [`DeviceReplay::lifetimes`].
pub type LifetimeId = u32;
pub const NO_LIFETIME: LifetimeId = u32::MAX;

/// Traces from this many events on have the pages of the replay's columns mapped on another
/// core while its first pass runs (see [`crate::prefault`]).
const PREFAULT_MIN_EVENTS: usize = 64 * 1024;

/// Fewest events between two checkpoints; more when many blocks are live (see module doc).
const MIN_CHECKPOINT_INTERVAL: usize = 2048;

/// The caching allocator's rounding of a request (512-byte multiples, at least 512).
pub fn rounded_size_bytes(requested_size_bytes: u64) -> u64 {
    requested_size_bytes.max(1).div_ceil(512) * 512
}

/// One allocation, from its `alloc` (or from before the trace) to its `free_completed` (or the
/// end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifetime {
    pub addr: u64,
    pub requested_size_bytes: u64,
    /// The rounded block size, known only for blocks still live at dump time.
    pub size_bytes: Option<u64>,
    pub stream: StreamId,
    pub stack: StackId,
    /// `None`: allocated before the trace began.
    pub alloc_event: Option<u32>,
    pub free_requested_event: Option<u32>,
    /// `None`: still live at the end. For an `alloc` at a live address, the superseding event.
    pub free_completed_event: Option<u32>,
    /// Freed by its tensor before the trace began, still pending when it started.
    pub pending_free_at_start: bool,
}

/// Whether something made at event `made` (`None`: before the trace) and gone at event `gone`
/// (`None`: still there at the end) exists right after event `n` (`None`: before the first).
pub fn live_after(made: Option<u32>, gone: Option<u32>, n: Option<u32>) -> bool {
    let started = match (made, n) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(a), Some(n)) => a <= n,
    };
    let ended = match (gone, n) {
        (None, _) | (Some(_), None) => false,
        (Some(f), Some(n)) => f <= n,
    };
    started && !ended
}

impl Lifetime {
    /// Alive before the trace began and never freed in it: the trace shows neither its
    /// allocation nor its free.
    pub fn spans_the_trace(&self) -> bool {
        self.alloc_event.is_none()
            && self.free_requested_event.is_none()
            && self.free_completed_event.is_none()
    }

    /// Whether the block is live right after event `n` (`None`: before the first event).
    pub fn is_live_after(&self, n: Option<u32>) -> bool {
        live_after(self.alloc_event, self.free_completed_event, n)
    }

    /// State right after event `n` while live.
    pub fn state_after(&self, n: Option<u32>) -> BlockState {
        let requested = match (self.free_requested_event, n) {
            (Some(r), Some(n)) => r <= n,
            _ => false,
        };
        if requested || self.pending_free_at_start {
            BlockState::ActivePendingFree
        } else {
            BlockState::ActiveAllocated
        }
    }
}

/// Allocated, active and reserved bytes at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Totals {
    pub allocated_bytes: i64,
    pub active_bytes: i64,
    pub reserved_bytes: i64,
}

impl Totals {
    /// Each figure held at 0 from below (a file whose frees outrun its allocs; a warning says so).
    fn at_least_zero(self) -> Totals {
        Totals {
            allocated_bytes: self.allocated_bytes.max(0),
            active_bytes: self.active_bytes.max(0),
            reserved_bytes: self.reserved_bytes.max(0),
        }
    }

    fn saturating_add(self, other: Totals) -> Totals {
        Totals {
            allocated_bytes: self.allocated_bytes.saturating_add(other.allocated_bytes),
            active_bytes: self.active_bytes.saturating_add(other.active_bytes),
            reserved_bytes: self.reserved_bytes.saturating_add(other.reserved_bytes),
        }
    }
}

/// The highest value a total reached and the event right after which it did (`None`: before the
/// first event).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    pub bytes: i64,
    pub event: Option<u32>,
}

/// A mapped address range of a segment (a whole segment, or part of an expandable one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    end: u64,
    stream: StreamId,
    pool: PoolId,
    expandable: bool,
}

type Pieces = BTreeMap<u64, Piece>;

/// Adds `[start, end)`; false if it overlapped what was there (the overlap is replaced).
fn add_range(pieces: &mut Pieces, start: u64, piece: Piece) -> bool {
    let clean = remove_range(pieces, start, piece.end) == 0;
    pieces.insert(start, piece);
    clean
}

/// Removes `[start, end)` from whatever pieces cover it, splitting them; returns the bytes removed.
fn remove_range(pieces: &mut Pieces, start: u64, end: u64) -> u64 {
    let mut removed = 0;
    let first = pieces
        .range(..start)
        .next_back()
        .filter(|(_, p)| p.end > start)
        .map(|(&s, _)| s);
    let keys: Vec<u64> = first
        .into_iter()
        .chain(pieces.range(start..end).map(|(&s, _)| s))
        .collect();
    for key in keys {
        let Some(piece) = pieces.remove(&key) else {
            continue;
        };
        let (cut_start, cut_end) = (key.max(start), piece.end.min(end));
        removed += cut_end.saturating_sub(cut_start);
        if key < cut_start {
            pieces.insert(
                key,
                Piece {
                    end: cut_start,
                    ..piece
                },
            );
        }
        if cut_end < piece.end {
            pieces.insert(cut_end, piece);
        }
    }
    removed
}

/// The pool before event `at`.
#[derive(Clone, Debug)]
struct Checkpoint {
    at: usize,
    pieces: Vec<(u64, Piece)>,
    /// Live lifetimes, by address.
    live: Vec<(u64, LifetimeId)>,
}

/// Everything known about one device's trace over time.
#[derive(Clone, Debug)]
pub struct DeviceReplay {
    pub ordinal: u32,
    /// Before the first event.
    pub initial: Totals,
    allocated_bytes: Vec<i64>,
    active_bytes: Vec<i64>,
    reserved_bytes: Vec<i64>,
    pub peak_allocated: Peak,
    pub peak_active: Peak,
    pub peak_reserved: Peak,
    pub lifetimes: Vec<Lifetime>,
    /// For each event, the lifetime it belongs to ([`NO_LIFETIME`] for segment and other events).
    pub event_lifetime: Vec<LifetimeId>,
    checkpoints: Vec<Checkpoint>,
    event_count: usize,
}

/// One block of the pool at a moment; free gaps appear as `Inactive` blocks.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PoolBlock {
    pub address: u64,
    pub size_bytes: u64,
    pub requested_size_bytes: u64,
    #[serde(serialize_with = "serialize_state")]
    pub state: BlockState,
    /// False when the rounded size is estimated (the trace records only requested sizes).
    pub size_exact: bool,
    #[serde(skip)]
    pub lifetime: Option<LifetimeId>,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's serialize_with passes a reference"
)]
fn serialize_state<S: serde::Serializer>(state: &BlockState, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(state.name())
}

/// One segment of the pool at a moment (an expandable segment: one contiguous mapped range).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSegment {
    pub address: u64,
    pub total_size_bytes: u64,
    pub stream: StreamId,
    pub pool: PoolId,
    pub is_expandable: bool,
    /// Address order, tiling the segment.
    pub blocks: Vec<PoolBlock>,
}

impl PoolSegment {
    /// Free gaps and the largest of them, in bytes.
    pub fn gaps(&self) -> (usize, u64) {
        let free = self
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Inactive);
        free.fold((0, 0), |(n, largest), b| (n + 1, largest.max(b.size_bytes)))
    }
}

/// The full pool right after one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolState {
    /// `None`: before the first event.
    pub event: Option<u32>,
    pub totals: Totals,
    pub segments: Vec<PoolSegment>,
    /// Live blocks that lie in no segment (an inconsistent file).
    pub unplaced_blocks: Vec<PoolBlock>,
}

/// Replays every device of `snapshot` (in parallel) and returns the replays with the warnings
/// found on the way.
pub fn replay_all(snapshot: &Snapshot) -> (Vec<DeviceReplay>, Vec<Warning>) {
    let results: Vec<(DeviceReplay, Vec<Warning>)> = snapshot
        .devices
        .par_iter()
        .map(DeviceReplay::build)
        .collect();
    let mut warnings = Vec::new();
    let replays = results
        .into_iter()
        .map(|(r, w)| {
            warnings.extend(w);
            r
        })
        .collect();
    (replays, warnings)
}

/// What is wrong with the trace's times, if anything: times that go backwards, or a span no
/// recording has (see [`Trace::plausible_time_span_us`](crate::model::Trace::plausible_time_span_us)).
fn time_warning(trace: &crate::model::Trace, device: u32) -> Option<Warning> {
    if !trace.has_time() || trace.plausible_time_span_us().is_some() {
        return None;
    }
    let backwards = trace
        .time_us
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1] < w[0]);
    let (count, first) = backwards.fold((0u64, None), |(c, f), (i, _)| {
        (c + 1, f.or(Some(i as u32 + 1)))
    });
    let span_s = trace
        .time_us
        .last()
        .copied()
        .unwrap_or(0)
        .saturating_sub(trace.time_us[0]) as f64
        / 1e6;
    let message = if count > 0 {
        "event times go backwards: the time span is not shown".to_string()
    } else {
        format!(
            "event times span {span_s:.0} s, more than a year: the times are not microseconds of one \
             run, and the time span is not shown"
        )
    };
    Some(Warning {
        kind: WarningKind::OddField,
        device: Some(device),
        event: first,
        count: count.max(1),
        message,
    })
}

/// Counts one kind of oddity and becomes one warning.
struct Tally {
    kind: WarningKind,
    message: &'static str,
    count: u64,
    first: Option<u32>,
}

impl Tally {
    fn new(kind: WarningKind, message: &'static str) -> Self {
        Self {
            kind,
            message,
            count: 0,
            first: None,
        }
    }

    fn hit(&mut self, event: Option<u32>) {
        self.count += 1;
        if self.first.is_none() {
            self.first = event;
        }
    }

    fn into_warning(self, device: u32) -> Option<Warning> {
        (self.count > 0).then(|| Warning {
            kind: self.kind,
            device: Some(device),
            event: self.first,
            count: self.count,
            message: self.message.to_string(),
        })
    }
}

/// How event `i` (of `action`, `size` bytes, lifetime `id`) changes the three totals. A
/// `free_completed` lowers allocated bytes only where no `free_requested` did (none recorded, or
/// one from before the trace).
fn event_change(action: Action, size: i64, lifetimes: &[Lifetime], id: LifetimeId) -> Totals {
    let (allocated_bytes, active_bytes, reserved_bytes) = match action {
        Action::Alloc => (size, size, 0),
        Action::FreeRequested => (-size, 0, 0),
        Action::FreeCompleted => {
            let lifetime = &lifetimes[id as usize];
            let requested =
                lifetime.free_requested_event.is_some() || lifetime.pending_free_at_start;
            (if requested { 0 } else { -size }, -size, 0)
        }
        Action::SegmentAlloc | Action::SegmentMap => (0, 0, size),
        Action::SegmentFree | Action::SegmentUnmap => (0, 0, -size),
        _ => (0, 0, 0),
    };
    Totals {
        allocated_bytes,
        active_bytes,
        reserved_bytes,
    }
}

/// The last `free_completed` event at each of `addrs` (`None`: the trace never frees it), in
/// their order. One backward pass, looking up only frees, and none when `addrs` is empty.
fn last_frees(trace: &crate::model::Trace, addrs: &[u64]) -> Vec<Option<u32>> {
    let mut last: FxHashMap<u64, Option<u32>> = addrs.iter().map(|&a| (a, None)).collect();
    let mut unknown = last.len();
    for i in (0..trace.len()).rev() {
        if unknown == 0 {
            break;
        }
        if trace.action[i] == Action::FreeCompleted
            && let Some(slot) = last.get_mut(&trace.addr[i])
            && slot.is_none()
        {
            *slot = Some(i as u32);
            unknown -= 1;
        }
    }
    addrs
        .iter()
        .map(|a| last.get(a).copied().flatten())
        .collect()
}

/// The three totals after every event, their peaks, and where the file's figures are impossible.
struct RunningTotals {
    allocated_bytes: Vec<i64>,
    active_bytes: Vec<i64>,
    reserved_bytes: Vec<i64>,
    peak_allocated: Peak,
    peak_active: Peak,
    peak_reserved: Peak,
    below_zero: Tally,
    deepest_below_zero: i64,
    above_reserved: Tally,
}

/// One pass from `initial`: each event's change added to the running totals. Bytes never go
/// below zero: where the file's frees outrun its allocs, the figure is held at 0 and a warning
/// says by how much it fell. A peak is the first event at the highest (held) figure.
fn running_totals(
    trace: &crate::model::Trace,
    lifetimes: &[Lifetime],
    event_lifetime: &[LifetimeId],
    initial: Totals,
    columns: [Vec<i64>; 3],
) -> RunningTotals {
    let start = initial.at_least_zero();
    let first_peak = |bytes: i64| Peak { bytes, event: None };
    let [allocated_bytes, active_bytes, reserved_bytes] = columns;
    let mut out = RunningTotals {
        allocated_bytes,
        active_bytes,
        reserved_bytes,
        peak_allocated: first_peak(start.allocated_bytes),
        peak_active: first_peak(start.active_bytes),
        peak_reserved: first_peak(start.reserved_bytes),
        below_zero: Tally::new(
            WarningKind::TraceDisagreesWithSegments,
            "the trace frees more than it allocated: bytes would fall below zero and are shown as 0",
        ),
        deepest_below_zero: 0,
        above_reserved: Tally::new(
            WarningKind::TraceDisagreesWithSegments,
            "allocated bytes above reserved bytes",
        ),
    };
    let mut cum = initial;
    let events = trace
        .action
        .iter()
        .zip(&trace.size_bytes)
        .zip(event_lifetime);
    for (i, ((&action, &size), &id)) in events.enumerate() {
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        cum = cum.saturating_add(event_change(action, size, lifetimes, id));
        let event = Some(i as u32);
        let lowest = cum
            .allocated_bytes
            .min(cum.active_bytes)
            .min(cum.reserved_bytes);
        if lowest < 0 {
            out.below_zero.hit(event);
            out.deepest_below_zero = out.deepest_below_zero.min(lowest);
        }
        let held = cum.at_least_zero();
        for (peak, bytes) in [
            (&mut out.peak_allocated, held.allocated_bytes),
            (&mut out.peak_active, held.active_bytes),
            (&mut out.peak_reserved, held.reserved_bytes),
        ] {
            if bytes > peak.bytes {
                *peak = Peak { bytes, event };
            }
        }
        if held.allocated_bytes > held.reserved_bytes {
            out.above_reserved.hit(event);
        }
        out.allocated_bytes.push(held.allocated_bytes);
        out.active_bytes.push(held.active_bytes);
        out.reserved_bytes.push(held.reserved_bytes);
    }
    out
}

impl DeviceReplay {
    #[expect(
        clippy::too_many_lines,
        reason = "the forward pass is one loop over the actions"
    )]
    pub fn build(device: &Device) -> (Self, Vec<Warning>) {
        let trace = &device.trace;
        let n = trace.len();
        let has_free_requested = trace.action.contains(&Action::FreeRequested);
        let mut free_without_alloc = Tally::new(
            WarningKind::FreeWithoutAlloc,
            "blocks freed in the trace whose alloc is older than the trace",
        );
        let mut alloc_at_live = Tally::new(
            WarningKind::AllocAtLiveAddress,
            "alloc at an address that is still live",
        );
        let mut disagree_blocks = Tally::new(
            WarningKind::TraceDisagreesWithSegments,
            "blocks the trace leaves live are not in the final segments",
        );
        let mut disagree_final = Tally::new(
            WarningKind::TraceDisagreesWithSegments,
            "live blocks in the final segments were freed by the trace and not allocated again",
        );

        // Pass 1: lifetimes, which lifetime each event belongs to, and the sum of every
        // event's change to the three totals (to undo from the final state). The running totals
        // are made later, in one pass beside the checkpoints.
        let alloc_count = trace.action.iter().filter(|&&a| a == Action::Alloc).count();
        let mut lifetimes: Vec<Lifetime> = Vec::with_capacity(alloc_count);
        let mut event_lifetime: Vec<LifetimeId> = Vec::with_capacity(n);
        let columns: [Vec<i64>; 3] = std::array::from_fn(|_| Vec::with_capacity(n));
        // This pass runs on one core: the other maps the pages it and the totals will fill.
        let prefault = (n >= PREFAULT_MIN_EVENTS)
            .then(crate::prefault::Prefaulter::new)
            .flatten();
        if let Some(prefault) = &prefault {
            prefault.spare(&lifetimes);
            prefault.spare(&event_lifetime);
            for column in &columns {
                prefault.spare(column);
            }
        }
        let mut live: FxHashMap<u64, LifetimeId> = FxHashMap::default();
        let mut sum = Totals::default();
        for i in 0..n {
            let (addr, size) = (
                trace.addr[i],
                i64::try_from(trace.size_bytes[i]).unwrap_or(i64::MAX),
            );
            let event = Some(i as u32);
            let ghost = |lifetimes: &mut Vec<Lifetime>| {
                lifetimes.push(Lifetime {
                    addr,
                    requested_size_bytes: trace.size_bytes[i],
                    size_bytes: None,
                    stream: trace.stream[i],
                    stack: trace.stack[i],
                    alloc_event: None,
                    free_requested_event: None,
                    free_completed_event: None,
                    pending_free_at_start: false,
                });
                (lifetimes.len() - 1) as LifetimeId
            };
            let id = match trace.action[i] {
                Action::Alloc => {
                    let id = lifetimes.len() as LifetimeId;
                    if let Some(old) = live.insert(addr, id) {
                        alloc_at_live.hit(event);
                        lifetimes[old as usize].free_completed_event = event;
                    }
                    lifetimes.push(Lifetime {
                        addr,
                        requested_size_bytes: trace.size_bytes[i],
                        size_bytes: None,
                        stream: trace.stream[i],
                        stack: trace.stack[i],
                        alloc_event: event,
                        free_requested_event: None,
                        free_completed_event: None,
                        pending_free_at_start: false,
                    });
                    id
                }
                Action::FreeRequested => {
                    let id = *live.entry(addr).or_insert_with(|| {
                        free_without_alloc.hit(event);
                        ghost(&mut lifetimes)
                    });
                    lifetimes[id as usize].free_requested_event = event;
                    id
                }
                Action::FreeCompleted => {
                    let id = live.remove(&addr).unwrap_or_else(|| {
                        free_without_alloc.hit(event);
                        let id = ghost(&mut lifetimes);
                        // Its free_requested, if the file records them, came before the trace.
                        lifetimes[id as usize].pending_free_at_start = has_free_requested;
                        id
                    });
                    lifetimes[id as usize].free_completed_event = event;
                    id
                }
                _ => NO_LIFETIME,
            };
            event_lifetime.push(id);
            sum = sum.saturating_add(event_change(trace.action[i], size, &lifetimes, id));
        }

        drop(prefault);

        // Blocks live at dump time: attach their rounded size, or add them as alive throughout.
        let mut not_in_trace = Vec::new();
        for (segment, block) in device
            .segments
            .iter()
            .flat_map(|s| s.blocks.iter().map(move |b| (s, b)))
        {
            if block.state == BlockState::Inactive {
                continue;
            }
            if let Some(id) = live.remove(&block.address) {
                lifetimes[id as usize].size_bytes = Some(block.size_bytes);
                continue;
            }
            not_in_trace.push(block.address);
            lifetimes.push(Lifetime {
                addr: block.address,
                requested_size_bytes: block.requested_size_bytes,
                size_bytes: Some(block.size_bytes),
                stream: segment.stream,
                stack: block.stack,
                alloc_event: None,
                free_requested_event: None,
                free_completed_event: None,
                pending_free_at_start: block.state == BlockState::ActivePendingFree,
            });
        }
        // A final block the trace freed (its last free) and never allocated again.
        for freed_at in last_frees(trace, &not_in_trace).into_iter().flatten() {
            disagree_final.hit(Some(freed_at));
        }
        let mut left_live: Vec<LifetimeId> = live.into_values().collect();
        left_live.sort_unstable();
        for id in left_live {
            disagree_blocks.hit(lifetimes[id as usize].alloc_event);
        }

        // Totals: final from the segments, initial by undoing every change.
        let as_i64 = |bytes: u64| i64::try_from(bytes).unwrap_or(i64::MAX);
        let final_totals = Totals {
            allocated_bytes: as_i64(device.requested_bytes_final(&[BlockState::ActiveAllocated])),
            active_bytes: as_i64(device.requested_bytes_final(&[
                BlockState::ActiveAllocated,
                BlockState::ActivePendingFree,
            ])),
            reserved_bytes: as_i64(device.reserved_bytes_final()),
        };
        let initial = final_totals.saturating_add(Totals {
            allocated_bytes: sum.allocated_bytes.saturating_neg(),
            active_bytes: sum.active_bytes.saturating_neg(),
            reserved_bytes: sum.reserved_bytes.saturating_neg(),
        });

        let (running, (checkpoints, segment_mismatches)) = rayon::join(
            || running_totals(trace, &lifetimes, &event_lifetime, initial, columns),
            || build_checkpoints(device, &lifetimes, &event_lifetime),
        );
        let signed_initial = initial;
        let initial = initial.at_least_zero();
        let replay = Self {
            ordinal: device.ordinal,
            initial,
            peak_allocated: running.peak_allocated,
            peak_active: running.peak_active,
            peak_reserved: running.peak_reserved,
            allocated_bytes: running.allocated_bytes,
            active_bytes: running.active_bytes,
            reserved_bytes: running.reserved_bytes,
            lifetimes,
            event_lifetime,
            checkpoints,
            event_count: n,
        };

        let mut warnings: Vec<Warning> = [
            free_without_alloc,
            alloc_at_live,
            disagree_blocks,
            disagree_final,
        ]
        .into_iter()
        .filter_map(|t| t.into_warning(device.ordinal))
        .collect();
        if let Some(mut warning) = running.below_zero.into_warning(device.ordinal) {
            warning.message = format!(
                "the trace frees more than it allocated: bytes would fall {} below zero and are shown \
                 as 0",
                crate::units::format_bytes(running.deepest_below_zero.saturating_neg())
            );
            warnings.push(warning);
        }
        warnings.extend(time_warning(trace, device.ordinal));
        if segment_mismatches > 0 {
            warnings.push(Warning {
                kind: WarningKind::TraceDisagreesWithSegments,
                device: Some(device.ordinal),
                event: None,
                count: segment_mismatches,
                message: "segment events that do not match the segments reconstructed from the final state".into(),
            });
        }
        if signed_initial != initial {
            warnings.push(Warning {
                kind: WarningKind::TraceDisagreesWithSegments,
                device: Some(device.ordinal),
                event: None,
                count: 1,
                message: format!(
                    "undoing the trace from the final segments leaves less than nothing before the first \
                     event (allocated short by {}, active by {}, reserved by {}); those bytes are shown as 0",
                    crate::units::format_bytes(signed_initial.allocated_bytes.min(0).saturating_neg()),
                    crate::units::format_bytes(signed_initial.active_bytes.min(0).saturating_neg()),
                    crate::units::format_bytes(signed_initial.reserved_bytes.min(0).saturating_neg())
                ),
            });
        }
        warnings.extend(running.above_reserved.into_warning(device.ordinal));
        (replay, warnings)
    }

    pub fn event_count(&self) -> usize {
        self.event_count
    }

    /// Totals right after event `n` (`None`: before the first event). O(1).
    pub fn totals_after(&self, n: Option<u32>) -> Totals {
        match n {
            None => self.initial,
            Some(n) => {
                let i = (n as usize).min(self.event_count.saturating_sub(1));
                if self.event_count == 0 {
                    return self.initial;
                }
                Totals {
                    allocated_bytes: self.allocated_bytes[i],
                    active_bytes: self.active_bytes[i],
                    reserved_bytes: self.reserved_bytes[i],
                }
            }
        }
    }

    /// Allocated bytes after each event, oldest first.
    pub fn allocated_bytes(&self) -> &[i64] {
        &self.allocated_bytes
    }

    /// Active bytes after each event, oldest first.
    pub fn active_bytes(&self) -> &[i64] {
        &self.active_bytes
    }

    /// Reserved bytes after each event, oldest first.
    pub fn reserved_bytes(&self) -> &[i64] {
        &self.reserved_bytes
    }

    /// Totals at dump time.
    pub fn final_totals(&self) -> Totals {
        self.totals_after(self.event_count.checked_sub(1).map(|n| n as u32))
    }

    pub fn checkpoint_count(&self) -> usize {
        self.checkpoints.len()
    }

    /// Clamps `n` to the trace: `None` before the first event, past the end: the last one.
    fn clamp_event(&self, n: Option<u32>) -> Option<u32> {
        n.map(|n| n.min(self.event_count.saturating_sub(1) as u32))
            .filter(|_| self.event_count > 0)
    }

    /// Segment pieces and live blocks `(address, lifetime)` right after event `n` (clamped),
    /// from the nearest checkpoint.
    fn state_after(&self, device: &Device, n: Option<u32>) -> (Pieces, Vec<(u64, LifetimeId)>) {
        let applied = n.map_or(0, |n| n as usize + 1);
        let cp_index = self
            .checkpoints
            .partition_point(|c| c.at <= applied)
            .saturating_sub(1);
        let cp = &self.checkpoints[cp_index];
        let mut pieces: Pieces = cp.pieces.iter().copied().collect();
        // Changes since the checkpoint: address → live lifetime (None: freed).
        let mut changed: FxHashMap<u64, Option<LifetimeId>> = FxHashMap::default();
        let trace = &device.trace;
        for i in cp.at..applied {
            apply_segment_event(&mut pieces, device, i, false);
            apply_block_event(
                &mut changed,
                trace.action[i],
                trace.addr[i],
                self.event_lifetime[i],
            );
        }
        let live: Vec<(u64, LifetimeId)> = cp
            .live
            .iter()
            .copied()
            .filter(|(addr, _)| !changed.contains_key(addr))
            .collect();
        let mut added: Vec<(u64, LifetimeId)> = changed
            .into_iter()
            .filter_map(|(addr, id)| id.map(|id| (addr, id)))
            .collect();
        added.sort_unstable();
        (pieces, merge_sorted(live, added))
    }

    /// Live blocks right after event `n` (`None`: before the first event) as
    /// `(address, lifetime)`, in address order. Replays at most one checkpoint interval.
    pub fn live_after(&self, device: &Device, n: Option<u32>) -> Vec<(u64, LifetimeId)> {
        self.state_after(device, self.clamp_event(n)).1
    }

    /// The full pool right after event `n` (`None`: before the first event; past the end: the
    /// final state). Replays at most one checkpoint interval.
    pub fn pool_after(&self, device: &Device, n: Option<u32>) -> PoolState {
        let n = self.clamp_event(n);
        let (pieces, live) = self.state_after(device, n);
        let mut segments = group_pieces(&pieces);
        let mut unplaced_blocks = Vec::new();
        let mut seg_i = 0;
        for &(addr, id) in &live {
            while seg_i < segments.len()
                && segments[seg_i]
                    .address
                    .saturating_add(segments[seg_i].total_size_bytes)
                    <= addr
            {
                seg_i += 1;
            }
            let lifetime = &self.lifetimes[id as usize];
            let block = PoolBlock {
                address: addr,
                size_bytes: lifetime
                    .size_bytes
                    .unwrap_or_else(|| rounded_size_bytes(lifetime.requested_size_bytes)),
                requested_size_bytes: lifetime.requested_size_bytes,
                state: lifetime.state_after(n),
                size_exact: lifetime.size_bytes.is_some(),
                lifetime: Some(id),
            };
            match segments.get_mut(seg_i) {
                Some(seg) if seg.address <= addr => seg.blocks.push(block),
                _ => unplaced_blocks.push(block),
            }
        }
        for seg in &mut segments {
            fill_gaps(seg);
        }
        PoolState {
            event: n,
            totals: self.totals_after(n),
            segments,
            unplaced_blocks,
        }
    }
}

fn merge_sorted(a: Vec<(u64, LifetimeId)>, b: Vec<(u64, LifetimeId)>) -> Vec<(u64, LifetimeId)> {
    if b.is_empty() {
        return a;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => {
                out.push(if x <= y { a.next() } else { b.next() }.unwrap_or_default());
            }
            (Some(_), None) => out.extend(a.by_ref()),
            (None, Some(_)) => out.extend(b.by_ref()),
            (None, None) => return out,
        }
    }
}

/// Clamps estimated block sizes to the next block and the segment end, then adds the free gaps
/// as inactive blocks.
fn fill_gaps(seg: &mut PoolSegment) {
    let end = seg.address.saturating_add(seg.total_size_bytes);
    let live = std::mem::take(&mut seg.blocks);
    let mut cursor = seg.address;
    for i in 0..live.len() {
        let mut block = live[i].clone();
        let limit = live.get(i + 1).map_or(end, |next| next.address);
        if !block.size_exact {
            block.size_bytes = block.size_bytes.min(limit.saturating_sub(block.address));
        }
        if block.address > cursor {
            seg.blocks.push(gap(cursor, block.address - cursor));
        }
        cursor = cursor.max(block.address.saturating_add(block.size_bytes));
        seg.blocks.push(block);
    }
    if cursor < end {
        seg.blocks.push(gap(cursor, end - cursor));
    }
}

fn gap(address: u64, size_bytes: u64) -> PoolBlock {
    PoolBlock {
        address,
        size_bytes,
        requested_size_bytes: 0,
        state: BlockState::Inactive,
        size_exact: true,
        lifetime: None,
    }
}

/// Pieces as segments: adjacent expandable pieces of one stream and pool form one segment.
fn group_pieces(pieces: &Pieces) -> Vec<PoolSegment> {
    let mut segments: Vec<PoolSegment> = Vec::new();
    for (&start, piece) in pieces {
        if let Some(last) = segments.last_mut() {
            let adjacent = last.address.saturating_add(last.total_size_bytes) == start;
            if adjacent
                && piece.expandable
                && last.is_expandable
                && last.stream == piece.stream
                && last.pool == piece.pool
            {
                last.total_size_bytes = last.total_size_bytes.saturating_add(piece.end - start);
                continue;
            }
        }
        segments.push(PoolSegment {
            address: start,
            total_size_bytes: piece.end - start,
            stream: piece.stream,
            pool: piece.pool,
            is_expandable: piece.expandable,
            blocks: Vec::new(),
        });
    }
    segments
}

fn apply_block_event(
    changed: &mut FxHashMap<u64, Option<LifetimeId>>,
    action: Action,
    addr: u64,
    id: LifetimeId,
) {
    match action {
        Action::Alloc => {
            changed.insert(addr, Some(id));
        }
        Action::FreeCompleted => {
            changed.insert(addr, None);
        }
        _ => {}
    }
}

/// Applies (or, with `undo`, reverts) event `i` to the segment pieces; false if it did not fit.
fn apply_segment_event(pieces: &mut Pieces, device: &Device, i: usize, undo: bool) -> bool {
    let t = &device.trace;
    let (start, size) = (t.addr[i], t.size_bytes[i]);
    let end = start.saturating_add(size);
    let (adds, expandable) = match t.action[i] {
        Action::SegmentAlloc => (true, false),
        Action::SegmentMap => (true, true),
        Action::SegmentFree => (false, false),
        Action::SegmentUnmap => (false, true),
        _ => return true,
    };
    if adds == undo {
        remove_range(pieces, start, end) == size
    } else {
        let pool = if t.pool[i] == crate::model::NO_POOL {
            default_pool(device)
        } else {
            t.pool[i]
        };
        add_range(
            pieces,
            start,
            Piece {
                end,
                stream: t.stream[i],
                pool,
                expandable,
            },
        )
    }
}

/// The pool id segments carry when the trace does not say: the first final segment's.
fn default_pool(device: &Device) -> PoolId {
    device
        .segments
        .first()
        .map_or(crate::model::NO_POOL, |s| s.pool)
}

/// Undoes the trace's segment events from the final segments, then walks forward taking
/// checkpoints. Returns them with the number of segment events that did not fit.
fn build_checkpoints(
    device: &Device,
    lifetimes: &[Lifetime],
    event_lifetime: &[LifetimeId],
) -> (Vec<Checkpoint>, u64) {
    let t = &device.trace;
    let n = t.len();
    let mut mismatches = 0;
    let mut pieces: Pieces = Pieces::new();
    for s in &device.segments {
        add_range(
            &mut pieces,
            s.address,
            Piece {
                end: s.address.saturating_add(s.total_size_bytes),
                stream: s.stream,
                pool: s.pool,
                expandable: s.is_expandable,
            },
        );
    }
    for i in (0..n).rev() {
        if !apply_segment_event(&mut pieces, device, i, true) {
            mismatches += 1;
        }
    }

    let mut live: FxHashMap<u64, LifetimeId> = FxHashMap::default();
    for (id, l) in lifetimes.iter().enumerate() {
        if l.alloc_event.is_none() {
            live.insert(l.addr, id as LifetimeId);
        }
    }
    // Live blocks are put in address order after the walk, on every core.
    let snapshot = |at: usize, pieces: &Pieces, live: &FxHashMap<u64, LifetimeId>| {
        let live: Vec<(u64, LifetimeId)> = live.iter().map(|(&a, &id)| (a, id)).collect();
        Checkpoint {
            at,
            pieces: pieces.iter().map(|(&k, &v)| (k, v)).collect(),
            live,
        }
    };
    let mut checkpoints = vec![snapshot(0, &pieces, &live)];
    let mut last = 0;
    for (i, &lifetime) in event_lifetime.iter().enumerate() {
        if i - last >= MIN_CHECKPOINT_INTERVAL.max(live.len() / 2) {
            checkpoints.push(snapshot(i, &pieces, &live));
            last = i;
        }
        apply_segment_event(&mut pieces, device, i, false);
        match t.action[i] {
            Action::Alloc => {
                live.insert(t.addr[i], lifetime);
            }
            Action::FreeCompleted => {
                live.remove(&t.addr[i]);
            }
            _ => {}
        }
    }
    checkpoints
        .par_iter_mut()
        .for_each(|c| c.live.sort_unstable());
    (checkpoints, mismatches)
}

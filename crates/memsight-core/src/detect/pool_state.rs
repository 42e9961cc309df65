//! The pool at dump time. State-only recordings: a device whose trace allocates nothing (no
//! trace, or the one event an old `_record_memory_history(True)` keeps) shows only its pool at
//! dump time. What that pool can say is said here, once per device: how full it is, who holds
//! it (call sites with their bytes, what their frames name — a KV cache, a model load, an
//! optimizer — and the remainder without a stack), how much cached memory no block uses (an
//! idle-cache finding when that is much), and how the file was recorded and how to record what
//! would settle the rest.
//!
//! Traced recordings: much cached memory in no block when the trace ends is said too (the
//! question behind "nvidia-smi shows 20 GB but my tensors take 4"): how much, how much of it
//! `empty_cache()` could return (whole free segments) and how much it could not (free pieces of
//! segments that hold live blocks), and where the pool last grew, as the trace shows it. Not a
//! leak (no block holds it) and nothing to change for a process alone on its device. Skipped
//! with expandable segments, whose pages `empty_cache()` unmaps piece by piece.

use std::fmt::Write as _;

use crate::model::{BlockState, NO_STACK, StackId};
use crate::units::{format_bytes, percent};
use rustc_hash::FxHashSet;

use super::{DeviceContext, Finding, FindingKind, Severity};

/// Idle at least this share (percent) of the reserved bytes …
const MIN_IDLE_PERCENT: u64 = 20;
/// … and at least this much is worth a note (below, it is the cache's normal overhead).
const MIN_IDLE_BYTES: u64 = 512 << 20;
/// Live blocks holding at least this share (percent) of the reserved bytes fill the pool.
const FULL_POOL_PERCENT: u64 = 95;
/// Call sites named for the live blocks.
const TOP_SITES: usize = 3;

/// The cached memory of a pool that no block uses, at dump time.
struct Idle {
    reserved_bytes: u64,
    /// Segments with no live block: `empty_cache()` returns them.
    empty_segments: usize,
    empty_bytes: u64,
    /// Free blocks inside segments that still hold live blocks.
    holed_segments: usize,
    hole_bytes: u64,
    /// Private pools (CUDA graphs', `MemPool`s'): how many, what their segments reserve and
    /// hold live, and their completely free segments' bytes, which `empty_cache()` leaves.
    private: PrivatePools,
}

#[derive(Default)]
struct PrivatePools {
    pools: usize,
    segments: usize,
    reserved_bytes: u64,
    allocated_bytes: u64,
    empty_bytes: u64,
}

impl PrivatePools {
    /// " 32 private pools (`segment_pool_id` other than `(0, 0)`: …) hold 10.6 GiB of it in 235
    /// segments, 855 MiB of that in live blocks. …".
    fn words(&self, module: &str) -> String {
        format!(
            " {} private pool{} (segment_pool_id other than (0, 0): the pools of captured CUDA \
             graphs, or of a MemPool) hold {} of it in {} segment{}, {} of that in live blocks. \
             A private pool's segments serve only the allocations made into it: a graph's free \
             blocks are where each replay of it puts its tensors, not cache for other requests, \
             and {module}.empty_cache() does not release them while the graph that owns them \
             lives.",
            self.pools,
            if self.pools == 1 { "" } else { "s" },
            format_bytes(self.reserved_bytes as i64),
            self.segments,
            if self.segments == 1 { "" } else { "s" },
            format_bytes(self.allocated_bytes as i64),
        )
    }
}

/// What lowers what private pools reserve.
const PRIVATE_POOLS_ADVICE: &str = "Each captured CUDA graph keeps its own pool for as long as \
    it lives. Capture fewer graphs (pad inputs to a few sizes and capture one graph per size), \
    let graphs share one pool (torch.cuda.graph(..., pool=torch.cuda.graph_pool_handle()) or \
    another graph's pool()), or delete graphs no longer used; empty_cache() and \
    expandable_segments do not return a live graph's memory.";

impl Idle {
    fn of(snapshot: &crate::model::Snapshot, device: &crate::model::Device) -> Self {
        let mut idle = Self {
            reserved_bytes: 0,
            empty_segments: 0,
            empty_bytes: 0,
            holed_segments: 0,
            hole_bytes: 0,
            private: PrivatePools::default(),
        };
        let mut private_pools = FxHashSet::default();
        for s in &device.segments {
            idle.reserved_bytes += s.total_size_bytes;
            let free: u64 = s
                .blocks
                .iter()
                .filter(|b| b.state == BlockState::Inactive)
                .map(|b| b.size_bytes)
                .sum();
            if snapshot.is_private_pool(s.pool) {
                private_pools.insert(s.pool);
                idle.private.segments += 1;
                idle.private.reserved_bytes += s.total_size_bytes;
                idle.private.allocated_bytes += s.total_size_bytes.saturating_sub(free);
                if free >= s.total_size_bytes {
                    idle.private.empty_bytes += s.total_size_bytes;
                }
            }
            if free == 0 {
                continue;
            }
            if free >= s.total_size_bytes {
                idle.empty_segments += 1;
                idle.empty_bytes += s.total_size_bytes;
            } else {
                idle.holed_segments += 1;
                idle.hole_bytes += free;
            }
        }
        idle.private.pools = private_pools.len();
        idle
    }

    fn bytes(&self) -> u64 {
        self.empty_bytes + self.hole_bytes
    }

    /// Much of the pool, and much in bytes: below either, it is the cache's normal overhead.
    fn worth_a_note(&self) -> bool {
        self.bytes() * 100 >= self.reserved_bytes.max(1) * MIN_IDLE_PERCENT
            && self.bytes() >= MIN_IDLE_BYTES
    }

    /// "3.00 GiB in 2 completely free segments, and 1.00 GiB in free gaps inside 1 segment that
    /// still holds live blocks".
    fn words(&self) -> String {
        let whole = format!(
            "{} in {} completely free segment{}",
            format_bytes(self.empty_bytes as i64),
            self.empty_segments,
            if self.empty_segments == 1 { "" } else { "s" },
        );
        let gaps = format!(
            "{} in free gaps inside {} segment{} that still hold{} live blocks",
            format_bytes(self.hole_bytes as i64),
            self.holed_segments,
            if self.holed_segments == 1 { "" } else { "s" },
            if self.holed_segments == 1 { "s" } else { "" },
        );
        match (self.empty_segments, self.holed_segments) {
            (_, 0) => whole,
            (0, _) => gaps,
            _ => format!("{whole}, and {gaps}"),
        }
    }
}

/// `fragmented_until`: the last event of the device's fragmentation warnings, if it has any; the
/// idle cache at the end of a trace is part of their reserve where the pool last grew in them.
/// `ran_short`: the device ran out of memory or stalled in the trace (those findings say what
/// lowers the need; the idle cache is then no reserve that "needs no change").
pub fn detect(cx: &DeviceContext, fragmented_until: Option<u32>, ran_short: bool) -> Vec<Finding> {
    let device = cx.device;
    if device.segments.is_empty() {
        return Vec::new();
    }
    if !cx.state_only {
        // A release of the cache after the fragmented stretch and new segments since: the
        // reserve at the end is not the one the warning is about (batch 24's held-out audit:
        // 11.7 of 12.2 GiB idle came from two segments made after the fragmented segments were
        // released).
        let last_growth = device
            .trace
            .action
            .iter()
            .rposition(|a| {
                matches!(
                    a,
                    crate::model::Action::SegmentAlloc | crate::model::Action::SegmentMap
                )
            })
            .map(|e| e as u32);
        let fragmented =
            fragmented_until.is_some_and(|end| last_growth.is_none_or(|grew| grew <= end));
        return at_trace_end(cx, fragmented, ran_short)
            .into_iter()
            .collect();
    }
    let (recorded, record_better) = how_recorded(cx);
    let pool = Idle::of(cx.snapshot, device);
    let (reserved, idle) = (pool.reserved_bytes, pool.bytes());
    if !pool.worth_a_note() {
        return vec![no_trace(cx, &pool, &recorded, record_better)];
    }
    let mut f = Finding::new(FindingKind::IdleCache, Severity::Info, device.ordinal);
    f.title = format!(
        "Idle cache: {} of the {} reserved is in no block",
        format_bytes(idle as i64),
        format_bytes(reserved as i64)
    );
    f.summary = format!(
        "When this snapshot was taken, the pool reserved {} and {} of it ({}%) held no tensor: \
         {}. The file has no trace of allocations, so it cannot tell whether the program will \
         reuse this memory.",
        format_bytes(reserved as i64),
        format_bytes(idle as i64),
        percent(idle, reserved),
        pool.words(),
    );
    f.summary.push_str(&live_sites(cx));
    let kept_per_item = one_block_per_item(cx);
    if let Some(item) = &kept_per_item {
        f.summary.push_str(&item.words());
    }
    f.summary.push(' ');
    f.summary.push_str(&recorded);
    f.bytes = idle;
    f.evidence = recording_evidence(cx);
    f.evidence.extend(super::pending_frees_words(cx.device));
    f.suggestion = format!(
        "Other processes and libraries cannot use cached memory. If one needs it, call \
         empty_cache() before it does: that returns the completely free segments ({}); the gaps \
         inside used segments stay until those segments are empty. If the program itself runs \
         again, it reuses the cache and nothing needs to change. To see where the gaps come \
         from, the next file needs a trace. {}",
        format_bytes(pool.empty_bytes.saturating_sub(pool.private.empty_bytes) as i64),
        record_better
    );
    if super::fragmentation::private_pools_dominate(cx) {
        let module = if cx.npu { "torch.npu" } else { "torch.cuda" };
        let release = release_words(&pool, module);
        f = private_pools_finding(f, &pool, module, &release);
    }
    if let Some(item) = kept_per_item {
        f.suggestion = format!("{} {}", item.advice(), f.suggestion);
    }
    vec![f]
}

/// A pool without a trace that holds little idle: what it holds and what cannot be judged, so
/// silence does not read as "checked and clean".
fn no_trace(cx: &DeviceContext, pool: &Idle, recorded: &str, record_better: String) -> Finding {
    let device = cx.device;
    let (reserved, idle) = (pool.reserved_bytes, pool.bytes());
    let mut f = Finding::new(FindingKind::Iterations, Severity::Info, device.ordinal);
    f.title = "No trace: only the pool at dump time".to_string();
    let sites = live_sites(cx);
    let holders = if sites.is_empty() {
        "the live blocks (the file names no call site for them)"
    } else {
        "the call sites above"
    };
    f.summary = format!(
        "The file holds the pool when it was written and no allocation over time: {} \
         reserved, {} in live blocks ({}%), {} cached in free blocks ({}).{sites} {} Peaks, \
         leaks, stalls and fragmentation over time cannot be judged without a trace.",
        format_bytes(reserved as i64),
        format_bytes(reserved.saturating_sub(idle) as i64),
        percent(reserved.saturating_sub(idle), reserved),
        format_bytes(idle as i64),
        pool.words(),
        recorded
    );
    f.bytes = reserved.saturating_sub(idle);
    let kept_per_item = one_block_per_item(cx);
    if let Some(item) = &kept_per_item {
        f.summary.push_str(&item.words());
    }
    if reserved.saturating_sub(idle) * 100 >= reserved * FULL_POOL_PERCENT {
        let _ = write!(
            f.summary,
            " The pool is full: live blocks hold {}% of what it reserved, and only {} \
             cached was left to reuse. If this file was written at an out-of-memory error, \
             the program needed more than the device held (capacity), not room lost to \
             fragmentation: what {holders} hold is what to lower.",
            percent(reserved.saturating_sub(idle), reserved),
            format_bytes(idle as i64)
        );
    }
    f.suggestion = match kept_per_item {
        Some(item) => format!("{} {record_better}", item.advice()),
        None => record_better,
    };
    f.evidence = recording_evidence(cx);
    f.evidence.extend(super::pending_frees_words(cx.device));
    f
}

/// " By stream (…): 4.82 GiB on stream 9483…, …": the idle bytes of each stream's segments,
/// where two streams or more hold a MiB or more of them (batch 37's held-out audit: a
/// four-camera service's 6.66 GiB of idle cache, 4.82 GiB of it on one camera's stream, told as
/// one sum); empty otherwise.
fn idle_by_stream(snapshot: &crate::model::Snapshot, device: &crate::model::Device) -> String {
    let mut by_stream: rustc_hash::FxHashMap<crate::model::StreamId, u64> =
        rustc_hash::FxHashMap::default();
    for segment in &device.segments {
        let idle: u64 = segment
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Inactive)
            .map(|b| b.size_bytes)
            .sum();
        *by_stream.entry(segment.stream).or_default() += idle;
    }
    let mut streams: Vec<(crate::model::StreamId, u64)> = by_stream
        .into_iter()
        .filter(|&(_, bytes)| bytes >= 1 << 20)
        .collect();
    if streams.len() < 2 {
        return String::new();
    }
    streams.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let named: Vec<String> = streams
        .iter()
        .take(IDLE_STREAMS_NAMED)
        .map(|&(stream, bytes)| {
            // The stream as the file writes it, not its index here.
            let raw = snapshot
                .streams
                .get(stream as usize)
                .copied()
                .unwrap_or(i128::from(stream));
            format!("{} on stream {raw}", format_bytes(bytes as i64))
        })
        .collect();
    let more = streams.len().saturating_sub(IDLE_STREAMS_NAMED);
    format!(
        " By stream (a stream's cached blocks serve only its own requests): {}{}.",
        named.join(", "),
        if more > 0 {
            format!(", and {more} more streams")
        } else {
            String::new()
        }
    )
}

/// Streams named in the idle cache's split by stream.
const IDLE_STREAMS_NAMED: usize = 5;

/// A traced device's pool holding much cached memory in no block when the trace ends.
fn at_trace_end(cx: &DeviceContext, fragmented: bool, ran_short: bool) -> Option<Finding> {
    let device = cx.device;
    let trace = &device.trace;
    if trace.is_empty() || device.segments.iter().any(|s| s.is_expandable) {
        return None;
    }
    let pool = Idle::of(cx.snapshot, device);
    if !pool.worth_a_note() {
        return None;
    }
    let (reserved, idle) = (pool.reserved_bytes, pool.bytes());
    let last = trace.len() as u32 - 1;
    let (module, smi) = if cx.npu {
        ("torch.npu", "npu-smi")
    } else {
        ("torch.cuda", "nvidia-smi")
    };
    let mut f = Finding::new(FindingKind::IdleCache, Severity::Info, device.ordinal);
    f.title = format!(
        "Idle cache at the end: {} of the {} reserved is in no block",
        format_bytes(idle as i64),
        format_bytes(reserved as i64)
    );
    f.summary = format!(
        "When the snapshot was written (the trace's last event is {last}), the pool reserved {} \
         and {} of it ({}%) held no tensor: {}. No block holds this memory, so it is not a leak: \
         the caching allocator keeps what it once reserved to serve later requests without \
         asking the device again; {smi} counts it as used.",
        format_bytes(reserved as i64),
        format_bytes(idle as i64),
        percent(idle, reserved),
        pool.words(),
    );
    f.summary.push_str(&idle_by_stream(cx.snapshot, device));
    f.summary.push_str(&last_growth(cx));
    f.summary.push_str(&allocated_at_the_end(cx));
    f.bytes = idle;
    f.events = (last, last);
    f.focus_event = Some(last);
    let release = release_words(&pool, module);
    if super::fragmentation::private_pools_dominate(cx) {
        return Some(private_pools_finding(f, &pool, module, &release));
    }
    f.suggestion = if fragmented {
        f.summary.push_str(
            " The fragmentation finding on this device is about this reserve: the pool grew \
             although its free pieces covered the requests.",
        );
        format!(
            "What lowers the reserve is in the fragmentation finding. Where another process or \
             library needs the memory meanwhile, {release}"
        )
    } else if ran_short {
        // Batch 25's held-out audit: "needs no change" on a rank that stalled three times and
        // on a run whose out-of-memory error came from cached memory in pieces.
        format!(
            "This device ran short of memory in the trace (see its out-of-memory or allocator \
             stall finding, which says what lowers the need): this is what the allocator held \
             afterwards. Where another process or library needs the memory, {release}"
        )
    } else {
        format!(
            "The idle cache itself needs no change for a process alone on its device. Where \
             another process or library needs the memory, {release}"
        )
    };
    f.evidence = vec![format!(
        "pool at the dump: {} segments, {reserved} bytes reserved, {idle} bytes in free blocks",
        device.segments.len()
    )];
    Some(f)
}

/// What `empty_cache()` would return of `pool`: its default pool's completely free segments.
fn release_words(pool: &Idle, module: &str) -> String {
    let default_empty_bytes = pool.empty_bytes.saturating_sub(pool.private.empty_bytes);
    let private = if pool.private.empty_bytes > 0 {
        format!(
            " (the {} of completely free segments in private pools stays while their graphs \
             live)",
            format_bytes(pool.private.empty_bytes as i64)
        )
    } else {
        String::new()
    };
    if pool.empty_bytes == 0 {
        format!(
            "{module}.empty_cache() cannot help: every segment still holds a live block, and a \
             segment is returned only when it is empty."
        )
    } else if default_empty_bytes == 0 {
        format!(
            "{module}.empty_cache() cannot help: no segment of the default pool is completely \
             free{private}, and a segment is returned only when it is empty."
        )
    } else {
        format!(
            "{module}.empty_cache() returns the completely free segments ({}){private}; the free \
             gaps inside used segments stay until those segments are empty, and the requests \
             that follow call the device's allocator again.",
            format_bytes(default_empty_bytes as i64)
        )
    }
}

/// The idle-cache finding `f` where private pools hold most of the reserve (batch 34's held-out
/// audit: a service capturing one CUDA graph per batch size held 10.6 GiB in 32 graph pools,
/// 0.83 GiB of it used, and was told `empty_cache()` would return 9.57 GiB): titled and advised
/// as the pools', a warning where most of what they reserve holds no tensor.
fn private_pools_finding(mut f: Finding, pool: &Idle, module: &str, release: &str) -> Finding {
    let private = &pool.private;
    f.title = format!(
        "Private pools: {} of the {} reserved, {} of it in use",
        format_bytes(private.reserved_bytes as i64),
        format_bytes(pool.reserved_bytes as i64),
        format_bytes(private.allocated_bytes as i64),
    );
    f.summary.push_str(&private.words(module));
    if private.allocated_bytes * 2 <= private.reserved_bytes {
        f.severity = Severity::Warning;
    }
    f.suggestion = format!("{PRIVATE_POOLS_ADVICE} Of the default pool, {release}");
    f
}

/// " What is still allocated at the end, 317 MiB in 749 blocks: 202 MiB optimizer state, …": the
/// live blocks when the trace ends, by category, largest first, as the peak splits its own
/// (batch 29's held-out audit: five keys' final pools, told only what was reserved and idle).
/// Empty where nothing is, and where the trace has no backward pass: there a block kept to the
/// end with no phase to tell it by is "what a forward pass keeps", a guess the end's split
/// would state as fact (`cuda_decomfl_adam`, zeroth-order training: its estimator's state,
/// replaced in each update, would read "479 MiB activation").
fn allocated_at_the_end(cx: &DeviceContext) -> String {
    if !cx
        .categories
        .runs
        .iter()
        .any(|r| r.phase == crate::category::Phase::Backward)
    {
        return String::new();
    }
    let alive = cx
        .replay
        .lifetimes
        .iter()
        .zip(&cx.categories.of_lifetime)
        .filter(|(l, _)| l.free_completed_event.is_none() && l.free_requested_event.is_none());
    let (mut blocks, mut bytes) = (0u64, 0u64);
    let parts = super::breakdown(alive.map(|(l, &c)| {
        blocks += 1;
        bytes += l.requested_size_bytes;
        (c, l.requested_size_bytes)
    }));
    if bytes == 0 {
        return String::new();
    }
    format!(
        " What is still allocated at the end, {} in {blocks} block{}: {}.",
        format_bytes(bytes as i64),
        if blocks == 1 { "" } else { "s" },
        super::parts_words(&parts)
    )
}

/// " The pool last grew at event 4512 (a `segment_alloc`), in iteration 2 of the trace's 4: the
/// 2 iterations after it ran on what was cached." Empty where the trace makes no segment.
fn last_growth(cx: &DeviceContext) -> String {
    use crate::model::Action;
    let trace = &cx.device.trace;
    let Some(e) = trace
        .action
        .iter()
        .rposition(|a| matches!(a, Action::SegmentAlloc | Action::SegmentMap))
    else {
        return " The trace makes no segment: the pool was this size before it began.".to_string();
    };
    let e = e as u32;
    // What came after the growth failed where the trace ends in an out-of-memory error after it
    // (batch 25's held-out audit: "the iteration after it ran on what was cached", which ended
    // in the failure).
    let failed_after = trace.action[e as usize..].contains(&Action::Oom);
    let mut words = format!(" The pool last grew at event {e} (a segment_alloc)");
    if let Some(steps) = &cx.steps {
        let n = steps.count();
        let first = steps.bounds.first().copied().unwrap_or(0);
        let after = if e < first {
            Some(n)
        } else {
            steps.step_of(e).map(|k| {
                let _ = write!(words, ", in iteration {} of the trace's {n}", k + 1);
                n - (k + 1)
            })
        };
        if let Some(after) = after.filter(|&a| a > 0 && !failed_after) {
            let _ = write!(
                words,
                ": {} after it ran on what was cached",
                if after == 1 {
                    "the iteration".to_string()
                } else {
                    format!("the {after} iterations")
                }
            );
        }
    }
    words.push('.');
    words
}

/// The facts the recording's description rests on.
fn recording_evidence(cx: &DeviceContext) -> Vec<String> {
    let live = cx
        .device
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state != BlockState::Inactive);
    let (n, stacked) = live.fold((0usize, 0usize), |(n, k), b| {
        (n + 1, k + usize::from(b.stack != NO_STACK))
    });
    vec![
        format!(
            "file: {}",
            if cx.snapshot.format.legacy_list {
                "a top-level list of segments"
            } else {
                "a dict of segments and device traces"
            }
        ),
        format!(
            "trace: {} event{}, none of them an allocation",
            cx.device.trace.len(),
            if cx.device.trace.len() == 1 { "" } else { "s" }
        ),
        format!("live blocks: {n}, {stacked} with a call stack"),
    ]
}

/// How the file was written, as its contents show it, and how to record what would settle
/// what it cannot: `(what the file shows, advice)`.
///
/// A top-level list of segments is `torch.cuda.memory_snapshot()` (or a `PyTorch` ≤ 1.13
/// `_snapshot()`). A dict with device traces is `_dump_snapshot` / `_snapshot()`: with no stack on
/// any block, history was off; with stacks on most live blocks and no trace, history kept state
/// alone (`enabled='state'`) or a trace of one entry (the old `_record_memory_history(True)`
/// default); with stacks on few, history was switched on shortly before the dump (the blocks
/// made since carry stacks, the older ones none).
fn how_recorded(cx: &DeviceContext) -> (String, String) {
    let npu = cx.npu;
    let api = if npu {
        "torch.npu.memory"
    } else {
        "torch.cuda.memory"
    };
    let live: Vec<StackId> = cx
        .device
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state != BlockState::Inactive)
        .map(|b| b.stack)
        .collect();
    let stacked = live.iter().filter(|&&s| s != NO_STACK).count();
    let from_the_start = format!(
        "Call {api}._record_memory_history() with its defaults (enabled='all') at the start \
         of the run, before the model is loaded, and write the file with \
         {api}._dump_snapshot(path): every block then carries the stack that made it, and the \
         trace keeps each allocation and free (raise max_entries if the run is long)."
    );
    let module = if npu { "torch.npu" } else { "torch.cuda" };
    if cx.snapshot.format.legacy_list {
        if stacked > 0 {
            let said = format!(
                "The file is a list of segments alone ({module}.memory_snapshot(), or an old \
                 _snapshot()); {stacked} of its {} live blocks carry call stacks, so history \
                 was being recorded, but a list keeps no trace.",
                live.len()
            );
            let advice = format!(
                "Its blocks carry call stacks, so history was recorded, but \
                 {module}.memory_snapshot() returns the segments alone. Write the file with \
                 {api}._dump_snapshot(path) instead: that keeps the trace as well. Recording \
                 from the start of the run gives every block its stack."
            );
            return (said, advice);
        }
        let said = format!(
            "The file is a list of segments alone ({module}.memory_snapshot(), or an old \
             _snapshot()), with no call stacks and no trace."
        );
        return (said, from_the_start);
    }
    let events = cx.device.trace.len();
    let trace_words = match events {
        0 => "an empty trace".to_string(),
        1 => "a trace of one event and no allocation".to_string(),
        n => format!("a trace of {n} events and no allocation"),
    };
    let said = if stacked == 0 {
        format!(
            "The file is what {api}._dump_snapshot() (or _snapshot()) writes, with {trace_words} \
             and no call stack on any block: memory history was not being recorded."
        )
    } else if stacked * 2 >= live.len() {
        let how = if events == 1 {
            "a trace buffer of one entry (the old _record_memory_history(True) default, \
             trace_alloc_max_entries=1)"
        } else {
            "enabled='state' (stacks of live blocks, no trace)"
        };
        format!(
            "The file is what {api}._dump_snapshot() (or _snapshot()) writes, with {trace_words}; \
             {stacked} of its {} live blocks carry call stacks: history was recorded with {how}.",
            live.len()
        )
    } else {
        let why = if python_frames_only(cx) {
            // Both, often: batch 19's re-audit, file 11, held each weight size twice without a
            // stack beside its momentum buffer with one (a weight made before recording, its
            // gradient made on the engine's thread), and graded "cannot tell which" debatable.
            "history was switched on shortly before the dump (the blocks made earlier have \
             none), or, as the stacks hold Python frames alone, the others were made on a thread \
             that runs no Python code (autograd's engine makes a backward pass's gradients \
             there), or both"
        } else {
            "history was switched on shortly before the dump, so the blocks made earlier have \
             none"
        };
        format!(
            "The file is what {api}._dump_snapshot() (or _snapshot()) writes, with {trace_words}; \
             only {stacked} of its {} live blocks carry call stacks: {why}.",
            live.len()
        )
    };
    (said, from_the_start)
}

/// Whether the live blocks' stacks hold Python frames alone (none native): a recording where a
/// thread that runs no Python code (autograd's engine) leaves its blocks with no stack.
fn python_frames_only(cx: &DeviceContext) -> bool {
    let snapshot = cx.snapshot;
    let mut stacks = cx
        .device
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state != BlockState::Inactive && b.stack != NO_STACK)
        .map(|b| b.stack)
        .peekable();
    stacks.peek().is_some()
        && stacks.all(|stack| {
            snapshot
                .stack_frames(stack)
                .all(|f| crate::frames::is_python(snapshot, f))
        })
}

/// Live blocks from one line, all of one size, from this many on: one tensor per item kept.
const MANY_BLOCKS: usize = 1000;

/// A line holding many live blocks of one size in a pool without a trace: one tensor per item
/// (batch 25's held-out audit: an embedding server's memo dict, 36,816 blocks of 3 KiB from one
/// line, left unsaid under "nothing needs to change"). Weights and optimizer state are left out
/// (a mixture of experts loads thousands of equal weights), and so is what a call of the model
/// made (a public guided-diffusion dump: 1,241 equal blocks under one `unet(...)` line, the
/// layers' tensors autograd keeps, no items).
struct PerItem {
    site: String,
    blocks: usize,
    block_bytes: u64,
}

impl PerItem {
    /// The lever, on condition: the pool cannot show that nothing bounds it. Where the count is
    /// a round one, a full cache is said first: nothing to change (batch 36's held-out audit: a
    /// service's cache of 4,096 = 2¹² entries, capped at that, told to bound it).
    fn advice(&self) -> String {
        let lever = format!(
            "If {} keeps one tensor per item with nothing to bound it (a memo dict, a list), \
             bound it (a cache of fixed size) or keep the items on the host.",
            self.site
        );
        match round_count(self.blocks) {
            Some(_) => format!(
                "Where these {} items are a cache full at its cap, nothing needs to change; \
                 only a trace or a second snapshot shows whether they grow. {lever}",
                self.blocks
            ),
            None => lever,
        }
    }

    fn words(&self) -> String {
        let round = round_count(self.blocks).map_or(String::new(), |round| {
            format!(
                " {} is a round count ({round}), the size a cache capped by the program holds \
                 once full.",
                self.blocks
            )
        });
        format!(
            " {} holds {} live blocks of {} each: one tensor per item kept (a cache, a list or \
             a dict of tensors).{round} A snapshot of the pool alone cannot show whether it \
             grows; two snapshots taken apart, or a trace, would.",
            self.site,
            self.blocks,
            format_bytes(self.block_bytes as i64)
        )
    }
}

/// "2^12" or "a multiple of 1,000" where `count` is one: what a program's cap on a cache is
/// (`maxsize=4096`, `capacity=10_000`), which a count of items kept by chance rarely is.
fn round_count(count: usize) -> Option<String> {
    if count.is_power_of_two() {
        Some(format!("2^{}", count.trailing_zeros()))
    } else if count.is_multiple_of(1000) {
        Some("a multiple of 1,000".to_string())
    } else {
        None
    }
}

fn one_block_per_item(cx: &DeviceContext) -> Option<PerItem> {
    let snapshot = cx.snapshot;
    let mut by_stack_and_size: rustc_hash::FxHashMap<(StackId, u64), usize> =
        rustc_hash::FxHashMap::default();
    for b in cx.device.segments.iter().flat_map(|s| &s.blocks) {
        if b.state != BlockState::Inactive && b.stack != NO_STACK {
            *by_stack_and_size
                .entry((b.stack, b.requested_size_bytes))
                .or_default() += 1;
        }
    }
    let mut by_site: rustc_hash::FxHashMap<(String, u64), usize> = rustc_hash::FxHashMap::default();
    for ((stack, size), n) in by_stack_and_size {
        if !crate::category::makes_model_state_or_runs_the_model(snapshot, stack) {
            *by_site
                .entry((super::site_name(snapshot, stack), size))
                .or_default() += n;
        }
    }
    by_site
        .into_iter()
        .filter(|&(_, n)| n >= MANY_BLOCKS)
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|((site, block_bytes), blocks)| PerItem {
            site,
            blocks,
            block_bytes,
        })
}

/// " The call sites holding most of the live blocks: …." (empty where no block has a stack): what
/// the pool held when it was written, by source line, in block sizes (as the pool counts them,
/// so that the sites and the remainder without a stack add up to the live bytes the finding
/// gives, not to the bytes requested), with what their frames name.
fn live_sites(cx: &DeviceContext) -> String {
    let live: Vec<(StackId, u64)> = cx
        .device
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state != BlockState::Inactive)
        .map(|b| (b.stack, b.size_bytes))
        .collect();
    if live.iter().all(|&(stack, _)| stack == NO_STACK) {
        return String::new();
    }
    let (stackless, stackless_blocks) = live
        .iter()
        .filter(|&&(stack, _)| stack == NO_STACK)
        .fold((0u64, 0usize), |(b, n), &(_, size)| (b + size, n + 1));
    let sites = super::sites_by_line(
        cx.snapshot,
        live.iter().copied().filter(|&(stack, _)| stack != NO_STACK),
    );
    let mut words = format!(
        " The call sites holding most of the live blocks (in block sizes, as the allocator \
         rounds them): {}.",
        super::sites_words(&sites, TOP_SITES)
    );
    if stackless > 0 {
        let _ = write!(
            words,
            " {} in {stackless_blocks} block{} carry no call stack ({}).",
            format_bytes(stackless as i64),
            if stackless_blocks == 1 { "" } else { "s" },
            if python_frames_only(cx) {
                "made before history was recorded, or on a thread that runs no Python code, as \
                 autograd's engine does"
            } else {
                "made before history was recorded"
            }
        );
    }
    let roles = roles(cx, &live);
    if !roles.is_empty() {
        let _ = write!(words, " Their frames name {}.", roles.join("; "));
    }
    words
}

/// What the live blocks' frames say they are for, with the bytes of each: "a KV cache (2.00 GiB
/// in 64 blocks, `allocate_kv_cache`)". Only what a frame's function name says: a block whose
/// frames name none of these is not guessed at.
pub(super) fn roles(cx: &DeviceContext, live: &[(StackId, u64)]) -> Vec<String> {
    use rustc_hash::FxHashMap;
    const ROLES: [(&str, &[&str]); 3] = [
        ("a KV cache", &crate::category::KV_CACHE),
        ("a model load", &crate::category::MODEL_LOADING),
        (
            "an optimizer",
            &[
                "_init_group",
                "_multi_tensor_adam",
                "_single_tensor_adam",
                "optimizer_step",
            ],
        ),
    ];
    let mut of_stack: FxHashMap<StackId, Option<(usize, String)>> = FxHashMap::default();
    let mut found: Vec<(u64, usize, String)> = vec![(0, 0, String::new()); ROLES.len()];
    for &(stack, bytes) in live.iter().filter(|&&(s, _)| s != NO_STACK) {
        let role = of_stack.entry(stack).or_insert_with(|| {
            // Python frames only, and no attention function: an attention kernel named for a
            // KV cache (flash-attn's `mha_fwd_kvcache`, its `flash_attn_with_kvcache` wrapper)
            // works on one; what it allocates is its output.
            cx.snapshot.stack_frames(stack).find_map(|frame| {
                let name = cx.snapshot.str(frame.name);
                let lower = name.to_ascii_lowercase();
                if !crate::frames::is_python(cx.snapshot, frame)
                    || lower.contains("attn")
                    || lower.contains("attention")
                {
                    return None;
                }
                ROLES
                    .iter()
                    .position(|(_, marks)| marks.iter().any(|m| lower.contains(m)))
                    .map(|k| (k, name.to_string()))
            })
        });
        if let Some((k, name)) = role {
            found[*k].0 += bytes;
            found[*k].1 += 1;
            if found[*k].2.is_empty() {
                found[*k].2.clone_from(name);
            }
        }
    }
    ROLES
        .iter()
        .zip(found)
        .filter(|(_, (bytes, _, _))| *bytes > 0)
        .map(|((role, _), (bytes, n, name))| {
            format!(
                "{role} ({} in {n} block{}, {name})",
                format_bytes(bytes as i64),
                if n == 1 { "" } else { "s" }
            )
        })
        .collect()
}

//! State-only recordings: a device whose trace allocates nothing (no trace, or the one event an
//! old `_record_memory_history(True)` keeps) shows only its pool at dump time. What that pool can
//! say is said here, once per device: how full it is, who holds it (call sites with their bytes,
//! what their frames name — a KV cache, a model load, an optimizer — and the remainder without a
//! stack), how much cached memory no block uses (an idle-cache finding when that is much), and
//! how the file was recorded and how to record what would settle the rest.

use std::fmt::Write as _;

use crate::model::{BlockState, NO_STACK, StackId};
use crate::units::{format_bytes, percent};

use super::{DeviceContext, Finding, FindingKind, Severity};

/// Idle at least this share (percent) of the reserved bytes …
const MIN_IDLE_PERCENT: u64 = 20;
/// … and at least this much is worth a note (below, it is the cache's normal overhead).
const MIN_IDLE_BYTES: u64 = 512 << 20;
/// Live blocks holding at least this share (percent) of the reserved bytes fill the pool.
const FULL_POOL_PERCENT: u64 = 95;
/// Call sites named for the live blocks.
const TOP_SITES: usize = 3;

pub fn detect(cx: &DeviceContext) -> Vec<Finding> {
    let device = cx.device;
    if !cx.state_only || device.segments.is_empty() {
        return Vec::new();
    }
    let (recorded, record_better) = how_recorded(cx);
    let reserved: u64 = device.segments.iter().map(|s| s.total_size_bytes).sum();
    let free_of = |s: &crate::model::Segment| -> u64 {
        s.blocks
            .iter()
            .filter(|b| b.state == BlockState::Inactive)
            .map(|b| b.size_bytes)
            .sum()
    };
    let (mut empty_segments, mut empty_bytes) = (0usize, 0u64);
    let (mut holed_segments, mut hole_bytes) = (0usize, 0u64);
    for s in &device.segments {
        let free = free_of(s);
        if free == 0 {
            continue;
        }
        if free >= s.total_size_bytes {
            empty_segments += 1;
            empty_bytes += s.total_size_bytes;
        } else {
            holed_segments += 1;
            hole_bytes += free;
        }
    }
    let idle = empty_bytes + hole_bytes;
    if idle * 100 < reserved.max(1) * MIN_IDLE_PERCENT || idle < MIN_IDLE_BYTES {
        // Nothing to report of the pool: say what cannot be judged, so silence does not read
        // as "checked and clean".
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
             reserved, {} in live blocks ({}%), {} cached in free blocks.{sites} {} Peaks, \
             leaks, stalls and fragmentation over time cannot be judged without a trace.",
            format_bytes(reserved as i64),
            format_bytes(reserved.saturating_sub(idle) as i64),
            percent(reserved.saturating_sub(idle), reserved),
            format_bytes(idle as i64),
            recorded
        );
        f.bytes = reserved.saturating_sub(idle);
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
        f.suggestion = record_better;
        f.evidence = recording_evidence(cx);
        return vec![f];
    }
    let mut f = Finding::new(FindingKind::IdleCache, Severity::Info, device.ordinal);
    f.title = format!(
        "Idle cache: {} of the {} reserved is in no block",
        format_bytes(idle as i64),
        format_bytes(reserved as i64)
    );
    f.summary = format!(
        "When this snapshot was taken, the pool reserved {} and {} of it ({}%) held no tensor: {} \
         in {empty_segments} completely free segment{}, and {} in free gaps inside {holed_segments} \
         segment{} that still hold live blocks. The file has no trace, so it cannot tell whether \
         the program will reuse this memory.",
        format_bytes(reserved as i64),
        format_bytes(idle as i64),
        percent(idle, reserved),
        format_bytes(empty_bytes as i64),
        if empty_segments == 1 { "" } else { "s" },
        format_bytes(hole_bytes as i64),
        if holed_segments == 1 { "" } else { "s" },
    );
    f.summary.push_str(&live_sites(cx));
    f.summary.push(' ');
    f.summary.push_str(&recorded);
    f.bytes = idle;
    f.evidence = recording_evidence(cx);
    f.suggestion = format!(
        "Other processes and libraries cannot use cached memory. If one needs it, call \
         empty_cache() before it does: that returns the completely free segments ({}); the gaps \
         inside used segments stay until those segments are empty. If the program itself runs \
         again, it reuses the cache and nothing needs to change. To see where the gaps come \
         from, the next file needs a trace. {}",
        format_bytes(empty_bytes as i64),
        record_better
    );
    vec![f]
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
    let npu = cx.snapshot.is_npu();
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
        format!(
            "The file is what {api}._dump_snapshot() (or _snapshot()) writes, with {trace_words}; \
             only {stacked} of its {} live blocks carry call stacks: history was switched on \
             shortly before the dump, so the blocks made earlier have none.",
            live.len()
        )
    };
    (said, from_the_start)
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
        " The call sites holding most of the live blocks: {}.",
        super::sites_words(&sites, TOP_SITES)
    );
    if stackless > 0 {
        let _ = write!(
            words,
            " {} in {stackless_blocks} block{} carry no call stack (made before history was \
             recorded).",
            format_bytes(stackless as i64),
            if stackless_blocks == 1 { "" } else { "s" }
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
fn roles(cx: &DeviceContext, live: &[(StackId, u64)]) -> Vec<String> {
    use rustc_hash::FxHashMap;
    const ROLES: [(&str, &[&str]); 3] = [
        (
            "a KV cache",
            &[
                "kv_cache",
                "kvcache",
                "past_key_value",
                "key_cache",
                "value_cache",
                "cache_k",
                "cache_v",
            ],
        ),
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
            cx.snapshot.stack_frames(stack).find_map(|frame| {
                let name = cx.snapshot.str(frame.name);
                let lower = name.to_ascii_lowercase();
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

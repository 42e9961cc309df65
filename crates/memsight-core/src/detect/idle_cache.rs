//! Flags a pool without a trace (a snapshot of the segments alone) that holds much cached
//! memory no block uses: in completely free segments, which `empty_cache()` would hand back, and
//! in holes between live blocks, which stay until their segments empty. Without a trace there is
//! no history to judge, so this is the one thing the pool itself can say.

use crate::model::{BlockState, NO_STACK, StackId};
use crate::units::format_bytes;

use super::{DeviceContext, Finding, FindingKind, Severity};

/// Idle at least this share (percent) of the reserved bytes …
const MIN_IDLE_PERCENT: u64 = 20;
/// … and at least this much is worth a note (below, it is the cache's normal overhead).
const MIN_IDLE_BYTES: u64 = 512 << 20;
/// Call sites named for the live blocks.
const TOP_SITES: usize = 3;

pub fn detect(cx: &DeviceContext) -> Vec<Finding> {
    let device = cx.device;
    if !device.trace.is_empty() || device.segments.is_empty() {
        return Vec::new();
    }
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
        f.summary = format!(
            "The file holds the pool when it was written and no events: {} reserved, {} in \
             live blocks, {} cached in free blocks.{} Peaks, leaks, stalls and fragmentation \
             over time cannot be judged without a trace.",
            format_bytes(reserved as i64),
            format_bytes(reserved.saturating_sub(idle) as i64),
            format_bytes(idle as i64),
            live_sites(cx)
        );
        f.suggestion = record_a_trace(cx);
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
        idle * 100 / reserved.max(1),
        format_bytes(empty_bytes as i64),
        if empty_segments == 1 { "" } else { "s" },
        format_bytes(hole_bytes as i64),
        if holed_segments == 1 { "" } else { "s" },
    );
    f.summary.push_str(&live_sites(cx));
    f.bytes = idle;
    f.suggestion = format!(
        "Other processes and libraries cannot use cached memory. If one needs it, call \
         empty_cache() before it does: that returns the completely free segments ({}); the gaps \
         inside used segments stay until those segments are empty. If the program itself runs \
         again, it reuses the cache and nothing needs to change. To see where the gaps come \
         from, the next file needs a trace. {}",
        format_bytes(empty_bytes as i64),
        record_a_trace(cx)
    );
    vec![f]
}

/// How to get a trace next time. Blocks with call stacks mean history was recorded: the file
/// was written without its trace (`torch.cuda.memory_snapshot()` is the segments alone).
fn record_a_trace(cx: &DeviceContext) -> String {
    let recorded = cx
        .device
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .any(|b| b.stack != NO_STACK);
    if recorded {
        "Its blocks carry call stacks, so history was recorded, but the file holds the segments \
         alone (what torch.cuda.memory_snapshot() returns). Write it with \
         torch.cuda.memory._dump_snapshot(path) (torch_npu: torch.npu.memory._dump_snapshot(path)): \
         that keeps the trace as well."
            .to_string()
    } else {
        "Record a trace: call torch.cuda.memory._record_memory_history() (torch_npu: \
         torch.npu.memory._record_memory_history()) before the part of the run to study, then \
         dump the snapshot with torch.cuda.memory._dump_snapshot(path)."
            .to_string()
    }
}

/// " The call sites holding most of the live blocks: …." (empty where no block has a stack): what
/// the pool held when it was written, by source line, in block sizes (as the pool counts them,
/// so that the sites add up to the live bytes the finding gives, not to the bytes requested).
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
    let sites = super::sites_by_line(cx.snapshot, live);
    format!(
        " The call sites holding most of the live blocks: {}.",
        super::sites_words(&sites, TOP_SITES)
    )
}

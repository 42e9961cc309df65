//! Flags a recording that contradicts itself, so that no other finding is read as if it were
//! sound: allocated bytes above the reserved bytes (allocations outside every segment), and, as
//! context, blocks freed in the trace whose allocation it never saw (the ring buffer dropped the
//! oldest events). One finding per device.

use crate::model::{Warning, WarningKind};
use crate::units::format_bytes;

use super::{DeviceContext, Finding, FindingKind, Severity};

/// Allocated above reserved by less than this (or 1 % of the peak reserved) is rounding in the
/// file, not a contradiction.
const MIN_EXCESS_BYTES: i64 = 1 << 20;
/// Frees without their alloc are worth a note from this share (percent) of all frees on.
const TRUNCATED_FREES_PERCENT: u64 = 10;

pub fn detect(cx: &DeviceContext, warnings: &[Warning]) -> Vec<Finding> {
    let (device, replay) = (cx.device, cx.replay);
    let (allocated, reserved) = (replay.allocated_bytes(), replay.reserved_bytes());
    let peak_reserved = replay.peak_reserved.bytes.max(0);
    let tolerance = MIN_EXCESS_BYTES.max(peak_reserved / 100);
    // The moment allocated stood furthest above reserved.
    let worst = allocated
        .iter()
        .zip(reserved)
        .enumerate()
        .map(|(i, (&a, &r))| (a - r, i))
        .max()
        .filter(|&(excess, _)| excess > tolerance)
        .map(|(_, i)| i);
    let mut problems: Vec<String> = Vec::new();
    let mut first_event: Option<u32> = None;
    if let Some(i) = worst {
        let (a, r) = (allocated[i], reserved[i]);
        problems.push(format!(
            "at event {i}, {} was allocated while the segments held only {}{}: the trace \
             allocates outside every segment it records, so its blocks and its segments \
             cannot both be right",
            format_bytes(a),
            format_bytes(r),
            if r > 0 {
                format!(" ({:.1}×)", a as f64 / r as f64)
            } else {
                String::new()
            }
        ));
        first_event = Some(i as u32);
    }
    // No capacity check: what the pool reserved plus the device's free bytes at an
    // out-of-memory error is no bound on what it reserved before, since other processes take and
    // give back memory meanwhile (batch 38's held-out file 6: a trial sharing its GPU, told its
    // recording contradicted itself where its neighbour had taken 4.5 GiB).
    let of_device = |kind: WarningKind| {
        warnings
            .iter()
            .filter(move |w| w.kind == kind && w.device == Some(device.ordinal))
    };
    let frees_without_alloc: u64 = of_device(WarningKind::FreeWithoutAlloc)
        .map(|w| w.count)
        .sum();
    let frees = device
        .trace
        .action
        .iter()
        .filter(|&&a| a == crate::model::Action::FreeCompleted)
        .count() as u64;
    // A trace that allocates nothing is a state-only recording: how it was recorded is said by
    // the pool's own finding (`pool_state`), not as a truncated trace.
    let truncated = frees_without_alloc > 0
        && !cx.state_only
        && frees_without_alloc * 100 >= frees.max(1) * TRUNCATED_FREES_PERCENT;
    if problems.is_empty() && !truncated {
        return Vec::new();
    }
    let severity = if problems.is_empty() {
        Severity::Info
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(FindingKind::Integrity, severity, device.ordinal);
    let (why, fix) = why_late(replay);
    let truncation = format!(
        "{frees_without_alloc} of the {frees} blocks freed in the trace were allocated before it \
         began ({why}): the trace starts in the middle of the run, so what those blocks were \
         for, and the leak and peak figures before they are freed, are incomplete"
    );
    if problems.is_empty() {
        f.title = "The trace starts in the middle of the run".to_string();
        f.summary = format!("{}.", capitalized(&truncation));
        f.suggestion = fix.to_string();
    } else {
        f.title = "The recording contradicts itself: read its figures with care".to_string();
        if truncated {
            problems.push(truncation);
        }
        f.summary = format!("{}.", capitalized(&problems.join("; ")));
        f.suggestion = "Check how this file was written: its trace and its segments do not \
                        describe the same memory (another device or process, or a pool changed \
                        after the trace). Until then, do not rely on its peak and pool figures."
            .to_string();
    }
    let at = first_event.unwrap_or(0);
    f.events = (at, at);
    f.focus_event = first_event;
    vec![f]
}

/// Why a trace starts in the middle of the run, and what to do: `(why, advice)`.
fn why_late(replay: &crate::replay::DeviceReplay) -> (String, &'static str) {
    // Why the trace starts late, from the blocks alive before it and still alive at the dump:
    // with history on, the allocator records every block's stack, so blocks made before the
    // trace with stacks were dropped by the ring buffer; none with a stack, and history was
    // switched on after they were made.
    let (before, stacked) = replay
        .lifetimes
        .iter()
        .filter(|l| l.spans_the_trace())
        .fold((0usize, 0usize), |(n, k), l| {
            (n + 1, k + usize::from(l.stack != crate::model::NO_STACK))
        });
    if before > 0 && stacked == 0 {
        (
            format!(
                "recording began in the middle of the run: none of the {before} blocks alive \
                 before the trace and still alive at the dump carries a call stack"
            ),
            "Start recording earlier (call _record_memory_history() before the model is \
             loaded), or read these figures as the recorded stretch's alone.",
        )
    } else if stacked > 0 {
        (
            format!(
                "the ring buffer had dropped the oldest events: {stacked} of the {before} blocks \
                 alive before the trace carry call stacks, so history was on when they were made"
            ),
            "Record more events (`_record_memory_history(max_entries=…)`) or start recording \
             just before the part of the run to study.",
        )
    } else {
        (
            "recording began late or the ring buffer dropped the oldest events".to_string(),
            "Start recording before the part of the run to study, with max_entries large \
             enough for all of it.",
        )
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

//! Inefficient memory (msMemScope recordings): blocks allocated long before their first use,
//! freed long after their last, or left idle between two uses, by msMemScope's definitions
//! ([`crate::memscope::inefficient`]), with what they cost at the peak: the allocated curve is
//! recomputed with each early block allocated at its first use and each late one freed right
//! after its last, and the finding says how much lower the peak would be.
//!
//! Parameters, gradients and optimizer state are left out: they live across operators by design
//! (a gradient is written in backward and read by the optimizer step), and msMemScope's rule
//! flags them all the same. What a block is comes from its owner where the recording's owners
//! name model state (`PTA@model@gradient`; an operator's `PTA@ops@aten` block is none of it),
//! else from its call stack and phase ([`crate::category`]). The finding says how many it left
//! out, and lists each rule's blocks, bytes and owners (`rules`, in `--json`).

use rustc_hash::FxHashMap;

use super::{DeviceContext, Finding, FindingKind, RuleBlocks, Severity};
use crate::frames::headline_frame;
use crate::memscope::{EARLY_ALLOCATION, LATE_DEALLOCATION, TEMPORARY_IDLENESS};
use crate::model::{BlockUse, StackId};
use crate::owner::OwnerBytes;
use crate::units::format_bytes;

/// Call sites and owners a finding names.
const TOP: usize = 3;

/// One of msMemScope's rules: its flag and its name in `--json`.
struct Rule {
    flag: u8,
    name: &'static str,
}

/// The rules in the order the finding lists them (indexes of the `_by_rule` arrays).
const RULES: [Rule; 3] = [
    Rule {
        flag: EARLY_ALLOCATION,
        name: "early_allocation",
    },
    Rule {
        flag: LATE_DEALLOCATION,
        name: "late_deallocation",
    },
    Rule {
        flag: TEMPORARY_IDLENESS,
        name: "temporary_idleness",
    },
];

/// What the flagged blocks of one device cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Waste {
    /// Blocks judged (early, late, idle), categories by design left out.
    pub early: Vec<u32>,
    pub late: Vec<u32>,
    pub idle: Vec<u32>,
    /// Flagged by the rule, but parameters, gradients or optimizer state.
    pub left_out: usize,
    /// Per rule (early, late, idle): blocks left out as model state.
    pub left_out_by_rule: [u64; 3],
    /// Per rule (early, late, idle): bytes × events held needlessly.
    pub byte_events_by_rule: [u128; 3],
    /// Bytes × events held before the first use and after the last.
    pub byte_events: u128,
    pub peak_allocated_bytes: u64,
    /// The peak with early blocks allocated at first use and late ones freed after last use.
    pub tight_peak_allocated_bytes: u64,
}

/// The flags a block is judged by: msMemScope's own where it wrote them, else ours.
fn flags_of(u: &BlockUse) -> u8 {
    if u.recorded_flags != 0 {
        u.recorded_flags
    } else {
        u.flags
    }
}

/// The device's flagged blocks (alloc events) and the peak recomputed without their waste.
pub fn waste(cx: &DeviceContext) -> Waste {
    let replay = cx.replay;
    let trace = &cx.device.trace;
    let mut w = Waste {
        peak_allocated_bytes: cx.peak_allocated_bytes(),
        ..Waste::default()
    };
    let n = trace.len();
    // Bytes to take off the allocated curve, as a difference array over events.
    let mut less = vec![0i64; n + 1];
    for u in &cx.device.block_use {
        let flags = flags_of(u);
        if flags == 0 {
            continue;
        }
        let id = replay.event_lifetime[u.alloc_event as usize];
        let Some(lifetime) = replay.lifetimes.get(id as usize) else {
            continue;
        };
        if cx.categories.of_lifetime[id as usize].is_model_state() {
            w.left_out += 1;
            for (k, rule) in RULES.iter().enumerate() {
                w.left_out_by_rule[k] += u64::from(flags & rule.flag != 0);
            }
            continue;
        }
        let bytes = lifetime.requested_size_bytes;
        let mut take = |rule: usize, from: u32, to_excl: u32| {
            if from < to_excl {
                less[from as usize] += bytes as i64;
                less[(to_excl as usize).min(n)] -= bytes as i64;
                let held = u128::from(bytes) * u128::from(to_excl - from);
                w.byte_events += held;
                w.byte_events_by_rule[rule] += held;
            }
        };
        if flags & EARLY_ALLOCATION != 0 {
            w.early.push(u.alloc_event);
            if let Some(first) = u.first_access_event {
                take(0, u.alloc_event, first + 1);
            }
        }
        if flags & LATE_DEALLOCATION != 0 {
            w.late.push(u.alloc_event);
            let freed = lifetime
                .free_requested_event
                .or(lifetime.free_completed_event);
            if let (Some(last), Some(freed)) = (u.last_access_event, freed) {
                take(1, last + 1, freed);
            }
        }
        if flags & TEMPORARY_IDLENESS != 0 {
            w.idle.push(u.alloc_event);
        }
    }
    let mut off = 0i64;
    let mut tight = replay.initial.allocated_bytes.max(0) as u64;
    for (i, &allocated) in replay.allocated_bytes().iter().enumerate() {
        off += less[i];
        tight = tight.max((allocated - off).max(0) as u64);
    }
    w.tight_peak_allocated_bytes = tight.min(w.peak_allocated_bytes);
    w
}

pub fn detect(cx: &DeviceContext) -> Vec<Finding> {
    if cx.device.block_use.is_empty() {
        return Vec::new();
    }
    let w = waste(cx);
    let flagged: Vec<u32> = {
        let mut all: Vec<u32> = w
            .early
            .iter()
            .chain(&w.late)
            .chain(&w.idle)
            .copied()
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    if flagged.is_empty() {
        return Vec::new();
    }
    let replay = cx.replay;
    let trace = &cx.device.trace;
    let bytes_of = |e: u32| {
        replay
            .lifetimes
            .get(replay.event_lifetime[e as usize] as usize)
            .map_or(0, |l| l.requested_size_bytes)
    };
    // Per call site and per owner: blocks, and the largest (a sum over the whole run would read
    // as if it were held at once).
    let mut by_site: FxHashMap<StackId, Blocks> = FxHashMap::default();
    let mut by_owner: FxHashMap<&str, Blocks> = FxHashMap::default();
    for &e in &flagged {
        by_site
            .entry(trace.stack[e as usize])
            .or_default()
            .add(bytes_of(e));
        let owner = cx
            .snapshot
            .owner(trace, e as usize)
            .map_or(crate::owner::NO_OWNER, |o| {
                crate::owner::at_depth(o, crate::owner::NAMING_DEPTH)
            });
        by_owner.entry(owner).or_default().add(bytes_of(e));
    }
    let mut sites: Vec<(StackId, Blocks)> = by_site.into_iter().collect();
    sites.sort_by_key(|s| (std::cmp::Reverse(s.1.bytes), s.0));
    let mut owners: Vec<(&str, Blocks)> = by_owner.into_iter().collect();
    owners.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(b.0)));
    let saving = w.peak_allocated_bytes - w.tight_peak_allocated_bytes;
    let mut f = Finding::new(
        FindingKind::InefficientMemory,
        if saving > 0 {
            Severity::Warning
        } else {
            Severity::Info
        },
        cx.device.ordinal,
    );
    let share = crate::units::percent(saving, w.peak_allocated_bytes);
    f.title = if saving > 0 {
        format!(
            "Inefficient memory: the peak would be {} lower ({share}%)",
            format_bytes(saving as i64)
        )
    } else {
        format!(
            "Inefficient memory: {} blocks, the peak unchanged",
            flagged.len()
        )
    };
    f.summary = summary(cx, &w, (&sites, &owners));
    f.rules = rule_blocks(cx, &w, bytes_of);
    f.bytes = saving;
    f.events = (flagged[0], flagged.last().copied().unwrap_or(flagged[0]));
    // The block that shows the finding: the largest flagged one live at the peak (where the
    // saving is), else the largest (the app pins it and zooms to its life).
    let peak = replay.peak_allocated.event;
    let live_at_peak = |e: u32| {
        replay
            .lifetimes
            .get(replay.event_lifetime[e as usize] as usize)
            .is_some_and(|l| peak.is_some() && l.is_live_after(peak))
    };
    f.focus_event = flagged
        .iter()
        .copied()
        .max_by_key(|&e| (live_at_peak(e), bytes_of(e), std::cmp::Reverse(e)))
        .or(peak);
    f.stack = sites.first().map_or(crate::model::NO_STACK, |s| s.0);
    f.suggestion = format!(
        "Create the tensors from {} where they are first used, and drop the last reference (`del`, \
         or let it go out of scope) right after the last use; a tensor idle for a long stretch can \
         be recomputed or moved to the host meanwhile.",
        sites
            .first()
            .map_or_else(|| "these call sites".to_string(), |s| site_name(cx, s.0))
    );
    vec![f]
}

/// Each rule's counted blocks with their bytes and owners (whole path), for `--json`.
fn rule_blocks(cx: &DeviceContext, w: &Waste, bytes_of: impl Fn(u32) -> u64) -> Vec<RuleBlocks> {
    let trace = &cx.device.trace;
    [&w.early, &w.late, &w.idle]
        .into_iter()
        .enumerate()
        .map(|(k, events)| {
            let mut blocks = Blocks::default();
            let mut by_owner: FxHashMap<&str, u64> = FxHashMap::default();
            for &e in events {
                let bytes = bytes_of(e);
                blocks.add(bytes);
                let owner = cx
                    .snapshot
                    .owner(trace, e as usize)
                    .unwrap_or(crate::owner::NO_OWNER);
                *by_owner.entry(owner).or_default() += bytes;
            }
            let mut owners: Vec<OwnerBytes> = by_owner
                .into_iter()
                .map(|(owner, bytes)| OwnerBytes {
                    owner: owner.to_string(),
                    bytes,
                })
                .collect();
            owners.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.owner.cmp(&b.owner)));
            RuleBlocks {
                rule: RULES[k].name,
                blocks: blocks.count,
                bytes: blocks.bytes,
                largest_bytes: blocks.largest_bytes,
                wasted_byte_events: w.byte_events_by_rule[k],
                left_out_blocks: w.left_out_by_rule[k],
                owners,
            }
        })
        .collect()
}

/// Flagged blocks of one call site or owner: how many, their bytes in all (for ranking), the
/// largest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Blocks {
    bytes: u64,
    count: u64,
    largest_bytes: u64,
}

impl Blocks {
    fn add(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.count += 1;
        self.largest_bytes = self.largest_bytes.max(bytes);
    }

    /// "26 blocks, up to 48.0 MiB each" (one block: "1 block of 48.0 MiB").
    fn describe(self) -> String {
        if self.count == 1 {
            format!("1 block of {}", format_bytes(self.largest_bytes as i64))
        } else {
            format!(
                "{} blocks, up to {} each",
                self.count,
                format_bytes(self.largest_bytes as i64)
            )
        }
    }
}

/// The flagged blocks by call site and by owner, most bytes first.
type HeldBy<'a, 'o> = (&'a [(StackId, Blocks)], &'a [(&'o str, Blocks)]);

/// "1 block", "26 blocks".
fn counted(n: usize) -> String {
    if n == 1 {
        "1 block".to_string()
    } else {
        format!("{n} blocks")
    }
}

/// A call site as a finding names it.
fn site_name(cx: &DeviceContext, stack: StackId) -> String {
    headline_frame(cx.snapshot, stack).unwrap_or_else(|| "blocks without a call stack".into())
}

/// The finding's sentence: the blocks by rule, the peak with and without their waste, the call
/// sites and owners holding most.
fn summary(cx: &DeviceContext, w: &Waste, (sites, owners): HeldBy) -> String {
    format!(
        "By msMemScope's rules: early allocation, {} (another operator freed memory between the \
         allocation and the first use); late deallocation, {} (another operator allocated memory \
         between the last use and the free); temporary idleness, {} (more than {} operators, or \
         allocations and frees outside any operator, between two uses). Allocated at their first \
         use and freed right after their last, the peak allocated would be {} instead of {}. Call \
         sites: {}. Owners: {}.{}",
        counted(w.early.len()),
        counted(w.late.len()),
        counted(w.idle.len()),
        crate::memscope::inefficient::IDLE_APIS,
        format_bytes(w.tight_peak_allocated_bytes as i64),
        format_bytes(w.peak_allocated_bytes as i64),
        sites
            .iter()
            .take(TOP)
            .map(|(s, b)| format!("{}: {}", site_name(cx, *s), b.describe()))
            .collect::<Vec<_>>()
            .join("; "),
        owners
            .iter()
            .take(TOP)
            .map(|(o, b)| format!("{o}: {}", b.describe()))
            .collect::<Vec<_>>()
            .join("; "),
        if w.left_out > 0 {
            format!(
                " {} more blocks that the rules flag are parameters, gradients or optimizer state, \
                 which live across operators by design: not counted.",
                w.left_out
            )
        } else {
            String::new()
        }
    )
}

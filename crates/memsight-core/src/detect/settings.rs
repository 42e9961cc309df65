//! Advises allocator settings — `expandable_segments`, `max_split_size_mb`,
//! `garbage_collection_threshold` — only where another finding supports it (a fragmentation
//! warning, a stall), never one the file's `allocator_settings` show already on, and only what the
//! what-if replay (`crate::whatif`) predicts helps on the device of that finding: fewer OOMs,
//! fewer stalls, or a peak reserved at least 1 % lower than the replay of the recorded settings,
//! which must itself reproduce the recording (else nothing is advised). Each suggestion quotes the
//! replay's figures. Files without `allocator_settings` (`torch_npu`, `PyTorch` before 2.3) get
//! the advice with "unless already set". Expandable segments seen in use (mapped pages,
//! expandable segments in the pool) count as on.

use crate::Loaded;
use crate::model::{SettingValue, Snapshot};
use crate::units::format_bytes;
use crate::whatif::{self, Change, Outcome, Recording, Settings};

use super::{Finding, FindingKind, Severity};

/// What the file says about the allocator's configuration.
#[expect(
    clippy::struct_excessive_bools,
    reason = "one flag per setting the file may show"
)]
struct Configured {
    known: bool,
    expandable_segments: bool,
    max_split_size: bool,
    garbage_collection: bool,
}

fn configured(snapshot: &Snapshot) -> Configured {
    let expandable_in_use = snapshot
        .devices
        .iter()
        .any(|d| super::stall::uses_expandable_segments(snapshot, d));
    let setting = |name: &str| {
        snapshot
            .allocator_settings
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    };
    let conf =
        match setting("PYTORCH_CUDA_ALLOC_CONF").or_else(|| setting("PYTORCH_NPU_ALLOC_CONF")) {
            Some(SettingValue::Text(text)) => text.to_ascii_lowercase(),
            _ => String::new(),
        };
    let positive = |v: Option<&SettingValue>| match v {
        Some(SettingValue::Bool(b)) => *b,
        Some(SettingValue::Int(i)) => *i > 0,
        Some(SettingValue::Float(f)) => *f > 0.0,
        _ => false,
    };
    Configured {
        known: !snapshot.allocator_settings.is_empty(),
        expandable_segments: expandable_in_use
            || positive(setting("expandable_segments"))
            || conf.contains("expandable_segments:true"),
        max_split_size: positive(setting("max_split_size")) || conf.contains("max_split_size_mb"),
        garbage_collection: positive(setting("garbage_collection_threshold"))
            || conf.contains("garbage_collection_threshold"),
    }
}

/// One setting the replay tried, and what it predicted.
struct Tried {
    /// As `PYTORCH_CUDA_ALLOC_CONF` writes it.
    conf: String,
    why: &'static str,
    outcome: Outcome,
}

/// Whether `tried` does better than `base` (the recorded settings, replayed), in this order:
/// fewer OOMs (an OOM ends the run, so more stalls are the lesser cost); else, where the base
/// has none, fewer stalls; else, with as many of both, a peak reserved at least 1 % lower. So
/// nothing that adds an OOM is advised, nor anything that leaves the failures as they were.
fn helps(tried: &Outcome, base: &Outcome) -> bool {
    let (ooms, stalls) = (tried.ooms.unwrap_or(0), tried.stalls.unwrap_or(0));
    let (base_ooms, base_stalls) = (base.ooms.unwrap_or(0), base.stalls.unwrap_or(0));
    if ooms != base_ooms {
        return ooms < base_ooms;
    }
    // A run that fails as often either way gains nothing from a stall less or a smaller reserve
    // before its failure (batch 37's held-out audit: expandable segments advised for "stalls
    // 2 → 1, OOMs 1 → 1" and 6.8 % more reserved).
    if base_ooms > 0 {
        return false;
    }
    if stalls != base_stalls {
        return stalls < base_stalls;
    }
    (tried.peak_reserved_bytes as f64) <= base.peak_reserved_bytes as f64 * 0.99
}

/// The replay's figures for one setting against the recorded settings'.
fn quoted(tried: &Outcome, base: &Outcome) -> String {
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let mut parts = vec![format!(
        "peak reserved {:.2} → {:.2} GiB ({:+.1} %)",
        gib(base.peak_reserved_bytes),
        gib(tried.peak_reserved_bytes),
        (tried.peak_reserved_bytes as f64 - base.peak_reserved_bytes as f64)
            / (base.peak_reserved_bytes as f64).max(1.0)
            * 100.0
    )];
    for (what, a, b) in [
        ("stalls", base.stalls, tried.stalls),
        ("OOMs", base.ooms, tried.ooms),
    ] {
        if let (Some(a), Some(b)) = (a, b)
            && (a > 0 || b > 0)
        {
            parts.push(format!("{what} {a} → {b}"));
        }
    }
    parts.join(", ")
}

/// Whether the replay under the recorded settings reproduces the file well enough to be quoted
/// (the what-if issue's bar: peak reserved within 1 %, segment allocations within 5 %; and,
/// where the capacity is known, as many stalls and OOMs as the file shows, so that "stalls 2 →
/// 0" starts from the stalls the findings count).
fn faithful(recorded: &Outcome, replayed: &Outcome) -> bool {
    let off = |a: u64, b: u64| (a as f64 - b as f64).abs() / (b as f64).max(1.0);
    let same = |a: Option<u64>, b: Option<u64>| a.is_none() || b.is_none() || a == b;
    off(replayed.peak_reserved_bytes, recorded.peak_reserved_bytes) <= 0.01
        && (off(replayed.segment_allocs, recorded.segment_allocs) <= 0.05
            || replayed.segment_allocs == recorded.segment_allocs)
        && same(replayed.stalls, recorded.stalls)
        && same(replayed.ooms, recorded.ooms)
}

/// The settings not on yet, replayed (on rayon) on the device of `recording`, and those that
/// help; `None` when the replay cannot reproduce the recording (then it backs nothing).
fn replayed_advice(
    recording: &Recording,
    have: &Configured,
    fragmentation: bool,
    stalls: bool,
) -> Option<(Outcome, Vec<Tried>)> {
    use rayon::prelude::*;
    let base_settings = Settings::recorded(recording);
    let base = whatif::predict(recording, &base_settings);
    if !faithful(&whatif::recorded(recording), &base) {
        return None;
    }
    let mut candidates: Vec<(&'static str, Vec<Change>)> = Vec::new();
    // Windows has no expandable segments: nothing to try there.
    if !have.expandable_segments && !recording.snapshot.recorded_on_windows() {
        candidates.push((EXPANDABLE_WHY, vec![Change::ExpandableSegments(true)]));
    }
    // A limit the file sets is tried away: it keeps cached blocks at or above it whole and from
    // requests more than 20 MiB smaller (batch 36's held-out audit: `max_split_size_mb:64`, left
    // from an earlier error, stalled a detector whose image sizes change every step, advised
    // garbage collection instead of its removal).
    if base_settings.max_split_size_mb.is_some() {
        candidates.push((REMOVE_MAX_SPLIT_WHY, vec![Change::MaxSplitSizeMb(None)]));
    }
    if fragmentation && !have.max_split_size && !have.expandable_segments {
        for mb in [128, 512] {
            candidates.push((MAX_SPLIT_WHY, vec![Change::MaxSplitSizeMb(Some(mb))]));
        }
    }
    // Garbage collection acts only under a memory fraction: where the capacity is known.
    if stalls && !have.garbage_collection && base_settings.capacity_bytes.is_some() {
        candidates.push((GC_WHY, vec![Change::GarbageCollectionThreshold(Some(0.8))]));
    }
    let mut tried: Vec<Tried> = candidates
        .into_par_iter()
        .filter_map(|(why, changes)| {
            let mut s = base_settings;
            for c in &changes {
                s.apply(c);
            }
            if s.refused_by(recording).is_some() {
                return None;
            }
            let outcome = whatif::predict(recording, &s);
            let conf = s.changes_from(&base_settings).replace(", ", ",");
            helps(&outcome, &base).then_some(Tried { conf, why, outcome })
        })
        .collect();
    // Of the max_split_size_mb values that help, the best one.
    tried.sort_by_key(|t| {
        (
            t.why,
            t.outcome.ooms,
            t.outcome.stalls,
            t.outcome.peak_reserved_bytes,
        )
    });
    tried.dedup_by_key(|t| t.why);
    // A setting another advised one beats on every count is not advised beside it (batch 19's
    // held-out audit, file 5: max_split_size_mb, predicted to add 19 stalls, was advised beside
    // expandable segments, which removed the OOM and every stall and lowered the reserve).
    let all: Vec<Outcome> = tried.iter().map(|t| t.outcome).collect();
    tried.retain(|t| !all.iter().any(|other| dominates(other, &t.outcome)));
    // Undoing what the file set comes first.
    tried.sort_by_key(|t| t.why != REMOVE_MAX_SPLIT_WHY);
    Some((base, tried))
}

/// Whether `a` is at least as good as `b` on OOMs, stalls and peak reserved, and better on one.
fn dominates(a: &Outcome, b: &Outcome) -> bool {
    let counts = |o: &Outcome| {
        (
            o.ooms.unwrap_or(0),
            o.stalls.unwrap_or(0),
            o.peak_reserved_bytes,
        )
    };
    let (a, b) = (counts(a), counts(b));
    a.0 <= b.0 && a.1 <= b.1 && a.2 <= b.2 && a != b
}

const EXPANDABLE_WHY: &str = "segments grow in place, so free memory is not split into pieces and the allocator does not \
     have to free everything and retry";
const MAX_SPLIT_WHY: &str =
    "large cached blocks stay whole for large requests instead of being split by small ones";
const REMOVE_MAX_SPLIT_WHY: &str = "cached blocks at or above the limit are then split for \
     smaller requests, instead of serving only requests at most 20 MiB smaller than them";
const GC_WHY: &str = "unused cached blocks are released gradually before the pool fills, \
                      instead of all at once in a stall";

/// One line of advice per setting that helps: the variable to set, what it does, what the
/// replay predicts against `base`.
fn advice_lines(
    tried: &[Tried],
    base: &Outcome,
    (npu, streams_apart): (bool, bool),
    capacity_bytes: u64,
) -> Vec<String> {
    let (variable, fraction) = if npu {
        (
            "PYTORCH_NPU_ALLOC_CONF",
            "torch.npu.set_per_process_memory_fraction",
        )
    } else {
        (
            "PYTORCH_CUDA_ALLOC_CONF",
            "torch.cuda.set_per_process_memory_fraction",
        )
    };
    tried
        .iter()
        .map(|t| {
            // The allocator collects only under a memory fraction below 1: without one the
            // threshold does nothing, so the advice says so.
            let with = if t.why == GC_WHY {
                format!(
                    " together with {fraction}(…) below 1 (the allocator collects only under a \
                     memory fraction; the replay takes its cap to be the {} the file shows)",
                    format_bytes(capacity_bytes as i64)
                )
            } else {
                String::new()
            };
            if t.why == REMOVE_MAX_SPLIT_WHY {
                return format!(
                    "{variable} without max_split_size_mb (the file's allocator settings set \
                     it): {} (the replay predicts {})",
                    t.why,
                    quoted(&t.outcome, base)
                );
            }
            // What a setting does against pieces of one cache is not what it does here.
            let why = if streams_apart {
                STREAMS_APART_WHY
            } else {
                t.why
            };
            format!(
                "{variable}={}{with}: {why} (the replay predicts {})",
                t.conf,
                quoted(&t.outcome, base)
            )
        })
        .collect()
}

/// What the settings finding says of the file's own allocator settings (`have`) beside `tried`.
fn what_the_file_sets(tried: &[Tried], have: &Configured) -> &'static str {
    if tried.iter().any(|t| t.why == REMOVE_MAX_SPLIT_WHY) {
        "set max_split_size_mb, whose removal is advised, and none of the other advised options"
    } else if have.known {
        "show none of the advised options on"
    } else {
        "are not recorded, so apply these unless already set"
    }
}

/// A setting's "why" where every stall the advice rests on came from other streams' caches
/// (batch 37's re-audit: "free memory is not split into pieces" for expandable segments, beside
/// the stall finding's "the streams' separate caches, not pieces … are what the release paid
/// for").
const STREAMS_APART_WHY: &str =
    "each stream's cache stays its own, but a stream runs short less often, by the replay's count";

/// The replay's OOM counts left out of `base` and `tried`, and the settings that then help no
/// more dropped.
fn leave_out_the_ooms(base: &mut Outcome, tried: &mut Vec<Tried>) {
    base.ooms = None;
    for t in tried.iter_mut() {
        t.outcome.ooms = None;
    }
    tried.retain(|t| helps(&t.outcome, base));
}

/// Whether an OOM of `device` is the program's own need beyond the device: an optimizer step's
/// state or a pass's blocks still to come exceed all free memory, or a leak's blocks fill it, or
/// memory outside the pool took what it once held.
fn beyond_the_device(findings: &[Finding], device: u32) -> bool {
    findings.iter().any(|f| {
        f.kind == FindingKind::Oom
            && f.device == device
            && (f.summary.contains(super::oom::STATE_TO_COME_CAUSE)
                || f.summary.contains(super::oom::PASS_TO_COME_CAUSE)
                || f.summary.contains(super::oom::LEAK_CAUSE)
                || f.summary.contains(super::oom::CHECKPOINT_RESTORE_CAUSE)
                || f.summary.contains(super::oom::OUTSIDE_CAUSE))
    })
}

/// Where the device's capacity comes from, or that it is not known.
fn capacity_words(capacity: Option<&whatif::Capacity>) -> String {
    capacity.map_or_else(
        || "The device's capacity is not known, so no stall or OOM is predicted.".to_string(),
        |c| {
            let (from, how) = c.source.split_once(": ").unwrap_or((&c.source, ""));
            // A bound is no figure of the device (batch 33's held-out audit: "the device's
            // capacity, 11.3 GiB", under a memory fraction that capped it at 11.0 GiB).
            let stated = if c.upper_bound {
                "taken as at most"
            } else {
                "taken as"
            };
            format!(
                "The device's capacity is {stated} {}, from {from} ({how}); a setting that needs \
                 no more memory than the recording did is the surer prediction.",
                format_bytes(c.bytes as i64)
            )
        },
    )
}

/// The findings a setting may answer: fragmentation warnings and OOMs from fragmentation, and
/// allocator stalls. A fragmentation note (a small gap) is no reason to change settings; a
/// warning is. Explicit `empty_cache()` calls are findings of their own kind, fixed in the
/// program, not by a setting; a release that was part of an out-of-memory error no setting
/// removes (an info note: in vain, or a leak's) is no stall to advise on.
fn basis(findings: &[Finding]) -> (Vec<&Finding>, Vec<&Finding>) {
    let of_kind = |kind: FindingKind| findings.iter().filter(move |f| f.kind == kind);
    let fragmentation = of_kind(FindingKind::Fragmentation)
        .filter(|f| f.severity >= Severity::Warning)
        .chain(
            of_kind(FindingKind::Oom)
                .filter(|f| f.summary.contains(super::oom::FRAGMENTATION_CAUSE)),
        )
        .collect();
    let stalls = of_kind(FindingKind::AllocatorStall)
        .filter(|f| f.severity >= Severity::Warning)
        .collect();
    (fragmentation, stalls)
}

/// Setting advice backed by `findings` (the other detectors' results for this file) and by the
/// what-if replay: a setting is advised only where the replay, which reproduces the recording
/// under its own settings, predicts that it helps (fewer OOMs, fewer stalls, or a lower peak
/// reserved), and the advice quotes the replay's figures.
pub fn detect(loaded: &Loaded, findings: &[Finding]) -> Vec<Finding> {
    let snapshot = &loaded.snapshot;
    let have = configured(snapshot);
    let (fragmentation, stalls) = basis(findings);
    let Some(first) = fragmentation
        .iter()
        .chain(&stalls)
        .min_by_key(|f| (f.device, f.events))
        .copied()
    else {
        return Vec::new();
    };
    // The replay backs the advice for one device: the findings it rests on are that device's.
    let device = first.device;
    let fragmentation: Vec<&Finding> = fragmentation
        .into_iter()
        .filter(|f| f.device == device)
        .collect();
    let stalls: Vec<&Finding> = stalls.into_iter().filter(|f| f.device == device).collect();
    let Some(index) = snapshot
        .devices
        .iter()
        .position(|d| d.ordinal == first.device && !d.trace.is_empty())
    else {
        return Vec::new();
    };
    let recording = Recording::of(loaded, index);
    let capacity = whatif::capacity_from_file(&recording);
    let capacity_bytes = capacity.as_ref().map_or(0, |c| c.bytes);
    let Some((mut base, mut tried)) = replayed_advice(
        &recording,
        &have,
        !fragmentation.is_empty(),
        !stalls.is_empty(),
    ) else {
        return Vec::new();
    };
    // An OOM the program's own need causes (an optimizer step's state or a pass that does not fit) is one
    // the replay cannot follow past: it stops needing memory there. Its OOM count is not quoted
    // and wins nothing (batch 20's held-out file 5: "OOMs 1 → 0" for expandable segments).
    let beyond_the_device = beyond_the_device(findings, device);
    if beyond_the_device {
        leave_out_the_ooms(&mut base, &mut tried);
    }
    if tried.is_empty() {
        return Vec::new();
    }
    let based_on = fragmentation
        .iter()
        .chain(&stalls)
        .map(|f| format!("\"{}\" on device {}", f.title, f.device))
        .collect::<Vec<_>>()
        .join(", ");
    let npu = crate::whatif::device_is_npu(snapshot, &snapshot.devices[index]);
    // Every stall it rests on came from other streams' caches.
    let streams_apart = fragmentation.is_empty()
        && stalls
            .iter()
            .all(|f| f.summary.contains(super::stall::OTHER_STREAMS_CAUSE));
    let advice = advice_lines(&tried, &base, (npu, streams_apart), capacity_bytes);
    let freed: u64 = stalls.iter().map(|f| f.bytes).sum();
    let grown: u64 = fragmentation.iter().map(|f| f.bytes).sum();
    vec![Finding {
        kind: FindingKind::Settings,
        severity: Severity::Info,
        device: first.device,
        devices: Vec::new(),
        source_lines: None,
        evidence: Vec::new(),
        title: format!("Settings: {} could help", advice.len()),
        summary: format!(
            "This advice is based on these findings: {based_on}. The trace replayed through the caching-allocator model \
             reproduces the recording under its own settings (peak reserved {}); each setting \
             advised does better there, judged in this order: fewer out-of-memory errors (where \
             the replay has any, nothing else counts), then fewer stalls, then a peak reserved \
             at least 1 % lower.{} {}{} The file's allocator \
             settings {}.",
            format_bytes(base.peak_reserved_bytes as i64),
            if beyond_the_device {
                " The out-of-memory error is one no setting removes (its finding says why): the \
                 replay, which cannot follow the program past it, is not quoted on it."
            } else {
                ""
            },
            capacity_words(capacity.as_ref()),
            if streams_apart {
                " The stalls it rests on came from the streams' separate caches (see the stall \
                 finding), which no setting joins: fewer streams, or each stream's work bounded, \
                 remains the fix, and a setting only changes how often a stream runs short."
            } else {
                ""
            },
            what_the_file_sets(&tried, &have)
        ),
        bytes: grown + freed,
        events: first.events,
        focus_event: first.focus_event,
        rank: None,
        time_range_us: None,
        stack: crate::model::NO_STACK,
        stacks: Vec::new(),
        breakdown: Vec::new(),
        owners: Vec::new(),
        rules: Vec::new(),
        suggestion: advice.join("; "),
    }]
}

#[cfg(test)]
mod tests {
    /// Batch 19's held-out audit, file 5: `max_split_size_mb` (OOMs 1 → 0, stalls 3 → 22, peak
    /// reserved +0.0 %) was advised beside expandable segments (OOMs 1 → 0, stalls 3 → 0, −1.5 %).
    #[test]
    fn a_setting_beaten_on_every_count_is_not_advised() {
        use crate::whatif::Outcome;
        let outcome = |ooms, stalls, gib: u64| Outcome {
            ooms: Some(ooms),
            stalls: Some(stalls),
            peak_reserved_bytes: gib << 30,
            ..Outcome::default()
        };
        let expandable = outcome(0, 0, 38);
        let max_split = outcome(0, 22, 39);
        assert!(super::dominates(&expandable, &max_split));
        assert!(!super::dominates(&max_split, &expandable));
        // Fewer stalls but a higher reserve: neither beats the other on every count.
        assert!(!super::dominates(&outcome(0, 1, 40), &max_split));
        assert!(!super::dominates(&max_split, &outcome(0, 1, 40)));
        // The same outcome beats nothing.
        assert!(!super::dominates(&expandable, &expandable));
    }

    /// Where every stall the advice rests on came from other streams' caches, a setting's line
    /// says each stream's cache stays its own, not that free memory is no longer in pieces
    /// (batch 37's re-audit: expandable segments "so free memory is not split into pieces"
    /// beside a stall blamed on four streams' separate caches).
    #[test]
    fn a_setting_for_streams_apart_says_their_caches_stay_apart() {
        use crate::whatif::Outcome;
        let outcome = |stalls, gib: u64| Outcome {
            ooms: Some(0),
            stalls: Some(stalls),
            peak_reserved_bytes: gib << 30,
            ..Outcome::default()
        };
        let tried = [super::Tried {
            conf: "expandable_segments:True".to_string(),
            why: super::EXPANDABLE_WHY,
            outcome: outcome(2, 22),
        }];
        let lines = |apart| super::advice_lines(&tried, &outcome(3, 22), (false, apart), 0);
        let apart = lines(true);
        assert!(
            apart[0].contains(super::STREAMS_APART_WHY)
                && !apart[0].contains("not split into pieces"),
            "{apart:?}"
        );
        assert!(
            lines(false)[0].contains(super::EXPANDABLE_WHY),
            "{:?}",
            lines(false)
        );
    }

    /// A run that fails as often with a setting as without gains nothing from it, whatever its
    /// stalls or reserve (batch 37's held-out audit: expandable segments advised for "stalls
    /// 2 → 1, OOMs 1 → 1"); one that fails less is helped, and without failures fewer stalls help.
    #[test]
    fn a_setting_that_leaves_the_failures_as_they_were_helps_nothing() {
        use crate::whatif::Outcome;
        let outcome = |ooms, stalls, gib: u64| Outcome {
            ooms: Some(ooms),
            stalls: Some(stalls),
            peak_reserved_bytes: gib << 30,
            ..Outcome::default()
        };
        let recorded = outcome(1, 2, 21);
        assert!(!super::helps(&outcome(1, 1, 22), &recorded));
        assert!(!super::helps(&outcome(1, 2, 10), &recorded));
        assert!(super::helps(&outcome(0, 3, 24), &recorded));
        assert!(super::helps(&outcome(0, 1, 21), &outcome(0, 2, 21)));
    }

    use crate::detect::test_support::generated;
    use crate::detect::{FindingKind, analyze};
    use crate::r#gen::Scenario;

    #[test]
    fn stalls_bring_advice_and_settings_already_on_are_not_advised() {
        let (_, loaded) = generated(Scenario::Stall, 40_000, 1);
        let findings = analyze(&loaded);
        let settings: Vec<_> = findings
            .iter()
            .filter(|f| f.kind == FindingKind::Settings)
            .collect();
        assert_eq!(settings.len(), 1, "{findings:?}");
        let advice = &settings[0].suggestion;
        // Each setting advised quotes the replay: the recorded settings replayed against the
        // setting tried, on the stalled device (the capacity comes from the stall).
        let recording = crate::whatif::Recording::of(&loaded, 0);
        let base = crate::whatif::Settings::recorded(&recording);
        assert!(base.capacity_bytes.is_some());
        let before = crate::whatif::predict(&recording, &base);
        let mut expandable = base;
        expandable.expandable_segments = true;
        let after = crate::whatif::predict(&recording, &expandable);
        assert!(after.stalls < before.stalls, "{after:?}");
        assert!(
            advice.contains(&format!(
                "expandable_segments:True: segments grow in place, so free memory is not split \
                 into pieces and the allocator does not have to free everything and retry (the \
                 replay predicts peak reserved {:.2} → {:.2} GiB",
                before.peak_reserved_bytes as f64 / f64::from(1u32 << 30),
                after.peak_reserved_bytes as f64 / f64::from(1u32 << 30),
            )),
            "{advice}"
        );
        assert!(
            advice.contains(&format!(
                "stalls {} → {}",
                before.stalls.unwrap_or(0),
                after.stalls.unwrap_or(0)
            )),
            "{advice}"
        );
        // Garbage collection frees cached segments too (each a cudaFree): on this run the
        // replay predicts more stalls with it, so it is not advised; nor is max_split_size_mb,
        // tried for fragmentation, which adds stalls here.
        let mut gc = base;
        gc.garbage_collection_threshold = Some(0.8);
        let with_gc = crate::whatif::predict(&recording, &gc);
        assert!(with_gc.stalls > before.stalls, "{with_gc:?}");
        assert!(!advice.contains("garbage_collection_threshold"), "{advice}");
        assert!(!advice.contains("max_split_size_mb"), "{advice}");

        // The expandable scenario records expandable_segments on: nothing to advise.
        let (_, loaded) = generated(Scenario::Expandable, 30_000, 1);
        assert!(
            analyze(&loaded)
                .iter()
                .all(|f| f.kind != FindingKind::Settings
                    || !f.suggestion.contains("expandable_segments"))
        );
    }

    #[test]
    fn no_finding_no_advice() {
        let (_, loaded) = generated(Scenario::Steady, 20_000, 1);
        assert!(
            analyze(&loaded)
                .iter()
                .all(|f| f.kind != FindingKind::Settings)
        );
    }
}

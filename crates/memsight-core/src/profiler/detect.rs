//! Detectors on profiler data, returning the same [`Finding`]s as the snapshot detectors:
//! - **allocator stall**: the operator Reserved curve falls sharply while Allocated and Active
//!   stay flat — the allocator freeing its cached segments to serve a request; by how much, over
//!   how long, on which rank, and how the ranks compare;
//! - **unaccounted memory**: a lasting gap between APP Reserved and Operator Reserved, with the
//!   CANN components of `npu_module_mem.csv` that explain it;
//! - **outlier operator allocation**: single operator allocations far above the rest;
//! - **peak**: the operator allocations alive at each rank's peak allocated, largest first, with
//!   their share of the peak (a 2.3 GiB fp32 cast of the logits taking a rank to the top of its
//!   reserved memory is the classic case);
//! - **imbalance**: one operator allocating far more on one rank than on another;
//! - **static graph**: what a static graph's plan (`static_op_mem.csv`) holds at its busiest node
//!   index and until the graph ends: planned memory, summarised, not judged.
//!
//! A finding's `events` are sample indices of the rank's `PTA+GE` curve (operator rows for
//! outliers); `time_range_us` holds the times.

use std::fmt::Write as _;

use crate::detect::{Finding, FindingKind, Severity};
use crate::model::NO_STACK;
use crate::units::format_bytes;

use super::{APP_COMPONENT, Curve, OPERATOR_COMPONENT, OperatorRow, ProfilerRun, Rank};

/// A stall frees at least this much …
const STALL_MIN_BYTES: f64 = 512.0 * 1024.0 * 1024.0;
/// … and at least this share of the rank's peak reserved …
const STALL_MIN_PEAK_SHARE: f64 = 0.1;
/// … within this long …
const STALL_MAX_US: f64 = 30e6;
/// … while allocated and active move by at most this share of the drop.
const STALL_FLAT_SHARE: f64 = 0.05;
/// A gap between APP and operator reserved counts when its median is at least this …
const GAP_MIN_BYTES: f64 = 256.0 * 1024.0 * 1024.0;
/// … and this share of APP's peak.
const GAP_MIN_SHARE: f64 = 0.1;
/// An operator allocation is an outlier at this share of the rank's peak operator reserved.
const OUTLIER_PEAK_SHARE: f64 = 0.25;
/// Components named in an unaccounted-memory finding.
const MAX_COMPONENTS: usize = 5;

/// Every profiler finding of `run`, most severe first, then by rank.
pub fn analyze(run: &ProfilerRun) -> Vec<Finding> {
    let mut findings = Vec::new();
    let stalls: Vec<Vec<Finding>> = run.ranks.iter().map(stalls).collect();
    let with_stalls = stalls.iter().filter(|s| !s.is_empty()).count();
    for (rank_stalls, rank) in stalls.into_iter().zip(&run.ranks) {
        for mut f in rank_stalls {
            if run.ranks.len() > 1 {
                let _ = write!(
                    f.summary,
                    " {with_stalls} of {} ranks stalled{}.",
                    run.ranks.len(),
                    if with_stalls < run.ranks.len() {
                        format!(
                            ": {} is the slow card that holds every collective back",
                            rank.name
                        )
                    } else {
                        String::new()
                    }
                );
            }
            findings.push(f);
        }
        findings.extend(unaccounted(rank));
        findings.extend(outliers(rank));
        findings.extend(peak(rank));
        findings.extend(coarse_times(rank));
        findings.extend(static_plan(rank));
    }
    findings.extend(imbalance(run));
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.rank.cmp(&b.rank))
            .then(a.events.cmp(&b.events))
    });
    findings
}

fn device_number(rank: &Rank) -> u32 {
    rank.device
        .as_deref()
        .and_then(|d| d.rsplit(':').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn finding(rank: &Rank, kind: FindingKind, severity: Severity) -> Finding {
    Finding {
        kind,
        severity,
        device: device_number(rank),
        devices: Vec::new(),
        source_lines: None,
        evidence: Vec::new(),
        title: String::new(),
        summary: String::new(),
        bytes: 0,
        events: (0, 0),
        focus_event: None,
        rank: Some(rank.name.clone()),
        time_range_us: None,
        stack: NO_STACK,
        stacks: Vec::new(),
        breakdown: Vec::new(),
        owners: Vec::new(),
        rules: Vec::new(),
        suggestion: String::new(),
    }
}

/// `memory_record.csv` with its timestamps rounded into scientific notation (a spreadsheet saved
/// it): the curve's samples cannot be placed in time, so what the findings say of its times is
/// unreliable.
fn coarse_times(rank: &Rank) -> Option<Finding> {
    if !rank.coarse_times {
        return None;
    }
    let mut f = finding(rank, FindingKind::Integrity, Severity::Warning);
    f.title = format!("Rounded timestamps on {}: memory_record.csv", rank.name);
    f.summary = "memory_record.csv writes its timestamps in scientific notation (like \
                 1.69512E+15), rounded to a few significant digits: samples up to hours apart \
                 share one timestamp. The curve's bytes are right, but when each sample was taken \
                 is not: it cannot be lined up with the operator rows, and durations read from it \
                 are wrong."
        .to_string();
    f.suggestion = "Use the CSV files exactly as the profiler wrote them: a spreadsheet that \
                    opens and saves them rounds long numbers. Export the profile again if the \
                    originals are gone."
        .to_string();
    Some(f)
}

/// Graphs named in a static-plan finding, and nodes named per graph.
const MAX_STATIC_GRAPHS: usize = 4;
const MAX_STATIC_NODES: usize = 3;

/// `static_op_mem.csv`, per graph ([`super::static_graph::plans`]): what its nodes add up to,
/// the file's own `TOTAL`, the most they hold at one node index and the nodes alive then, and
/// what lives to the end of the graph. The graph compiler plans this memory before the graph runs: it is reported,
/// not judged.
fn static_plan(rank: &Rank) -> Option<Finding> {
    let plans = super::static_graph::plans(rank);
    let largest = plans.iter().map(|p| p.peak_bytes).max()?;
    // What the largest graph requests in all, by the file's own TOTAL rows.
    let requested = plans.iter().filter_map(|p| p.total_bytes).max();
    let mut f = finding(rank, FindingKind::StaticGraph, Severity::Info);
    f.bytes = requested.unwrap_or(largest).max(0) as u64;
    f.title = format!(
        "Static graph plan on {}: {}at most {} alive at one node index",
        rank.name,
        requested.map_or_else(String::new, |r| format!(
            "up to {} requested per graph, ",
            format_bytes(r)
        )),
        format_bytes(largest)
    );
    let words: Vec<String> = plans
        .iter()
        .take(MAX_STATIC_GRAPHS)
        .map(|p| {
            let names: Vec<String> = p
                .holders
                .iter()
                .take(MAX_STATIC_NODES)
                .map(|op| {
                    format!(
                        "{} {}",
                        short_node_name(&op.op_name),
                        format_bytes(op.size_bytes)
                    )
                })
                .collect();
            format!(
                "graph {} of model {}: {} rows adding up to {}{}, at most {} alive at once (node \
                 index {}: {}), {} in nodes that live to the end of the graph",
                p.graph,
                p.model,
                p.ops.len(),
                format_bytes(p.all_bytes),
                p.total_bytes.map_or_else(String::new, |t| format!(
                    "; its TOTAL row (what the graph requests) says {}",
                    format_bytes(t)
                )),
                format_bytes(p.peak_bytes),
                p.peak_index,
                names.join(", "),
                format_bytes(p.to_end_bytes)
            )
        })
        .collect();
    f.summary = format!(
        "static_op_mem.csv gives each node of a static graph its memory from its start node \
         index through its end node index. Per graph: {}{}. The graph compiler plans this memory \
         before the graph runs: nodes that live to the end of the graph hold its outputs and \
         variables (`refdata`), not leaked memory.",
        words.join("; "),
        if plans.len() > MAX_STATIC_GRAPHS {
            format!(" (and {} more graphs)", plans.len() - MAX_STATIC_GRAPHS)
        } else {
            String::new()
        }
    );
    f.suggestion = "Nothing here needs fixing by itself. To lower a graph's planned peak, look at \
                    the largest nodes alive at its busiest node index (named above)."
        .to_string();
    Some(f)
}

/// A node name as the file writes it can repeat its fused subgraph's path many times
/// (`conv_01function_graph_0/conv_01function_graph_0/…_pass.1`): its last part names it.
fn short_node_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Runs where operator reserved falls sharply at flat allocated and active.
fn stalls(rank: &Rank) -> Vec<Finding> {
    let Some(curve) = rank.curve(OPERATOR_COMPONENT) else {
        return Vec::new();
    };
    let peak = curve.peak_reserved().map_or(0.0, |p| p.0);
    let min_drop = STALL_MIN_BYTES.max(peak * STALL_MIN_PEAK_SHARE);
    let r = &curve.reserved_bytes;
    let mut findings = Vec::new();
    let mut i = 0;
    while i + 1 < curve.len() {
        if r[i].is_nan() || r[i + 1].is_nan() || r[i + 1] >= r[i] {
            i += 1;
            continue;
        }
        // Extend while reserved keeps falling (or holds) within the time limit.
        // It ends at the last sample that fell: flat stretches after it are not the stall.
        let (mut j, mut k) = (i + 1, i + 1);
        while k + 1 < curve.len()
            && !r[k + 1].is_nan()
            && r[k + 1] <= r[k]
            && curve.time_us[k + 1] - curve.time_us[i] <= STALL_MAX_US
        {
            k += 1;
            if r[k] < r[k - 1] {
                j = k;
            }
        }
        let drop = r[i] - r[j];
        let moved = |values: &[f64]| {
            values[i..=j]
                .iter()
                .filter(|v| !v.is_nan())
                .map(|v| (v - values[i]).abs())
                .fold(0.0, f64::max)
        };
        let flat_limit = drop * STALL_FLAT_SHARE;
        if drop >= min_drop
            && moved(&curve.allocated_bytes) <= flat_limit
            && moved(&curve.active_bytes) <= flat_limit
        {
            findings.push(stall_finding(rank, curve, i, j));
        }
        i = k + 1;
    }
    findings
}

fn stall_finding(rank: &Rank, curve: &Curve, i: usize, j: usize) -> Finding {
    let r = &curve.reserved_bytes;
    let drop = r[i] - r[j];
    let seconds = (curve.time_us[j] - curve.time_us[i]) / 1e6;
    Finding {
        title: format!(
            "Allocator stall on {}: reserved fell {} in {seconds:.2} s",
            rank.name,
            format_bytes(drop as i64)
        ),
        summary: format!(
            "Operator reserved fell from {} to {} over {seconds:.2} s while allocated stayed at {} and active at {}: \
             the allocator freed its cached segments to serve a request, and the card waited.",
            format_bytes(r[i] as i64),
            format_bytes(r[j] as i64),
            format_bytes(curve.allocated_bytes[j] as i64),
            format_bytes(curve.active_bytes[j] as i64),
        ),
        bytes: drop as u64,
        events: (i as u32, j as u32),
        source_lines: sample_lines(curve, i, j),
        focus_event: Some(j as u32),
        time_range_us: Some((curve.time_us[i], curve.time_us[j])),
        breakdown: Vec::new(),
        owners: Vec::new(),
        rules: Vec::new(),
        suggestion: "Set PYTORCH_NPU_ALLOC_CONF=expandable_segments:True (segments grow in place, so the allocator \
                     never frees everything and retries); ranks with different input shapes fragment differently, \
                     so bucketing shapes evens them out."
            .to_string(),
        ..finding(rank, FindingKind::AllocatorStall, Severity::Warning)
    }
}

/// The `memory_record.csv` lines of `curve`'s samples `i..=j`.
fn sample_lines(curve: &Curve, i: usize, j: usize) -> Option<crate::detect::SourceLines> {
    let line = |k: usize| curve.line.get(k).copied().unwrap_or(0);
    crate::detect::SourceLines::of("memory_record.csv", line(i), line(j))
}

/// The latest sample of `curve` at or before `t` (curves are in time order).
fn at_time(curve: &Curve, values: &[f64], t: f64) -> Option<f64> {
    let i = curve.time_us.partition_point(|&x| x <= t).checked_sub(1)?;
    Some(values[i]).filter(|v| !v.is_nan())
}

/// A lasting gap between APP reserved and operator reserved.
fn unaccounted(rank: &Rank) -> Option<Finding> {
    let app = rank.curve(APP_COMPONENT)?;
    let ops = rank.curve(OPERATOR_COMPONENT)?;
    // Before GE's first record, the `PTA+GE` rows count PTA alone: GE's reserve is not yet
    // reported, and an APP sample then would put it outside the allocator (a held-out rank:
    // "at most 888 MiB" from one such sample, where the gap was 523 MiB throughout).
    let from_us = rank
        .curve("GE")
        .and_then(|ge| ge.time_us.first().copied())
        .unwrap_or(f64::NEG_INFINITY);
    let gaps: Vec<(f64, usize)> = (0..app.len())
        .filter(|&k| app.time_us[k] >= from_us)
        .filter_map(|k| {
            let total = app.reserved_bytes[k];
            let framework = at_time(ops, &ops.reserved_bytes, app.time_us[k])?;
            (!total.is_nan()).then_some((total - framework, k))
        })
        .collect();
    if gaps.len() < 3 {
        return None;
    }
    let mut sorted: Vec<f64> = gaps.iter().map(|g| g.0).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let app_peak = app.peak_reserved().map_or(0.0, |p| p.0);
    if median < GAP_MIN_BYTES || median < app_peak * GAP_MIN_SHARE {
        return None;
    }
    let &(largest, k) = gaps.iter().max_by(|a, b| a.0.total_cmp(&b.0))?;
    let t = app.time_us[k];
    // The CANN components holding memory at that moment ("APP" there is the allocator itself;
    // GE's memory is already in the operator curve, `PTA+GE`, so not outside it).
    let mut components: Vec<(&str, f64)> = rank
        .modules
        .iter()
        .filter(|c| c.component != APP_COMPONENT && c.component != "GE")
        .filter_map(|c| Some((c.component.as_str(), at_time(c, &c.reserved_bytes, t)?)))
        .filter(|&(_, v)| v > 0.0)
        .collect();
    components.sort_by(|a, b| b.1.total_cmp(&a.1));
    // GE's reserve as npu_module_mem.csv gives it, beyond what memory_record.csv's GE counts
    // (and so the operator curve): that much of the gap is GE's too.
    let ge_beyond = rank
        .modules
        .iter()
        .find(|c| c.component == "GE")
        .and_then(|c| at_time(c, &c.reserved_bytes, t))
        .zip(
            rank.curve("GE")
                .and_then(|ge| at_time(ge, &ge.reserved_bytes, t)),
        )
        .map_or(0.0, |(module, record)| (module - record).max(0.0));
    let why = components_words(&components, ge_beyond, largest);
    let first = gaps[0].1;
    let last = gaps[gaps.len() - 1].1;
    Some(Finding {
        title: format!(
            "Unaccounted memory on {}: {} outside the allocator",
            rank.name,
            format_bytes(median as i64)
        ),
        summary: if ops.len() == 1 {
            // Every APP sample is measured against the operator curve's one sample: the gap's
            // course over time is the APP curve's alone.
            format!(
                "APP reserved stood above the operator curve's only sample ({}) by {} (median over \
                 {} APP samples, at most {}){why}. With one operator sample, whether the \
                 allocator's own memory moved meanwhile is not recorded{}.",
                format_bytes(ops.reserved_bytes[0] as i64),
                format_bytes(median as i64),
                gaps.len(),
                format_bytes(largest as i64),
                if rank.coarse_times {
                    ", and with memory_record.csv's timestamps rounded, which APP sample it was \
                     taken with is not known either"
                } else {
                    ""
                }
            )
        } else {
            format!(
                "APP reserved stayed above operator reserved by {} (median over {} samples, at \
                 most {}){why}.",
                format_bytes(median as i64),
                gaps.len(),
                format_bytes(largest as i64),
            )
        },
        bytes: median as u64,
        events: (first as u32, last as u32),
        source_lines: sample_lines(app, first, last),
        focus_event: Some(k as u32),
        time_range_us: Some((app.time_us[first], app.time_us[last])),
        breakdown: Vec::new(),
        owners: Vec::new(),
        rules: Vec::new(),
        suggestion: unaccounted_advice(&components),
        ..finding(rank, FindingKind::UnaccountedMemory, Severity::Info)
    })
}

/// "; at that moment CANN components held 496 MiB of it: HCCL 404 MiB, …; the other 90.7 MiB is
/// in none of them": what `components` (largest first) hold of the gap of `gap_bytes`, and the
/// part of it that is GE's beyond `memory_record.csv`'s GE figure (`ge_beyond_bytes`).
fn components_words(components: &[(&str, f64)], ge_beyond_bytes: f64, gap_bytes: f64) -> String {
    let explained: f64 = components.iter().map(|c| c.1).sum();
    let named = components
        .iter()
        .take(MAX_COMPONENTS)
        .map(|(name, v)| format!("{name} {}", format_bytes(*v as i64)))
        .collect::<Vec<_>>()
        .join(", ");
    if components.is_empty() {
        " (npu_module_mem.csv is not there to say which CANN components hold it)".to_string()
    } else {
        let rest = gap_bytes - explained - ge_beyond_bytes;
        format!(
            "; at that moment CANN components held {} of it: {named}{}{}",
            format_bytes(explained as i64),
            if ge_beyond_bytes >= 1024.0 * 1024.0 {
                format!(
                    "; GE, whose memory the operator curve counts, holds {} more in \
                     npu_module_mem.csv than memory_record.csv says",
                    format_bytes(ge_beyond_bytes as i64)
                )
            } else {
                String::new()
            },
            if rest >= gap_bytes * 0.05 {
                format!(
                    "; the other {} is in none of them",
                    format_bytes(rest as i64)
                )
            } else {
                String::new()
            }
        )
    }
}

/// What to do about memory outside the allocator, from the CANN components that hold it
/// (`npu_module_mem.csv`; none where the file is not there). Nothing in the profile shows whether
/// the device ran short, so the fix is for where it does.
fn unaccounted_advice(components: &[(&str, f64)]) -> String {
    if components.is_empty() {
        return "This memory is outside PyTorch's caching allocator: typically CANN's \
                communication buffers (HCCL), workspaces and runtime; without npu_module_mem.csv, \
                which of them is not known. Export the profile with npu_module_mem.csv to see \
                which component holds it. Nothing needs changing unless the device runs short of \
                memory; then leave room for it, or shrink what holds it (HCCL_BUFFSIZE for \
                communication buffers)."
            .to_string();
    }
    let held: Vec<String> = components
        .iter()
        .take(MAX_COMPONENTS)
        .map(|&(name, _)| match name {
            "HCCL" => "HCCL (collective communication buffers)".to_string(),
            "RUNTIME" => "RUNTIME (the CANN runtime)".to_string(),
            other => other.to_string(),
        })
        .collect();
    let hccl = components.iter().any(|c| c.0 == "HCCL");
    format!(
        "This memory is outside PyTorch's caching allocator, held by {}. Nothing needs changing \
         unless the device runs short of memory; then leave room for it{}.",
        held.join(", "),
        if hccl {
            ", or shrink the communication buffers (HCCL_BUFFSIZE, at some cost in \
             communication speed)"
        } else {
            ""
        }
    )
}

/// Operator allocations named in a peak finding.
const PEAK_OPERATORS: usize = 5;
/// What was allocated before the capture is said from this share (percent) of the peak.
const PREDATES_MIN_PERCENT: f64 = 10.0;
/// Operator rows and a curve further apart than this (microseconds) are two captures; an hour
/// covers any clock difference between the two tables of one run, and timestamps a
/// spreadsheet rounded to five digits (±5,000 s).
const CAPTURES_APART_US: f64 = 3.6e9;

/// How far apart in time the operator rows and `curve` lie, where that makes them two captures.
fn capture_gap_us(rank: &Rank, curve: &Curve) -> Option<f64> {
    let span = |times: &mut dyn Iterator<Item = f64>| {
        times
            .filter(|t| t.is_finite())
            .fold(None, |span: Option<(f64, f64)>, t| match span {
                None => Some((t, t)),
                Some((a, b)) => Some((a.min(t), b.max(t))),
            })
    };
    let operators = span(
        &mut rank
            .operators
            .iter()
            .flat_map(|o| [o.alloc_us, o.release_us]),
    )?;
    let samples = span(&mut curve.time_us.iter().copied())?;
    let gap_us = (operators.0 - samples.1).max(samples.0 - operators.1);
    (gap_us > CAPTURES_APART_US).then_some(gap_us)
}

/// "134 days", "5.2 hours".
fn duration_words(us: f64) -> String {
    let hours = us / 3.6e9;
    if hours >= 48.0 {
        format!("{:.0} days", hours / 24.0)
    } else {
        format!("{hours:.1} hours")
    }
}

/// An operator that casts or copies a tensor (`aten::to`, `aten::_to_copy`, `aten::copy_`,
/// `npu_dtype_cast`, …).
fn is_cast_or_copy(name: &str) -> bool {
    ["_to_copy", "aten::to", "copy_", "cast"]
        .iter()
        .any(|p| name.contains(p))
}
/// One rank allocating this many times what another does under one operator name …
const IMBALANCE_RATIO: f64 = 5.0;
/// … and at least this much more is an imbalance.
const IMBALANCE_MIN_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

/// The operator rows alive at time `t`, largest first.
fn alive_at(rank: &Rank, t: f64) -> Vec<&OperatorRow> {
    let mut alive: Vec<&OperatorRow> = rank
        .operators
        .iter()
        .filter(|o| {
            o.size_bytes > 0 && o.alloc_us <= t && (o.release_us.is_nan() || o.release_us > t)
        })
        .collect();
    alive.sort_by_key(|o| std::cmp::Reverse(o.size_bytes));
    alive
}

/// `alive`'s bytes and rows per operator name, largest first: what a title names (17 rows of
/// `_foreach_add` hold more than the largest `mm` row alone says).
fn by_operator<'a>(rank: &'a Rank, alive: &[&OperatorRow]) -> Vec<(&'a str, i64, usize)> {
    let mut totals: Vec<(&str, i64, usize)> = Vec::new();
    for o in alive {
        let name = rank.operator_name(o);
        match totals.iter_mut().find(|t| t.0 == name) {
            Some(t) => {
                t.1 += o.size_bytes;
                t.2 += 1;
            }
            None => totals.push((name, o.size_bytes, 1)),
        }
    }
    totals.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    totals
}

/// `aten::_foreach_add 234 MiB (19.7%) in 16 rows; …`, shares of `of_bytes`.
fn operator_totals_words(totals: &[(&str, i64, usize)], of_bytes: f64) -> String {
    totals
        .iter()
        .take(PEAK_OPERATORS)
        .map(|(name, bytes, rows)| {
            format!(
                "{name} {} ({:.1}%) in {rows} row{}",
                format_bytes(*bytes),
                *bytes as f64 * 100.0 / of_bytes.max(1.0),
                if *rows == 1 { "" } else { "s" }
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Where the operator rows and the curve are two captures: the operator table's own peak and
/// the rows alive then, as a sentence. Its totals are the allocator's right after each
/// allocation and right after each release, so the most allocated is the larger of an
/// allocation's total and a release's total plus the bytes it released (just before it).
fn table_peak_words(rank: &Rank) -> String {
    let mut top: Option<(f64, &OperatorRow, bool)> = None;
    for o in &rank.operators {
        let at_alloc = o.alloc_totals_bytes[0];
        let before_release = o.release_totals_bytes[0] + o.size_bytes.max(0) as f64;
        for (bytes, released) in [(at_alloc, false), (before_release, true)] {
            if bytes.is_finite() && top.is_none_or(|t| bytes > t.0) {
                top = Some((bytes, o, released));
            }
        }
    }
    let Some((peak_bytes, row, before_release)) = top else {
        return String::new();
    };
    let (moment, alive) = if before_release {
        // Just before the release: the released row is still alive.
        let t = row.release_us;
        let mut alive: Vec<&OperatorRow> = rank
            .operators
            .iter()
            .filter(|o| {
                o.size_bytes > 0 && o.alloc_us <= t && (o.release_us.is_nan() || o.release_us >= t)
            })
            .collect();
        alive.sort_by_key(|o| std::cmp::Reverse(o.size_bytes));
        (
            format!(
                "just before line {}'s release (its Release Total Allocated plus the {} it \
                 released)",
                row.line,
                format_bytes(row.size_bytes)
            ),
            alive,
        )
    } else {
        (
            format!(
                "at line {}'s allocation (its Allocation Total Allocated)",
                row.line
            ),
            alive_at(rank, row.alloc_us),
        )
    };
    let totals = by_operator(rank, &alive);
    let alive_bytes: i64 = alive.iter().map(|o| o.size_bytes).sum();
    let held = if totals.is_empty() {
        "no row of the table was alive then".to_string()
    } else {
        format!(
            "the rows alive then hold {} of it, by operator: {}",
            format_bytes(alive_bytes),
            operator_totals_words(&totals, peak_bytes)
        )
    };
    // Reserved in the table far above anything it ever allocated: cache no tensor used; said
    // only of a table that holds every allocation (an excerpt's true peak is not known).
    let reserved = rows_peak_reserved(rank);
    let missing = unexplained_total_change(rank);
    let tolerance = f64::from(1u32 << 20).max(peak_bytes / 100.0);
    let idle = if let Some((jump, moment, line)) = missing.filter(|&(jump, _, _)| jump > tolerance)
    {
        format!(
            " The table is incomplete: at line {line}'s {moment}, {} of the change in its Total \
             Allocated is not explained by any row, so some of the capture's tensors are not in \
             it, and its true peak may be higher.",
            format_bytes(jump as i64)
        )
    } else if reserved.is_finite() && reserved >= 2.0 * peak_bytes {
        format!(
            " In the table, reserved reaches {} while allocated never passes {}: at least {} of \
             reserved memory held no tensor at any moment of it (memory cached before the \
             capture, or left by fragmentation), and no other process could use it.",
            format_bytes(reserved as i64),
            format_bytes(peak_bytes as i64),
            format_bytes((reserved - peak_bytes) as i64)
        )
    } else {
        String::new()
    };
    format!(
        " The highest allocated total the operator table records is {}, {moment}; {held}.{idle}",
        format_bytes(peak_bytes as i64),
    )
}

/// The largest change of the operator table's Total Allocated, from one row's allocation or
/// release to the next in time, that the rows' own sizes do not explain, and the file line where
/// it shows: a table that lacks some of the capture's tensors (an excerpt) moves its totals with
/// no row to show for it.
fn unexplained_total_change(rank: &Rank) -> Option<(f64, &'static str, u64)> {
    // (time, allocated total after it, change the row itself makes, which moment, line)
    let mut moments: Vec<(f64, f64, f64, &'static str, u64)> = Vec::new();
    for o in &rank.operators {
        let size = o.size_bytes as f64;
        if o.size_bytes > 0 && o.alloc_us.is_finite() && o.alloc_totals_bytes[0].is_finite() {
            moments.push((
                o.alloc_us,
                o.alloc_totals_bytes[0],
                size,
                "allocation",
                o.line,
            ));
        }
        if o.release_us.is_finite() && o.release_totals_bytes[0].is_finite() {
            moments.push((
                o.release_us,
                o.release_totals_bytes[0],
                -size.abs(),
                "release",
                o.line,
            ));
        }
    }
    moments.sort_by(|a, b| a.0.total_cmp(&b.0));
    moments
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| ((w[1].1 - w[0].1 - w[1].2).abs(), w[1].3, w[1].4))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The most reserved any operator row records (after its allocation or its release); `NaN`
/// without one.
fn rows_peak_reserved(rank: &Rank) -> f64 {
    rank.operators
        .iter()
        .flat_map(|o| [o.alloc_totals_bytes[1], o.release_totals_bytes[1]])
        .filter(|b| b.is_finite())
        .fold(f64::NAN, f64::max)
}

/// "the rows record up to 25.1 GiB reserved, the curve 8.38 GiB": more evidence of two captures,
/// or nothing when the two agree within a tenth.
fn reserved_mismatch_words(rank: &Rank, curve: &Curve) -> String {
    let rows = rows_peak_reserved(rank);
    let samples = curve.peak_reserved().map_or(f64::NAN, |p| p.0);
    if !(rows.is_finite() && samples.is_finite()) || (rows - samples).abs() <= samples * 0.1 {
        return String::new();
    }
    format!(
        ", and the rows record up to {} reserved where the curve has {}",
        format_bytes(rows as i64),
        format_bytes(samples as i64)
    )
}

/// The anatomy of the rank's peak: the operator allocations alive at the moment of peak
/// allocated (`PTA+GE`), by operator and largest first.
fn peak(rank: &Rank) -> Option<Finding> {
    let curve = rank.curve(OPERATOR_COMPONENT)?;
    let (peak_bytes, i) = curve.peak_allocated()?;
    let t = curve.time_us[i];
    let reserved = curve.reserved_bytes[i];
    // The operator rows and the curve must be of one capture to say which rows hold the peak.
    let apart_us = capture_gap_us(rank, curve);
    let alive = if apart_us.is_none() {
        alive_at(rank, t)
    } else {
        Vec::new()
    };
    let totals = by_operator(rank, &alive);
    let alive_bytes: i64 = alive.iter().map(|o| o.size_bytes).sum();
    let share = |bytes: f64| bytes * 100.0 / peak_bytes.max(1.0);
    let mut f = finding(rank, FindingKind::Peak, Severity::Info);
    f.title = peak_title(rank, &totals, peak_bytes);
    let named: Vec<String> = alive
        .iter()
        .take(PEAK_OPERATORS)
        .map(|o| {
            format!(
                "{} {} ({:.1}%, line {} of operator_memory.csv)",
                rank.operator_name(o),
                format_bytes(o.size_bytes),
                share(o.size_bytes as f64),
                o.line
            )
        })
        .collect();
    let what = if let Some(gap_us) = apart_us {
        format!(
            "the operator rows (operator_memory.csv) and this curve (memory_record.csv) are {} \
             apart{}: two captures, so which operators hold this peak is not recorded",
            duration_words(gap_us),
            reserved_mismatch_words(rank, curve)
        )
    } else if alive.is_empty() {
        "no allocation of operator_memory.csv was alive then: the memory was allocated before the capture or \
         outside the recorded operators"
            .to_string()
    } else {
        format!(
            "{} operator allocations were alive ({}); by operator: {}; the largest rows: {}",
            alive.len(),
            format_bytes(alive_bytes),
            operator_totals_words(&totals, peak_bytes),
            named.join("; ")
        )
    };
    // One sample shows no peak over time, and everything in it predates it trivially.
    let one_sample = curve.len() == 1;
    // Graph memory released but still in the curve, then what no row names.
    let (released_bytes, mut unnamed) = if apart_us.is_none() {
        ge_released_words(rank, t, peak_bytes)
    } else {
        (0, String::new())
    };
    if !one_sample {
        unnamed += &unnamed_words(
            rank,
            curve,
            apart_us.is_some(),
            peak_bytes,
            alive_bytes + released_bytes,
        );
    }
    let table_peak = if apart_us.is_some() {
        table_peak_words(rank)
    } else {
        String::new()
    };
    let moment = if one_sample {
        "The operator curve has one sample, so it shows no peak over time, only that moment"
    } else {
        "At the rank's peak"
    };
    let joint = if one_sample { ";" } else { "," };
    f.summary = format!(
        "{moment} ({} allocated, {:.1}% of the {} reserved then){joint} {what}.{unnamed}{table_peak}",
        format_bytes(peak_bytes as i64),
        peak_bytes * 100.0 / reserved.max(1.0),
        format_bytes(reserved as i64),
    );
    if one_sample {
        f.title.push_str(" (one sample)");
    }
    f.bytes = peak_bytes as u64;
    f.events = (i as u32, i as u32);
    f.source_lines = sample_lines(curve, i, i);
    f.focus_event = Some(i as u32);
    f.time_range_us = Some((t, t));
    let top: Vec<&str> = totals.iter().take(PEAK_OPERATORS).map(|t| t.0).collect();
    let phase = apart_us.is_none().then(|| phase_at(rank, t)).flatten();
    if let Some(phase) = &phase {
        f.summary += &phase_words(rank, phase, t);
    }
    let figures = advice_figures(rank, curve, &alive, phase.as_ref(), peak_bytes);
    f.suggestion = peak_advice(rank, apart_us.is_some(), &top, phase.as_ref(), &figures);
    Some(f)
}

/// Where a peak falls in a training step, from the names of the operator rows allocated around
/// it: the rows carry no phase column, but backward operators name themselves
/// (`aten::convolution_backward`, `npu::npu_fusion_attention_grad`, `…Backward0`).
enum Phase<'a> {
    /// No backward row is allocated before the peak, one is after it.
    Forward { first_backward: &'a OperatorRow },
    /// The last row allocated at or before the peak is a backward operator's.
    Backward { last: &'a OperatorRow },
    /// Backward rows come before the peak and none after; the last row before it is not one.
    AfterBackward { last_backward: &'a OperatorRow },
}

/// An operator of the backward pass, by its name.
fn is_backward(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("backward") || lower.contains("backprop") || lower.ends_with("_grad")
}

/// The phase of a peak at time `t`, where the rows' names settle it; `None` where they do not
/// (backward rows before and after the peak with other rows last before it: a pipeline's
/// forward between backward ones, or a later micro-batch). Graph-engine and kernel rows
/// (`cann::…`) are no evidence: on held-out ranks `cann::Conv2DBackpropFilter10` came after the
/// optimizer's `_foreach_add` rows, at the device's pace, not the step's.
fn phase_at(rank: &Rank, t: f64) -> Option<Phase<'_>> {
    let made = || {
        rank.operators.iter().filter(|o| {
            o.size_bytes >= 0
                && o.alloc_us.is_finite()
                && !rank.operator_name(o).starts_with("cann::")
        })
    };
    let backward = |o: &&OperatorRow| is_backward(rank.operator_name(o));
    let by_time = |a: &&OperatorRow, b: &&OperatorRow| a.alloc_us.total_cmp(&b.alloc_us);
    let last_before = made().filter(|o| o.alloc_us <= t).max_by(by_time)?;
    if backward(&last_before) {
        return Some(Phase::Backward { last: last_before });
    }
    let last_backward = made()
        .filter(|o| o.alloc_us <= t)
        .filter(backward)
        .max_by(by_time);
    let first_backward = made()
        .filter(|o| o.alloc_us > t)
        .filter(backward)
        .min_by(by_time);
    match (last_backward, first_backward) {
        (None, Some(first_backward)) => Some(Phase::Forward { first_backward }),
        (Some(last_backward), None) => Some(Phase::AfterBackward { last_backward }),
        _ => None,
    }
}

/// The evidence for `phase` as a sentence of the peak's summary.
fn phase_words(rank: &Rank, phase: &Phase, t: f64) -> String {
    let row = |o: &OperatorRow| {
        format!(
            "{}, line {} of operator_memory.csv",
            rank.operator_name(o),
            o.line
        )
    };
    match phase {
        Phase::Forward { first_backward } => format!(
            " It comes before the capture's first backward operator ({}, allocated {:.2} ms \
             later): the forward pass.",
            row(first_backward),
            (first_backward.alloc_us - t) / 1000.0
        ),
        Phase::Backward { last } => format!(
            " The last allocation before it is a backward operator's ({}): the backward pass.",
            row(last)
        ),
        Phase::AfterBackward { last_backward } => {
            // The device runs behind the host: its backward kernels (`cann::` rows, which
            // are no evidence of the host's phase) may still hold memory (held-out ranks: the
            // peak sample was a `Conv2DBackpropFilter` kernel's allocation).
            let kernels: Vec<String> = alive_at(rank, t)
                .into_iter()
                .filter(|o| {
                    let name = rank.operator_name(o);
                    name.starts_with("cann::") && is_backward(name)
                })
                .map(|o| {
                    format!(
                        "{} (line {} of operator_memory.csv)",
                        rank.operator_name(o),
                        o.line
                    )
                })
                .collect();
            format!(
                " It comes after the capture's last backward operator ({}, allocated {:.2} ms \
                 before), and no backward operator follows: after the backward pass{}.",
                row(last_backward),
                (t - last_backward.alloc_us) / 1000.0,
                if kernels.is_empty() {
                    String::new()
                } else {
                    format!(
                        " on the host, while the device still runs backward kernels: {}, alive \
                         at the peak",
                        kernels.join("; ")
                    )
                }
            )
        }
    }
}

/// What activation checkpointing or a smaller micro-batch can take off a forward-pass peak:
/// at most the operator rows alive then, graph-engine rows (`cann::`, a graph's buffers: on
/// held-out ranks one of a weight's size) aside; and the peak itself at most down to the
/// curve's highest point once the backward pass begins. The rows' figures, then the clause on
/// the peak (empty where the rows bound it already).
fn forward_bound_words(
    rank: &Rank,
    curve: &Curve,
    alive: &[&OperatorRow],
    first_backward: &OperatorRow,
    peak_bytes: f64,
) -> (String, String) {
    let rows_bytes: i64 = alive
        .iter()
        .filter(|o| !rank.operator_name(o).starts_with("cann::"))
        .map(|o| o.size_bytes)
        .sum();
    let later = (0..curve.len())
        .filter(|&k| curve.time_us[k] >= first_backward.alloc_us)
        .max_by(|&a, &b| curve.allocated_bytes[a].total_cmp(&curve.allocated_bytes[b]));
    let rows = format!(
        "{}, graph-engine rows aside",
        alive_words(rows_bytes, peak_bytes)
    );
    let bound = later
        .filter(|&k| peak_bytes - curve.allocated_bytes[k] < rows_bytes as f64)
        .map_or_else(String::new, |k| {
            format!(
                ", and the peak falls by at most {}: once the backward pass begins, the curve \
                 still reaches {} (line {} of memory_record.csv)",
                format_bytes((peak_bytes - curve.allocated_bytes[k]).max(0.0) as i64),
                format_bytes(curve.allocated_bytes[k] as i64),
                curve.line[k]
            )
        });
    (rows, bound)
}

/// The figures the peak's advice quotes: the rows alive at the peak, and for a forward-pass
/// peak how far it can fall (see [`forward_bound_words`]).
fn advice_figures(
    rank: &Rank,
    curve: &Curve,
    alive: &[&OperatorRow],
    phase: Option<&Phase>,
    peak_bytes: f64,
) -> (String, String) {
    if let Some(Phase::Forward { first_backward }) = phase {
        forward_bound_words(rank, curve, alive, first_backward, peak_bytes)
    } else {
        let alive_bytes: i64 = alive.iter().map(|o| o.size_bytes).sum();
        (alive_words(alive_bytes, peak_bytes), String::new())
    }
}

/// "98.3 MiB, 8% of the peak": the operator rows alive at the peak.
fn alive_words(alive_bytes: i64, peak_bytes: f64) -> String {
    format!(
        "{}, {:.0}% of the peak",
        format_bytes(alive_bytes),
        alive_bytes as f64 * 100.0 / peak_bytes.max(1.0)
    )
}

/// GE's part of the curve at time `t` is its last `GE` record: graph-engine rows
/// (`cann::…`) of the operator table alive when that figure was set and released by `t`, with
/// no change of it since, are still counted in it (a held-out rank's peak held 145 MiB of a
/// graph released 0.66 ms before, read as memory from before the capture). Their bytes, at most
/// GE's figure, and a sentence naming them; nothing under a tenth of the peak.
fn ge_released_words(rank: &Rank, t: f64, peak_bytes: f64) -> (i64, String) {
    let Some(ge) = rank.curve("GE") else {
        return (0, String::new());
    };
    let Some(k) = ge.time_us.partition_point(|&x| x <= t).checked_sub(1) else {
        return (0, String::new());
    };
    let recorded = ge.allocated_bytes[k];
    // The record that set GE's figure: those after it, up to `t`, repeat it (GE writes a record
    // at a release too, with the figure unchanged).
    let mut set = k;
    while set > 0 && (ge.allocated_bytes[set - 1] - recorded).abs() < 1.0 {
        set -= 1;
    }
    let recorded_us = ge.time_us[set];
    let released: Vec<&OperatorRow> = rank
        .operators
        .iter()
        .filter(|o| {
            o.size_bytes > 0
                && rank.operator_name(o).starts_with("cann::")
                && o.alloc_us <= recorded_us
                && o.release_us > recorded_us
                && o.release_us <= t
        })
        .collect();
    let bytes = released
        .iter()
        .map(|o| o.size_bytes)
        .sum::<i64>()
        .min(recorded.max(0.0) as i64);
    if (bytes as f64) < peak_bytes * PREDATES_MIN_PERCENT / 100.0 {
        return (0, String::new());
    }
    let rows: Vec<String> = released
        .iter()
        .take(PEAK_OPERATORS)
        .map(|o| {
            format!(
                "{} {} (line {} of operator_memory.csv, released {:.2} ms before)",
                rank.operator_name(o),
                format_bytes(o.size_bytes),
                o.line,
                (t - o.release_us) / 1000.0
            )
        })
        .collect();
    (
        bytes,
        format!(
            " {} of it is graph-engine memory already released: GE's figure, unchanged since \
             line {} of memory_record.csv ({}), still counts {}, so this sample counts it after \
             its release.",
            format_bytes(bytes),
            ge.line[set],
            format_bytes(recorded as i64),
            rows.join(", ")
        ),
    )
}

/// "Peak on rank0: 1.23 GiB allocated; `aten::_foreach_add` holds 19%" (the operator holding
/// most, where it holds 1% or more).
fn peak_title(rank: &Rank, totals: &[(&str, i64, usize)], peak_bytes: f64) -> String {
    let share = |bytes: f64| bytes * 100.0 / peak_bytes.max(1.0);
    match totals.first().filter(|t| share(t.1 as f64) >= 1.0) {
        Some(&(name, bytes, _)) => format!(
            "Peak on {}: {} allocated; {name} holds {:.0}%",
            rank.name,
            format_bytes(peak_bytes as i64),
            share(bytes as f64)
        ),
        None => format!(
            "Peak on {}: {} allocated",
            rank.name,
            format_bytes(peak_bytes as i64)
        ),
    }
}

/// What no operator row of the capture names, as a sentence (empty under
/// `PREDATES_MIN_PERCENT`): allocated before it began (weights, optimizer state, earlier steps'
/// tensors) or outside the recorded operators.
fn unnamed_words(
    rank: &Rank,
    curve: &Curve,
    two_captures: bool,
    peak_bytes: f64,
    alive_bytes: i64,
) -> String {
    let share = |bytes: f64| bytes * 100.0 / peak_bytes.max(1.0);
    let unnamed = if two_captures || rank.operators.is_empty() {
        curve
            .allocated_bytes
            .first()
            .copied()
            .map(|b| (b, "was already allocated at the capture's first sample"))
    } else {
        Some((
            peak_bytes - alive_bytes as f64,
            "is in no operator row alive then: allocated before the capture began or outside \
             the recorded operators",
        ))
    };
    unnamed
        .filter(|&(b, _)| b.is_finite() && share(b) >= PREDATES_MIN_PERCENT)
        .map_or_else(String::new, |(b, how)| {
            format!(
                " {} of it ({:.0}%) {how} (weights, optimizer state, earlier steps' tensors).",
                format_bytes(b as i64),
                share(b)
            )
        })
}

/// The peak finding's advice, from what the largest rows alive at the peak (`top`) are and the
/// phase the rows' names show; `figures`: how much the rows alive then hold, and for a
/// forward-pass peak how far the peak can fall.
fn peak_advice(
    rank: &Rank,
    two_captures: bool,
    top: &[&str],
    phase: Option<&Phase>,
    figures: &(String, String),
) -> String {
    let (alive, bound) = figures;
    if two_captures {
        "Open the operator table and the memory curve written by one profiler run together: \
         only then do the rows alive at the peak name what holds it."
            .to_string()
    } else if rank.operators.is_empty() {
        "The capture has no operator rows: profile with profile_memory=True to see which \
         operators hold the peak."
            .to_string()
    } else if top.is_empty() {
        "The operator rows do not explain this peak: it was allocated before the capture. \
         Start the capture before the step whose peak matters."
            .to_string()
    } else if top.iter().any(|n| n.contains("_foreach_")) {
        "The peak falls in the optimizer step: its multi-tensor (_foreach_*) operators hold a \
         temporary for every parameter at once. An optimizer built with foreach=False steps \
         one parameter at a time and holds less (slower)."
            .to_string()
    } else if top.iter().any(|n| is_cast_or_copy(n)) {
        "Shrink or free the largest of these before the peak: a cast or a copy of a large tensor \
         (the logits in fp32) can often be done in chunks, in place, or after the reduction."
            .to_string()
    } else if let Some(phase) = phase {
        match phase {
            Phase::Forward { .. } => format!(
                "The peak falls in the forward pass. The activations it keeps for backward are \
                 among the operator rows alive then ({alive}): activation checkpointing or a \
                 smaller micro-batch can take off at most that much{bound}. Memory allocated \
                 before \
                 the capture is not this forward's activations: the weights, optimizer state \
                 and, where zero_grad runs after the forward, the previous step's gradients \
                 (optimizer.zero_grad(set_to_none=True) before the forward frees those)."
            ),
            Phase::Backward { .. } => format!(
                "The peak falls in the backward pass, where the forward's activations are still \
                 held while gradients are made; both are among the operator rows alive then \
                 ({alive}). Activation checkpointing or a smaller micro-batch lowers the \
                 activations' part."
            ),
            Phase::AfterBackward { .. } => "The peak comes after the backward pass (in the \
                 optimizer step, or what follows it): the forward's activations are normally \
                 freed by then, so activation checkpointing would not lower it, and a smaller \
                 micro-batch only by the inputs and outputs still alive. The weights, gradients, \
                 optimizer state and the step's temporaries hold it: the largest rows alive then \
                 are where to look."
                .to_string(),
        }
    } else {
        // The rows name operators, not phases: `aten::add` may be an activation or an
        // optimizer's weight decay (a held-out rank's peak, in its per-parameter SGD step, was
        // told to use activation checkpointing); where no backward row settles it, say so.
        "These are the allocations to look at first. The operator rows do not say in which \
         phase (forward, backward, optimizer step) each was made: activations the forward pass \
         keeps for backward shrink with activation checkpointing or a smaller micro-batch, while \
         gradients, optimizer state and an optimizer step's temporaries are expected at a \
         training step's peak."
            .to_string()
    }
}

/// One operator name allocating very different amounts on different ranks of one job (ranks
/// whose captures overlap in time; folders of unrelated jobs opened together are not compared).
fn imbalance(run: &ProfilerRun) -> Option<Finding> {
    let spans: Vec<(f64, f64)> = run.ranks.iter().filter_map(Rank::time_span_us).collect();
    let overlap = spans.iter().map(|s| s.0).fold(f64::MIN, f64::max)
        < spans.iter().map(|s| s.1).fold(f64::MAX, f64::min);
    if run.ranks.len() < 2 || spans.len() < run.ranks.len() || !overlap {
        return None;
    }
    let totals: Vec<rustc_hash::FxHashMap<&str, f64>> = run
        .ranks
        .iter()
        .map(|rank| {
            let mut by_name: rustc_hash::FxHashMap<&str, f64> = rustc_hash::FxHashMap::default();
            for o in rank.operators.iter().filter(|o| o.size_bytes > 0) {
                *by_name.entry(rank.operator_name(o)).or_default() += o.size_bytes as f64;
            }
            by_name
        })
        .collect();
    let mut worst: Option<(f64, &str, usize, usize)> = None;
    for name in totals.iter().flat_map(|t| t.keys()) {
        let amounts: Vec<(usize, f64)> = totals
            .iter()
            .enumerate()
            .filter_map(|(r, t)| t.get(name).map(|&b| (r, b)))
            .collect();
        if amounts.len() < 2 {
            continue;
        }
        let hi = amounts.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
        let lo = amounts.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
        let difference = hi.1 - lo.1;
        if hi.1 >= lo.1.max(1.0) * IMBALANCE_RATIO
            && difference >= IMBALANCE_MIN_BYTES
            && worst.is_none_or(|w| {
                (difference, std::cmp::Reverse(*name)) > (w.0, std::cmp::Reverse(w.1))
            })
        {
            worst = Some((difference, name, hi.0, lo.0));
        }
    }
    let (difference, name, hi, lo) = worst?;
    let (hi_rank, lo_rank) = (&run.ranks[hi], &run.ranks[lo]);
    let mut f = finding(hi_rank, FindingKind::Imbalance, Severity::Info);
    f.title = format!(
        "Imbalance: {name} allocates far more on {} than on {}",
        hi_rank.name, lo_rank.name
    );
    f.summary = format!(
        "{name} allocated {} on {} and {} on {} over the capture, a difference of {}. Ranks running the same \
         code should allocate alike.",
        format_bytes(totals[hi][name] as i64),
        hi_rank.name,
        format_bytes(totals[lo][name] as i64),
        lo_rank.name,
        format_bytes(difference as i64)
    );
    f.bytes = difference as u64;
    f.suggestion = "Check each rank's inputs (uneven batch or sequence lengths, routing that favours one rank) and \
                    where this operator's output is placed."
        .to_string();
    Some(f)
}

/// Operator allocations of a large share of the rank's peak reserved.
fn outliers(rank: &Rank) -> Vec<Finding> {
    let peak = rank
        .curve(OPERATOR_COMPONENT)
        .and_then(Curve::peak_reserved)
        .map_or(0.0, |p| p.0);
    if peak <= 0.0 {
        return Vec::new();
    }
    let mut big: Vec<(usize, &OperatorRow)> = rank
        .operators
        .iter()
        .enumerate()
        .filter(|(_, o)| o.size_bytes as f64 >= peak * OUTLIER_PEAK_SHARE)
        .collect();
    big.sort_by_key(|(_, o)| std::cmp::Reverse(o.size_bytes));
    big.into_iter()
        .take(MAX_COMPONENTS)
        .map(|(i, o)| {
            let name = rank.operator_name(o);
            Finding {
                title: format!(
                    "Outlier operator allocation on {}: {name} took {}",
                    rank.name,
                    format_bytes(o.size_bytes)
                ),
                summary: format!(
                    "One allocation by {name} took {}, {:.0}% of the rank's peak operator reserved ({}), at line {} \
                     of operator_memory.csv.",
                    format_bytes(o.size_bytes),
                    o.size_bytes as f64 * 100.0 / peak,
                    format_bytes(peak as i64),
                    o.line
                ),
                bytes: o.size_bytes.max(0) as u64,
                events: (i as u32, i as u32),
                source_lines: crate::detect::SourceLines::of("operator_memory.csv", o.line, o.line),
                focus_event: Some(i as u32),
                time_range_us: Some((o.alloc_us, if o.release_us.is_nan() { o.alloc_us } else { o.release_us })),
                breakdown: Vec::new(),
                owners: Vec::new(),
                rules: Vec::new(),
                suggestion: "Factor the size into the tensor's shape: a size like 2·24·9536·9536·8 bytes points at an \
                             expand or broadcast done before a dtype cast; cast first, or chunk the operation."
                    .to_string(),
                ..finding(rank, FindingKind::OutlierAllocation, Severity::Warning)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::analyze;
    use crate::detect::FindingKind;
    use crate::r#gen::profiler::{ProfilerGenOptions, write_rank};

    /// `operator_memory.csv`'s header, as `torch_npu` writes it.
    const OPERATOR_HEADER: &str = "Name,Size(KB),Allocation Time(us),Release Time(us),Active \
                                   Release Time(us),Duration(us),Active Duration(us),Allocation \
                                   Total Allocated(MB),Allocation Total Reserved(MB),Allocation \
                                   Total Active(MB),Release Total Allocated(MB),Release Total \
                                   Reserved(MB),Release Total Active(MB),Stream Ptr,Device Type\n";

    /// The one peak finding of the run under `root`.
    fn peaks_of(root: &std::path::Path) -> Vec<crate::detect::Finding> {
        let run = crate::profiler::open(&[root.to_path_buf()]).expect("reads");
        let peaks: Vec<_> = analyze(&run)
            .into_iter()
            .filter(|f| f.kind == FindingKind::Peak)
            .collect();
        assert_eq!(peaks.len(), 1, "{peaks:?}");
        peaks
    }

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("memsight-pdetect-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_stall_on_one_of_two_ranks_is_found_there_with_its_size_and_duration() {
        let root = temp("stall");
        let stall = (4_000, 3u64 << 30, 6_000); // 3 GiB over 6,000 samples of 0.5 ms: 3 s
        let truth = write_rank(
            &root.join("rank1_ascend_pt").join("ASCEND_PROFILER_OUTPUT"),
            &ProfilerGenOptions {
                stall: Some(stall),
                device: 1,
                ..ProfilerGenOptions::default()
            },
        )
        .expect("written");
        write_rank(
            &root.join("rank0_ascend_pt").join("ASCEND_PROFILER_OUTPUT"),
            &ProfilerGenOptions::default(),
        )
        .expect("written");
        let run = crate::profiler::open(std::slice::from_ref(&root)).expect("reads");
        assert_eq!(run.ranks.len(), 2);
        let stalls: Vec<_> = analyze(&run)
            .into_iter()
            .filter(|f| f.kind == FindingKind::AllocatorStall)
            .collect();
        assert_eq!(stalls.len(), 1, "{stalls:?}");
        let f = &stalls[0];
        assert_eq!(f.rank.as_deref(), Some("rank1_ascend_pt"));
        assert_eq!(f.device, 1);
        // Within one 1 MiB step of the injected drop, and the same span of time.
        assert!(
            f.bytes.abs_diff(truth.stall_bytes) <= 1 << 20,
            "{} vs {}",
            f.bytes,
            truth.stall_bytes
        );
        let (start, end) = f.time_range_us.expect("timed");
        let (t0, t1) = (
            truth.stall_start_us.expect("injected"),
            truth.stall_end_us.expect("injected"),
        );
        assert!(
            (start - t0).abs() <= 1_000.0 && (end - t1).abs() <= 1_000.0,
            "{start}..{end} vs {t0}..{t1}"
        );
        assert!(f.summary.contains("1 of 2 ranks stalled"), "{}", f.summary);
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The classic OOM study: an fp32 cast of the logits (2.3 GiB) alive at the rank's peak is
    /// named first, with its share of the peak.
    #[test]
    fn the_peak_names_the_operator_allocation_that_sets_it() {
        let root = temp("peak");
        let dir = root.join("rank0_ascend_pt").join("ASCEND_PROFILER_OUTPUT");
        write_rank(&dir, &ProfilerGenOptions::default()).expect("written");
        let run = crate::profiler::open(std::slice::from_ref(&root)).expect("reads");
        let curve = run.ranks[0]
            .curve(super::OPERATOR_COMPONENT)
            .expect("PTA+GE");
        let (peak_bytes, i) = curve.peak_allocated().expect("a peak");
        let t = curve.time_us[i];
        // One more row, alive across the peak: 2.3 GiB = 2,411,724.8 KB.
        let table = dir.join("operator_memory.csv");
        let text = std::fs::read_to_string(&table).expect("operator table");
        let cast_kb = 2.3 * 1024.0 * 1024.0;
        let row = format!(
            "npu::_npu_dtype_cast,{cast_kb:.1},{:.3}\t,{:.3}\t,{:.3}\t,2.000\t,2.000\t,0,0,0,0,0,0,1,NPU:0\r\n",
            t - 1.0,
            t + 1.0,
            t + 1.0
        );
        std::fs::write(&table, format!("{text}{row}")).expect("append");
        let run = crate::profiler::open(std::slice::from_ref(&root)).expect("reads");
        let peaks: Vec<_> = analyze(&run)
            .into_iter()
            .filter(|f| f.kind == FindingKind::Peak)
            .collect();
        assert_eq!(peaks.len(), 1);
        let share = (cast_kb * 1024.0 * 100.0 / peak_bytes).round();
        assert!(
            peaks[0]
                .title
                .contains(&format!("npu::_npu_dtype_cast holds {share:.0}%")),
            "{}",
            peaks[0].title
        );
        assert!(
            peaks[0]
                .summary
                .contains("the largest rows: npu::_npu_dtype_cast 2.30 GiB"),
            "{}",
            peaks[0].summary
        );
        assert_eq!(peaks[0].bytes, peak_bytes as u64);
    }

    /// A rank whose GE reports its reserve late: the APP sample before GE's first record is
    /// measured against PTA alone and is left out of the gap (700 MiB throughout, not "at most
    /// 1000 MiB"); the components `npu_module_mem.csv` names are the only ones the advice names,
    /// with what none of them holds, and the fix is for a device that runs short. The peak's
    /// advice says the operator rows name no phase.
    #[test]
    fn the_gap_outside_the_allocator_counts_from_ge_s_first_record_and_names_what_holds_it() {
        let root = temp("gap");
        let dir = root.join("rank0_ascend_pt").join("ASCEND_PROFILER_OUTPUT");
        std::fs::create_dir_all(&dir).expect("folder");
        let mut record = String::from(
            "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),\
             Stream Ptr,Device Type\n",
        );
        // PTA 1000 MB reserved from t = 50; GE 300 MB from t = 1000; APP 2000 MB throughout.
        record.push_str("PTA,50,800,1000,800,1,NPU:0\nPTA+GE,50,800,1000,800,,NPU:0\n");
        record.push_str("APP,100,,2000,,,NPU:0\n");
        record.push_str("GE,1000,100,300,100,,NPU:0\nPTA+GE,1000,900,1300,900,,NPU:0\n");
        for t in [1000, 1100, 1200, 1300] {
            let _ = writeln!(record, "APP,{t},,2000,,,NPU:0");
        }
        std::fs::write(dir.join("memory_record.csv"), record).expect("written");
        let mut modules = String::from("Component,Timestamp(us),Total Reserved(MB),Device\n");
        for (component, mb) in [("HCCL", 400), ("RUNTIME", 100), ("GE", 300), ("APP", 1000)] {
            for t in [0, 1300] {
                let _ = writeln!(modules, "{component},{t},{mb},NPU:0");
            }
        }
        std::fs::write(dir.join("npu_module_mem.csv"), &modules).expect("written");
        let run = crate::profiler::open(std::slice::from_ref(&root)).expect("reads");
        let gaps: Vec<_> = analyze(&run)
            .into_iter()
            .filter(|f| f.kind == FindingKind::UnaccountedMemory)
            .collect();
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        let f = &gaps[0];
        assert!(
            f.summary
                .contains("by 700 MiB (median over 4 samples, at most 700 MiB)")
                && f.summary.contains(
                    "held 500 MiB of it: HCCL 400 MiB, RUNTIME 100 MiB; the other 200 MiB is in \
                     none of them"
                ),
            "{}",
            f.summary
        );
        assert!(
            f.suggestion
                .contains("held by HCCL (collective communication buffers), RUNTIME")
                && f.suggestion.contains("unless the device runs short")
                && !f.suggestion.contains("workspaces"),
            "{}",
            f.suggestion
        );
        // npu_module_mem.csv's GE 10 MB above memory_record.csv's: that much of the gap is GE's
        // (held-out ranks: 1.25 MiB of "the other 90.7 MiB" was).
        std::fs::write(
            dir.join("npu_module_mem.csv"),
            modules
                .replace("GE,0,300", "GE,0,310")
                .replace("GE,1300,300", "GE,1300,310"),
        )
        .expect("written");
        let run = crate::profiler::open(std::slice::from_ref(&root)).expect("reads");
        let gap = analyze(&run)
            .into_iter()
            .find(|f| f.kind == FindingKind::UnaccountedMemory)
            .expect("the gap");
        assert!(
            gap.summary.contains(
                "RUNTIME 100 MiB; GE, whose memory the operator curve counts, holds 10.0 MiB more \
                 in npu_module_mem.csv than memory_record.csv says; the other 190 MiB is in none \
                 of them"
            ),
            "{}",
            gap.summary
        );
        std::fs::write(dir.join("npu_module_mem.csv"), modules).expect("written");
        // An `aten::add` alive at the peak may be an activation or an optimizer's weight decay
        // (a held-out rank's per-parameter SGD step): the advice says the rows name no phase.
        let operators = OPERATOR_HEADER.to_string()
            + "aten::add,102400,990,1010,1010,20,20,900,1300,900,800,1300,800,1,NPU:0\n";
        std::fs::write(dir.join("operator_memory.csv"), operators).expect("written");
        let peaks = peaks_of(&root);
        assert!(
            peaks[0].summary.contains("aten::add 100 MiB")
                && peaks[0]
                    .suggestion
                    .contains("The operator rows do not say in which phase")
                && !peaks[0].suggestion.contains("Those the forward pass keeps"),
            "{} {}",
            peaks[0].summary,
            peaks[0].suggestion
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The operator rows carry no phase, but backward operators name themselves: a peak before
    /// the first backward row is the forward's, one just after a backward row's allocation the
    /// backward's, one after the last the optimizer step's or later; `cann::` rows, at the
    /// device's pace, are no evidence, and backward rows on both sides settle nothing.
    #[test]
    fn the_peak_s_phase_is_read_from_the_backward_rows_around_it() {
        let root = temp("phase");
        let dir = root.join("rank0_ascend_pt").join("ASCEND_PROFILER_OUTPUT");
        std::fs::create_dir_all(&dir).expect("folder");
        // 800 MB allocated from t = 50, 950 MB at t = 1100 (the peak), 800 MB again at 1200.
        let record = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total \
                      Active(MB),Stream Ptr,Device Type\n\
                      PTA,50,800,1200,800,1,NPU:0\nPTA+GE,50,800,1200,800,,NPU:0\n\
                      PTA,1100,950,1200,950,1,NPU:0\nPTA+GE,1100,950,1200,950,,NPU:0\n\
                      PTA,1200,800,1200,800,1,NPU:0\nPTA+GE,1200,800,1200,800,,NPU:0\n";
        std::fs::write(dir.join("memory_record.csv"), record).expect("written");
        // (name, allocated at, released at), each 100 MiB; the peak is at t = 1100.
        let peak_with = |rows: &[(&str, u32, u32)]| {
            let mut operators = OPERATOR_HEADER.to_string();
            for (name, alloc, release) in rows {
                let _ = writeln!(
                    operators,
                    "{name},102400,{alloc},{release},{release},,,900,1200,900,800,1200,800,1,NPU:0"
                );
            }
            std::fs::write(dir.join("operator_memory.csv"), operators).expect("written");
            let peak = peaks_of(&root).remove(0);
            (peak.summary, peak.suggestion)
        };
        // A graph's buffer is no activation; after t = 1200 the curve is 150 MB below the peak.
        let (summary, advice) = peak_with(&[
            ("aten::_convolution", 1000, 1500),
            ("cann::Graph_1", 1000, 1500),
            ("aten::convolution_backward", 1300, 1400),
        ]);
        assert!(
            summary.contains(
                "It comes before the capture's first backward operator \
                 (aten::convolution_backward, line 4 of operator_memory.csv, allocated 0.20 ms \
                 later): the forward pass."
            ) && advice.contains(
                "among the operator rows alive then (100 MiB, 11% of the peak, graph-engine rows \
                 aside): activation checkpointing or a smaller micro-batch can take off at most \
                 that much. "
            ),
            "{summary} {advice}"
        );
        // The backward pass (from t = 1300) reaching 900 of the 950 MB peak: the peak can fall
        // by 50 at most.
        let record_after =
            format!("{record}PTA,1350,900,1200,900,1,NPU:0\nPTA+GE,1350,900,1200,900,,NPU:0\n");
        std::fs::write(dir.join("memory_record.csv"), &record_after).expect("written");
        let (_, advice) = peak_with(&[
            ("aten::_convolution", 1000, 1500),
            ("aten::convolution_backward", 1300, 1400),
        ]);
        assert!(
            advice.contains(
                "can take off at most that much, and the peak falls by at most 50.0 MiB: once \
                 the backward pass begins, the curve still reaches 900 MiB (line 9 of \
                 memory_record.csv)."
            ),
            "{advice}"
        );
        std::fs::write(dir.join("memory_record.csv"), record).expect("written");
        let (summary, advice) = peak_with(&[
            ("aten::_convolution", 900, 1500),
            ("npu::npu_fusion_attention_grad", 1050, 1500),
            ("aten::convolution_backward", 1300, 1400),
        ]);
        assert!(
            summary.contains(
                "The last allocation before it is a backward operator's \
                 (npu::npu_fusion_attention_grad, line 3 of operator_memory.csv): the backward \
                 pass."
            ) && advice.starts_with("The peak falls in the backward pass"),
            "{summary} {advice}"
        );
        // A backward kernel row comes last and is alive at the peak: the device is behind.
        let (summary, advice) = peak_with(&[
            ("aten::convolution_backward", 900, 1000),
            ("aten::add", 1050, 1150),
            ("cann::Conv2DBackpropFilter1", 1080, 1150),
        ]);
        assert!(
            summary.contains(
                "It comes after the capture's last backward operator \
                 (aten::convolution_backward, line 2 of operator_memory.csv, allocated 0.20 ms \
                 before), and no backward operator follows: after the backward pass on the host, \
                 while the device still runs backward kernels: cann::Conv2DBackpropFilter1 (line \
                 4 of operator_memory.csv), alive at the peak."
            ) && advice.contains("activation checkpointing would not lower it"),
            "{summary} {advice}"
        );
        let (summary, advice) = peak_with(&[
            ("aten::convolution_backward", 900, 1000),
            ("aten::mul", 1050, 1150),
            ("aten::convolution_backward", 1300, 1400),
        ]);
        assert!(
            !summary.contains(" pass.") && advice.contains("do not say in which phase"),
            "{summary} {advice}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// GE's figure in `memory_record.csv` does not fall at a release (GE writes the same figure
    /// again): at a peak after a graph's release the curve still counts it. The peak finding
    /// names the released graph row, and its bytes are not said to predate the capture.
    #[test]
    fn graph_memory_released_before_the_peak_is_named_not_called_older() {
        let root = temp("ge-released");
        let dir = root.join("rank0_ascend_pt").join("ASCEND_PROFILER_OUTPUT");
        std::fs::create_dir_all(&dir).expect("folder");
        // PTA 800 MB from t = 50; GE 100 MB at t = 1000 (cann::Graph_1), written again unchanged
        // at its release (t = 1050); PTA up to 850 MB at t = 1100: the curve's peak, 950 MB.
        let record = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total \
                      Active(MB),Stream Ptr,Device Type\n\
                      PTA,50,800,1000,800,1,NPU:0\nPTA+GE,50,800,1000,800,,NPU:0\n\
                      GE,1000,100,200,100,,NPU:0\nPTA+GE,1000,900,1200,900,,NPU:0\n\
                      GE,1050,100,200,100,,NPU:0\nPTA+GE,1050,900,1200,900,,NPU:0\n\
                      PTA,1100,850,1000,850,1,NPU:0\nPTA+GE,1100,950,1200,950,,NPU:0\n";
        std::fs::write(dir.join("memory_record.csv"), record).expect("written");
        let operators = OPERATOR_HEADER.to_string()
            + "cann::Graph_1,102400,1000,1050,,50,,100,200,,100,200,,,NPU:0\n\
                         aten::add,51200,1100,1200,1200,100,100,850,1000,850,800,1000,800,1,NPU:0\n";
        std::fs::write(dir.join("operator_memory.csv"), operators).expect("written");
        let peaks = peaks_of(&root);
        // 950 MB at the peak: 50 in aten::add, 100 in the released graph, 800 from before.
        let summary = &peaks[0].summary;
        assert!(
            summary.contains(
                "100 MiB of it is graph-engine memory already released: GE's figure, unchanged \
                 since line 4 of memory_record.csv (100 MiB), still counts cann::Graph_1 100 MiB \
                 (line 2 of operator_memory.csv, released 0.05 ms before)"
            ) && summary.contains("800 MiB of it (84%) is in no operator row alive then"),
            "{summary}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn clean_ranks_have_no_stall() {
        let root = temp("clean");
        for seed in 1..=3 {
            write_rank(
                &root.join(format!("rank{seed}")),
                &ProfilerGenOptions {
                    seed,
                    ..ProfilerGenOptions::default()
                },
            )
            .expect("written");
        }
        let run = crate::profiler::open(std::slice::from_ref(&root)).expect("reads");
        assert_eq!(run.ranks.len(), 3);
        assert!(
            analyze(&run)
                .iter()
                .all(|f| f.kind != FindingKind::AllocatorStall)
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}

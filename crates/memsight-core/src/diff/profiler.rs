//! Two profiler runs (or two ranks of one run) side by side.
//!
//! Ranks are paired by index (or chosen). Per operator name (`operator_memory.csv`): the bytes
//! of its allocations alive at the rank's operator peak, how many it made, their total and the
//! largest. The operator peak is the moment the rows themselves hold the most (a sweep over
//! their allocation and release times; rows allocated before the capture, with a negative size,
//! count from the start), so the operators' bytes at the peak add up to it exactly. Beside them:
//! every component's curve peaks (`memory_record.csv`) and the memory outside the allocator at
//! the process's peak (APP reserved minus operator reserved then).

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::Side;
use crate::profiler::{APP_COMPONENT, Curve, OPERATOR_COMPONENT, ProfilerRun, Rank};

/// What one operator name's allocations did on one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OperatorFigures {
    pub bytes_at_peak: u64,
    /// Allocations made inside the capture.
    pub count: u64,
    pub total_bytes: u64,
    pub largest_bytes: u64,
}

/// One row of the operator table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OperatorDiff {
    /// The operator (empty: allocated before the capture started).
    pub name: String,
    pub a: OperatorFigures,
    pub b: OperatorFigures,
    pub delta_at_peak_bytes: i64,
    pub only_in: Option<Side>,
}

/// One component's curve peaks on each side (`None`: that side has no such curve).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CurveDiff {
    pub component: String,
    pub a_peak_allocated_bytes: Option<f64>,
    pub b_peak_allocated_bytes: Option<f64>,
    pub a_peak_reserved_bytes: Option<f64>,
    pub b_peak_reserved_bytes: Option<f64>,
}

/// One rank as a whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RankFigures {
    /// The most the operator rows held at once.
    pub operator_peak_bytes: u64,
    /// When (µs), `None` without operator rows.
    pub operator_peak_us: Option<f64>,
    pub operator_rows: u64,
    /// At the APP curve's peak reserved (its last sample at that value): APP reserved minus the
    /// operator reserved of the last operator sample at or before it (`None` without both, or
    /// when the curves' times were rounded and samples cannot be lined up).
    pub outside_allocator_bytes: Option<f64>,
    /// `memory_record.csv`'s timestamps were rounded (a spreadsheet's scientific notation).
    pub coarse_times: bool,
}

/// One pair of ranks compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankDiff {
    pub rank_a: String,
    pub rank_b: String,
    pub a: RankFigures,
    pub b: RankFigures,
    pub curves: Vec<CurveDiff>,
    /// Largest |Δ at peak| first, then by total bytes.
    pub operators: Vec<OperatorDiff>,
}

/// Two profiler runs compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfilerDiff {
    pub a: String,
    pub b: String,
    pub ranks: Vec<RankDiff>,
}

/// Compares the ranks of `a` with those of `b`: paired by index, or the ones given (index into
/// each run's ranks); `Err` names a rank that is not there.
pub fn diff(
    (name_a, a): (&str, &ProfilerRun),
    (name_b, b): (&str, &ProfilerRun),
    rank_a: Option<usize>,
    rank_b: Option<usize>,
) -> Result<ProfilerDiff, String> {
    let pick = |run: &ProfilerRun, name: &str, k: Option<usize>| -> Result<usize, String> {
        let k = k.unwrap_or(0);
        if k < run.ranks.len() {
            Ok(k)
        } else {
            Err(format!(
                "{name} has no rank {k} (it has {}: {})",
                run.ranks.len(),
                run.ranks
                    .iter()
                    .enumerate()
                    .map(|(i, r)| format!("{i} = {}", r.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    };
    let pairs: Vec<(usize, usize)> = if rank_a.is_none() && rank_b.is_none() {
        (0..a.ranks.len().min(b.ranks.len()))
            .map(|k| (k, k))
            .collect()
    } else {
        vec![(pick(a, name_a, rank_a)?, pick(b, name_b, rank_b)?)]
    };
    Ok(ProfilerDiff {
        a: name_a.to_string(),
        b: name_b.to_string(),
        ranks: pairs
            .into_iter()
            .map(|(ka, kb)| diff_ranks(&a.ranks[ka], &b.ranks[kb]))
            .collect(),
    })
}

/// Compares two ranks.
pub fn diff_ranks(a: &Rank, b: &Rank) -> RankDiff {
    let (fig_a, ops_a) = rank_figures(a);
    let (fig_b, mut ops_b) = rank_figures(b);
    let mut operators: Vec<OperatorDiff> = ops_a
        .into_iter()
        .map(|(name, fa)| {
            let fb = ops_b.remove(&name).unwrap_or_default();
            operator_row(name, fa, fb)
        })
        .collect();
    operators.extend(
        ops_b
            .into_iter()
            .map(|(name, fb)| operator_row(name, OperatorFigures::default(), fb)),
    );
    operators.sort_by(|x, y| {
        y.delta_at_peak_bytes
            .unsigned_abs()
            .cmp(&x.delta_at_peak_bytes.unsigned_abs())
            .then((y.a.total_bytes.max(y.b.total_bytes)).cmp(&x.a.total_bytes.max(x.b.total_bytes)))
            .then_with(|| x.name.cmp(&y.name))
    });
    let mut components: Vec<&str> = a.curves.iter().map(|c| c.component.as_str()).collect();
    for c in &b.curves {
        if !components.contains(&c.component.as_str()) {
            components.push(&c.component);
        }
    }
    let peak = |rank: &Rank, component: &str, f: fn(&Curve) -> Option<(f64, usize)>| {
        rank.curve(component).and_then(f).map(|p| p.0)
    };
    let curves = components
        .into_iter()
        .map(|c| CurveDiff {
            component: c.to_string(),
            a_peak_allocated_bytes: peak(a, c, Curve::peak_allocated),
            b_peak_allocated_bytes: peak(b, c, Curve::peak_allocated),
            a_peak_reserved_bytes: peak(a, c, Curve::peak_reserved),
            b_peak_reserved_bytes: peak(b, c, Curve::peak_reserved),
        })
        .collect();
    RankDiff {
        rank_a: a.name.clone(),
        rank_b: b.name.clone(),
        a: fig_a,
        b: fig_b,
        curves,
        operators,
    }
}

fn operator_row(name: String, a: OperatorFigures, b: OperatorFigures) -> OperatorDiff {
    let empty = |f: &OperatorFigures| f.count == 0 && f.bytes_at_peak == 0;
    OperatorDiff {
        only_in: match (empty(&a), empty(&b)) {
            (false, true) => Some(Side::A),
            (true, false) => Some(Side::B),
            _ => None,
        },
        delta_at_peak_bytes: b.bytes_at_peak as i64 - a.bytes_at_peak as i64,
        name,
        a,
        b,
    }
}

/// The rank's figures and its operators' (by name).
fn rank_figures(rank: &Rank) -> (RankFigures, FxHashMap<String, OperatorFigures>) {
    let rows = &rank.operators;
    // Sweep: +size at allocation, -size at release; rows from before the capture (negative
    // size) hold their bytes from the start. Releases sort before allocations at one time.
    let mut changes: Vec<(f64, i64, usize)> = Vec::with_capacity(rows.len() * 2);
    let mut held: i64 = 0;
    for (k, row) in rows.iter().enumerate() {
        let size = row.size_bytes.unsigned_abs() as i64;
        if row.size_bytes < 0 {
            held += size;
        } else {
            changes.push((row.alloc_us, size, k));
        }
        if !row.release_us.is_nan() {
            changes.push((row.release_us, -size, k));
        }
    }
    changes.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut best, mut best_at): (i64, Option<usize>) = (held, None);
    for (i, &(_, change, _)) in changes.iter().enumerate() {
        held += change;
        if held > best {
            (best, best_at) = (held, Some(i));
        }
    }
    let peak_us = match best_at {
        Some(i) => Some(changes[i].0),
        None => rows.first().map(|r| r.alloc_us.min(r.release_us)),
    };
    // Which rows are alive right after change `best_at`.
    let mut alive = vec![false; rows.len()];
    for (k, row) in rows.iter().enumerate() {
        alive[k] = row.size_bytes < 0;
    }
    if let Some(end) = best_at {
        for &(_, change, k) in &changes[..=end] {
            alive[k] = change > 0;
        }
    }
    let mut operators: FxHashMap<String, OperatorFigures> = FxHashMap::default();
    for (k, row) in rows.iter().enumerate() {
        let f = operators
            .entry(rank.operator_name(row).to_string())
            .or_default();
        let size = row.size_bytes.unsigned_abs();
        if alive[k] {
            f.bytes_at_peak += size;
        }
        if row.size_bytes > 0 {
            f.count += 1;
            f.total_bytes += size;
            f.largest_bytes = f.largest_bytes.max(size);
        }
    }
    let outside = rank
        .curve(APP_COMPONENT)
        .filter(|_| !rank.coarse_times)
        .and_then(|app| {
            let ops = rank.curve(OPERATOR_COMPONENT)?;
            let (app_peak, k) = app.peak_reserved()?;
            let t = app.time_us[k];
            let i = ops.time_us.partition_point(|&x| x <= t).checked_sub(1)?;
            Some(app_peak - ops.reserved_bytes[i]).filter(|v| !v.is_nan())
        });
    let figures = RankFigures {
        operator_peak_bytes: best.max(0) as u64,
        operator_peak_us: peak_us,
        operator_rows: rows.len() as u64,
        outside_allocator_bytes: outside,
        coarse_times: rank.coarse_times,
    };
    (figures, operators)
}

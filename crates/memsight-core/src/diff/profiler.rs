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
    /// When (µs); `None` when the rows held the most from the start (or there are none).
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
    /// Ranks left without a partner, and the like.
    pub notes: Vec<String>,
}

/// Why two profiler runs cannot be compared.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfilerDiffError {
    #[error("no rank {rank} (ranks there: {available}): {run}")]
    NoRank {
        run: String,
        rank: u32,
        available: String,
    },
}

/// The rank number in a folder's name (`rank10_ascend_pt` → 10, `static_graph_rank1` → 1), or
/// the first number in it.
fn rank_number(name: &str) -> Option<u32> {
    let digits_after = |at: usize| -> Option<u32> {
        let digits: String = name[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    if let Some(at) = name.rfind("rank")
        && let Some(n) = digits_after(at + 4)
    {
        return Some(n);
    }
    let first = name.find(|c: char| c.is_ascii_digit())?;
    digits_after(first)
}

/// Each rank's number: from its name when every rank's name has a distinct one, else its index.
fn rank_numbers(run: &ProfilerRun) -> Vec<u32> {
    let named: Vec<Option<u32>> = run.ranks.iter().map(|r| rank_number(&r.name)).collect();
    let mut distinct: Vec<u32> = named.iter().flatten().copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    if named.iter().all(Option::is_some) && distinct.len() == named.len() {
        named.into_iter().flatten().collect()
    } else {
        (0..run.ranks.len() as u32).collect()
    }
}

/// Compares the ranks of `a` with those of `b`: ranks of the same number paired (the number in
/// the folder's name, `rank3_ascend_pt`, else the rank's index; by position when the runs have
/// no number in common), or the two given. The notes name ranks left without a partner.
pub fn diff(
    (name_a, a): (&str, &ProfilerRun),
    (name_b, b): (&str, &ProfilerRun),
    rank_a: Option<u32>,
    rank_b: Option<u32>,
) -> Result<ProfilerDiff, ProfilerDiffError> {
    let (numbers_a, numbers_b) = (rank_numbers(a), rank_numbers(b));
    let find = |numbers: &[u32], run: &ProfilerRun, name: &str, rank: u32| {
        numbers
            .iter()
            .position(|&n| n == rank)
            .ok_or_else(|| ProfilerDiffError::NoRank {
                run: name.to_string(),
                rank,
                available: numbers
                    .iter()
                    .zip(&run.ranks)
                    .map(|(n, r)| format!("{n} ({})", r.name))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    };
    let mut notes = Vec::new();
    let pairs: Vec<(usize, usize)> = match (rank_a, rank_b) {
        (None, None) => {
            let by_number: Vec<(usize, usize)> = numbers_a
                .iter()
                .enumerate()
                .filter_map(|(ka, n)| numbers_b.iter().position(|m| m == n).map(|kb| (ka, kb)))
                .collect();
            if by_number.is_empty() {
                // No rank number in common (two runs of one rank each, say): by position.
                let n = a.ranks.len().min(b.ranks.len());
                if n > 0 && (a.ranks.len() > 1 || b.ranks.len() > 1) {
                    notes.push("no rank number in common: ranks paired by position".to_string());
                }
                (0..n).map(|k| (k, k)).collect()
            } else {
                by_number
            }
        }
        (ra, rb) => {
            // One given: the other side's rank of the same number.
            let (ra, rb) = (ra.or(rb).unwrap_or(0), rb.or(ra).unwrap_or(0));
            vec![(
                find(&numbers_a, a, name_a, ra)?,
                find(&numbers_b, b, name_b, rb)?,
            )]
        }
    };
    for (side, run, numbers, paired) in [
        (
            "A",
            a,
            &numbers_a,
            pairs.iter().map(|p| p.0).collect::<Vec<_>>(),
        ),
        (
            "B",
            b,
            &numbers_b,
            pairs.iter().map(|p| p.1).collect::<Vec<_>>(),
        ),
    ] {
        let alone: Vec<String> = (0..run.ranks.len())
            .filter(|k| !paired.contains(k))
            .map(|k| format!("{} ({})", numbers[k], run.ranks[k].name))
            .collect();
        if !alone.is_empty() && rank_a.is_none() && rank_b.is_none() {
            notes.push(format!(
                    "{side}'s ranks {} have no partner of the same number (choose with --device-a / --device-b)",
                alone.join(", ")
            ));
        }
    }
    Ok(ProfilerDiff {
        a: name_a.to_string(),
        b: name_b.to_string(),
        ranks: pairs
            .into_iter()
            .map(|(ka, kb)| diff_ranks(&a.ranks[ka], &b.ranks[kb]))
            .collect(),
        notes,
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
    // Rows that hold nothing at any moment stay out: freed as they were allocated, an
    // allocation time that is not a number, a release before the allocation.
    let mut changes: Vec<(f64, i64, usize)> = Vec::with_capacity(rows.len() * 2);
    let mut held: i64 = 0;
    // Each row's own level, so a row is alive exactly when it counts in `held`.
    let mut net: Vec<i64> = vec![0; rows.len()];
    for (k, row) in rows.iter().enumerate() {
        let size = row.size_bytes.unsigned_abs() as i64;
        let released = !row.release_us.is_nan();
        if row.size_bytes < 0 {
            held += size;
            net[k] = size;
        } else if row.alloc_us.is_nan() || (released && row.release_us <= row.alloc_us) {
            continue;
        } else {
            changes.push((row.alloc_us, size, k));
        }
        if released {
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
    let peak_us = best_at.map(|i| changes[i].0);
    if let Some(end) = best_at {
        for &(_, change, k) in &changes[..=end] {
            net[k] += change;
        }
    }
    let alive: Vec<bool> = net.iter().map(|&n| n > 0).collect();
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
            let (app_peak, _) = app.peak_reserved()?;
            // The last sample at the peak: a flat APP curve starts before the operator curve.
            let k = app.reserved_bytes.iter().rposition(|&v| v >= app_peak)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiler::OperatorRow;

    fn row(name: u32, size_bytes: i64, alloc_us: f64, release_us: f64) -> OperatorRow {
        OperatorRow {
            name,
            size_bytes,
            alloc_us,
            release_us,
            active_release_us: release_us,
            alloc_totals_bytes: [0.0; 3],
            release_totals_bytes: [0.0; 3],
            line: 0,
        }
    }

    fn rank(name: &str, rows: Vec<OperatorRow>) -> Rank {
        Rank {
            name: name.into(),
            operator_names: vec![String::new(), "aten::a".into(), "aten::b".into()],
            operators: rows,
            ..Rank::default()
        }
    }

    #[test]
    fn operators_add_up_to_the_peak_whatever_the_rows_say() {
        let r = rank(
            "rank0",
            vec![
                // From before the capture, released inside it.
                row(0, -100, f64::NAN, 50.0),
                // Freed as it was allocated: never held.
                row(1, 1000, 20.0, 20.0),
                // A release before its allocation, and no allocation time: both bad rows.
                row(1, 5000, 30.0, 10.0),
                row(2, 7000, f64::NAN, 40.0),
                // Held at the peak.
                row(1, 10, 10.0, 60.0),
                row(2, 20, 25.0, f64::NAN),
            ],
        );
        let (figures, ops) = rank_figures(&r);
        // 100 from the start, +10 at 10, +20 at 25: 130 before the release at 50.
        assert_eq!(figures.operator_peak_bytes, 130);
        assert_eq!(figures.operator_peak_us, Some(25.0));
        let at_peak: u64 = ops.values().map(|o| o.bytes_at_peak).sum();
        assert_eq!(at_peak, 130);
        assert_eq!(ops[""].bytes_at_peak, 100);
        assert_eq!(ops["aten::a"].bytes_at_peak, 10);
        assert_eq!(
            ops["aten::a"].count, 3,
            "every allocation inside the capture counts"
        );
        assert_eq!(ops["aten::b"].bytes_at_peak, 20);
    }

    #[test]
    fn ranks_pair_by_their_number_not_their_folder_order() {
        let run = |names: &[&str]| ProfilerRun {
            ranks: names
                .iter()
                .map(|n| rank(n, vec![row(1, 10, 1.0, 2.0)]))
                .collect(),
        };
        // Sorted as folders are: rank10 before rank2.
        let a = run(&["rank0_ascend_pt", "rank10_ascend_pt", "rank2_ascend_pt"]);
        let b = run(&["rank0_ascend_pt", "rank2_ascend_pt"]);
        let d = diff(("a", &a), ("b", &b), None, None).expect("pairs");
        let pairs: Vec<(&str, &str)> = d
            .ranks
            .iter()
            .map(|r| (r.rank_a.as_str(), r.rank_b.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("rank0_ascend_pt", "rank0_ascend_pt"),
                ("rank2_ascend_pt", "rank2_ascend_pt")
            ]
        );
        assert!(
            d.notes[0].contains("10 (rank10_ascend_pt)"),
            "{:?}",
            d.notes
        );
        let one = diff(("a", &a), ("b", &b), Some(10), Some(2)).expect("chosen");
        assert_eq!(one.ranks[0].rank_a, "rank10_ascend_pt");
        let err = diff(("a", &a), ("b", &b), Some(10), None).expect_err("b has no rank 10");
        assert_eq!(
            err.to_string(),
            "no rank 10 (ranks there: 0 (rank0_ascend_pt), 2 (rank2_ascend_pt)): b"
        );
    }
}

//! `memsight diff A B`: two snapshots, or two profiler runs, side by side.

use std::io::Write as _;
use std::path::Path;

use anyhow::Result;
use memsight_core::diff::profiler::{self as profiler_diff, ProfilerDiff};
use memsight_core::diff::{self, DeviceDiff, DeviceFigures, Diff, Recording, Side};
use memsight_core::units::format_bytes;

use crate::commands::{bail_input, input, open, print_json};

/// Call sites (or operators) the text lists when `--top` is not given.
const DEFAULT_TOP: usize = 20;

/// How the comparison is printed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Markdown,
    Json,
}

impl Format {
    /// From `--json` and `--markdown` (which clap keeps apart).
    fn from_flags(json: bool, markdown: bool) -> Self {
        if json {
            Self::Json
        } else if markdown {
            Self::Markdown
        } else {
            Self::Text
        }
    }
}

pub fn diff(
    a: &Path,
    b: Option<&Path>,
    (device_a, device_b, iteration): (Option<u32>, Option<u32>, Option<u64>),
    top: Option<usize>,
    (json, markdown): (bool, bool),
) -> Result<()> {
    // A run folder: two of its ranks, each a file of its own.
    if let (None, Some(run)) = (b, memsight_core::run::as_run(a)) {
        let (file_a, file_b) = crate::run::rank_files(&run, (device_a, device_b), iteration)?;
        return diff(
            &file_a,
            Some(&file_b),
            (None, None, None),
            top,
            (json, markdown),
        );
    }
    if iteration.is_some() {
        bail_input!(
            "--iteration picks the dumps of a run folder; {} is not one",
            a.display()
        );
    }
    let Some(b) = b else {
        bail_input!(
            "diff needs two recordings, or a run folder (a folder of snapshots, one per rank) \
             with --device-a and --device-b; {} is neither a run folder nor given a second file",
            a.display()
        );
    };
    let format = Format::from_flags(json, markdown);
    let is_profiler = memsight_core::profiler::is_profiler_path;
    match (is_profiler(a), is_profiler(b)) {
        (true, true) => return profiler(a, b, (device_a, device_b), top, format),
        (false, false) => {}
        (pa, _) => {
            let (snapshot, folder) = if pa { (b, a) } else { (a, b) };
            bail_input!(
                "cannot compare a snapshot with profiler data: {} is a snapshot, {} profiler data; \
                 give two snapshots or two profiler runs",
                snapshot.display(),
                folder.display()
            );
        }
    }
    // Both files load at once (each load is one thread; the replays use the rest).
    let (loaded_a, loaded_b) = std::thread::scope(|scope| {
        let b = scope.spawn(|| open(Some(b)));
        let a = open(Some(a));
        (
            a,
            b.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        )
    });
    let (loaded_a, loaded_b) = (loaded_a?, loaded_b?);
    let (name_a, name_b) = (a.display().to_string(), b.display().to_string());
    let result = diff::diff(
        Recording {
            name: &name_a,
            loaded: &loaded_a,
        },
        Recording {
            name: &name_b,
            loaded: &loaded_b,
        },
        device_a,
        device_b,
    )
    .map_err(input)?;
    match format {
        Format::Json => {
            let mut result = result;
            if let Some(top) = top {
                for d in &mut result.devices {
                    d.call_sites.truncate(top);
                    d.owners.truncate(top);
                    d.operators.truncate(top);
                }
            }
            print_json(&result)
        }
        _ => print_snapshots(
            &result,
            top.unwrap_or(DEFAULT_TOP),
            format == Format::Markdown,
        ),
    }
}

/// `A  B  Δ  Δ %` for one quantity.
fn quantity(name: &str, a: i64, b: i64, bytes: bool) -> [String; 5] {
    let show = |v: i64| {
        if bytes {
            format_bytes(v)
        } else {
            v.to_string()
        }
    };
    let delta = b - a;
    let percent = if delta == 0 {
        "0 %".into()
    } else if a == 0 {
        "new".into()
    } else {
        format!("{:+.1} %", delta as f64 / (a as f64).abs() * 100.0)
    };
    let signed = if delta > 0 {
        format!("+{}", show(delta))
    } else {
        show(delta)
    };
    [name.to_string(), show(a), show(b), signed, percent]
}

/// The summary lines of one device pair.
fn summary(d: &DeviceDiff) -> Vec<[String; 5]> {
    let (a, b): (&DeviceFigures, &DeviceFigures) = (&d.a, &d.b);
    let n = |v: u64| v as i64;
    let mut lines = vec![
        quantity(
            "peak allocated",
            n(a.peak_allocated_bytes),
            n(b.peak_allocated_bytes),
            true,
        ),
        quantity(
            "peak reserved",
            n(a.peak_reserved_bytes),
            n(b.peak_reserved_bytes),
            true,
        ),
        quantity(
            "peak active",
            n(a.peak_active_bytes),
            n(b.peak_active_bytes),
            true,
        ),
        quantity("allocations", n(a.allocs), n(b.allocs), false),
        quantity(
            "bytes requested",
            n(a.bytes_requested),
            n(b.bytes_requested),
            true,
        ),
        quantity(
            "segment allocs / maps",
            n(a.segment_allocs),
            n(b.segment_allocs),
            false,
        ),
        quantity(
            "segment frees / unmaps",
            n(a.segment_frees),
            n(b.segment_frees),
            false,
        ),
        quantity("events", n(a.events), n(b.events), false),
    ];
    if let (Some(ia), Some(ib)) = (a.iterations, b.iterations) {
        lines.push(quantity("iterations", n(ia), n(ib), false));
    }
    lines
}

fn print_table(
    out: &mut impl std::io::Write,
    header: &[&str],
    rows: &[Vec<String>],
    markdown: bool,
) -> std::io::Result<()> {
    if markdown {
        writeln!(out, "| {} |", header.join(" | "))?;
        let rule: Vec<&str> = header.iter().map(|_| "---").collect();
        writeln!(out, "|{}|", rule.join("|"))?;
        for row in rows {
            // Frames such as `<module>` would read as HTML tags.
            let cells: Vec<String> = row
                .iter()
                .map(|c| {
                    c.replace('|', "\\|")
                        .replace('<', "&lt;")
                        .replace('>', "&gt;")
                })
                .collect();
            writeln!(out, "| {} |", cells.join(" | "))?;
        }
        return writeln!(out);
    }
    let columns = header.len();
    let width = |k: usize| {
        rows.iter()
            .map(|r| r[k].chars().count())
            .chain([header[k].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..columns).map(width).collect();
    let line = |cells: Vec<&str>| {
        let mut text = String::from("  ");
        for (k, cell) in cells.iter().enumerate() {
            let pad = widths[k].saturating_sub(cell.chars().count());
            if k == 0 || k == columns - 1 {
                text.push_str(cell);
                if k < columns - 1 {
                    text.push_str(&" ".repeat(pad));
                }
            } else {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            }
            text.push_str("  ");
        }
        text.trim_end().to_string()
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    writeln!(out)
}

fn signed_bytes(v: i64) -> String {
    if v > 0 {
        format!("+{}", format_bytes(v))
    } else {
        format_bytes(v)
    }
}

/// What the figures say when the two sides made the same requests.
fn verdict(d: &DeviceDiff) -> Option<String> {
    if !d.same_requests {
        return None;
    }
    if !d.differs_only_in_layout() {
        return Some(format!(
            "Same requests: {} allocations, every call site alike, but not the same blocks alive \
             at the peaks (freed in another order).",
            d.a.allocs
        ));
    }
    let reserved = d.b.peak_reserved_bytes as i64 - d.a.peak_reserved_bytes as i64;
    let layout = |f: &DeviceFigures| {
        if f.expandable_segments {
            format!("{} segment maps (expandable segments)", f.segment_allocs)
        } else {
            format!("{} segment allocs", f.segment_allocs)
        }
    };
    Some(if reserved == 0 {
        format!(
            "Same requests: {} allocations, every call site alike; peak reserved is the same too.",
            d.a.allocs
        )
    } else {
        format!(
            "Same requests: {} allocations, every call site alike. Peak reserved differs by {}, all \
             from how the allocator laid out segments: A {}, B {}.",
            d.a.allocs,
            signed_bytes(reserved),
            layout(&d.a),
            layout(&d.b)
        )
    })
}

/// The two recordings' names and the notes about the pairing.
fn print_header(
    out: &mut std::io::StdoutLock,
    (a, b): (&str, &str),
    notes: &[String],
    markdown: bool,
) -> Result<()> {
    if markdown {
        writeln!(out, "## memsight diff\n\n- A: `{a}`\n- B: `{b}`\n")?;
    } else {
        writeln!(out, "A: {a}\nB: {b}")?;
    }
    for note in notes {
        writeln!(out, "note: {note}")?;
    }
    if !markdown {
        writeln!(out)?;
    }
    Ok(())
}

/// A heading: Markdown's `#`s, or the text alone.
fn heading(
    out: &mut std::io::StdoutLock,
    markdown: bool,
    level: usize,
    text: &str,
) -> std::io::Result<()> {
    if markdown {
        writeln!(out, "{} {text}\n", "#".repeat(level))
    } else {
        writeln!(out, "{text}")
    }
}

fn print_snapshots(result: &Diff, top: usize, markdown: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    print_header(&mut out, (&result.a, &result.b), &result.notes, markdown)?;
    for d in &result.devices {
        print_device(&mut out, d, top, markdown)?;
    }
    Ok(())
}

/// One device pair: the summary, the categories, the call sites.
fn print_device(
    out: &mut std::io::StdoutLock,
    d: &DeviceDiff,
    top: usize,
    markdown: bool,
) -> Result<()> {
    heading(
        out,
        markdown,
        3,
        &format!("device {} (A) vs device {} (B)", d.device_a, d.device_b),
    )?;
    for note in &d.notes {
        writeln!(out, "note: {note}\n")?;
    }
    let rows: Vec<Vec<String>> = summary(d).into_iter().map(Vec::from).collect();
    print_table(out, &["", "A", "B", "Δ", "Δ %"], &rows, markdown)?;
    let categories: Vec<Vec<String>> = d
        .categories
        .iter()
        .filter(|c| c.a_bytes > 0 || c.b_bytes > 0)
        .map(|c| {
            vec![
                c.category.name().replace('_', " "),
                format_bytes(c.a_bytes as i64),
                format_bytes(c.b_bytes as i64),
                signed_bytes(c.delta_bytes),
            ]
        })
        .collect();
    if !categories.is_empty() {
        heading(out, markdown, 4, "at each peak, by category")?;
        print_table(out, &["category", "A", "B", "Δ"], &categories, markdown)?;
    }
    print_groups(out, d, top, markdown)?;
    let only = |side| {
        d.call_sites
            .iter()
            .filter(|c| c.only_in == Some(side))
            .count()
    };
    let shown = d.call_sites.len().min(top);
    heading(
        out,
        markdown,
        4,
        &format!(
            "call sites by |Δ at peak|: {shown} of {} ({} only in A, {} only in B)",
            d.call_sites.len(),
            only(Side::A),
            only(Side::B)
        ),
    )?;
    let rows = call_site_rows(d, top);
    print_table(
        out,
        &[
            "Δ at peak",
            "A at peak",
            "B at peak",
            "allocs",
            "requested",
            "call site",
        ],
        &rows,
        markdown,
    )?;
    if let Some(verdict) = verdict(d) {
        writeln!(out, "{verdict}\n")?;
    }
    let unattributed = d.b.unattributed_at_peak_bytes - d.a.unattributed_at_peak_bytes;
    if d.a.unattributed_at_peak_bytes != 0 || d.b.unattributed_at_peak_bytes != 0 {
        writeln!(
            out,
            "not in any block (the trace and the final segments disagree): A {}, B {}, Δ {}\n",
            format_bytes(d.a.unattributed_at_peak_bytes),
            format_bytes(d.b.unattributed_at_peak_bytes),
            signed_bytes(unattributed)
        )?;
    }
    Ok(())
}

/// The bytes at each peak by msMemScope's owner and by operator, where the files name them.
fn print_groups(
    out: &mut std::io::StdoutLock,
    d: &DeviceDiff,
    top: usize,
    markdown: bool,
) -> Result<()> {
    // Call sites that are operators alone (no Python stack recorded) already are this table.
    let sites_are_operators = d
        .call_sites
        .iter()
        .all(|c| c.stack.iter().all(|f| f.filename == "<operator>"));
    for (groups, what) in [(&d.owners, "owner"), (&d.operators, "operator")] {
        if groups.is_empty() || (what == "operator" && sites_are_operators) {
            continue;
        }
        let shown = groups.len().min(top);
        heading(
            out,
            markdown,
            4,
            &format!(
                "at each peak, by {what} (msMemScope): {shown} of {}",
                groups.len()
            ),
        )?;
        let rows: Vec<Vec<String>> = groups[..shown]
            .iter()
            .map(|g| {
                vec![
                    signed_bytes(g.delta_bytes),
                    format_bytes(g.a_bytes as i64),
                    format_bytes(g.b_bytes as i64),
                    g.name.clone(),
                ]
            })
            .collect();
        print_table(out, &["Δ at peak", "A", "B", what], &rows, markdown)?;
    }
    Ok(())
}

fn profiler(
    a: &Path,
    b: &Path,
    (rank_a, rank_b): (Option<u32>, Option<u32>),
    top: Option<usize>,
    format: Format,
) -> Result<()> {
    let run_a = memsight_core::profiler::open(&[a.to_path_buf()]).map_err(input)?;
    let run_b = memsight_core::profiler::open(&[b.to_path_buf()]).map_err(input)?;
    let (name_a, name_b) = (a.display().to_string(), b.display().to_string());
    let mut result =
        profiler_diff::diff((&name_a, &run_a), (&name_b, &run_b), rank_a, rank_b).map_err(input)?;
    if format == Format::Json {
        if let Some(top) = top {
            for r in &mut result.ranks {
                r.operators.truncate(top);
            }
        }
        return print_json(&result);
    }
    print_profiler(
        &result,
        top.unwrap_or(DEFAULT_TOP),
        format == Format::Markdown,
    )
}

fn print_profiler(result: &ProfilerDiff, top: usize, markdown: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    print_header(&mut out, (&result.a, &result.b), &result.notes, markdown)?;
    for r in &result.ranks {
        print_rank(&mut out, r, top, markdown)?;
    }
    Ok(())
}

/// One rank pair: the summary, the curve peaks, the operators.
fn print_rank(
    out: &mut std::io::StdoutLock,
    r: &profiler_diff::RankDiff,
    top: usize,
    markdown: bool,
) -> Result<()> {
    heading(
        out,
        markdown,
        3,
        &format!("{} (A) vs {} (B)", r.rank_a, r.rank_b),
    )?;
    let n = |v: u64| v as i64;
    let mut rows: Vec<Vec<String>> = vec![
        Vec::from(quantity(
            "operator peak",
            n(r.a.operator_peak_bytes),
            n(r.b.operator_peak_bytes),
            true,
        )),
        Vec::from(quantity(
            "operator rows",
            n(r.a.operator_rows),
            n(r.b.operator_rows),
            false,
        )),
    ];
    if let (Some(oa), Some(ob)) = (r.a.outside_allocator_bytes, r.b.outside_allocator_bytes) {
        rows.push(Vec::from(quantity(
            "outside the allocator",
            oa as i64,
            ob as i64,
            true,
        )));
    }
    print_table(out, &["", "A", "B", "Δ", "Δ %"], &rows, markdown)?;
    for (side, f) in [("A", &r.a), ("B", &r.b)] {
        if f.coarse_times {
            writeln!(
                out,
                "note: {side}'s memory_record.csv has rounded timestamps: its curves' peaks hold, \
                 their moments (and memory outside the allocator) do not\n"
            )?;
        }
    }
    let curves = curve_rows(r);
    if !curves.is_empty() {
        heading(out, markdown, 4, "curve peaks (memory_record.csv)")?;
        print_table(
            out,
            &[
                "component",
                "allocated A",
                "allocated B",
                "reserved A",
                "reserved B",
            ],
            &curves,
            markdown,
        )?;
    }
    let shown = r.operators.len().min(top);
    heading(
        out,
        markdown,
        4,
        &format!("operators by |Δ at peak|: {shown} of {}", r.operators.len()),
    )?;
    let rows = operator_rows(r, top);
    print_table(
        out,
        &[
            "Δ at peak",
            "A at peak",
            "B at peak",
            "count",
            "largest",
            "operator",
        ],
        &rows,
        markdown,
    )?;
    Ok(())
}

/// The call-site table's rows: the first `top` by |Δ at peak|.
fn call_site_rows(d: &DeviceDiff, top: usize) -> Vec<Vec<String>> {
    d.call_sites
        .iter()
        .take(top)
        .map(|c| {
            let tag = match (c.only_in, c.matched_by) {
                (Some(Side::A), _) => " [only in A]",
                (Some(Side::B), _) => " [only in B]",
                (None, diff::Matched::Exact) => "",
                (None, diff::Matched::FileFunction) => " [lines moved]",
                (None, diff::Matched::WithoutEntryPoint) => " [other entry point]",
                (None, diff::Matched::FileNames) => " [other folder]",
            };
            vec![
                signed_bytes(c.delta_at_peak_bytes),
                format_bytes(c.a.bytes_at_peak as i64),
                format_bytes(c.b.bytes_at_peak as i64),
                format!("{} → {}", c.a.allocs, c.b.allocs),
                format!(
                    "{} → {}",
                    format_bytes(c.a.bytes_requested as i64),
                    format_bytes(c.b.bytes_requested as i64)
                ),
                format!("{}{tag}", c.top_frame),
            ]
        })
        .collect()
}

/// The operator table's rows: the first `top` by |Δ at peak|.
fn operator_rows(r: &profiler_diff::RankDiff, top: usize) -> Vec<Vec<String>> {
    r.operators
        .iter()
        .take(top)
        .map(|o| {
            let tag = match o.only_in {
                Some(Side::A) => " [only in A]",
                Some(Side::B) => " [only in B]",
                None => "",
            };
            let name = if o.name.is_empty() {
                "(allocated before the capture)"
            } else {
                &o.name
            };
            vec![
                signed_bytes(o.delta_at_peak_bytes),
                format_bytes(o.a.bytes_at_peak as i64),
                format_bytes(o.b.bytes_at_peak as i64),
                format!("{} → {}", o.a.count, o.b.count),
                format!(
                    "{} → {}",
                    format_bytes(o.a.largest_bytes as i64),
                    format_bytes(o.b.largest_bytes as i64)
                ),
                format!("{name}{tag}"),
            ]
        })
        .collect()
}

/// Each component's curve peaks, A and B.
fn curve_rows(r: &profiler_diff::RankDiff) -> Vec<Vec<String>> {
    let bytes = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format_bytes(v as i64));
    r.curves
        .iter()
        .map(|c| {
            vec![
                c.component.clone(),
                bytes(c.a_peak_allocated_bytes),
                bytes(c.b_peak_allocated_bytes),
                bytes(c.a_peak_reserved_bytes),
                bytes(c.b_peak_reserved_bytes),
            ]
        })
        .collect()
}

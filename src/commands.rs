//! The subcommands: load, ask the core, print.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use memsight_core::r#gen::{self, GenOptions, Scenario};
use memsight_core::report::{StateReport, StatsReport};
use memsight_core::units::format_bytes;
use memsight_core::whatif::percent_change;
use memsight_core::{Loaded, load_bytes};
use memsight_ui::headless::{self, ScreenshotOptions};
use memsight_ui::{Source, View};

mod resources {
    include!(concat!(env!("OUT_DIR"), "/resources.rs"));
}

/// What the user gave is wrong: an option value, a file that cannot be read or is no snapshot or
/// profiler data. Exit status 2 (everything else that fails: 1).
#[derive(Debug)]
pub struct InputError(pub String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// An [`InputError`] from anything printable.
pub(crate) fn input(message: impl std::fmt::Display) -> anyhow::Error {
    InputError(message.to_string()).into()
}

/// Returns an [`InputError`] made like `format!`.
macro_rules! bail_input {
    ($($arg:tt)*) => {
        return Err($crate::commands::input(format!($($arg)*)))
    };
}
pub(crate) use bail_input;

/// Name of the bundled demo snapshot in `resources/`.
const DEMO_NAME: &str = "demo_snapshot.pickle.gz";

/// The bundled demo snapshot.
fn demo() -> Result<&'static [u8]> {
    resources::RESOURCES
        .iter()
        .find(|(name, _)| *name == DEMO_NAME)
        .map(|(_, bytes)| *bytes)
        .context("this build has no bundled demo snapshot; pass a FILE")
}

fn source(file: Option<&Path>) -> Result<Source> {
    Ok(match file {
        Some(path) => Source::Path(path.to_path_buf()),
        None => Source::Bytes {
            name: format!("<bundled {DEMO_NAME}>"),
            bytes: demo()?,
        },
    })
}

/// The window, on `files` (the bundled demo when none).
pub fn app(files: Vec<PathBuf>) -> Result<()> {
    let sources = if files.is_empty() {
        vec![source(None)?]
    } else {
        // Profiler folders and CSVs open together as one run, so their ranks share a time axis.
        let (profiler, snapshots): (Vec<PathBuf>, Vec<PathBuf>) = files
            .into_iter()
            .partition(|f| memsight_core::profiler::is_profiler_path(f));
        let mut sources: Vec<Source> = snapshots.into_iter().map(Source::Path).collect();
        if !profiler.is_empty() {
            sources.push(Source::Profiler(profiler));
        }
        sources
    };
    memsight_ui::run_app(sources).map_err(anyhow::Error::msg)
}

pub fn screenshot(
    (file, other): (Option<&Path>, Option<&Path>),
    output: &Path,
    view: &str,
    device: Option<u32>,
    (width, height): (u32, u32),
    (select_event, event): (Option<u32>, Option<u32>),
) -> Result<()> {
    let view = match view {
        "app" => View::App,
        "timeline" => View::Timeline,
        "pool" => View::Pool,
        "diff" => View::Diff,
        other => bail_input!("--view must be `app`, `timeline`, `pool` or `diff`, not `{other}`"),
    };
    match (view, file, other) {
        (View::Diff, Some(_), Some(_)) => {}
        (View::Diff, _, _) => bail_input!(
            "--view diff needs two snapshots: memsight screenshot --view diff A B -o FILE"
        ),
        (_, _, Some(b)) => bail_input!("a second file ({}) is only for --view diff", b.display()),
        _ => {}
    }
    if !(64..=8192).contains(&width) || !(64..=8192).contains(&height) {
        bail_input!("--width and --height must be between 64 and 8192 pixels");
    }
    // Checked before any work: a wrong name, or an output that must not be written (one of the
    // inputs, a read-only file, a folder), fails at once, not after rendering.
    memsight_ui::image_kind(output).map_err(input)?;
    let inputs: Vec<&Path> = [file, other].into_iter().flatten().collect();
    check_output(output, &inputs)?;
    let options = ScreenshotOptions {
        width: width as f32,
        height: height as f32,
        device,
        select_event,
        view,
        event,
    };
    let app = match (view, other) {
        (View::Diff, Some(b)) => {
            headless::prepared_compare(&source(file)?, &source(Some(b))?, &options)
                .map_err(input)?
        }
        _ => headless::prepared_app(&source(file)?, &options).map_err(input)?,
    };
    let image =
        headless::render(app, &options).map_err(|e| anyhow::anyhow!("rendering failed: {e}"))?;
    // Written whole or not at all: a temporary file renamed into place.
    memsight_ui::write_image(&image, output, &inputs)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", output.display()))?;
    eprintln!(
        "wrote {} ({}x{})",
        output.display(),
        image.width(),
        image.height()
    );
    Ok(())
}

pub(crate) fn open(file: Option<&Path>) -> Result<Loaded> {
    let snapshot = if let Some(path) = file {
        memsight_core::load_path(path, None).map_err(input)?
    } else {
        load_bytes(demo()?, &PathBuf::from(format!("<bundled {DEMO_NAME}>"))).map_err(input)?
    };
    Ok(Loaded::new(snapshot))
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    let mut out = std::io::stdout().lock();
    // As an io::Error, so a closed pipe is recognised as one.
    serde_json::to_writer_pretty(&mut out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

pub fn stats(file: Option<&Path>, json: bool) -> Result<()> {
    if let Some(run) = file.and_then(memsight_core::run::as_run) {
        return crate::run::stats(&run, json);
    }
    // Profiler data is read as `analyze` and the window read it.
    if let Some(path) = file.filter(|f| memsight_core::profiler::is_profiler_path(f)) {
        return profiler_stats(path, json);
    }
    if let Some(path) = file.filter(|f| memsight_core::memscope::compare::is_compare_path(f)) {
        return memscope_compare(path, json);
    }
    let loaded = open(file)?;
    let report = StatsReport::new(&loaded);
    if json {
        return print_json(&report);
    }
    let mut out = std::io::stdout().lock();
    if report.devices.is_empty() {
        writeln!(out, "no device has events or segments")?;
    }
    for d in &report.devices {
        writeln!(
            out,
            "device {}: {} events; at the end {}, {}, {}",
            d.device,
            d.trace_events,
            counted(d.segments, "segment"),
            counted(d.live_blocks, "live block"),
            counted(d.free_gaps, "free gap")
        )?;
        let actions: Vec<String> = d.actions.iter().map(|(a, n)| format!("{a} {n}")).collect();
        if !actions.is_empty() {
            writeln!(out, "  actions   {}", actions.join(", "))?;
        }
        for (what, final_bytes, peak) in [
            ("reserved ", d.reserved_bytes_final, d.peak_reserved_bytes),
            ("allocated", d.allocated_bytes_final, d.peak_allocated_bytes),
            ("active   ", d.active_bytes_final, d.peak_active_bytes),
        ] {
            writeln!(
                out,
                "  {what} final {:>10}   peak {:>10}",
                format_bytes(final_bytes),
                format_bytes(peak)
            )?;
        }
        match (d.time_span_us, d.has_time) {
            (Some(span), _) => writeln!(out, "  time span {:.3} s", span as f64 / 1e6)?,
            (None, true) => writeln!(
                out,
                "  time span n/a: the times contradict themselves (see the warnings)"
            )?,
            (None, false) => writeln!(
                out,
                "  no times in this trace (event index is the time axis)"
            )?,
        }
        if !d.actions.is_empty() {
            writeln!(out, "  allocator {}", d.allocator.describe())?;
        }
        if let Some(m) = &d.device_memory_fullest {
            writeln!(
                out,
                "  device memory (measured {} by msMemScope): at the fullest {} used of {}; the \
                 pool reserved {} of it, {} outside the allocator (CANN, HCCL, other processes)",
                counted(d.device_memory_samples, "time"),
                format_bytes(m.sample.used_bytes() as i64),
                format_bytes(m.sample.total_bytes as i64),
                format_bytes(m.pool_reserved_bytes as i64),
                format_bytes(m.outside_pool_bytes as i64)
            )?;
        }
        if let Some(a) = &d.inefficient_flags_agreement {
            let counts = |c: &memsight_core::memscope::inefficient::FlagCounts| {
                format!(
                    "{} both, {} msMemScope only, {} memsight only",
                    c.both, c.recorded_only, c.computed_only
                )
            };
            writeln!(
                out,
                "  inefficient flags: memsight's agree with msMemScope's on {} of {} blocks \
                 (early allocation: {}; late deallocation: {}; temporary idleness: {})",
                a.same,
                a.blocks,
                counts(&a.early_allocation),
                counts(&a.late_deallocation),
                counts(&a.temporary_idleness)
            )?;
        }
    }
    if !report.warnings.is_empty() {
        writeln!(out, "warnings:")?;
        for w in &report.warnings {
            writeln!(out, "  - {w}")?;
        }
    }
    Ok(())
}

/// `stats` on msMemScope's `memory_compare_*.csv`: its operators by |difference|, largest first.
fn memscope_compare(path: &Path, json: bool) -> Result<()> {
    let mut rows = memsight_core::memscope::compare::read(path).map_err(input)?;
    rows.sort_by_key(|r| (std::cmp::Reverse(r.diff_bytes.unsigned_abs()), r.line));
    if json {
        #[derive(serde::Serialize)]
        struct Row<'a> {
            event: &'a str,
            name: &'a str,
            device: &'a str,
            base_bytes: Option<i64>,
            compare_bytes: Option<i64>,
            diff_bytes: i64,
        }
        let rows: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                event: &r.event,
                name: &r.name,
                device: &r.device,
                base_bytes: r.base_bytes,
                compare_bytes: r.compare_bytes,
                diff_bytes: r.diff_bytes,
            })
            .collect();
        return print_json(&rows);
    }
    let mut out = std::io::stdout().lock();
    let total: i64 = rows.iter().map(|r| r.diff_bytes).sum();
    writeln!(
        out,
        "msMemScope's comparison: {}, the difference adds up to {}{}",
        counted(rows.len(), "operator"),
        if total > 0 { "+" } else { "" },
        format_bytes(total)
    )?;
    let shown = |b: Option<i64>| b.map_or_else(|| "n/a".to_string(), format_bytes);
    writeln!(
        out,
        "  {:>12}  {:>10}  {:>10}  device  operator",
        "Δ", "base", "compare"
    )?;
    for r in rows.iter().take(30) {
        writeln!(
            out,
            "  {:>12}  {:>10}  {:>10}  {:>6}  {}{}",
            format!(
                "{}{}",
                if r.diff_bytes > 0 { "+" } else { "" },
                format_bytes(r.diff_bytes)
            ),
            shown(r.base_bytes),
            shown(r.compare_bytes),
            r.device,
            r.name,
            match (r.base_bytes, r.compare_bytes) {
                (None, Some(_)) => " [only in compare]",
                (Some(_), None) => " [only in base]",
                _ => "",
            }
        )?;
    }
    if rows.len() > 30 {
        writeln!(out, "  … {} more (--json lists all)", rows.len() - 30)?;
    }
    Ok(())
}

/// `stats` on profiler data: per rank, the tables read, and per component its samples, peaks and
/// time span.
fn profiler_stats(path: &Path, json: bool) -> Result<()> {
    #[derive(serde::Serialize)]
    struct ComponentStats<'a> {
        component: &'a str,
        samples: usize,
        peak_reserved_bytes: Option<f64>,
        peak_allocated_bytes: Option<f64>,
    }
    #[derive(serde::Serialize)]
    struct RankStats<'a> {
        rank: &'a str,
        device: Option<&'a str>,
        files: Vec<String>,
        components: Vec<ComponentStats<'a>>,
        operator_rows: usize,
        time_span_us: Option<f64>,
        warnings: Vec<String>,
    }
    let run = memsight_core::profiler::open(&[path.to_path_buf()]).map_err(input)?;
    let ranks: Vec<RankStats> = run
        .ranks
        .iter()
        .map(|rank| RankStats {
            rank: &rank.name,
            device: rank.device.as_deref(),
            files: rank.files.iter().map(|f| f.display().to_string()).collect(),
            components: rank
                .curves
                .iter()
                .map(|c| ComponentStats {
                    component: &c.component,
                    samples: c.len(),
                    peak_reserved_bytes: c.peak_reserved().map(|(v, _)| v),
                    peak_allocated_bytes: c.peak_allocated().map(|(v, _)| v),
                })
                .collect(),
            operator_rows: rank.operators.len(),
            time_span_us: rank.time_span_us().map(|(a, b)| b - a),
            warnings: rank.warnings.iter().map(ToString::to_string).collect(),
        })
        .collect();
    if json {
        return print_json(&ranks);
    }
    let mut out = std::io::stdout().lock();
    let bytes = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format_bytes(v as i64));
    for rank in &ranks {
        writeln!(
            out,
            "rank {}{}: {}, {}",
            rank.rank,
            rank.device
                .map_or_else(String::new, |d| format!(" (device {d})")),
            counted(rank.files.len(), "profiler file"),
            counted(rank.operator_rows, "operator row")
        )?;
        for c in &rank.components {
            writeln!(
                out,
                "  {:<12} {:>8} samples   peak reserved {:>10}   peak allocated {:>10}",
                c.component,
                c.samples,
                bytes(c.peak_reserved_bytes),
                bytes(c.peak_allocated_bytes)
            )?;
        }
        if let Some(span) = rank.time_span_us {
            writeln!(out, "  time span {:.3} s", span / 1e6)?;
        }
        for w in &rank.warnings {
            writeln!(out, "  warning: {w}")?;
        }
    }
    Ok(())
}

pub fn state(
    file: Option<&Path>,
    device: Option<u32>,
    event: Option<i64>,
    json: bool,
) -> Result<()> {
    let loaded = open(file)?;
    let ordinal = match device {
        Some(d) => d,
        None => loaded
            .snapshot
            .busiest_device()
            .map(|d| d.ordinal)
            .ok_or_else(|| {
                input(format!(
                    "{} has no device with events or segments",
                    file.map_or_else(
                        || format!("<bundled {DEMO_NAME}>"),
                        |f| f.display().to_string()
                    )
                ))
            })?,
    };
    let Some((dev, replay)) = loaded.replay(ordinal) else {
        let known: Vec<String> = loaded
            .snapshot
            .devices
            .iter()
            .map(|d| d.ordinal.to_string())
            .collect();
        bail_input!(
            "device {ordinal} has no events or segments (devices: {})",
            known.join(", ")
        );
    };
    let count = replay.event_count();
    let event = match event {
        None => count.checked_sub(1).map(|n| n as u32),
        Some(-1) => None,
        Some(n) if n >= 0 && (n as usize) < count => Some(n as u32),
        Some(n) => bail_input!(
            "event {n} is out of range: device {ordinal} has {count} events (use -1 for before the first)"
        ),
    };
    let categories = memsight_core::category::classify(&loaded.snapshot, dev, replay);
    let report = StateReport::new(
        &loaded.snapshot,
        ordinal,
        &replay.pool_after(dev, event),
        &categories.of_lifetime,
    );
    if json {
        return print_json(&report);
    }
    let mut out = std::io::stdout().lock();
    let when = event.map_or_else(
        || "before the first event".to_string(),
        |e| format!("after event {e}"),
    );
    writeln!(
        out,
        "device {ordinal} {when}: reserved {}, allocated {}, active {}, {} segments, {} live blocks",
        format_bytes(report.reserved_bytes),
        format_bytes(report.allocated_bytes),
        format_bytes(report.active_bytes),
        report.segments.len(),
        report.live_blocks()
    )?;
    for s in &report.segments {
        writeln!(
            out,
            "  segment 0x{:x} {:>10} stream {}{} {}, {} (largest {})",
            s.address,
            format_bytes(s.total_size as i64),
            s.stream,
            if s.is_expandable { " expandable" } else { "" },
            counted(s.blocks.len() - s.free_gaps, "live block"),
            counted(s.free_gaps, "free gap"),
            format_bytes(s.largest_gap_bytes as i64)
        )?;
    }
    Ok(())
}

/// "1 live block", "3 live blocks".
fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The readable report: text, or Markdown (the same lines with bullets and bold).
fn print_findings(report: &memsight_core::report::AnalysisReport, markdown: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    for file in &report.files {
        if markdown {
            writeln!(out, "## {}\n", file.file)?;
        } else {
            writeln!(out, "{}", file.file)?;
        }
        if file.findings.is_empty() {
            writeln!(out, "{}no findings", if markdown { "" } else { "  " })?;
        }
        for f in &file.findings {
            // "at forward (model.py:22)"; a C++ frame is an operator: "in at::_ops::mm".
            let site = f.top_frame.as_ref().map_or_else(String::new, |t| {
                if t.contains("::") && !t.contains(" (") {
                    format!(" in {t}")
                } else {
                    format!(" at {t}")
                }
            });
            // The same lines in both formats; Markdown only adds a bullet and bold.
            let (open, close, indent) = if markdown {
                ("- **", "**", "  ")
            } else {
                ("  [", "]", "    ")
            };
            let span = |what: &str| {
                if f.events[0] == f.events[1] {
                    format!("{what} {}", f.events[0])
                } else {
                    format!("{what}s {}–{}", f.events[0], f.events[1])
                }
            };
            // A finding with no event of its own (a file without a trace) names the device alone.
            let device = memsight_core::detect::devices_words(f.device, &f.devices);
            let place = match (&f.rank, &f.source_lines) {
                (Some(rank), Some(lines)) => format!("{rank} ({device}), {}", lines.words()),
                (Some(rank), None) => format!("{rank} ({device})"),
                (None, _) if f.events == [0, 0] && f.focus_event.is_none() => device,
                (None, _) => format!("{device}, {}", span("event")),
            };
            writeln!(
                out,
                "{open}{:?}{close} {} — {place}{site}\n{indent}{}\n{indent}→ {}",
                f.severity, f.title, f.summary, f.suggestion
            )?;
            for line in &f.evidence {
                writeln!(out, "{indent}· {line}")?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// `--fail-on`'s severity.
pub(crate) fn severity(fail_on: Option<&str>) -> Result<Option<memsight_core::detect::Severity>> {
    use memsight_core::detect::Severity;
    Ok(match fail_on {
        None => None,
        Some("warning") => Some(Severity::Warning),
        Some("error") => Some(Severity::Error),
        Some(other) => bail_input!("--fail-on must be `warning` or `error`, not `{other}`"),
    })
}

pub fn analyze(files: &[PathBuf], json: bool, markdown: bool, fail_on: Option<&str>) -> Result<()> {
    use memsight_core::detect::analyze as detect_all;
    use memsight_core::report::{AnalysisReport, FileFindings};

    if let [folder] = files
        && let Some(run) = memsight_core::run::as_run(folder)
    {
        return crate::run::analyze(&run, json, markdown, fail_on);
    }

    let threshold = severity(fail_on)?;
    let targets: Vec<Option<&Path>> = if files.is_empty() {
        vec![None]
    } else {
        files.iter().map(|f| Some(f.as_path())).collect()
    };
    let mut report = AnalysisReport { files: Vec::new() };
    // Profiler folders and CSVs are one run, so ranks are compared with each other.
    let (profiler_paths, targets): (Vec<Option<&Path>>, Vec<Option<&Path>>) = targets
        .into_iter()
        .partition(|f| f.is_some_and(memsight_core::profiler::is_profiler_path));
    if !profiler_paths.is_empty() {
        let paths: Vec<PathBuf> = profiler_paths
            .iter()
            .flatten()
            .map(|p| p.to_path_buf())
            .collect();
        let run = memsight_core::profiler::open(&paths).map_err(input)?;
        let name = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        report.files.push(FileFindings::from_profiler(
            name,
            &memsight_core::profiler::detect::analyze(&run),
        ));
    }
    for file in targets {
        let loaded = open(file)?;
        let name = file.map_or_else(
            || format!("<bundled {DEMO_NAME}>"),
            |f| f.display().to_string(),
        );
        report
            .files
            .push(FileFindings::new(name, &loaded, &detect_all(&loaded)));
    }
    if json {
        print_json(&report)?;
    } else {
        print_findings(&report, markdown)?;
    }
    if let Some(threshold) = threshold {
        let failing = report
            .files
            .iter()
            .flat_map(|f| &f.findings)
            .filter(|f| f.severity >= threshold)
            .count();
        if failing > 0 {
            anyhow::bail!(
                "{failing} finding(s) at or above {}",
                fail_on.unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// One device's what-if: the settings replayed, what the file recorded, what the model predicts.
#[derive(serde::Serialize)]
struct WhatIfDevice {
    device: u32,
    settings: memsight_core::whatif::Settings,
    /// Where the capacity comes from: "--capacity", what the file shows, or nothing known.
    capacity_source: Option<String>,
    /// The allocator the replay follows, and why.
    allocator: memsight_core::whatif::AllocatorKind,
    /// These are the settings the run starts from (the file's, with any `--set`).
    base: bool,
    recorded: memsight_core::whatif::Outcome,
    predicted: memsight_core::whatif::Outcome,
}

/// A count the model may not know (`None`: the capacity is unknown), as text.
fn known(count: Option<u64>) -> String {
    count.map_or_else(|| "n/a".to_string(), |c| c.to_string())
}

/// `whatif` as text: per device, recorded against predicted.
fn print_whatif(out: &mut impl std::io::Write, devices: &[WhatIfDevice]) -> Result<()> {
    for d in devices {
        writeln!(out, "device {}: {}", d.device, d.settings.describe())?;
        writeln!(out, "  replayed as {}", d.allocator.describe())?;
        writeln!(
            out,
            "  capacity: {}",
            d.settings.capacity_bytes.map_or_else(
                || "unknown (the file shows none: no oom entry, no stall that bounds it; --capacity BYTES): OOMs and stalls are not predicted".to_string(),
                |c| format!(
                    "{} ({})",
                    format_bytes(c as i64),
                    d.capacity_source.as_deref().unwrap_or("")
                )
            )
        )?;
        writeln!(out, "  {:<24} {:>12} {:>28}", "", "recorded", "predicted")?;
        let (r, p) = (&d.recorded, &d.predicted);
        let (lines, held_before) = memsight_core::whatif::compared_lines(r, p);
        for line in lines {
            writeln!(
                out,
                "  {:<24} {:>12} {:>28}",
                line.what,
                line.recorded,
                line.predicted_with_change()
            )?;
        }
        if let Some(note) = held_before {
            writeln!(out, "  {note}")?;
        }
        match p.first_divergence_event {
            None => writeln!(out, "  reserved bytes follow the file at every alloc")?,
            Some(e) => writeln!(
                out,
                "  reserved bytes first differ from the file after event {e}"
            )?,
        }
    }
    Ok(())
}

/// `whatif --sweep` as text: per device, one line per setting tried, best first.
fn print_sweep(out: &mut impl std::io::Write, devices: &[WhatIfDevice]) -> Result<()> {
    let mut last = None;
    let width = devices
        .iter()
        .map(|d| d.settings.describe().chars().count() + 2)
        .max()
        .unwrap_or(0)
        .max("settings (best first)".len());
    for d in devices {
        if last != Some(d.device) {
            let r = &d.recorded;
            writeln!(
                out,
                "device {}: recorded peak reserved {}, {} segment allocs / maps, {} frees, {} stalls, {} OOMs; capacity {}",
                d.device,
                format_bytes(r.peak_reserved_bytes as i64),
                r.segment_allocs,
                r.segment_frees,
                known(r.stalls),
                known(r.ooms),
                d.settings
                    .capacity_bytes
                    .map_or_else(|| "unknown".to_string(), |c| format_bytes(c as i64))
            )?;
            writeln!(
                out,
                "  {:<width$} {:>10} {:>8} {:>13} {:>10} {:>7} {:>6} {:>6} {:>5} {:>10}",
                "settings (best first)",
                "peak",
                "Δ",
                "at peak alloc",
                "mean",
                "allocs",
                "frees",
                "stalls",
                "ooms",
                "unused"
            )?;
            last = Some(d.device);
        }
        let (r, p) = (&d.recorded, &d.predicted);
        let name = if d.base {
            format!("{} *", d.settings.describe())
        } else {
            d.settings.describe()
        };
        writeln!(
            out,
            "  {:<width$} {:>10} {:>8} {:>13} {:>10} {:>7} {:>6} {:>6} {:>5} {:>10}",
            name,
            format_bytes(p.peak_reserved_bytes as i64),
            if r.peak_held_before_trace() && p.peak_held_before_trace() {
                "before".to_string()
            } else {
                percent_change(p.peak_reserved_bytes, r.peak_reserved_bytes)
                    .map_or_else(|| "—".to_string(), |change| format!("{change:+.1}%"))
            },
            format_bytes(p.reserved_at_peak_allocated_bytes as i64),
            format_bytes(p.mean_reserved_bytes as i64),
            p.segment_allocs,
            p.segment_frees,
            known(p.stalls),
            known(p.ooms),
            format_bytes(p.peak_fragmentation_bytes as i64)
        )?;
    }
    writeln!(
        out,
        "(*: the settings the sweep starts from, the file's with any --set, replayed; peak: predicted peak reserved, \
         Δ against the recorded one (before: the pool held that before the trace, and no setting changes it); \
         at peak alloc: reserved when the program's allocated bytes peaked; mean: reserved averaged over the \
         trace's allocs; unused: reserved minus allocated at the peak; n/a: the capacity is unknown, \
         give --capacity BYTES)"
    )?;
    if devices
        .iter()
        .any(|d| d.settings.garbage_collection_threshold.is_some())
    {
        writeln!(
            out,
            "(garbage_collection_threshold acts only under a memory fraction below 1, \
             set_per_process_memory_fraction: the replay takes its cap to be the capacity)"
        )?;
    }
    Ok(())
}

/// `whatif`'s options that can be refused before the file is read.
fn check_whatif_options(
    file: Option<&Path>,
    curve: Option<&Path>,
    sweep: bool,
    capacity: Option<u64>,
) -> Result<()> {
    if let Some(path) = file.filter(|f| memsight_core::profiler::is_profiler_path(f)) {
        bail_input!(
            "{} is torch_npu profiler data: its memory curves have no allocator trace to replay \
             (what if replays the requests of a memory snapshot; `memsight analyze` and \
             `memsight stats` read profiler data)",
            path.display()
        );
    }
    if curve.is_some() && sweep {
        bail_input!("--curve writes one setting's curve: leave out --sweep, or --curve");
    }
    if let Some(path) = curve {
        check_output(path, &file.into_iter().collect::<Vec<_>>())?;
    }
    if let Some(bytes) = capacity
        && !(1..=memsight_core::units::MAX_PLAUSIBLE_BYTES).contains(&bytes)
    {
        bail_input!(
            "--capacity must be between 1 byte and {} (1 PiB), not {bytes}",
            memsight_core::units::MAX_PLAUSIBLE_BYTES
        );
    }
    Ok(())
}

pub fn whatif(
    file: Option<&Path>,
    device: Option<u32>,
    set: &[String],
    (no_empty_cache, capacity, sweep): (bool, Option<u64>, bool),
    (curve, json): (Option<&Path>, bool),
) -> Result<()> {
    use memsight_core::whatif::{self, Change, Recording, Settings};
    check_whatif_options(file, curve, sweep, capacity)?;
    // Settings are checked before the file is read: a typo costs nothing.
    let mut changes = Vec::new();
    for key_value in set {
        changes.extend(Change::parse_all(key_value).map_err(input)?);
    }
    let loaded = open(file)?;
    let (mut devices, mut notes, mut curves) = (Vec::new(), Vec::new(), Vec::new());
    for (i, dev) in loaded.snapshot.devices.iter().enumerate() {
        if dev.trace.is_empty() || device.is_some_and(|d| d != dev.ordinal) {
            continue;
        }
        let recording = Recording::of(&loaded, i);
        let mut settings = Settings::recorded(&recording);
        for change in &changes {
            settings.apply(change);
        }
        settings.skip_releases |= no_empty_cache;
        if capacity.is_some() {
            settings.capacity_bytes = capacity;
        }
        if let Some(why) = settings.refused_by(&recording) {
            bail_input!("device {}: {why}", dev.ordinal);
        }
        let recorded = whatif::recorded(&recording);
        let allocator = whatif::allocator_of(&recording);
        let capacity_source = if capacity.is_some() {
            Some("--capacity".to_string())
        } else {
            whatif::capacity_from_file(&recording).map(|c| c.source)
        };
        let before = recording.replay.totals_after(None).reserved_bytes;
        if before > 0 && !json {
            notes.push(format!(
                "device {}: {} was reserved before the trace's first event; the replay keeps that \
                 pool as the recorded settings made it",
                dev.ordinal,
                format_bytes(before)
            ));
        }
        let tried = if sweep {
            whatif::sweep(&recording, &settings)
        } else if curve.is_some() {
            let prediction = whatif::predict_curve(&recording, &settings);
            curves.push((recording, prediction.reserved_bytes));
            vec![(settings, prediction.outcome)]
        } else {
            vec![(settings, whatif::predict(&recording, &settings))]
        };
        for (tried_settings, predicted) in tried {
            devices.push(WhatIfDevice {
                base: tried_settings == settings,
                device: dev.ordinal,
                settings: tried_settings,
                capacity_source: capacity_source.clone(),
                allocator: allocator.clone(),
                recorded,
                predicted,
            });
        }
    }
    if devices.is_empty() {
        bail_input!(
            "no device {}of {} has a trace to replay",
            device.map_or_else(String::new, |d| format!("{d} ")),
            file.map_or_else(
                || format!("<bundled {DEMO_NAME}>"),
                |f| f.display().to_string()
            )
        );
    }
    if let Some(path) = curve {
        write_curves(path, file, &curves)?;
    }
    if json {
        #[derive(serde::Serialize)]
        struct Report<'a> {
            file: String,
            devices: &'a [WhatIfDevice],
        }
        let file = file.map_or_else(
            || format!("<bundled {DEMO_NAME}>"),
            |f| f.display().to_string(),
        );
        return print_json(&Report {
            file,
            devices: &devices,
        });
    }
    let mut out = std::io::stdout().lock();
    if sweep {
        print_sweep(&mut out, &devices)?;
    } else {
        print_whatif(&mut out, &devices)?;
    }
    for note in notes {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

/// `whatif --curve`: per device and event, the action and the recorded and predicted reserved
/// bytes, as CSV, written whole or not at all.
fn write_curves(
    path: &Path,
    input: Option<&Path>,
    curves: &[(memsight_core::whatif::Recording, Vec<u64>)],
) -> Result<()> {
    let inputs: Vec<&Path> = input.into_iter().collect();
    memsight_core::output::write_whole(path, &inputs, |tmp| {
        let file = std::fs::File::create(tmp).map_err(|e| e.to_string())?;
        let mut out = std::io::BufWriter::new(file);
        let mut lines = || -> std::io::Result<()> {
            writeln!(
                out,
                "device,event,action,recorded_reserved_bytes,predicted_reserved_bytes"
            )?;
            for (recording, predicted) in curves {
                let recorded = recording.replay.reserved_bytes();
                let actions = &recording.device.trace.action;
                for (i, p) in predicted.iter().enumerate() {
                    writeln!(
                        out,
                        "{},{i},{},{},{p}",
                        recording.device.ordinal,
                        actions[i].name(&recording.snapshot.strings),
                        recorded.get(i).copied().unwrap_or(0)
                    )?;
                }
            }
            out.flush()
        };
        lines().map_err(|e| e.to_string())
    })
    .map_err(output_error)
}

/// Refuses, before any work, an output that must not be written: one of `inputs` (through links
/// and `.gz` alike: the same file), a read-only file, a folder, a disk. Exit status 2.
fn check_output(output: &Path, inputs: &[&Path]) -> Result<()> {
    memsight_core::output::check_output(output, inputs).map_err(output_error)
}

/// A refused output is the user's to fix (exit 2); a failed write is not (exit 1).
fn output_error(error: memsight_core::output::OutputError) -> anyhow::Error {
    if error.is_refusal() {
        input(error)
    } else {
        error.into()
    }
}

pub fn generate(
    scenario: Option<&str>,
    (events, seed, protocol, batch): (usize, u64, u8, u64),
    output: &Path,
) -> Result<()> {
    let Some(scenario) = scenario else {
        bail_input!(
            "a snapshot needs --scenario (steady, leak, fragmentation, stall, oom, npu, expandable, transformer, transformer-leak)"
        );
    };
    let scenario: Scenario = scenario.parse().map_err(input)?;
    if !(4..=5).contains(&protocol) {
        bail_input!("--protocol must be 4 or 5, not {protocol}");
    }
    if events == 0 {
        bail_input!("--events must be at least 1");
    }
    if events > r#gen::MAX_EVENTS {
        bail_input!(
            "--events must be at most {} (the generator holds the whole trace in memory: about {} \
             bytes an event)",
            r#gen::MAX_EVENTS,
            r#gen::BYTES_PER_EVENT
        );
    }
    if !(1..=r#gen::transformer::MAX_BATCH).contains(&batch) {
        bail_input!(
            "--batch must be from 1 to {} sequences, not {batch}",
            r#gen::transformer::MAX_BATCH
        );
    }
    check_output(output, &[])?;
    let generated = r#gen::generate(&GenOptions {
        scenario,
        events,
        seed,
        protocol,
        batch,
    });
    let truth = generated.write_files(output).map_err(output_error)?;
    eprintln!(
        "wrote {} ({} events, {} steps) {}",
        output.display(),
        generated.allocator.trace.len(),
        generated.truth.steps,
        truth.map_or_else(
            || "and no ground truth: the output is not a regular file, with no folder beside it \
                to hold one"
                .to_string(),
            |t| format!("and {}", t.display())
        )
    );
    Ok(())
}

/// `gen --format memscope[-db]`: an msMemScope recording under the folder `output`.
pub fn generate_memscope(
    scenario: Option<&str>,
    format: &str,
    (events, devices, seed): (usize, u32, u64),
    output: &Path,
) -> Result<()> {
    use memsight_core::r#gen::memscope::{MemscopeOptions, write};
    if let Some(s) = scenario {
        bail_input!("--scenario {s} is for snapshots; an msMemScope recording has one workload");
    }
    if !(1..=64).contains(&devices) {
        bail_input!("--devices must be between 1 and 64, not {devices}");
    }
    if events > r#gen::MAX_EVENTS {
        bail_input!("--events must be at most {}", r#gen::MAX_EVENTS);
    }
    if output.exists() && !output.is_dir() {
        bail_input!(
            "{} is a file: an msMemScope recording is a folder (give a new or empty folder)",
            output.display()
        );
    }
    // Written into a folder with files, the recording would mix with them (and a recording
    // there would load twice).
    if std::fs::read_dir(output).is_ok_and(|mut entries| entries.next().is_some()) {
        bail_input!(
            "{} is not empty: give a new or empty folder for the recording",
            output.display()
        );
    }
    let truth = write(
        output,
        &MemscopeOptions {
            events,
            devices,
            seed,
            db: format == "memscope-db",
        },
    )
    .map_err(output_error)?;
    let rows: usize = truth.devices.iter().map(|d| d.rows).sum();
    eprintln!(
        "wrote {} ({} devices, {rows} rows, {} steps each) and {}",
        output.display(),
        truth.devices.len(),
        truth.devices.first().map_or(0, |d| d.steps),
        output.join("memsight-truth.json").display()
    );
    Ok(())
}

/// `gen --run`: a run folder in torchtitan's layout, with its truth.
pub fn generate_run(
    (ranks, iterations, events, seed): (u32, u32, usize, u64),
    output: &Path,
) -> Result<()> {
    if ranks < 3 {
        bail_input!(
            "--ranks must be at least 3 (the heavy, leaking and out-of-memory ranks are three), not {ranks}"
        );
    }
    if !(1..=1_000).contains(&iterations) {
        bail_input!("--iterations must be from 1 to 1000, not {iterations}");
    }
    if !(1..=r#gen::MAX_EVENTS).contains(&events) {
        bail_input!("--events must be from 1 to {}", r#gen::MAX_EVENTS);
    }
    if output.is_file() {
        bail_input!(
            "{} is a file: a run is written into a folder",
            output.display()
        );
    }
    let truth = r#gen::run::write_run(
        output,
        &r#gen::run::RunGenOptions {
            ranks,
            iterations,
            events,
            seed,
        },
    )
    .with_context(|| format!("cannot write the run into {}", output.display()))?;
    eprintln!(
        "wrote {} files into {} and {}",
        truth.files,
        output.display(),
        output.join("memsight-run-truth.json").display()
    );
    Ok(())
}

#[cfg(test)]
mod percent_tests {
    use super::percent_change;

    /// Against a recorded peak of 0 B no percentage is printed (it once read
    /// "+214748364800.0 %").
    #[test]
    fn no_percentage_against_nothing() {
        assert_eq!(percent_change(2 << 30, 0), None);
        assert_eq!(percent_change(150, 100), Some(50.0));
        assert_eq!(percent_change(50, 100), Some(-50.0));
    }
}

//! The run commands: `stats RUN`, `analyze RUN` and `diff RUN --device-a R1 --device-b R2` on a
//! folder of snapshot files, one per rank and dumped iteration.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use memsight_core::detect::Severity;
use memsight_core::run::doctor::{self, RunFinding};
use memsight_core::run::summary::{FileSummary, RunProgress, summarize};
use memsight_core::run::{Run, dump_words};
use memsight_core::units::format_bytes;

use crate::commands::{bail_input, print_json};

/// Every file of the run read into its summary, with a count on the terminal while it reads.
fn summaries(run: &Run) -> Vec<FileSummary> {
    let path = &run.root;
    let progress = RunProgress::default();
    let total = run.files.len();
    let show = std::io::stderr().is_terminal() && total > 1;
    let summaries = std::thread::scope(|scope| {
        let job = scope.spawn(|| summarize(run, Some(&progress)));
        while show && !job.is_finished() {
            eprint!(
                "\rreading {}: {} of {total} files",
                path.display(),
                progress.files_done.load(Ordering::Relaxed)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        if show {
            eprint!("\r\x1b[K");
        }
        job.join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    summaries.expect("never cancelled from the command line")
}

/// `stats RUN`: one row per file (rank, iteration, peaks, OOM).
pub fn stats(run: &Run, json: bool) -> Result<()> {
    let summaries = summaries(run);
    if json {
        #[derive(serde::Serialize)]
        struct RunStats<'a> {
            root: &'a Path,
            ranks: Vec<u32>,
            files: &'a [FileSummary],
        }
        return print_json(&RunStats {
            root: &run.root,
            ranks: run.ranks(),
            files: &summaries,
        });
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: {} files, {} ranks, {} dumps",
        run.root.display(),
        run.files.len(),
        run.ranks().len(),
        run.dumps().len()
    )?;
    writeln!(
        out,
        "{:>6} {:>10} {:>5} {:>14} {:>14} {:>10} {:>4}  file",
        "rank", "iteration", "exit", "peak alloc", "peak reserved", "events", "oom"
    )?;
    for s in &summaries {
        let dash = || "-".to_string();
        writeln!(
            out,
            "{:>6} {:>10} {:>5} {:>14} {:>14} {:>10} {:>4}  {}{}",
            s.file.rank.map_or_else(dash, |r| r.to_string()),
            s.file.iteration.map_or_else(dash, |i| i.to_string()),
            if s.file.exit { "exit" } else { "" },
            format_bytes(s.peak_allocated_bytes as i64),
            format_bytes(s.peak_reserved_bytes as i64),
            s.events,
            s.oom_events,
            s.file.name,
            s.error
                .as_ref()
                .map_or_else(String::new, |e| format!("  (unreadable: {e})"))
        )?;
    }
    Ok(())
}

/// `analyze RUN`: the run's findings, those alike on several files said once.
pub fn analyze(run: &Run, json: bool, markdown: bool, fail_on: Option<&str>) -> Result<()> {
    let fail_on: Option<Severity> = crate::commands::severity(fail_on)?;
    let summaries = summaries(run);
    let findings = doctor::analyze(run, &summaries);
    if json {
        #[derive(serde::Serialize)]
        struct RunReport<'a> {
            root: &'a Path,
            files: Vec<&'a str>,
            findings: &'a [RunFinding],
        }
        print_json(&RunReport {
            root: &run.root,
            files: run.files.iter().map(|f| f.name.as_str()).collect(),
            findings: &findings,
        })?;
    } else {
        print_findings(run, &findings, markdown)?;
    }
    if let Some(threshold) = fail_on {
        let failing = findings.iter().filter(|f| f.severity >= threshold).count();
        if failing > 0 {
            anyhow::bail!("{failing} finding(s) at or above {threshold:?}");
        }
    }
    Ok(())
}

fn print_findings(run: &Run, findings: &[RunFinding], markdown: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let heading = format!(
        "{} ({} files, {} ranks)",
        run.root.display(),
        run.files.len(),
        run.ranks().len()
    );
    if markdown {
        writeln!(out, "## {heading}\n")?;
    } else {
        writeln!(out, "{heading}")?;
    }
    if findings.is_empty() {
        writeln!(out, "{}no findings", if markdown { "" } else { "  " })?;
    }
    let (open, close, indent) = if markdown {
        ("- **", "**", "  ")
    } else {
        ("  [", "]", "    ")
    };
    for f in findings {
        writeln!(
            out,
            "{open}{:?}{close} {} — {}\n{indent}{}\n{indent}→ {}",
            f.severity, f.title, f.scope, f.summary, f.suggestion
        )?;
        for line in &f.evidence {
            writeln!(out, "{indent}· {line}")?;
        }
    }
    Ok(())
}

/// The two files `diff RUN --device-a R1 --device-b R2` compares: those ranks' dumps at
/// `iteration`, or at the latest dump both have (an exit dump only where no other is shared).
pub fn rank_files(
    run: &Run,
    (rank_a, rank_b): (Option<u32>, Option<u32>),
    iteration: Option<u64>,
) -> Result<(PathBuf, PathBuf)> {
    let path = &run.root;
    let (Some(rank_a), Some(rank_b)) = (rank_a, rank_b) else {
        bail_input!(
            "comparing two ranks of the run {} needs --device-a and --device-b (ranks: {})",
            path.display(),
            ranks_list(run)
        );
    };
    let find = |rank: u32, dump: (Option<u64>, bool)| {
        run.files
            .iter()
            .find(|f| f.rank == Some(rank) && (f.iteration, f.exit) == dump)
    };
    let mut dumps = run.dumps();
    // The latest dump first; exit dumps after the others.
    dumps.sort_by_key(|&(i, exit)| (exit, std::cmp::Reverse(i)));
    let dump = dumps.into_iter().find(|&(i, _)| {
        iteration.is_none_or(|want| i == Some(want))
            && find(rank_a, (i, false))
                .or(find(rank_a, (i, true)))
                .is_some()
            && find(rank_b, (i, false))
                .or(find(rank_b, (i, true)))
                .is_some()
    });
    let Some((i, _)) = dump else {
        bail_input!(
            "no dump{} of the run {} has both rank {rank_a} and rank {rank_b} (ranks: {})",
            iteration.map_or_else(String::new, |i| format!(" at iteration {i}")),
            path.display(),
            ranks_list(run)
        );
    };
    let pick = |rank| {
        find(rank, (i, false))
            .or(find(rank, (i, true)))
            .expect("checked above")
            .path
            .clone()
    };
    eprintln!(
        "comparing rank {rank_a} with rank {rank_b} at {}",
        dump_words(i, false)
    );
    Ok((pick(rank_a), pick(rank_b)))
}

fn ranks_list(run: &Run) -> String {
    let ranks = run.ranks();
    if ranks.is_empty() {
        "none in the file names".to_string()
    } else {
        memsight_core::run::ranks_words(&ranks)
    }
}

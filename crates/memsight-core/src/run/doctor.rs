//! The doctor across a run: what one file cannot show. The out-of-memory dump first; the
//! heaviest rank against the median one, with the call sites that make the difference (the diff
//! engine on those two files); the allocated floor from one dump to the next, with the blocks
//! that stay; then every file's own findings, those alike on several files said once.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use super::summary::{FileSummary, FindingBrief};
use super::{Run, dump_words, ranks_words};
use crate::detect::{FindingKind, Severity};
use crate::units::format_bytes;

/// The heaviest rank is named when its peak is this much above the median rank's …
const IMBALANCE_RATIO: f64 = 1.10;
/// … and at least this many bytes above it.
const IMBALANCE_MIN_BYTES: u64 = 1 << 20;
/// Growth between dumps is reported when the floor rose by at least this many bytes …
const GROWTH_MIN_BYTES: u64 = 1 << 20;
/// … and by at least this share of the first dump's floor.
const GROWTH_MIN_SHARE: f64 = 0.02;
/// Call sites named for a difference or a growth.
const SITES_NAMED: usize = 3;

/// One verdict about a run: about one file, or the same on several.
#[derive(Clone, Debug, Serialize)]
pub struct RunFinding {
    pub kind: FindingKind,
    pub severity: Severity,
    /// "ranks 0–6 at iterations 10 and 20": the files it is about, in words.
    pub scope: String,
    pub title: String,
    pub summary: String,
    pub suggestion: String,
    pub bytes: u64,
    /// Indexes into the run's files.
    pub files: Vec<usize>,
    /// What in the files each claim rests on, one line each.
    pub evidence: Vec<String>,
}

/// The run's findings: OOMs first, then the run's own (imbalance, growth), then the files'
/// findings grouped; most severe first within each.
pub fn analyze(run: &Run, summaries: &[FileSummary]) -> Vec<RunFinding> {
    let mut findings = out_of_memory(summaries);
    findings.extend(unreadable(summaries));
    findings.extend(imbalance(run, summaries));
    findings.extend(growth(summaries));
    findings.extend(grouped(summaries));
    // Stable: within a severity, the order above holds.
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then((a.kind != FindingKind::Oom).cmp(&(b.kind != FindingKind::Oom)))
    });
    findings
}

/// "ranks 0–6 at iterations 10 and 20".
fn scope(summaries: &[FileSummary], files: &[usize]) -> String {
    let ranks: Vec<u32> = files
        .iter()
        .filter_map(|&i| summaries[i].file.rank)
        .collect();
    let unranked = files.len() - ranks.len();
    let mut dumps: Vec<(Option<u64>, bool)> = files
        .iter()
        .map(|&i| (summaries[i].file.iteration, summaries[i].file.exit))
        .collect();
    dumps.sort_unstable_by_key(|&(i, exit)| (i.is_none(), i, exit));
    dumps.dedup();
    let who = match (ranks.is_empty(), unranked) {
        (true, 1) => summaries[files[0]].file.name.clone(),
        (true, n) => format!("{n} files"),
        (false, 0) => ranks_words(&ranks),
        (false, n) => format!("{} and {n} files with no rank", ranks_words(&ranks)),
    };
    let when = if dumps.len() == 1 {
        dump_words(dumps[0].0, dumps[0].1)
    } else {
        let words: Vec<String> = dumps
            .iter()
            .map(|&(i, exit)| match (i, exit) {
                (Some(i), false) => i.to_string(),
                (Some(i), true) => format!("{i} (exit)"),
                (None, true) => "exit".to_string(),
                (None, false) => "unnamed".to_string(),
            })
            .collect();
        let (last, rest) = words.split_last().expect("two or more");
        format!("iterations {} and {last}", rest.join(", "))
    };
    format!("{who} at {when}")
}

/// A file whose trace holds an `oom` event, or an exit dump: where the run ended.
fn out_of_memory(summaries: &[FileSummary]) -> Vec<RunFinding> {
    let mut findings = Vec::new();
    for (i, s) in summaries.iter().enumerate() {
        if s.oom_events > 0 {
            findings.push(RunFinding {
                kind: FindingKind::Oom,
                severity: Severity::Error,
                scope: scope(summaries, &[i]),
                title: format!(
                    "{} ran out of memory",
                    s.file
                        .rank
                        .map_or_else(|| s.file.name.clone(), |r| format!("Rank {r}"))
                ),
                summary: format!(
                    "{} holds {} `oom` event{}: the allocator could not serve a request (peak \
                     allocated {}, reserved {}). Open this file first: its own findings say \
                     what filled the device.",
                    s.file.name,
                    s.oom_events,
                    if s.oom_events == 1 { "" } else { "s" },
                    format_bytes(s.peak_allocated_bytes as i64),
                    format_bytes(s.peak_reserved_bytes as i64),
                ),
                suggestion: "Open the file and read its OOM finding: the pool at the failed \
                             request shows whether the device was full (capacity) or its free \
                             memory was in pieces (fragmentation)."
                    .to_string(),
                bytes: s.peak_reserved_bytes,
                files: vec![i],
                evidence: vec![format!(
                    "{}: {} `oom` events in the trace",
                    s.file.name, s.oom_events
                )],
            });
        } else if s.file.exit && s.error.is_none() {
            findings.push(RunFinding {
                kind: FindingKind::Oom,
                severity: Severity::Info,
                scope: scope(summaries, &[i]),
                title: "Dumped on the way out, with no `oom` in its trace".to_string(),
                summary: format!(
                    "{} is an exit dump (its path says `exit`) but its trace records no `oom` \
                     event: the run ended for another reason, or the failure fell outside the \
                     recorded history.",
                    s.file.name
                ),
                suggestion: "Look at the job's log for the error that ended it.".to_string(),
                bytes: 0,
                files: vec![i],
                evidence: vec![format!("{}: exit dump, 0 `oom` events", s.file.name)],
            });
        }
    }
    findings
}

fn unreadable(summaries: &[FileSummary]) -> Option<RunFinding> {
    let bad: Vec<usize> = (0..summaries.len())
        .filter(|&i| summaries[i].error.is_some())
        .collect();
    let first = *bad.first()?;
    Some(RunFinding {
        kind: FindingKind::Integrity,
        severity: Severity::Warning,
        scope: scope(summaries, &bad),
        title: format!(
            "{} of {} files could not be read",
            bad.len(),
            summaries.len()
        ),
        summary: format!(
            "They are left out of every comparison. The first: {}: {}",
            summaries[first].file.name,
            summaries[first].error.as_deref().unwrap_or_default()
        ),
        suggestion: "Check whether the job was still writing them when they were copied.".into(),
        bytes: 0,
        evidence: bad
            .iter()
            .map(|&i| {
                format!(
                    "{}: {}",
                    summaries[i].file.name,
                    summaries[i].error.as_deref().unwrap_or_default()
                )
            })
            .collect(),
        files: bad,
    })
}

/// Per dump (not an exit dump), the rank well above the median rank: heavy rank → the dumps
/// where it was (its file, the median rank's file).
fn heaviest_per_dump(summaries: &[FileSummary]) -> FxHashMap<u32, Vec<(usize, usize)>> {
    let mut by_dump: FxHashMap<(Option<u64>, bool), Vec<usize>> = FxHashMap::default();
    for (i, s) in summaries.iter().enumerate() {
        if s.file.rank.is_some() && !s.file.exit && s.error.is_none() && !s.state_only {
            by_dump
                .entry((s.file.iteration, s.file.exit))
                .or_default()
                .push(i);
        }
    }
    // Heavy rank → (dumps where it was heaviest: (heavy file, median file)).
    let mut heavy: FxHashMap<u32, Vec<(usize, usize)>> = FxHashMap::default();
    let mut dumps: Vec<_> = by_dump.into_iter().collect();
    dumps.sort_unstable_by_key(|((i, exit), _)| (i.is_none(), *i, *exit));
    for (_, mut files) in dumps {
        if files.len() < 2 {
            continue;
        }
        files.sort_by_key(|&i| (summaries[i].peak_allocated_bytes, summaries[i].file.rank));
        let median = files[(files.len() - 1) / 2];
        let top = files[files.len() - 1];
        let (m, t) = (
            summaries[median].peak_allocated_bytes,
            summaries[top].peak_allocated_bytes,
        );
        if m > 0
            && t as f64 >= m as f64 * IMBALANCE_RATIO
            && t - m >= IMBALANCE_MIN_BYTES
            && let Some(rank) = summaries[top].file.rank
        {
            heavy.entry(rank).or_default().push((top, median));
        }
    }
    heavy
}

/// The heaviest rank against the median rank; one finding per heavy rank, naming every dump
/// where it was the heaviest.
fn imbalance(run: &Run, summaries: &[FileSummary]) -> Vec<RunFinding> {
    let heavy = heaviest_per_dump(summaries);
    let mut findings = Vec::new();
    let mut ranks: Vec<_> = heavy.into_iter().collect();
    ranks.sort_unstable_by_key(|(rank, _)| *rank);
    for (rank, pairs) in ranks {
        let &(top, median) = pairs.last().expect("one dump at least");
        let (t, m) = (&summaries[top], &summaries[median]);
        let excess = t.peak_allocated_bytes - m.peak_allocated_bytes;
        let mut evidence: Vec<String> = pairs
            .iter()
            .map(|&(top, median)| {
                format!(
                    "{}: rank {rank} peaks at {}, the median rank ({}) at {}",
                    dump_words(summaries[top].file.iteration, false),
                    format_bytes(summaries[top].peak_allocated_bytes as i64),
                    summaries[median].file.rank.unwrap_or_default(),
                    format_bytes(summaries[median].peak_allocated_bytes as i64),
                )
            })
            .collect();
        let sites = difference_sites(run, median, top);
        let sites_words = match &sites {
            Ok(sites) if !sites.is_empty() => {
                for (site, delta) in sites {
                    evidence.push(format!("{site}: +{} at the peak", format_bytes(*delta)));
                }
                format!(
                    " The call sites that hold more at its peak than at the median rank's: {}.",
                    sites
                        .iter()
                        .map(|(site, delta)| format!("{site} (+{})", format_bytes(*delta)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            Ok(_) => " No call site holds more at its peak than at the median rank's: the \
                       difference is in blocks without a stack, or in when they are freed."
                .to_string(),
            Err(e) => {
                evidence.push(format!("no call-site comparison: {e}"));
                String::new()
            }
        };
        let files: Vec<usize> = pairs.iter().map(|&(top, _)| top).collect();
        findings.push(RunFinding {
            kind: FindingKind::Imbalance,
            severity: Severity::Warning,
            scope: scope(summaries, &files),
            title: format!(
                "Rank {rank} peaks {} above the median rank (+{:.0} %)",
                format_bytes(excess as i64),
                (t.peak_allocated_bytes as f64 / m.peak_allocated_bytes as f64 - 1.0) * 100.0
            ),
            summary: format!(
                "At {} rank {rank} peaks at {} allocated, the median rank ({}) at {}; the heaviest \
                 rank sets how large a batch or model every rank can run.{sites_words}",
                dump_words(t.file.iteration, false),
                format_bytes(t.peak_allocated_bytes as i64),
                m.file.rank.unwrap_or_default(),
                format_bytes(m.peak_allocated_bytes as i64),
            ),
            suggestion: format!(
                "Compare the two files call site by call site (memsight diff {} --device-a {} \
                 --device-b {rank}, or \"Compare with the median rank\" in the run tab): work \
                 only this rank does (a pipeline stage with the embedding or the loss, an uneven \
                 shard, logging or evaluation on rank 0) shows there.",
                run.root.display(),
                m.file.rank.unwrap_or_default()
            ),
            bytes: excess,
            files,
            evidence,
        });
    }
    findings
}

/// The call sites that hold more at `heavy`'s peak than at `median`'s, largest first: both files
/// loaded in full and compared by the diff engine.
fn difference_sites(run: &Run, median: usize, heavy: usize) -> Result<Vec<(String, i64)>, String> {
    let load = |i: usize| -> Result<crate::Loaded, String> {
        crate::load_path(&run.files[i].path, None)
            .map(crate::Loaded::new)
            .map_err(|e| e.to_string())
    };
    let (a, b) = rayon::join(|| load(median), || load(heavy));
    let (a, b) = (a?, b?);
    let diff = crate::diff::diff(
        crate::diff::Recording {
            name: &run.files[median].name,
            loaded: &a,
        },
        crate::diff::Recording {
            name: &run.files[heavy].name,
            loaded: &b,
        },
        None,
        None,
    )
    .map_err(|e| e.to_string())?;
    let pair = diff
        .devices
        .iter()
        .max_by_key(|d| d.peak_allocated_delta_bytes())
        .ok_or("no pair of devices to compare")?;
    // Rows whose stacks differ below the same headline frame are one place to a reader: summed.
    let mut by_place: Vec<(String, i64)> = Vec::new();
    for row in &pair.call_sites {
        match by_place
            .iter_mut()
            .find(|(place, _)| *place == row.top_frame)
        {
            Some((_, delta)) => *delta += row.delta_at_peak_bytes,
            None => by_place.push((row.top_frame.clone(), row.delta_at_peak_bytes)),
        }
    }
    by_place.retain(|(_, delta)| *delta > 0);
    by_place.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    by_place.truncate(SITES_NAMED);
    Ok(by_place)
}

/// Per rank (in order), its readable regular dumps with an iteration, in order; ranks with
/// fewer than two left out.
fn dumps_by_rank(summaries: &[FileSummary]) -> Vec<(u32, Vec<usize>)> {
    let mut by_rank: FxHashMap<u32, Vec<usize>> = FxHashMap::default();
    for (i, s) in summaries.iter().enumerate() {
        if let (Some(rank), Some(_)) = (s.file.rank, s.file.iteration)
            && !s.file.exit
            && s.error.is_none()
            && !s.state_only
        {
            by_rank.entry(rank).or_default().push(i);
        }
    }
    let mut ranks: Vec<(u32, Vec<usize>)> = by_rank.into_iter().collect();
    ranks.sort_unstable_by_key(|(rank, _)| *rank);
    for (_, dumps) in &mut ranks {
        dumps.sort_by_key(|&i| summaries[i].file.iteration);
        dumps.dedup_by_key(|&mut i| summaries[i].file.iteration);
    }
    ranks.retain(|(_, dumps)| dumps.len() >= 2);
    ranks
}

/// Per rank, over its dumps in order (exit dumps left out: they stop mid-step): the allocated
/// floor rising at every dump, and the blocks alive at the last dump that were not at the first.
fn growth(summaries: &[FileSummary]) -> Vec<RunFinding> {
    let mut findings = Vec::new();
    for (rank, dumps) in dumps_by_rank(summaries) {
        let floors: Vec<u64> = dumps
            .iter()
            .map(|&i| summaries[i].floor_allocated_bytes)
            .collect();
        let (first, last) = (floors[0], floors[floors.len() - 1]);
        let rises_every_time = floors.windows(2).all(|w| w[1] > w[0]);
        if !rises_every_time
            || last - first < GROWTH_MIN_BYTES
            || ((last - first) as f64) < first as f64 * GROWTH_MIN_SHARE
        {
            continue;
        }
        let (a, b) = (&summaries[dumps[0]], &summaries[dumps[dumps.len() - 1]]);
        let (new_bytes, kept_bytes, sites_words) = new_blocks(summaries, &dumps);
        let iterations: Vec<String> = dumps
            .iter()
            .zip(&floors)
            .map(|(&i, &f)| {
                format!(
                    "iteration {}: {}",
                    summaries[i].file.iteration.unwrap_or_default(),
                    format_bytes(f as i64)
                )
            })
            .collect();
        let three_or_more = dumps.len() >= 3;
        let mut evidence = vec![format!(
            "allocated floor (least allocated over the second half of each trace): {}",
            iterations.join(", ")
        )];
        evidence.push(format!(
            "blocks alive at iteration {} and not at iteration {} (same device, address, size and \
             stack): {}{}",
            b.file.iteration.unwrap_or_default(),
            a.file.iteration.unwrap_or_default(),
            format_bytes(new_bytes as i64),
            if three_or_more {
                format!(
                    "; {} of them alive already at an iteration in between",
                    format_bytes(kept_bytes as i64)
                )
            } else {
                String::new()
            }
        ));
        let files = dumps.clone();
        findings.push(RunFinding {
            kind: FindingKind::Leak,
            severity: if three_or_more {
                Severity::Warning
            } else {
                Severity::Info
            },
            scope: scope(summaries, &files),
            title: format!(
                "Rank {rank}'s allocated floor grows between dumps: {} → {}",
                format_bytes(first as i64),
                format_bytes(last as i64)
            ),
            summary: format!(
                "The least memory rank {rank} holds rose at every dump ({}): {} more at the last. \
                 Blocks alive at iteration {} that were not at iteration {}: {}{}.{}",
                iterations.join(", "),
                format_bytes((last - first) as i64),
                b.file.iteration.unwrap_or_default(),
                a.file.iteration.unwrap_or_default(),
                format_bytes(new_bytes as i64),
                if sites_words.is_empty() {
                    String::new()
                } else {
                    format!(", from {}", sites_words.join(", "))
                },
                if three_or_more {
                    String::new()
                } else {
                    " Two dumps cannot tell a leak from memory made once and kept (optimizer \
                     state on its first step, a cache warming up): a third dump settles it."
                        .to_string()
                }
            ),
            suggestion: "Open the last dump and look at the blocks of these call sites: what \
                         still holds them (a list that appends a tensor per step, a loss kept \
                         with its graph, a cache without a bound)."
                .to_string(),
            bytes: last - first,
            files,
            evidence,
        });
    }
    findings
}

/// Blocks alive at the last of `dumps` that were not at the first: their bytes, those of them
/// alive already at a dump in between (kept, not made again), and their call sites in words.
fn new_blocks(summaries: &[FileSummary], dumps: &[usize]) -> (u64, u64, Vec<String>) {
    let (a, b) = (&summaries[dumps[0]], &summaries[dumps[dumps.len() - 1]]);
    let before: FxHashSet<u64> = a.live_at_dump.keys.iter().copied().collect();
    // Blocks alive at the last dump that were not alive at the first, by call site; and of
    // those, the ones alive already at a dump in between (kept, not made again).
    let middle: FxHashSet<u64> = dumps[1..dumps.len() - 1]
        .iter()
        .flat_map(|&i| summaries[i].live_at_dump.keys.iter().copied())
        .collect();
    let mut new_by_site: FxHashMap<u32, u64> = FxHashMap::default();
    let (mut new_bytes, mut kept_bytes) = (0u64, 0u64);
    let live = &b.live_at_dump;
    for k in 0..live.keys.len() {
        if !before.contains(&live.keys[k]) {
            new_bytes += live.bytes[k];
            *new_by_site.entry(live.site[k]).or_default() += live.bytes[k];
            if middle.contains(&live.keys[k]) {
                kept_bytes += live.bytes[k];
            }
        }
    }
    let mut sites: Vec<(u32, u64)> = new_by_site.into_iter().collect();
    sites.sort_unstable_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    sites.truncate(SITES_NAMED);
    let sites_words: Vec<String> = sites
        .iter()
        .map(|&(s, bytes)| {
            format!(
                "{} ({})",
                live.sites[s as usize],
                format_bytes(bytes as i64)
            )
        })
        .collect();
    (new_bytes, kept_bytes, sites_words)
}

/// Findings of several files are one when their words are the same but their figures differ by
/// no more than this (the smallest × this ≥ the largest bytes).
const ALIKE_RATIO: f64 = 1.10;
/// Groups of differing figures listed in a merged finding's evidence.
const ALIKE_LISTED: usize = 8;

/// Every file's own findings; those the same on several files (same kind, severity, title, text
/// and advice) said once, naming the files. Then findings whose words are the same and whose
/// figures differ a little (bytes within [`ALIKE_RATIO`]: ranks of one job a few MiB apart) are
/// one as well, saying that their figures differ and by how much; an outlier stays apart.
fn grouped(summaries: &[FileSummary]) -> Vec<RunFinding> {
    let mut exact: Vec<(&FindingBrief, Vec<usize>)> = Vec::new();
    let mut index: FxHashMap<&FindingBrief, usize> = FxHashMap::default();
    for (i, s) in summaries.iter().enumerate() {
        for f in &s.findings {
            if let Some(&g) = index.get(f) {
                exact[g].1.push(i);
            } else {
                index.insert(f, exact.len());
                exact.push((f, vec![i]));
            }
        }
    }
    // By shape (the words with every number masked), in order of first appearance.
    let mut shapes: Vec<Vec<usize>> = Vec::new();
    let mut shape_index: FxHashMap<(FindingKind, Severity, String, String), usize> =
        FxHashMap::default();
    for (g, (f, _)) in exact.iter().enumerate() {
        let key = (f.kind, f.severity, masked(&f.title), masked(&f.suggestion));
        let at = *shape_index.entry(key).or_insert_with(|| {
            shapes.push(Vec::new());
            shapes.len() - 1
        });
        shapes[at].push(g);
    }
    let mut findings = Vec::new();
    for mut groups in shapes {
        groups.sort_by_key(|&g| exact[g].0.bytes);
        let mut start = 0;
        while start < groups.len() {
            let least = exact[groups[start]].0.bytes as f64;
            let mut end = start + 1;
            while end < groups.len() && exact[groups[end]].0.bytes as f64 <= least * ALIKE_RATIO {
                end += 1;
            }
            findings.push(alike(summaries, &exact, &groups[start..end]));
            start = end;
        }
    }
    // In the order the files' findings came (most severe first within each file).
    findings.sort_by_key(|f| f.files.first().copied());
    findings
}

/// One finding for `groups` (indexes into `exact`), whose words are the same.
fn alike(
    summaries: &[FileSummary],
    exact: &[(&FindingBrief, Vec<usize>)],
    groups: &[usize],
) -> RunFinding {
    let mut files: Vec<usize> = groups
        .iter()
        .flat_map(|&g| exact[g].1.iter().copied())
        .collect();
    files.sort_unstable();
    // The one shown: the figures most files have (the first such, the smallest, on a tie).
    let typical = groups
        .iter()
        .copied()
        .rev()
        .max_by_key(|&g| exact[g].1.len())
        .expect("one group at least");
    let (shown, shown_files) = &exact[typical];
    let mut finding = RunFinding {
        kind: shown.kind,
        severity: shown.severity,
        scope: scope(summaries, &files),
        title: shown.title.clone(),
        summary: shown.summary.clone(),
        suggestion: shown.suggestion.clone(),
        bytes: shown.bytes,
        evidence: Vec::new(),
        files: files.clone(),
    };
    if groups.len() > 1 {
        let (least, most) = (
            exact[groups[0]].0.bytes,
            exact[groups[groups.len() - 1]].0.bytes,
        );
        finding.title = format!("{} (figures differ by file)", shown.title);
        finding.summary = format!(
            "The same finding on {} files, its figures {} to {}. On {}: {}",
            files.len(),
            format_bytes(least as i64),
            format_bytes(most as i64),
            scope(summaries, shown_files),
            shown.summary
        );
        finding.evidence = groups
            .iter()
            .take(ALIKE_LISTED)
            .map(|&g| format!("{}: {}", scope(summaries, &exact[g].1), exact[g].0.title))
            .collect();
        if groups.len() > ALIKE_LISTED {
            finding
                .evidence
                .push(format!("… and {} more", groups.len() - ALIKE_LISTED));
        }
    }
    finding
}

/// `text` with every number as `#`: "Peak: 11.6 GiB, 50%" and "Peak: 11.8 GiB, 49%" alike.
fn masked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_number = false;
    for c in text.chars() {
        let part = c.is_ascii_digit() || (in_number && matches!(c, '.' | ','));
        if part && !in_number {
            out.push('#');
        } else if !part {
            out.push(c);
        }
        in_number = part;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{FindingBrief, grouped, masked};
    use crate::detect::{FindingKind, Severity};
    use crate::run::RunFile;
    use crate::run::summary::{FileSummary, LiveBlocks};

    fn file(rank: u32, peak_bytes: u64) -> FileSummary {
        let gib = |b: u64| format!("{:.2} GiB", b as f64 / f64::from(1u32 << 30));
        FileSummary {
            file: RunFile {
                path: format!("rank{rank}.pickle").into(),
                name: format!("rank{rank}.pickle"),
                rank: Some(rank),
                iteration: Some(10),
                exit: false,
            },
            error: None,
            devices: 1,
            events: 100,
            peak_allocated_bytes: peak_bytes,
            peak_reserved_bytes: peak_bytes,
            final_allocated_bytes: 0,
            floor_allocated_bytes: 0,
            oom_events: 0,
            state_only: false,
            findings: vec![FindingBrief {
                kind: FindingKind::Peak,
                severity: Severity::Info,
                title: format!("Peak: {} allocated", gib(peak_bytes)),
                summary: format!("At the peak ({} allocated) …", gib(peak_bytes)),
                suggestion: "Lower it.".into(),
                bytes: peak_bytes,
            }],
            top_sites: Vec::new(),
            live_at_dump: LiveBlocks::default(),
            curve: Vec::new(),
        }
    }

    #[test]
    fn numbers_are_masked_and_words_kept() {
        assert_eq!(
            masked("Peak: 11.6 GiB, 50% activation."),
            "Peak: # GiB, #% activation."
        );
        assert_eq!(masked("ranks 0–62"), "ranks #–#");
    }

    /// Ranks a few percent apart are one finding that says its figures differ; the rank twice as
    /// heavy stays apart.
    #[test]
    fn alike_findings_are_one_and_an_outlier_stays_apart() {
        let gib = 1u64 << 30;
        let summaries = vec![
            file(0, 10 * gib),
            file(1, 10 * gib),
            file(2, 10 * gib + gib / 2),
            file(3, 20 * gib),
        ];
        let findings = grouped(&summaries);
        assert_eq!(findings.len(), 2, "{findings:#?}");
        assert_eq!(findings[0].files, [0, 1, 2]);
        assert_eq!(findings[0].scope, "ranks 0–2 at iteration 10");
        assert_eq!(
            findings[0].title,
            "Peak: 10.00 GiB allocated (figures differ by file)"
        );
        assert!(
            findings[0]
                .summary
                .contains("its figures 10.0 GiB to 10.5 GiB"),
            "{}",
            findings[0].summary
        );
        assert_eq!(findings[1].files, [3]);
        assert_eq!(findings[1].title, "Peak: 20.00 GiB allocated");
    }
}

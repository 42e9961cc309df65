//! A run: a folder of snapshot files, one per rank and per dumped iteration (torchtitan's
//! `memory_snapshot/iteration_N/rankR_memory_snapshot.pickle`, `iteration_N_exit/` after an
//! out-of-memory error; `MindSpeed`'s and hand-written profilers' own names).
//!
//! - [`discover`] finds the snapshot files at any depth and reads a rank and an iteration from
//!   each path ([`parse_path`]); a file with neither is still listed.
//! - [`summary::summarize`] reads every file on rayon into a small [`summary::FileSummary`]:
//!   only as many models are alive at once as there are workers, so memory does not grow with
//!   the number of ranks beyond the summaries.
//! - [`doctor::analyze`] judges the run as a whole: the OOM first, findings alike on several
//!   ranks as one, the heaviest rank against the median, growth from one dump to the next.

pub mod doctor;
pub mod summary;

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Folders deeper than this under the run's root are not searched.
const MAX_DEPTH: usize = 16;
/// Entries (files and folders) looked at, at most: a home folder dropped on the window is not
/// walked for minutes.
const MAX_ENTRIES: usize = 200_000;

/// One snapshot file of a run, with what its path says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunFile {
    pub path: PathBuf,
    /// The path under the run's root, as shown.
    pub name: String,
    /// `rank3`, `rank_3`, `device_3` (the file name first, then its folders).
    pub rank: Option<u32>,
    /// `iteration_200`, `iter200`, `step200`.
    pub iteration: Option<u64>,
    /// Dumped on the way out (`iteration_200_exit`): after an out-of-memory error, usually.
    pub exit: bool,
}

/// A folder of snapshot files.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub root: PathBuf,
    /// By iteration (files with none last), exit dumps after the others, then by rank and name.
    pub files: Vec<RunFile>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot read the run folder {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "no snapshot files (.pickle, .pkl, optionally .gz) under {} (searched {folders} folders, \
         {depth} deep at most)",
        path.display(),
        depth = MAX_DEPTH
    )]
    Empty { path: PathBuf, folders: usize },
    #[error(
        "{} holds more than {MAX_ENTRIES} files and folders: not a run (open the folder of one \
         job's snapshots)",
        path.display()
    )]
    TooLarge { path: PathBuf },
}

impl Run {
    /// The ranks that have a file, in order.
    pub fn ranks(&self) -> Vec<u32> {
        let mut ranks: Vec<u32> = self.files.iter().filter_map(|f| f.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        ranks
    }

    /// The dumps (iteration, exit) that have a file, in order.
    pub fn dumps(&self) -> Vec<(Option<u64>, bool)> {
        let mut dumps: Vec<(Option<u64>, bool)> =
            self.files.iter().map(|f| (f.iteration, f.exit)).collect();
        dumps.sort_unstable_by_key(|&(i, exit)| (i.is_none(), i, exit));
        dumps.dedup();
        dumps
    }
}

/// Whether `path` names a snapshot file by its extension.
pub fn is_snapshot_name(path: &Path) -> bool {
    let is = |p: &Path, ext: &str| p.extension().is_some_and(|e| e.eq_ignore_ascii_case(ext));
    // `x.pickle.gz`: the extension under the `.gz`.
    let inner = if is(path, "gz") {
        path.file_stem().map(Path::new)
    } else {
        Some(path)
    };
    inner.is_some_and(|p| is(p, "pickle") || is(p, "pkl"))
}

/// The run at `path` when it is a folder holding snapshot files (at any depth), so a run rather
/// than one recording; `None` otherwise. msMemScope and profiler folders are not runs: they are
/// read as one recording each.
pub fn as_run(path: &Path) -> Option<Run> {
    if !path.is_dir()
        || crate::memscope::is_memscope_path(path)
        || crate::profiler::is_profiler_path(path)
    {
        return None;
    }
    discover(path).ok()
}

/// Every snapshot file under `root`, with its rank and iteration.
pub fn discover(root: &Path) -> Result<Run, RunError> {
    let mut files = Vec::new();
    let (mut folders, mut entries_seen) = (0, 0usize);
    let mut pending = vec![(root.to_path_buf(), 0usize)];
    while let Some((folder, depth)) = pending.pop() {
        folders += 1;
        let entries = std::fs::read_dir(&folder).map_err(|source| RunError::Read {
            path: folder.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            entries_seen += 1;
            if entries_seen > MAX_ENTRIES {
                return Err(RunError::TooLarge {
                    path: root.to_path_buf(),
                });
            }
            let path = entry.path();
            // Links to folders are not followed: a link to a parent would never end.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if depth < MAX_DEPTH {
                    pending.push((path, depth + 1));
                }
            } else if is_snapshot_name(&path) {
                let name = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                let (rank, iteration, exit) = parse_path(&name);
                files.push(RunFile {
                    path,
                    name,
                    rank,
                    iteration,
                    exit,
                });
            }
        }
    }
    if files.is_empty() {
        return Err(RunError::Empty {
            path: root.to_path_buf(),
            folders,
        });
    }
    files.sort_by(|a, b| {
        (
            a.iteration.is_none(),
            a.iteration,
            a.exit,
            a.rank.is_none(),
            a.rank,
        )
            .cmp(&(
                b.iteration.is_none(),
                b.iteration,
                b.exit,
                b.rank.is_none(),
                b.rank,
            ))
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(Run {
        root: root.to_path_buf(),
        files,
    })
}

/// The rank, iteration and exit mark a path (relative to the run) carries; the file name is read
/// first, then its folders from the innermost.
pub fn parse_path(name: &str) -> (Option<u32>, Option<u64>, bool) {
    let parts: Vec<String> = name
        .rsplit(['/', '\\'])
        .map(str::to_ascii_lowercase)
        .collect();
    let first = |keys: &[&str]| parts.iter().find_map(|p| number_after(p, keys));
    let rank = first(&["rank", "device", "dev", "npu", "gpu"]).and_then(|r| u32::try_from(r).ok());
    let iteration = first(&["iteration", "iter", "step"]);
    let exit = parts.iter().any(|p| {
        p.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| w == "exit" || w == "oom")
    });
    (rank, iteration, exit)
}

/// The number right after one of `keys` in `text` (`rank_3`, `rank-3`, `rank3`), where the key
/// starts a word (`prank3` is not a rank).
fn number_after(text: &str, keys: &[&str]) -> Option<u64> {
    for key in keys {
        let mut from = 0;
        while let Some(at) = text[from..].find(key) {
            let start = from + at;
            from = start + key.len();
            if text[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphabetic())
            {
                continue;
            }
            let rest = &text[from..];
            let rest = rest.strip_prefix(['_', '-', '.']).unwrap_or(rest);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if !digits.is_empty()
                && let Ok(n) = digits.parse()
            {
                return Some(n);
            }
        }
    }
    None
}

/// "ranks 0–6", "ranks 0, 2 and 5", "rank 1", "3 files": who a run finding is about.
pub fn ranks_words(ranks: &[u32]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    match sorted.as_slice() {
        [] => "no rank".to_string(),
        [one] => format!("rank {one}"),
        [first, .., last] if sorted.windows(2).all(|w| w[1] == w[0] + 1) => {
            format!("ranks {first}–{last}")
        }
        _ => {
            // Runs of consecutive ranks, each as "a–b".
            let mut spans: Vec<String> = Vec::new();
            let mut i = 0;
            while i < sorted.len() {
                let mut j = i;
                while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
                    j += 1;
                }
                if j > i + 1 {
                    spans.push(format!("{}–{}", sorted[i], sorted[j]));
                } else {
                    spans.extend(sorted[i..=j].iter().map(u32::to_string));
                }
                i = j + 1;
            }
            let (last, rest) = spans.split_last().expect("two or more ranks");
            format!("ranks {} and {last}", rest.join(", "))
        }
    }
}

/// "iteration 200", "iteration 200 (exit)", "no iteration in the name".
pub fn dump_words(iteration: Option<u64>, exit: bool) -> String {
    match (iteration, exit) {
        (Some(i), false) => format!("iteration {i}"),
        (Some(i), true) => format!("iteration {i} (exit dump)"),
        (None, true) => "the exit dump".to_string(),
        (None, false) => "a dump with no iteration in its name".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{RunError, discover, parse_path, ranks_words};

    #[test]
    fn a_run_lists_every_snapshot_at_any_depth_and_nothing_else() {
        let root = std::env::temp_dir().join(format!("memsight-discover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for name in [
            "memory_snapshot/iteration_20/rank1_memory_snapshot.pickle",
            "memory_snapshot/iteration_10/rank1_memory_snapshot.pickle",
            "memory_snapshot/iteration_10/rank0_memory_snapshot.pickle",
            "memory_snapshot/iteration_20_exit/rank0_memory_snapshot.pickle.gz",
            "extra/final.PKL",
            "memory_snapshot/iteration_10/notes.txt",
            "memory_snapshot/iteration_10/rank0.truth.json",
        ] {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().expect("a folder")).expect("folder");
            std::fs::write(&path, b"").expect("written");
        }
        let run = discover(&root).expect("a run");
        let names: Vec<&str> = run.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "memory_snapshot/iteration_10/rank0_memory_snapshot.pickle",
                "memory_snapshot/iteration_10/rank1_memory_snapshot.pickle",
                "memory_snapshot/iteration_20/rank1_memory_snapshot.pickle",
                "memory_snapshot/iteration_20_exit/rank0_memory_snapshot.pickle.gz",
                // Neither rank nor iteration: still listed, last.
                "extra/final.PKL",
            ]
        );
        assert!(run.files[3].exit);
        assert_eq!(run.ranks(), [0, 1]);
        std::fs::remove_dir_all(root.join("memory_snapshot")).expect("removed");
        std::fs::remove_dir_all(root.join("extra")).expect("removed");
        assert!(matches!(discover(&root), Err(RunError::Empty { .. })));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn ranks_and_iterations_are_read_from_the_names_people_use() {
        let cases = [
            (
                "memory_snapshot/iteration_200/rank3_memory_snapshot.pickle",
                (Some(3), Some(200), false),
            ),
            (
                "memory_snapshot/iteration_200_exit/rank_12_memory_snapshot.pickle",
                (Some(12), Some(200), true),
            ),
            ("step300/device_5.pkl", (Some(5), Some(300), false)),
            ("snap-rank-7-iter-40.pickle.gz", (Some(7), Some(40), false)),
            ("训练/第一轮/rank0.pickle", (Some(0), None, false)),
            ("memory.pickle", (None, None, false)),
            // A word that merely contains a key is not that key.
            ("prank3_stepper.pickle", (None, None, false)),
        ];
        for (name, expected) in cases {
            assert_eq!(parse_path(name), expected, "{name}");
        }
    }

    #[test]
    fn ranks_are_named_as_spans() {
        assert_eq!(ranks_words(&[3]), "rank 3");
        assert_eq!(ranks_words(&[0, 1, 2, 3, 4, 5, 6]), "ranks 0–6");
        assert_eq!(ranks_words(&[0, 1, 2, 5, 7, 8]), "ranks 0–2, 5, 7 and 8");
    }
}

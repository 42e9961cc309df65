//! `torch_npu` profiler memory data (`../shared/docs/profiler-formats.md`): the memory curves of
//! `memory_record.csv`, the per-allocation rows of `operator_memory.csv`, the CANN components of
//! `npu_module_mem.csv` and the static-graph lifetimes of `static_op_mem.csv`, per rank.
//!
//! [`open`] takes what a user points at — a rank folder (`*_ascend_pt/`), its
//! `ASCEND_PROFILER_OUTPUT/`, a parent holding several ranks, or CSV files — and reads every rank
//! it finds. Sizes are bytes (`*_bytes`, converted from the files' MB or KB), times are epoch
//! microseconds (`*_us`); a value the file leaves empty is `NaN`.

pub mod detect;
pub mod envelope;
mod read;
pub mod static_graph;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::LoadProgress;

use read::{read_memory_record, read_npu_module_mem, read_operator_memory, read_static_op_mem};

/// The component whose rows are the allocator's operator curves (PTA plus the graph engine).
pub const OPERATOR_COMPONENT: &str = "PTA+GE";
/// The component whose rows are the whole process's reserved memory.
pub const APP_COMPONENT: &str = "APP";

/// One component's samples over time, in time order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Curve {
    pub component: String,
    pub time_us: Vec<f64>,
    pub allocated_bytes: Vec<f64>,
    pub reserved_bytes: Vec<f64>,
    pub active_bytes: Vec<f64>,
    /// Per sample, its 1-based line in the CSV it was read from (what a user finds it by).
    pub line: Vec<u64>,
}

impl Curve {
    pub fn len(&self) -> usize {
        self.time_us.len()
    }

    pub fn is_empty(&self) -> bool {
        self.time_us.is_empty()
    }

    /// The largest reserved value and its sample index.
    pub fn peak_reserved(&self) -> Option<(f64, usize)> {
        peak(&self.reserved_bytes)
    }

    pub fn peak_allocated(&self) -> Option<(f64, usize)> {
        peak(&self.allocated_bytes)
    }
}

/// The largest value and the first sample that reaches it (where the curve got there).
fn peak(values: &[f64]) -> Option<(f64, usize)> {
    values.iter().enumerate().filter(|(_, v)| !v.is_nan()).fold(
        None,
        |best: Option<(f64, usize)>, (i, &v)| match best {
            Some((b, _)) if b >= v => best,
            _ => Some((v, i)),
        },
    )
}

/// One row of `operator_memory.csv`: one allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct OperatorRow {
    /// Index into [`Rank::operator_names`]; the empty name for rows allocated before the capture.
    pub name: u32,
    /// Negative: allocated before the capture started, released inside it.
    pub size_bytes: i64,
    pub alloc_us: f64,
    /// The tensor was freed (`NaN`: after the capture ended).
    pub release_us: f64,
    /// The block went back to the pool.
    pub active_release_us: f64,
    /// Allocator totals right after the allocation: allocated, reserved, active.
    pub alloc_totals_bytes: [f64; 3],
    /// Allocator totals right after the release.
    pub release_totals_bytes: [f64; 3],
    /// 1-based line in its file, for messages.
    pub line: u64,
}

impl OperatorRow {
    /// Microseconds from allocation to release, when both are known.
    pub fn duration_us(&self) -> f64 {
        self.release_us - self.alloc_us
    }
}

/// One row of `static_op_mem.csv`: a static-graph node's memory over node indices.
#[derive(Clone, Debug, PartialEq)]
pub struct StaticOp {
    pub op_name: String,
    pub model_name: String,
    pub graph_id: String,
    pub node_start: u64,
    /// `None`: lives to the end of the graph (4294967295 in the file).
    pub node_end: Option<u64>,
    pub size_bytes: i64,
}

/// Something the data allows to continue past: a bad row, a file that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ProfilerWarning {
    pub file: PathBuf,
    /// 1-based line, when the warning is about one row.
    pub line: Option<u64>,
    pub message: String,
}

impl std::fmt::Display for ProfilerWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ": line {line}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Warnings kept per file; the rest are counted.
pub const MAX_WARNINGS_PER_FILE: usize = 50;

/// Everything one rank's folder holds.
#[derive(Clone, Debug, Default)]
pub struct Rank {
    /// The folder's name (`rank0_ascend_pt`, …), or the file's when CSVs were given directly.
    pub name: String,
    pub dir: PathBuf,
    /// `Device Type` of its rows (`NPU:0`), when any row says.
    pub device: Option<String>,
    /// `memory_record.csv` by component, in order of first appearance.
    pub curves: Vec<Curve>,
    pub operators: Vec<OperatorRow>,
    pub operator_names: Vec<String>,
    /// `npu_module_mem.csv` by component (reserved only).
    pub modules: Vec<Curve>,
    pub static_ops: Vec<StaticOp>,
    /// `static_op_mem.csv`'s `TOTAL` row per graph: the memory the graph requests in all.
    pub static_totals: Vec<StaticOp>,
    pub files: Vec<PathBuf>,
    pub warnings: Vec<ProfilerWarning>,
    /// Warnings beyond [`MAX_WARNINGS_PER_FILE`] per file, counted only.
    pub warnings_dropped: u64,
    /// `memory_record.csv` timestamps were rounded (scientific notation): the curves' times are
    /// not to be trusted, the operator rows' are.
    pub coarse_times: bool,
}

impl Rank {
    pub fn curve(&self, component: &str) -> Option<&Curve> {
        self.curves.iter().find(|c| c.component == component)
    }

    pub fn operator_name(&self, row: &OperatorRow) -> &str {
        self.operator_names
            .get(row.name as usize)
            .map_or("", String::as_str)
    }

    /// First and last sample time over every curve and operator row (operator rows only, when
    /// the curves' timestamps were rounded and there are operator rows).
    pub fn time_span_us(&self) -> Option<(f64, f64)> {
        let skip_curves = self.coarse_times && !self.operators.is_empty();
        let times = self
            .curves
            .iter()
            .filter(|_| !skip_curves)
            .flat_map(|c| c.time_us.iter().copied())
            .chain(self.operators.iter().map(|o| o.alloc_us))
            .filter(|t| !t.is_nan());
        times.fold(None, |span, t| match span {
            None => Some((t, t)),
            Some((a, b)) => Some((a.min(t), b.max(t))),
        })
    }
}

/// The ranks of one run, in the order their folders sort.
#[derive(Clone, Debug, Default)]
pub struct ProfilerRun {
    pub ranks: Vec<Rank>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfilerError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: no torch_npu profiler memory data here (memory_record.csv, operator_memory.csv, \
         npu_module_mem.csv or static_op_mem.csv, in this folder, its ASCEND_PROFILER_OUTPUT/ or \
         rank folders below it)"
    )]
    NotProfilerData { path: PathBuf },
    #[error("{path}: cannot be read as {expected}: its header lacks {missing}")]
    BadHeader {
        path: PathBuf,
        expected: &'static str,
        missing: String,
    },
    #[error("reading was cancelled, in {path}")]
    Cancelled { path: PathBuf },
    #[error("{path}: line {line}: {message}")]
    BadCsv {
        path: PathBuf,
        line: u64,
        message: String,
    },
}

/// Which table a file holds, from its name (`memory_record.csv`, `memory_record_slice_0_….csv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Table {
    MemoryRecord,
    OperatorMemory,
    NpuModuleMem,
    StaticOpMem,
}

impl Table {
    pub fn of(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?;
        if !Path::new(name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
        {
            return None;
        }
        [
            ("memory_record", Self::MemoryRecord),
            ("operator_memory", Self::OperatorMemory),
            ("npu_module_mem", Self::NpuModuleMem),
            ("static_op_mem", Self::StaticOpMem),
        ]
        .into_iter()
        .find(|(stem, _)| name.starts_with(stem))
        .map(|(_, table)| table)
    }
}

/// Whether `path` looks like profiler data (a profiler CSV, or a folder holding some), so a front
/// end can tell it from a snapshot pickle before reading it.
pub fn is_profiler_path(path: &Path) -> bool {
    if path.is_dir() {
        return !rank_dirs(path).is_empty();
    }
    Table::of(path).is_some()
}

/// The profiler CSVs directly in `dir`, sorted so slices come in order.
fn tables_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        // Folders and dangling links with a table's name are kept, to be reported, not skipped
        // without a word.
        .filter(|p| Table::of(p).is_some())
        .collect();
    files.sort_by_key(|f| slice_order(f));
    files
}

/// (table, slice number, name): `memory_record_slice_10_…` after `…_slice_2_…`.
fn slice_order(path: &Path) -> (Option<Table>, u64, String) {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let slice = name
        .split("_slice_")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    (Table::of(path), slice, name)
}

/// Folders under `root` (itself included, three levels down) that hold profiler CSVs, directly
/// or in their `ASCEND_PROFILER_OUTPUT/`; each is one rank.
fn rank_dirs(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut queue = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = queue.pop() {
        if !tables_in(&dir).is_empty() {
            found.push(dir);
            continue;
        }
        let output = dir.join("ASCEND_PROFILER_OUTPUT");
        if !tables_in(&output).is_empty() {
            found.push(output);
            continue;
        }
        if depth >= 3 {
            continue;
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut subdirs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            subdirs.sort();
            queue.extend(subdirs.into_iter().rev().map(|d| (d, depth + 1)));
        }
    }
    found.sort();
    found
}

/// A rank's display name: its `*_ascend_pt` folder, not the `ASCEND_PROFILER_OUTPUT` inside.
fn rank_name(dir: &Path) -> String {
    let name = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    if dir
        .file_name()
        .is_some_and(|n| n == "ASCEND_PROFILER_OUTPUT")
        && let Some(parent) = dir.parent()
    {
        return name(parent);
    }
    name(dir)
}

/// Reads every rank found at `paths` (folders or CSV files; CSVs in one folder make one rank).
pub fn open(paths: &[PathBuf]) -> Result<ProfilerRun, ProfilerError> {
    open_with_progress(paths, None)
}

/// The files [`open`] would read at `paths`, by rank folder, slices in order.
fn rank_files(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Vec<PathBuf>)>, ProfilerError> {
    let mut groups: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    for path in paths {
        if path.is_dir() {
            let dirs = rank_dirs(path);
            if dirs.is_empty() {
                return Err(ProfilerError::NotProfilerData { path: path.clone() });
            }
            groups.extend(dirs.into_iter().map(|d| {
                let files = tables_in(&d);
                (d, files)
            }));
        } else if Table::of(path).is_some() {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            match groups.iter_mut().find(|(d, _)| *d == dir) {
                Some((_, files)) => files.push(path.clone()),
                None => groups.push((dir, vec![path.clone()])),
            }
        } else if !path.exists() {
            return Err(ProfilerError::Io {
                path: path.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or folder"),
            });
        } else {
            return Err(ProfilerError::NotProfilerData { path: path.clone() });
        }
    }
    for (_, files) in &mut groups {
        files.sort_by_key(|f| slice_order(f));
        files.dedup();
    }
    Ok(groups)
}

/// Bytes of CSV that [`open`] would read at `paths` (for a progress bar; 0 when unknown).
pub fn data_size(paths: &[PathBuf]) -> u64 {
    rank_files(paths).map_or(0, |groups| {
        groups
            .iter()
            .flat_map(|(_, files)| files)
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum()
    })
}

/// [`open`], reporting bytes read to `progress` and stopping when it asks to.
pub fn open_with_progress(
    paths: &[PathBuf],
    progress: Option<&LoadProgress>,
) -> Result<ProfilerRun, ProfilerError> {
    // Ranks are independent files: read them side by side.
    let ranks = rank_files(paths)?
        .par_iter()
        .map(|(dir, files)| read_rank(dir, files, progress))
        .collect::<Result<Vec<Rank>, ProfilerError>>()?;
    Ok(ProfilerRun { ranks })
}

/// Reads one rank's files (slices of one table merged in order), adding the bytes it reads to
/// `progress`.
pub fn read_rank(
    dir: &Path,
    files: &[PathBuf],
    progress: Option<&LoadProgress>,
) -> Result<Rank, ProfilerError> {
    let mut rank = Rank {
        name: rank_name(dir),
        dir: dir.to_path_buf(),
        files: files.to_vec(),
        ..Rank::default()
    };
    let mut device = None;
    for file in files {
        let mut warnings = read::Warnings::new(file, progress);
        if !file.is_file() {
            let what = if file.is_dir() {
                "a folder"
            } else {
                "a dangling link or unreadable"
            };
            rank.warnings.push(ProfilerWarning {
                file: file.clone(),
                line: None,
                message: format!("{what}, not a file: skipped"),
            });
            continue;
        }
        match Table::of(file) {
            Some(Table::MemoryRecord) => {
                let curves =
                    read_memory_record(file, &mut warnings, &mut device, &mut rank.coarse_times)?;
                merge_curves(&mut rank.curves, curves);
            }
            Some(Table::OperatorMemory) => {
                read_operator_memory(
                    file,
                    &mut warnings,
                    &mut rank.operators,
                    &mut rank.operator_names,
                )?;
            }
            Some(Table::NpuModuleMem) => {
                let curves = read_npu_module_mem(file, &mut warnings)?;
                merge_curves(&mut rank.modules, curves);
            }
            Some(Table::StaticOpMem) => {
                let (totals, ops): (Vec<StaticOp>, Vec<StaticOp>) =
                    read_static_op_mem(file, &mut warnings)?
                        .into_iter()
                        .partition(|op| op.op_name == "TOTAL");
                rank.static_ops.extend(ops);
                rank.static_totals.extend(totals);
            }
            None => {}
        }
        warnings.report(std::fs::metadata(file).map_or(0, |m| m.len()))?;
        let (kept, dropped) = warnings.finish();
        rank.warnings.extend(kept);
        rank.warnings_dropped += dropped;
    }
    for curve in rank.curves.iter_mut().chain(rank.modules.iter_mut()) {
        sort_by_time(curve);
    }
    rank.operators
        .sort_by(|a, b| a.alloc_us.total_cmp(&b.alloc_us));
    rank.device = device;
    Ok(rank)
}

/// Appends slices' curves to the ones already read, component by component (by name, through a
/// map: a file may name a hundred thousand components).
fn merge_curves(into: &mut Vec<Curve>, curves: Vec<Curve>) {
    let mut index: rustc_hash::FxHashMap<String, usize> = into
        .iter()
        .enumerate()
        .map(|(i, c)| (c.component.clone(), i))
        .collect();
    for c in curves {
        if let Some(&i) = index.get(&c.component) {
            let existing = &mut into[i];
            existing.time_us.extend(c.time_us);
            existing.allocated_bytes.extend(c.allocated_bytes);
            existing.reserved_bytes.extend(c.reserved_bytes);
            existing.active_bytes.extend(c.active_bytes);
        } else {
            index.insert(c.component.clone(), into.len());
            into.push(c);
        }
    }
}

/// Puts samples in time order (slices and files may interleave); stable for equal times.
fn sort_by_time(curve: &mut Curve) {
    if curve.time_us.windows(2).all(|w| w[0] <= w[1]) {
        return;
    }
    let mut order: Vec<usize> = (0..curve.len()).collect();
    order.sort_by(|&a, &b| curve.time_us[a].total_cmp(&curve.time_us[b]));
    let permute = |v: &[f64]| order.iter().map(|&i| v[i]).collect::<Vec<f64>>();
    curve.time_us = permute(&curve.time_us);
    curve.allocated_bytes = permute(&curve.allocated_bytes);
    curve.reserved_bytes = permute(&curve.reserved_bytes);
    curve.active_bytes = permute(&curve.active_bytes);
}

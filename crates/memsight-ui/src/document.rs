//! An open snapshot and the background job that loads it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError, channel};

use memsight_core::range::RangeReport;
use memsight_core::replay::LifetimeId;
use memsight_core::{LoadProgress, Loaded, load_bytes};
use rustc_hash::FxHashSet;

use crate::prepared::Prepared;
use crate::selection::{Command, Selection};
use crate::views::event_list::EventListState;
use crate::views::findings::FindingsState;
use crate::views::lifecycle::LifecycleState;
use crate::views::pool::PoolViewState;
use crate::views::whatif::WhatIfState;

/// One open file.
pub struct Document {
    /// Unique for the life of the process: each tab keeps its own scroll positions.
    pub key: u64,
    pub name: String,
    pub path: Option<PathBuf>,
    pub data: Arc<Prepared>,
    /// The order of the load that opened it ([`LoadJob::order`]; 0: not from a load, placed
    /// before every loaded one), which places its tab.
    pub load_order: u64,
    /// Ordinal of the device shown.
    pub device: u32,
    pub selection: Selection,
    /// Changes the views asked for this frame; applied once, after every view has drawn.
    pub commands: Vec<Command>,
    pub lifecycle: LifecycleState,
    pub pool: PoolViewState,
    pub range: RangeView,
    pub events: EventListState,
    /// The table of live blocks at the selected event.
    pub blocks: crate::views::blocks::BlockTableState,
    /// Segments over time.
    pub segments: crate::views::segments::SegmentTimelineState,
    pub findings: FindingsState,
    pub whatif: WhatIfState,
    /// The memory-by-owner window (msMemScope recordings).
    pub owners: crate::views::owners::OwnersState,
}

struct AnalysedRange {
    range: (u32, u32),
    report: Arc<RangeReport>,
    /// `report.unreleased` as a set, for dimming the other bands.
    unreleased: Arc<FxHashSet<LifetimeId>>,
}

/// The range analysis of the selected range, kept until the range changes.
#[derive(Default)]
pub struct RangeView {
    analysed: Option<AnalysedRange>,
    /// Dim every band but the range's unreleased ones.
    pub dim_others: bool,
}

/// The next `Document::key`.
static NEXT_DOCUMENT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Document {
    pub fn new(name: String, path: Option<PathBuf>, data: Prepared) -> Self {
        Self::shared(name, path, Arc::new(data))
    }

    /// A document over data another one holds too (an export rendered off screen).
    pub fn shared(name: String, path: Option<PathBuf>, data: Arc<Prepared>) -> Self {
        // The device that ran out of memory, if one did (what the user opened the file for);
        // else the busiest.
        let snapshot = &data.loaded.snapshot;
        let device = snapshot
            .devices
            .iter()
            .enumerate()
            .find(|&(k, _)| data.has_oom(k))
            .map(|(_, d)| d)
            .or_else(|| snapshot.busiest_device())
            .map_or(0, |d| d.ordinal);
        Self {
            key: NEXT_DOCUMENT_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            name,
            path,
            data,
            load_order: 0,
            device,
            selection: Selection::default(),
            commands: Vec::new(),
            lifecycle: LifecycleState::default(),
            pool: PoolViewState::default(),
            range: RangeView::default(),
            events: EventListState::default(),
            blocks: crate::views::blocks::BlockTableState::default(),
            segments: crate::views::segments::SegmentTimelineState::default(),
            findings: FindingsState::default(),
            whatif: WhatIfState::default(),
            owners: crate::views::owners::OwnersState::default(),
        }
    }

    /// Applies the commands the views queued this frame; whether there were any (the views drew
    /// the selection before them, so the caller asks for another frame).
    pub fn apply_commands(&mut self) -> bool {
        let Some(i) = self.device_index() else {
            return false;
        };
        let commands = std::mem::take(&mut self.commands);
        let any = !commands.is_empty();
        self.selection.apply(
            commands,
            &self.data.loaded.snapshot.devices[i],
            &self.data.loaded.replays[i],
        );
        any
    }

    /// The analysis of the selected range (computed once per range), with the set of its
    /// unreleased allocations.
    pub fn range_report(&mut self) -> Option<(Arc<RangeReport>, Arc<FxHashSet<LifetimeId>>)> {
        let range = self.selection.range?;
        let i = self.device_index()?;
        if self.range.analysed.as_ref().map(|a| a.range) != Some(range) {
            let report = RangeReport::new(&self.data.loaded.replays[i], range.0, range.1);
            let unreleased = Arc::new(report.unreleased.iter().copied().collect());
            self.range.analysed = Some(AnalysedRange {
                range,
                report: Arc::new(report),
                unreleased,
            });
        }
        self.range
            .analysed
            .as_ref()
            .map(|a| (Arc::clone(&a.report), Arc::clone(&a.unreleased)))
    }

    /// Shows `finding`'s evidence: switches to its device (a fresh view there) and queues the
    /// commands that select it.
    pub fn show_finding(&mut self, index: usize) {
        let Some(finding) = self.data.findings.get(index) else {
            return;
        };
        if finding.device != self.device {
            self.device = finding.device;
            self.selection = Selection::default();
            self.lifecycle = LifecycleState::default();
        }
        let Some(i) = self.device_index() else { return };
        let commands = crate::views::findings::commands_for(finding, &self.data.loaded.replays[i]);
        self.commands.extend(commands);
    }

    /// Index of the shown device in `snapshot.devices`.
    pub fn device_index(&self) -> Option<usize> {
        self.data
            .loaded
            .snapshot
            .devices
            .iter()
            .position(|d| d.ordinal == self.device)
    }
}

/// Where a document comes from.
#[derive(Clone)]
pub enum Source {
    /// A snapshot file, or profiler data (a rank folder, a parent of ranks, a profiler CSV).
    Path(PathBuf),
    Bytes {
        name: String,
        bytes: &'static [u8],
    },
    /// Profiler folders or CSVs opened together as one run (ranks compared).
    Profiler(Vec<PathBuf>),
}

/// What a load produced.
pub enum Opened {
    Snapshot(Box<Prepared>),
    Profiler(Box<crate::views::profiler::PreparedProfiler>),
    /// msMemScope's comparison of two runs (`memory_compare_*.csv`): a table.
    MemscopeCompare(Vec<memsight_core::memscope::compare::CompareRow>),
}

impl Source {
    pub fn name(&self) -> String {
        match self {
            Self::Path(p) => p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            Self::Bytes { name, .. } => name.clone(),
            Self::Profiler(paths) => paths
                .iter()
                .map(|p| Self::Path(p.clone()).name())
                .collect::<Vec<_>>()
                .join(" + "),
        }
    }

    /// The file or folder, for the recent list.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Self::Path(p) => Some(p),
            Self::Profiler(paths) if paths.len() == 1 => Some(&paths[0]),
            _ => None,
        }
    }

    /// Loads and prepares, on the calling thread.
    pub fn load(&self, progress: Option<&LoadProgress>) -> Result<Opened, String> {
        let profiler = |paths: &[PathBuf]| {
            memsight_core::profiler::open_with_progress(paths, progress)
                .map(|run| {
                    Opened::Profiler(Box::new(crate::views::profiler::PreparedProfiler::new(run)))
                })
                .map_err(|e| e.to_string())
        };
        let loaded = match self {
            Self::Path(path) if memsight_core::profiler::is_profiler_path(path) => {
                return profiler(std::slice::from_ref(path));
            }
            Self::Profiler(paths) => return profiler(paths),
            Self::Path(path) if memsight_core::memscope::compare::is_compare_path(path) => {
                return memsight_core::memscope::compare::read(path)
                    .map(Opened::MemscopeCompare)
                    .map_err(|e| e.to_string());
            }
            Self::Path(path) => Loaded::open(path, progress),
            Self::Bytes { name, bytes } => {
                load_bytes(bytes, std::path::Path::new(name)).map(|snapshot| {
                    if let Some(p) = progress {
                        p.set_phase(memsight_core::LoadPhase::Replaying);
                    }
                    Loaded::new(snapshot)
                })
            }
        };
        let loaded = loaded.map_err(|e| e.to_string())?;
        if let Some(p) = progress {
            p.set_phase(memsight_core::LoadPhase::Analysing);
        }
        Ok(Opened::Snapshot(Box::new(Prepared::new(loaded))))
    }

    /// Loads a snapshot; an error for profiler data.
    pub fn load_snapshot(&self, progress: Option<&LoadProgress>) -> Result<Prepared, String> {
        match self.load(progress)? {
            Opened::Snapshot(p) => Ok(*p),
            Opened::Profiler(_) => Err(format!("{} is profiler data, not a snapshot", self.name())),
            Opened::MemscopeCompare(_) => Err(format!(
                "{} is msMemScope's comparison of two runs, not a snapshot",
                self.name()
            )),
        }
    }
}

/// The next [`LoadJob::order`].
static NEXT_LOAD_ORDER: AtomicU64 = AtomicU64::new(0);

/// A load running on its own thread.
pub struct LoadJob {
    pub source: Source,
    /// When it was asked for, among every load of this process: a file's tab goes where the
    /// user's order puts it, whichever load finishes first.
    pub order: u64,
    pub progress: Arc<LoadProgress>,
    /// Size of the file, for the progress bar (0 when unknown).
    pub total_bytes: u64,
    result: Receiver<Result<Opened, String>>,
}

impl LoadJob {
    pub fn start(source: Source, ctx: &egui::Context) -> Self {
        let progress = Arc::new(LoadProgress::default());
        let total_bytes = match &source {
            Source::Path(p) if memsight_core::profiler::is_profiler_path(p) => {
                memsight_core::profiler::data_size(std::slice::from_ref(p))
            }
            Source::Path(p) => std::fs::metadata(p).map_or(0, |m| m.len()),
            Source::Bytes { bytes, .. } => bytes.len() as u64,
            Source::Profiler(paths) => memsight_core::profiler::data_size(paths),
        };
        let (send, result) = channel();
        let (job_source, job_progress, ctx) = (source.clone(), Arc::clone(&progress), ctx.clone());
        std::thread::spawn(move || {
            let outcome = job_source.load(Some(&job_progress));
            // The window may have closed meanwhile: nobody to tell.
            let _ = send.send(outcome);
            ctx.request_repaint();
        });
        Self {
            source,
            order: NEXT_LOAD_ORDER.fetch_add(1, Ordering::Relaxed) + 1,
            progress,
            total_bytes,
            result,
        }
    }

    pub fn cancel(&self) {
        self.progress.cancel.store(true, Ordering::Relaxed);
    }

    /// `None` while running.
    pub fn poll(&self) -> Option<Result<Opened, String>> {
        match self.result.try_recv() {
            Ok(outcome) => Some(outcome),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err(format!(
                "the loader of {} stopped unexpectedly",
                self.source.name()
            ))),
        }
    }

    /// Fraction done, from the bytes parsed (for compressed files, an estimate).
    pub fn fraction(&self) -> f32 {
        if self.total_bytes == 0 {
            return 0.0;
        }
        (self.progress.bytes_read.load(Ordering::Relaxed) as f32 / self.total_bytes as f32).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memsight_core::LoadPhase;

    #[test]
    fn a_load_says_what_it_does_after_the_file_is_read() {
        let g = memsight_core::r#gen::generate(&memsight_core::r#gen::GenOptions {
            events: 3000,
            ..memsight_core::r#gen::GenOptions::default()
        });
        let path =
            std::env::temp_dir().join(format!("memsight-phases-{}.pickle", std::process::id()));
        std::fs::write(&path, g.write_pickle(Vec::new()).expect("in memory")).expect("write");
        let progress = LoadProgress::default();
        assert_eq!(progress.phase(), LoadPhase::Reading);
        let source = Source::Path(path.clone());
        assert!(matches!(
            source.load(Some(&progress)),
            Ok(Opened::Snapshot(_))
        ));
        // Read, replayed, then analysed: the last phase is the detectors and the indexes.
        assert_eq!(progress.phase(), LoadPhase::Analysing);
        assert!(
            progress.events_read.load(Ordering::Relaxed) > 0,
            "the reading was reported"
        );
        std::fs::remove_file(path).expect("clean up");
    }
}

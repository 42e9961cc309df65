//! One file of a run read into a small summary, on rayon: the model is dropped as soon as the
//! summary is made, so only as many models are alive as there are workers.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHasher};
use serde::Serialize;

use super::{Run, RunFile};
use crate::Loaded;
use crate::detect::{FindingKind, Severity};
use crate::model::{Action, Snapshot, StackId};

/// Call sites listed per file at its peak.
const TOP_SITES: usize = 5;
/// Points of a file's allocated curve kept for the run's overlay.
pub const CURVE_POINTS: usize = 200;

/// What a run keeps of one file.
#[derive(Clone, Debug, Serialize)]
pub struct FileSummary {
    #[serde(flatten)]
    pub file: RunFile,
    /// Why the file could not be read; the figures below are then zero.
    pub error: Option<String>,
    /// Devices with a trace (or, without any trace, with segments).
    pub devices: usize,
    pub events: u64,
    /// The busiest device's peaks (the largest of the file's devices).
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    /// Allocated bytes at the end of the trace, on the device with the largest peak.
    pub final_allocated_bytes: u64,
    /// The least allocated bytes over the second half of the trace (the floor every step
    /// returns to), on that device.
    pub floor_allocated_bytes: u64,
    /// `oom` events in the trace, all devices together.
    pub oom_events: u64,
    /// Recorded without a trace (`_record_memory_history` off or `enabled='state'`).
    pub state_only: bool,
    pub findings: Vec<FindingBrief>,
    /// The call sites holding the most at the peak, most first.
    pub top_sites: Vec<SiteBytes>,
    /// Blocks alive when the file was dumped, as keys that compare across files.
    #[serde(skip)]
    pub live_at_dump: LiveBlocks,
    /// The busiest device's allocated bytes over its trace, at most [`CURVE_POINTS`] points
    /// (each the highest of its stretch of events, so no peak is lost).
    #[serde(skip)]
    pub curve: Vec<u64>,
}

/// A finding of one file, as the run compares it with the other files'.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FindingBrief {
    pub kind: FindingKind,
    pub severity: Severity,
    pub title: String,
    pub summary: String,
    pub suggestion: String,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SiteBytes {
    pub site: String,
    pub bytes: u64,
}

/// Blocks alive at the end of a file: one key per block (device, address, size and the text of
/// its stack, so the same block has the same key in two files), with its bytes and call site.
#[derive(Clone, Debug, Default)]
pub struct LiveBlocks {
    pub keys: Vec<u64>,
    pub bytes: Vec<u64>,
    /// Index into `sites`.
    pub site: Vec<u32>,
    pub sites: Vec<String>,
}

/// Files read so far, and a flag that stops the rest.
#[derive(Debug, Default)]
pub struct RunProgress {
    pub files_done: AtomicUsize,
    pub cancel: AtomicBool,
}

/// Every file of `run` summarised, in the run's order, on the global rayon pool; `None` when
/// cancelled.
pub fn summarize(run: &Run, progress: Option<&RunProgress>) -> Option<Vec<FileSummary>> {
    let summaries: Vec<Option<FileSummary>> = run
        .files
        .par_iter()
        .map(|file| {
            if progress.is_some_and(|p| p.cancel.load(Ordering::Relaxed)) {
                return None;
            }
            // A file memsight fails on (a bug) is one unreadable file, not the end of the run.
            let summary = std::panic::catch_unwind(|| summarize_file(file)).unwrap_or_else(|_| {
                let mut failed = empty_summary(file);
                failed.error = Some(
                    "memsight failed on this file (a bug: please report it with the file)".into(),
                );
                failed
            });
            if let Some(p) = progress {
                p.files_done.fetch_add(1, Ordering::Relaxed);
            }
            Some(summary)
        })
        .collect();
    summaries.into_iter().collect()
}

/// One file read, replayed, analysed and reduced to its summary.
pub fn summarize_file(file: &RunFile) -> FileSummary {
    let mut summary = empty_summary(file);
    let snapshot = match crate::load_path(&file.path, None) {
        Ok(snapshot) => snapshot,
        Err(e) => {
            summary.error = Some(e.to_string());
            return summary;
        }
    };
    let loaded = Loaded::new(snapshot);
    fill(&mut summary, &loaded);
    summary
}

/// A summary with nothing in it yet: the figures of a file that could not be read.
fn empty_summary(file: &RunFile) -> FileSummary {
    FileSummary {
        file: file.clone(),
        error: None,
        devices: 0,
        events: 0,
        peak_allocated_bytes: 0,
        peak_reserved_bytes: 0,
        final_allocated_bytes: 0,
        floor_allocated_bytes: 0,
        oom_events: 0,
        state_only: false,
        findings: Vec::new(),
        top_sites: Vec::new(),
        live_at_dump: LiveBlocks::default(),
        curve: Vec::new(),
    }
}

fn fill(summary: &mut FileSummary, loaded: &Loaded) {
    let snapshot = &loaded.snapshot;
    summary.devices = snapshot.devices.len();
    summary.state_only = snapshot.devices.iter().all(|d| d.trace.is_empty());
    let mut busiest: Option<usize> = None;
    for (i, (device, replay)) in snapshot.devices.iter().zip(&loaded.replays).enumerate() {
        summary.events += device.trace.len() as u64;
        summary.oom_events += device
            .trace
            .action
            .iter()
            .filter(|&&a| a == Action::Oom)
            .count() as u64;
        let peak = replay.peak_allocated.bytes.max(0) as u64;
        summary.peak_reserved_bytes = summary
            .peak_reserved_bytes
            .max(replay.peak_reserved.bytes.max(0) as u64);
        if busiest.is_none() || peak > summary.peak_allocated_bytes {
            summary.peak_allocated_bytes = peak;
            busiest = Some(i);
        }
    }
    if let Some(i) = busiest {
        let replay = &loaded.replays[i];
        let allocated = replay.allocated_bytes();
        summary.final_allocated_bytes = replay.final_totals().allocated_bytes.max(0) as u64;
        let second_half = &allocated[allocated.len() / 2..];
        summary.floor_allocated_bytes = second_half
            .iter()
            .min()
            .map_or(summary.final_allocated_bytes, |&b| b.max(0) as u64);
        summary.top_sites = top_sites(snapshot, replay);
        summary.curve = allocated
            .chunks(allocated.len().div_ceil(CURVE_POINTS).max(1))
            .map(|c| c.iter().copied().max().unwrap_or(0).max(0) as u64)
            .collect();
    }
    summary.findings = crate::detect::analyze(loaded)
        .into_iter()
        .map(|f| FindingBrief {
            kind: f.kind,
            severity: f.severity,
            title: f.title,
            summary: f.summary,
            suggestion: f.suggestion,
            bytes: f.bytes,
        })
        .collect();
    summary.live_at_dump = live_blocks(loaded);
}

/// The call sites with the most bytes alive at the device's peak allocated.
fn top_sites(snapshot: &Snapshot, replay: &crate::replay::DeviceReplay) -> Vec<SiteBytes> {
    let peak = replay.peak_allocated.event;
    let mut by_site: FxHashMap<String, u64> = FxHashMap::default();
    for lifetime in replay.lifetimes.iter().filter(|l| l.is_live_after(peak)) {
        let site = site_name(snapshot, lifetime.stack);
        *by_site.entry(site).or_default() += lifetime.requested_size_bytes;
    }
    let mut sites: Vec<SiteBytes> = by_site
        .into_iter()
        .map(|(site, bytes)| SiteBytes { site, bytes })
        .collect();
    sites.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)));
    sites.truncate(TOP_SITES);
    sites
}

fn site_name(snapshot: &Snapshot, stack: StackId) -> String {
    crate::frames::headline_frame(snapshot, stack).unwrap_or_else(|| "(no stack)".to_string())
}

/// Every block alive at the end of the file, keyed so the same block has the same key in
/// another dump of the same rank.
fn live_blocks(loaded: &Loaded) -> LiveBlocks {
    let snapshot = &loaded.snapshot;
    let mut live = LiveBlocks::default();
    let mut stack_hash: FxHashMap<StackId, (u64, u32)> = FxHashMap::default();
    let mut site_index: FxHashMap<String, u32> = FxHashMap::default();
    for (device, replay) in snapshot.devices.iter().zip(&loaded.replays) {
        for lifetime in replay
            .lifetimes
            .iter()
            .filter(|l| l.free_completed_event.is_none())
        {
            let (hash, site) = *stack_hash.entry(lifetime.stack).or_insert_with(|| {
                let mut h = FxHasher::default();
                for frame in snapshot.stack_frames(lifetime.stack) {
                    snapshot.str(frame.filename).hash(&mut h);
                    frame.line.hash(&mut h);
                    snapshot.str(frame.name).hash(&mut h);
                }
                let name = site_name(snapshot, lifetime.stack);
                let next = site_index.len() as u32;
                let site = *site_index.entry(name.clone()).or_insert_with(|| {
                    live.sites.push(name);
                    next
                });
                (h.finish(), site)
            });
            let mut key = FxHasher::default();
            (
                device.ordinal,
                lifetime.addr,
                lifetime.requested_size_bytes,
                hash,
            )
                .hash(&mut key);
            live.keys.push(key.finish());
            live.bytes.push(lifetime.requested_size_bytes);
            live.site.push(site);
        }
    }
    live
}

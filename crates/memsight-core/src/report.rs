//! Plain-data reports of a loaded snapshot, serialized by the command line as JSON. Their keys are
//! a promise to scripts: add keys, never rename them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Loaded;
use crate::model::{Action, BlockState, Device, Snapshot, Warning};
use crate::replay::{DeviceReplay, PoolBlock, PoolState};

/// `memsight stats --json`.
#[derive(Clone, Debug, Serialize)]
pub struct StatsReport {
    pub devices: Vec<DeviceStats>,
    /// Warnings of the loader and the replay, as text.
    pub warnings: Vec<String>,
    /// The same warnings, structured.
    pub warning_details: Vec<Warning>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DeviceStats {
    pub device: u32,
    pub trace_events: usize,
    /// Event count by action name, sorted by name.
    pub actions: BTreeMap<String, u64>,
    /// Segments in the final state.
    pub segments: usize,
    /// Pieces of the final segments: live blocks plus free gaps (kept for scripts; the two
    /// below are what a reader wants).
    pub blocks: usize,
    /// Live blocks (allocated or pending free) in the final state.
    pub live_blocks: usize,
    /// Free gaps (inactive blocks) in the final state.
    pub free_gaps: usize,
    pub reserved_bytes_final: i64,
    pub allocated_bytes_final: i64,
    pub active_bytes_final: i64,
    pub peak_reserved_bytes: i64,
    pub peak_allocated_bytes: i64,
    pub peak_active_bytes: i64,
    /// Event right after which each peak was reached (`null`: before the first event).
    pub peak_reserved_event: Option<u32>,
    pub peak_allocated_event: Option<u32>,
    pub peak_active_event: Option<u32>,
    pub has_time: bool,
    /// Last minus first `time_us`, when the trace has times that can be one run's (see
    /// `Trace::plausible_time_span_us`; a warning says what is wrong otherwise).
    pub time_span_us: Option<i64>,
    pub streams: usize,
    pub lifetimes: usize,
    /// msMemScope recordings that carry both its `inefficient_type` flags and the ACCESS rows
    /// they come from: how far memsight's flags agree with msMemScope's.
    pub inefficient_flags_agreement: Option<crate::memscope::inefficient::FlagAgreement>,
    /// msMemScope's measurements of the whole device (SNAPSHOT rows): how many, and the fullest
    /// with the pool's share of it.
    pub device_memory_samples: usize,
    pub device_memory_fullest: Option<crate::device_memory::MeasuredMemory>,
    /// The caching allocator `whatif` replays this trace through, and the file's evidence for it.
    pub allocator: crate::whatif::AllocatorKind,
}

impl StatsReport {
    pub fn new(loaded: &Loaded) -> Self {
        let snapshot = &loaded.snapshot;
        let devices = snapshot
            .devices
            .iter()
            .zip(&loaded.replays)
            .map(|(device, replay)| device_stats(snapshot, device, replay))
            .collect();
        let warning_details = loaded.warnings.clone();
        Self {
            devices,
            warnings: warning_details.iter().map(ToString::to_string).collect(),
            warning_details,
        }
    }
}

fn device_stats(snapshot: &Snapshot, device: &Device, replay: &DeviceReplay) -> DeviceStats {
    let trace = &device.trace;
    let mut actions: BTreeMap<String, u64> = BTreeMap::new();
    let mut counts: BTreeMap<Action, u64> = BTreeMap::new();
    for &a in &trace.action {
        *counts.entry(a).or_default() += 1;
    }
    for (a, c) in counts {
        *actions
            .entry(a.name(&snapshot.strings).to_string())
            .or_default() += c;
    }
    let final_totals = replay.final_totals();
    // The final pool as `memsight state` shows it (blocks placed by address in the segments
    // the replay ends with), so the two commands never count a file's blocks differently.
    let final_pool = replay.pool_after(
        device,
        replay.event_count().checked_sub(1).map(|n| n as u32),
    );
    let mut streams: Vec<u32> = trace.stream.clone();
    streams.extend(device.segments.iter().map(|s| s.stream));
    streams.sort_unstable();
    streams.dedup();
    DeviceStats {
        device: device.ordinal,
        trace_events: trace.len(),
        actions,
        segments: final_pool.segments.len(),
        blocks: final_pool.segments.iter().map(|s| s.blocks.len()).sum(),
        live_blocks: final_pool
            .segments
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state != BlockState::Inactive)
            .count(),
        free_gaps: final_pool.segments.iter().map(|s| s.gaps().0).sum(),
        reserved_bytes_final: final_totals.reserved_bytes,
        allocated_bytes_final: final_totals.allocated_bytes,
        active_bytes_final: final_totals.active_bytes,
        peak_reserved_bytes: replay.peak_reserved.bytes,
        peak_allocated_bytes: replay.peak_allocated.bytes,
        peak_active_bytes: replay.peak_active.bytes,
        peak_reserved_event: replay.peak_reserved.event,
        peak_allocated_event: replay.peak_allocated.event,
        peak_active_event: replay.peak_active.event,
        has_time: trace.has_time(),
        // `None` also where the times contradict themselves (a warning says how).
        time_span_us: trace.plausible_time_span_us(),
        streams: streams.len(),
        lifetimes: replay.lifetimes.len(),
        inefficient_flags_agreement: crate::memscope::inefficient::agreement(device),
        device_memory_samples: device.memory_samples.len(),
        device_memory_fullest: crate::device_memory::fullest(device, replay),
        allocator: crate::whatif::allocator_of(&crate::whatif::Recording {
            snapshot,
            device,
            replay,
        }),
    }
}

/// `memsight state --json`: the pool right after one event.
#[derive(Clone, Debug, Serialize)]
pub struct StateReport {
    pub device: u32,
    /// `null`: before the first event.
    pub event: Option<u32>,
    pub reserved_bytes: i64,
    pub allocated_bytes: i64,
    pub active_bytes: i64,
    pub segments: Vec<SegmentReport>,
    /// Live blocks outside every segment (only in inconsistent files).
    pub unplaced_blocks: Vec<PoolBlock>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SegmentReport {
    pub address: u64,
    pub total_size: u64,
    /// Stream number (order of first appearance).
    pub stream: u32,
    /// The raw stream value from the file.
    pub stream_raw: String,
    pub pool: Option<(String, String)>,
    pub is_expandable: bool,
    pub free_gaps: usize,
    pub largest_gap_bytes: u64,
    pub blocks: Vec<BlockReport>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BlockReport {
    pub address: u64,
    pub size: u64,
    pub requested_size: u64,
    pub state: &'static str,
    pub size_exact: bool,
    /// What the block is for ([`crate::category`]); `null` for free gaps.
    pub category: Option<crate::category::Category>,
}

impl StateReport {
    /// `categories`: by lifetime id, as [`crate::category::classify`] gives them.
    pub fn new(
        snapshot: &Snapshot,
        ordinal: u32,
        pool: &PoolState,
        categories: &[crate::category::Category],
    ) -> Self {
        let segments = pool
            .segments
            .iter()
            .map(|s| {
                let (free_gaps, largest_gap_bytes) = s.gaps();
                SegmentReport {
                    address: s.address,
                    total_size: s.total_size_bytes,
                    stream: s.stream,
                    stream_raw: snapshot
                        .streams
                        .get(s.stream as usize)
                        .map_or_else(String::new, ToString::to_string),
                    pool: snapshot
                        .pools
                        .get(s.pool as usize)
                        .map(|(a, b)| (a.to_string(), b.to_string())),
                    is_expandable: s.is_expandable,
                    free_gaps,
                    largest_gap_bytes,
                    blocks: s
                        .blocks
                        .iter()
                        .map(|b| BlockReport {
                            address: b.address,
                            size: b.size_bytes,
                            requested_size: b.requested_size_bytes,
                            state: b.state.name(),
                            size_exact: b.size_exact,
                            category: b
                                .lifetime
                                .and_then(|id| categories.get(id as usize).copied()),
                        })
                        .collect(),
                }
            })
            .collect();
        Self {
            device: ordinal,
            event: pool.event,
            reserved_bytes: pool.totals.reserved_bytes,
            allocated_bytes: pool.totals.allocated_bytes,
            active_bytes: pool.totals.active_bytes,
            segments,
            unplaced_blocks: pool.unplaced_blocks.clone(),
        }
    }

    /// Live blocks (allocated or pending free) in the report.
    pub fn live_blocks(&self) -> usize {
        self.segments
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state != BlockState::Inactive.name())
            .count()
    }
}

/// `memsight analyze --json`: the findings of each file.
#[derive(Clone, Debug, Serialize)]
pub struct AnalysisReport {
    pub files: Vec<FileFindings>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FileFindings {
    pub file: String,
    pub findings: Vec<FindingReport>,
}

/// A [`Finding`](crate::detect::Finding) with its stack and times resolved.
#[derive(Clone, Debug, Serialize)]
pub struct FindingReport {
    pub kind: crate::detect::FindingKind,
    pub severity: crate::detect::Severity,
    pub device: u32,
    /// Every device with this same finding, where there are several (`device` is the first);
    /// absent where the finding is one device's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<u32>,
    /// The profiler rank (folder) of a profiler finding; `null` for snapshots.
    pub rank: Option<String>,
    pub title: String,
    pub summary: String,
    pub bytes: u64,
    /// First and last event of the evidence (for profiler data: samples of the rank's
    /// `PTA+GE` curve, or operator rows).
    pub events: [u32; 2],
    /// Profiler data: the CSV file and its lines (1-based) the evidence is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_lines: Option<crate::detect::SourceLines>,
    /// Times of those events, when the trace has times.
    pub time_us: Option<[i64; 2]>,
    /// The one event whose pool state shows the evidence, when there is one.
    pub focus_event: Option<u32>,
    /// Innermost first.
    pub stack: Vec<FrameReport>,
    /// The innermost frame of the user's code (`name (file:line)`), internal frames skipped.
    pub top_frame: Option<String>,
    /// The finding's bytes by category of allocation (`[{category, bytes}]`, largest first), for
    /// findings about allocations (the peak, a leak); empty otherwise.
    pub breakdown: Vec<crate::detect::CategoryBytes>,
    /// The finding's bytes by owner, where the file names owners (msMemScope): they add up to
    /// `bytes`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<crate::owner::OwnerBytes>,
    /// Inefficient memory: each of msMemScope's rules, its blocks, bytes and owners.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<crate::detect::RuleBlocks>,
    pub suggestion: String,
    /// What in the file each claim rests on, one line each; absent where the finding's own
    /// figures are all its evidence.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FrameReport {
    pub filename: String,
    pub line: i64,
    pub name: String,
}

impl FindingReport {
    /// `f` with its times, frames and headline frame resolved by the caller.
    fn resolved(
        f: &crate::detect::Finding,
        time_us: Option<[i64; 2]>,
        stack: Vec<FrameReport>,
        top_frame: Option<String>,
    ) -> Self {
        Self {
            kind: f.kind,
            severity: f.severity,
            device: f.device,
            devices: f.devices.clone(),
            rank: f.rank.clone(),
            title: f.title.clone(),
            summary: f.summary.clone(),
            bytes: f.bytes,
            events: [f.events.0, f.events.1],
            source_lines: f.source_lines.clone(),
            time_us,
            focus_event: f.focus_event,
            stack,
            top_frame,
            breakdown: f.breakdown.clone(),
            owners: f.owners.clone(),
            rules: f.rules.clone(),
            suggestion: f.suggestion.clone(),
            evidence: f.evidence.clone(),
        }
    }
}

impl FileFindings {
    /// Findings on profiler data: times from the finding itself, no stacks.
    pub fn from_profiler(file: String, findings: &[crate::detect::Finding]) -> Self {
        let findings = findings
            .iter()
            .map(|f| {
                let time_us = f
                    .time_range_us
                    .map(|(a, b)| [a.round() as i64, b.round() as i64]);
                FindingReport::resolved(f, time_us, Vec::new(), None)
            })
            .collect();
        Self { file, findings }
    }

    /// Findings on a snapshot: times from its trace, frames from its stacks.
    pub fn new(file: String, loaded: &Loaded, findings: &[crate::detect::Finding]) -> Self {
        let s = &loaded.snapshot;
        let findings = findings
            .iter()
            .map(|f| {
                let trace = s.device(f.device).map(|d| &d.trace);
                let time = |e: u32| {
                    trace
                        .and_then(|t| t.time_us.get(e as usize).copied())
                        .filter(|&t| t != crate::model::NO_TIME)
                };
                let stack = s
                    .stack_frames(f.stack)
                    .map(|fr| FrameReport {
                        filename: s.str(fr.filename).to_string(),
                        line: fr.line,
                        name: s.str(fr.name).to_string(),
                    })
                    .collect();
                FindingReport::resolved(
                    f,
                    time(f.events.0).zip(time(f.events.1)).map(|(a, b)| [a, b]),
                    stack,
                    crate::frames::headline_frame(s, f.stack),
                )
            })
            .collect();
        Self { file, findings }
    }
}

//! Two recordings side by side: what grew, where, and by how much.
//!
//! **Snapshots.** Devices are paired by index among the devices that have a trace (or chosen;
//! devices left without a partner are named in the notes).
//! Allocations of A and B are matched by *call site*: a stack's frames (file, function, line)
//! with the internal frames dropped and repeats collapsed, as [`crate::frames`] shows them (all
//! frames when every one is internal). What is left unmatched is matched again, in three
//! fallbacks for two runs of an edited program: by files and functions alone (lines moved), then
//! also without the outermost `<module>` frames (the script's top level, which names how the
//! program was started: `python train.py`, a launcher, `-m`), then by file names instead of
//! paths (another checkout or job folder). Within one fallback key, each side's call sites
//! are paired one for one in the order of their lines when both sides have as many (lines that
//! moved keep their order), else merged into one row. What still has no partner is `only_in`
//! its side, counted with zeros on the other.
//!
//! Per call site and side: the bytes alive at that side's peak allocated (the blocks counted in
//! allocated right after the peak event, by requested size), the allocations in the trace, the
//! bytes they requested and the largest. **The sum rule**: every block alive at a peak belongs
//! to exactly one row, so the rows' `delta_at_peak_bytes` add up to the difference of the peaks
//! exactly. Where a file's trace and its final segments disagree, the blocks do not add up to
//! the recorded peak; that remainder is `unattributed_at_peak_bytes` of the side (zero on every
//! fixture), and the rule reads Σ Δ + Δ unattributed = Δ peak.
//!
//! **Profiler runs**: [`profiler`].

pub mod profiler;

use std::collections::BTreeMap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::Loaded;
use crate::category::{Categories, Category, classify};
use crate::detect::steps;
use crate::frames::{headline_frame, is_internal};
use crate::model::{Action, BlockState, Device, NO_STACK, Snapshot, StackId};
use crate::replay::{DeviceReplay, LifetimeId};

/// One frame of a call site, as both files can name it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SiteFrame {
    pub filename: String,
    pub line: i64,
    pub name: String,
}

impl SiteFrame {
    /// `name (file:line)`, or `name` for C++ frames.
    pub fn text(&self) -> String {
        if self.filename == "??" {
            self.name.clone()
        } else {
            format!("{} ({}:{})", self.name, self.filename, self.line)
        }
    }
}

/// The call site of `stack`: its frames innermost first, internal ones dropped (all kept when
/// every frame is internal), consecutive repeats collapsed. Empty for no stack.
pub fn call_site(snapshot: &Snapshot, stack: StackId) -> Vec<SiteFrame> {
    let frames: Vec<_> = snapshot.stack_frames(stack).collect();
    let keep_internal = frames.iter().all(|f| is_internal(snapshot, f));
    let mut site: Vec<SiteFrame> = Vec::new();
    for frame in frames {
        if !keep_internal && is_internal(snapshot, frame) {
            continue;
        }
        let frame = SiteFrame {
            filename: snapshot.str(frame.filename).to_string(),
            line: frame.line,
            name: snapshot.str(frame.name).to_string(),
        };
        if site.last() != Some(&frame) {
            site.push(frame);
        }
    }
    site
}

/// What one side's allocations from one call site did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SiteFigures {
    /// Requested bytes of its blocks alive at the side's peak allocated.
    pub bytes_at_peak: u64,
    /// `alloc` events in the trace.
    pub allocs: u64,
    /// Bytes those allocations requested, together.
    pub bytes_requested: u64,
    /// The largest of them.
    pub largest_bytes: u64,
}

impl SiteFigures {
    fn add(&mut self, other: &SiteFigures) {
        self.bytes_at_peak += other.bytes_at_peak;
        self.allocs += other.allocs;
        self.bytes_requested += other.bytes_requested;
        self.largest_bytes = self.largest_bytes.max(other.largest_bytes);
    }

    fn is_empty(&self) -> bool {
        self.bytes_at_peak == 0 && self.allocs == 0
    }
}

/// Which recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    A,
    B,
}

/// How a row's call sites were paired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Matched {
    /// Same files, functions and lines (or a site only one side has).
    Exact,
    /// Same files and functions, other lines.
    FileFunction,
    /// Same files and functions below the script's top level (`<module>` frames), which differ.
    WithoutEntryPoint,
    /// Same file names and functions below the top level, in other folders.
    FileNames,
}

/// One row of the call-site table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallSiteDiff {
    /// The call site's frames (A's, where both have it), innermost first.
    pub stack: Vec<SiteFrame>,
    /// The frame that names it ([`headline_frame`]).
    pub top_frame: String,
    pub a: SiteFigures,
    pub b: SiteFigures,
    /// `b.bytes_at_peak - a.bytes_at_peak`.
    pub delta_at_peak_bytes: i64,
    /// The side that has it, when only one does.
    pub only_in: Option<Side>,
    pub matched_by: Matched,
    /// The stacks of each file this row stands for (to find its blocks on screen).
    #[serde(skip)]
    pub stacks_a: Vec<StackId>,
    #[serde(skip)]
    pub stacks_b: Vec<StackId>,
}

/// One side's device as a whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceFigures {
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub peak_active_bytes: u64,
    /// The event right after which allocated peaked (`None`: before the first event).
    pub peak_event: Option<u32>,
    pub events: u64,
    pub allocs: u64,
    pub bytes_requested: u64,
    /// `segment_alloc` + `segment_map` events.
    pub segment_allocs: u64,
    /// `segment_free` + `segment_unmap` events.
    pub segment_frees: u64,
    /// Training iterations, when something in the file marks them.
    pub iterations: Option<u64>,
    /// Peak allocated minus the bytes of the blocks alive at the peak (see the module doc).
    pub unattributed_at_peak_bytes: i64,
    /// The pool maps expandable segments (`segment_map` events or expandable segments).
    pub expandable_segments: bool,
}

/// Bytes alive at each side's peak of one category.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CategoryDiff {
    pub category: Category,
    pub a_bytes: u64,
    pub b_bytes: u64,
    pub delta_bytes: i64,
}

/// Bytes alive at each side's peak of one owner or one operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupDiff {
    pub name: String,
    pub a_bytes: u64,
    pub b_bytes: u64,
    pub delta_bytes: i64,
}

/// Blocks of no owner, in [`DeviceDiff::owners`].
pub const NO_OWNER: &str = crate::owner::NO_OWNER;
/// Blocks allocated in no operator, in [`DeviceDiff::operators`].
pub const NO_OPERATOR: &str = "(in no operator)";

/// One pair of devices compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceDiff {
    pub device_a: u32,
    pub device_b: u32,
    pub a: DeviceFigures,
    pub b: DeviceFigures,
    /// Largest |Δ at peak| first, then most bytes at either peak.
    pub call_sites: Vec<CallSiteDiff>,
    /// Every category, in [`Category::ALL`] order.
    pub categories: Vec<CategoryDiff>,
    /// By msMemScope's `owner` (whole, `PTA@gradient@ops`), largest |Δ| first; empty unless a
    /// side names owners. Every block alive at a peak is in one row ([`NO_OWNER`] included), so
    /// the rows add up as the call sites do.
    pub owners: Vec<GroupDiff>,
    /// By the operator that asked for the block (msMemScope's `ATen` / ATB operator, the
    /// `<operator>` frame of its stack), largest |Δ| first; empty unless a side names operators.
    /// Blocks asked for outside any operator are [`NO_OPERATOR`]; the rows add up the same way.
    pub operators: Vec<GroupDiff>,
    /// Both sides made the same requests: every call site allocated as often and as many bytes
    /// on both (and something was allocated).
    pub same_requests: bool,
    /// What a reader must know to read this pair (different kinds of device, a remainder the
    /// blocks do not explain).
    pub notes: Vec<String>,
}

impl DeviceDiff {
    /// `b.peak_allocated - a.peak_allocated`.
    pub fn peak_allocated_delta_bytes(&self) -> i64 {
        self.b.peak_allocated_bytes as i64 - self.a.peak_allocated_bytes as i64
    }

    /// The same requests, and the same blocks alive at both peaks: whatever differs in reserved
    /// bytes comes from how the allocator laid out its segments.
    pub fn differs_only_in_layout(&self) -> bool {
        self.same_requests
            && self.peak_allocated_delta_bytes() == 0
            && self.call_sites.iter().all(|c| c.delta_at_peak_bytes == 0)
    }
}

/// Two recordings compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub a: String,
    pub b: String,
    pub devices: Vec<DeviceDiff>,
    /// What a reader must know to read the figures (devices without a partner, …).
    pub notes: Vec<String>,
}

/// Why two recordings cannot be compared.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DiffError {
    #[error(
        "no trace to compare: the file records only the final pool (record with \
         torch.cuda.memory._record_memory_history() before the dump): {file}"
    )]
    NoTrace { file: String },
    #[error("no device {ordinal} with a trace (devices with one: {available}): {file}")]
    NoDevice {
        file: String,
        ordinal: u32,
        available: String,
    },
}

/// One recording: its name (the path, for messages and output) and what was loaded.
#[derive(Clone, Copy)]
pub struct Recording<'a> {
    pub name: &'a str,
    pub loaded: &'a Loaded,
}

impl<'a> Recording<'a> {
    /// Device `i` (index into `snapshot.devices`) with its categories.
    fn input<'c>(&self, i: usize, categories: &'c Categories) -> DeviceInput<'c>
    where
        'a: 'c,
    {
        DeviceInput {
            snapshot: &self.loaded.snapshot,
            device: &self.loaded.snapshot.devices[i],
            replay: &self.loaded.replays[i],
            categories,
        }
    }

    /// Indexes (into `snapshot.devices`) of the devices with a trace, by ordinal.
    fn traced(&self) -> Vec<usize> {
        let devices = &self.loaded.snapshot.devices;
        let mut traced: Vec<usize> = (0..devices.len())
            .filter(|&i| !devices[i].trace.is_empty())
            .collect();
        traced.sort_by_key(|&i| devices[i].ordinal);
        traced
    }

    fn chosen(&self, ordinal: u32) -> Result<usize, DiffError> {
        let traced = self.traced();
        let devices = &self.loaded.snapshot.devices;
        traced
            .iter()
            .copied()
            .find(|&i| devices[i].ordinal == ordinal)
            .ok_or_else(|| DiffError::NoDevice {
                file: self.name.to_string(),
                ordinal,
                available: traced
                    .iter()
                    .map(|&i| devices[i].ordinal.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// One device of one recording, with what the diff reads of it.
#[derive(Clone, Copy)]
pub struct DeviceInput<'a> {
    pub snapshot: &'a Snapshot,
    pub device: &'a Device,
    pub replay: &'a DeviceReplay,
    pub categories: &'a Categories,
}

/// Compares `a` with `b`: the devices given (`None`: paired by index among the devices with a
/// trace; one given: the other side's first traced device), on rayon.
pub fn diff(
    a: Recording,
    b: Recording,
    device_a: Option<u32>,
    device_b: Option<u32>,
) -> Result<Diff, DiffError> {
    for side in [a, b] {
        if side.traced().is_empty() {
            return Err(DiffError::NoTrace {
                file: side.name.to_string(),
            });
        }
    }
    let mut notes = Vec::new();
    let pairs: Vec<(usize, usize)> = match (device_a, device_b) {
        (None, None) => {
            let (ta, tb) = (a.traced(), b.traced());
            for (side, traced, other) in [("A", &ta, tb.len()), ("B", &tb, ta.len())] {
                if traced.len() > other {
                    let loaded = if side == "A" { a.loaded } else { b.loaded };
                    let alone: Vec<String> = traced[other..]
                        .iter()
                        .map(|&i| loaded.snapshot.devices[i].ordinal.to_string())
                        .collect();
                    notes.push(format!(
                        "{side}'s devices {} have no partner (choose with --device-a / --device-b)",
                        alone.join(", ")
                    ));
                }
            }
            ta.into_iter().zip(tb).collect()
        }
        (da, db) => {
            // One given: the other side's device of that ordinal where it has one traced.
            let pick = |side: Recording, d: Option<u32>, other: Option<u32>| match (d, other) {
                (Some(ordinal), _) => side.chosen(ordinal),
                (None, Some(ordinal)) => side.chosen(ordinal).or_else(|_| Ok(side.traced()[0])),
                (None, None) => Ok(side.traced()[0]),
            };
            vec![(pick(a, da, db)?, pick(b, db, da)?)]
        }
    };
    let categorized = |side: Recording, i: usize| {
        let (snapshot, replay) = (&side.loaded.snapshot, &side.loaded.replays[i]);
        classify(snapshot, &snapshot.devices[i], replay)
    };
    let devices = pairs
        .par_iter()
        .map(|&(ia, ib)| {
            let (cat_a, cat_b) = rayon::join(|| categorized(a, ia), || categorized(b, ib));
            diff_devices(&a.input(ia, &cat_a), &b.input(ib, &cat_b))
        })
        .collect();
    Ok(Diff {
        a: a.name.to_string(),
        b: b.name.to_string(),
        devices,
        notes,
    })
}

/// The kind of device a file names in its strings (frames, settings), when it names one:
/// `torch_npu` for an Ascend NPU, `cuda` for CUDA.
fn device_kind(snapshot: &Snapshot) -> Option<&'static str> {
    if snapshot.is_npu() {
        Some("an Ascend NPU (torch_npu)")
    } else if snapshot
        .strings
        .iter()
        .any(|s| s.contains("cuda") || s.contains("CUDA"))
    {
        Some("CUDA")
    } else {
        None
    }
}

/// One side's figures per call site, keyed by the call site's frames.
struct SideSites {
    figures: DeviceFigures,
    /// Call site → (figures, the stacks it stands for).
    sites: FxHashMap<Vec<SiteFrame>, (SiteFigures, Vec<StackId>)>,
    /// Bytes at the peak by category.
    categories: [u64; Category::ALL.len()],
    /// Bytes at the peak by owner and by operator (empty when the file names none).
    owners: FxHashMap<String, u64>,
    operators: FxHashMap<String, u64>,
}

/// The operator frame of `stack` (msMemScope's recordings put the operator that asked for a
/// block innermost, in the file `<operator>`).
fn operator_of(snapshot: &Snapshot, stack: StackId) -> Option<&str> {
    snapshot
        .stack_frames(stack)
        .find(|f| snapshot.str(f.filename) == "<operator>")
        .map(|f| snapshot.str(f.name))
}

/// The blocks counted in allocated right after `event`.
fn alive_at(replay: &DeviceReplay, event: Option<u32>) -> impl Iterator<Item = LifetimeId> + '_ {
    replay
        .lifetimes
        .iter()
        .enumerate()
        .filter(move |(_, l)| {
            l.is_live_after(event) && l.state_after(event) == BlockState::ActiveAllocated
        })
        .map(|(id, _)| id as LifetimeId)
}

/// Whether a side's device names owners, and whether its stacks name operators.
fn names_groups(input: &DeviceInput) -> (bool, bool) {
    let snapshot = input.snapshot;
    (
        crate::owner::has_owners(input.device),
        snapshot
            .frames
            .iter()
            .any(|f| snapshot.str(f.filename) == "<operator>"),
    )
}

/// One side's figures; by owner and by operator too where `(has_owners, has_operators)` (either
/// side naming them: then both are counted, so their rows add up).
fn side_sites(input: &DeviceInput, (has_owners, has_operators): (bool, bool)) -> SideSites {
    let DeviceInput {
        snapshot,
        device,
        replay,
        categories,
    } = *input;
    let trace = &device.trace;
    let mut per_stack: FxHashMap<StackId, SiteFigures> = FxHashMap::default();
    let mut figures = DeviceFigures {
        peak_allocated_bytes: replay.peak_allocated.bytes.max(0) as u64,
        peak_reserved_bytes: replay.peak_reserved.bytes.max(0) as u64,
        peak_active_bytes: replay.peak_active.bytes.max(0) as u64,
        peak_event: replay.peak_allocated.event,
        events: trace.len() as u64,
        iterations: steps::find(snapshot, device, replay, categories).map(|s| s.count() as u64),
        ..DeviceFigures::default()
    };
    for (i, &action) in trace.action.iter().enumerate() {
        match action {
            Action::Alloc => {
                let size = trace.size_bytes[i];
                let f = per_stack.entry(trace.stack[i]).or_default();
                f.allocs += 1;
                f.bytes_requested += size;
                f.largest_bytes = f.largest_bytes.max(size);
                figures.allocs += 1;
                figures.bytes_requested += size;
            }
            Action::SegmentAlloc => figures.segment_allocs += 1,
            Action::SegmentMap => {
                figures.segment_allocs += 1;
                figures.expandable_segments = true;
            }
            Action::SegmentFree | Action::SegmentUnmap => figures.segment_frees += 1,
            _ => {}
        }
    }
    figures.expandable_segments |= device.segments.iter().any(|s| s.is_expandable);
    let mut category_bytes = [0u64; Category::ALL.len()];
    let mut alive_bytes: u64 = 0;
    let (mut owners, mut operators) = (FxHashMap::default(), FxHashMap::default());
    for id in alive_at(replay, figures.peak_event) {
        let lifetime = &replay.lifetimes[id as usize];
        let size = lifetime.requested_size_bytes;
        per_stack.entry(lifetime.stack).or_default().bytes_at_peak += size;
        alive_bytes += size;
        if has_owners {
            let owner = match lifetime.alloc_event {
                Some(event) => snapshot.owner(trace, event as usize).unwrap_or(NO_OWNER),
                None => crate::owner::BEFORE_TRACE,
            };
            *owners.entry(owner.to_string()).or_default() += size;
        }
        if has_operators {
            let operator = operator_of(snapshot, lifetime.stack).unwrap_or(NO_OPERATOR);
            *operators.entry(operator.to_string()).or_default() += size;
        }
        let category = categories
            .of_lifetime
            .get(id as usize)
            .copied()
            .unwrap_or(Category::Unknown);
        let k = Category::ALL
            .iter()
            .position(|&c| c == category)
            .unwrap_or(0);
        category_bytes[k] += size;
    }
    figures.unattributed_at_peak_bytes = figures.peak_allocated_bytes as i64 - alive_bytes as i64;
    // Stacks with the same call site (they differ in internal frames) are one site.
    let mut stacks: Vec<(StackId, SiteFigures)> = per_stack.into_iter().collect();
    stacks.sort_unstable_by_key(|&(stack, _)| stack);
    let mut sites: FxHashMap<Vec<SiteFrame>, (SiteFigures, Vec<StackId>)> = FxHashMap::default();
    for (stack, f) in stacks {
        let key = if stack == NO_STACK {
            Vec::new()
        } else {
            call_site(snapshot, stack)
        };
        let site = sites.entry(key).or_default();
        site.0.add(&f);
        site.1.push(stack);
    }
    SideSites {
        figures,
        sites,
        categories: category_bytes,
        owners,
        operators,
    }
}

/// One side's call site while rows are matched.
struct Site {
    key: Vec<SiteFrame>,
    figures: SiteFigures,
    stacks: Vec<StackId>,
}

impl Site {
    fn lines(&self) -> Vec<i64> {
        self.key.iter().map(|f| f.line).collect()
    }
}

/// Frames without line numbers (the first fallback).
fn file_function(site: &[SiteFrame]) -> Option<Vec<(String, String)>> {
    let key: Vec<(String, String)> = site
        .iter()
        .map(|f| (f.filename.clone(), f.name.clone()))
        .collect();
    (!key.is_empty()).then_some(key)
}

/// Frames without line numbers and without the `<module>` frames (the second fallback): the
/// script's top level names how the program was started (`python train.py`, a launcher, `-m`),
/// not where it allocates. A site made only of top-level frames has no such key: two scripts'
/// top levels are not one call site.
fn without_entry_point(site: &[SiteFrame]) -> Option<Vec<(String, String)>> {
    let key: Vec<(String, String)> = inside_entry_point(site)
        .iter()
        .map(|f| (f.filename.clone(), f.name.clone()))
        .collect();
    (!key.is_empty()).then_some(key)
}

/// The frames below the outermost run of `<module>` frames (frames are innermost first).
fn inside_entry_point(site: &[SiteFrame]) -> &[SiteFrame] {
    let keep = site.len()
        - site
            .iter()
            .rev()
            .take_while(|f| f.name == "<module>")
            .count();
    &site[..keep]
}

/// [`without_entry_point`] with file names instead of paths (the last fallback): the same code
/// run from another checkout, node or job folder (`/home/a/repo/train.py`,
/// `/scratch/job7/repo/train.py`).
fn file_names(site: &[SiteFrame]) -> Option<Vec<(String, String)>> {
    let key: Vec<(String, String)> = inside_entry_point(site)
        .iter()
        .map(|f| {
            let name = f.filename.rsplit(['/', '\\']).next().unwrap_or(&f.filename);
            (name.to_string(), f.name.clone())
        })
        .collect();
    (!key.is_empty()).then_some(key)
}

/// Pairs the sites of `a` and `b` whose `key` is equal into rows (`how`): one for one where both
/// sides have as many with that key, in the order of their lines (lines that moved keep their
/// order); else all of a side's as one row. Sites without a key (`None`) are not paired.
/// Returns what has no partner.
fn pair_by<K: Ord>(
    a: Vec<Site>,
    b: Vec<Site>,
    key: impl Fn(&[SiteFrame]) -> Option<K>,
    how: Matched,
    rows: &mut Vec<CallSiteDiff>,
) -> (Vec<Site>, Vec<Site>) {
    let mut groups: BTreeMap<K, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for (k, site) in a.iter().enumerate() {
        if let Some(key) = key(&site.key) {
            groups.entry(key).or_default().0.push(k);
        }
    }
    for (k, site) in b.iter().enumerate() {
        if let Some(key) = key(&site.key) {
            groups.entry(key).or_default().1.push(k);
        }
    }
    let paired: Vec<(Vec<usize>, Vec<usize>)> = groups
        .into_values()
        .filter(|(ka, kb)| !ka.is_empty() && !kb.is_empty())
        .collect();
    let (mut a, mut b): (Vec<Option<Site>>, Vec<Option<Site>>) = (
        a.into_iter().map(Some).collect(),
        b.into_iter().map(Some).collect(),
    );
    let take = |sites: &mut Vec<Option<Site>>, ks: &[usize]| -> Vec<Site> {
        let mut taken: Vec<Site> = ks.iter().filter_map(|&k| sites[k].take()).collect();
        taken.sort_by_key(Site::lines);
        taken
    };
    for (ka, kb) in paired {
        let (sa, sb) = (take(&mut a, &ka), take(&mut b, &kb));
        if sa.len() == sb.len() {
            for (x, y) in sa.into_iter().zip(sb) {
                rows.push(row(x, y, how));
            }
        } else {
            rows.push(row(merged(sa), merged(sb), how));
        }
    }
    (
        a.into_iter().flatten().collect(),
        b.into_iter().flatten().collect(),
    )
}

/// The rows of the call-site table: exact matches, then each fallback on what is left, then
/// what has no partner on its own.
fn rows_of(a: Vec<Site>, b: Vec<Site>) -> Vec<CallSiteDiff> {
    let mut rows = Vec::new();
    let exact = |site: &[SiteFrame]| Some(site.to_vec());
    let (a, b) = pair_by(a, b, exact, Matched::Exact, &mut rows);
    let (a, b) = pair_by(a, b, file_function, Matched::FileFunction, &mut rows);
    let (a, b) = pair_by(
        a,
        b,
        without_entry_point,
        Matched::WithoutEntryPoint,
        &mut rows,
    );
    let (a, b) = pair_by(a, b, file_names, Matched::FileNames, &mut rows);
    let nothing = || Site {
        key: Vec::new(),
        figures: SiteFigures::default(),
        stacks: Vec::new(),
    };
    rows.extend(
        a.into_iter()
            .map(|site| row(site, nothing(), Matched::Exact)),
    );
    rows.extend(
        b.into_iter()
            .map(|site| row(nothing(), site, Matched::Exact)),
    );
    rows
}

/// Several call sites of one side as one: their figures together, under the first's frames.
fn merged(sites: Vec<Site>) -> Site {
    let mut all = Site {
        key: sites.first().map(|s| s.key.clone()).unwrap_or_default(),
        figures: SiteFigures::default(),
        stacks: Vec::new(),
    };
    for site in sites {
        all.figures.add(&site.figures);
        all.stacks.extend(site.stacks);
    }
    all
}

/// Compares two devices (of one file or two).
pub fn diff_devices(a: &DeviceInput, b: &DeviceInput) -> DeviceDiff {
    let (names_a, names_b) = (names_groups(a), names_groups(b));
    let named = (names_a.0 || names_b.0, names_a.1 || names_b.1);
    let (side_a, side_b) = rayon::join(|| side_sites(a, named), || side_sites(b, named));
    let sites = |map: FxHashMap<Vec<SiteFrame>, (SiteFigures, Vec<StackId>)>| -> Vec<Site> {
        map.into_iter()
            .map(|(key, (figures, stacks))| Site {
                key,
                figures,
                stacks,
            })
            .collect()
    };
    let mut rows = rows_of(sites(side_a.sites), sites(side_b.sites));
    // Sites that only had blocks freed before either peak and no allocation: nothing to show.
    rows.retain(|r| !(r.a.is_empty() && r.b.is_empty()));
    for r in &mut rows {
        r.top_frame = name_row(r, a.snapshot, b.snapshot);
    }
    rows.sort_by(|x, y| {
        let biggest = |r: &CallSiteDiff| r.a.bytes_at_peak.max(r.b.bytes_at_peak);
        y.delta_at_peak_bytes
            .unsigned_abs()
            .cmp(&x.delta_at_peak_bytes.unsigned_abs())
            .then(biggest(y).cmp(&biggest(x)))
            .then(
                y.b.bytes_requested
                    .max(y.a.bytes_requested)
                    .cmp(&x.b.bytes_requested.max(x.a.bytes_requested)),
            )
            .then_with(|| x.stack.cmp(&y.stack))
    });
    let categories = Category::ALL
        .iter()
        .enumerate()
        .map(|(k, &category)| CategoryDiff {
            category,
            a_bytes: side_a.categories[k],
            b_bytes: side_b.categories[k],
            delta_bytes: side_b.categories[k] as i64 - side_a.categories[k] as i64,
        })
        .collect();
    let same_requests = side_a.figures.allocs > 0
        && rows
            .iter()
            .all(|r| r.a.allocs == r.b.allocs && r.a.bytes_requested == r.b.bytes_requested);
    let mut notes = Vec::new();
    if let (Some(kind_a), Some(kind_b)) = (device_kind(a.snapshot), device_kind(b.snapshot))
        && kind_a != kind_b
    {
        notes.push(format!(
            "A is from {kind_a}, B from {kind_b}: compared by call site; their allocators lay out \
             segments differently, so reserved bytes and segment counts differ by design"
        ));
    }
    for (side, f) in [("A", &side_a.figures), ("B", &side_b.figures)] {
        // Either way round: a figure is never printed below zero.
        let unattributed = f.unattributed_at_peak_bytes;
        if unattributed > 0 {
            notes.push(format!(
                "{side}'s trace and final segments disagree: {} of its peak is in no block of the \
                 trace (counted apart from the call sites)",
                crate::units::format_bytes(unattributed)
            ));
        } else if unattributed < 0 {
            notes.push(format!(
                "{side}'s trace and final segments disagree: the blocks live at its peak add up to {} \
                 more than the bytes allocated there",
                crate::units::format_bytes(unattributed.saturating_neg())
            ));
        }
    }
    DeviceDiff {
        same_requests,
        notes,
        device_a: a.device.ordinal,
        device_b: b.device.ordinal,
        a: side_a.figures,
        b: side_b.figures,
        call_sites: rows,
        categories,
        owners: groups(&side_a.owners, &side_b.owners),
        operators: groups(&side_a.operators, &side_b.operators),
    }
}

/// Owners or operators of both sides as rows, largest |Δ| first, then most bytes, then name.
fn groups(a: &FxHashMap<String, u64>, b: &FxHashMap<String, u64>) -> Vec<GroupDiff> {
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    let mut rows: Vec<GroupDiff> = names
        .into_iter()
        .map(|name| {
            let (a_bytes, b_bytes) = (
                a.get(name).copied().unwrap_or(0),
                b.get(name).copied().unwrap_or(0),
            );
            GroupDiff {
                name: name.clone(),
                a_bytes,
                b_bytes,
                delta_bytes: b_bytes as i64 - a_bytes as i64,
            }
        })
        .collect();
    rows.sort_by(|x, y| {
        y.delta_bytes
            .unsigned_abs()
            .cmp(&x.delta_bytes.unsigned_abs())
            .then(y.a_bytes.max(y.b_bytes).cmp(&x.a_bytes.max(x.b_bytes)))
            .then_with(|| x.name.cmp(&y.name))
    });
    rows
}

fn row(a: Site, b: Site, matched_by: Matched) -> CallSiteDiff {
    let only_in = match (a.figures.is_empty(), b.figures.is_empty()) {
        (false, true) => Some(Side::A),
        (true, false) => Some(Side::B),
        _ => None,
    };
    CallSiteDiff {
        stack: if a.stacks.is_empty() { b.key } else { a.key },
        top_frame: String::new(),
        delta_at_peak_bytes: b.figures.bytes_at_peak as i64 - a.figures.bytes_at_peak as i64,
        a: a.figures,
        b: b.figures,
        only_in,
        matched_by,
        stacks_a: a.stacks,
        stacks_b: b.stacks,
    }
}

/// The row's headline: its first stack's [`headline_frame`] (A's where it has one).
fn name_row(row: &CallSiteDiff, a: &Snapshot, b: &Snapshot) -> String {
    let first = |stacks: &[StackId], snapshot: &Snapshot| {
        stacks
            .iter()
            .find(|&&s| s != NO_STACK)
            .and_then(|&s| headline_frame(snapshot, s))
    };
    first(&row.stacks_a, a)
        .or_else(|| first(&row.stacks_b, b))
        .unwrap_or_else(|| "(no stack recorded)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call site of frames `(file, function, line)`, innermost first, with `allocs` allocations.
    fn site(frames: &[(&str, &str, i64)], allocs: u64) -> Site {
        Site {
            key: frames
                .iter()
                .map(|&(filename, name, line)| SiteFrame {
                    filename: filename.into(),
                    line,
                    name: name.into(),
                })
                .collect(),
            figures: SiteFigures {
                bytes_at_peak: allocs * 512,
                allocs,
                bytes_requested: allocs * 512,
                largest_bytes: 512,
            },
            stacks: vec![allocs as StackId],
        }
    }

    /// Rows of A's and B's sites after every fallback, as (A's allocs, B's allocs, matched by);
    /// what has no partner is a row of its own.
    fn paired(a: Vec<Site>, b: Vec<Site>) -> Vec<(u64, u64, Matched)> {
        let rows = rows_of(a, b);
        let mut out: Vec<_> = rows
            .iter()
            .map(|r| (r.a.allocs, r.b.allocs, r.matched_by))
            .collect();
        out.sort_by_key(|r| (r.0, r.1));
        out
    }

    #[test]
    fn moved_lines_pair_in_line_order_and_unequal_groups_merge() {
        // Every line one lower in A: each call site finds its own.
        let step = |line, allocs| {
            site(
                &[("train.py", "step", line), ("train.py", "main", 40)],
                allocs,
            )
        };
        assert_eq!(
            paired(
                vec![step(11, 3), step(15, 800)],
                vec![step(12, 3), step(16, 800)]
            ),
            [
                (3, 3, Matched::FileFunction),
                (800, 800, Matched::FileFunction)
            ]
        );
        // Two call sites in A, one in B: one row of all of them (nothing paired by guess).
        assert_eq!(
            paired(vec![step(11, 3), step(15, 800)], vec![step(12, 803)]),
            [(803, 803, Matched::FileFunction)]
        );
    }

    #[test]
    fn only_the_outermost_top_level_frames_are_the_entry_point() {
        let launcher = |entry: &str, line| {
            site(
                &[
                    ("model.py", "forward", 9),
                    ("train.py", "main", 30),
                    (entry, "<module>", line),
                ],
                5,
            )
        };
        assert_eq!(
            paired(
                vec![launcher("run_fsdp.py", 15)],
                vec![launcher("train.py", 60)]
            ),
            [(5, 5, Matched::WithoutEntryPoint)]
        );
        // An import-time `<module>` frame inside the stack is part of the call site.
        let at_import = |module: &str| {
            site(
                &[
                    ("ops.py", "build", 3),
                    (module, "<module>", 1),
                    ("train.py", "main", 20),
                    ("train.py", "<module>", 2),
                ],
                7,
            )
        };
        let rows = paired(vec![at_import("a.py")], vec![at_import("b.py")]);
        assert_eq!(
            rows,
            [(0, 7, Matched::Exact), (7, 0, Matched::Exact)],
            "two call sites"
        );
        // Two top levels alone are not one call site.
        let top = |file: &str| site(&[(file, "<module>", 1)], 2);
        assert_eq!(paired(vec![top("a.py")], vec![top("b.py")]).len(), 2);
    }

    #[test]
    fn another_checkout_pairs_by_file_names() {
        let at = |root: &str| site(&[(&format!("{root}/repo/train.py"), "step", 7)], 4);
        assert_eq!(
            paired(vec![at("/home/a")], vec![at("/scratch/job7")]),
            [(4, 4, Matched::FileNames)]
        );
    }
}

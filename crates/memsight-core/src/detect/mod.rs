//! Detectors: each module looks for one kind of memory problem and returns plain-data
//! [`Finding`]s with the evidence behind the verdict, for every front end to render.
//!
//! One module per kind: `peak` (the anatomy of the peak), `leak`, `fragmentation`, `stall`
//! (which also reports explicit `empty_cache()` calls), `oom`, `outlier`, `imbalance` (across
//! devices), `inefficient` (msMemScope recordings), `pool_state` (recordings whose trace allocates
//! nothing: the pool at dump time, its idle cache, how it was recorded), `integrity` and
//! `settings` (which reads the others' findings); `steps` finds the training
//! iterations the leak and outlier detectors reason in, and [`crate::category`] what each
//! allocation is for.

pub mod fragmentation;
mod grown;
mod imbalance;
pub mod inefficient;
mod integrity;
mod leak;
mod oom;
mod outlier;
mod peak;
mod pool_state;
mod settings;
mod spike;
pub mod stall;
pub mod steps;

use std::fmt::Write as _;

use rustc_hash::FxHashMap;

use serde::Serialize;

use crate::Loaded;
use crate::category::{Categories, Category, classify};
use crate::model::{Device, NO_STACK, Snapshot, StackId};
use crate::replay::DeviceReplay;

/// What a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    Leak,
    Fragmentation,
    AllocatorStall,
    Oom,
    OutlierAllocation,
    Settings,
    /// Profiler data: process memory the framework's allocator does not account for.
    UnaccountedMemory,
    /// What the memory holds at the moment of peak allocated.
    Peak,
    /// Explicit `empty_cache()` calls: the program's choice, not an allocator stall.
    EmptyCache,
    /// The iterations found, when too few to judge a leak; or no trace at all.
    Iterations,
    /// Blocks kept from iteration to iteration that stopped accumulating: the allocated low point
    /// rose, then stayed flat for as many iterations again (a cache that filled), not a leak.
    BoundedGrowth,
    /// The same call sites allocating very different amounts on different devices or ranks.
    Imbalance,
    /// msMemScope recordings: blocks allocated early, freed late or left idle, with what they
    /// cost at the peak.
    InefficientMemory,
    /// The recording contradicts itself (allocations outside its segments, more reserved than
    /// the device holds), or its trace starts in the middle of the run.
    Integrity,
    /// A pool without a trace holding much cached memory that no block uses.
    IdleCache,
    /// Profiler data: the memory a static graph's plan holds over its node indices
    /// (`static_op_mem.csv`): planned by the graph compiler, summarised, never a leak.
    StaticGraph,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One diagnosis with its evidence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    /// The device the finding is about; where the same finding holds on several devices, the
    /// first of them, and `devices` lists them all.
    pub device: u32,
    /// Every device with this same finding (same title, figures, text and advice), in order,
    /// where there are several; empty where it is one device's.
    pub devices: Vec<u32>,
    pub title: String,
    /// One sentence: what happened and why it matters.
    pub summary: String,
    /// The bytes the verdict is about (requested, freed, leaked …).
    pub bytes: u64,
    /// First and last event of the evidence (device trace indices).
    pub events: (u32, u32),
    /// The one event to show first (its pool state is the evidence), when there is one.
    pub focus_event: Option<u32>,
    /// The profiler rank the finding is about (profiler data only).
    pub rank: Option<String>,
    /// Epoch microseconds of the evidence, for data whose evidence is a time span rather than
    /// events (profiler data).
    pub time_range_us: Option<(f64, f64)>,
    /// The call stack behind it, when there is one.
    #[serde(skip)]
    pub stack: StackId,
    /// Every call stack behind it where there are several (a leak from a dozen call sites),
    /// `stack` first; empty where there is one or none.
    #[serde(skip)]
    pub stacks: Vec<StackId>,
    /// The finding's bytes by category of allocation, largest first, where the finding is about
    /// allocations (a peak, a leak); empty otherwise.
    pub breakdown: Vec<CategoryBytes>,
    /// The finding's bytes by owner (msMemScope's `owner`, its whole path:
    /// `PTA@model@gradient`), largest first, where the file names owners; they add up to `bytes`.
    pub owners: Vec<crate::owner::OwnerBytes>,
    /// Inefficient memory: the blocks each of msMemScope's rules flags, with their bytes and
    /// owners; empty for other findings.
    pub rules: Vec<RuleBlocks>,
    pub suggestion: String,
    /// Profiler data: the lines of the CSV file its evidence is on (its `events` are sample
    /// indices, which no user can find in the file).
    pub source_lines: Option<SourceLines>,
    /// What in the file each claim of the finding rests on, one line each (`"workload: training
    /// — a backward pass at events 812–2301 (autograd frames)"`): the categories, the phase, the
    /// kind of run and how the file was recorded, where the finding says them.
    pub evidence: Vec<String>,
}

/// The blocks one of msMemScope's inefficiency rules flags on a device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleBlocks {
    /// `early_allocation`, `late_deallocation` or `temporary_idleness`.
    pub rule: &'static str,
    /// Blocks flagged and counted.
    pub blocks: u64,
    /// Their requested bytes, added up over the whole recording (not held at once).
    pub bytes: u64,
    /// The largest of them.
    pub largest_bytes: u64,
    /// Bytes × events held before the first use (early) or after the last (late); 0 for
    /// temporary idleness, whose blocks are held either way.
    pub wasted_byte_events: u128,
    /// Flagged too, but weights, gradients or optimizer state (by owner where the recording
    /// names them, else by call stack and phase), which live across operators by design.
    pub left_out_blocks: u64,
    /// The counted blocks' bytes by owner (its whole path), most first.
    pub owners: Vec<crate::owner::OwnerBytes>,
}

/// Lines of one CSV file, 1-based as an editor shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceLines {
    pub file: &'static str,
    pub first: u64,
    pub last: u64,
}

impl SourceLines {
    /// `file`'s lines `first..=last`, where both are known (0 is no line).
    pub fn of(file: &'static str, first: u64, last: u64) -> Option<Self> {
        (first > 0 && last >= first).then_some(Self { file, first, last })
    }

    /// "`memory_record.csv` line 451", "`memory_record.csv` lines 2–42".
    pub fn words(&self) -> String {
        if self.first == self.last {
            format!("{} line {}", self.file, self.first)
        } else {
            format!("{} lines {}–{}", self.file, self.first, self.last)
        }
    }
}

/// Bytes of one category of allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CategoryBytes {
    pub category: Category,
    pub bytes: u64,
}

impl Finding {
    /// A finding of `kind` with no evidence yet: the detectors fill in the rest.
    pub fn new(kind: FindingKind, severity: Severity, device: u32) -> Self {
        Self {
            kind,
            severity,
            device,
            devices: Vec::new(),
            title: String::new(),
            summary: String::new(),
            bytes: 0,
            events: (0, 0),
            focus_event: None,
            rank: None,
            time_range_us: None,
            stack: NO_STACK,
            stacks: Vec::new(),
            breakdown: Vec::new(),
            owners: Vec::new(),
            rules: Vec::new(),
            suggestion: String::new(),
            source_lines: None,
            evidence: Vec::new(),
        }
    }

    pub fn has_stack(&self) -> bool {
        self.stack != NO_STACK
    }

    /// Whether the finding holds on device `ordinal` (its own, or one of those it was merged
    /// with).
    pub fn is_about(&self, ordinal: u32) -> bool {
        self.device == ordinal || self.devices.contains(&ordinal)
    }
}

/// "207 MiB optimizer state, 116 MiB gradient": a [`breakdown`]'s parts in words, largest first.
fn parts_words(parts: &[CategoryBytes]) -> String {
    parts
        .iter()
        .map(|p| {
            format!(
                "{} {}",
                crate::units::format_bytes(p.bytes as i64),
                p.category.words()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `(category, bytes)` pairs summed per category, largest first, zeros left out.
pub fn breakdown(items: impl IntoIterator<Item = (Category, u64)>) -> Vec<CategoryBytes> {
    let mut sums = [0u64; Category::ALL.len()];
    for (category, bytes) in items {
        sums[category as usize] += bytes;
    }
    let mut out: Vec<CategoryBytes> = Category::ALL
        .iter()
        .zip(sums)
        .filter(|&(_, bytes)| bytes > 0)
        .map(|(&category, bytes)| CategoryBytes { category, bytes })
        .collect();
    out.sort_by_key(|c| std::cmp::Reverse(c.bytes));
    out
}

/// What the traced program does with the device, as its trace shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// A backward pass, an optimizer step, gradients or optimizer state.
    Training,
    /// Forward passes alone, in a trace whose stacks would show backward or an optimizer.
    Inference,
    /// No trace, or no stacks to tell by.
    Unknown,
}

impl Workload {
    fn of(snapshot: &Snapshot, device: &Device, categories: &Categories) -> Self {
        let trace = &device.trace;
        // An `Optimizer.*` annotation (`Optimizer.zero_grad#AdamW.zero_grad`,
        // `Optimizer.step#…`) shows an optimizer whether or not its memory is in the trace. Of
        // any device: one process's annotations name the device current when they were made,
        // and `nn.DataParallel` trains on the others too (`cuda_4gpu_expandable_oom`'s device 1;
        // a generated file's second device that only validated is "training" by it too).
        let optimizer_annotated = snapshot
            .annotations
            .iter()
            .any(|a| a.name.starts_with("Optimizer."));
        if categories.trains() || optimizer_annotated {
            Self::Training
        } else if trace.action.contains(&crate::model::Action::Alloc)
            && trace.stack.iter().any(|&s| s != NO_STACK)
        {
            Self::Inference
        } else {
            Self::Unknown
        }
    }
}

/// How the backward passes were told: by autograd's frames, or by the thread that made them.
fn backward_told_by(cx: &DeviceContext) -> &'static str {
    if cx.categories.backward_by_thread {
        "allocations without a stack, in a file that records Python frames alone: autograd's \
         engine thread"
    } else {
        "autograd frames"
    }
}

impl Workload {
    /// "workload: training — …": what in the trace shows the kind of run.
    pub fn evidence(self, cx: &DeviceContext) -> String {
        let runs = |phase| cx.categories.runs.iter().filter(move |r| r.phase == phase);
        let mut shown: Vec<String> = Vec::new();
        if let (Some(first), Some(last)) = (
            runs(crate::category::Phase::Backward).next(),
            runs(crate::category::Phase::Backward).next_back(),
        ) {
            // The last pass ends before the next phase's first allocation and the segment
            // the pool made for it (an auditor: "event 22 is already the optimizer step's").
            let action = &cx.device.trace.action;
            let mut end = last.own_end;
            while end > last.start + 1
                && matches!(
                    action[end as usize - 1],
                    crate::model::Action::SegmentAlloc | crate::model::Action::SegmentMap
                )
            {
                end -= 1;
            }
            shown.push(format!(
                "backward passes at events {}–{} ({})",
                first.start,
                end - 1,
                backward_told_by(cx)
            ));
        }
        let steps = runs(crate::category::Phase::Optimizer).count();
        shown.extend(optimizer_steps_words(cx, steps));
        if let Some(a) = cx
            .snapshot
            .annotations
            .iter()
            .find(|a| a.name.starts_with("Optimizer."))
        {
            shown.push(format!("an annotation {}", a.name));
        }
        for (category, what) in [
            (Category::Gradient, "gradient block"),
            (Category::OptimizerState, "optimizer-state block"),
        ] {
            let n = cx
                .categories
                .of_lifetime
                .iter()
                .filter(|&&c| c == category)
                .count();
            if n > 0 && shown.len() < 3 {
                shown.push(format!("{n} {what}{}", if n == 1 { "" } else { "s" }));
            }
        }
        let optimizer_shown = steps > 0
            || shown.iter().any(|s| s.starts_with("an annotation"))
            || cx
                .categories
                .of_lifetime
                .contains(&Category::OptimizerState)
            // A frame of an optimizer anywhere: one that runs the model in a closure
            // (Lightning), or its zero_grad.
            || cx.categories.optimizer_frames;
        if !optimizer_shown {
            // A forward and backward alone: a gradient benchmark, accumulation, or a step the
            // recording stopped before (a held-out audit: "one forward and backward of a loss,
            // no optimizer" read as "training").
            shown.push(
                "no optimizer step recognised (no frame of torch/optim, a step or zero_grad, no \
                 optimizer annotation or state): whether the gradients are applied is not shown"
                    .to_string(),
            );
        }
        match self {
            Self::Training => format!("workload: training — {}", shown.join("; ")),
            Self::Inference => "workload: no training shown — allocations with call stacks, none \
                 of them in a backward pass or an optimizer step, and no optimizer annotation"
                .to_string(),
            Self::Unknown => "workload: not known — no allocation in the trace carries a call \
                 stack, and nothing else shows a backward pass or an optimizer"
                .to_string(),
        }
    }
}

/// What every detector of one device reads: the file, the device's replay, what each
/// allocation is for, and the training iterations, computed once.
pub struct DeviceContext<'a> {
    pub snapshot: &'a Snapshot,
    pub device: &'a Device,
    pub replay: &'a DeviceReplay,
    pub categories: Categories,
    pub steps: Option<steps::Steps>,
    pub workload: Workload,
    /// The trace allocates nothing (empty, or the one event an old `_record_memory_history(True)`
    /// keeps): the pool at dump time is all the file shows of this device, and the detectors
    /// that read history have nothing to read. `pool_state` analyses the pool instead.
    pub state_only: bool,
    /// `torch_npu` recorded this device ([`crate::whatif::device_is_npu`]): its names (`torch.npu`,
    /// `PYTORCH_NPU_ALLOC_CONF`, `npu-smi`) in every finding's advice.
    pub npu: bool,
}

impl<'a> DeviceContext<'a> {
    pub fn new(snapshot: &'a Snapshot, device: &'a Device, replay: &'a DeviceReplay) -> Self {
        let categories = classify(snapshot, device, replay);
        let steps = steps::find(snapshot, device, replay, &categories);
        let workload = Workload::of(snapshot, device, &categories);
        let state_only = !device.trace.action.contains(&crate::model::Action::Alloc);
        let npu = crate::whatif::device_is_npu(snapshot, device);
        Self {
            snapshot,
            device,
            replay,
            categories,
            steps,
            workload,
            state_only,
            npu,
        }
    }

    pub fn peak_allocated_bytes(&self) -> u64 {
        self.replay.peak_allocated.bytes.max(0) as u64
    }

    /// The environment variable that sets this device's allocator (`torch_npu` reads its own).
    pub fn alloc_conf_variable(&self) -> &'static str {
        if self.npu {
            "PYTORCH_NPU_ALLOC_CONF"
        } else {
            "PYTORCH_CUDA_ALLOC_CONF"
        }
    }
}

/// Most findings a file reports: one per kind per device already, leaks one per call site.
pub const MAX_FINDINGS: usize = 12;

/// Runs every detector on every device; most severe first, then by device and first event; at
/// most [`MAX_FINDINGS`], the least severe dropped first (a finding says how many leaks it stands
/// for when it groups several).
pub fn analyze(loaded: &Loaded) -> Vec<Finding> {
    analyze_with_categories(loaded).0
}

/// [`analyze`], and the categories it computed for every device (in `snapshot.devices` order),
/// for callers that show them too (the app), so they are computed once.
pub fn analyze_with_categories(loaded: &Loaded) -> (Vec<Finding>, Vec<Categories>) {
    let contexts: Vec<DeviceContext> = loaded
        .snapshot
        .devices
        .iter()
        .zip(&loaded.replays)
        .map(|(device, replay)| DeviceContext::new(&loaded.snapshot, device, replay))
        .collect();
    let mut findings = Vec::new();
    if contexts.is_empty() && !loaded.snapshot.format.memscope {
        findings.push(empty_recording(&loaded.snapshot));
    }
    for cx in &contexts {
        let first_of_device = findings.len();
        let integrity = integrity::detect(cx, &loaded.warnings);
        let mut peak = peak::detect(cx);
        if integrity.iter().any(|f| f.severity > Severity::Info) {
            for f in &mut peak {
                f.summary.push_str(
                    " This recording contradicts itself (see the finding on it): these figures \
                     may be wrong.",
                );
            }
        } else if !integrity.is_empty() {
            // The one note integrity gives: the trace begins in the middle of the run.
            for f in &mut peak {
                f.summary.push_str(
                    " The trace begins in the middle of the run (see the finding on it): this \
                     is the highest point of the recorded window, and a moment before it may \
                     have held more.",
                );
            }
        }
        let leaks = leak::detect(cx);
        link_leaks_to_peak(cx, &leaks, &mut peak);
        // Growth that stopped has its own note: the peak's "nothing accumulates" would deny it
        // (a held-out audit: 139 MiB kept over 13 iterations, under the flat margin).
        spike::note_one_time_spike(cx, &mut peak);
        if leaks.is_empty() {
            leak::note_unjudged(cx, &mut peak);
        } else if leaks.iter().all(|f| f.kind == FindingKind::BoundedGrowth) {
            peak.iter_mut().for_each(leak::advise_capacity);
        }
        let mut ooms = oom::detect(cx);
        let mut stalls = stall::detect(cx);
        link_leaks_to_oom(cx, &leaks, &mut ooms);
        let mut fragmentation = fragmentation::detect(cx);
        link_full_device_oom(cx, &ooms, &mut fragmentation, &mut stalls);
        link_checkpoint_oom(&ooms, &mut peak);
        let stalled = stalls.iter().any(|f| f.severity > Severity::Info);
        if ooms.is_empty() && !stalled {
            fragmentation
                .iter_mut()
                .for_each(fragmentation::cost_nothing_yet);
        }
        if fragmentation.is_empty() && ooms.is_empty() && !stalled {
            say_no_fragmentation(cx, &mut peak);
        }
        findings.extend(integrity);
        findings.extend(peak);
        findings.extend(leaks);
        let fragmented_until = fragmentation
            .iter()
            .filter(|f| f.severity > Severity::Info)
            .map(|f| f.events.1)
            .max();
        findings.extend(fragmentation);
        let ran_short = !ooms.is_empty() || stalled;
        findings.extend(ooms);
        findings.extend(outlier::detect(cx));
        findings.extend(stalls);
        findings.extend(inefficient::detect(cx));
        findings.extend(pool_state::detect(cx, fragmented_until, ran_short));
        say_nothing_to_fix(&mut findings[first_of_device..]);
    }
    findings.extend(imbalance::detect(&contexts));
    link_imbalance_to_oom(&mut findings);
    let advice = settings::detect(loaded, &findings);
    findings.extend(advice);
    let mut findings = merge_across_devices(findings);
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.device.cmp(&b.device))
            .then(a.events.cmp(&b.events))
    });
    findings.truncate(MAX_FINDINGS);
    (
        findings,
        contexts.into_iter().map(|cx| cx.categories).collect(),
    )
}

/// A snapshot with no segment and no event on any device: nothing to analyse, said as such
/// (silence would read as "checked and clean").
fn empty_recording(snapshot: &Snapshot) -> Finding {
    let api = if snapshot.is_npu() {
        "torch.npu.memory"
    } else {
        "torch.cuda.memory"
    };
    let mut f = Finding::new(FindingKind::Iterations, Severity::Info, 0);
    f.title = "Empty recording: no segments and no events".to_string();
    f.summary = "The file holds no segment and no event on any device: it was written before \
                 the process allocated device memory, or by a process that used none (memory \
                 history records the calling process's allocator only)."
        .to_string();
    f.suggestion = format!(
        "Dump the snapshot from the process that uses the device, after the part of the run to \
         study: call {api}._record_memory_history() before it and {api}._dump_snapshot(path) \
         after it."
    );
    f.evidence = vec!["segments: none; trace events: none on any device".to_string()];
    f
}

/// Findings that are the same on several devices (same kind, title, text, figures, events and
/// advice: devices running the same code alike) become one, naming them all in `devices`; the
/// first keeps its place.
fn merge_across_devices(findings: Vec<Finding>) -> Vec<Finding> {
    let same = |a: &Finding, b: &Finding| {
        a.kind == b.kind
            && a.severity == b.severity
            && a.rank == b.rank
            && a.title == b.title
            && a.summary == b.summary
            && a.suggestion == b.suggestion
            && a.bytes == b.bytes
            && a.events == b.events
            && a.breakdown == b.breakdown
    };
    let mut merged: Vec<Finding> = Vec::with_capacity(findings.len());
    for f in findings {
        if let Some(first) = merged
            .iter_mut()
            .find(|m| m.device != f.device && same(m, &f))
        {
            if first.devices.is_empty() {
                first.devices.push(first.device);
            }
            if !first.devices.contains(&f.device) {
                first.devices.push(f.device);
            }
        } else {
            merged.push(f);
        }
    }
    merged
}

/// "pending frees at the dump: …" where blocks in the final pool are `active_pending_free`:
/// freed by their tensors, held until work queued on another stream that used them is done
/// (`record_stream`). Active, not allocated: no leak, and no tensor's (batch 18's file 11 and
/// batch 19's file 12 held six and more; neither audit found them mentioned).
pub fn pending_frees_words(device: &crate::model::Device) -> Option<String> {
    let (blocks, bytes) = device
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == crate::model::BlockState::ActivePendingFree)
        .fold((0usize, 0u64), |(n, bytes), b| {
            (n + 1, bytes + b.size_bytes)
        });
    (blocks > 0).then(|| {
        format!(
            "pending frees at the dump: {blocks} block{} ({}) freed by their tensors and waiting \
             for work queued on another stream that used them (record_stream): active, not \
             allocated, and no leak",
            if blocks == 1 { "" } else { "s" },
            crate::units::format_bytes(bytes as i64)
        )
    })
}

/// "devices 0–3", "devices 0, 2 and 5", "device 1": the devices a finding is about, for a
/// sentence or a heading.
pub fn devices_words(device: u32, devices: &[u32]) -> String {
    if devices.len() < 2 {
        return format!("device {device}");
    }
    let mut sorted = devices.to_vec();
    sorted.sort_unstable();
    let consecutive = sorted.windows(2).all(|w| w[1] == w[0] + 1);
    if consecutive {
        return format!("devices {}–{}", sorted[0], sorted[sorted.len() - 1]);
    }
    let (last, rest) = sorted.split_last().expect("two or more");
    format!(
        "devices {} and {last}",
        rest.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Blocks `(stack, bytes)` by call site, most bytes first: `(line, bytes, blocks)`. A call site
/// is the line a user reads (the stack's headline frame), not the whole stack: one line reached
/// through several callers is one site (ctx512's `transformer.py:22` holds 10.4 GiB through a
/// dozen stacks, each under 1 GiB alone). By stack first (cheap), then each stack named once.
pub(super) fn sites_by_line(
    snapshot: &Snapshot,
    blocks: impl IntoIterator<Item = (StackId, u64)>,
) -> Vec<(String, u64, u64)> {
    let mut by_stack: FxHashMap<StackId, (u64, u64)> = FxHashMap::default();
    for (stack, bytes) in blocks {
        let site = by_stack.entry(stack).or_default();
        site.0 += bytes;
        site.1 += 1;
    }
    sites_by_name(
        by_stack
            .into_iter()
            .map(|(stack, (bytes, n))| (site_name(snapshot, stack), bytes, n)),
    )
}

/// Groups `(name, bytes, blocks)` by name, most bytes first.
pub(super) fn sites_by_name(
    groups: impl IntoIterator<Item = (String, u64, u64)>,
) -> Vec<(String, u64, u64)> {
    let mut by_name: FxHashMap<String, (u64, u64)> = FxHashMap::default();
    for (name, bytes, n) in groups {
        let site = by_name.entry(name).or_default();
        site.0 += bytes;
        site.1 += n;
    }
    let mut sites: Vec<(String, u64, u64)> =
        by_name.into_iter().map(|(s, (b, n))| (s, b, n)).collect();
    sites.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    sites
}

/// A stack's call site as the findings name it.
pub(super) fn site_name(snapshot: &Snapshot, stack: StackId) -> String {
    crate::frames::headline_frame(snapshot, stack)
        .unwrap_or_else(|| "blocks without a call stack".to_string())
}

/// "forward (model.py:22) 10.4 GiB in 452 blocks; …": the first `top` of `sites` (largest
/// first), and how many more hold as much as the last named (a list cut among equals reads as
/// if the named ones stood out).
pub(super) fn sites_words(sites: &[(String, u64, u64)], top: usize) -> String {
    let mut words = sites
        .iter()
        .take(top)
        .map(|(site, bytes, n)| {
            format!(
                "{site} {} in {n} block{}",
                crate::units::format_bytes(*bytes as i64),
                if *n == 1 { "" } else { "s" }
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    if let Some(last) = top.checked_sub(1).and_then(|k| sites.get(k)) {
        let equal = sites[top..].iter().take_while(|s| s.1 == last.1).count();
        words.push_str(&more_of_the_same(equal, "site", last.1));
    }
    words
}

/// "; and 2 more blocks of 250 MiB each": what a list cut at its last named item leaves out
/// of the same size (empty where nothing is).
pub(super) fn more_of_the_same(equal: usize, what: &str, bytes: u64) -> String {
    match equal {
        0 => String::new(),
        1 => format!(
            "; and 1 more {what} of {}",
            crate::units::format_bytes(bytes as i64)
        ),
        n => format!(
            "; and {n} more {what}s of {} each",
            crate::units::format_bytes(bytes as i64)
        ),
    }
}

/// `Most of …` → `most of …`: a sentence that follows "Then:".
pub(super) fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_lowercase().chain(chars).collect())
}

/// A peak right before an out-of-memory error in `torch.load`'s restore is that checkpoint, and
/// one right before a request that is a good part of what is live is that work's: its advice
/// points at the failure's (batch 34's held-out audit: a resumed rank's checkpoint on the wrong
/// GPU, its peak advised quantised weights).
fn link_checkpoint_oom(ooms: &[Finding], peaks: &mut [Finding]) {
    for oom in ooms.iter().filter(|f| f.kind == FindingKind::Oom) {
        // A peak right before a failed request that is a good part of what is live is that
        // work's, and the request is the lever (batch 36's held-out audit: a Dice loss's int64
        // one-hot failed, and the peak before it was advised a fused cross-entropy).
        let advice = if oom.summary.contains(oom::CHECKPOINT_RESTORE_CAUSE) {
            "This peak is the checkpoint torch.load was restoring when the device ran out (see \
             the out-of-memory finding): with map_location set to the host or to the device the \
             process works on, torch.load does not put it here."
        } else if oom.summary.contains(oom::LARGE_REQUEST_CAUSE) {
            "This peak is what was live when one large request failed right after it (see the \
             out-of-memory finding): that request is the lever first; what this peak holds \
             matters only if the run still does not fit without it."
        } else {
            continue;
        };
        let before = format!(
            "right before the out-of-memory error at event {}",
            oom.events.0
        );
        for peak in peaks
            .iter_mut()
            .filter(|f| f.kind == FindingKind::Peak && f.summary.contains(&before))
        {
            peak.suggestion = advice.to_string();
        }
    }
}

/// The blocks a leak keeps that are alive at the peak are named in the peak finding, and fixing
/// the leak comes first in its advice when they hold a tenth of the peak or more.
fn link_leaks_to_peak(cx: &DeviceContext, leaks: &[Finding], peaks: &mut [Finding]) {
    let stacks: Vec<StackId> = leaks
        .iter()
        .filter(|f| f.kind == FindingKind::Leak && f.has_stack())
        .flat_map(|f| {
            if f.stacks.is_empty() {
                vec![f.stack]
            } else {
                f.stacks.clone()
            }
        })
        .collect();
    if stacks.is_empty() {
        return;
    }
    let replay = cx.replay;
    let event = replay.peak_allocated.event;
    // Leaked bytes at the peak, and whether all of them are in the `retained` part.
    let (leaked, all_retained) =
        kept_by_the_leak(cx, &stacks, event)
            .iter()
            .fold((0u64, true), |(bytes, retained), &id| {
                (
                    bytes + replay.lifetimes[id as usize].requested_size_bytes,
                    retained && cx.categories.of_lifetime[id as usize] == Category::Retained,
                )
            });
    if leaked == 0 {
        return;
    }
    for f in peaks {
        let percent = (leaked * 100 + f.bytes / 2) / f.bytes.max(1);
        let held = format!(
            " Of this, {} ({percent}%) is blocks the leak keeps (see the Leak finding){}.",
            crate::units::format_bytes(leaked as i64),
            if all_retained {
                ": they are the 'retained' part above"
            } else {
                "; the breakdown above puts each of them in the category its stack and lifetime \
                 suggest"
            }
        );
        f.summary.push_str(&held);
        // Where the leaked blocks are half of the peak or more, advice on the peak's largest
        // part would be advice on the leak's own blocks: the leak's fix is the advice.
        if leaked * 2 >= f.bytes {
            f.suggestion = format!(
                "Fix the leak first: it holds {} of this peak ({percent}%), and more as \
                 the run goes on.",
                crate::units::format_bytes(leaked as i64),
            );
        } else if leaked * 10 >= f.bytes {
            let then = lowercase_first(&f.suggestion);
            f.suggestion = format!(
                "Fix the leak first: it holds {} of this peak, and more as the run goes on. \
                 Then: {then}",
                crate::units::format_bytes(leaked as i64),
            );
        }
    }
}

/// An out-of-memory error where blocks the leak keeps hold half the allocated memory or more is
/// the leak's: whatever this one request's fit, the next iteration needs more. Its cause and
/// advice say so (not fragmentation, which a few cached pieces made it look like), and
/// [`link_full_device_oom`] makes the allocator's release just before it part of it, not a stall
/// a setting removes (batch 22's held-out audit: a GAN's image pool kept each step's graph, 23.1
/// of 23.5 GiB at the failure, and three findings advised expandable segments).
fn link_leaks_to_oom(cx: &DeviceContext, leaks: &[Finding], ooms: &mut [Finding]) {
    let Some(leak) = leaks.iter().find(|f| f.kind == FindingKind::Leak) else {
        return;
    };
    let stacks: &[StackId] = if leak.stacks.is_empty() {
        std::slice::from_ref(&leak.stack)
    } else {
        &leak.stacks
    };
    let replay = cx.replay;
    for oom in ooms.iter_mut().filter(|f| f.kind == FindingKind::Oom) {
        let event = Some(oom.events.0);
        let leaked: u64 = kept_by_the_leak(cx, stacks, event)
            .iter()
            .map(|&id| replay.lifetimes[id as usize].requested_size_bytes)
            .sum();
        let allocated = replay.totals_after(event).allocated_bytes.max(0) as u64;
        if leaked == 0 || leaked.saturating_mul(2) < allocated {
            continue;
        }
        let Some(cut) = oom.summary.find(" allocated: ") else {
            continue;
        };
        oom.summary.truncate(cut + " allocated: ".len());
        let _ = write!(
            oom.summary,
            "{}: blocks the leak keeps hold {} of the {} allocated (see the Leak finding). \
             Whether or not this one request fits in a cached piece, the next iteration adds \
             more: no allocator setting makes room for it.",
            oom::LEAK_CAUSE,
            crate::units::format_bytes(leaked as i64),
            crate::units::format_bytes(allocated as i64),
        );
        oom.suggestion = "Fix the leak (see the Leak finding): its blocks are what fills the \
                          device."
            .to_string();
    }
}

/// The lifetimes a leak from `stacks` keeps at `event`: blocks of those call stacks allocated
/// there, made before the trace or in an iteration before `event`'s (kept past its end), or
/// never freed. A block of the same line made in this iteration and freed later in it is the
/// iteration's own (batch 23's held-out audit: a 3.07 GiB log-softmax of the line whose 64 KiB
/// per-token losses leaked was "blocks the leak keeps", and "fix the leak first" led the peak).
/// Where nothing marks iterations, only the never-freed ones (batch 24's: a streaming server's
/// states of the streams in flight, freed later, counted with the finished streams' kept ones).
fn kept_by_the_leak(cx: &DeviceContext, stacks: &[StackId], event: Option<u32>) -> Vec<u32> {
    let replay = cx.replay;
    let iteration_of = |e: u32| cx.steps.as_ref().and_then(|s| s.step_of(e));
    let now = event.and_then(iteration_of);
    replay
        .live_after(cx.device, event)
        .iter()
        .filter(|&&(_, id)| {
            let l = &replay.lifetimes[id as usize];
            l.state_after(event) == crate::model::BlockState::ActiveAllocated
                && stacks.contains(&l.stack)
                && (l.free_completed_event.is_none()
                    || now.is_some_and(|now| {
                        l.alloc_event
                            .is_none_or(|made| iteration_of(made).is_none_or(|k| k < now))
                    }))
        })
        .map(|&(_, id)| id)
        .collect()
}

/// Where the device has no fragmentation finding, no OOM and no stall, the peak says so with the
/// figure that shows it, where the pool reserved under a fifth more than was allocated then: "no
/// fragmentation" is a verdict users look for, and silence read as unchecked (batch 23's
/// held-out audit: most of the recall lost was such verdicts left unsaid).
fn say_no_fragmentation(cx: &DeviceContext, peaks: &mut [Finding]) {
    let totals = cx.replay.totals_after(cx.replay.peak_allocated.event);
    let (allocated, reserved) = (
        totals.allocated_bytes.max(0) as u64,
        totals.reserved_bytes.max(0) as u64,
    );
    let gap = reserved.saturating_sub(allocated);
    if allocated == 0
        || allocated > reserved
        || gap.saturating_mul(100) >= reserved.saturating_mul(NO_FRAGMENTATION_PERCENT)
    {
        return;
    }
    let figure = if gap == 0 {
        format!(
            "the pool reserved exactly what was allocated ({})",
            crate::units::format_bytes(reserved as i64)
        )
    } else {
        format!(
            "the pool reserved {}, {} more than was allocated ({}% of what it reserved)",
            crate::units::format_bytes(reserved as i64),
            crate::units::format_bytes(gap as i64),
            gap.saturating_mul(100).saturating_add(reserved / 2) / reserved.max(1)
        )
    };
    for f in peaks.iter_mut().filter(|f| f.kind == FindingKind::Peak) {
        let _ = write!(f.summary, " No fragmentation to fix: at the peak {figure}.");
    }
}

/// Where a device's peak already says "no leak" and "no fragmentation to fix" and nothing else
/// found on it is a problem (no out-of-memory error, stall, outlier, leak, contradiction or
/// warning), the peak says the trace needs nothing fixed, and its advice becomes what lowers the
/// peak if it must come down: batch 23's held-out audit found "healthy run, nothing to change"
/// the verdict most often left unsaid, and the peak's levers read as a problem's fix (chunking
/// advised to a healthy 208 MiB service). A store that stopped growing (a `BoundedGrowth` note:
/// "not a leak") says no leak as well (batch 35's re-audit: a video clip cache capped at 600
/// clips, its peak told to checkpoint activations without a condition). Where the device's only
/// problems are the allocator's (a stall, fragmentation), the peak is not what to fix and its
/// advice says so (batch 35's re-audit: a stalling run told to checkpoint activations).
fn say_nothing_to_fix(device_findings: &mut [Finding]) {
    let problems: Vec<&Finding> = device_findings
        .iter()
        .filter(|f| {
            f.severity > Severity::Info
                || matches!(
                    f.kind,
                    FindingKind::Leak
                        | FindingKind::Fragmentation
                        | FindingKind::AllocatorStall
                        | FindingKind::Oom
                        | FindingKind::OutlierAllocation
                        | FindingKind::Integrity
                        | FindingKind::InefficientMemory
                )
        })
        .collect();
    // A warning of the allocator's (an "Info" reserve grown for the peak's own tensors is none).
    let the_allocators = problems.iter().any(|f| f.severity > Severity::Info)
        && problems.iter().all(|f| {
            matches!(
                f.kind,
                FindingKind::AllocatorStall | FindingKind::Fragmentation
            )
        });
    // Only a reserve above the peak that cost nothing (a fragmentation note where nothing failed
    // or waited): the peak's levers are as optional as on a device without it (batch 37's
    // held-out audit: a healthy T5 run beside such a note told to checkpoint, unconditionally).
    // Not a reserve grown for the peak's own tensors: that one points at the peak as the lever
    // (batch 34's video decode, a wasteful peak, would be told "nothing needs fixing").
    let reserve_only = !problems.is_empty()
        && problems.iter().all(|f| {
            f.kind == FindingKind::Fragmentation
                && f.severity == Severity::Info
                && f.summary.contains(fragmentation::NOTHING_FAILED)
                && !f.title.starts_with(fragmentation::GROWN_FOR_THE_PEAK_TITLE)
        });
    let none_found = problems.is_empty();
    if !none_found && !the_allocators && !reserve_only {
        return;
    }
    let store_stopped = device_findings
        .iter()
        .any(|f| f.kind == FindingKind::BoundedGrowth);
    let healthy = |f: &Finding| {
        f.kind == FindingKind::Peak
            && (store_stopped || NO_LEAK_SAID.iter().any(|said| f.summary.contains(said)))
            && (the_allocators || reserve_only || f.summary.contains("No fragmentation to fix"))
    };
    // With no problem found but no leak verdict either (no iterations to compare), a peak made
    // mostly of the model's weights has levers as optional, though "nothing needs fixing" is not
    // said (batch 37's re-audit: a LoRA server's weights told to be quantised,
    // unconditionally). Not other parts: what a pass keeps can itself be the waste (forward
    // passes kept for one backward pass).
    let unjudged = |f: &Finding| {
        f.kind == FindingKind::Peak
            && none_found
            && f.breakdown
                .first()
                .is_some_and(|p| p.category == crate::category::Category::Parameter)
    };
    for peak in device_findings
        .iter_mut()
        .filter(|f| healthy(f) || unjudged(f))
    {
        let judged = healthy(peak);
        // The optimizer's multi-tensor temporaries are a lever too: foreach is the default,
        // not a defect (batch 36's held-out audit: a healthy two-GPU BLIP-2 run told to build
        // its optimizer with foreach=False, unconditionally).
        if peak::LARGEST_PART_LEADS
            .iter()
            .chain([&peak::FOREACH_LEAD])
            .any(|lead| peak.suggestion.starts_with(lead))
        {
            let condition = if the_allocators {
                "The peak is not this device's problem (its allocator finding says what is). \
                 Only if the peak must come down"
            } else {
                "Only if the peak must come down"
            };
            peak.suggestion = format!(
                "{condition} (to fit a smaller device, a larger batch or longer inputs): {}",
                lowercase_first(&peak.suggestion)
            );
        } else if judged
            && !the_allocators
            && peak.suggestion.starts_with(peak::UNTRACED_UNKNOWN_LEAD)
        {
            // Weights or a cache from before the trace: recording earlier says which, but
            // nothing needs it (batch 35's re-audit: a healthy MoE server whose advice led
            // with "Start recording before the model is loaded").
            peak.suggestion = format!(
                "Nothing to fix. Only to know what the memory from before the trace is: {}",
                lowercase_first(&peak.suggestion)
            );
        } else {
            continue;
        }
        if !judged {
            continue;
        }
        if reserve_only {
            peak.summary.push_str(
                " Nothing on this device needs fixing for memory: its trace shows no \
                 out-of-memory error, leak or allocator stall, and its reserve above the peak \
                 (the fragmentation note) cost this run nothing.",
            );
        } else if !the_allocators {
            peak.summary.push_str(
                " Nothing on this device needs fixing for memory: its trace shows no \
                 out-of-memory error, leak, allocator stall or fragmentation.",
            );
        }
    }
}

/// What a peak's summary says where the trace shows no leak: iterations' low points that stay,
/// returns of the allocated curve to one low point, or a trace that ends where it began.
const NO_LEAK_SAID: [&str; 4] = [
    "No leak",
    "so nothing leaks across those repetitions",
    "so nothing accumulates from one of these returns to the next",
    "so the trace keeps nothing it made",
];

/// A pool reserving under this share (percent) more than is allocated at the peak is not
/// fragmented.
const NO_FRAGMENTATION_PERCENT: u64 = 20;

/// An OOM that no allocator setting removes (the pass needed more than the device held, or a
/// leak filled it) was not fragmentation's doing, and the allocator's release and retry in the
/// pass that failed belongs to it: the fragmentation finding says it did not cause the OOM, and
/// such a stall becomes a note (batch 21's re-audit: a batch of 3,584-token inputs needing 27 GiB
/// more than the device held stood beside a fragmentation warning and a stall, both advising
/// expandable segments, and neither said it did not bear on the OOM).
fn link_full_device_oom(
    cx: &DeviceContext,
    ooms: &[Finding],
    fragmentation: &mut [Finding],
    stalls: &mut [Finding],
) {
    use crate::category::Phase;
    for oom in ooms.iter().filter(|f| f.kind == FindingKind::Oom) {
        let event = oom.events.0;
        // One request larger than the device's free memory and the cache's free bytes together:
        // no pool could have served it, however its reserve was laid out, so the fragmentation
        // before it is a note (batch 33's held-out audit: a 15.0 GiB output buffer failing with
        // 13.2 GiB free stood beside a fragmentation warning advising expandable segments).
        // So too one request as large as a good part of what is live (batch 37's held-out
        // audit: a 14.1 GiB product of an unfolded burst failing with 3.83 GiB free, beside a
        // fragmentation warning and a stall before it, both advising expandable segments).
        let beyond_the_device = (oom.summary.contains(oom::SINGLE_REQUEST_CAUSE)
            || oom.summary.contains(oom::OFFER_CAUSE)
            || oom.summary.contains(oom::LARGE_REQUEST_CAUSE))
            && request_beyond_the_device(cx, event);
        let (reason, fix) = if beyond_the_device {
            (
                "the request alone was larger than the device's free memory and the cache's free \
                 bytes together",
                "that request must shrink or go elsewhere (see the out-of-memory finding)",
            )
        } else if oom.summary.contains(oom::PASS_TO_COME_CAUSE) {
            (
                "the pass that failed needed more than the pool and the device held together",
                "what one pass needs must shrink (see the out-of-memory finding)",
            )
        } else if oom.summary.contains(oom::LEAK_CAUSE) {
            (
                "blocks a leak keeps filled the device",
                "the leak must be fixed (see the Leak finding)",
            )
        } else if oom.summary.contains(oom::OUTSIDE_CAUSE) {
            (
                "memory outside the pool had taken what the pool once held",
                "what else holds the device must make room (see the out-of-memory finding)",
            )
        } else {
            // The allocator's last release and retry for the very request that failed: part of the
            // failure, whatever its cause (batch 38's held-out audit: a fragmentation OOM's own
            // retry shown as a stall warning of its own).
            for stall in stalls.iter_mut().filter(|f| {
                f.kind == FindingKind::AllocatorStall
                    && f.severity > Severity::Info
                    && f.events.1 == event
            }) {
                stall.severity = Severity::Info;
                stall.suggestion = format!(
                    "Part of the out-of-memory error at event {event}, not a cost of its own: the \
                     allocator released its cache and retried for the request that then failed. \
                     The out-of-memory finding says what to change."
                );
            }
            continue;
        };
        for f in fragmentation
            .iter_mut()
            .filter(|f| f.kind == FindingKind::Fragmentation && f.events.0 <= event)
        {
            if beyond_the_device {
                f.severity = Severity::Info;
            }
            let _ = write!(
                f.summary,
                " It did not cause the out-of-memory error at event {event}: {reason}."
            );
            let _ = write!(
                f.suggestion,
                " This lowers what the pool reserves, not the out-of-memory error at event {event}: for that, {fix}."
            );
        }
        // In the pass that failed: no backward pass or optimizer step begins between the stall
        // and the failure (a run ends only at the next allocation, after the release).
        let runs = &cx.categories.runs;
        for stall in stalls.iter_mut().filter(|f| {
            f.kind == FindingKind::AllocatorStall
                && f.severity > Severity::Info
                && f.events.1 <= event
                && !runs
                    .iter()
                    .any(|r| r.phase != Phase::Forward && r.start > f.events.0 && r.start <= event)
        }) {
            stall.severity = Severity::Info;
            stall.suggestion = format!(
                "Part of the pass that ran out of memory at event {event}, not a cost of its own: {reason}, so {fix}."
            );
        }
        // The program's own release before memory outside the pool took its place: the call
        // that handed the cache over (batch 38's held-out file 6).
        if oom.summary.contains(oom::OUTSIDE_CAUSE) {
            for emptied in stalls
                .iter_mut()
                .filter(|f| f.kind == FindingKind::EmptyCache && f.events.1 < event)
            {
                let _ = write!(
                    emptied.summary,
                    " What it released did not stay free for this program: memory outside the \
                     pool took it before the out-of-memory error at event {event} (see that \
                     finding)."
                );
                emptied.suggestion = format!(
                    "On a device shared with another process, do not release the cache: what it \
                     returns goes to whoever asks next. {}",
                    emptied.suggestion
                );
            }
        }
    }
}

/// Whether the request that failed at `oom_event` was larger than the device's free memory (its
/// `oom` entry's) and the pool's cached free bytes just before it together.
fn request_beyond_the_device(cx: &DeviceContext, oom_event: u32) -> bool {
    let trace = &cx.device.trace;
    let Some(&(_, device_free_bytes)) = trace
        .oom_device_free_bytes
        .iter()
        .find(|&&(i, _)| i == oom_event)
    else {
        return false;
    };
    let before = cx.replay.totals_after(oom_event.checked_sub(1));
    let cached_free_bytes =
        u64::try_from(before.reserved_bytes - before.allocated_bytes).unwrap_or(0);
    trace.size_bytes[oom_event as usize] > cached_free_bytes.saturating_add(device_free_bytes)
}

/// An imbalance whose heavier device ran out of memory is a likely cause of that OOM: each
/// finding names the other, and the imbalance becomes a warning.
fn link_imbalance_to_oom(findings: &mut [Finding]) {
    let Some(k) = findings
        .iter()
        .position(|f| f.kind == FindingKind::Imbalance)
    else {
        return;
    };
    let device = findings[k].device;
    let Some(o) = findings
        .iter()
        .position(|f| f.kind == FindingKind::Oom && f.device == device)
    else {
        return;
    };
    let (oom_event, imbalance_title) = (findings[o].events.0, findings[k].title.clone());
    let imbalance = &mut findings[k];
    imbalance.severity = Severity::Warning;
    let cause = format!(
        " Device {device} ran out of memory at event {oom_event} (the out-of-memory finding): \
         the extra memory this call site asks for there is a likely cause."
    );
    imbalance.summary.push_str(&cause);
    let cause =
        format!(" A likely cause: the devices do not allocate alike (\"{imbalance_title}\").");
    findings[o].summary.push_str(&cause);
}

/// How many optimizer steps the workload line says there were, and how they were counted:
/// `steps` optimizer steps allocated (frames of `torch/optim`), the annotations may count more.
fn optimizer_steps_words(cx: &DeviceContext, steps: usize) -> Option<String> {
    // Steps after the first may allocate nothing (state made once, updates in place): the
    // annotations count them all (a held-out file: "1 optimizer step" where 3 ran).
    // Only those inside the trace's time span: a ring buffer holds the last events of a
    // run whose annotations are all kept.
    let times = &cx.device.trace.time_us;
    let span = times
        .iter()
        .filter(|&&t| t != crate::model::NO_TIME)
        .fold(None, |span: Option<(i64, i64)>, &t| {
            Some(span.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))))
        });
    let starts: Vec<&str> = span.map_or_else(Vec::new, |(first, last)| {
        cx.snapshot
            .annotations
            .iter()
            .filter(|a| {
                a.name.starts_with("Optimizer.step")
                    && a.stage == crate::model::AnnotationStage::Start
                    && (a.device < 0 || a.device == i64::from(cx.device.ordinal))
                    && (first..=last).contains(&a.time_us)
            })
            .map(|a| a.name.as_str())
            .collect()
    });
    let annotated = starts.len();
    let mut optimizers: Vec<&str> = starts.clone();
    optimizers.sort_unstable();
    optimizers.dedup();
    // Several optimizers stepped in every round (batch 37's held-out audit: `SparseAdam` and `Adam`,
    // 60 annotations in 30 rounds, "30 of them allocating" where all 60 allocate).
    if optimizers.len() > 1 && steps > 0 && annotated == steps * optimizers.len() {
        return Some(format!(
            "{annotated} optimizer steps (Optimizer.step annotations in the trace's time) of {} \
             optimizers ({}), stepped together in {steps} rounds that allocate (frames of \
             torch/optim or of an optimizer's step)",
            optimizers.len(),
            optimizers
                .iter()
                .map(|name| name.trim_start_matches("Optimizer.step#"))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    if annotated > steps {
        Some(format!(
            "{annotated} optimizer step{} (Optimizer.step annotations in the trace's time), \
             {steps} of them allocating (frames of torch/optim or of an optimizer's step)",
            if annotated == 1 { "" } else { "s" }
        ))
    } else if steps > 0
        && cx
            .steps
            .as_ref()
            .is_some_and(|s| s.source == steps::StepSource::BackwardPasses && s.count() > steps)
    {
        // Each backward pass made its gradients anew, so each is a step's: the optimizer
        // steps after the first allocated nothing (batch 22's held-out audit: "1 optimizer
        // step" where SGD ran 100, its momentum made in the first).
        Some(format!(
            "{steps} allocating optimizer step{} (frames of torch/optim or of an optimizer's \
             step), though each backward pass made its gradients anew: the other steps \
             allocate nothing, the optimizer's state made before them and updated in place",
            if steps == 1 { "" } else { "s" }
        ))
    } else if steps > 0 {
        Some(format!(
            "{steps} optimizer step{} (frames of torch/optim or of an optimizer's step)",
            if steps == 1 { "" } else { "s" }
        ))
    } else {
        None
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    pub use crate::r#gen::generate_loaded as generated;
}

#[cfg(test)]
mod tests {
    use super::{Finding, FindingKind, Severity};

    /// A device's peak that says no leak and no fragmentation: beside a store that stopped
    /// growing it is told healthy and advised with a condition (batch 35's re-audit: a clip
    /// cache capped at 600 clips); beside an allocator stall, its advice says the stall is the
    /// problem (batch 35's re-audit: a stalling run told to checkpoint activations); beside a
    /// leak, it is left as it is.
    #[test]
    fn a_peak_beside_a_capped_store_or_a_stall_is_advised_with_a_condition() {
        let advice = "Most of the peak is activations. Activation checkpointing lowers it.";
        let with = |kind: FindingKind, severity: Severity| {
            let mut peak = Finding::new(FindingKind::Peak, Severity::Info, 0);
            peak.summary = "No leak: the low point stays. No fragmentation to fix: …".to_string();
            peak.suggestion = advice.to_string();
            let mut findings = vec![peak, Finding::new(kind, severity, 0)];
            super::say_nothing_to_fix(&mut findings);
            findings.swap_remove(0)
        };
        let store = with(FindingKind::BoundedGrowth, Severity::Info);
        assert!(
            store.summary.ends_with(
                "Nothing on this device needs fixing for memory: its trace shows no \
                 out-of-memory error, leak, allocator stall or fragmentation."
            ) && store.suggestion.starts_with(
                "Only if the peak must come down (to fit a smaller device, a larger batch or \
                 longer inputs): most of the peak is activations."
            ),
            "{store:#?}"
        );
        let stall = with(FindingKind::AllocatorStall, Severity::Warning);
        assert!(
            !stall.summary.contains("Nothing on this device")
                && stall.suggestion.starts_with(
                    "The peak is not this device's problem (its allocator finding says what \
                     is). Only if the peak must come down"
                ),
            "{stall:#?}"
        );
        let leak = with(FindingKind::Leak, Severity::Warning);
        assert_eq!(leak.suggestion, advice);
    }

    /// A device whose only other finding is a fragmentation note that cost nothing (nothing
    /// failed or waited) is advised with the condition, and says what the note is (batch 37's
    /// held-out audit: a healthy T5 run told to checkpoint, unconditionally); a reserve grown for
    /// the peak's own tensors, which points at the peak as the lever, leaves the advice as it is.
    #[test]
    fn a_peak_beside_a_reserve_that_cost_nothing_is_advised_with_a_condition() {
        let advice = "Most of the peak is activations. Activation checkpointing lowers it.";
        let with = |title: &str, note: &str| {
            let mut peak = Finding::new(FindingKind::Peak, Severity::Info, 0);
            peak.summary = "No leak: the low point stays.".to_string();
            peak.suggestion = advice.to_string();
            let mut reserve = Finding::new(FindingKind::Fragmentation, Severity::Info, 0);
            reserve.title = title.to_string();
            reserve.summary = note.to_string();
            let mut findings = vec![peak, reserve];
            super::say_nothing_to_fix(&mut findings);
            findings.swap_remove(0)
        };
        let note = format!(
            "The pool reserved up to 28.6 GiB. {} (no out-of-memory error, no allocator stall).",
            super::fragmentation::NOTHING_FAILED
        );
        let costless = with(
            "Fragmentation: 6.69 GiB reserved above the allocated peak",
            &note,
        );
        assert!(
            costless.suggestion.starts_with(
                "Only if the peak must come down (to fit a smaller device, a larger batch or \
                 longer inputs): most of the peak is activations."
            ) && costless.summary.ends_with(
                "its reserve above the peak (the fragmentation note) cost this run nothing."
            ),
            "{costless:#?}"
        );
        let grown = with(
            "Reserve above the peak: 2.00 GiB, grown for the peak's own tensors",
            &note,
        );
        assert_eq!(grown.suggestion, advice);
    }

    /// A device with no finding but its peak, whose summary judges no leak (no iterations to
    /// compare), is advised with the condition but not told that nothing needs fixing (batch
    /// 37's re-audit: a `LoRA` server's weights told to be quantised, unconditionally); beside a
    /// leak, the same peak's advice is left as it is.
    #[test]
    fn a_peak_with_no_leak_verdict_and_no_problem_is_advised_with_a_condition() {
        let advice = "Most of the peak is the model's weights. Quantised weights lower it.";
        let with = |others: Vec<Finding>| {
            let mut peak = Finding::new(FindingKind::Peak, Severity::Info, 0);
            peak.summary = "The trace marks no training iteration, so whether that is a leak is \
                            not judged. No fragmentation to fix: …"
                .to_string();
            peak.suggestion = advice.to_string();
            peak.breakdown = vec![super::CategoryBytes {
                category: crate::category::Category::Parameter,
                bytes: 2 << 30,
            }];
            let mut findings = vec![peak];
            findings.extend(others);
            super::say_nothing_to_fix(&mut findings);
            findings.swap_remove(0)
        };
        let alone = with(vec![Finding::new(
            FindingKind::IdleCache,
            Severity::Info,
            0,
        )]);
        assert!(
            alone.suggestion.starts_with(
                "Only if the peak must come down (to fit a smaller device, a larger batch or \
                 longer inputs): most of the peak is the model's weights."
            ) && !alone.summary.contains("Nothing on this device"),
            "{alone:#?}"
        );
        let leak = with(vec![Finding::new(FindingKind::Leak, Severity::Warning, 0)]);
        assert_eq!(leak.suggestion, advice);
    }

    /// A healthy device whose peak's advice leads with the optimizer's multi-tensor temporaries
    /// is advised with a condition: `foreach` is the optimizers' default, a lever and no defect
    /// (batch 36's held-out audit: a healthy two-GPU BLIP-2 run told to build its optimizer with
    /// `foreach=False`, unconditionally).
    #[test]
    fn a_healthy_peak_s_optimizer_temporaries_are_a_lever_with_a_condition() {
        let mut peak = Finding::new(FindingKind::Peak, Severity::Info, 0);
        peak.summary = "No leak: the low point stays. No fragmentation to fix: …".to_string();
        peak.suggestion = format!(
            "{} hold 625 MiB (13% of the peak): one per parameter at once.",
            super::peak::FOREACH_LEAD
        );
        let mut findings = vec![peak];
        super::say_nothing_to_fix(&mut findings);
        assert!(
            findings[0].suggestion.starts_with(
                "Only if the peak must come down (to fit a smaller device, a larger batch or \
                 longer inputs): the optimizer step's multi-tensor (_foreach_*) temporaries hold"
            ),
            "{findings:#?}"
        );
    }
}

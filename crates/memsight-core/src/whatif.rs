//! What if: the trace's requests replayed through the caching-allocator model (`allocator`),
//! under the recorded settings or others, and what the model predicts next to what the file
//! recorded. Fidelity first: with the recorded settings the prediction must match the file before
//! any other setting's prediction can be trusted (`tests/whatif.rs`: every fixture does).
//!
//! Replayed: the pool before the trace (the reverse replay's segments and blocks, seeded as they
//! were, each in the pool its `segment_type` names), every `alloc` and `free_completed` (matched
//! by address), and each run of recorded `segment_free` / `segment_unmap` that the program asked
//! for (`empty_cache()`) as one release of the cached segments. A run the allocator made itself
//! (a stall: a request waited on it) is the model's to make where the device's capacity is known;
//! where it is not, the model cannot run out of memory, so the recorded stall is replayed as a
//! release instead. `torch_npu`'s 32-byte padding of every request is applied where the file's
//! blocks show it (`request_padding_bytes`), and its workspace triples are held as the memory they
//! were, outside the pool (`workspace_events`).
//!
//! An `oom` entry is the request that failed: it is replayed as one where the capacity is known,
//! and under other settings it may fit (then it stays allocated: the file cannot say when the
//! program would have freed it). Where the capacity is unknown it is left out: a model that cannot
//! fail would serve it with a segment the run never had.
//!
//! The capacity: `--capacity`, else what the file shows (`capacity_from_file`: an `oom` entry,
//! or a stall), else unknown: then the model grows without bound, predicts no OOM and no stall,
//! and garbage collection (which needs a memory fraction) does nothing.

use rustc_hash::FxHashMap;
use serde::{Serialize, Serializer};

use crate::allocator::{ActionCounts, Allocator, Config, PoolKind, ROUNDUP_INTERVALS};
use crate::detect::stall::{ReleaseBurst, release_bursts};
use crate::model::{Action, BlockState, Device, SegmentType, SettingValue, Snapshot};
use crate::replay::{DeviceReplay, PoolBlock, PoolSegment, PoolState, Totals};

/// `torch_npu`'s padding of every request (`AddPadSize()`, `NPUCachingAllocator.cpp`).
const NPU_PAD_BYTES: u64 = 32;
/// `torch_npu`'s alignment of large blocks in expandable segments (`kAlignRoundLarge`).
const NPU_ALIGN_LARGE_BYTES: u64 = 16 << 10;
/// Where the model's address space starts (any value; addresses are mapped).
const MODEL_BASE_ADDRESS: u64 = 0x7f00_0000_0000;
/// The model's capacity when none is known.
const UNBOUNDED_BYTES: u64 = u64::MAX / 4;
const MIB: u64 = 1 << 20;
/// `max_split_size_mb` must be at least `kLargeBuffer` (20 MiB; `c10/core/AllocatorConfig.cpp`).
const MAX_SPLIT_MIN_MB: u64 = 20;

/// One recorded device: what a replay reads.
#[derive(Clone, Copy)]
pub struct Recording<'a> {
    pub snapshot: &'a Snapshot,
    pub device: &'a Device,
    pub replay: &'a DeviceReplay,
}

impl<'a> Recording<'a> {
    /// The `index`-th device of `loaded` (in the order of `snapshot.devices`).
    pub fn of(loaded: &'a crate::Loaded, index: usize) -> Self {
        Self {
            snapshot: &loaded.snapshot,
            device: &loaded.snapshot.devices[index],
            replay: &loaded.replays[index],
        }
    }
}

/// `roundup_power2_divisions`, one value per power-of-two interval from 1 MiB (0 or 1: plain
/// 512-byte rounding). JSON: one number when every interval has the same, else the 16.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Divisions(pub [u32; ROUNDUP_INTERVALS]);

impl Divisions {
    fn uniform(&self) -> Option<u32> {
        self.0.iter().all(|&d| d == self.0[0]).then_some(self.0[0])
    }

    fn is_set(&self) -> bool {
        self.0.iter().any(|&d| d > 1)
    }
}

impl Serialize for Divisions {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.uniform() {
            Some(d) => s.serialize_u32(d),
            None => self.0.serialize(s),
        }
    }
}

/// The allocator settings a replay runs under.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Settings {
    pub expandable_segments: bool,
    /// `None`: not set (blocks of any size are split).
    pub max_split_size_mb: Option<u64>,
    pub roundup_power2_divisions: Divisions,
    /// `None`: off.
    pub garbage_collection_threshold: Option<f64>,
    /// Leave out the recorded releases the program asked for (its `empty_cache()` calls).
    pub skip_releases: bool,
    /// Device memory the allocator may reserve; `None`: unknown (unbounded).
    pub capacity_bytes: Option<u64>,
}

/// One `KEY:VALUE` of an allocator configuration, checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    ExpandableSegments(bool),
    MaxSplitSizeMb(Option<u64>),
    RoundupPower2Divisions(Divisions),
    GarbageCollectionThreshold(Option<f64>),
}

/// The `PYTORCH_CUDA_ALLOC_CONF` / `PYTORCH_NPU_ALLOC_CONF` keys the model follows.
pub const MODELLED_KEYS: [&str; 4] = [
    "expandable_segments",
    "max_split_size_mb",
    "roundup_power2_divisions",
    "garbage_collection_threshold",
];

/// Splits `a:1,b:[x:1,y:2]` at the commas outside brackets.
fn split_entries(text: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect()
}

/// `roundup_power2_divisions`: one power of two (or 0) for every size, or per interval as in
/// `[256:1,512:2,>:8]`, as `parseRoundUpPower2Divisions` reads it (`c10/core/AllocatorConfig.cpp`):
/// sizes in MiB, powers of two, each naming its interval (256: from 256 up to 512 MiB); the first
/// also fills every interval below it, `>` every interval above the last, and an interval between
/// two named ones keeps 0 (no rounding); a `>` first leaves the lowest interval at 0.
fn parse_divisions(value: &str) -> Result<Divisions, String> {
    let division = |text: &str| -> Result<u32, String> {
        match text.trim().parse::<u32>() {
            Ok(d) if d == 0 || d.is_power_of_two() => Ok(d),
            _ => Err(format!(
                "roundup_power2_divisions takes a power of two (1, 2, 4, 8 …) or 0, not {text:?}"
            )),
        }
    };
    let Some(entries) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) else {
        // One value for every size: a power of two (1: no rounding), as PyTorch checks it, or 0
        // for off (PyTorch's default when the key is absent), as the outputs write it.
        return division(value).map(|d| Divisions([d; ROUNDUP_INTERVALS]));
    };
    let mut out = [0; ROUNDUP_INTERVALS];
    let mut previous: Option<usize> = None;
    for entry in entries.split(',') {
        let Some((size, d)) = entry.split_once(':') else {
            return Err(format!(
                "roundup_power2_divisions entry {entry:?} is not SIZE_MB:DIVISIONS (e.g. [256:1,512:2,>:8])"
            ));
        };
        let d = division(d)?;
        if size.trim() == ">" {
            // PyTorch fills from `last_index + 1`, its `last_index` starting at 0.
            out[previous.map_or(1, |l| l + 1)..].fill(d);
            continue;
        }
        let mb = match size.trim().parse::<u64>() {
            Ok(mb) if mb.is_power_of_two() => mb,
            _ => {
                return Err(format!(
                    "roundup_power2_divisions: the interval {size:?} is not a power of two in MiB (1, 2, … 32768)"
                ));
            }
        };
        let index = (mb.trailing_zeros() as usize).min(ROUNDUP_INTERVALS - 1);
        if previous.is_none() {
            out[..index].fill(d);
        }
        out[index] = d;
        previous = Some(index);
    }
    Ok(Divisions(out))
}

impl Change {
    /// Every `KEY:VALUE` of `text` (one, or a whole `PYTORCH_CUDA_ALLOC_CONF` with commas); the
    /// error names what is valid.
    pub fn parse_all(text: &str) -> Result<Vec<Change>, String> {
        split_entries(text).into_iter().map(Self::parse).collect()
    }

    fn parse(key_value: &str) -> Result<Change, String> {
        let Some((key, value)) = key_value.split_once(':') else {
            return Err(format!(
                "{key_value:?} is not KEY:VALUE (e.g. expandable_segments:True)"
            ));
        };
        let value = value.trim();
        match key.trim() {
            // As strict as PyTorch (`c10/core/AllocatorConfig.cpp`), so a value tried here is one
            // the allocator takes; `none` (the replay's own) turns a recorded setting off.
            "expandable_segments" => match value {
                "True" => Ok(Change::ExpandableSegments(true)),
                "False" => Ok(Change::ExpandableSegments(false)),
                other => Err(format!(
                    "expandable_segments takes True or False (so spelled), not {other:?}"
                )),
            },
            "max_split_size_mb" => match value.parse::<u64>() {
                Ok(mb) if mb >= MAX_SPLIT_MIN_MB => {
                    Ok(Change::MaxSplitSizeMb(Some(mb.min(u64::MAX / MIB))))
                }
                _ if value == "none" => Ok(Change::MaxSplitSizeMb(None)),
                _ => Err(format!(
                    "max_split_size_mb takes a whole number of MiB, at least {MAX_SPLIT_MIN_MB} \
                     (e.g. 128), or none (off); not {value:?}"
                )),
            },
            "garbage_collection_threshold" => match value.parse::<f64>() {
                Ok(t) if t > 0.0 && t < 1.0 => Ok(Change::GarbageCollectionThreshold(Some(t))),
                _ if value == "none" => Ok(Change::GarbageCollectionThreshold(None)),
                _ => Err(format!(
                    "garbage_collection_threshold takes a fraction strictly between 0 and 1 \
                     (e.g. 0.8), or none (off); not {value:?}"
                )),
            },
            "roundup_power2_divisions" => {
                parse_divisions(value).map(Change::RoundupPower2Divisions)
            }
            other => Err(format!(
                "unknown allocator setting {other:?} (the replay follows: {})",
                MODELLED_KEYS.join(", ")
            )),
        }
    }
}

/// The `max_split_size` a file's `allocator_settings` set, in bytes: `None` where it sets none
/// (`-1`, or `SIZE_MAX`, which can arrive as a huge number).
pub fn recorded_max_split_size_bytes(snapshot: &crate::model::Snapshot) -> Option<u64> {
    snapshot
        .allocator_settings
        .iter()
        .find_map(|(key, value)| match (key.as_str(), value) {
            ("max_split_size", SettingValue::Int(bytes)) if *bytes > 0 && *bytes < 1 << 50 => {
                Some(*bytes as u64)
            }
            _ => None,
        })
}

impl Settings {
    /// The settings `recording` was made under, as far as the file says: its
    /// `allocator_settings` (`CUDA`, `PyTorch` ≥ 2.3), expandable segments seen in the trace or
    /// the pool, and the capacity an `oom` entry gives.
    pub fn recorded(recording: &Recording) -> Settings {
        let mut s = Settings {
            expandable_segments: recorded_expandable(recording.device),
            capacity_bytes: capacity_from_file(recording).map(|c| c.bytes),
            max_split_size_mb: recorded_max_split_size_bytes(recording.snapshot)
                .map(|bytes| bytes / MIB),
            ..Settings::default()
        };
        for (key, value) in &recording.snapshot.allocator_settings {
            match (key.as_str(), value) {
                ("expandable_segments", SettingValue::Bool(true)) => s.expandable_segments = true,
                ("garbage_collection_threshold", SettingValue::Float(t)) if *t > 0.0 => {
                    s.garbage_collection_threshold = Some(*t);
                }
                ("roundup_power2_divisions", SettingValue::Map(per_mb)) => {
                    for (mb, d) in per_mb {
                        if let (Ok(mb), Ok(d)) = (mb.parse::<u64>(), u32::try_from(*d))
                            && mb.is_power_of_two()
                        {
                            let i = (mb.trailing_zeros() as usize).min(ROUNDUP_INTERVALS - 1);
                            s.roundup_power2_divisions.0[i] = d;
                        }
                    }
                }
                ("roundup_power2_divisions", SettingValue::Int(d)) => {
                    s.roundup_power2_divisions = Divisions([*d as u32; ROUNDUP_INTERVALS]);
                }
                _ => {}
            }
        }
        s
    }

    /// Why the recording's allocator would refuse these settings, if it would: `torch_npu`
    /// takes neither `max_split_size_mb` nor `garbage_collection_threshold` with expandable
    /// segments (`NPUAllocatorConfig.cpp`, Ascend/pytorch 9e73e708, lines 306-312).
    pub fn refused_by(&self, recording: &Recording) -> Option<String> {
        (is_npu(recording)
            && self.expandable_segments
            && (self.max_split_size_mb.is_some() || self.garbage_collection_threshold.is_some()))
        .then(|| {
            "torch_npu takes neither max_split_size_mb nor garbage_collection_threshold with \
             expandable_segments:True"
                .to_string()
        })
    }

    pub fn apply(&mut self, change: &Change) {
        match *change {
            Change::ExpandableSegments(on) => self.expandable_segments = on,
            Change::MaxSplitSizeMb(mb) => self.max_split_size_mb = mb,
            Change::RoundupPower2Divisions(d) => self.roundup_power2_divisions = d,
            Change::GarbageCollectionThreshold(t) => self.garbage_collection_threshold = t,
        }
    }

    /// These settings as `PYTORCH_CUDA_ALLOC_CONF` entries (`expandable_segments` always, the
    /// other keys where set).
    pub fn conf_entries(&self) -> Vec<String> {
        let mut out = vec![format!(
            "expandable_segments:{}",
            if self.expandable_segments {
                "True"
            } else {
                "False"
            }
        )];
        if let Some(mb) = self.max_split_size_mb {
            out.push(format!("max_split_size_mb:{mb}"));
        }
        if self.roundup_power2_divisions.is_set() {
            if let Some(d) = self.roundup_power2_divisions.uniform() {
                out.push(format!("roundup_power2_divisions:{d}"));
            } else {
                let per: Vec<String> = self
                    .roundup_power2_divisions
                    .0
                    .iter()
                    .enumerate()
                    .map(|(i, d)| format!("{}:{d}", 1u64 << i))
                    .collect();
                out.push(format!("roundup_power2_divisions:[{}]", per.join(",")));
            }
        }
        if let Some(t) = self.garbage_collection_threshold {
            out.push(format!("garbage_collection_threshold:{t}"));
        }
        out
    }

    /// These settings as `PYTORCH_CUDA_ALLOC_CONF` would write them, and a word on the replay's
    /// own option.
    pub fn describe(&self) -> String {
        let mut out = self.conf_entries().join(",");
        if self.skip_releases {
            out.push_str(" (no empty_cache)");
        }
        out
    }

    /// What these settings change from `base`, in `PYTORCH_CUDA_ALLOC_CONF` words (`key:none`
    /// for a key `base` sets and these do not); "no change" when nothing.
    pub fn changes_from(&self, base: &Settings) -> String {
        let (mine, theirs) = (self.conf_entries(), base.conf_entries());
        let mut changed: Vec<String> = mine
            .iter()
            .filter(|e| !theirs.contains(e))
            .cloned()
            .collect();
        for entry in &theirs {
            let key = entry.split(':').next().unwrap_or_default();
            if !mine.iter().any(|e| e.starts_with(&format!("{key}:"))) {
                changed.push(format!("{key}:none"));
            }
        }
        if self.skip_releases && !base.skip_releases {
            changed.push("without empty_cache()".to_string());
        } else if base.skip_releases && !self.skip_releases {
            changed.push("with the recorded empty_cache()".to_string());
        }
        if changed.is_empty() {
            "no change".to_string()
        } else {
            changed.join(", ")
        }
    }

    fn config(&self, pad_bytes: u64, npu: bool) -> Config {
        Config {
            // torch_npu aligns large blocks to 16 KiB (also where it no longer pads).
            align_large_bytes: if npu { NPU_ALIGN_LARGE_BYTES } else { 0 },
            expandable_segments: self.expandable_segments,
            max_split_size_bytes: self.max_split_size_mb.map(|mb| mb.saturating_mul(MIB)),
            roundup_power2_divisions: self.roundup_power2_divisions.0,
            garbage_collection_threshold: self.garbage_collection_threshold,
            pad_bytes,
        }
    }
}

/// What a run did, recorded or predicted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub peak_reserved_bytes: u64,
    /// `segment_alloc`s, or `segment_map`s with expandable segments.
    pub segment_allocs: u64,
    /// `segment_free`s, or `segment_unmap`s.
    pub segment_frees: u64,
    /// Free-and-retry bursts: a failed device allocation made the allocator release cached
    /// segments. Predicted: `None` where the capacity is unknown (the model cannot run out).
    pub stalls: Option<u64>,
    /// Bytes those bursts released.
    pub stall_released_bytes: Option<u64>,
    /// Predicted: `None` where the capacity is unknown.
    pub ooms: Option<u64>,
    /// Reserved minus allocated bytes when reserved peaked: what the cache held unused then.
    pub peak_fragmentation_bytes: u64,
    /// The first `alloc` after which the model's reserved bytes differ from the recorded ones
    /// (`None`: never, or for what the file recorded).
    pub first_divergence_event: Option<u32>,
    /// What the pool held before the trace's first event: the replay starts from it under every
    /// setting, so a peak no higher than this is one no setting changes.
    pub reserved_before_bytes: u64,
    /// Reserved bytes after the event where the program's allocated bytes peaked (the recorded
    /// peak, the same moment under every setting; `None`: before the trace), and what of them
    /// was unused then: what a setting changes where the peak reserved was held before the
    /// trace.
    pub reserved_at_peak_allocated_bytes: u64,
    pub unused_at_peak_allocated_bytes: u64,
    /// Reserved bytes after each `alloc` of the trace, averaged (releases and new segments fall
    /// between allocs in another order in the model: after each alloc it follows the file).
    pub mean_reserved_bytes: u64,
}

impl Outcome {
    /// Whether the peak reserved is the pool held before the trace: a peak no setting changes.
    pub fn peak_held_before_trace(&self) -> bool {
        self.peak_reserved_bytes <= self.reserved_before_bytes
    }
}

/// One line of recorded against predicted, as every output shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComparedLine {
    pub what: &'static str,
    pub recorded: String,
    pub predicted: String,
    /// The change in percent ("+1.2 %"), "before the trace" where no setting can change the
    /// figure, or nothing for counts.
    pub change: Option<String>,
}

impl ComparedLine {
    /// The predicted figure with its change in brackets, as the command line writes it.
    pub fn predicted_with_change(&self) -> String {
        match &self.change {
            Some(change) => format!("{} ({change})", self.predicted),
            None => self.predicted.clone(),
        }
    }
}

/// Recorded against predicted, line by line, as the command line and the app show them; and,
/// where the peak reserved was held before the trace (no setting can change it), a sentence
/// saying so and what to compare instead.
pub fn compared_lines(r: &Outcome, p: &Outcome) -> (Vec<ComparedLine>, Option<String>) {
    use crate::units::format_bytes;
    let bytes = |b: u64| format_bytes(b as i64);
    let change = |predicted: u64, recorded: u64| {
        Some(percent_change(predicted, recorded).map_or_else(
            || "no percentage: 0 B recorded".to_string(),
            |change| format!("{change:+.1} %"),
        ))
    };
    let known = |c: Option<u64>| c.map_or_else(|| "n/a".to_string(), |c| c.to_string());
    let stalls = |o: &Outcome| match (o.stalls, o.stall_released_bytes) {
        (Some(n), Some(freed)) if n > 0 => format!("{n} ({} freed)", bytes(freed)),
        (n, _) => known(n),
    };
    let held_before = r.peak_held_before_trace() && p.peak_held_before_trace();
    let line = |what, recorded, predicted, change| ComparedLine {
        what,
        recorded,
        predicted,
        change,
    };
    let mut lines = vec![
        line(
            "peak reserved",
            bytes(r.peak_reserved_bytes),
            bytes(p.peak_reserved_bytes),
            if held_before {
                Some("before the trace".to_string())
            } else {
                change(p.peak_reserved_bytes, r.peak_reserved_bytes)
            },
        ),
        line(
            "at peak allocated",
            bytes(r.reserved_at_peak_allocated_bytes),
            bytes(p.reserved_at_peak_allocated_bytes),
            change(
                p.reserved_at_peak_allocated_bytes,
                r.reserved_at_peak_allocated_bytes,
            ),
        ),
        line(
            "mean reserved",
            bytes(r.mean_reserved_bytes),
            bytes(p.mean_reserved_bytes),
            change(p.mean_reserved_bytes, r.mean_reserved_bytes),
        ),
        line(
            "segment allocs",
            r.segment_allocs.to_string(),
            p.segment_allocs.to_string(),
            None,
        ),
        line(
            "segment frees",
            r.segment_frees.to_string(),
            p.segment_frees.to_string(),
            None,
        ),
        line("stalls", stalls(r), stalls(p), None),
        line("ooms", known(r.ooms), known(p.ooms), None),
    ];
    if !held_before {
        lines.push(line(
            "unused at peak",
            bytes(r.peak_fragmentation_bytes),
            bytes(p.peak_fragmentation_bytes),
            None,
        ));
    }
    lines.push(line(
        "unused at peak allocated",
        bytes(r.unused_at_peak_allocated_bytes),
        bytes(p.unused_at_peak_allocated_bytes),
        None,
    ));
    let note = held_before.then(|| {
        format!(
            "the peak reserved, {}, was held before the trace's first event: the replay starts \
             from that pool under every setting, so no setting changes it. Compare the reserved \
             bytes at peak allocated and their mean over the trace instead.",
            bytes(r.peak_reserved_bytes)
        )
    });
    (lines, note)
}

/// The change from `recorded` to `predicted` in percent; against nothing recorded, no
/// percentage means anything (`None`).
pub fn percent_change(predicted: u64, recorded: u64) -> Option<f64> {
    (recorded > 0).then(|| (predicted as f64 - recorded as f64) / recorded as f64 * 100.0)
}

/// The `segment_alloc` and `alloc` of each `torch_npu` workspace triple (`workspace_snapshot`,
/// `segment_alloc`, `alloc`: the workspace allocator's memory, `NPUWorkspaceAllocator.cpp`, not
/// the caching allocator's), by event index: neither counted as the pool's segments nor replayed
/// through the model, which holds them as fixed memory instead.
fn workspace_events(device: &Device) -> Vec<bool> {
    let action = &device.trace.action;
    let mut marked = vec![false; action.len()];
    for i in 0..action.len() {
        if action[i] != Action::WorkspaceSnapshot {
            continue;
        }
        if action.get(i + 1) == Some(&Action::SegmentAlloc) {
            marked[i + 1] = true;
            if action.get(i + 2) == Some(&Action::Alloc) {
                marked[i + 2] = true;
            }
        }
    }
    marked
}

/// What the file recorded for the device.
pub fn recorded(recording: &Recording) -> Outcome {
    let (device, replay) = (recording.device, recording.replay);
    let workspace = workspace_events(device);
    let count = |wanted: &[Action]| {
        device
            .trace
            .action
            .iter()
            .zip(&workspace)
            .filter(|&(a, &w)| wanted.contains(a) && !w)
            .count() as u64
    };
    // As the model measures it: after the `alloc` that the peak's segment was made for (the
    // first one at the peak), not between the `segment_alloc` and it.
    let peak = replay.peak_reserved;
    let after_alloc = peak.event.and_then(|e| {
        (e as usize..device.trace.len())
            .take_while(|&i| replay.reserved_bytes()[i] == peak.bytes)
            .find(|&i| device.trace.action[i] == Action::Alloc)
    });
    let at_peak = replay.totals_after(after_alloc.map(|i| i as u32).or(peak.event));
    let stalls: Vec<_> = release_bursts(recording.snapshot, device, recording.replay)
        .into_iter()
        .filter(ReleaseBurst::is_stall)
        .collect();
    let peak_allocated = replay.totals_after(replay.peak_allocated.event);
    // Sampled after each `alloc` the model replays: where the model follows the file, it
    // follows it there (releases and new segments land between allocs in another order).
    let (sum, allocs) = replay
        .reserved_bytes()
        .iter()
        .zip(&device.trace.action)
        .zip(&workspace)
        .filter(|&((_, &a), &w)| a == Action::Alloc && !w)
        .fold((0i128, 0i128), |(sum, n), ((&r, _), _)| {
            (sum + i128::from(r.max(0)), n + 1)
        });
    let mean_reserved_bytes = if allocs == 0 {
        replay.initial.reserved_bytes.max(0) as u64
    } else {
        (sum / allocs) as u64
    };
    Outcome {
        peak_reserved_bytes: replay.peak_reserved.bytes.max(0) as u64,
        reserved_before_bytes: replay.initial.reserved_bytes.max(0) as u64,
        reserved_at_peak_allocated_bytes: peak_allocated.reserved_bytes.max(0) as u64,
        unused_at_peak_allocated_bytes: (peak_allocated.reserved_bytes
            - peak_allocated.allocated_bytes)
            .max(0) as u64,
        mean_reserved_bytes,
        segment_allocs: count(&[Action::SegmentAlloc, Action::SegmentMap]),
        segment_frees: count(&[Action::SegmentFree, Action::SegmentUnmap]),
        stalls: Some(stalls.len() as u64),
        stall_released_bytes: Some(stalls.iter().map(|b| b.freed_bytes).sum()),
        ooms: Some(count(&[Action::Oom])),
        peak_fragmentation_bytes: (at_peak.reserved_bytes - at_peak.allocated_bytes).max(0) as u64,
        first_divergence_event: None,
    }
}

/// Whether the file recorded expandable segments on `device` (a `segment_map`, or a segment
/// marked expandable in the final pool).
pub fn recorded_expandable(device: &Device) -> bool {
    device.trace.action.contains(&Action::SegmentMap)
        || device.segments.iter().any(|s| s.is_expandable)
}

/// The device memory the allocator could have, where the file says, and how it says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub bytes: u64,
    pub source: String,
    /// The most the device can have had (from a stall), not a measurement.
    pub upper_bound: bool,
}

/// The capacity the file shows: at the first `oom`, what was reserved plus the free bytes the
/// driver reported; else the same at msMemScope's measurements of the device
/// ([`crate::device_memory::pool_capacity_bytes`]); else, where the allocator stalled (a device allocation failed), just under
/// the smallest reserved + segment that failed, if that is no lower than the peak reserved.
pub fn capacity_from_file(recording: &Recording) -> Option<Capacity> {
    let (device, replay) = (recording.device, recording.replay);
    let reserved = |event: usize| replay.reserved_bytes().get(event).map(|&r| r.max(0) as u64);
    if let Some(&(event, free)) = device.trace.oom_device_free_bytes.first() {
        return Some(Capacity {
            bytes: reserved(event as usize)?.saturating_add(free),
            source: format!("the oom at event {event}: reserved then plus the device's free bytes"),
            upper_bound: false,
        });
    }
    if let Some((bytes, m)) = crate::device_memory::pool_capacity_bytes(device, replay) {
        return Some(Capacity {
            bytes,
            source: format!(
                "the device's memory as msMemScope measured it ({}): reserved then plus the \
                 device's free bytes",
                m.sample.after_event.map_or_else(
                    || "before the first event".to_string(),
                    |e| format!("after event {e}")
                )
            ),
            upper_bound: false,
        });
    }
    let peak = replay.peak_reserved.bytes.max(0) as u64;
    release_bursts(recording.snapshot, device, recording.replay)
        .into_iter()
        .filter_map(|b| {
            let retry = b.retry_event?;
            (device.trace.action[retry] != Action::Oom).then_some(())?;
            let before = b.first_event.checked_sub(1).map_or(Some(0), reserved)?;
            Some((
                before.saturating_add(device.trace.size_bytes[retry]),
                b.first_event,
            ))
        })
        .min()
        .map(|(failed, event)| Capacity {
            bytes: failed.saturating_sub(crate::allocator::MIN_BLOCK_BYTES),
            source: format!(
                "the stall at event {event}: just under reserved then plus the segment that did \
                 not fit, the most it can have been"
            ),
            upper_bound: true,
        })
        .filter(|c| c.bytes >= peak)
}

/// Which caching allocator the replay follows for a recording, and what in the file says so.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AllocatorKind {
    /// `torch_npu`'s (`NPUCachingAllocator`), else `CUDA`'s.
    pub npu: bool,
    /// Bytes added to every request before rounding (`torch_npu`'s 32, where the file shows it).
    pub pad_bytes: u64,
    /// The evidence, as a reader would check it.
    pub why: String,
}

impl AllocatorKind {
    /// `torch_npu's allocator (why)`, for a line of text.
    pub fn describe(&self) -> String {
        format!(
            "{} caching allocator{} ({})",
            if self.npu { "torch_npu's" } else { "CUDA's" },
            if self.pad_bytes > 0 {
                format!(", requests padded by {} B", self.pad_bytes)
            } else {
                String::new()
            },
            self.why
        )
    }
}

/// The allocator of `recording`, from its own evidence (older `torch_npu` files carry no
/// `allocator_settings`): an msMemScope recording, `torch_npu` in its frames or settings, its
/// workspace entries, or blocks carrying the 32-byte padding.
pub fn allocator_of(recording: &Recording) -> AllocatorKind {
    let (snapshot, device) = (recording.snapshot, recording.device);
    let padding = request_padding(device);
    let mut why: Vec<String> = Vec::new();
    if snapshot.format.memscope {
        why.push("an msMemScope recording (Ascend)".into());
    }
    if snapshot.strings.iter().any(|s| s.contains("torch_npu")) {
        why.push("its frames or settings name torch_npu".into());
    }
    if device.trace.action.contains(&Action::WorkspaceSnapshot) {
        why.push("it records torch_npu's workspace allocations".into());
    }
    if let Some(evidence) = &padding.evidence {
        why.push(evidence.clone());
    }
    let npu = !why.is_empty();
    if !npu {
        why.push(match &padding.against {
            Some(against) => format!("nothing in it names torch_npu, and {against}"),
            None => "nothing in it names torch_npu".into(),
        });
    }
    AllocatorKind {
        npu,
        pad_bytes: padding.bytes,
        why: why.join("; "),
    }
}

/// Whether the recording is `torch_npu`'s ([`allocator_of`]).
fn is_npu(recording: &Recording) -> bool {
    allocator_of(recording).npu
}

/// The padding the allocator adds to every request, and the evidence for or against it.
struct Padding {
    bytes: u64,
    evidence: Option<String>,
    against: Option<String>,
}

/// The padding the allocator adds to every request, as the file shows it: `torch_npu` adds 32
/// bytes before rounding to 512 (`AddPadSize()` in `NPUCachingAllocator.cpp`), `CUDA` nothing.
/// Two witnesses: a live block of the final pool whose request is a multiple of 512 is 512
/// bytes larger than it when padded, exactly its size when not; and, in the trace, a small block
/// allocated right behind a live one lies the padded or the unpadded size of that one further
/// on. Padded only where padded blocks are seen and unpadded ones are not.
fn request_padding(device: &Device) -> Padding {
    let (padded, exact) = padding_in_pool(device);
    let (trace_padded, trace_exact) = padding_in_trace(device);
    let (all_padded, all_exact) = (padded + trace_padded, exact + trace_exact);
    if all_padded > 0 && all_exact == 0 {
        Padding {
            bytes: NPU_PAD_BYTES,
            evidence: Some(format!(
                "{} carry torch_npu's 32-byte request padding",
                witnesses(padded, trace_padded)
            )),
            against: None,
        }
    } else {
        Padding {
            bytes: 0,
            evidence: None,
            against: (all_exact > 0).then(|| {
                format!(
                    "{} are exactly their requests",
                    witnesses(exact, trace_exact)
                )
            }),
        }
    }
}

/// Whether `torch_npu` recorded `device`: the file says so by name, or by its 32-byte request
/// padding alone (batch 21's held-out audit read `torch.cuda` advice on a file with no
/// `torch_npu` frame; batch 25's, `PYTORCH_CUDA_ALLOC_CONF` on one).
pub fn device_is_npu(snapshot: &crate::model::Snapshot, device: &Device) -> bool {
    snapshot.is_npu() || request_padding_bytes(device) > 0
}

/// The padding [`allocator_of`] finds, without reading the trace where the final pool already
/// holds a block that is exactly its request (then nothing is padded): for a detector that needs
/// the figure, not its evidence.
pub fn request_padding_bytes(device: &Device) -> u64 {
    if padding_in_pool(device).1 > 0 {
        0
    } else {
        request_padding(device).bytes
    }
}

/// In the final pool: live blocks whose request is a multiple of 512, 512 bytes larger than it
/// (padded, counted first) or exactly its size.
fn padding_in_pool(device: &Device) -> (u64, u64) {
    let (mut padded, mut exact) = (0u64, 0u64);
    for b in device.segments.iter().flat_map(|s| &s.blocks) {
        if b.state == BlockState::Inactive
            || b.requested_size_bytes == 0
            || !b.requested_size_bytes.is_multiple_of(512)
        {
            continue;
        }
        if b.size_bytes == b.requested_size_bytes + 512 {
            padded += 1;
        } else if b.size_bytes == b.requested_size_bytes {
            exact += 1;
        }
    }
    (padded, exact)
}

/// `3 blocks of the final pool and 12 allocations of the trace`.
fn witnesses(pool: u64, trace: u64) -> String {
    let n = |count: u64, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
    match (pool, trace) {
        (p, 0) => format!("{} of the final pool", n(p, "block")),
        (0, t) => format!("{} of the trace", n(t, "allocation")),
        (p, t) => format!(
            "{} of the final pool and {} of the trace",
            n(p, "block"),
            n(t, "allocation")
        ),
    }
}

/// In the trace: small allocations (below 1 MiB, rounded to 512 bytes) made right behind a live
/// block, at the distance of that block's padded size (counted first) or of its unpadded size,
/// where the two differ.
fn padding_in_trace(device: &Device) -> (u64, u64) {
    let trace = &device.trace;
    let round = |bytes: u64| bytes.div_ceil(512).max(1) * 512;
    let mut live: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    let (mut padded, mut exact) = (0u64, 0u64);
    for i in 0..trace.len() {
        let (addr, size) = (trace.addr[i], trace.size_bytes[i]);
        match trace.action[i] {
            Action::Alloc => {
                if let Some((&before, &before_size)) = live.range(..addr).next_back()
                    && before_size < crate::allocator::SMALL_REQUEST_MAX_BYTES
                {
                    let (with_pad, without) =
                        (round(before_size + NPU_PAD_BYTES), round(before_size));
                    if with_pad != without {
                        let gap = addr - before;
                        padded += u64::from(gap == with_pad);
                        exact += u64::from(gap == without);
                    }
                }
                live.insert(addr, size);
            }
            Action::FreeCompleted => {
                live.remove(&addr);
            }
            _ => {}
        }
    }
    (padded, exact)
}

/// A prediction with the model's reserved bytes after every trace event.
#[derive(Clone, Debug, Default)]
pub struct Prediction {
    pub outcome: Outcome,
    /// Per trace event, the model's reserved bytes after it.
    pub reserved_bytes: Vec<u64>,
}

/// The trace of the device replayed through the allocator model under `settings`.
pub fn predict(recording: &Recording, settings: &Settings) -> Outcome {
    run(recording, settings, usize::MAX, |_, _| true).0
}

/// [`predict`], with the model's reserved bytes after every event.
pub fn predict_curve(recording: &Recording, settings: &Settings) -> Prediction {
    let mut reserved_bytes = Vec::with_capacity(recording.device.trace.len());
    let outcome = run(recording, settings, usize::MAX, |_, model| {
        reserved_bytes.push(model.reserved_bytes);
        true
    })
    .0;
    Prediction {
        outcome,
        reserved_bytes,
    }
}

/// The model's pool after event `event` (`None`: before the first) under `settings`, in the
/// model's own addresses; blocks are linked to the file's lifetimes where the tensor is the same.
pub fn predicted_pool_after(
    recording: &Recording,
    settings: &Settings,
    event: Option<u32>,
) -> PoolState {
    let events = event.map_or(0, |e| e as usize + 1);
    let (_, model, addresses) = run(recording, settings, events, |_, _| true);
    let lifetime_of: FxHashMap<u64, u64> = addresses
        .iter()
        .map(|(&recorded, &modelled)| (modelled, recorded))
        .collect();
    let live = recording.replay.pool_after(recording.device, event);
    let lifetimes: FxHashMap<u64, _> = live
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter_map(|b| b.lifetime.map(|l| (b.address, l)))
        .collect();
    // One segment per run of mapped pages, as a snapshot lists an expandable segment.
    let ranges = model.segments.iter().flat_map(|(&addr, s)| {
        s.mapped_ranges(addr)
            .into_iter()
            .map(move |(start, size)| (start, size, s))
    });
    let segments = ranges
        .map(|(address, size, s)| PoolSegment {
            address,
            total_size_bytes: size,
            stream: u32::try_from(s.stream).unwrap_or(0),
            pool: 0,
            is_expandable: s.expandable,
            blocks: s
                .blocks
                .range(address..address + size)
                .map(|(&at, b)| PoolBlock {
                    address: at,
                    size_bytes: b.size,
                    requested_size_bytes: b.requested,
                    state: if b.allocated {
                        BlockState::ActiveAllocated
                    } else {
                        BlockState::Inactive
                    },
                    size_exact: true,
                    lifetime: lifetime_of
                        .get(&at)
                        .and_then(|recorded| lifetimes.get(recorded).copied()),
                })
                .collect(),
        })
        .collect();
    PoolState {
        event,
        totals: Totals {
            allocated_bytes: model.allocated_bytes as i64,
            active_bytes: model.allocated_bytes as i64,
            reserved_bytes: model.reserved_bytes as i64,
        },
        segments,
        unplaced_blocks: Vec::new(),
    }
}

/// The model seeded with the pool before the trace; and the recorded → model addresses of the
/// blocks live then.
fn seeded_model(recording: &Recording, settings: &Settings) -> (Allocator, FxHashMap<u64, u64>) {
    let (device, replay) = (recording.device, recording.replay);
    let mut model = Allocator::with_config(
        MODEL_BASE_ADDRESS,
        settings.capacity_bytes.unwrap_or(UNBOUNDED_BYTES),
        {
            let kind = allocator_of(recording);
            settings.config(kind.pad_bytes, kind.npu)
        },
        0,
        0,
    );
    // The pool before the trace is seeded as it was, at its own addresses, in the pool the file
    // says its segment is in.
    let mut addresses: FxHashMap<u64, u64> = FxHashMap::default();
    for seg in replay.pool_after(device, None).segments {
        let pool = device
            .segments
            .iter()
            .find(|s| (s.address..s.address + s.total_size_bytes).contains(&seg.address))
            .and_then(|s| match s.segment_type {
                SegmentType::Small => Some(PoolKind::Small),
                SegmentType::Large => Some(PoolKind::Large),
                SegmentType::Unknown => None,
            });
        let blocks: Vec<(u64, u64, u64)> = seg
            .blocks
            .iter()
            .map(|b| {
                let requested = if b.state == BlockState::Inactive {
                    0
                } else {
                    addresses.insert(b.address, b.address);
                    b.requested_size_bytes.max(1)
                };
                (b.address, b.size_bytes, requested)
            })
            .collect();
        model.seed_segment(
            seg.address,
            seg.total_size_bytes,
            (i128::from(seg.stream), pool),
            // Without expandable segments, what was mapped before the trace is an ordinary one.
            seg.is_expandable && settings.expandable_segments,
            &blocks,
        );
    }
    (model, addresses)
}

/// What the model's replay measures besides its peak: its reserved bytes at the moment the
/// program's allocated bytes peaked in the recording (the same moment under every setting), and
/// their sum after each alloc, for the mean.
struct TraceFigures {
    peak_allocated_event: Option<usize>,
    /// Reserved, and reserved less allocated, bytes then.
    at_peak_allocated: (u64, u64),
    reserved_sum: u128,
    allocs: u128,
}

impl TraceFigures {
    /// Before the trace: the seeded pool.
    fn new(replay: &DeviceReplay, model: &Allocator) -> Self {
        Self {
            peak_allocated_event: replay.peak_allocated.event.map(|e| e as usize),
            at_peak_allocated: (
                model.reserved_bytes,
                model.reserved_bytes.saturating_sub(model.allocated_bytes),
            ),
            reserved_sum: 0,
            allocs: 0,
        }
    }

    /// After event `i` (`alloc`: an alloc the model replayed).
    fn after(&mut self, i: usize, alloc: bool, model: &Allocator) {
        if self.peak_allocated_event == Some(i) {
            self.at_peak_allocated = (
                model.reserved_bytes,
                model.reserved_bytes.saturating_sub(model.allocated_bytes),
            );
        }
        if alloc {
            self.reserved_sum += u128::from(model.reserved_bytes);
            self.allocs += 1;
        }
    }

    fn mean_reserved_bytes(&self, reserved_before: u64) -> u64 {
        self.reserved_sum
            .checked_div(self.allocs)
            .map_or(reserved_before, |mean| mean as u64)
    }
}

/// Replays the first `events` events of the trace, calling `observe` after each (it returns
/// whether to go on); the outcome, the model then, and the recorded → model addresses of the
/// blocks it holds.
fn run(
    recording: &Recording,
    settings: &Settings,
    events: usize,
    mut observe: impl FnMut(usize, &Allocator) -> bool,
) -> (Outcome, Allocator, FxHashMap<u64, u64>) {
    let (device, replay) = (recording.device, recording.replay);
    let (mut model, mut addresses) = seeded_model(recording, settings);
    let trace = &device.trace;
    // What the model did to hold the blocks from before the trace is not part of the trace.
    let (before, reserved_before) = (model.counts, model.reserved_bytes);
    model.peak_reserved_bytes = reserved_before;
    // Which recorded releases to replay, by their first event.
    let capacity_known = settings.capacity_bytes.is_some();
    let mut releases = vec![false; trace.len()];
    for burst in release_bursts(recording.snapshot, device, recording.replay) {
        let replayed = if burst.is_stall() {
            !capacity_known
        } else {
            !settings.skip_releases
        };
        releases[burst.first_event] = replayed;
    }
    let workspace = workspace_events(device);
    let recorded_reserved = replay.reserved_bytes();
    let mut first_divergence_event = None;
    let mut peak_fragmentation_bytes = reserved_before.saturating_sub(model.allocated_bytes);
    let mut peak_seen = reserved_before;
    let mut figures = TraceFigures::new(replay, &model);
    let end = events.min(trace.len());
    let stalls_before = model.stalls.len();
    for (i, &release) in releases.iter().enumerate().take(end) {
        let (addr, size) = (trace.addr[i], trace.size_bytes[i]);
        let stream = i128::from(trace.stream[i]);
        if release {
            model.release_cached(None);
        }
        match trace.action[i] {
            // The workspace's memory: held as it was, whatever the settings.
            Action::SegmentAlloc if workspace[i] => {
                // One full-size block, live from the triple's alloc (the next event) on.
                let requested = match trace.action.get(i + 1) {
                    Some(Action::Alloc) if workspace[i + 1] => trace.size_bytes[i + 1].max(1),
                    _ => 0,
                };
                let block = [(addr, size, requested)];
                model.seed_segment(addr, size, (stream, Some(PoolKind::Large)), false, &block);
            }
            Action::Alloc if workspace[i] => {
                addresses.insert(addr, addr);
            }
            Action::Alloc => {
                if let Some(at) = model.malloc(size, stream, None) {
                    addresses.insert(addr, at);
                }
                if first_divergence_event.is_none()
                    && recorded_reserved
                        .get(i)
                        .is_some_and(|&r| r != model.reserved_bytes as i64)
                {
                    first_divergence_event = Some(i as u32);
                }
            }
            // The request that failed: under other settings it may fit, and then it lives on.
            // The entry records the rounded size, padding included. Without a capacity the model
            // cannot fail, so it would always "fit" it with a segment the run never had: then the
            // entry is left out (the OOMs are not predicted either way).
            Action::Oom if capacity_known => {
                model.malloc(size.saturating_sub(model.config.pad_bytes), stream, None);
            }
            Action::FreeCompleted => {
                if let Some(at) = addresses.remove(&addr) {
                    model.free(at);
                }
            }
            _ => {}
        }
        // After an alloc, or an oom request that fitted.
        if model.reserved_bytes > peak_seen {
            peak_seen = model.reserved_bytes;
            peak_fragmentation_bytes = model.reserved_bytes.saturating_sub(model.allocated_bytes);
        }
        figures.after(i, trace.action[i] == Action::Alloc && !workspace[i], &model);
        if !observe(i, &model) {
            break;
        }
    }
    let stalls = &model.stalls[stalls_before..];
    let outcome = Outcome {
        peak_fragmentation_bytes,
        reserved_before_bytes: reserved_before,
        reserved_at_peak_allocated_bytes: figures.at_peak_allocated.0,
        unused_at_peak_allocated_bytes: figures.at_peak_allocated.1,
        mean_reserved_bytes: figures.mean_reserved_bytes(reserved_before),
        stalls: capacity_known.then_some(stalls.len() as u64),
        stall_released_bytes: capacity_known.then(|| {
            stalls
                .iter()
                .map(|s| s.reserved_before_bytes - s.reserved_after_bytes)
                .sum()
        }),
        first_divergence_event,
        ..outcome(
            &model.counts,
            &before,
            model.peak_reserved_bytes,
            capacity_known,
        )
    };
    (outcome, model, addresses)
}

/// The settings a sweep tries for a device recorded under `base`: `base` itself, then the common
/// changes one by one and in the pairs people use, each only where it changes something:
/// expandable segments switched; `max_split_size_mb` 128 and 512; `roundup_power2_divisions:4`;
/// the recorded `empty_cache()` calls left out, alone and with expandable segments; and, where
/// the capacity is known (garbage collection acts only then), `garbage_collection_threshold`
/// 0.8, and 0.6 with `max_split_size_mb:128` (`PyTorch`'s documented pair).
pub fn sweep_settings(recording: &Recording, base: &Settings) -> Vec<Settings> {
    let with = |changes: &[Change]| {
        let mut s = *base;
        for c in changes {
            s.apply(c);
        }
        s
    };
    let program_releases = release_bursts(recording.snapshot, recording.device, recording.replay)
        .iter()
        .any(|b| !b.is_stall());
    let mut candidates = vec![
        *base,
        with(&[Change::ExpandableSegments(!base.expandable_segments)]),
        with(&[Change::MaxSplitSizeMb(Some(128))]),
        with(&[Change::MaxSplitSizeMb(Some(512))]),
        with(&[Change::RoundupPower2Divisions(Divisions(
            [4; ROUNDUP_INTERVALS],
        ))]),
    ];
    if program_releases && !base.skip_releases {
        let skip = |mut s: Settings| {
            s.skip_releases = true;
            s
        };
        candidates.push(skip(*base));
        candidates.push(skip(with(&[Change::ExpandableSegments(true)])));
    }
    if base.capacity_bytes.is_some() {
        candidates.push(with(&[Change::GarbageCollectionThreshold(Some(0.8))]));
        candidates.push(with(&[
            Change::GarbageCollectionThreshold(Some(0.6)),
            Change::MaxSplitSizeMb(Some(128)),
        ]));
    }
    let mut tried: Vec<Settings> = Vec::new();
    for s in candidates {
        if !tried.contains(&s) && (s == *base || s.refused_by(recording).is_none()) {
            tried.push(s);
        }
    }
    tried
}

/// Every setting of [`sweep_settings`] replayed (on rayon), fewest OOMs, then lowest predicted
/// peak reserved, then fewest stalls, then lowest reserved at peak allocated and lowest mean
/// reserved first (where the peak was held before the trace, those decide).
pub fn sweep(recording: &Recording, base: &Settings) -> Vec<(Settings, Outcome)> {
    use rayon::prelude::*;
    let mut results: Vec<(Settings, Outcome)> = sweep_settings(recording, base)
        .into_par_iter()
        .map(|s| (s, predict(recording, &s)))
        .collect();
    results.sort_by_key(|(_, o)| {
        (
            o.ooms,
            o.peak_reserved_bytes,
            o.stalls,
            o.reserved_at_peak_allocated_bytes,
            o.mean_reserved_bytes,
        )
    });
    results
}

/// What the model recorded in the trace: `counts` less those it had made `before` it.
fn outcome(
    counts: &ActionCounts,
    before: &ActionCounts,
    peak_reserved_bytes: u64,
    capacity_known: bool,
) -> Outcome {
    Outcome {
        peak_reserved_bytes,
        segment_allocs: (counts.segment_alloc + counts.segment_map)
            - (before.segment_alloc + before.segment_map),
        segment_frees: (counts.segment_free + counts.segment_unmap)
            - (before.segment_free + before.segment_unmap),
        ooms: capacity_known.then_some(counts.oom - before.oom),
        ..Outcome::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_like_the_allocator_and_name_what_is_valid() {
        let all = Change::parse_all(
            "expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.6,\
             roundup_power2_divisions:[256:1,512:2,>:8]",
        )
        .expect("valid");
        let mut s = Settings::default();
        for c in &all {
            s.apply(c);
        }
        assert!(s.expandable_segments);
        assert_eq!(s.max_split_size_mb, Some(128));
        assert_eq!(s.garbage_collection_threshold, Some(0.6));
        // 1 up to 512 MiB (intervals 0..=8), 2 from 512 MiB to 1 GiB, 8 above.
        let d = s.roundup_power2_divisions.0;
        assert_eq!(&d[..=8], &[1; 9]);
        assert_eq!(d[9], 2);
        assert!(d[10..].iter().all(|&x| x == 8));
        // An interval between two named ones keeps 0, as PyTorch's parser leaves it.
        let gap = Change::parse_all("roundup_power2_divisions:[256:4,1024:8]").expect("valid");
        let Change::RoundupPower2Divisions(gap) = gap[0] else {
            panic!("{gap:?}");
        };
        assert_eq!((gap.0[8], gap.0[9], gap.0[10], gap.0[11]), (4, 0, 8, 0));
        // 0 is off, as the outputs write it (issue 23: it was refused).
        let off = Change::parse_all("roundup_power2_divisions:0").expect("0 is off");
        assert_eq!(
            off,
            vec![Change::RoundupPower2Divisions(Divisions::default())]
        );
        for (bad, says) in [
            ("max_split_size_mb:10", "at least 20"),
            ("garbage_collection_threshold:1.5", "between 0 and 1"),
            ("roundup_power2_divisions:3", "power of two"),
            ("expandable_segments:yes", "True or False"),
            ("expandable_segments:true", "so spelled"),
            ("garbage_collection_threshold:0", "strictly between 0 and 1"),
            ("pinned_memory:1", "expandable_segments, max_split_size_mb"),
            ("expandable_segments", "KEY:VALUE"),
        ] {
            let err = Change::parse_all(bad).expect_err(bad);
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn describe_writes_the_alloc_conf() {
        let mut s = Settings::default();
        for c in
            Change::parse_all("max_split_size_mb:256,roundup_power2_divisions:4").expect("valid")
        {
            s.apply(&c);
        }
        assert_eq!(
            s.describe(),
            "expandable_segments:False,max_split_size_mb:256,roundup_power2_divisions:4"
        );
        let mut tried = s;
        tried.max_split_size_mb = None;
        tried.expandable_segments = true;
        tried.skip_releases = true;
        assert_eq!(
            tried.changes_from(&s),
            "expandable_segments:True, max_split_size_mb:none, without empty_cache()"
        );
        assert_eq!(s.changes_from(&s), "no change");
    }
}

//! The snapshot model: what one snapshot file says, per device, in compact columns.
//!
//! Strings, frames and stacks are interned once per file; events refer to them by id. Sizes are
//! bytes (`*_bytes`), times are microseconds (`*_us`).

use std::fmt;

/// Id of an interned string in [`Snapshot::strings`].
pub type StrId = u32;
/// Id of a frame in [`Snapshot::frames`].
pub type FrameId = u32;
/// Id of a call stack in [`Snapshot::stacks`]; [`NO_STACK`] when none was recorded.
pub type StackId = u32;
/// Small stream number, in order of first appearance; the raw value is in [`Snapshot::streams`].
pub type StreamId = u32;
/// Index into [`Snapshot::pools`]; [`NO_POOL`] when the event carries none.
pub type PoolId = u32;

pub const NO_STACK: StackId = u32::MAX;
pub const NO_POOL: PoolId = u32::MAX;
pub const NO_STR: StrId = u32::MAX;
/// The longest a recording can span (a year, in µs): a longer one has times of another unit, or
/// times that contradict each other.
pub const MAX_PLAUSIBLE_SPAN_US: i64 = 365 * 24 * 3600 * 1_000_000;

/// `time_us` of an event that has no time.
pub const NO_TIME: i64 = i64::MIN;

/// What a trace entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Snapshot,
    Oom,
    WorkspaceSnapshot,
    Annotate,
    UserDefined,
    /// An action this version does not know, kept by name.
    Other(StrId),
}

impl Action {
    /// The known action spelled `name` in the file, if any.
    pub fn known(name: &str) -> Option<Self> {
        Some(match name {
            "alloc" => Self::Alloc,
            "free_requested" => Self::FreeRequested,
            "free_completed" => Self::FreeCompleted,
            "segment_alloc" => Self::SegmentAlloc,
            "segment_free" => Self::SegmentFree,
            "segment_map" => Self::SegmentMap,
            "segment_unmap" => Self::SegmentUnmap,
            "snapshot" => Self::Snapshot,
            "oom" => Self::Oom,
            "workspace_snapshot" => Self::WorkspaceSnapshot,
            "annotate" => Self::Annotate,
            "user_defined" => Self::UserDefined,
            _ => return None,
        })
    }

    /// The spelling in the file (for `Other`, look the name up in the string table).
    pub fn name(self, strings: &[Box<str>]) -> &str {
        match self {
            Self::Alloc => "alloc",
            Self::FreeRequested => "free_requested",
            Self::FreeCompleted => "free_completed",
            Self::SegmentAlloc => "segment_alloc",
            Self::SegmentFree => "segment_free",
            Self::SegmentMap => "segment_map",
            Self::SegmentUnmap => "segment_unmap",
            Self::Snapshot => "snapshot",
            Self::Oom => "oom",
            Self::WorkspaceSnapshot => "workspace_snapshot",
            Self::Annotate => "annotate",
            Self::UserDefined => "user_defined",
            Self::Other(id) => strings.get(id as usize).map_or("?", |s| s),
        }
    }
}

/// One device's trace as columns, oldest event first. All columns have the same length.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub action: Vec<Action>,
    /// Device address of the block or segment (0 for `oom`).
    pub addr: Vec<u64>,
    /// Requested bytes for `alloc` / `free_*`, segment bytes for `segment_*`, see the format doc.
    pub size_bytes: Vec<u64>,
    pub stream: Vec<StreamId>,
    /// Epoch microseconds, [`NO_TIME`] where the file has none.
    pub time_us: Vec<i64>,
    pub stack: Vec<StackId>,
    pub compile_context: Vec<StrId>,
    pub user_metadata: Vec<StrId>,
    pub pool: Vec<PoolId>,
    /// `(event index, free device bytes)` of each `oom` entry.
    pub oom_device_free_bytes: Vec<(u32, u64)>,
    /// Who owns each event's memory (msMemScope's `owner`, `PTA@gradient@…`; [`NO_STR`] where
    /// none): one per event, or empty when the file has no owners (snapshots).
    pub owner: Vec<StrId>,
}

impl Trace {
    pub fn len(&self) -> usize {
        self.action.len()
    }

    pub fn is_empty(&self) -> bool {
        self.action.is_empty()
    }

    /// True when every event has a time (files from `torch_npu` and 2023 CUDA have none).
    pub fn has_time(&self) -> bool {
        !self.time_us.is_empty() && self.time_us.iter().all(|&t| t != NO_TIME)
    }

    /// Last time minus first, where the times can be one run's: every event has one, they never go
    /// backwards, and they span at most [`MAX_PLAUSIBLE_SPAN_US`]. `None` otherwise.
    pub fn plausible_time_span_us(&self) -> Option<i64> {
        if !self.has_time() || self.time_us.windows(2).any(|w| w[1] < w[0]) {
            return None;
        }
        let span = self.time_us.last()?.checked_sub(*self.time_us.first()?)?;
        (span <= MAX_PLAUSIBLE_SPAN_US).then_some(span)
    }

    /// The events at `indices` of `self`, in that order, as a trace of its own.
    pub(crate) fn gather(&self, indices: &[u32]) -> Trace {
        let pick = |col: &[u64]| indices.iter().map(|&i| col[i as usize]).collect::<Vec<_>>();
        let pick32 = |col: &[u32]| indices.iter().map(|&i| col[i as usize]).collect::<Vec<_>>();
        let position: rustc_hash::FxHashMap<u32, u32> = indices
            .iter()
            .enumerate()
            .map(|(new, &old)| (old, new as u32))
            .collect();
        Trace {
            action: indices.iter().map(|&i| self.action[i as usize]).collect(),
            addr: pick(&self.addr),
            size_bytes: pick(&self.size_bytes),
            stream: pick32(&self.stream),
            time_us: indices.iter().map(|&i| self.time_us[i as usize]).collect(),
            stack: pick32(&self.stack),
            compile_context: pick32(&self.compile_context),
            user_metadata: pick32(&self.user_metadata),
            pool: pick32(&self.pool),
            owner: if self.owner.is_empty() {
                Vec::new()
            } else {
                pick32(&self.owner)
            },
            oom_device_free_bytes: self
                .oom_device_free_bytes
                .iter()
                .filter_map(|&(old, free)| position.get(&old).map(|&new| (new, free)))
                .collect(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockState {
    /// In use by a tensor.
    ActiveAllocated,
    /// Freed by the tensor, still in use by another stream (`record_stream`).
    ActivePendingFree,
    /// Free, cached by the allocator.
    Inactive,
}

impl BlockState {
    pub fn name(self) -> &'static str {
        match self {
            Self::ActiveAllocated => "active_allocated",
            Self::ActivePendingFree => "active_pending_free",
            Self::Inactive => "inactive",
        }
    }
}

/// A piece of a segment at dump time.
#[derive(Clone, Debug)]
pub struct Block {
    pub address: u64,
    /// Rounded size the allocator handed out.
    pub size_bytes: u64,
    /// What the tensor asked for (`size_bytes` when the file does not say).
    pub requested_size_bytes: u64,
    pub state: BlockState,
    pub stack: StackId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentType {
    Small,
    Large,
    Unknown,
}

/// One `cudaMalloc` (or expandable mapping) at dump time.
#[derive(Clone, Debug)]
pub struct Segment {
    pub address: u64,
    pub total_size_bytes: u64,
    pub stream: StreamId,
    pub pool: PoolId,
    pub segment_type: SegmentType,
    pub is_expandable: bool,
    pub stack: StackId,
    /// In address order, tiling the segment.
    pub blocks: Vec<Block>,
}

/// What one device recorded.
#[derive(Clone, Debug, Default)]
pub struct Device {
    pub ordinal: u32,
    pub trace: Trace,
    /// The pool at dump time, address order.
    pub segments: Vec<Segment>,
    /// How each block was used, where the recording says (msMemScope's ACCESS rows), by alloc
    /// event; empty for snapshots.
    pub block_use: Vec<BlockUse>,
    /// The whole device's memory where the recording measured it (msMemScope's SNAPSHOT rows),
    /// in time order; empty for snapshots.
    pub memory_samples: Vec<DeviceMemorySample>,
}

/// The whole device's memory at one moment, as the driver reported it (`mem_get_info`'s total
/// and free, written by msMemScope as a SNAPSHOT row): what the pool reserved is part of it, the
/// rest is outside the allocator (CANN, HCCL buffers, other processes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeviceMemorySample {
    /// The trace event it came right after (`None`: before the first).
    pub after_event: Option<u32>,
    pub time_us: i64,
    pub total_bytes: u64,
    /// At most `total_bytes`.
    pub free_bytes: u64,
}

impl DeviceMemorySample {
    pub fn used_bytes(&self) -> u64 {
        self.total_bytes - self.free_bytes
    }
}

/// How one block was used between its alloc and its free (msMemScope recordings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockUse {
    /// The trace event that allocated it.
    pub alloc_event: u32,
    /// msMemScope's `allocation_id` of the block (per process).
    pub allocation_id: u64,
    /// The trace events its first and last accesses came right after.
    pub first_access_event: Option<u32>,
    pub last_access_event: Option<u32>,
    /// Inefficiency by msMemScope's definitions, computed from the accesses
    /// (`memscope::EARLY_ALLOCATION` | `LATE_DEALLOCATION` | `TEMPORARY_IDLENESS`).
    pub flags: u8,
    /// The flags msMemScope itself wrote on the MALLOC row (`inefficient_type`), if any.
    pub recorded_flags: u8,
}

impl Device {
    /// Bytes the allocator held at dump time.
    pub fn reserved_bytes_final(&self) -> u64 {
        self.segments
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.total_size_bytes))
    }

    /// Requested bytes of the blocks in `states` at dump time.
    pub fn requested_bytes_final(&self, states: &[BlockState]) -> u64 {
        self.segments
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| states.contains(&b.state))
            .fold(0u64, |sum, b| sum.saturating_add(b.requested_size_bytes))
    }
}

/// One source line of a call stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub filename: StrId,
    pub line: i64,
    pub name: StrId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnotationStage {
    Start,
    End,
}

/// A `record_function` range boundary (`ProfilerStep#3` …).
#[derive(Clone, Debug)]
pub struct Annotation {
    pub name: String,
    pub stage: AnnotationStage,
    pub device: i64,
    pub time_us: i64,
}

/// A scalar of the allocator settings, kept as the file gave it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum SettingValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Map(Vec<(String, i64)>),
}

/// Something the data allows to continue past, but a reader should know.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    pub kind: WarningKind,
    /// Device ordinal, when the warning is about one device.
    pub device: Option<u32>,
    /// First event concerned (device trace index).
    pub event: Option<u32>,
    /// How many times it happened (one warning stands for all).
    pub count: u64,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// `free_*` events whose `alloc` is older than the trace (normal for a ring buffer).
    FreeWithoutAlloc,
    /// An `alloc` at an address that is still live.
    AllocAtLiveAddress,
    /// The trace and the final segments disagree.
    TraceDisagreesWithSegments,
    UnknownAction,
    /// A field was missing or odd and a default was used.
    OddField,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(device) = self.device {
            write!(f, "device {device}: ")?;
        }
        write!(f, "{}", self.message)?;
        if self.count > 1 {
            write!(f, " ({} times", self.count)?;
            if let Some(event) = self.event {
                write!(f, ", first at event {event}")?;
            }
            write!(f, ")")
        } else if let Some(event) = self.event {
            write!(f, " (event {event})")
        } else {
            Ok(())
        }
    }
}

/// How the file was written.
#[derive(Clone, Debug, Default)]
pub struct FileFormat {
    pub protocol: u8,
    /// A top-level list of segments with no trace (`torch.cuda.memory_snapshot()`, or a
    /// `PyTorch` ≤ 1.13 `_snapshot`).
    pub legacy_list: bool,
    pub gzip: bool,
    /// An msMemScope recording (CSV, DB or folder), read into this model.
    pub memscope: bool,
}

/// Everything one snapshot file says.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Devices with events or segments, by ordinal.
    pub devices: Vec<Device>,
    pub strings: Vec<Box<str>>,
    pub frames: Vec<Frame>,
    /// Each stack is its frames, innermost first.
    pub stacks: Vec<Box<[FrameId]>>,
    /// Raw stream values by [`StreamId`].
    pub streams: Vec<i128>,
    /// `segment_pool_id` / `pool_id` tuples by [`PoolId`].
    pub pools: Vec<(i128, i128)>,
    pub allocator_settings: Vec<(String, SettingValue)>,
    pub annotations: Vec<Annotation>,
    pub warnings: Vec<Warning>,
    pub format: FileFormat,
}

impl Snapshot {
    /// Whether `pool` is a private pool (`segment_pool_id` other than `(0, 0)`: a CUDA graph's
    /// or a `MemPool`'s): only allocations made into it use its segments, and `empty_cache()`
    /// does not release them while the graph lives.
    pub fn is_private_pool(&self, pool: PoolId) -> bool {
        self.pools
            .get(pool as usize)
            .is_some_and(|&pair| pair != (0, 0))
    }

    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// Whether the file comes from an Ascend NPU: `torch_npu` frames or settings, or the
    /// `workspace_snapshot` entries only `torch_npu` writes.
    pub fn is_npu(&self) -> bool {
        self.format.memscope
            || self.strings.iter().any(|s| s.contains("torch_npu"))
            || self
                .devices
                .iter()
                .any(|d| d.trace.action.contains(&Action::WorkspaceSnapshot))
    }

    /// Whether the program ran on Windows: its frames' files have drive-letter paths
    /// (`C:\\research\\…`). `PyTorch` has no expandable segments there.
    pub fn recorded_on_windows(&self) -> bool {
        self.frames.iter().any(|f| {
            let b = self.str(f.filename).as_bytes();
            b.len() > 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\'
        })
    }

    pub fn device(&self, ordinal: u32) -> Option<&Device> {
        self.devices.iter().find(|d| d.ordinal == ordinal)
    }

    /// The owner of event `event` of `trace`, where the file names owners.
    pub fn owner(&self, trace: &Trace, event: usize) -> Option<&str> {
        trace
            .owner
            .get(event)
            .filter(|&&o| o != NO_STR)
            .map(|&o| self.str(o))
    }

    /// The device with the most events (then the most segments): the one to show first.
    pub fn busiest_device(&self) -> Option<&Device> {
        self.devices.iter().max_by_key(|d| {
            (
                d.trace.len(),
                d.segments.len(),
                std::cmp::Reverse(d.ordinal),
            )
        })
    }

    /// Frames of `stack`, innermost first; empty for [`NO_STACK`].
    pub fn stack_frames(&self, stack: StackId) -> impl Iterator<Item = &Frame> {
        self.stacks
            .get(stack as usize)
            .into_iter()
            .flat_map(|s| s.iter())
            .map(|&f| &self.frames[f as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::{Frame, Snapshot};

    /// A file whose frames have drive-letter paths was recorded on Windows (no expandable
    /// segments there); POSIX paths and a `C:` without a backslash say nothing of it.
    #[test]
    fn windows_is_told_from_the_frames_files() {
        let with = |files: &[&str]| {
            let mut s = Snapshot::default();
            for (k, file) in files.iter().enumerate() {
                s.strings.push((*file).into());
                s.frames.push(Frame {
                    filename: k as u32,
                    line: 1,
                    name: k as u32,
                });
            }
            s.recorded_on_windows()
        };
        assert!(with(&[
            "/usr/lib/python3/torch/nn/modules/module.py",
            "C:\\research\\train.py"
        ]));
        assert!(!with(&["/home/me/train.py", "C:train.py", "??"]));
        assert!(!with(&[]));
    }
}

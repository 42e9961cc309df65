//! msMemScope rows to the snapshot model.
//!
//! - A framework pool's block (PTA, `MindSpore`, ATB MALLOC / FREE) is an `alloc` /
//!   `free_completed`, with its Python stack and its `owner`.
//! - A HAL allocation that ever holds such a block is one of the pool's segments
//!   (`segment_alloc` / `segment_free`). HAL allocations that hold none are CANN's own memory
//!   (HCCL buffers, the runtime's): outside the pool, counted in a warning-free note.
//! - Blocks that lie in no traced HAL allocation sit in segments made before the trace: a 2 MiB
//!   segment for a small block (`torch_npu`'s small pool), the block's own extent rounded up to
//!   2 MiB for a large one. The pool's own `total` attr says whether that guess holds: a warning
//!   counts the events where the rebuilt reserved bytes differ from it.
//! - MSTX ranges are annotations (`Range_start` / `Range_end`); an `OOM_TRIGGER` is an `oom`.
//! - Rows are put in time order (the writer groups them by block), µs or ns as the file has.
//!
//! Host memory (`HOST_PINNED`, the `cpu` device) is not device memory and is left out, said once.

use std::collections::BTreeMap;
use std::path::Path;

use rustc_hash::FxHashMap;

use super::{DeviceId, Kind, MemscopeError, Pool, Row, Rows, Subtype, TextId};
use crate::model::{
    Action, Annotation, AnnotationStage, Block, BlockState, BlockUse, Device, DeviceMemorySample,
    FileFormat, Frame, NO_POOL, NO_STACK, NO_STR, Segment, SegmentType, Snapshot, StackId, StrId,
    Trace, Warning, WarningKind,
};

/// `torch_npu`'s small-pool segment, and the granularity of its large ones.
const SEGMENT_GRAIN_BYTES: u64 = 2 << 20;
/// Blocks below this come from the small pool.
const SMALL_BLOCK_BYTES: u64 = 1 << 20;
/// Times below this are µs (files from before 2025-05-29), above it ns.
const NS_FROM: i64 = 100_000_000_000_000_000;

/// One HAL allocation of a device.
struct Hal {
    addr: u64,
    size_bytes: u64,
    /// Holds a pool block at some point: one of the pool's segments.
    pool: bool,
    freed: bool,
}

/// A pool block's size while it lives, by address.
#[derive(Default)]
struct DeviceState {
    hals: Vec<Hal>,
    /// Live HAL allocations by address: index into `hals`.
    hal_live: BTreeMap<u64, usize>,
    /// Live pool blocks: address to size.
    live: FxHashMap<u64, u64>,
    /// Extents of segments from before the trace: start to end.
    pre_trace: BTreeMap<u64, u64>,
    trace: Trace,
    owner: Vec<StrId>,
    /// Per judged block (process, allocation id): its use so far.
    uses: FxHashMap<(u64, u64), BlockUse>,
    /// SNAPSHOT rows: the whole device's memory.
    samples: Vec<DeviceMemorySample>,
}

impl DeviceState {
    /// The live HAL allocation holding `addr`, if any.
    fn hal_at(&self, addr: u64) -> Option<usize> {
        let (_, &i) = self.hal_live.range(..=addr).next_back()?;
        let h = &self.hals[i];
        (addr < h.addr.saturating_add(h.size_bytes)).then_some(i)
    }
    /// Records the extent of a segment from before the trace that holds `addr`, merging overlaps.
    fn add_pre_trace(&mut self, addr: u64, size_bytes: u64) {
        let (mut start, mut end) = if size_bytes < SMALL_BLOCK_BYTES {
            let start = addr - addr % SEGMENT_GRAIN_BYTES;
            (start, start.saturating_add(SEGMENT_GRAIN_BYTES))
        } else {
            (
                addr,
                addr.saturating_add(size_bytes.div_ceil(SEGMENT_GRAIN_BYTES) * SEGMENT_GRAIN_BYTES),
            )
        };
        let overlapping: Vec<(u64, u64)> = self
            .pre_trace
            .range(..end)
            .filter(|&(_, &e)| e > start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in overlapping {
            self.pre_trace.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.pre_trace.insert(start, end);
    }

    fn push(&mut self, action: Action, addr: u64, size_bytes: u64, time_us: i64) {
        let t = &mut self.trace;
        t.action.push(action);
        t.addr.push(addr);
        t.size_bytes.push(size_bytes);
        t.stream.push(0);
        t.time_us.push(time_us);
        t.stack.push(NO_STACK);
        t.compile_context.push(NO_STR);
        t.user_metadata.push(NO_STR);
        t.pool.push(NO_POOL);
        self.owner.push(NO_STR);
    }
}

/// Interns the recording's text into the snapshot's tables.
struct Tables<'r> {
    rows: &'r Rows,
    strings: Vec<Box<str>>,
    string_ids: FxHashMap<u32, StrId>,
    by_text: FxHashMap<Box<str>, StrId>,
    frames: Vec<Frame>,
    frame_ids: FxHashMap<(StrId, i64, StrId), u32>,
    stacks: Vec<Box<[u32]>>,
    by_frames: FxHashMap<Box<[u32]>, StackId>,
    python_frames: FxHashMap<TextId, Box<[u32]>>,
    call_frames: FxHashMap<TextId, u32>,
    operator_frames: FxHashMap<TextId, u32>,
}

impl<'r> Tables<'r> {
    fn new(rows: &'r Rows) -> Self {
        Self {
            rows,
            strings: Vec::new(),
            string_ids: FxHashMap::default(),
            by_text: FxHashMap::default(),
            frames: Vec::new(),
            frame_ids: FxHashMap::default(),
            stacks: Vec::new(),
            by_frames: FxHashMap::default(),
            python_frames: FxHashMap::default(),
            call_frames: FxHashMap::default(),
            operator_frames: FxHashMap::default(),
        }
    }

    fn text(&mut self, text: &str) -> StrId {
        if let Some(&id) = self.by_text.get(text) {
            return id;
        }
        let id = self.strings.len() as StrId;
        self.strings.push(text.into());
        self.by_text.insert(text.into(), id);
        id
    }

    fn string(&mut self, id: u32) -> StrId {
        if let Some(&s) = self.string_ids.get(&id) {
            return s;
        }
        let s = self.text(self.rows.text(id));
        self.string_ids.insert(id, s);
        s
    }

    /// The frame of `(file, line, name)`, interned.
    fn frame(&mut self, file: &str, line: i64, name: &str) -> u32 {
        let key = (self.text(file), line, self.text(name));
        let next = self.frames.len() as u32;
        let frame = *self.frame_ids.entry(key).or_insert(next);
        if frame == next {
            self.frames.push(Frame {
                filename: key.0,
                line: key.1,
                name: key.2,
            });
        }
        frame
    }

    /// A frame as msMemScope writes it: `file(line): function`, or anything else (`nn.Module:
    /// Linear`, a C callable, a `record_function` name) as a function of no file.
    fn frame_of_text(&mut self, text: &str) -> u32 {
        let (file, line, name) = match text.split_once("): ") {
            Some((left, name)) => match left.rsplit_once('(') {
                Some((file, n)) => (file, n.parse::<i64>().unwrap_or(0), name),
                None => (left, 0, name),
            },
            None => ("", 0, text),
        };
        self.frame(file, line, name)
    }

    /// The frame naming the operator `name` (`torch._ops.aten.addmm.default` reads
    /// `aten.addmm.default`), in the file `<operator>`.
    fn operator_frame(&mut self, name: TextId) -> u32 {
        if let Some(&f) = self.operator_frames.get(&name) {
            return f;
        }
        let full = self.rows.text(name);
        let short = full.strip_prefix("torch._ops.").unwrap_or(full).to_string();
        let frame = self.frame("<operator>", 0, &short);
        self.operator_frames.insert(name, frame);
        frame
    }

    /// The frame of a Python trace's call (`FuncInfo`).
    fn call_frame(&mut self, func: TextId) -> u32 {
        if let Some(&f) = self.call_frames.get(&func) {
            return f;
        }
        let text = self.rows.text(func).to_string();
        let frame = self.frame_of_text(text.trim());
        self.call_frames.insert(func, frame);
        frame
    }

    /// A `Call Stack(Python)` as frames, one `file(line): function` a line, innermost first.
    fn python_frames(&mut self, id: TextId) -> &[u32] {
        if !self.python_frames.contains_key(&id) {
            let text = self.rows.text(id).to_string();
            let frames: Vec<u32> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(|line| self.frame_of_text(line))
                .collect();
            self.python_frames.insert(id, frames.into_boxed_slice());
        }
        &self.python_frames[&id]
    }

    /// The stack of `frames` (innermost first), interned; [`NO_STACK`] for none.
    fn stack(&mut self, frames: &[u32]) -> StackId {
        if frames.is_empty() {
            return NO_STACK;
        }
        if let Some(&s) = self.by_frames.get(frames) {
            return s;
        }
        self.stacks.push(frames.into());
        let stack = (self.stacks.len() - 1) as StackId;
        self.by_frames.insert(frames.into(), stack);
        stack
    }
}

/// Each row's time in µs: early files wrote µs, later ones ns, told apart per file.
struct Clock {
    /// Per row file: its times are ns.
    row_file_ns: Vec<bool>,
    /// Per Python-trace file: its times are ns.
    call_file_ns: Vec<bool>,
}

impl Clock {
    fn of(rows: &Rows) -> Self {
        use rayon::prelude::*;
        // Each file's latest time, the rows split between rayon's threads.
        let files = rows.files.len();
        let file_max = rows
            .rows
            .par_iter()
            .zip(&rows.origin)
            .fold(
                || vec![0i64; files],
                |mut latest, (row, &(file, _))| {
                    latest[file as usize] = latest[file as usize].max(row.time_raw);
                    latest
                },
            )
            .reduce(
                || vec![0i64; files],
                |a, b| a.into_iter().zip(b).map(|(a, b)| a.max(b)).collect(),
            );
        let mut call_file_ns = vec![false; rows.files.len()];
        for call in &rows.calls {
            let latest = call.start_raw.max(call.end_raw).unwrap_or(0);
            call_file_ns[call.file as usize] |= latest >= NS_FROM;
        }
        Self {
            row_file_ns: file_max.into_iter().map(|m| m >= NS_FROM).collect(),
            call_file_ns,
        }
    }

    fn row_us(&self, rows: &Rows, i: usize) -> i64 {
        let raw = rows.rows[i].time_raw;
        if self.row_file_ns[rows.origin[i].0 as usize] {
            raw / 1000
        } else {
            raw
        }
    }

    fn call_us(&self, raw: i64, file: u32) -> i64 {
        if self.call_file_ns[file as usize] {
            raw / 1000
        } else {
            raw
        }
    }
}

/// Rows in time order (the writer groups a block's rows at its free), then process and id: the
/// rows sorted by time and place as one 128-bit key each (time in the high half, its sign bit
/// flipped so the bits sort as the numbers; the row in the low half), then each run of rows of
/// the same µs sorted by process, id and place.
fn time_order(rows: &Rows, clock: &Clock) -> Vec<usize> {
    use rayon::prelude::*;
    let key = |i: usize| {
        let time = clock.row_us(rows, i).cast_unsigned() ^ (1 << 63);
        (u128::from(time) << 64) | i as u128
    };
    let mut keyed: Vec<u128> = (0..rows.rows.len()).into_par_iter().map(key).collect();
    keyed.par_sort_unstable();
    let mut order: Vec<usize> = keyed.par_iter().map(|&k| k as u64 as usize).collect();
    let mut start = 0;
    while start < keyed.len() {
        let time = keyed[start] >> 64;
        let same = keyed[start..]
            .iter()
            .take_while(|&&k| k >> 64 == time)
            .count();
        if same > 1 {
            order[start..start + same]
                .sort_unstable_by_key(|&i| (rows.rows[i].pid, rows.rows[i].id, i));
        }
        start += same;
    }
    order
}

/// A row of host memory: not device memory, left out.
fn is_host(row: &Row) -> bool {
    matches!(row.kind, Kind::Malloc | Kind::Free)
        && (row.device == DeviceId::Host || matches!(row.pool, Pool::HostPinned | Pool::Host))
}

/// What the first pass learns: each row's device, the devices' HAL allocations (which hold pool
/// blocks) and the segments from before the trace.
struct Devices {
    states: BTreeMap<u32, DeviceState>,
    device_of_row: Vec<Option<u32>>,
    host_rows: u64,
    /// Per device, the processes whose rows it has.
    pids: FxHashMap<u32, Vec<u64>>,
}

/// Pass 1: each row's device (a HAL free from a file that did not know its device: the device
/// whose live allocation it frees, found as the rows come), which HAL allocations hold pool
/// blocks, and which blocks lie outside every one.
fn find_devices(rows: &Rows, order: &[usize]) -> Devices {
    let mut found = Devices {
        states: BTreeMap::new(),
        device_of_row: vec![None; rows.rows.len()],
        host_rows: 0,
        pids: FxHashMap::default(),
    };
    for &i in order {
        let row = &rows.rows[i];
        if is_host(row) {
            found.host_rows += 1;
            continue;
        }
        let device = match row.device {
            DeviceId::Npu(n) => Some(n),
            DeviceId::Unknown if row.pool == Pool::Hal && row.kind == Kind::Free => found
                .states
                .iter()
                .find(|(_, s)| s.hal_live.contains_key(&row.addr))
                .map(|(&d, _)| d),
            _ => None,
        };
        let Some(device) = device else {
            continue;
        };
        found.device_of_row[i] = Some(device);
        let pid_list = found.pids.entry(device).or_default();
        if !pid_list.contains(&row.pid) {
            pid_list.push(row.pid);
        }
        let state = found.states.entry(device).or_default();
        match (row.kind, row.pool) {
            (Kind::Malloc, Pool::Hal) => {
                state.hals.push(Hal {
                    addr: row.addr,
                    size_bytes: row.size_bytes,
                    pool: false,
                    freed: false,
                });
                state.hal_live.insert(row.addr, state.hals.len() - 1);
            }
            (Kind::Free, Pool::Hal) => {
                if let Some(h) = state.hal_live.remove(&row.addr) {
                    state.hals[h].freed = true;
                }
            }
            (Kind::Malloc, pool) if pool.is_caching_pool() => match state.hal_at(row.addr) {
                Some(h) => state.hals[h].pool = true,
                None => state.add_pre_trace(row.addr, row.size_bytes),
            },
            _ => {}
        }
    }
    // Pass 2 walks the HAL allocations again from the start.
    for state in found.states.values_mut() {
        state.hal_live.clear();
        for h in &mut state.hals {
            h.freed = false;
        }
    }
    found
}

/// Pass 2's state besides the devices': the interned text, the open operators and calls, and
/// what the warnings will count.
struct Replay<'r> {
    rows: &'r Rows,
    clock: &'r Clock,
    tables: Tables<'r>,
    annotations: Vec<Annotation>,
    /// Per device: the next of its HAL allocations (in pass 1's order).
    hal_next: FxHashMap<u32, usize>,
    /// The operators open on each thread: a block without a Python stack is placed in the
    /// innermost one (its "call site" is the operator that asked for it).
    open_ops: FxHashMap<(u64, u64), Vec<u32>>,
    calls: FxHashMap<(u64, u64), super::python_trace::ThreadCalls>,
    /// A scratch stack, reused.
    frames: Vec<u32>,
    inefficient: super::inefficient::Analyzer,
    /// Per device: bytes of the pool's live traced segments (kept as they change, not summed per
    /// row), and of the segments from before the trace.
    reserved_live: FxHashMap<u32, u64>,
    pre_trace_bytes: FxHashMap<u32, u64>,
    /// Block events whose pool `total` was checked, and those that disagreed (count, first row).
    total_checked: u64,
    total_mismatch: Option<(u64, (u32, u64))>,
    /// Driver requests that failed: device, bytes, row.
    oom_requests: Vec<(u32, u64, (u32, u64))>,
}

impl<'r> Replay<'r> {
    fn new(rows: &'r Rows, clock: &'r Clock, states: &BTreeMap<u32, DeviceState>) -> Self {
        let pre_trace_bytes = states
            .iter()
            .map(|(&d, s)| {
                let bytes = s
                    .pre_trace
                    .iter()
                    .fold(0u64, |sum, (start, end)| sum.saturating_add(end - start));
                (d, bytes)
            })
            .collect();
        Self {
            rows,
            clock,
            tables: Tables::new(rows),
            annotations: Vec::new(),
            hal_next: FxHashMap::default(),
            open_ops: FxHashMap::default(),
            calls: super::python_trace::by_thread(rows, |raw, file| clock.call_us(raw, file)),
            frames: Vec::new(),
            inefficient: super::inefficient::Analyzer::default(),
            reserved_live: FxHashMap::default(),
            pre_trace_bytes,
            total_checked: 0,
            total_mismatch: None,
            oom_requests: Vec::new(),
        }
    }

    /// Pass 2: the traces, one row at a time in time order.
    fn row(&mut self, found: &mut Devices, i: usize) -> Result<(), MemscopeError> {
        let rows = self.rows;
        let row = &rows.rows[i];
        let t_us = self.clock.row_us(rows, i);
        let judged = self.inefficient.feed(row);
        if row.kind == Kind::Access
            && let (Some((key, flags)), DeviceId::Npu(device)) = (judged, row.device)
            && let Some(state) = found.states.get_mut(&device)
            && let Some(used) = state.uses.get_mut(&key)
        {
            let after = state.trace.len().saturating_sub(1) as u32;
            used.first_access_event.get_or_insert(after);
            used.last_access_event = Some(after);
            used.flags = flags;
        }
        match row.kind {
            Kind::Mstx if matches!(row.subtype, Subtype::RangeStart | Subtype::RangeEnd) => {
                self.annotation(row, t_us);
                return Ok(());
            }
            Kind::Snapshot => {
                if let (Some(device), Some(total), Some(free)) =
                    (found.device_of_row[i], row.total_bytes(), row.free_bytes())
                    && let Some(state) = found.states.get_mut(&device)
                {
                    state.samples.push(DeviceMemorySample {
                        after_event: state.trace.len().checked_sub(1).map(|e| e as u32),
                        time_us: t_us,
                        total_bytes: total,
                        free_bytes: free.min(total),
                    });
                }
                return Ok(());
            }
            Kind::OpLaunch => {
                self.operator(row);
                return Ok(());
            }
            _ => {}
        }
        if is_host(row) {
            return Ok(());
        }
        let Some(device) = found.device_of_row[i] else {
            return Ok(());
        };
        let Some(state) = found.states.get_mut(&device) else {
            return Ok(());
        };
        if !self.block_or_segment(state, device, i, t_us, judged)? {
            return Ok(());
        }
        // The pool's own reserved bytes after a block event, against the rebuilt segments.
        if let Some(total) = row.total_bytes()
            && row.pool.is_caching_pool()
        {
            let reserved = self
                .reserved_live
                .get(&device)
                .copied()
                .unwrap_or(0)
                .saturating_add(self.pre_trace_bytes.get(&device).copied().unwrap_or(0));
            self.total_checked += 1;
            if reserved != total {
                let first = self.total_mismatch.map_or(rows.origin[i], |(_, f)| f);
                self.total_mismatch = Some((self.total_mismatch.map_or(0, |(n, _)| n) + 1, first));
            }
        }
        Ok(())
    }

    fn annotation(&mut self, row: &Row, t_us: i64) {
        self.annotations.push(Annotation {
            name: row
                .name
                .map_or_else(String::new, |n| self.rows.text(n).to_string()),
            stage: if row.subtype == Subtype::RangeStart {
                AnnotationStage::Start
            } else {
                AnnotationStage::End
            },
            device: match row.device {
                DeviceId::Npu(n) => i64::from(n),
                _ => -1,
            },
            time_us: t_us,
        });
    }

    /// An operator starts or ends on its thread.
    fn operator(&mut self, row: &Row) {
        let ops = self.open_ops.entry((row.pid, row.tid)).or_default();
        match (row.subtype, row.name) {
            (Subtype::OpStart, Some(name)) => ops.push(name),
            // The innermost open operator of that name ends (and any left open inside it).
            (Subtype::OpEnd, Some(name)) => {
                if let Some(at) = ops.iter().rposition(|&o| o == name) {
                    ops.truncate(at);
                }
            }
            (Subtype::OpEnd, None) => {
                ops.pop();
            }
            _ => {}
        }
    }

    /// A block or segment row of `device` into its trace; false for a row that is neither (or a
    /// driver OOM, kept for a warning).
    fn block_or_segment(
        &mut self,
        state: &mut DeviceState,
        device: u32,
        i: usize,
        t_us: i64,
        judged: Option<((u64, u64), u8)>,
    ) -> Result<bool, MemscopeError> {
        let rows = self.rows;
        let row = &rows.rows[i];
        match (row.kind, row.pool) {
            (Kind::Malloc, Pool::Hal) => {
                let next = self.hal_next.entry(device).or_default();
                let h = *next;
                *next += 1;
                state.hal_live.insert(row.addr, h);
                if state.hals[h].pool {
                    let reserved = self.reserved_live.entry(device).or_default();
                    *reserved = reserved.saturating_add(row.size_bytes);
                    if *reserved > crate::units::MAX_PLAUSIBLE_BYTES {
                        let (file, line) = rows.origin[i];
                        return Err(MemscopeError::BadRow {
                            path: rows.files[file as usize].clone(),
                            line,
                            message: "the pool's HAL allocations add up to more than 1 PiB: no \
                                      device holds that"
                                .into(),
                        });
                    }
                    state.push(Action::SegmentAlloc, row.addr, row.size_bytes, t_us);
                }
            }
            (Kind::Free, Pool::Hal) => {
                if let Some(h) = state.hal_live.remove(&row.addr) {
                    state.hals[h].freed = true;
                    if state.hals[h].pool {
                        let size = state.hals[h].size_bytes;
                        let reserved = self.reserved_live.entry(device).or_default();
                        *reserved = reserved.saturating_sub(size);
                        state.push(Action::SegmentFree, row.addr, size, t_us);
                    }
                }
            }
            (Kind::Malloc, pool) if pool.is_caching_pool() => {
                state.live.insert(row.addr, row.size_bytes);
                state.push(Action::Alloc, row.addr, row.size_bytes, t_us);
                let last = state.trace.len() - 1;
                state.trace.stack[last] = self.alloc_stack(row, t_us);
                if let Some(owner) = row.owner {
                    state.owner[last] = self.tables.string(owner);
                }
                if let Some(id) = row.allocation_id() {
                    state.uses.insert(
                        (row.pid, id),
                        BlockUse {
                            alloc_event: last as u32,
                            allocation_id: id,
                            recorded_flags: row.inefficient,
                            ..BlockUse::default()
                        },
                    );
                }
            }
            (Kind::Free, pool) if pool.is_caching_pool() => {
                if let (Some((key, flags)), Some(id)) = (judged, row.allocation_id())
                    && let Some(used) = state.uses.get_mut(&(row.pid, id))
                {
                    debug_assert_eq!(key, (row.pid, id));
                    used.flags = flags;
                }
                // The size the block was allocated with (early files wrote it negated, or 0).
                let size = state.live.remove(&row.addr).unwrap_or(row.size_bytes);
                state.push(Action::FreeCompleted, row.addr, size, t_us);
            }
            // A failed driver request (`HandleOOM` in msMemScope's HAL hooks), not the pool's:
            // said in a warning, not replayed as the pool's `oom` (the device's free bytes then
            // are not recorded).
            (Kind::OomDetail, _) if row.subtype == Subtype::OomTrigger => {
                self.oom_requests
                    .push((device, row.request_bytes().unwrap_or(0), rows.origin[i]));
                return Ok(false);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// An allocation's stack: the operator that asked for it, inside the Python frames (the
    /// row's own stack, else the calls the Python trace has open then).
    fn alloc_stack(&mut self, row: &Row, t_us: i64) -> StackId {
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        if let Some(&op) = self
            .open_ops
            .get(&(row.pid, row.tid))
            .and_then(|o| o.last())
        {
            frames.push(self.tables.operator_frame(op));
        }
        if let Some(stack) = row.stack {
            frames.extend_from_slice(self.tables.python_frames(stack));
        } else if let Some(thread) = self.calls.get_mut(&(row.pid, row.tid)) {
            let open: Vec<TextId> = thread.open_at(t_us).collect();
            for func in open {
                frames.push(self.tables.call_frame(func));
            }
        }
        let stack = self.tables.stack(&frames);
        self.frames = frames;
        stack
    }
}

/// The rows of a recording as a snapshot; `path` names it in errors.
pub fn to_snapshot(rows: &Rows, path: &Path) -> Result<Snapshot, MemscopeError> {
    let clock = Clock::of(rows);
    let order = time_order(rows, &clock);
    let mut found = find_devices(rows, &order);
    let mut replay = Replay::new(rows, &clock, &found.states);
    for &i in &order {
        replay.row(&mut found, i)?;
    }
    let mut warnings = Vec::new();
    let devices = finished_devices(found.states, &found.pids, &mut warnings);
    if devices.is_empty() {
        let mut why = if found.host_rows > 0 {
            format!(
                "{} rows of host memory, no MALLOC or FREE on an NPU",
                found.host_rows
            )
        } else {
            format!("{} rows, no MALLOC or FREE on an NPU", rows.rows.len())
        };
        // Rows left out may be the ones that held the device's memory: say so here too, as the
        // warnings that would have said it are not shown.
        if let Some(&(reason, file, line, _)) = rows.left_out.first() {
            let count: u64 = rows.left_out.iter().map(|l| l.3).sum();
            let rows_word = if count == 1 { "row" } else { "rows" };
            why = format!(
                "{why}; {count} {rows_word} left out, the first at {}: a row {reason}",
                left_out_place(rows, file, line)
            );
        }
        return Err(MemscopeError::NoDeviceMemory {
            path: path.to_path_buf(),
            why,
        });
    }
    replay_warnings(&replay, &mut warnings);
    recording_warnings(rows, found.host_rows, &mut warnings);
    Ok(Snapshot {
        devices,
        strings: replay.tables.strings,
        frames: replay.tables.frames,
        stacks: replay.tables.stacks,
        streams: vec![0],
        pools: Vec::new(),
        allocator_settings: Vec::new(),
        annotations: replay.annotations,
        warnings,
        format: FileFormat {
            memscope: true,
            ..FileFormat::default()
        },
    })
}

/// The devices with anything traced, each with its final pool and the blocks' use; a device
/// whose rows came from several processes is said in a warning.
fn finished_devices(
    states: BTreeMap<u32, DeviceState>,
    pids: &FxHashMap<u32, Vec<u64>>,
    warnings: &mut Vec<Warning>,
) -> Vec<Device> {
    let mut devices = Vec::new();
    for (ordinal, mut state) in states {
        if state.trace.is_empty() && state.live.is_empty() {
            continue;
        }
        let segments = final_segments(&state);
        let mut block_use: Vec<BlockUse> = state
            .uses
            .drain()
            .map(|(_, u)| u)
            .filter(|u| u.first_access_event.is_some() || u.flags != 0 || u.recorded_flags != 0)
            .collect();
        block_use.sort_unstable_by_key(|u| u.alloc_event);
        let mut trace = std::mem::take(&mut state.trace);
        if state.owner.iter().any(|&o| o != NO_STR) {
            trace.owner = std::mem::take(&mut state.owner);
        }
        if let Some(list) = pids.get(&ordinal)
            && list.len() > 1
        {
            warnings.push(Warning {
                kind: WarningKind::OddField,
                device: Some(ordinal),
                event: None,
                count: list.len() as u64,
                message: format!(
                    "rows from {} processes on this device are shown as one (processes {})",
                    list.len(),
                    list.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        devices.push(Device {
            ordinal,
            trace,
            segments,
            block_use,
            memory_samples: std::mem::take(&mut state.samples),
        });
    }
    devices
}

/// What pass 2 found that the chart does not show: the pool's own totals disagreeing with the
/// rebuilt segments, and the driver's failed requests.
fn replay_warnings(replay: &Replay, warnings: &mut Vec<Warning>) {
    let rows = replay.rows;
    if let Some((count, (file, line))) = replay.total_mismatch {
        warnings.push(Warning {
            kind: WarningKind::TraceDisagreesWithSegments,
            device: None,
            event: None,
            count,
            message: format!(
                "the pool's own reserved bytes (Attr `total`) differ from the segments rebuilt from \
                 HAL allocations at {count} of {} block events (first: {} line {line})",
                replay.total_checked,
                rows.files[file as usize].display()
            ),
        });
    }
    for &(device, request_bytes, (file, line)) in &replay.oom_requests {
        warnings.push(Warning {
            kind: WarningKind::OddField,
            device: Some(device),
            event: None,
            count: 1,
            message: format!(
                "msMemScope recorded an out-of-memory failure of the driver (OOM_TRIGGER, {} \
                 requested; {} line {line}): the chart shows the pool, not that request",
                crate::units::format_bytes(
                    request_bytes.min(crate::units::MAX_PLAUSIBLE_BYTES) as i64
                ),
                rows.files[file as usize].display()
            ),
        });
    }
}

/// A database's rows are named by rowid; a CSV's by line.
fn is_db(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("db"))
}

/// Where a row left out was: its file and line (a CSV) or rowid (a database).
fn left_out_place(rows: &Rows, file: u32, line: u64) -> String {
    let path = &rows.files[file as usize];
    let at = if is_db(path) { "row" } else { "line" };
    format!("{} {at} {line}", path.display())
}

/// What the recording itself says or lacks: expandable segments, host rows, rows left out by
/// the reader, its notes, events this version does not know.
fn recording_warnings(rows: &Rows, host_rows: u64, warnings: &mut Vec<Warning>) {
    if rows.rows.iter().any(|r| r.expandable) {
        warnings.push(Warning {
            kind: WarningKind::TraceDisagreesWithSegments,
            device: None,
            event: None,
            count: 1,
            message:
                "expandable segments (HAL rows of alloc_type create): msMemScope records their \
                      handles, not their addresses, so the pool's segments are estimated from its \
                      blocks (compare the reserved bytes with the pool's own `total`)"
                    .into(),
        });
    }
    if host_rows > 0 {
        warnings.push(Warning {
            kind: WarningKind::OddField,
            device: None,
            event: None,
            count: host_rows,
            message:
                "rows of host memory (HOST_PINNED, the cpu device) are not device memory: left out"
                    .into(),
        });
    }
    for &(reason, file, line, count) in &rows.left_out {
        let path = &rows.files[file as usize];
        let at = if is_db(path) { "row" } else { "line" };
        warnings.push(Warning {
            kind: WarningKind::OddField,
            device: None,
            event: None,
            count,
            message: format!(
                "{}: {} (first at {at} {line}): left out",
                path.display(),
                if count == 1 {
                    format!("a row {reason}")
                } else {
                    format!("{count} rows {reason}")
                },
            ),
        });
    }
    for note in &rows.notes {
        warnings.push(Warning {
            kind: WarningKind::OddField,
            device: None,
            event: None,
            count: 1,
            message: note.clone(),
        });
    }
    for (event, count) in &rows.unknown_events {
        warnings.push(Warning {
            kind: WarningKind::UnknownAction,
            device: None,
            event: None,
            count: *count,
            message: format!(
                "rows of event `{}` this version does not know: left out",
                crate::quote::quoted(event)
            ),
        });
    }
}

/// The pool at the end: live segments (HAL allocations holding blocks, and the segments from
/// before the trace), each tiled by its live blocks and free gaps.
fn final_segments(state: &DeviceState) -> Vec<Segment> {
    let mut extents: Vec<(u64, u64)> = state
        .hal_live
        .values()
        .filter(|&&h| state.hals[h].pool)
        .map(|&h| (state.hals[h].addr, state.hals[h].size_bytes))
        .chain(state.pre_trace.iter().map(|(&s, &e)| (s, e - s)))
        .collect();
    extents.sort_unstable();
    let mut live: Vec<(u64, u64)> = state.live.iter().map(|(&a, &s)| (a, s)).collect();
    live.sort_unstable();
    extents
        .into_iter()
        .map(|(address, total)| {
            let end = address.saturating_add(total);
            let mut blocks = Vec::new();
            let mut cursor = address;
            let first = live.partition_point(|&(a, _)| a < address);
            for &(a, size) in live[first..].iter().take_while(|&&(a, _)| a < end) {
                if a < cursor {
                    continue;
                }
                if a > cursor {
                    blocks.push(gap(cursor, a - cursor));
                }
                let size = size.min(end - a);
                blocks.push(Block {
                    address: a,
                    size_bytes: size,
                    requested_size_bytes: size,
                    state: BlockState::ActiveAllocated,
                    stack: NO_STACK,
                });
                cursor = a + size;
            }
            if cursor < end {
                blocks.push(gap(cursor, end - cursor));
            }
            Segment {
                address,
                total_size_bytes: total,
                stream: 0,
                pool: NO_POOL,
                segment_type: if total <= SEGMENT_GRAIN_BYTES {
                    SegmentType::Small
                } else {
                    SegmentType::Large
                },
                is_expandable: false,
                stack: NO_STACK,
                blocks,
            }
        })
        .collect()
}

fn gap(address: u64, size_bytes: u64) -> Block {
    Block {
        address,
        size_bytes,
        requested_size_bytes: 0,
        state: BlockState::Inactive,
        stack: NO_STACK,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Clock, Row, Rows};

    /// Rows come out in the order of (µs, process, id, place), as one sort by those keys gives:
    /// many rows share a µs, and times are on both sides of zero.
    #[test]
    fn rows_are_ordered_by_time_then_process_id_and_place() {
        let mut rows = Rows::default();
        let file = rows.add_file(Path::new("memscope_dump_1.csv"));
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        for line in 0..5_000 {
            let row = Row {
                time_raw: next(200) as i64 - 100,
                pid: next(3),
                id: next(40),
                ..Row::PLACEHOLDER
            };
            rows.push(row, file, line);
        }
        let clock = Clock::of(&rows);
        let mut expected: Vec<usize> = (0..rows.rows.len()).collect();
        expected.sort_by_key(|&i| {
            let row = &rows.rows[i];
            (clock.row_us(&rows, i), row.pid, row.id, i)
        });
        assert_eq!(super::time_order(&rows, &clock), expected);
    }
}

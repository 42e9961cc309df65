//! Snapshot loader: file → [`Snapshot`].
//!
//! Trace entries are turned into columns while the pickle streams by (through
//! [`pickle::Hooks`]), frames and stacks are interned the first time a shared list is seen, and
//! the small rest of the file (segments, settings, annotations) is read from the arena afterwards.
//! Loading is total where the data allows: oddities become [`Warning`]s; only unreadable input is
//! an error.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustc_hash::FxHashMap;

use crate::model::{
    Action, Annotation, AnnotationStage, Block, BlockState, Device, FileFormat, Frame, FrameId,
    NO_POOL, NO_STACK, NO_STR, NO_TIME, PoolId, Segment, SegmentType, SettingValue, Snapshot,
    StackId, StreamId, Trace, Warning, WarningKind,
};
use crate::pickle::{self, Node, NodeId, PickleError, PickleErrorKind, StrId, Tree, Value};
use crate::quote::quoted;

/// Why a file could not be loaded. Every message names the file last.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Io {
        source: std::io::Error,
        path: PathBuf,
    },
    #[error(
        "not a memory snapshot: it contains code (the {opcode} opcode at byte {offset}); nothing was executed, in {path}"
    )]
    Code {
        opcode: &'static str,
        offset: u64,
        path: PathBuf,
    },
    #[error("file ends early (truncated at byte {offset}), in {path}")]
    Truncated { offset: u64, path: PathBuf },
    #[error("{what} at byte {offset}, in {path}")]
    Malformed {
        what: String,
        offset: u64,
        path: PathBuf,
    },
    #[error("loading was cancelled, in {path}")]
    Cancelled { path: PathBuf },
    /// Not a pickle at all (text, an image, a CSV …), with what it looks like.
    #[error("not a memory snapshot: {what}; {EXPECTED}; in {path}")]
    NotASnapshot { what: String, path: PathBuf },
    /// An msMemScope recording that could not be read.
    #[error(transparent)]
    Memscope(#[from] crate::memscope::MemscopeError),
}

/// What memsight reads, for messages about files that are something else.
const EXPECTED: &str = "memsight expects a pickle written by torch.cuda.memory._dump_snapshot() or \
                        torch_npu.npu.memory._dump_snapshot() (optionally gzip-compressed), a torch_npu \
                        profiler folder, or an msMemScope recording (memscope_dump_*.csv or .db, or its folder)";

/// What the first bytes of a file that failed to load as a pickle look like, when they say more
/// than the pickle error: a profiler CSV, text, an empty file. `None` for anything pickle-like
/// (a snapshot starts with the PROTO opcode, 0x80).
fn looks_like(head: &[u8]) -> Option<String> {
    if head.is_empty() {
        return Some("the file is empty".to_string());
    }
    if head[0] == 0x80 {
        return None;
    }
    let text = String::from_utf8_lossy(head);
    let first_line = text
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches('\u{feff}');
    let csv_headers = ["Component,", "Name,Size", "Device_id,", "Op Name,", "Tag,"];
    if csv_headers.iter().any(|h| first_line.starts_with(h)) {
        return Some(format!(
            "a profiler CSV given where a snapshot is expected (it starts with \"{}\"); open its folder as profiler data",
            quoted(first_line)
        ));
    }
    let printable = head
        .iter()
        .take(64)
        .filter(|&&b| {
            b == b'\n' || b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80
        })
        .count();
    (printable * 10 >= head.len().min(64) * 9).then(|| {
        format!(
            "not a pickle: it starts with text (\"{}\")",
            quoted(first_line)
        )
    })
}

impl LoadError {
    fn from_pickle(err: PickleError, path: &Path) -> Self {
        let path = path.to_path_buf();
        match err.kind {
            PickleErrorKind::Code(opcode) => Self::Code {
                opcode,
                offset: err.offset,
                path,
            },
            PickleErrorKind::Truncated => Self::Truncated {
                offset: err.offset,
                path,
            },
            PickleErrorKind::Unsupported(what) => Self::Malformed {
                what: format!("unsupported {what}"),
                offset: err.offset,
                path,
            },
            PickleErrorKind::Malformed(what) | PickleErrorKind::Io(what) => Self::Malformed {
                what,
                offset: err.offset,
                path,
            },
            PickleErrorKind::Cancelled => Self::Cancelled { path },
        }
    }
}

/// Shared with a UI thread: how far a load is, and a way to stop it.
#[derive(Debug, Default)]
pub struct LoadProgress {
    /// Bytes of the (decompressed) pickle parsed so far.
    pub bytes_read: AtomicU64,
    /// Trace events read so far.
    pub events_read: AtomicU64,
    pub cancel: AtomicBool,
    /// What the load is doing now ([`LoadPhase`] as a number).
    phase: std::sync::atomic::AtomicU8,
}

/// The stages of a load, in order: the file is read, then the allocator is replayed over the
/// trace, then the findings and the views' indexes are computed (a progress bar full of bytes
/// read still has these to go: seconds on millions of events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadPhase {
    Reading,
    Replaying,
    Analysing,
}

impl LoadProgress {
    pub fn set_phase(&self, phase: LoadPhase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    pub fn phase(&self) -> LoadPhase {
        match self.phase.load(Ordering::Relaxed) {
            0 => LoadPhase::Reading,
            1 => LoadPhase::Replaying,
            _ => LoadPhase::Analysing,
        }
    }
}

/// Loads the snapshot at `path` (plain or gzip-compressed).
pub fn load_path(path: &Path, progress: Option<&LoadProgress>) -> Result<Snapshot, LoadError> {
    // msMemScope's recordings (a dump CSV or DB, or a folder of them) read into the same model.
    if crate::memscope::is_memscope_path(path) {
        return Ok(crate::memscope::load(path)?);
    }
    if crate::memscope::python_trace::is_trace_name(path) {
        return Err(crate::memscope::MemscopeError::NotMemscope {
            path: path.to_path_buf(),
            why: "this is msMemScope's Python trace, which gives stacks to the blocks of the \
                  memscope_dump file beside it: open that file or its folder"
                .into(),
        }
        .into());
    }
    if path.is_dir() {
        return Err(LoadError::NotASnapshot {
            what: "a folder, with no torch_npu profiler data in it".to_string(),
            path: path.to_path_buf(),
        });
    }
    let file = File::open(path).map_err(|source| LoadError::Io {
        source,
        path: path.to_path_buf(),
    })?;
    load_reader(BufReader::with_capacity(1 << 16, file), path, progress)
}

/// Loads a snapshot held in memory; `name` is what errors call it.
pub fn load_bytes(bytes: &[u8], name: &Path) -> Result<Snapshot, LoadError> {
    load_reader(bytes, name, None)
}

/// Loads a snapshot from `input`; `name` is what errors call it. Gzip is detected by its magic.
pub fn load_reader<R: BufRead>(
    mut input: R,
    name: &Path,
    progress: Option<&LoadProgress>,
) -> Result<Snapshot, LoadError> {
    let head = input.fill_buf().map_err(|source| LoadError::Io {
        source,
        path: name.to_path_buf(),
    })?;
    let gzip = head.starts_with(&[0x1f, 0x8b]);
    let mut reader: Box<dyn BufRead + '_> = if gzip {
        Box::new(BufReader::new(flate2::bufread::MultiGzDecoder::new(input)))
    } else {
        Box::new(input)
    };
    // The first bytes, to say what the file is when it is no pickle.
    let head: Vec<u8> = reader
        .fill_buf()
        .map_or_else(|_| Vec::new(), |h| h[..h.len().min(256)].to_vec());

    let mut tree = Tree::default();
    let mut builder = EventBuilder::new(&mut tree, progress);
    let (top, protocol, end) =
        pickle::unpickle(&mut reader, &mut tree, &mut builder).map_err(|e| {
            match looks_like(&head) {
                Some(what) if !matches!(e.kind, PickleErrorKind::Cancelled) => {
                    LoadError::NotASnapshot {
                        what,
                        path: name.to_path_buf(),
                    }
                }
                _ => LoadError::from_pickle(e, name),
            }
        })?;
    let format = FileFormat {
        protocol,
        legacy_list: matches!(top, Value::List(_)),
        gzip,
        memscope: false,
    };
    assemble(tree, builder, top, format, end).map_err(|e| LoadError::from_pickle(e, name))
}

/// Key names the loader looks for, interned up front so lookups compare integers.
struct Keys {
    action: StrId,
    addr: StrId,
    size: StrId,
    stream: StrId,
    time_us: StrId,
    frames: StrId,
    compile_context: StrId,
    user_metadata: StrId,
    pool_id: StrId,
    device_free: StrId,
    filename: StrId,
    line: StrId,
    name: StrId,
}

impl Keys {
    fn new(tree: &mut Tree) -> Self {
        Self {
            action: tree.intern("action"),
            addr: tree.intern("addr"),
            size: tree.intern("size"),
            stream: tree.intern("stream"),
            time_us: tree.intern("time_us"),
            frames: tree.intern("frames"),
            compile_context: tree.intern("compile_context"),
            user_metadata: tree.intern("user_metadata"),
            pool_id: tree.intern("pool_id"),
            device_free: tree.intern("device_free"),
            filename: tree.intern("filename"),
            line: tree.intern("line"),
            name: tree.intern("name"),
        }
    }
}

/// Events' worth of column pages kept mapped ahead of the loader (half of it asked for every
/// half): 32 Ki events are 256 KiB of an 8-byte column.
const PREFAULT_EVENTS: usize = 32 * 1024;

/// Turns trace entries into columns as they are appended, and interns what they refer to.
struct EventBuilder<'p> {
    keys: Keys,
    events: Trace,
    frame_ids: FxHashMap<Frame, FrameId>,
    frames: Vec<Frame>,
    stack_ids: FxHashMap<Box<[FrameId]>, StackId>,
    stacks: Vec<Box<[FrameId]>>,
    stream_ids: FxHashMap<i128, StreamId>,
    streams: Vec<i128>,
    last_stream: Option<(i128, StreamId)>,
    /// Actions by their string's id, direct-mapped: a trace spells the same few action names
    /// (one string each, shared through the memo) a million times.
    actions: [(StrId, Action); 8],
    /// Maps the columns' next pages on another core (see [`crate::prefault`]).
    prefault: Option<crate::prefault::Prefaulter>,
    pool_ids: FxHashMap<(i128, i128), PoolId>,
    pools: Vec<(i128, i128)>,
    progress: Option<&'p LoadProgress>,
}

impl<'p> EventBuilder<'p> {
    fn new(tree: &mut Tree, progress: Option<&'p LoadProgress>) -> Self {
        Self {
            keys: Keys::new(tree),
            events: Trace::default(),
            frame_ids: FxHashMap::default(),
            frames: Vec::new(),
            stack_ids: FxHashMap::default(),
            stacks: Vec::new(),
            stream_ids: FxHashMap::default(),
            streams: Vec::new(),
            last_stream: None,
            actions: [(NO_STR, Action::Alloc); 8],
            prefault: crate::prefault::Prefaulter::new(),
            pool_ids: FxHashMap::default(),
            pools: Vec::new(),
            progress,
        }
    }

    /// The action a trace entry's `action` string names.
    fn action(&mut self, tree: &Tree, name: StrId) -> Action {
        let slot = &mut self.actions[name as usize % 8];
        if slot.0 != name {
            *slot = (
                name,
                Action::known(tree.str(name)).unwrap_or(Action::Other(name)),
            );
        }
        slot.1
    }

    /// Interns a stream; a trace's events are nearly all on one stream, so the last one is
    /// answered without hashing.
    fn stream_id(&mut self, raw: i128) -> StreamId {
        if let Some((last_raw, last_id)) = self.last_stream
            && last_raw == raw
        {
            return last_id;
        }
        let id = *self.stream_ids.entry(raw).or_insert_with(|| {
            self.streams.push(raw);
            (self.streams.len() - 1) as StreamId
        });
        self.last_stream = Some((raw, id));
        id
    }

    fn pool_id(&mut self, tree: &Tree, value: Value, at: u64) -> Result<PoolId, PickleError> {
        if value == Value::None {
            return Ok(NO_POOL);
        }
        let pair = match tree.items(value) {
            Some(&[a, b]) => tree.int(a).zip(tree.int(b)),
            _ => None,
        };
        let pair = pair.ok_or_else(|| {
            PickleError::malformed(at, "a pool id that is not a pair of integers")
        })?;
        Ok(*self.pool_ids.entry(pair).or_insert_with(|| {
            self.pools.push(pair);
            (self.pools.len() - 1) as PoolId
        }))
    }

    /// The stack a `frames` value stands for, interning it (and its frames) the first time.
    fn stack_id(&mut self, tree: &mut Tree, value: Value, at: u64) -> Result<StackId, PickleError> {
        let node = match value {
            Value::None => return Ok(NO_STACK),
            Value::List(node) => node,
            _ => return Err(PickleError::malformed(at, "`frames` is not a list")),
        };
        let items = match tree.node(node) {
            Node::Stack(id) => return Ok(*id),
            Node::List(items) => items.clone(),
            _ => return Err(PickleError::malformed(at, "`frames` is not a list")),
        };
        if items.is_empty() {
            return Ok(NO_STACK);
        }
        let frames = items
            .into_iter()
            .map(|item| self.frame_id(tree, item, at))
            .collect::<Result<Box<[FrameId]>, _>>()?;
        let id = if let Some(&id) = self.stack_ids.get(&frames) {
            id
        } else {
            let id = self.stacks.len() as StackId;
            self.stacks.push(frames.clone());
            self.stack_ids.insert(frames, id);
            id
        };
        tree.nodes[node as usize] = Node::Stack(id);
        Ok(id)
    }

    fn frame_id(&mut self, tree: &mut Tree, value: Value, at: u64) -> Result<FrameId, PickleError> {
        let Value::Dict(node) = value else {
            return Err(PickleError::malformed(at, "a frame that is not a dict"));
        };
        if let Node::Frame(id) = tree.node(node) {
            return Ok(*id);
        }
        let text = |key| match tree.get(node, key) {
            Some(Value::Str(s)) => Ok(s),
            None | Some(Value::None) => Ok(NO_STR),
            Some(_) => Err(PickleError::malformed(
                at,
                "a frame whose filename or name is not a string",
            )),
        };
        let frame = Frame {
            filename: text(self.keys.filename)?,
            name: text(self.keys.name)?,
            line: tree
                .get(node, self.keys.line)
                .and_then(|v| tree.int(v))
                .map_or(0, |l| l.clamp(0, i128::from(i64::MAX)) as i64),
        };
        let next = self.frames.len() as FrameId;
        let id = *self.frame_ids.entry(frame).or_insert(next);
        if id == next {
            self.frames.push(frame);
        }
        tree.nodes[node as usize] = Node::Frame(id);
        Ok(id)
    }

    fn convert_event(&mut self, tree: &mut Tree, node: NodeId, at: u64) -> Result<(), PickleError> {
        // A trace entry has about ten keys; bigger dicts are something else.
        let Node::Dict(items) = tree.node(node) else {
            return Ok(());
        };
        if items.len() > pickle::MAX_LOOKUP_KEYS {
            return Ok(());
        }
        let fields = self.fields(items.iter().copied());
        if let Some(index) = self.add_event(tree, &fields, at)? {
            tree.nodes[node as usize] = Node::Event(index);
        }
        Ok(())
    }

    /// The fields of a trace entry among a dict's `(key, value)` pairs (a repeated key: the
    /// last, as Python keeps it).
    fn fields(&self, pairs: impl Iterator<Item = (Value, Value)>) -> EventFields {
        let k = &self.keys;
        let mut fields = EventFields::default();
        for (key, value) in pairs {
            let Value::Str(key) = key else { continue };
            let slot = if key == k.action {
                &mut fields.action
            } else if key == k.addr {
                &mut fields.addr
            } else if key == k.size {
                &mut fields.size
            } else if key == k.stream {
                &mut fields.stream
            } else if key == k.time_us {
                &mut fields.time_us
            } else if key == k.frames {
                &mut fields.frames
            } else if key == k.compile_context {
                &mut fields.compile_context
            } else if key == k.user_metadata {
                &mut fields.user_metadata
            } else if key == k.pool_id {
                &mut fields.pool_id
            } else if key == k.device_free {
                &mut fields.device_free
            } else {
                continue;
            };
            *slot = Some(value);
        }
        fields
    }

    /// Appends the event `fields` describe to the columns and returns its index; `None` when
    /// they have no `action` string (no trace entry).
    fn add_event(
        &mut self,
        tree: &mut Tree,
        fields: &EventFields,
        at: u64,
    ) -> Result<Option<u32>, PickleError> {
        let Some(Value::Str(action_name)) = fields.action else {
            return Ok(None);
        };
        let action = self.action(tree, action_name);
        let unsigned = |value: Option<Value>, what: &str| -> Result<u64, PickleError> {
            match value {
                None | Some(Value::None) => Ok(0),
                Some(v) => tree
                    .int(v)
                    .and_then(|i| u64::try_from(i).ok())
                    .ok_or_else(|| {
                        PickleError::malformed(
                            at,
                            format!("trace entry `{what}` is not an unsigned 64-bit integer"),
                        )
                    }),
            }
        };
        let addr = unsigned(fields.addr, "addr")?;
        let size_bytes = plausible_bytes(unsigned(fields.size, "size")?, "trace entry `size`", at)?;
        let device_free = fields
            .device_free
            .map(|v| {
                unsigned(Some(v), "device_free")
                    .and_then(|b| plausible_bytes(b, "trace entry `device_free`", at))
            })
            .transpose()?;
        let stream_raw = match fields.stream {
            None | Some(Value::None) => 0,
            Some(v) => tree.int(v).ok_or_else(|| {
                PickleError::malformed(at, "trace entry `stream` is not an integer")
            })?,
        };
        let time_us = match fields.time_us {
            None | Some(Value::None) => NO_TIME,
            Some(Value::Float(f)) if f.is_finite() => f as i64,
            Some(v) => tree
                .int(v)
                .and_then(|i| i64::try_from(i).ok())
                .ok_or_else(|| {
                    PickleError::malformed(at, "trace entry `time_us` is not a 64-bit integer")
                })?,
        };
        let text = |value: Option<Value>, what: &str| match value {
            None | Some(Value::None) => Ok(NO_STR),
            Some(Value::Str(s)) => Ok(s),
            Some(_) => Err(PickleError::malformed(
                at,
                format!("trace entry `{what}` is not a string"),
            )),
        };
        let compile_context = text(fields.compile_context, "compile_context")?;
        let user_metadata = text(fields.user_metadata, "user_metadata")?;
        let stack = self.stack_id(tree, fields.frames.unwrap_or(Value::None), at)?;
        let pool = self.pool_id(tree, fields.pool_id.unwrap_or(Value::None), at)?;
        let stream = self.stream_id(stream_raw);

        let index = self.events.len() as u32;
        if index > 0
            && (index as usize).is_multiple_of(PREFAULT_EVENTS / 2)
            && let Some(prefault) = &self.prefault
        {
            let e = &mut self.events;
            prefault.keep_ahead(&mut e.action, PREFAULT_EVENTS);
            prefault.keep_ahead(&mut e.addr, PREFAULT_EVENTS);
            prefault.keep_ahead(&mut e.size_bytes, PREFAULT_EVENTS);
            prefault.keep_ahead(&mut e.stream, PREFAULT_EVENTS);
            prefault.keep_ahead(&mut e.time_us, PREFAULT_EVENTS);
            prefault.keep_ahead(&mut e.stack, PREFAULT_EVENTS);
            prefault.keep_ahead(&mut e.compile_context, PREFAULT_EVENTS);
            prefault.keep_ahead(&mut e.user_metadata, PREFAULT_EVENTS);
            prefault.keep_ahead(&mut e.pool, PREFAULT_EVENTS);
        }
        let e = &mut self.events;
        e.action.push(action);
        e.addr.push(addr);
        e.size_bytes.push(size_bytes);
        e.stream.push(stream);
        e.time_us.push(time_us);
        e.stack.push(stack);
        e.compile_context.push(compile_context);
        e.user_metadata.push(user_metadata);
        e.pool.push(pool);
        if let Some(free) = device_free {
            e.oom_device_free_bytes.push((index, free));
        }
        Ok(Some(index))
    }
}

#[derive(Default)]
struct EventFields {
    action: Option<Value>,
    addr: Option<Value>,
    size: Option<Value>,
    stream: Option<Value>,
    time_us: Option<Value>,
    frames: Option<Value>,
    compile_context: Option<Value>,
    user_metadata: Option<Value>,
    pool_id: Option<Value>,
    device_free: Option<Value>,
}

impl pickle::Hooks for EventBuilder<'_> {
    /// A trace entry becomes an event as its one `SETITEMS` ends (no vector of pairs is made
    /// for it); other dicts stay dicts.
    fn on_dict(
        &mut self,
        tree: &mut Tree,
        items: &[Value],
        offset: u64,
    ) -> Result<Option<Node>, PickleError> {
        if items.len() > 2 * pickle::MAX_LOOKUP_KEYS {
            return Ok(None);
        }
        let fields = self.fields(items.chunks_exact(2).map(|kv| (kv[0], kv[1])));
        Ok(self.add_event(tree, &fields, offset)?.map(Node::Event))
    }

    fn on_append(
        &mut self,
        tree: &mut Tree,
        item: Value,
        offset: u64,
    ) -> Result<Value, PickleError> {
        if let Value::Dict(node) = item {
            self.convert_event(tree, node, offset)?;
        }
        Ok(item)
    }

    fn prefault(&self) -> Option<&crate::prefault::Prefaulter> {
        self.prefault.as_ref()
    }

    fn on_progress(&mut self, bytes_read: u64) -> bool {
        let Some(progress) = self.progress else {
            return true;
        };
        progress.bytes_read.store(bytes_read, Ordering::Relaxed);
        progress
            .events_read
            .store(self.events.len() as u64, Ordering::Relaxed);
        !progress.cancel.load(Ordering::Relaxed)
    }
}

/// Reads the rest of the file (segments, settings, annotations) from the arena and splits the
/// event columns by device.
#[expect(
    clippy::too_many_lines,
    reason = "one pass over the top-level keys, in file order"
)]
fn assemble(
    mut tree: Tree,
    mut b: EventBuilder<'_>,
    top: Value,
    format: FileFormat,
    end: u64,
) -> Result<Snapshot, PickleError> {
    // Structural errors found after the stream ended point at its end (the STOP opcode).
    let at = end;
    let key = |tree: &mut Tree, name: &str| tree.intern(name);
    let (segments_value, traces_value, settings_value, annotations_value) = match top {
        Value::Dict(node) => {
            let keys = [
                key(&mut tree, "segments"),
                key(&mut tree, "device_traces"),
                key(&mut tree, "allocator_settings"),
                key(&mut tree, "external_annotations"),
            ];
            let [segments, traces, settings, annotations] = keys.map(|k| tree.get(node, k));
            if segments.is_none() && traces.is_none() {
                let found: Vec<String> = match tree.node(node) {
                    Node::Dict(items) => items
                        .iter()
                        .take(12)
                        .map(|(k, _)| match k {
                            Value::Str(s) => format!("\"{}\"", quoted(tree.str(*s))),
                            _ => "a non-string key".to_string(),
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                return Err(PickleError::malformed(
                    at,
                    format!(
                        "a pickle, but not a memory snapshot: it has no \"segments\" or \"device_traces\" (top-level \
                         keys found: {})",
                        if found.is_empty() {
                            "none".to_string()
                        } else {
                            found.join(", ")
                        }
                    ),
                ));
            }
            (segments, traces, settings, annotations)
        }
        Value::List(_) => (Some(top), None, None, None),
        _ => {
            return Err(PickleError::malformed(
                at,
                "a pickle, but not a memory snapshot: the top-level object is neither a snapshot dict nor a list \
                 of segments",
            ));
        }
    };

    // Real files share stacks, never traces, segments or block lists: a shared one would make the
    // work (and memory) grow with the number of references instead of the file size.
    let mut seen = Seen::default();
    let mut per_device: Vec<(u32, Vec<u32>)> = Vec::new();
    // Each trace entry is a dict of its own; one shared through the memo would repeat its event
    // once per reference (10 million references in a 20 MB file made a diff abort under 6 GB).
    let mut entry_taken: Vec<bool> = vec![false; b.events.len()];
    if let Some(traces) = traces_value {
        let lists = tree
            .items(traces)
            .ok_or_else(|| PickleError::malformed(at, "`device_traces` is not a list"))?;
        for (ordinal, list) in lists.iter().enumerate() {
            seen.first_time(*list, at, "a device trace")?;
            let entries = tree.items(*list).ok_or_else(|| {
                PickleError::malformed(at, format!("`device_traces[{ordinal}]` is not a list"))
            })?;
            let mut indices = Vec::with_capacity(entries.len());
            for entry in entries {
                match entry {
                    Value::Dict(n) => match tree.node(*n) {
                        Node::Event(i) => {
                            let i = *i;
                            if entry_taken.len() <= i as usize {
                                entry_taken.resize(i as usize + 1, false);
                            }
                            if std::mem::replace(&mut entry_taken[i as usize], true) {
                                return Err(PickleError::malformed(
                                    at,
                                    format!(
                                        "an entry of `device_traces[{ordinal}]` appears twice \
                                         (shared through the memo): a snapshot's entries are \
                                         each their own dict"
                                    ),
                                ));
                            }
                            indices.push(i);
                        }
                        _ => {
                            return Err(PickleError::malformed(
                                at,
                                format!(
                                    "an entry of `device_traces[{ordinal}]` has no `action` string"
                                ),
                            ));
                        }
                    },
                    _ => {
                        return Err(PickleError::malformed(
                            at,
                            format!("an entry of `device_traces[{ordinal}]` is not a dict"),
                        ));
                    }
                }
            }
            per_device.push((ordinal as u32, indices));
        }
    }

    let mut segments_by_device: FxHashMap<u32, Vec<Segment>> = FxHashMap::default();
    if let Some(segments) = segments_value {
        let items = tree
            .items(segments)
            .ok_or_else(|| PickleError::malformed(at, "`segments` is not a list"))?
            .to_vec();
        for item in items {
            seen.first_time(item, at, "a segment")?;
            let (device, segment) = read_segment(&mut tree, &mut b, &mut seen, item, at)?;
            segments_by_device.entry(device).or_default().push(segment);
        }
    }

    let allocator_settings = settings_value
        .map(|v| read_settings(&tree, v))
        .unwrap_or_default();
    let annotations = annotations_value
        .map(|v| read_annotations(&mut tree, v))
        .unwrap_or_default();

    let all_events = std::mem::take(&mut b.events);
    let whole = per_device.iter().filter(|(_, i)| !i.is_empty()).count() == 1
        && per_device.iter().any(|(_, i)| {
            i.len() == all_events.len() && i.iter().enumerate().all(|(n, &e)| n as u32 == e)
        });
    let mut all_events = Some(all_events);
    let mut devices: Vec<Device> = Vec::new();
    let mut impossible: Vec<Warning> = Vec::new();
    let mut ordinals: Vec<u32> = per_device
        .iter()
        .filter(|(_, i)| !i.is_empty())
        .map(|(o, _)| *o)
        .collect();
    ordinals.extend(segments_by_device.keys().copied());
    ordinals.sort_unstable();
    ordinals.dedup();
    for ordinal in ordinals {
        let indices = per_device
            .iter()
            .find(|(o, _)| *o == ordinal)
            .map(|(_, i)| i.as_slice())
            .unwrap_or_default();
        let trace = if whole && !indices.is_empty() {
            all_events.take().unwrap_or_default()
        } else {
            all_events
                .as_ref()
                .map(|t| t.gather(indices))
                .unwrap_or_default()
        };
        let mut segments = segments_by_device.remove(&ordinal).unwrap_or_default();
        segments.sort_by_key(|s| s.address);
        if let Some(warning) = impossible_blocks(ordinal, &mut segments) {
            impossible.push(warning);
        }
        devices.push(Device {
            ordinal,
            trace,
            segments,
            block_use: Vec::new(),
            memory_samples: Vec::new(),
        });
    }

    let mut warnings = impossible;
    for device in &devices {
        let mut unknown: FxHashMap<StrId, (u64, u32)> = FxHashMap::default();
        for (i, action) in device.trace.action.iter().enumerate() {
            if let Action::Other(name) = action {
                unknown.entry(*name).or_insert((0, i as u32)).0 += 1;
            }
        }
        let mut unknown: Vec<_> = unknown.into_iter().collect();
        unknown.sort_unstable_by_key(|&(_, (_, first))| first);
        for (name, (count, first)) in unknown {
            warnings.push(Warning {
                kind: WarningKind::UnknownAction,
                device: Some(device.ordinal),
                event: Some(first),
                count,
                message: format!("unknown action `{}` kept as is", quoted(tree.str(name))),
            });
        }
    }

    if tree.cut_strings.0 > 0 {
        warnings.push(Warning {
            kind: WarningKind::OddField,
            device: None,
            event: None,
            count: tree.cut_strings.0,
            message: format!(
                "strings longer than {} were cut to that length (the longest: {} bytes); real snapshots \
                 hold a few KiB at most",
                crate::units::format_bytes(pickle::MAX_STRING_BYTES as i64),
                tree.cut_strings.1
            ),
        });
    }

    Ok(Snapshot {
        devices,
        strings: std::mem::take(&mut tree.strings),
        frames: b.frames,
        stacks: b.stacks,
        streams: b.streams,
        pools: b.pools,
        allocator_settings,
        annotations,
        warnings,
        format,
    })
}

/// Container nodes already read, to refuse shared ones.
#[derive(Default)]
struct Seen(rustc_hash::FxHashSet<NodeId>);

impl Seen {
    fn first_time(&mut self, value: Value, at: u64, what: &str) -> Result<(), PickleError> {
        let (Value::List(node) | Value::Dict(node) | Value::Tuple(node)) = value else {
            return Ok(());
        };
        if self.0.insert(node) {
            Ok(())
        } else {
            Err(PickleError::malformed(
                at,
                format!("{what} appears twice (shared through the memo)"),
            ))
        }
    }
}

fn read_segment(
    tree: &mut Tree,
    b: &mut EventBuilder<'_>,
    seen: &mut Seen,
    value: Value,
    at: u64,
) -> Result<(u32, Segment), PickleError> {
    let Value::Dict(node) = value else {
        return Err(PickleError::malformed(at, "a segment that is not a dict"));
    };
    if tree.dict_len(node) > pickle::MAX_LOOKUP_KEYS {
        return Err(PickleError::malformed(
            at,
            "a segment dict with hundreds of keys",
        ));
    }
    let get = |tree: &mut Tree, name: &str| {
        let k = tree.intern(name);
        tree.get(node, k)
    };
    let uint = |tree: &Tree, v: Option<Value>, what: &str| unsigned_field(tree, v, what, at);
    let device = get(tree, "device");
    let device = uint(tree, device, "device")?.unwrap_or(0);
    let device = u32::try_from(device)
        .map_err(|_| PickleError::malformed(at, "segment `device` is out of range"))?;
    let address = get(tree, "address");
    let address = uint(tree, address, "address")?
        .ok_or_else(|| PickleError::malformed(at, "a segment without `address`"))?;
    let total = get(tree, "total_size");
    let total_size_bytes = uint(tree, total, "total_size")?
        .ok_or_else(|| PickleError::malformed(at, "a segment without `total_size`"))?;
    let total_size_bytes = plausible_bytes(total_size_bytes, "segment `total_size`", at)?;
    let stream_raw = get(tree, "stream").and_then(|v| tree.int(v)).unwrap_or(0);
    let stream = b.stream_id(stream_raw);
    let pool_value = get(tree, "segment_pool_id").unwrap_or(Value::None);
    let pool = b.pool_id(tree, pool_value, at)?;
    let segment_type = match get(tree, "segment_type") {
        Some(Value::Str(s)) if tree.str(s) == "small" => SegmentType::Small,
        Some(Value::Str(s)) if tree.str(s) == "large" => SegmentType::Large,
        _ => SegmentType::Unknown,
    };
    let is_expandable = matches!(get(tree, "is_expandable"), Some(Value::Bool(true)));
    let frames = get(tree, "frames").unwrap_or(Value::None);
    let stack = b.stack_id(tree, frames, at)?;

    let block_values = match get(tree, "blocks") {
        None | Some(Value::None) => Vec::new(),
        Some(v) => {
            seen.first_time(v, at, "a segment's block list")?;
            tree.items(v)
                .ok_or_else(|| PickleError::malformed(at, "segment `blocks` is not a list"))?
                .to_vec()
        }
    };
    let mut blocks = Vec::with_capacity(block_values.len());
    let mut next_address = address;
    for value in block_values {
        let block = read_block(tree, b, value, next_address, at)?;
        next_address = block.address.saturating_add(block.size_bytes);
        blocks.push(block);
    }
    Ok((
        device,
        Segment {
            address,
            total_size_bytes,
            stream,
            pool,
            segment_type,
            is_expandable,
            stack,
            blocks,
        },
    ))
}

/// A segment or block field that must be an unsigned integer when present.
/// `bytes`, where one device can hold it; a size above
/// [`MAX_PLAUSIBLE_BYTES`](crate::units::MAX_PLAUSIBLE_BYTES) makes the file malformed: it would
/// only ever be printed as an impossible figure.
fn plausible_bytes(bytes: u64, what: &str, at: u64) -> Result<u64, PickleError> {
    if bytes > crate::units::MAX_PLAUSIBLE_BYTES {
        return Err(PickleError::malformed(
            at,
            format!("{what} is {bytes} bytes, more than 1 PiB: no device holds that"),
        ));
    }
    Ok(bytes)
}

fn unsigned_field(
    tree: &Tree,
    value: Option<Value>,
    what: &str,
    at: u64,
) -> Result<Option<u64>, PickleError> {
    match value {
        None | Some(Value::None) => Ok(None),
        Some(v) => tree
            .int(v)
            .and_then(|i| u64::try_from(i).ok())
            .map(Some)
            .ok_or_else(|| {
                PickleError::malformed(
                    at,
                    format!("`{what}` of a segment or block is not an unsigned integer"),
                )
            }),
    }
}

/// One block of a segment; `next_address` is where it starts when the file does not say.
fn read_block(
    tree: &mut Tree,
    b: &mut EventBuilder<'_>,
    value: Value,
    next_address: u64,
    at: u64,
) -> Result<Block, PickleError> {
    let Value::Dict(bn) = value else {
        return Err(PickleError::malformed(at, "a block that is not a dict"));
    };
    let bget = |tree: &mut Tree, name: &str| {
        let k = tree.intern(name);
        tree.get(bn, k)
    };
    let size = bget(tree, "size");
    let size_bytes = unsigned_field(tree, size, "block size", at)?
        .ok_or_else(|| PickleError::malformed(at, "a block without `size`"))?;
    let size_bytes = plausible_bytes(size_bytes, "block `size`", at)?;
    let block_address = bget(tree, "address");
    let block_address =
        unsigned_field(tree, block_address, "block address", at)?.unwrap_or(next_address);
    let state = match bget(tree, "state") {
        Some(Value::Str(s)) => match tree.str(s) {
            "active_allocated" => BlockState::ActiveAllocated,
            // The docstring's spelling, in case a writer followed it.
            "active_pending_free" | "active_awaiting_free" => BlockState::ActivePendingFree,
            "inactive" => BlockState::Inactive,
            other => {
                return Err(PickleError::malformed(
                    at,
                    format!("unknown block state `{other}`"),
                ));
            }
        },
        _ => {
            return Err(PickleError::malformed(
                at,
                "a block without a `state` string",
            ));
        }
    };
    // Early-2023 files: requested size and frames live in `history[0]`.
    let history_first =
        bget(tree, "history").and_then(|h| tree.items(h).and_then(|items| items.first().copied()));
    let (mut requested, mut frames) = (bget(tree, "requested_size"), bget(tree, "frames"));
    if let Some(Value::Dict(h)) = history_first {
        let (real_size, hframes) = (tree.intern("real_size"), tree.intern("frames"));
        requested = requested.or(tree.get(h, real_size));
        frames = frames.or(tree.get(h, hframes));
    }
    let requested_size_bytes =
        unsigned_field(tree, requested, "requested_size", at)?.unwrap_or(size_bytes);
    let requested_size_bytes = plausible_bytes(requested_size_bytes, "block `requested_size`", at)?;
    let stack = b.stack_id(tree, frames.unwrap_or(Value::None), at)?;
    Ok(Block {
        address: block_address,
        size_bytes,
        requested_size_bytes,
        state,
        stack,
    })
}

fn read_settings(tree: &Tree, value: Value) -> Vec<(String, SettingValue)> {
    let Value::Dict(node) = value else {
        return Vec::new();
    };
    let Node::Dict(items) = tree.node(node) else {
        return Vec::new();
    };
    let scalar = |v: Value| -> Option<SettingValue> {
        Some(match v {
            Value::Bool(b) => SettingValue::Bool(b),
            Value::Int(i) => SettingValue::Int(i),
            Value::Float(f) => SettingValue::Float(f),
            Value::Str(s) => SettingValue::Text(tree.str(s).to_string()),
            Value::Dict(n) => match tree.node(n) {
                Node::Dict(entries) => SettingValue::Map(
                    entries
                        .iter()
                        .filter_map(|&(k, v)| match (k, v) {
                            (Value::Str(k), Value::Int(i)) => Some((tree.str(k).to_string(), i)),
                            _ => None,
                        })
                        .collect(),
                ),
                _ => return None,
            },
            _ => return None,
        })
    };
    items
        .iter()
        .filter_map(|&(k, v)| match k {
            Value::Str(k) => scalar(v).map(|v| (tree.str(k).to_string(), v)),
            _ => None,
        })
        .collect()
}

fn read_annotations(tree: &mut Tree, value: Value) -> Vec<Annotation> {
    let (name, stage, device, time_us) = (
        tree.intern("name"),
        tree.intern("stage"),
        tree.intern("device"),
        tree.intern("time_us"),
    );
    let Some(items) = tree.items(value) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|&item| {
            let Value::Dict(n) = item else { return None };
            let Some(Value::Str(name)) = tree.get(n, name) else {
                return None;
            };
            let stage = match tree.get(n, stage) {
                Some(Value::Str(s)) if tree.str(s) == "START" => AnnotationStage::Start,
                Some(Value::Str(s)) if tree.str(s) == "END" => AnnotationStage::End,
                _ => return None,
            };
            Some(Annotation {
                name: tree.str(name).to_string(),
                stage,
                device: tree
                    .get(n, device)
                    .and_then(|v| tree.int(v))
                    .map_or(0, |d| d as i64),
                time_us: tree
                    .get(n, time_us)
                    .and_then(|v| tree.int(v))
                    .map_or(NO_TIME, |t| t as i64),
            })
        })
        .collect()
}

/// Blocks no pool can hold, left out of `segments` with one warning for the device: a block
/// that reaches past its segment's end (or starts before it), or one that overlaps the block
/// before it. Every command then counts the same blocks (`stats` once said 2 live blocks where
/// `state` drew 1, for a 4 KiB segment "holding" 1 TiB).
fn impossible_blocks(ordinal: u32, segments: &mut [crate::model::Segment]) -> Option<Warning> {
    let (mut count, mut first, mut bytes) = (0u64, None, 0u64);
    for segment in segments.iter_mut() {
        let end = segment.address.saturating_add(segment.total_size_bytes);
        segment.blocks.sort_by_key(|b| b.address);
        let mut covered = segment.address;
        segment.blocks.retain(|b| {
            let fits = b.address >= covered
                && b.address
                    .checked_add(b.size_bytes)
                    .is_some_and(|e| e <= end);
            if fits {
                covered = b.address + b.size_bytes;
            } else {
                count += 1;
                bytes = bytes.saturating_add(b.size_bytes);
                first.get_or_insert((segment.address, segment.total_size_bytes, b.address));
            }
            fits
        });
    }
    let (segment, size, block) = first?;
    Some(Warning {
        kind: WarningKind::TraceDisagreesWithSegments,
        device: Some(ordinal),
        event: None,
        count,
        message: format!(
            "blocks outside their segment or overlapping another ({} in all) left out of the \
             final pool; the first at {block:#x}, in the segment at {segment:#x} of {}",
            crate::units::format_bytes(bytes as i64),
            crate::units::format_bytes(size as i64)
        ),
    })
}

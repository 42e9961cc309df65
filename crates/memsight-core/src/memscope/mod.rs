//! msMemScope recordings (Ascend): `memscope_dump_*.csv`, the `.db`, or a whole
//! `msmemscope_{PID}_{ts}_ascend` folder, read into the snapshot model so that every view,
//! detector and command works on them unchanged.
//!
//! - [`read`]: rows from CSV or `SQLite`.
//! - [`map`]: rows to a [`Snapshot`]: the pool's blocks (PTA, `MindSpore`, ATB) as allocs and frees,
//!   the HAL allocations that hold them as segments, MSTX ranges as annotations, owners and Python
//!   stacks per alloc.
//!
//! The format, as its writer makes it, is in `docs/memscope-format.md`.

pub mod compare;
pub mod inefficient;
pub mod map;
pub mod python_trace;
pub mod read;
#[doc(hidden)]
pub mod split;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use crate::model::Snapshot;

/// msMemScope's `inefficient_type` flags on a MALLOC row.
pub const EARLY_ALLOCATION: u8 = 1;
pub const LATE_DEALLOCATION: u8 = 2;
pub const TEMPORARY_IDLENESS: u8 = 4;

#[derive(Debug, thiserror::Error)]
pub enum MemscopeError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not an msMemScope recording: {why}")]
    NotMemscope { path: PathBuf, why: String },
    #[error("{path}: line {line}: {message}")]
    BadRow {
        path: PathBuf,
        line: u64,
        message: String,
    },
    /// A row of a `.db` table: named by its table and `rowid` (a database has no lines).
    #[error("{path}: table `{table}`, row {rowid}: {message}")]
    BadDbRow {
        path: PathBuf,
        table: String,
        rowid: i64,
        message: String,
    },
    #[error("{path}: cannot read the database: {message}")]
    Db { path: PathBuf, message: String },
    #[error("{path}: no device memory in this recording ({why})")]
    NoDeviceMemory { path: PathBuf, why: String },
}

/// The `Event` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Malloc,
    Free,
    Access,
    OpLaunch,
    KernelLaunch,
    Mstx,
    Snapshot,
    System,
    OomDetail,
    /// Counted, then left out.
    Unknown,
}

impl Kind {
    fn of(text: &str) -> Self {
        match text {
            "MALLOC" => Self::Malloc,
            "FREE" => Self::Free,
            "ACCESS" => Self::Access,
            "OP_LAUNCH" => Self::OpLaunch,
            "KERNEL_LAUNCH" => Self::KernelLaunch,
            "MSTX" => Self::Mstx,
            "SNAPSHOT" => Self::Snapshot,
            "SYSTEM" => Self::System,
            "OOM_DETAIL" => Self::OomDetail,
            _ => Self::Unknown,
        }
    }
}

/// Which memory a MALLOC / FREE / ACCESS row is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pool {
    /// The driver's allocations (`halMemAlloc` / `halMemCreate`): the pools' segments and CANN's
    /// own memory.
    Hal,
    /// `PyTorch`'s caching allocator (`torch_npu`), workspace included.
    Pta,
    MindSpore,
    Atb,
    HostPinned,
    Host,
    Other,
}

impl Pool {
    fn of(text: &str) -> Self {
        match text {
            "HAL" => Self::Hal,
            "PTA" | "PTA_WORKSPACE" => Self::Pta,
            "MINDSPORE" => Self::MindSpore,
            "ATB" => Self::Atb,
            "HOST_PINNED" => Self::HostPinned,
            "HOST" => Self::Host,
            _ => Self::Other,
        }
    }

    /// A framework's caching pool: its blocks are the tensors.
    pub fn is_caching_pool(self) -> bool {
        matches!(self, Self::Pta | Self::MindSpore | Self::Atb)
    }
}

/// The `Event Type` column, where memsight uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subtype {
    Pool(Pool),
    OpStart,
    OpEnd,
    RangeStart,
    RangeEnd,
    Mark,
    OomTrigger,
    Other,
}

impl Subtype {
    fn of(kind: Kind, text: &str) -> Self {
        match (kind, text) {
            (Kind::Malloc | Kind::Free, pool) => Self::Pool(Pool::of(pool)),
            (Kind::OpLaunch, "ATEN_START" | "ATB_START") => Self::OpStart,
            (Kind::OpLaunch, "ATEN_END" | "ATB_END") => Self::OpEnd,
            (Kind::Mstx, "Range_start") => Self::RangeStart,
            (Kind::Mstx, "Range_end") => Self::RangeEnd,
            (Kind::Mstx, "Mark") => Self::Mark,
            (Kind::OomDetail, "OOM_TRIGGER") => Self::OomTrigger,
            _ => Self::Other,
        }
    }
}

/// The `Device Id` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceId {
    Npu(u32),
    /// `cpu` (`host` in older files): host memory.
    Host,
    /// `N/A`: the writer did not know.
    Unknown,
}

impl DeviceId {
    fn of(text: &str) -> Self {
        match text {
            "cpu" | "host" => Self::Host,
            n => n.parse::<u32>().map_or(Self::Unknown, Self::Npu),
        }
    }
}

/// A row's `Attr`, as key and value text, in the file's order (borrowed from the cell where it
/// can be: a million rows parse without a string each).
#[derive(Clone, Debug, Default)]
pub struct Attrs<'a>(pub Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl Attrs<'_> {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }
}

/// Id of an interned string in [`Rows::strings`].
pub type TextId = u32;

/// One row, with what memsight uses of it.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub id: u64,
    pub kind: Kind,
    pub subtype: Subtype,
    /// MALLOC / FREE: the Event Type; ACCESS: its `type` attr.
    pub pool: Pool,
    pub name: Option<TextId>,
    /// `Timestamp(ns)` as written: ns, or µs in files from before 2025-05-29.
    pub time_raw: i64,
    pub pid: u64,
    pub tid: u64,
    pub device: DeviceId,
    pub addr: u64,
    pub size_bytes: u64,
    /// `allocation_id`; the pool's reserved bytes after this event (pool MALLOC / FREE;
    /// SNAPSHOT: the device's); SNAPSHOT: the device's free bytes; `OOM_DETAIL`'s `req_size`:
    /// each where [`Self::present`] has its bit (a million rows hold them in 8 bytes each).
    allocation_id: u64,
    total_bytes: u64,
    free_bytes: u64,
    request_bytes: u64,
    present: u8,
    pub owner: Option<TextId>,
    /// [`EARLY_ALLOCATION`] | [`LATE_DEALLOCATION`] | [`TEMPORARY_IDLENESS`].
    pub inefficient: u8,
    pub stack: Option<TextId>,
    /// A HAL MALLOC of `alloc_type:create` (expandable segments: its Ptr is a handle).
    pub expandable: bool,
    /// `shadow:true`: made up by msMemScope for a block seen while tracing was off.
    pub shadow: bool,
    /// The MALLOC's owner is `PTA_WORKSPACE` (the CSV writes the workspace's rows as `PTA`).
    pub owner_is_workspace: bool,
}

impl Row {
    /// What a row's place holds before the row is read into it (a piece's room, filled side by
    /// side with the others).
    pub(super) const PLACEHOLDER: Self = Self {
        id: 0,
        kind: Kind::Unknown,
        subtype: Subtype::Other,
        pool: Pool::Other,
        name: None,
        time_raw: 0,
        pid: 0,
        tid: 0,
        device: DeviceId::Unknown,
        addr: 0,
        size_bytes: 0,
        allocation_id: 0,
        total_bytes: 0,
        free_bytes: 0,
        request_bytes: 0,
        present: 0,
        owner: None,
        inefficient: 0,
        stack: None,
        expandable: false,
        shadow: false,
        owner_is_workspace: false,
    };
}

// A million rows are read at once: each byte of a row is a megabyte to write.
const _: () = assert!(std::mem::size_of::<Row>() <= 120);

impl Row {
    const ALLOCATION_ID: u8 = 1;
    const TOTAL: u8 = 2;
    const FREE: u8 = 4;
    const REQUEST: u8 = 8;

    fn field(&self, bit: u8, value: u64) -> Option<u64> {
        (self.present & bit != 0).then_some(value)
    }

    pub fn allocation_id(&self) -> Option<u64> {
        self.field(Self::ALLOCATION_ID, self.allocation_id)
    }

    /// The pool's reserved bytes after this event (pool MALLOC / FREE); SNAPSHOT: the device's.
    pub fn total_bytes(&self) -> Option<u64> {
        self.field(Self::TOTAL, self.total_bytes)
    }

    /// SNAPSHOT: the device's free bytes.
    pub fn free_bytes(&self) -> Option<u64> {
        self.field(Self::FREE, self.free_bytes)
    }

    /// `OOM_DETAIL`'s `req_size`.
    pub fn request_bytes(&self) -> Option<u64> {
        self.field(Self::REQUEST, self.request_bytes)
    }

    /// The row with these numbers, each present where given.
    fn with_numbers(
        mut self,
        allocation_id: Option<u64>,
        total_bytes: Option<u64>,
        free_bytes: Option<u64>,
        request_bytes: Option<u64>,
    ) -> Self {
        for (bit, value, place) in [
            (Self::ALLOCATION_ID, allocation_id, &mut self.allocation_id),
            (Self::TOTAL, total_bytes, &mut self.total_bytes),
            (Self::FREE, free_bytes, &mut self.free_bytes),
            (Self::REQUEST, request_bytes, &mut self.request_bytes),
        ] {
            if let Some(value) = value {
                *place = value;
                self.present |= bit;
            }
        }
        self
    }
}

/// Every row of a recording's files, with interned text and where each row came from.
#[derive(Debug, Default)]
pub struct Rows {
    pub rows: Vec<Row>,
    /// Per row: (file index, line or rowid), for messages.
    pub origin: Vec<(u32, u64)>,
    pub files: Vec<PathBuf>,
    pub strings: Vec<Box<str>>,
    index: FxHashMap<Box<str>, TextId>,
    /// What the interned text holds: each string twice (list and index) and their headers.
    text_bytes: usize,
    /// Rows whose `Event` this version does not know, by name.
    pub unknown_events: Vec<(String, u64)>,
    /// The Python trace's calls, where the recording has one.
    pub calls: Vec<python_trace::Call>,
    /// Rows left out, by reason and file: (reason, file index, first line or rowid, count).
    pub left_out: Vec<(&'static str, u32, u64, u64)>,
    /// What reading let pass that the user should know (text that was not UTF-8, a database
    /// whose write-ahead log is missing), each naming its file: warnings of the recording.
    pub notes: Vec<String>,
}

impl Rows {
    fn add_file(&mut self, path: &Path) -> u32 {
        self.files.push(path.to_path_buf());
        (self.files.len() - 1) as u32
    }

    fn push(&mut self, row: Row, file: u32, line: u64) {
        self.rows.push(row);
        self.origin.push((file, line));
    }

    pub fn intern(&mut self, text: &str) -> TextId {
        if let Some(&id) = self.index.get(text) {
            return id;
        }
        let id = self.strings.len() as TextId;
        self.text_bytes += 2 * text.len() + 48;
        self.strings.push(text.into());
        self.index.insert(text.into(), id);
        id
    }

    /// What one row holds in memory, with its origin, for [`crate::budget`].
    pub const ROW_BYTES: u64 =
        (std::mem::size_of::<Row>() + std::mem::size_of::<(u32, u64)>()) as u64;

    /// What the interned text holds in memory, for [`crate::budget`].
    pub fn text_bytes(&self) -> u64 {
        self.text_bytes as u64
    }

    pub fn text(&self, id: TextId) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// Takes `other`'s rows (read from other files, on another thread), re-interning its text.
    fn absorb(&mut self, other: Rows) {
        let ids: Vec<TextId> = other.strings.iter().map(|s| self.intern(s)).collect();
        let map = |id: Option<TextId>| id.map(|i| ids[i as usize]);
        let offset = self.files.len() as u32;
        self.files.extend(other.files);
        for (mut row, (file, line)) in other.rows.into_iter().zip(other.origin) {
            row.name = map(row.name);
            row.owner = map(row.owner);
            row.stack = map(row.stack);
            self.push(row, file + offset, line);
        }
        self.calls
            .extend(other.calls.into_iter().map(|call| python_trace::Call {
                func: ids[call.func as usize],
                file: call.file + offset,
                ..call
            }));
        self.notes.extend(other.notes);
        for (reason, file, line, count) in other.left_out {
            self.left_out.push((reason, file + offset, line, count));
        }
        for (event, count) in other.unknown_events {
            for _ in 0..count {
                self.count_unknown(&event);
            }
        }
    }

    /// Room for `count` more rows of `file`: placeholders, written side by side (each thread
    /// touching its own pages); false where the memory bound or the machine refuses it.
    fn make_room(&mut self, count: usize, file: u32) -> bool {
        use rayon::prelude::*;
        let total = (self.rows.len() + count) as u64;
        if crate::budget::exceeded(total * Self::ROW_BYTES + self.text_bytes()).is_some()
            || self.rows.try_reserve_exact(count).is_err()
            || self.origin.try_reserve_exact(count).is_err()
        {
            return false;
        }
        self.rows
            .par_extend(rayon::iter::repeat_n(Row::PLACEHOLDER, count));
        self.origin
            .par_extend(rayon::iter::repeat_n((file, 0), count));
        true
    }

    /// Drops the rows from `len` on.
    fn truncate(&mut self, len: usize) {
        self.rows.truncate(len);
        self.origin.truncate(len);
    }

    /// Takes `pieces`, read side by side into their rooms from `base` on (`starts`: each room's
    /// size; per piece, its text and what it left out, and the places it filled) as rows of
    /// `file`: their text re-interned and renumbered side by side, what was left out counted
    /// with this file's (the first line kept), the rooms' empty places closed up.
    fn take_pieces(
        &mut self,
        pieces: Vec<(Rows, usize)>,
        starts: &[read::PieceStart],
        (file, base): (u32, usize),
    ) {
        use rayon::prelude::*;
        let ids: Vec<Vec<TextId>> = pieces
            .iter()
            .map(|(piece, _)| piece.strings.iter().map(|s| self.intern(s)).collect())
            .collect();
        let mut rooms = Vec::with_capacity(starts.len());
        let mut rest = &mut self.rows[base..];
        for start in starts {
            let (room, tail) = rest.split_at_mut(start.rows_at_most);
            rooms.push(room);
            rest = tail;
        }
        rooms
            .into_par_iter()
            .zip(&ids)
            .zip(&pieces)
            .for_each(|((room, ids), (_, filled))| {
                let map = |id: Option<TextId>| id.map(|i| ids[i as usize]);
                for row in &mut room[..*filled] {
                    row.name = map(row.name);
                    row.owner = map(row.owner);
                    row.stack = map(row.stack);
                }
            });
        let (mut end, mut room_start) = (base, base);
        for (start, (piece, filled)) in starts.iter().zip(pieces) {
            if room_start != end {
                self.rows.copy_within(room_start..room_start + filled, end);
                self.origin
                    .copy_within(room_start..room_start + filled, end);
            }
            end += filled;
            room_start += start.rows_at_most;
            self.notes.extend(piece.notes);
            for (reason, _, line, count) in piece.left_out {
                match self
                    .left_out
                    .iter_mut()
                    .find(|(r, f, _, _)| *r == reason && *f == file)
                {
                    Some((_, _, _, n)) => *n += count,
                    None => self.left_out.push((reason, file, line, count)),
                }
            }
            for (event, count) in piece.unknown_events {
                match self.unknown_events.iter_mut().find(|(e, _)| *e == event) {
                    Some((_, n)) => *n += count,
                    None => self.unknown_events.push((event, count)),
                }
            }
        }
        self.truncate(end);
    }

    /// A row of `file` at `line` that cannot be taken for what its columns say, left out for
    /// `reason` (counted; the first line kept for the warning).
    fn leave_out(&mut self, reason: &'static str, file: u32, line: u64) {
        match self
            .left_out
            .iter_mut()
            .find(|(r, f, _, _)| *r == reason && *f == file)
        {
            Some((_, _, _, count)) => *count += 1,
            None => self.left_out.push((reason, file, line, 1)),
        }
    }

    fn count_unknown(&mut self, event: &str) {
        match self.unknown_events.iter_mut().find(|(e, _)| e == event) {
            Some((_, n)) => *n += 1,
            None => self.unknown_events.push((event.to_string(), 1)),
        }
    }
}

/// Whether `path` is an msMemScope recording: a `memscope_dump_*` / `leaks_dump_*` CSV or DB, a
/// CSV with msMemScope's header, an `SQLite` file (whose tables are checked when it is read), or a
/// folder holding such files (an `msmemscope_*_ascend` folder,
/// a `device_N` folder, a `dump` folder, or a folder of those).
pub fn is_memscope_path(path: &Path) -> bool {
    if path.is_dir() {
        return !dump_files(path).is_empty();
    }
    is_dump_name(path) || has_memscope_header(path) || starts_with_sqlite_magic(path)
}

fn is_dump_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    (name.starts_with("memscope_dump_") || name.starts_with("leaks_dump_"))
        && matches!(extension.as_deref(), Some("csv" | "db"))
}

/// A `.csv` whose first line is msMemScope's header.
fn has_memscope_header(path: &Path) -> bool {
    use std::io::Read as _;
    if path
        .extension()
        .is_none_or(|e| !e.eq_ignore_ascii_case("csv"))
    {
        return false;
    }
    let mut head = [0u8; 512];
    let Ok(n) = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    let text = String::from_utf8_lossy(&head[..n]);
    let first = text.lines().next().unwrap_or("");
    let cells: Vec<&str> = first.split(',').collect();
    read::is_memscope_header(&cells)
}

/// The dump files under `dir` (at most four levels down: `out/msmemscope_*/device_N/dump/`),
/// sorted. A CSV and a DB of the same name stem are both kept (a user's choice to pass both).
pub fn dump_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // Looking, not reading: a folder that cannot be opened holds nothing seen.
    let _ = walk_dumps(dir, 4, &mut out);
    out.sort();
    out
}

/// [`dump_files`] for reading: a folder below `dir` that cannot be opened (a `device_1/` without
/// read permission) is an error naming it, as an unreadable file is, not a device left out.
fn dump_files_to_read(dir: &Path) -> Result<Vec<PathBuf>, MemscopeError> {
    let mut out = Vec::new();
    walk_dumps(dir, 4, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk_dumps(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) -> Result<(), MemscopeError> {
    let io = |source| MemscopeError::Io {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            if depth > 0 {
                walk_dumps(&path, depth - 1, out)?;
            }
        } else if is_dump_name(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads the recording at `path` (a dump file or a folder, with the `python_trace_*.csv` beside
/// its dump files) into a [`Snapshot`].
pub fn load(path: &Path) -> Result<Snapshot, MemscopeError> {
    let files = if path.is_dir() {
        let files = dump_files_to_read(path)?;
        if files.is_empty() {
            return Err(MemscopeError::NotMemscope {
                path: path.to_path_buf(),
                why: "no memscope_dump_*.csv or .db in this folder or below it".into(),
            });
        }
        files
    } else {
        vec![path.to_path_buf()]
    };
    let traces = python_trace::beside(&files);
    let files: Vec<PathBuf> = files.into_iter().chain(traces).collect();
    // One file per device: read side by side, then merged (the first error, in file order, wins).
    let read: Vec<Result<Rows, MemscopeError>> = {
        use rayon::prelude::*;
        files
            .par_iter()
            .map(|file| {
                let mut rows = Rows::default();
                let is_db = file
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("db"))
                    || starts_with_sqlite_magic(file);
                if is_db {
                    read::read_db(file, &mut rows)?;
                } else if python_trace::is_trace_name(file) {
                    python_trace::read_csv(file, &mut rows)?;
                } else {
                    read::read_csv(file, &mut rows)?;
                }
                Ok(rows)
            })
            .collect()
    };
    let mut rows = Rows::default();
    for file_rows in read {
        let file_rows = file_rows?;
        if rows.rows.is_empty() && rows.files.is_empty() {
            rows = file_rows;
        } else {
            rows.absorb(file_rows);
        }
    }
    map::to_snapshot(&rows, path)
}

fn starts_with_sqlite_magic(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0")
}

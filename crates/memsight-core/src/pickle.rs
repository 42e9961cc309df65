//! A streaming unpickler for the data-only subset of the pickle format that memory snapshots use
//! (protocols 2–5).
//!
//! It never executes anything: opcodes that name code (`GLOBAL`, `REDUCE`, …) stop the load with
//! [`PickleErrorKind::Code`]. Values live in a flat arena ([`Tree`]): a memo reference is a copy of
//! a 16-byte [`Value`] that points at the same node, so shared stack lists stay shared and nothing
//! is ever deep-copied. The VM is iterative, so deep nesting cannot overflow the call stack.
//!
//! The loader plugs in through [`Hooks::on_append`], which sees every item appended to a list and
//! may turn it into a compact record at once (trace entries become columns while the file streams
//! by, instead of living as dictionaries until the end).

use std::io::Read;

use rustc_hash::FxHashMap;

/// Index of an interned string in [`Tree::strings`].
pub type StrId = u32;
/// Index of a container in [`Tree::nodes`].
pub type NodeId = u32;

/// One pickled value. Containers and big integers are handles into the [`Tree`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer outside `i64`, index into [`Tree::big_ints`].
    BigInt(u32),
    Float(f64),
    Str(StrId),
    List(NodeId),
    Dict(NodeId),
    Tuple(NodeId),
}

/// A container in the arena, or what the loader turned it into.
#[derive(Debug)]
pub enum Node {
    List(Vec<Value>),
    /// Items in insertion order; a repeated key is kept twice and [`Tree::get`] returns the last.
    Dict(Vec<(Value, Value)>),
    Tuple(Box<[Value]>),
    /// A trace entry converted by the loader: index of the event.
    Event(u32),
    /// A frame dictionary converted by the loader: frame id.
    Frame(u32),
    /// A list of frames converted by the loader: stack id.
    Stack(u32),
}

/// Largest dictionary [`Tree::get`] searches.
pub const MAX_LOOKUP_KEYS: usize = 256;

/// Strings longer than this are cut to it as they are read (with a warning): real snapshots
/// hold file names, frames and actions of a few KiB at most, and a hostile file could otherwise
/// make memory grow with one string's length rather than with the number of events.
pub const MAX_STRING_BYTES: usize = 64 * 1024;

/// The arena every value of one file lives in.
#[derive(Debug, Default)]
pub struct Tree {
    pub nodes: Vec<Node>,
    pub strings: Vec<Box<str>>,
    string_ids: FxHashMap<Box<str>, StrId>,
    pub big_ints: Vec<i128>,
    /// Strings cut to [`MAX_STRING_BYTES`]: how many, and the longest one's length in bytes.
    pub cut_strings: (u64, u64),
}

impl Tree {
    /// Interns `text`, returning the id it has (or gets).
    pub fn intern(&mut self, text: &str) -> StrId {
        if let Some(&id) = self.string_ids.get(text) {
            return id;
        }
        let id = self.strings.len() as StrId;
        self.strings.push(text.into());
        self.string_ids.insert(text.into(), id);
        id
    }

    pub fn str(&self, id: StrId) -> &str {
        &self.strings[id as usize]
    }

    /// Entries of the dictionary `node` (0 for anything else).
    pub fn dict_len(&self, node: NodeId) -> usize {
        match self.node(node) {
            Node::Dict(items) => items.len(),
            _ => 0,
        }
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// The value of `key` in the dictionary `node`; `None` when absent, when `node` is no
    /// dictionary, or when it has more than [`MAX_LOOKUP_KEYS`] entries (a snapshot's dicts have a
    /// handful; the bound keeps hostile files from making every lookup a long scan).
    pub fn get(&self, node: NodeId, key: StrId) -> Option<Value> {
        match self.node(node) {
            Node::Dict(items) if items.len() <= MAX_LOOKUP_KEYS => items
                .iter()
                .rev()
                .find(|(k, _)| *k == Value::Str(key))
                .map(|&(_, v)| v),
            _ => None,
        }
    }

    /// An integer value as `i128`, whatever its width.
    pub fn int(&self, value: Value) -> Option<i128> {
        match value {
            Value::Int(v) => Some(i128::from(v)),
            Value::Bool(b) => Some(i128::from(b)),
            Value::BigInt(i) => Some(self.big_ints[i as usize]),
            _ => None,
        }
    }

    /// The items of a list or tuple node.
    pub fn items(&self, value: Value) -> Option<&[Value]> {
        match value {
            Value::List(n) | Value::Tuple(n) => match self.node(n) {
                Node::List(items) => Some(items),
                Node::Tuple(items) => Some(items),
                _ => None,
            },
            _ => None,
        }
    }

    fn push_node(&mut self, node: Node) -> NodeId {
        let id = self.nodes.len() as NodeId;
        self.nodes.push(node);
        id
    }
}

/// What went wrong, without the file name (the loader adds it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickleErrorKind {
    /// A code opcode: the file is not a memory snapshot.
    Code(&'static str),
    /// The input ended inside an opcode or before `STOP`.
    Truncated,
    Unsupported(String),
    Malformed(String),
    Cancelled,
    Io(String),
}

/// A failure at a byte offset of the (decompressed) pickle stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickleError {
    pub offset: u64,
    pub kind: PickleErrorKind,
}

impl PickleError {
    pub fn malformed(offset: u64, what: impl Into<String>) -> Self {
        Self {
            offset,
            kind: PickleErrorKind::Malformed(what.into()),
        }
    }
}

/// How the loader takes part in unpickling.
pub trait Hooks {
    /// Called for each value appended to a list, once the value is complete. Returns the value to
    /// store (usually `item` itself).
    fn on_append(
        &mut self,
        tree: &mut Tree,
        item: Value,
        offset: u64,
    ) -> Result<Value, PickleError>;

    /// Called when `SETITEMS` fills an empty dict, with its keys and values alternating; may
    /// turn the dict into another node at once, without a vector of pairs of its own (`None`
    /// keeps it a dict). A dict so turned takes no further items.
    fn on_dict(
        &mut self,
        _tree: &mut Tree,
        _items: &[Value],
        _offset: u64,
    ) -> Result<Option<Node>, PickleError> {
        Ok(None)
    }

    /// Called every few thousand opcodes with the bytes consumed so far; `false` cancels.
    fn on_progress(&mut self, _bytes_read: u64) -> bool {
        true
    }

    /// Where the arena's growing vectors have their next pages mapped on another core, if
    /// anywhere (a large file's nodes and memo).
    fn prefault(&self) -> Option<&crate::prefault::Prefaulter> {
        None
    }
}

/// Elements of the arena's nodes and memo kept mapped ahead of the unpickler, once it has that
/// many nodes (see [`crate::prefault`]). Not the trace's list of entries: mapping it ahead saved
/// nothing and left 21 MB more resident on a million events.
const PREFAULT_AHEAD: usize = 32 * 1024;

/// Unpickling with no loader: every value stays as the file wrote it.
pub struct NoHooks;

impl Hooks for NoHooks {
    fn on_append(&mut self, _: &mut Tree, item: Value, _: u64) -> Result<Value, PickleError> {
        Ok(item)
    }
}

/// A buffered reader that counts its offset and never allocates more than the data it has seen.
struct Source<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    /// Bytes consumed before `buf[0]`.
    base: u64,
}

const BUF_BYTES: usize = 256 * 1024;

impl<R: Read> Source<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            buf: vec![0; BUF_BYTES].into_boxed_slice(),
            pos: 0,
            len: 0,
            base: 0,
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Refills the buffer keeping unread bytes; returns false at end of input.
    fn refill(&mut self) -> Result<bool, PickleError> {
        let unread = self.len - self.pos;
        self.buf.copy_within(self.pos..self.len, 0);
        self.base += self.pos as u64;
        self.pos = 0;
        self.len = unread;
        loop {
            match self.inner.read(&mut self.buf[self.len..]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.len += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(PickleError {
                        offset: self.offset(),
                        kind: PickleErrorKind::Io(e.to_string()),
                    });
                }
            }
        }
    }

    /// The next `n` bytes (n ≤ buffer size), consumed.
    fn take(&mut self, n: usize) -> Result<&[u8], PickleError> {
        while self.len - self.pos < n {
            if !self.refill()? {
                return Err(PickleError {
                    offset: self.offset(),
                    kind: PickleErrorKind::Truncated,
                });
            }
        }
        let start = self.pos;
        self.pos += n;
        Ok(&self.buf[start..start + n])
    }

    /// Returns None at a clean end of input.
    fn next_byte(&mut self) -> Result<Option<u8>, PickleError> {
        if self.pos == self.len && !self.refill()? {
            return Ok(None);
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(Some(b))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// Reads `n` bytes in chunks, keeping the first `keep` of them in `out`: a length field
    /// larger than the input fails at the end of the input instead of allocating it up front,
    /// and a huge value costs no more memory than `keep`.
    fn read_into(&mut self, n: u64, keep: usize, out: &mut Vec<u8>) -> Result<(), PickleError> {
        out.clear();
        let mut left = n;
        while left > 0 {
            if self.pos == self.len && !self.refill()? {
                return Err(PickleError {
                    offset: self.offset(),
                    kind: PickleErrorKind::Truncated,
                });
            }
            let chunk = (self.len - self.pos).min(usize::try_from(left).unwrap_or(usize::MAX));
            let room = keep.saturating_sub(out.len()).min(chunk);
            out.extend_from_slice(&self.buf[self.pos..self.pos + room]);
            self.pos += chunk;
            left -= chunk as u64;
        }
        Ok(())
    }
}

/// Sparse-tolerant memo: dense for the usual `MEMOIZE` numbering, a map for far-away `BINPUT`s.
/// Holes in the dense part (skipped `BINPUT` indices) hold `Value::None` and are listed in `holes`.
#[derive(Default)]
struct Memo {
    dense: Vec<Value>,
    holes: rustc_hash::FxHashSet<u64>,
    sparse: FxHashMap<u64, Value>,
}

impl Memo {
    fn put(&mut self, index: u64, value: Value) {
        let dense_len = self.dense.len() as u64;
        if index < dense_len {
            self.dense[index as usize] = value;
            self.holes.remove(&index);
        } else if index == dense_len {
            self.dense.push(value);
        } else if index < dense_len + 1024 {
            self.holes.extend(dense_len..index);
            self.dense.resize(index as usize, Value::None);
            self.dense.push(value);
        } else {
            self.sparse.insert(index, value);
        }
    }

    fn next_index(&self) -> u64 {
        self.dense.len() as u64
    }
}

/// Unpickles one object from `input`, which must hold exactly one pickle (trailing bytes are
/// ignored, as Python's `pickle.load` does). Returns the top-level value and the protocol.
/// Also returns the offset of the `STOP` opcode.
pub fn unpickle<R: Read>(
    input: R,
    tree: &mut Tree,
    hooks: &mut dyn Hooks,
) -> Result<(Value, u8, u64), PickleError> {
    let mut vm = Vm {
        src: Source::new(input),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Memo::default(),
        scratch: Vec::new(),
    };
    vm.run(tree, hooks)
}

struct Vm<R> {
    src: Source<R>,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: Memo,
    scratch: Vec<u8>,
}

/// What the values of a pickle may take in memory per byte of the (decompressed) stream read so
/// far, beyond [`BUDGET_BASE_BYTES`]. A snapshot's entries are dicts of a handful of values
/// (about 2 bytes in memory per byte of pickle); a stream of bare `EMPTY_LIST` opcodes makes 50
/// per byte, and a 97 KB `.gz` of them once asked for 4 GiB at once and aborted.
pub const BUDGET_BYTES_PER_INPUT_BYTE: u64 = 16;

/// What any pickle may take whatever its size.
pub const BUDGET_BASE_BYTES: u64 = 64 << 20;

impl<R: Read> Vm<R> {
    /// Refuses a stream whose values grow far faster than the input (checked every 65,536
    /// opcodes, so at most a few MiB past the bound): the memory a file may take is bounded by
    /// its size, and a small hostile file is an error, never an abort; and by the machine's
    /// memory ([`crate::budget`]), so a file too big to open here is an error too.
    fn check_budget(&self, tree: &Tree, at: u64) -> Result<(), PickleError> {
        let value = std::mem::size_of::<Value>() as u64;
        let held = tree.nodes.len() as u64 * (std::mem::size_of::<Node>() as u64 + value)
            + (self.stack.len() + self.memo.dense.len() + self.memo.sparse.len()) as u64 * value;
        let budget = at
            .saturating_mul(BUDGET_BYTES_PER_INPUT_BYTE)
            .saturating_add(BUDGET_BASE_BYTES);
        if let Some(why) = crate::budget::exceeded(held) {
            return Err(PickleError::malformed(at, why));
        }
        if held > budget {
            return Err(PickleError::malformed(
                at,
                format!(
                    "its first {} of pickle build {} containers taking over {} in memory, more \
                     than {BUDGET_BYTES_PER_INPUT_BYTE} bytes per byte read: not a memory \
                     snapshot (refused before it exhausts memory)",
                    crate::units::format_bytes(at as i64),
                    tree.nodes.len(),
                    crate::units::format_bytes(held as i64)
                ),
            ));
        }
        Ok(())
    }
}

#[cold]
#[inline(never)]
fn memo_miss(at: u64, index: u64) -> PickleError {
    PickleError::malformed(at, format!("memo reference {index} to nothing"))
}

/// Opcodes that name code; a snapshot has none.
fn code_opcode_name(op: u8) -> Option<&'static str> {
    Some(match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        _ => return None,
    })
}

impl<R: Read> Vm<R> {
    #[expect(
        clippy::too_many_lines,
        reason = "one match arm per opcode reads best as one table"
    )]
    fn run(
        &mut self,
        tree: &mut Tree,
        hooks: &mut dyn Hooks,
    ) -> Result<(Value, u8, u64), PickleError> {
        let mut protocol = 0u8;
        let mut ops_since_progress = 0u32;
        loop {
            let at = self.src.offset();
            let Some(op) = self.src.next_byte()? else {
                return Err(PickleError {
                    offset: at,
                    kind: PickleErrorKind::Truncated,
                });
            };
            ops_since_progress += 1;
            if ops_since_progress == 1 << 16 {
                ops_since_progress = 0;
                if !hooks.on_progress(at) {
                    return Err(PickleError {
                        offset: at,
                        kind: PickleErrorKind::Cancelled,
                    });
                }
                self.check_budget(tree, at)?;
                if let Some(prefault) = hooks.prefault()
                    && tree.nodes.len() >= PREFAULT_AHEAD
                {
                    prefault.keep_ahead(&mut tree.nodes, PREFAULT_AHEAD);
                    prefault.keep_ahead(&mut self.memo.dense, PREFAULT_AHEAD);
                }
            }
            match op {
                0x80 => {
                    protocol = self.src.array::<1>()?[0];
                    if !(2..=5).contains(&protocol) {
                        return Err(PickleError {
                            offset: at,
                            kind: PickleErrorKind::Unsupported(format!(
                                "pickle protocol {protocol} (snapshots use 2 to 5)"
                            )),
                        });
                    }
                }
                0x95 => {
                    // FRAME: a length prefix for buffering; the stream reads the same without it.
                    self.src.array::<8>()?;
                }
                b'.' => {
                    let value = self.pop(at)?;
                    return Ok((value, protocol, at));
                }
                b'}' => {
                    let id = tree.push_node(Node::Dict(Vec::new()));
                    self.stack.push(Value::Dict(id));
                }
                b']' => {
                    let id = tree.push_node(Node::List(Vec::new()));
                    self.stack.push(Value::List(id));
                }
                b')' => {
                    let id = tree.push_node(Node::Tuple(Box::new([])));
                    self.stack.push(Value::Tuple(id));
                }
                b'(' => self.marks.push(self.stack.len()),
                b'N' => self.stack.push(Value::None),
                0x88 => self.stack.push(Value::Bool(true)),
                0x89 => self.stack.push(Value::Bool(false)),
                b'K' => {
                    let [b] = self.src.array::<1>()?;
                    self.stack.push(Value::Int(i64::from(b)));
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.src.array::<2>()?);
                    self.stack.push(Value::Int(i64::from(v)));
                }
                b'J' => {
                    let v = i32::from_le_bytes(self.src.array::<4>()?);
                    self.stack.push(Value::Int(i64::from(v)));
                }
                0x8a => {
                    let [n] = self.src.array::<1>()?;
                    self.push_long(at, u64::from(n), tree)?;
                }
                0x8b => {
                    let n = i32::from_le_bytes(self.src.array::<4>()?);
                    let n = u64::try_from(n)
                        .map_err(|_| PickleError::malformed(at, "LONG4 with a negative length"))?;
                    self.push_long(at, n, tree)?;
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.src.array::<8>()?);
                    self.stack.push(Value::Float(v));
                }
                // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, and the byte strings (SHORT_BINSTRING,
                // BINSTRING, SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8): bytes are not in
                // snapshots, but are kept as text so a file that has one still loads.
                0x8c | b'U' | b'C' => {
                    let [n] = self.src.array::<1>()?;
                    self.push_str(u64::from(n), tree)?;
                }
                b'X' | b'T' | b'B' => {
                    let n = u32::from_le_bytes(self.src.array::<4>()?);
                    self.push_str(u64::from(n), tree)?;
                }
                0x8d | 0x8e | 0x96 => {
                    let n = u64::from_le_bytes(self.src.array::<8>()?);
                    self.push_str(n, tree)?;
                }
                0x94 => {
                    let value = self.top(at)?;
                    let index = self.memo.next_index();
                    self.memo.put(index, value);
                }
                b'q' => {
                    let [i] = self.src.array::<1>()?;
                    let value = self.top(at)?;
                    self.memo.put(u64::from(i), value);
                }
                b'r' => {
                    let i = u32::from_le_bytes(self.src.array::<4>()?);
                    let value = self.top(at)?;
                    self.memo.put(u64::from(i), value);
                }
                b'h' => {
                    let [i] = self.src.array::<1>()?;
                    self.push_memo(at, u64::from(i))?;
                }
                b'j' => {
                    let i = u32::from_le_bytes(self.src.array::<4>()?);
                    self.push_memo(at, u64::from(i))?;
                }
                b'0' => {
                    self.pop(at)?;
                }
                b'1' => {
                    let mark = self.pop_mark(at)?;
                    self.stack.truncate(mark);
                }
                b'2' => {
                    let value = self.top(at)?;
                    self.stack.push(value);
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    if self.stack.len() < n {
                        return Err(PickleError::malformed(
                            at,
                            format!("TUPLE{n} with {} values on the stack", self.stack.len()),
                        ));
                    }
                    let items: Box<[Value]> = self
                        .stack
                        .split_off(self.stack.len() - n)
                        .into_boxed_slice();
                    let id = tree.push_node(Node::Tuple(items));
                    self.stack.push(Value::Tuple(id));
                }
                b't' => {
                    let mark = self.pop_mark(at)?;
                    let items = self.stack.split_off(mark).into_boxed_slice();
                    let id = tree.push_node(Node::Tuple(items));
                    self.stack.push(Value::Tuple(id));
                }
                b'l' => {
                    let mark = self.pop_mark(at)?;
                    let items = self.stack.split_off(mark);
                    let id = tree.push_node(Node::List(Vec::with_capacity(items.len())));
                    Self::append_items(at, id, items, tree, hooks)?;
                    self.stack.push(Value::List(id));
                }
                b'd' => {
                    let mark = self.pop_mark(at)?;
                    let items = self.stack.split_off(mark);
                    let id = tree.push_node(Node::Dict(Vec::new()));
                    Self::set_items(at, id, &items, tree)?;
                    self.stack.push(Value::Dict(id));
                }
                b'a' => {
                    let item = self.pop(at)?;
                    let list = self.list_on_top(at, tree)?;
                    Self::append_items(at, list, vec![item], tree, hooks)?;
                }
                b'e' => {
                    let mark = self.pop_mark(at)?;
                    let items = self.stack.split_off(mark);
                    let list = self.list_on_top(at, tree)?;
                    Self::append_items(at, list, items, tree, hooks)?;
                }
                b's' => {
                    let value = self.pop(at)?;
                    let key = self.pop(at)?;
                    let dict = self.dict_on_top(at, tree)?;
                    Self::set_items(at, dict, &[key, value], tree)?;
                }
                b'u' => {
                    // Every trace entry ends with one: the loader reads its items from the stack
                    // (or they go from the stack straight into the dict: no vector of their own).
                    let mark = self.pop_mark(at)?;
                    let dict = self.dict_below(mark, at, tree)?;
                    let items = &self.stack[mark..];
                    let node = match tree.node(dict) {
                        Node::Dict(existing)
                            if existing.is_empty() && items.len().is_multiple_of(2) =>
                        {
                            hooks.on_dict(tree, items, at)?
                        }
                        _ => None,
                    };
                    match node {
                        Some(node) => tree.nodes[dict as usize] = node,
                        None => Self::set_items(at, dict, items, tree)?,
                    }
                    self.stack.truncate(mark);
                }
                _ => {
                    if let Some(name) = code_opcode_name(op) {
                        return Err(PickleError {
                            offset: at,
                            kind: PickleErrorKind::Code(name),
                        });
                    }
                    return Err(PickleError {
                        offset: at,
                        kind: PickleErrorKind::Unsupported(format!(
                            "opcode 0x{op:02x}, which memory snapshots never contain"
                        )),
                    });
                }
            }
        }
    }

    fn pop(&mut self, at: u64) -> Result<Value, PickleError> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(PickleError::malformed(
                at,
                "a value is taken from an empty mark",
            ));
        }
        self.stack
            .pop()
            .ok_or_else(|| PickleError::malformed(at, "stack underflow"))
    }

    fn top(&self, at: u64) -> Result<Value, PickleError> {
        self.stack
            .last()
            .copied()
            .ok_or_else(|| PickleError::malformed(at, "memoizing with an empty stack"))
    }

    fn pop_mark(&mut self, at: u64) -> Result<usize, PickleError> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| PickleError::malformed(at, "no MARK to close"))?;
        if mark > self.stack.len() {
            return Err(PickleError::malformed(at, "MARK above the stack"));
        }
        Ok(mark)
    }

    /// The hottest opcode (about eleven per trace entry): the value is copied from the memo to
    /// the stack in one piece (through `Option<Value>` it went by pieces of the stack frame, and
    /// the reloads waited on the stores: 16 % of a 1 M-event load).
    #[inline]
    fn push_memo(&mut self, at: u64, index: u64) -> Result<(), PickleError> {
        if let Some(value) = self.memo.dense.get(index as usize) {
            if *value != Value::None || !self.memo.holes.contains(&index) {
                self.stack.push(*value);
                return Ok(());
            }
            return Err(memo_miss(at, index));
        }
        match self.memo.sparse.get(&index) {
            Some(value) => {
                self.stack.push(*value);
                Ok(())
            }
            None => Err(memo_miss(at, index)),
        }
    }

    fn push_long(&mut self, at: u64, n: u64, tree: &mut Tree) -> Result<(), PickleError> {
        if n > 16 {
            return Err(PickleError {
                offset: at,
                kind: PickleErrorKind::Unsupported(format!(
                    "integer of {n} bytes (at most 16 are supported)"
                )),
            });
        }
        let bytes = self.src.take(n as usize)?;
        let mut value: i128 = 0;
        for (i, &b) in bytes.iter().enumerate() {
            value |= i128::from(b) << (8 * i);
        }
        // Sign-extend from the last byte (two's complement, little endian).
        if n > 0 && n < 16 && bytes[n as usize - 1] & 0x80 != 0 {
            value -= 1i128 << (8 * n);
        }
        self.stack.push(if let Ok(v) = i64::try_from(value) {
            Value::Int(v)
        } else {
            tree.big_ints.push(value);
            Value::BigInt((tree.big_ints.len() - 1) as u32)
        });
        Ok(())
    }

    fn push_str(&mut self, n: u64, tree: &mut Tree) -> Result<(), PickleError> {
        self.src.read_into(n, MAX_STRING_BYTES, &mut self.scratch)?;
        if n > MAX_STRING_BYTES as u64 {
            tree.cut_strings = (tree.cut_strings.0 + 1, tree.cut_strings.1.max(n));
            // Cut at a character boundary (a UTF-8 sequence split by the cut is dropped).
            while let Err(e) = std::str::from_utf8(&self.scratch) {
                if e.error_len().is_some() {
                    break;
                }
                self.scratch.truncate(e.valid_up_to());
            }
        }
        let id = match std::str::from_utf8(&self.scratch) {
            Ok(text) => tree.intern(text),
            Err(_) => tree.intern(&String::from_utf8_lossy(&self.scratch)),
        };
        self.stack.push(Value::Str(id));
        Ok(())
    }

    fn list_on_top(&self, at: u64, tree: &Tree) -> Result<NodeId, PickleError> {
        match self.stack.last() {
            Some(Value::List(id)) if matches!(tree.node(*id), Node::List(_)) => Ok(*id),
            _ => Err(PickleError::malformed(
                at,
                "APPEND to something that is not a list",
            )),
        }
    }

    /// The dict just below `mark` (what `SETITEMS` adds to).
    fn dict_below(&self, mark: usize, at: u64, tree: &Tree) -> Result<NodeId, PickleError> {
        match mark.checked_sub(1).and_then(|k| self.stack.get(k)) {
            Some(Value::Dict(id)) if matches!(tree.node(*id), Node::Dict(_)) => Ok(*id),
            _ => Err(PickleError::malformed(
                at,
                "SETITEM on something that is not a dict",
            )),
        }
    }

    fn dict_on_top(&self, at: u64, tree: &Tree) -> Result<NodeId, PickleError> {
        match self.stack.last() {
            Some(Value::Dict(id)) if matches!(tree.node(*id), Node::Dict(_)) => Ok(*id),
            _ => Err(PickleError::malformed(
                at,
                "SETITEM on something that is not a dict",
            )),
        }
    }

    fn append_items(
        at: u64,
        list: NodeId,
        items: Vec<Value>,
        tree: &mut Tree,
        hooks: &mut dyn Hooks,
    ) -> Result<(), PickleError> {
        let mut converted = items;
        for item in &mut converted {
            *item = hooks.on_append(tree, *item, at)?;
        }
        match &mut tree.nodes[list as usize] {
            Node::List(existing) => existing.extend_from_slice(&converted),
            _ => {
                return Err(PickleError::malformed(
                    at,
                    "APPEND to something that is not a list",
                ));
            }
        }
        Ok(())
    }

    fn set_items(
        at: u64,
        dict: NodeId,
        items: &[Value],
        tree: &mut Tree,
    ) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(PickleError::malformed(
                at,
                "SETITEMS with an odd number of values",
            ));
        }
        match &mut tree.nodes[dict as usize] {
            Node::Dict(existing) => existing.extend(items.chunks_exact(2).map(|kv| (kv[0], kv[1]))),
            _ => {
                return Err(PickleError::malformed(
                    at,
                    "SETITEM on something that is not a dict",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(bytes: &[u8]) -> Result<(Tree, Value), PickleError> {
        let mut tree = Tree::default();
        let (value, _, _) = unpickle(bytes, &mut tree, &mut NoHooks)?;
        Ok((tree, value))
    }

    #[test]
    fn reads_wide_integers_both_signs() {
        // pickle.dumps([2**63, -2**63-1, 2**127-1], 4), with no memo opcodes.
        let mut bytes = vec![0x80, 4, b']', b'('];
        bytes.extend([0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0]);
        bytes.extend([
            0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff,
        ]);
        bytes.extend([0x8a, 16]);
        bytes.extend([0xff; 15]);
        bytes.push(0x7f);
        bytes.extend([b'e', b'.']);
        let (tree, value) = load(&bytes).expect("loads");
        let ints: Vec<i128> = tree
            .items(value)
            .expect("list")
            .iter()
            .map(|v| tree.int(*v).expect("int"))
            .collect();
        assert_eq!(ints, vec![1i128 << 63, -(1i128 << 63) - 1, i128::MAX]);
    }

    #[test]
    fn refuses_code_without_running_it() {
        // pickle.dumps(os.system) at protocol 2 starts with GLOBAL.
        let err = load(b"\x80\x02cposix\nsystem\nq\x00.").expect_err("refused");
        assert_eq!(
            err,
            PickleError {
                offset: 2,
                kind: PickleErrorKind::Code("GLOBAL")
            }
        );
    }

    #[test]
    fn memo_reference_to_nothing_is_an_error() {
        let err = load(b"\x80\x04h\x05.").expect_err("refused");
        assert_eq!(err.offset, 2);
        assert!(
            matches!(err.kind, PickleErrorKind::Malformed(ref m) if m.contains("memo reference 5"))
        );
    }

    #[test]
    fn memo_holes_and_far_entries_read_as_written() {
        // BINPUT 3 leaves slots 0-2 empty; BINGET 3 reads the list back, BINGET 1 is a hole.
        let (tree, value) = load(b"\x80\x04]q\x030h\x03.").expect("memo entry 3");
        assert!(matches!(value, Value::List(n) if matches!(tree.node(n), Node::List(_))));
        let err = load(b"\x80\x04]q\x030h\x01.").expect_err("a hole");
        assert!(
            matches!(err.kind, PickleErrorKind::Malformed(ref m) if m.contains("memo reference 1"))
        );
        // LONG_BINPUT far beyond the dense part lands in the sparse map.
        let (_, value) =
            load(b"\x80\x04K\x07r\x00\x00\x01\x000j\x00\x00\x01\x00.").expect("far memo entry");
        assert_eq!(value, Value::Int(7));
    }

    #[test]
    fn huge_length_fails_at_end_of_input_without_allocating_it() {
        let err = load(b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\x00\x00abc").expect_err("truncated");
        assert_eq!(err.kind, PickleErrorKind::Truncated);
    }

    #[test]
    fn shared_lists_are_one_node() {
        // x = [1]; pickle.dumps([x, x], 4)
        let (tree, value) =
            load(b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00]\x94(]\x94K\x01ah\x01e.")
                .expect("loads");
        let items = tree.items(value).expect("list");
        assert_eq!(items[0], items[1]);
    }

    /// Ten million empty lists (10 MB of opcodes, 37 KB gzipped) would take half a GiB and
    /// more: refused within the budget, naming what they build.
    #[test]
    fn a_stream_of_containers_is_refused_before_it_exhausts_memory() {
        let mut bytes = vec![0x80, 4, b'('];
        bytes.extend(std::iter::repeat_n(b']', 10_000_000));
        bytes.extend([b'l', b'.']);
        let err = load(&bytes).expect_err("over budget");
        let PickleErrorKind::Malformed(message) = &err.kind else {
            panic!("{err:?}");
        };
        assert!(
            message.contains("refused before it exhausts memory"),
            "{message}"
        );
        // Refused early: within a few MiB of where the bound was crossed.
        assert!(err.offset < 4 << 20, "{}", err.offset);
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let mut bytes = vec![0x80, 4];
        bytes.extend(std::iter::repeat_n(b']', 200_000));
        bytes.extend(std::iter::repeat_n(b'a', 199_999));
        bytes.push(b'.');
        let (tree, _) = load(&bytes).expect("loads");
        assert_eq!(tree.nodes.len(), 200_000);
    }
}

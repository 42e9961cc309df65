//! msMemScope's Python trace: every Python call with its start and end, per thread
//! (`python_trace_*.csv` beside the dump, or the `python_trace_<PID>` tables of the `.db`). A
//! block recorded without a `Call Stack(Python)` gets the calls open on its thread when it was
//! allocated as its stack.
//!
//! The writer (docs/memscope-format.md §6) prints `FuncInfo,StartTime(ns),EndTime(ns),Thread
//! Id,Process Id` with `%s`, unquoted: a `FuncInfo` may hold commas, so the last four fields are
//! the numbers and the rest is the function. A start or end of 0 is written `N/A`. Rows come as
//! calls return (children first).

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::{MemscopeError, Rows, TextId};

/// The CSV's header, as the writer names it.
pub const HEADER: [&str; 5] = [
    "FuncInfo",
    "StartTime(ns)",
    "EndTime(ns)",
    "Thread Id",
    "Process Id",
];

/// One Python call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// `file(line): function`, `nn.Module: Name`, a C callable, or a `record_function` name.
    pub func: TextId,
    /// As written (ns, or µs in files from before 2025-05-29); `None` for `N/A`.
    pub start_raw: Option<i64>,
    pub end_raw: Option<i64>,
    pub pid: u64,
    pub tid: u64,
    /// Index into [`Rows::files`].
    pub file: u32,
}

/// Whether `path` is named like a Python trace (`python_trace_*.csv`).
pub fn is_trace_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.starts_with("python_trace_")
        && path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
}

/// The Python traces that go with the dump files `dumps`: the `python_trace_*.csv` in the
/// folders they are in, sorted.
pub fn beside(dumps: &[PathBuf]) -> Vec<PathBuf> {
    let mut folders: Vec<&Path> = dumps.iter().filter_map(|d| d.parent()).collect();
    folders.sort();
    folders.dedup();
    let mut out: Vec<PathBuf> = folders
        .into_iter()
        .filter_map(|folder| std::fs::read_dir(folder).ok())
        .flat_map(|entries| entries.filter_map(Result::ok).map(|e| e.path()))
        .filter(|p| p.is_file() && is_trace_name(p))
        .collect();
    out.sort();
    out
}

/// A `N/A` or a number of ns; `None` for `N/A` (and for 0, which the writer means as unknown).
fn time(text: &str) -> Result<Option<i64>, String> {
    let text = text.trim();
    if text == "N/A" || text.is_empty() {
        return Ok(None);
    }
    match text.parse::<i64>() {
        Ok(0) => Ok(None),
        Ok(t) => Ok(Some(t)),
        Err(_) => Err(format!(
            "time \"{}\" is not a number of ns",
            crate::quote::quoted(text)
        )),
    }
}

/// One row's fields (after the header) as a call; `file` indexes [`Rows::files`].
fn call(fields: &[&str], file: u32, rows: &mut Rows) -> Result<Call, String> {
    let n = fields.len();
    if n < HEADER.len() {
        return Err(format!(
            "{n} fields where a Python trace row has {} (FuncInfo, start, end, thread, process)",
            HEADER.len()
        ));
    }
    let id = |text: &str, what: &str| {
        text.trim()
            .parse::<u64>()
            .map_err(|_| format!("{what} \"{}\" is not a number", crate::quote::quoted(text)))
    };
    let func = fields[..n - 4].join(",");
    Ok(Call {
        func: rows.intern(func.trim()),
        start_raw: time(fields[n - 4])?,
        end_raw: time(fields[n - 3])?,
        tid: id(fields[n - 2], "Thread Id")?,
        pid: id(fields[n - 1], "Process Id")?,
        file,
    })
}

/// Reads a `python_trace_*.csv`, adding its calls to `rows`.
pub fn read_csv(path: &Path, rows: &mut Rows) -> Result<(), MemscopeError> {
    let file = std::fs::File::open(path).map_err(|source| MemscopeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(false)
        .quoting(false)
        .from_reader(std::io::BufReader::with_capacity(
            1 << 20,
            crate::capped::LineCapped::new(file),
        ));
    let mut record = csv::ByteRecord::new();
    let bad = |line: u64, message: String| MemscopeError::BadRow {
        path: path.to_path_buf(),
        line,
        message,
    };
    let read = |reader: &mut csv::Reader<_>, record: &mut csv::ByteRecord| {
        reader.read_byte_record(record).map_err(|e| {
            let line = e.position().map_or(0, csv::Position::line);
            bad(line, format!("not CSV: {e}"))
        })
    };
    if !read(&mut reader, &mut record)? {
        return Ok(());
    }
    let header: Vec<String> = record
        .iter()
        .map(|c| {
            String::from_utf8_lossy(c)
                .trim()
                .trim_start_matches('\u{feff}')
                .to_string()
        })
        .collect();
    if header != HEADER {
        return Err(MemscopeError::NotMemscope {
            path: path.to_path_buf(),
            why: format!(
                "a python_trace file whose header is not msMemScope's ({})",
                HEADER.join(",")
            ),
        });
    }
    let file = rows.add_file(path);
    while read(&mut reader, &mut record)? {
        let line = record.position().map_or(0, csv::Position::line);
        if record
            .iter()
            .any(|f| f.len() > super::read::MAX_FIELD_BYTES)
        {
            return Err(bad(line, "a field of more than 16 MiB".into()));
        }
        if record.len() == 1 && record.get(0).is_some_and(<[u8]>::is_empty) {
            continue;
        }
        let fields: Vec<std::borrow::Cow<str>> =
            record.iter().map(String::from_utf8_lossy).collect();
        let fields: Vec<&str> = fields.iter().map(AsRef::as_ref).collect();
        let call = call(&fields, file, rows).map_err(|m| bad(line, m))?;
        rows.calls.push(call);
    }
    Ok(())
}

/// Reads the `python_trace_<PID>` tables of an open `.db` (file index `file`), adding their
/// calls to `rows`.
pub fn read_db(
    path: &Path,
    conn: &rusqlite::Connection,
    file: u32,
    rows: &mut Rows,
) -> Result<(), MemscopeError> {
    let db_error = |e: rusqlite::Error| MemscopeError::Db {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut tables: Vec<String> = super::read::table_names(conn)
        .map_err(db_error)?
        .into_iter()
        .filter(|name| name.starts_with("python_trace_"))
        .collect();
    tables.sort();
    for table in tables {
        let columns = super::read::column_names(conn, &table).map_err(db_error)?;
        if HEADER.iter().any(|h| !columns.iter().any(|c| c == h)) {
            return Err(MemscopeError::NotMemscope {
                path: path.to_path_buf(),
                why: format!(
                    "table `{table}` lacks a Python trace's columns (it needs {})",
                    HEADER.join(", ")
                ),
            });
        }
        let select: Vec<String> = HEADER
            .iter()
            .map(|c| format!("CAST(\"{c}\" AS TEXT)"))
            .collect();
        let mut statement = conn
            .prepare(&format!(
                "SELECT rowid, {} FROM \"{}\"",
                select.join(", "),
                table.replace('"', "\"\"")
            ))
            .map_err(db_error)?;
        let mut query = statement.query([]).map_err(db_error)?;
        let mut not_utf8 = super::read::NotUtf8::default();
        while let Some(r) = query.next().map_err(db_error)? {
            let rowid: i64 = r.get(0).map_err(db_error)?;
            not_utf8.at_row(rowid);
            let mut cells: Vec<String> = Vec::with_capacity(HEADER.len());
            for i in 1..=HEADER.len() {
                cells.push(super::read::text_cell(r, i, &mut not_utf8).map_err(db_error)?);
            }
            let fields: Vec<&str> = cells.iter().map(String::as_str).collect();
            let call = call(&fields, file, rows).map_err(|message| MemscopeError::BadDbRow {
                path: path.to_path_buf(),
                table: table.clone(),
                rowid,
                message,
            })?;
            rows.calls.push(call);
        }
        not_utf8.note(path, &table, rows);
    }
    Ok(())
}

/// The calls of one thread, swept in time order: which are open at a time.
#[derive(Debug, Default)]
pub struct ThreadCalls {
    /// (start, end, function), by start, outer calls first at equal starts.
    calls: Vec<(i64, i64, TextId)>,
    next: usize,
    /// Indexes into `calls` of the calls open at the last time asked, outermost first.
    open: Vec<usize>,
}

impl ThreadCalls {
    /// The functions open at `time` (not before the last time asked), innermost first.
    pub fn open_at(&mut self, time: i64) -> impl Iterator<Item = TextId> + '_ {
        while self.next < self.calls.len() && self.calls[self.next].0 <= time {
            let start = self.calls[self.next].0;
            while self
                .open
                .last()
                .is_some_and(|&top| self.calls[top].1 < start)
            {
                self.open.pop();
            }
            self.open.push(self.next);
            self.next += 1;
        }
        while self
            .open
            .last()
            .is_some_and(|&top| self.calls[top].1 < time)
        {
            self.open.pop();
        }
        self.open.iter().rev().map(|&c| self.calls[c].2)
    }
}

/// The calls of `rows` by (process, thread), with times converted by `to_us` (given the raw
/// time and the call's file). A call with no start began before the trace; one with no end had
/// not returned when it stopped.
pub fn by_thread(
    rows: &Rows,
    to_us: impl Fn(i64, u32) -> i64,
) -> FxHashMap<(u64, u64), ThreadCalls> {
    let mut threads: FxHashMap<(u64, u64), ThreadCalls> = FxHashMap::default();
    for call in &rows.calls {
        let start = call.start_raw.map_or(i64::MIN, |t| to_us(t, call.file));
        let end = call.end_raw.map_or(i64::MAX, |t| to_us(t, call.file));
        threads
            .entry((call.pid, call.tid))
            .or_default()
            .calls
            .push((start, end, call.func));
    }
    for thread in threads.values_mut() {
        thread
            .calls
            .sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    }
    threads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_with_commas_keeps_them_and_na_is_unknown() {
        let mut rows = Rows::default();
        let c = call(
            &["train.py(3): f", " g(a", "b)", "N/A", "200", "7", "9"],
            0,
            &mut rows,
        )
        .expect("a call");
        assert_eq!(rows.text(c.func), "train.py(3): f, g(a,b)");
        assert_eq!(
            (c.start_raw, c.end_raw, c.tid, c.pid),
            (None, Some(200), 7, 9)
        );
        assert!(call(&["f", "1", "2", "x", "9"], 0, &mut rows).is_err());
    }

    #[test]
    fn open_calls_nest_and_close() {
        let mut rows = Rows::default();
        let (outer, inner, later) = (
            rows.intern("outer"),
            rows.intern("inner"),
            rows.intern("later"),
        );
        for (func, start, end) in [(inner, 20, 30), (outer, 10, 50), (later, 60, 70)] {
            rows.calls.push(Call {
                func,
                start_raw: Some(start),
                end_raw: Some(end),
                pid: 1,
                tid: 1,
                file: 0,
            });
        }
        let mut threads = by_thread(&rows, |t, _| t);
        let thread = threads.get_mut(&(1, 1)).expect("thread 1");
        let at = |thread: &mut ThreadCalls, t| thread.open_at(t).collect::<Vec<_>>();
        assert_eq!(at(thread, 5), Vec::<TextId>::new());
        assert_eq!(at(thread, 25), vec![inner, outer]);
        assert_eq!(at(thread, 40), vec![outer]);
        assert_eq!(at(thread, 55), Vec::<TextId>::new());
        assert_eq!(at(thread, 65), vec![later]);
    }
}

//! Streaming CSV readers for the four profiler tables. Each reads its file once, record by record
//! (the `csv` crate's byte records, no per-row allocation), maps the header's columns by name —
//! MB, KB or GB units alike — and turns cells into bytes and microseconds. Cells are trimmed of
//! the trailing tab the profiler writes after timestamps; an empty cell is `NaN`. A row that
//! cannot be read is skipped with a warning naming the file and line; a file whose header is not
//! the table's is an error.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use std::sync::atomic::Ordering;

use super::{Curve, MAX_WARNINGS_PER_FILE, OperatorRow, ProfilerError, ProfilerWarning, StaticOp};
use crate::LoadProgress;

/// `Node Index End` of a static-graph node that lives to the end of the graph.
const TO_THE_END: u64 = 4_294_967_295;

/// Rows between two progress reports (and cancel checks).
const PROGRESS_EVERY_ROWS: u64 = 1 << 16;

/// The warnings of one file, capped, and where its reading reports progress.
pub struct Warnings<'p> {
    file: PathBuf,
    kept: Vec<ProfilerWarning>,
    dropped: u64,
    /// Shared progress (ranks read in parallel add to it), and how much of this file it has.
    progress: Option<&'p LoadProgress>,
    reported: u64,
}

impl<'p> Warnings<'p> {
    pub fn new(file: &Path, progress: Option<&'p LoadProgress>) -> Self {
        Self {
            file: file.to_path_buf(),
            kept: Vec::new(),
            dropped: 0,
            progress,
            reported: 0,
        }
    }

    /// Reports the first `bytes` of this file read; `Err` when the reader was asked to stop.
    pub fn report(&mut self, bytes: u64) -> Result<(), ProfilerError> {
        let Some(progress) = self.progress else {
            return Ok(());
        };
        progress
            .bytes_read
            .fetch_add(bytes.saturating_sub(self.reported), Ordering::Relaxed);
        self.reported = self.reported.max(bytes);
        if progress.cancel.load(Ordering::Relaxed) {
            return Err(ProfilerError::Cancelled {
                path: self.file.clone(),
            });
        }
        Ok(())
    }

    fn push(&mut self, line: Option<u64>, message: String) {
        if self.kept.len() < MAX_WARNINGS_PER_FILE {
            self.kept.push(ProfilerWarning {
                file: self.file.clone(),
                line,
                message,
            });
        } else {
            self.dropped += 1;
        }
    }

    pub fn finish(self) -> (Vec<ProfilerWarning>, u64) {
        (self.kept, self.dropped)
    }
}

/// Trims spaces, tabs and carriage returns.
fn trim(cell: &[u8]) -> &[u8] {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let start = cell.iter().position(|b| !is_space(b)).unwrap_or(cell.len());
    let end = cell
        .iter()
        .rposition(|b| !is_space(b))
        .map_or(start, |e| e + 1);
    &cell[start..end]
}

/// A number cell: `Ok(NaN)` when empty, `Err` when it is not a number.
fn number(cell: Option<&[u8]>) -> Result<f64, String> {
    let cell = trim(cell.unwrap_or_default());
    if cell.is_empty() {
        return Ok(f64::NAN);
    }
    let shown = || crate::quote::quoted(&String::from_utf8_lossy(cell));
    match std::str::from_utf8(cell)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        // `inf` and `NaN` parse, but no size or time is infinite.
        Some(v) if v.is_finite() => Ok(v),
        Some(_) => Err(format!("\"{}\" is not a finite number", shown())),
        None => Err(format!("\"{}\" is not a number", shown())),
    }
}

fn text(cell: Option<&[u8]>) -> String {
    String::from_utf8_lossy(trim(cell.unwrap_or_default())).into_owned()
}

/// Where the table's columns are, and the factor from each size column's unit to bytes.
struct Columns {
    index: FxHashMap<&'static str, (usize, f64)>,
}

impl Columns {
    /// Maps `wanted` names (without unit) onto `header`; `required` ones must be there.
    fn find(
        path: &Path,
        expected: &'static str,
        header: &csv::ByteRecord,
        wanted: &[&'static str],
        required: &[&'static str],
    ) -> Result<Self, ProfilerError> {
        let mut index = FxHashMap::default();
        for (i, cell) in header.iter().enumerate() {
            let cell = String::from_utf8_lossy(trim(cell));
            // A UTF-8 byte-order mark may open the first cell.
            let cell = cell.trim_start_matches('\u{feff}');
            let (name, unit) = match cell.split_once('(') {
                Some((name, unit)) => (name.trim(), unit.trim_end_matches(')').trim()),
                None => (cell.trim(), ""),
            };
            let factor = match unit {
                "KB" => 1024.0,
                "MB" => 1024.0 * 1024.0,
                "GB" => 1024.0 * 1024.0 * 1024.0,
                _ => 1.0,
            };
            if let Some(&w) = wanted.iter().find(|w| **w == name) {
                index.entry(w).or_insert((i, factor));
            }
        }
        let missing: Vec<&str> = required
            .iter()
            .filter(|r| !index.contains_key(*r))
            .copied()
            .collect();
        if !missing.is_empty() {
            return Err(ProfilerError::BadHeader {
                path: path.to_path_buf(),
                expected,
                missing: missing.join(", "),
            });
        }
        Ok(Self { index })
    }

    fn cell<'r>(&self, record: &'r csv::ByteRecord, name: &str) -> Option<&'r [u8]> {
        self.index.get(name).and_then(|&(i, _)| record.get(i))
    }

    /// The cell as bytes (or µs, for columns without a unit). A size no device can hold (more
    /// than [`MAX_PLAUSIBLE_BYTES`](crate::units::MAX_PLAUSIBLE_BYTES) either way) is an error,
    /// not a figure to print.
    fn value(&self, record: &csv::ByteRecord, name: &str) -> Result<f64, String> {
        let factor = self.index.get(name).map_or(1.0, |&(_, f)| f);
        let bytes = number(self.cell(record, name))
            .map(|v| v * factor)
            .map_err(|e| format!("{name}: {e}"))?;
        if factor > 1.0 && bytes.abs() > crate::units::MAX_PLAUSIBLE_BYTES as f64 {
            let cell = String::from_utf8_lossy(trim(self.cell(record, name).unwrap_or_default()));
            return Err(format!(
                "{name}: \"{}\" is more than 1 PiB: no device holds that",
                crate::quote::quoted(&cell)
            ));
        }
        Ok(bytes)
    }
}

/// Opens `path` and reads its header.
/// A table being read: lines longer than [`crate::capped::MAX_LINE_BYTES`] are refused as they
/// stream in.
type Table = csv::Reader<BufReader<crate::capped::LineCapped<File>>>;

fn open_table(path: &Path) -> Result<(Table, csv::ByteRecord), ProfilerError> {
    let file = File::open(path).map_err(|source| ProfilerError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(1 << 20)
        .from_reader(BufReader::with_capacity(
            1 << 20,
            crate::capped::LineCapped::new(file),
        ));
    let mut header = csv::ByteRecord::new();
    match reader.read_byte_record(&mut header) {
        Ok(true) => Ok((reader, header)),
        Ok(false) => Err(ProfilerError::BadHeader {
            path: path.to_path_buf(),
            expected: "profiler CSV",
            missing: "everything: the file is empty".to_string(),
        }),
        Err(e) => Err(csv_error(path, &e)),
    }
}

fn csv_error(path: &Path, e: &csv::Error) -> ProfilerError {
    match e.kind() {
        csv::ErrorKind::Io(io) => ProfilerError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(io.kind(), io.to_string()),
        },
        _ => ProfilerError::BadCsv {
            path: path.to_path_buf(),
            line: e.position().map_or(0, csv::Position::line),
            message: e.to_string(),
        },
    }
}

/// Calls `row` for every record after the header with its 1-based line; read errors on a row
/// become warnings, I/O errors end the file with an error.
fn for_each_row(
    path: &Path,
    mut reader: Table,
    warnings: &mut Warnings<'_>,
    mut row: impl FnMut(&csv::ByteRecord, u64, &mut Warnings<'_>),
) -> Result<(), ProfilerError> {
    let mut record = csv::ByteRecord::new();
    let mut rows = 0u64;
    // The csv crate counts a CRLF file's lines one short: the first row after the header is
    // line 2 whatever it says.
    let mut line_offset: Option<u64> = None;
    loop {
        match reader.read_byte_record(&mut record) {
            Ok(true) => {
                rows += 1;
                if rows.is_multiple_of(PROGRESS_EVERY_ROWS) {
                    warnings.report(record.position().map_or(0, csv::Position::byte))?;
                }
                let counted = record.position().map_or(0, csv::Position::line);
                let line = counted + *line_offset.get_or_insert(2u64.saturating_sub(counted));
                if record.len() == 1 && trim(&record[0]).is_empty() {
                    continue; // A blank line.
                }
                row(&record, line, warnings);
            }
            Ok(false) => return Ok(()),
            Err(e) if matches!(e.kind(), csv::ErrorKind::Io(_)) => {
                return Err(csv_error(path, &e));
            }
            Err(e) => {
                let line = e.position().map(csv::Position::line);
                warnings.push(line, format!("unreadable row: {e}"));
            }
        }
    }
}

/// The curves' components in order of first appearance, found by name.
struct CurveSet {
    curves: Vec<Curve>,
    by_name: FxHashMap<Vec<u8>, usize>,
}

impl CurveSet {
    fn new() -> Self {
        Self {
            curves: Vec::new(),
            by_name: FxHashMap::default(),
        }
    }

    fn get(&mut self, name: &[u8]) -> &mut Curve {
        let i = if let Some(&i) = self.by_name.get(name) {
            i
        } else {
            self.curves.push(Curve {
                component: String::from_utf8_lossy(name).into_owned(),
                ..Curve::default()
            });
            self.by_name.insert(name.to_vec(), self.curves.len() - 1);
            self.curves.len() - 1
        };
        &mut self.curves[i]
    }
}

/// `memory_record.csv`: one curve per component. `device` takes the first `Device Type` seen;
/// `coarse_times` is set when timestamps were written in scientific notation (`1.69512E+15`,
/// as a spreadsheet saves them): rounded to a few digits, they no longer place samples in time.
pub fn read_memory_record(
    path: &Path,
    warnings: &mut Warnings<'_>,
    device: &mut Option<String>,
    coarse_times: &mut bool,
) -> Result<Vec<Curve>, ProfilerError> {
    const NAMES: [&str; 6] = [
        "Component",
        "Timestamp",
        "Total Allocated",
        "Total Reserved",
        "Total Active",
        "Device Type",
    ];
    let (reader, header) = open_table(path)?;
    let columns = Columns::find(
        path,
        "memory_record.csv",
        &header,
        &NAMES,
        &["Component", "Timestamp", "Total Reserved"],
    )?;
    let mut set = CurveSet::new();
    let mut scientific = false;
    for_each_row(path, reader, warnings, |record, line, warnings| {
        scientific |= columns
            .cell(record, "Timestamp")
            .is_some_and(|c| c.iter().any(|&b| b == b'E' || b == b'e'));
        let parsed = (|| -> Result<(f64, f64, f64, f64), String> {
            let time = columns.value(record, "Timestamp")?;
            if time.is_nan() {
                return Err("no timestamp".to_string());
            }
            let totals = (
                columns.value(record, "Total Allocated")?,
                columns.value(record, "Total Reserved")?,
                columns.value(record, "Total Active")?,
            );
            // A pool holds nothing or more: a negative total is a damaged row, not a figure.
            for (name, value) in [
                ("Total Allocated", totals.0),
                ("Total Reserved", totals.1),
                ("Total Active", totals.2),
            ] {
                if value < 0.0 {
                    return Err(format!(
                        "{name} is negative ({value}): no pool holds less than nothing; the row \
                         is left out"
                    ));
                }
            }
            Ok((time, totals.0, totals.1, totals.2))
        })();
        match parsed {
            Ok((time, allocated, reserved, active)) => {
                if device.is_none()
                    && let Some(d) = columns.cell(record, "Device Type").map(trim)
                    && !d.is_empty()
                {
                    *device = Some(String::from_utf8_lossy(d).into_owned());
                }
                let component = trim(columns.cell(record, "Component").unwrap_or_default());
                let curve = set.get(component);
                curve.line.push(line);
                curve.time_us.push(time);
                curve.allocated_bytes.push(allocated);
                curve.reserved_bytes.push(reserved);
                curve.active_bytes.push(active);
            }
            Err(message) => warnings.push(Some(line), message),
        }
    })?;
    if scientific {
        *coarse_times = true;
        warnings.push(
            None,
            "timestamps are written in scientific notation (like 1.69512E+15), rounded to a few digits \
             (a spreadsheet saved the file?): the curves cannot be placed in time"
                .to_string(),
        );
    }
    Ok(set.curves)
}

/// `npu_module_mem.csv`: one reserved-only curve per CANN component.
pub fn read_npu_module_mem(
    path: &Path,
    warnings: &mut Warnings<'_>,
) -> Result<Vec<Curve>, ProfilerError> {
    let (reader, header) = open_table(path)?;
    let columns = Columns::find(
        path,
        "npu_module_mem.csv",
        &header,
        &["Component", "Timestamp", "Total Reserved"],
        &["Component", "Timestamp", "Total Reserved"],
    )?;
    let mut set = CurveSet::new();
    for_each_row(path, reader, warnings, |record, line, warnings| {
        let parsed = columns
            .value(record, "Timestamp")
            .and_then(|t| Ok((t, columns.value(record, "Total Reserved")?)));
        match parsed {
            Ok((time, reserved)) if !time.is_nan() => {
                let component = trim(columns.cell(record, "Component").unwrap_or_default());
                let curve = set.get(component);
                curve.line.push(line);
                curve.time_us.push(time);
                curve.allocated_bytes.push(f64::NAN);
                curve.reserved_bytes.push(reserved);
                curve.active_bytes.push(f64::NAN);
            }
            Ok(_) => warnings.push(Some(line), "no timestamp".to_string()),
            Err(message) => warnings.push(Some(line), message),
        }
    })?;
    Ok(set.curves)
}

/// `operator_memory.csv`: appends its rows to `rows`, names interned into `names`.
pub fn read_operator_memory(
    path: &Path,
    warnings: &mut Warnings<'_>,
    rows: &mut Vec<OperatorRow>,
    names: &mut Vec<String>,
) -> Result<(), ProfilerError> {
    const NAMES: [&str; 10] = [
        "Name",
        "Size",
        "Allocation Time",
        "Release Time",
        "Active Release Time",
        "Allocation Total Allocated",
        "Allocation Total Reserved",
        "Allocation Total Active",
        "Release Total Allocated",
        "Release Total Reserved",
    ];
    let (reader, header) = open_table(path)?;
    let mut wanted = NAMES.to_vec();
    wanted.push("Release Total Active");
    let columns = Columns::find(
        path,
        "operator_memory.csv",
        &header,
        &wanted,
        &["Name", "Size", "Allocation Time"],
    )?;
    let mut by_name: FxHashMap<String, u32> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i as u32))
        .collect();
    for_each_row(path, reader, warnings, |record, line, warnings| {
        let parsed = (|| -> Result<OperatorRow, String> {
            let size = columns.value(record, "Size")?;
            if size.is_nan() {
                return Err("no size".to_string());
            }
            let v = |name| columns.value(record, name);
            Ok(OperatorRow {
                name: 0,
                size_bytes: size.round() as i64,
                alloc_us: v("Allocation Time")?,
                release_us: v("Release Time")?,
                active_release_us: v("Active Release Time")?,
                alloc_totals_bytes: [
                    v("Allocation Total Allocated")?,
                    v("Allocation Total Reserved")?,
                    v("Allocation Total Active")?,
                ],
                release_totals_bytes: [
                    v("Release Total Allocated")?,
                    v("Release Total Reserved")?,
                    v("Release Total Active")?,
                ],
                line,
            })
        })();
        match parsed {
            Ok(mut row) => {
                let name = text(columns.cell(record, "Name"));
                let next = by_name.len() as u32;
                row.name = *by_name.entry(name.clone()).or_insert_with(|| {
                    names.push(name);
                    next
                });
                rows.push(row);
            }
            Err(message) => warnings.push(Some(line), message),
        }
    })
}

/// `static_op_mem.csv`: one lifetime per node, and each graph's `TOTAL` row (named so).
pub fn read_static_op_mem(
    path: &Path,
    warnings: &mut Warnings<'_>,
) -> Result<Vec<StaticOp>, ProfilerError> {
    const NAMES: [&str; 6] = [
        "Op Name",
        "Model Name",
        "Graph ID",
        "Node Index Start",
        "Node Index End",
        "Size",
    ];
    let (reader, header) = open_table(path)?;
    let columns = Columns::find(path, "static_op_mem.csv", &header, &NAMES, &NAMES)?;
    let mut ops = Vec::new();
    for_each_row(path, reader, warnings, |record, line, warnings| {
        let op_name = text(columns.cell(record, "Op Name"));
        let index = |name| -> Result<Option<u64>, String> {
            let v = columns.value(record, name)?;
            if v.is_nan() || v < 0.0 {
                return Err(format!("{name}: missing or negative"));
            }
            Ok((v as u64 != TO_THE_END).then_some(v as u64))
        };
        let parsed = (|| -> Result<StaticOp, String> {
            let size = columns.value(record, "Size")?;
            if size.is_nan() {
                return Err("no size".to_string());
            }
            Ok(StaticOp {
                op_name: op_name.clone(),
                model_name: text(columns.cell(record, "Model Name")),
                graph_id: text(columns.cell(record, "Graph ID")),
                node_start: index("Node Index Start")?.unwrap_or(0),
                node_end: index("Node Index End")?,
                size_bytes: size.round() as i64,
            })
        })();
        match parsed {
            Ok(op) => ops.push(op),
            Err(message) => warnings.push(Some(line), message),
        }
    })?;
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::{number, trim};

    #[test]
    fn cells_lose_tabs_and_empty_ones_are_nan() {
        assert_eq!(trim(b"1736405443871259.720\t"), b"1736405443871259.720");
        assert_eq!(trim(b" \t\r"), b"");
        assert_eq!(number(Some(b"1.69512E+15")), Ok(1.69512e15));
        assert!(number(Some(b"")).is_ok_and(f64::is_nan));
        assert!(number(None).is_ok_and(f64::is_nan));
        assert!(number(Some(b"12a")).is_err());
    }
}

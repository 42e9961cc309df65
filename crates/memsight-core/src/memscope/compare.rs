//! msMemScope's own comparison of two runs (`msmemscope --compare`): `memory_compare_{ts}.csv`,
//! operators (or kernels) of the two runs aligned, with the bytes each allocated. Two header
//! lines: `,,,Base,Compare`, then `Event,Name,Device Id,Allocated Memory(byte),Allocated
//! Memory(byte),Diff Memory(byte)`; an operator absent on one side is `N/A` there
//! (`csrc/analysis/memory_compare.cpp:325-367`, see `docs/memscope-format.md` §7).

use std::path::Path;

use super::MemscopeError;
use super::read::parse_int;

/// One aligned operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareRow {
    /// The CSV line, for messages.
    pub line: u64,
    pub event: String,
    pub name: String,
    pub device: String,
    /// `None`: the operator is not in that run.
    pub base_bytes: Option<i64>,
    pub compare_bytes: Option<i64>,
    pub diff_bytes: i64,
}

/// Whether `path` is named as msMemScope names its comparisons.
pub fn is_compare_path(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        n.starts_with("memory_compare_") && n.to_ascii_lowercase().ends_with(".csv")
    })
}

/// Reads a `memory_compare_*.csv`.
pub fn read(path: &Path) -> Result<Vec<CompareRow>, MemscopeError> {
    let file = std::fs::File::open(path).map_err(|source| MemscopeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(false)
        .from_reader(std::io::BufReader::new(crate::capped::LineCapped::new(
            file,
        )));
    let bad = |line: u64, message: String| MemscopeError::BadRow {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut rows = Vec::new();
    let mut record = csv::StringRecord::new();
    let mut header_seen = false;
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map_or(0, csv::Position::line);
                return Err(bad(line, format!("not CSV: {e}")));
            }
        }
        let line = record.position().map_or(0, csv::Position::line);
        let cells: Vec<&str> = record.iter().map(str::trim).collect();
        if !header_seen {
            // The two header lines: the second names the columns.
            if cells.first() == Some(&"Event") && cells.get(1) == Some(&"Name") {
                header_seen = true;
            } else if line > 2 {
                return Err(MemscopeError::NotMemscope {
                    path: path.to_path_buf(),
                    why: "no `Event,Name,Device Id,…` header: not msMemScope's memory_compare"
                        .into(),
                });
            }
            continue;
        }
        if cells.len() < 6 {
            return Err(bad(
                line,
                format!("{} fields where 6 are needed", cells.len()),
            ));
        }
        let bytes = |cell: &str, what: &str| -> Result<Option<i64>, MemscopeError> {
            if cell == "N/A" || cell.is_empty() {
                return Ok(None);
            }
            parse_int(cell)
                .and_then(|n| i64::try_from(n).ok())
                .filter(|n| n.unsigned_abs() <= crate::units::MAX_PLAUSIBLE_BYTES)
                .map(Some)
                .ok_or_else(|| {
                    bad(
                        line,
                        format!("{what} \"{}\" is not a size", crate::quote::quoted(cell)),
                    )
                })
        };
        let (base_bytes, compare_bytes) = (bytes(cells[3], "Base")?, bytes(cells[4], "Compare")?);
        let diff_bytes = bytes(cells[5], "Diff")?.unwrap_or(0);
        // msMemScope writes Compare − Base (an absent side as 0): a Diff that is not cannot be
        // trusted over the two it contradicts, nor they over it.
        let expected = compare_bytes.unwrap_or(0) - base_bytes.unwrap_or(0);
        if diff_bytes != expected {
            return Err(bad(
                line,
                format!(
                    "Diff {diff_bytes} is not Compare − Base ({expected}): the row contradicts \
                     itself"
                ),
            ));
        }
        rows.push(CompareRow {
            line,
            event: cells[0].to_string(),
            name: cells[1].to_string(),
            device: cells[2].to_string(),
            base_bytes,
            compare_bytes,
            diff_bytes,
        });
    }
    if !header_seen {
        return Err(MemscopeError::NotMemscope {
            path: path.to_path_buf(),
            why: "empty, or no `Event,Name,Device Id,…` header".into(),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::read;

    /// `rows` under msMemScope's two header lines, as `name` in a folder of its own.
    fn written(folder: &str, name: &str, rows: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("memsight-{folder}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("folder");
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                ",,,Base,Compare\n\
                 Event,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff \
                 Memory(byte)\n{rows}"
            ),
        )
        .expect("write");
        path
    }

    #[test]
    fn a_diff_that_contradicts_base_and_compare_is_refused_with_its_line() {
        let path = written(
            "compare-diff",
            "memory_compare_1.csv",
            "OP,aten::add,0,100,200,100\nOP,aten::mul,0,100,200,1000000\n",
        );
        let err = read(&path).expect_err("inconsistent").to_string();
        assert!(
            err.contains("line 4") && err.contains("Diff 1000000 is not Compare − Base (100)"),
            "{err}"
        );
        std::fs::remove_dir_all(path.parent().expect("folder")).expect("clean up");
    }

    #[test]
    fn the_two_line_header_and_missing_operators_are_read() {
        let path = written(
            "compare",
            "memory_compare_20251203.csv",
            "ATEN_END,aten.addmm,0,1536,1536,0\nATEN_END,aten._to_copy,0,N/A,4000256,4000256\n",
        );
        let rows = read(&path).expect("reads");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].base_bytes, None);
        assert_eq!(rows[1].diff_bytes, 4_000_256);
        assert_eq!(rows[1].line, 4);
        std::fs::write(&path, "Event,Name\nATEN_END,x,0,1,2,zz\n").expect("write");
        let err = read(&path).expect_err("bad diff").to_string();
        assert!(err.contains("line 2") && err.contains("Diff"), "{err}");
        std::fs::remove_dir_all(path.parent().expect("folder")).expect("clean up");
    }
}

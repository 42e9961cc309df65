//! Hostile and unusual msMemScope databases (issue 35): a column name that is not UTF-8 (in the
//! dump table and in a Python trace table), text cells in GBK, a database in WAL mode with and
//! without its `-wal` file. Each is read, or refused with a message naming the file and the row,
//! and nothing is ever written beside the input.

use std::path::{Path, PathBuf};

use memsight_core::Loaded;
use memsight_core::r#gen::memscope::{MemscopeOptions, write};

/// A generated one-device recording as a `.db`, in a folder of its own; returns the `.db`.
fn recording(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memsight-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write(
        &dir,
        &MemscopeOptions {
            events: 4_000,
            devices: 1,
            seed: 3,
            db: true,
        },
    )
    .expect("written");
    find_db(&dir)
}

fn find_db(dir: &Path) -> PathBuf {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "db") {
                return path;
            }
        }
    }
    panic!("no .db under {}", dir.display());
}

/// The names in `path`'s folder.
fn beside(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().expect("folder"))
        .expect("folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn allocated_peak(loaded: &Loaded) -> i64 {
    loaded
        .replays
        .iter()
        .map(|r| r.peak_allocated.bytes)
        .max()
        .unwrap_or(0)
}

/// Renames the column `from` of `table` to the bytes `to` (not UTF-8), as a tool writing raw
/// bytes would: through the schema itself.
fn rename_column_to_bytes(db: &Path, table: &str, from: &str, to_hex: &str) {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.execute_batch(&format!(
        "PRAGMA writable_schema = ON;
         UPDATE sqlite_master SET sql = replace(sql, '\"{from}\"', '\"' || CAST(X'{to_hex}' AS TEXT) || '\"')
             WHERE name = '{table}';
         PRAGMA writable_schema = OFF;"
    ))
    .expect("schema");
}

#[test]
fn a_column_name_that_is_not_utf8_is_no_panic() {
    let db = recording("colname");
    let before = Loaded::open(&db, None).unwrap_or_else(|e| panic!("{e}"));
    // An extra column, then its name made `ex\xFF`: the reader must not care.
    rusqlite::Connection::open(&db)
        .expect("open")
        .execute_batch("ALTER TABLE memscope_dump ADD COLUMN \"extra\" TEXT;")
        .expect("sql");
    rename_column_to_bytes(&db, "memscope_dump", "extra", "6578FF");
    let loaded = Loaded::open(&db, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(allocated_peak(&loaded), allocated_peak(&before));

    // A required column's name broken: refused, naming the file and the columns it needs.
    rename_column_to_bytes(&db, "memscope_dump", "Event", "4576FF");
    let err = Loaded::open(&db, None)
        .expect_err("no Event column")
        .to_string();
    assert!(
        err.contains(&db.display().to_string()) && err.contains("lacks msMemScope's columns"),
        "{err}"
    );
}

#[test]
fn a_python_trace_table_with_a_column_name_that_is_not_utf8_is_no_panic() {
    let db = recording("pytrace");
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute_batch(
        "CREATE TABLE python_trace_1 (\"FuncInfo\" TEXT, \"StartTime(ns)\" TEXT, \
         \"EndTime(ns)\" TEXT, \"Thread Id\" TEXT, \"Process Id\" TEXT, \"bad\" TEXT);",
    )
    .expect("sql");
    drop(conn);
    rename_column_to_bytes(&db, "python_trace_1", "bad", "C0C1");
    // Read or refused, never a panic; either way the message names the file.
    match Loaded::open(&db, None) {
        Ok(loaded) => assert!(allocated_peak(&loaded) > 0),
        Err(e) => assert!(e.to_string().contains(&db.display().to_string()), "{e}"),
    }
}

#[test]
fn gbk_text_in_a_cell_is_read_with_a_warning_naming_the_row() {
    let db = recording("gbk");
    let before = Loaded::open(&db, None).unwrap_or_else(|e| panic!("{e}"));
    // "训练.py" in GBK (not UTF-8) in the stack of the third row.
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute_batch(
        "UPDATE memscope_dump SET \"Call Stack(Python)\" = CAST(X'D1B5C1B72E7079' AS TEXT) \
         WHERE rowid = 3;",
    )
    .expect("sql");
    drop(conn);
    let loaded = Loaded::open(&db, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(allocated_peak(&loaded), allocated_peak(&before));
    let warning = loaded
        .warnings
        .iter()
        .map(ToString::to_string)
        .find(|w| w.contains("not UTF-8"))
        .unwrap_or_else(|| panic!("no warning: {:?}", loaded.warnings));
    assert!(
        warning.contains(&db.display().to_string())
            && warning.contains("1 cell is not UTF-8 (first in row 3)"),
        "{warning}"
    );
}

#[test]
fn a_wal_database_is_read_without_writing_beside_it() {
    let db = recording("wal");
    let before = Loaded::open(&db, None).unwrap_or_else(|e| panic!("{e}"));
    // Switched to WAL mode and closed cleanly: no -wal file is left, the header says WAL.
    let conn = rusqlite::Connection::open(&db).expect("open");
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .expect("wal");
    assert_eq!(mode, "wal");
    drop(conn);
    let files = beside(&db);
    let loaded = Loaded::open(&db, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(allocated_peak(&loaded), allocated_peak(&before));
    assert_eq!(beside(&db), files, "nothing written beside the input");
    assert!(
        loaded.warnings.iter().any(|w| w
            .to_string()
            .contains("WAL mode and its -wal file is not beside it")),
        "{:?}",
        loaded.warnings
    );

    // A writer still holding it open, with rows only in its -wal file: those rows are read.
    let writer = rusqlite::Connection::open(&db).expect("open");
    writer
        .execute_batch("PRAGMA wal_autocheckpoint = 0; DELETE FROM memscope_dump WHERE rowid > 40;")
        .expect("sql");
    let files = beside(&db);
    assert!(files.iter().any(|f| f.ends_with("-wal")), "{files:?}");
    let cut = Loaded::open(&db, None).unwrap_or_else(|e| panic!("{e}"));
    let events: usize = cut.snapshot.devices.iter().map(|d| d.trace.len()).sum();
    let all: usize = before.snapshot.devices.iter().map(|d| d.trace.len()).sum();
    assert!(
        events < all,
        "the -wal file's deletion was read: {events} of {all} events"
    );
    assert_eq!(beside(&db), files, "nothing written beside the input");
    drop(writer);
}

/// Rows that cannot be taken for what they say — cut to 7 of the header's 12 fields, a MALLOC
/// with no `size`, an Attr with two different sizes — are left out with a warning naming the
/// file and the line (they used to vanish without a word); the rest reads as before.
#[test]
fn rows_left_out_are_said_with_their_line() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/msmemscope/baseline.csv");
    let good = std::fs::read_to_string(&sample).expect("read");
    let lines = good.lines().count();
    let dir = std::env::temp_dir().join(format!("memsight-hostile-rows-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("folder");
    let path = dir.join("memscope_dump_1.csv");
    let mut text = good.trim_end().to_string();
    text.push_str("\n9001,MALLOC,PTA,N/A,1764753084999999000,1,1");
    text.push_str("\n9002,MALLOC,PTA,N/A,1764753084999999001,1,1,0,0x10,\"{owner:PTA}\",,");
    text.push_str(
        "\n9003,MALLOC,PTA,N/A,1764753084999999002,1,1,0,0x20,\"{size:512,size:1024}\",,\n",
    );
    std::fs::write(&path, text).expect("write");
    let before = Loaded::open(&sample, None).unwrap_or_else(|e| panic!("{e}"));
    let loaded = Loaded::open(&path, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(allocated_peak(&loaded), allocated_peak(&before));
    let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    let file = path.display().to_string();
    for (words, line) in [
        (
            "a row with fewer fields than the header (cut short?)",
            lines + 1,
        ),
        (
            "a row that is a MALLOC without a `size` in its Attr",
            lines + 2,
        ),
        (
            "a row whose Attr gives two different `size` values",
            lines + 3,
        ),
    ] {
        let expected = format!("{file}: {words} (first at line {line}): left out");
        assert!(warnings.contains(&expected), "{expected}\nin {warnings:#?}");
    }
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// A recording whose only device rows are left out is refused, and the refusal says they were
/// left out and where the first was: "0 rows" alone read as if the file held nothing.
#[test]
fn a_recording_of_rows_all_left_out_says_so_in_its_refusal() {
    let dir = std::env::temp_dir().join(format!("memsight-hostile-all-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("folder");
    let path = dir.join("memscope_dump_1.csv");
    std::fs::write(
        &path,
        "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n\
         1,MALLOC,PTA,N/A,5,1,1,0\n\
         2,FREE,PTA,N/A,6,1,1,0\n",
    )
    .expect("write");
    let error = Loaded::open(&path, None).expect_err("nothing on a device is left");
    let file = path.display().to_string();
    let expected = format!(
        "{file}: no device memory in this recording (0 rows, no MALLOC or FREE on an NPU; 2 rows \
         left out, the first at {file} line 2: a row with fewer fields than the header (cut \
         short?))"
    );
    assert_eq!(error.to_string(), expected);
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// A dump that is a link to `/dev/zero` (a stream with no line end) is refused once a line passes
/// 64 MiB, naming the file; it used to grow until the process was killed.
#[test]
fn an_endless_line_is_refused_as_it_streams_in() {
    let dir = std::env::temp_dir().join(format!("memsight-hostile-zero-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("folder");
    let link = dir.join("memscope_dump_1.csv");
    std::os::unix::fs::symlink("/dev/zero", &link).expect("link");
    let started = std::time::Instant::now();
    let err = Loaded::open(&link, None).expect_err("refused").to_string();
    assert!(
        err.contains(&link.display().to_string()) && err.contains("a line of more than 64.0 MiB"),
        "{err}"
    );
    assert!(
        started.elapsed().as_secs() < 20,
        "refused as it streamed in"
    );
    std::fs::remove_dir_all(dir).expect("clean up");
}

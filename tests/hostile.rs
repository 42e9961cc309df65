//! Issue 35's hostile inputs, each through every command that reads a file, as a user runs
//! them: `stats`, `analyze`, `state`, `whatif` and `diff` (the input against itself) end with
//! exit 0 or 2 — never a panic (101), an abort (134) or a kill, never a hang — and where they
//! refuse the input, the message names it. The inputs are made here and kept small; the large
//! ones (a 97 KB `.gz` of 10⁸ lists, a 2 GB line) are fuzzing's and the readers' own tests'.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const HEADER: &str = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";

/// The commands that read an input, each with the arguments after it.
const COMMANDS: [&str; 5] = ["stats", "analyze", "state", "whatif", "diff"];

/// A command may take this long on these small inputs before it counts as a hang.
const DEADLINE: Duration = Duration::from_mins(1);

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memsight-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Runs memsight with `args`; its exit code and what it printed, or `None` past the deadline.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memsight"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memsight runs");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return (None, format!("still running after {DEADLINE:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), printed)
}

/// A gzip file of `bytes`.
fn gzip(path: &Path, bytes: &[u8]) {
    let file = std::fs::File::create(path).expect("create");
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    gz.write_all(bytes).expect("write");
    gz.finish().expect("finish");
}

/// A one-file msMemScope recording in a `device_0/dump` folder of its own (the rows after the
/// header); returns the folder.
fn recording(dir: &Path, name: &str, rows: &str) -> PathBuf {
    let folder = dir.join(name);
    let dump = folder.join("device_0").join("dump");
    std::fs::create_dir_all(&dump).expect("folder");
    std::fs::write(dump.join("memscope_dump_1.csv"), format!("{HEADER}{rows}")).expect("write");
    folder
}

/// A profiler rank folder with one `memory_record.csv`; returns the run's folder.
fn profiler_rank(dir: &Path, name: &str, memory_record: &str) -> PathBuf {
    let root = dir.join(name);
    let output = root.join("rank0_ascend_pt").join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&output).expect("folder");
    std::fs::write(output.join("memory_record.csv"), memory_record).expect("write");
    root
}

/// A generated `.db` recording, its `memscope_dump` table changed by `sql`; returns the `.db`.
fn database(dir: &Path, name: &str, sql: &str) -> PathBuf {
    let folder = dir.join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_memsight"))
        .args([
            "gen",
            "--format",
            "memscope-db",
            "--devices",
            "1",
            "--events",
            "3000",
            "-o",
            s(&folder),
        ])
        .output()
        .expect("gen runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = find(&folder, "db").expect("a .db");
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute_batch(sql).expect("sql");
    db
}

/// The first file under `dir` whose extension is `ext`.
fn find(dir: &Path, ext: &str) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()? {
            let path = entry.ok()?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == ext) {
                return Some(path);
            }
        }
    }
    None
}

/// Every hostile input of the issue that a command reads, by name.
#[expect(
    clippy::too_many_lines,
    reason = "one short recipe per hostile input, in the order the issue lists them"
)]
fn cases(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut cases = Vec::new();
    // Column names that are not UTF-8, in the dump table.
    cases.push((
        "column name not UTF-8",
        database(
            dir,
            "colname",
            "ALTER TABLE memscope_dump ADD COLUMN extra TEXT;
             PRAGMA writable_schema = ON;
             UPDATE sqlite_master SET sql = replace(sql, '\"extra\"', '\"' || CAST(X'6578FF' AS TEXT) || '\"')
                 WHERE name = 'memscope_dump';
             UPDATE sqlite_master SET sql = replace(sql, 'extra TEXT', '\"' || CAST(X'6578FF' AS TEXT) || '\" TEXT')
                 WHERE name = 'memscope_dump';
             PRAGMA writable_schema = OFF;",
        ),
    ));
    // Ten million empty lists, gzipped: 10 MB of pickle in a small file.
    let mut lists = b"\x80\x04".to_vec();
    lists.extend(std::iter::repeat_n(b']', 10_000_000));
    let path = dir.join("lists.pickle.gz");
    gzip(&path, &lists);
    cases.push(("a .gz of ten million empty lists", path));
    // One trace entry shared through the memo five times.
    let path = dir.join("shared.pickle");
    std::fs::write(
        &path,
        b"\x80\x04\x95\x6f\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x08segments\x94\x5d\x94\
          \x8c\x0ddevice_traces\x94\x5d\x94\x5d\x94\x28\x7d\x94\x28\x8c\x06action\x94\x8c\x05alloc\
          \x94\x8c\x04addr\x94\x4b\x01\x8c\x04size\x94\x4d\x00\x02\x8c\x06stream\x94\x4b\x00\x8c\
          \x06frames\x94\x5d\x94\x75\x68\x06\x68\x06\x68\x06\x68\x06\x65\x61\x75\x2e",
    )
    .expect("write");
    cases.push(("a trace entry shared through the memo", path));
    // A dump that is a link to /dev/zero, and a profiler table that is one.
    #[cfg(unix)]
    {
        let folder = recording(dir, "zero", "");
        let dump = folder.join("device_0/dump/memscope_dump_1.csv");
        std::fs::remove_file(&dump).expect("remove");
        std::os::unix::fs::symlink("/dev/zero", &dump).expect("link");
        cases.push(("a dump linked to /dev/zero", folder));
        let root = profiler_rank(dir, "profiler-zero", "");
        let table = root.join("rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/memory_record.csv");
        std::fs::remove_file(&table).expect("remove");
        std::os::unix::fs::symlink("/dev/zero", &table).expect("link");
        cases.push(("a profiler table linked to /dev/zero", root));
    }
    // Rows cut short, a MALLOC without a size, two sizes in one Attr.
    cases.push((
        "a row cut to 7 of 12 fields",
        recording(
            dir,
            "cut",
            "1,MALLOC,HAL,N/A,1,1,1,0,0x100000,\"{size:2097152}\",,\n\
             2,MALLOC,PTA,N/A,2,1,1,0,0x100000,\"{size:512}\",,\n\
             3,MALLOC,PTA,N/A,3,1,1\n",
        ),
    ));
    cases.push((
        "a MALLOC without a size, two sizes in one Attr",
        recording(
            dir,
            "attrs",
            "1,MALLOC,HAL,N/A,1,1,1,0,0x100000,\"{size:2097152}\",,\n\
             2,MALLOC,PTA,N/A,2,1,1,0,0x100000,\"{addr:0x100000}\",,\n\
             3,MALLOC,PTA,N/A,3,1,1,0,0x100400,\"{size:512,size:1024}\",,\n\
             4,MALLOC,PTA,N/A,4,1,1,0,0x100800,\"{size:512}\",,\n",
        ),
    ));
    // A negative Total Reserved in memory_record.csv.
    cases.push((
        "a negative Total Reserved",
        profiler_rank(
            dir,
            "negative",
            "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n\
             APP,1000,100,1526,100,0,NPU:0\n\
             APP,2000,100,-2110,100,0,NPU:0\n\
             APP,3000,120,1526,120,0,NPU:0\n",
        ),
    ));
    // A memory_compare whose Diff is not Compare - Base.
    let path = dir.join("memory_compare_1.csv");
    std::fs::write(
        &path,
        ",,,Base,Compare\n\
         Event,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff Memory(byte)\n\
         OP,aten.add,0,100,200,1000000\n",
    )
    .expect("write");
    cases.push(("a memory_compare Diff that is not Compare - Base", path));
    // GBK text in a stack cell; a WAL-mode database without its -wal file.
    cases.push((
        "GBK text in a cell",
        database(
            dir,
            "gbk",
            "UPDATE memscope_dump SET \"Call Stack(Python)\" = CAST(X'D6D0CEC42E7079' AS TEXT)
                 WHERE rowid = (SELECT min(rowid) FROM memscope_dump);",
        ),
    ));
    let wal = database(dir, "wal", "PRAGMA journal_mode = WAL;");
    cases.push(("a WAL database without its -wal", wal));
    // A truncated .gz of a snapshot.
    let snapshot = dir.join("whole.pickle");
    let out = Command::new(env!("CARGO_BIN_EXE_memsight"))
        .args([
            "gen",
            "--scenario",
            "steady",
            "--events",
            "3000",
            "-o",
            s(&snapshot),
        ])
        .output()
        .expect("gen runs");
    assert!(out.status.success());
    let bytes = std::fs::read(&snapshot).expect("read");
    let gz = dir.join("cut.pickle.gz");
    gzip(&gz, &bytes);
    let whole = std::fs::read(&gz).expect("read");
    std::fs::write(&gz, &whole[..whole.len() / 2]).expect("write");
    cases.push(("a truncated .gz", gz));
    cases
}

#[test]
fn every_command_answers_every_hostile_input_with_exit_0_or_2_naming_it() {
    let dir = temp_dir("all");
    let cases = cases(&dir);
    let mut failures = Vec::new();
    for (what, input) in &cases {
        let name = input.file_name().and_then(|n| n.to_str()).expect("a name");
        for command in COMMANDS {
            let args: Vec<&str> = if command == "diff" {
                vec![command, s(input), s(input)]
            } else {
                vec![command, s(input)]
            };
            let (code, printed) = run(&args);
            let named = printed.contains(name);
            match code {
                Some(0) => {}
                Some(2) if named => {}
                _ => failures.push(format!(
                    "{what}: `memsight {command}` exit {code:?}{}:\n{}",
                    if named { "" } else { ", the input not named" },
                    printed.lines().take(6).collect::<Vec<_>>().join("\n")
                )),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Nothing was written beside the inputs (a WAL database's -shm, a .truth.json …).
    let wal_folder = cases
        .iter()
        .find(|(what, _)| what.starts_with("a WAL"))
        .and_then(|(_, p)| p.parent())
        .expect("the WAL case");
    let beside: Vec<String> = std::fs::read_dir(wal_folder)
        .expect("folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("-shm") || n.ends_with("-wal"))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
    std::fs::remove_dir_all(dir).expect("clean up");
}

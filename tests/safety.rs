//! Issue 23's reproducers, as a user meets them on the command line: nothing a user owns is
//! overwritten (an input named as the output, links, read-only files, devices and pipes), and no
//! impossible figure is printed for a file that contradicts itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memsight_core::r#gen::PickleWriter;

fn memsight(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memsight"))
        .args(args)
        .output()
        .expect("memsight runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memsight-safety-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A small generated snapshot at `path`.
fn generated(path: &Path) {
    let out = memsight(&[
        "gen",
        "--scenario",
        "stall",
        "--events",
        "3000",
        "-o",
        s(path),
    ]);
    assert!(out.status.success(), "{}", text(&out));
}

/// A Python value, as a snapshot holds them.
enum Py {
    Int(i128),
    Str(&'static str),
    List(Vec<Py>),
    Dict(Vec<(&'static str, Py)>),
}

fn write(w: &mut PickleWriter<Vec<u8>>, value: &Py) {
    match value {
        Py::Int(i) => w.int(*i),
        Py::Str(s) => w.str(s),
        Py::List(items) => {
            w.begin_list();
            for item in items {
                w.item().expect("in memory");
                write(w, item);
                w.end_list_item();
            }
            w.end_list();
        }
        Py::Dict(entries) => {
            w.begin_dict();
            for (key, item) in entries {
                w.entry(key, |w| write(w, item)).expect("in memory");
            }
            w.end_dict();
        }
    }
}

/// A snapshot of one device with `segments` at the end and `events` as its trace, written to
/// `path`.
fn handmade(path: &Path, segments: Vec<Py>, events: Vec<Py>) {
    let top = Py::Dict(vec![
        ("segments", Py::List(segments)),
        ("device_traces", Py::List(vec![Py::List(events)])),
    ]);
    let mut w = PickleWriter::new(Vec::new(), 4).expect("in memory");
    write(&mut w, &top);
    std::fs::write(path, w.finish().expect("in memory")).expect("write the pickle");
}

fn event(action: &'static str, addr: i128, size: i128, time_us: i128) -> Py {
    Py::Dict(vec![
        ("action", Py::Str(action)),
        ("addr", Py::Int(addr)),
        ("size", Py::Int(size)),
        ("stream", Py::Int(0)),
        ("time_us", Py::Int(time_us)),
        ("frames", Py::List(Vec::new())),
    ])
}

/// No figure in `output` is below zero, beyond 1 PiB (the most a device can hold), infinite or
/// not a number. Lines naming an option (`--capacity`) are left out.
fn assert_sane(output: &str) {
    for line in output.lines().filter(|l| !l.contains("--")) {
        let chars: Vec<char> = line.chars().collect();
        let negative = chars.windows(3).any(|w| {
            !(w[0].is_alphanumeric() || w[0] == '_') && w[1] == '-' && w[2].is_ascii_digit()
        });
        assert!(!negative, "a negative figure: {line}\n{output}");
        let beyond = line.replace("1 PiB", "");
        for bad in ["PiB", "EiB", "inf%", " inf ", "NaN"] {
            assert!(!beyond.contains(bad), "{bad:?} printed: {line}\n{output}");
        }
    }
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = temp_dir("same-file");
    let snap = dir.join("快照.pickle");
    generated(&snap);
    let before = std::fs::read(&snap).expect("read");
    let gz = dir.join("run.pickle.gz");
    generated(&gz);
    let gz_before = std::fs::read(&gz).expect("read");
    let link = dir.join("link.pickle");
    std::os::unix::fs::symlink(&snap, &link).expect("symlink");
    let dot = format!(
        "./{}",
        snap.file_name().and_then(|n| n.to_str()).expect("name")
    );

    // Each way of naming the input as the output: the same name, ./name from its folder, an
    // absolute path, a link to it, and a compressed input.
    let cases: [(&Path, &str, &str); 4] = [
        (&snap, s(&snap), "same name"),
        (&snap, s(&link), "a link to the input"),
        (&link, s(&snap), "the input through a link"),
        (&gz, s(&gz), ".gz"),
    ];
    for (input, output, why) in cases {
        let out = memsight(&["whatif", s(input), "--curve", output]);
        assert_eq!(out.status.code(), Some(2), "{why}: {}", text(&out));
        assert!(
            text(&out).contains("is the same file as the input"),
            "{why}: {}",
            text(&out)
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_memsight"))
        .current_dir(&dir)
        .args(["whatif", &dot, "--curve", &dot])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "./name: {}", text(&out));

    // screenshot: the input named snap.png, and the output the same file.
    let png = dir.join("snap.png");
    std::fs::copy(&snap, &png).expect("copy");
    let out = memsight(&["screenshot", s(&png), "-o", s(&png)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("is the same file as the input"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(&png).expect("read"), before);

    assert_eq!(
        std::fs::read(&snap).expect("read"),
        before,
        "the input is unchanged"
    );
    assert_eq!(std::fs::read(&gz).expect("read"), gz_before);
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn links_read_only_files_devices_and_pipes_are_written_as_careful_tools_do() {
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    let dir = temp_dir("targets");
    let snap = dir.join("run.pickle");
    generated(&snap);

    // A link is followed: the file it points to gets the CSV, the link stays a link.
    let real = dir.join("real.csv");
    std::fs::write(&real, "old").expect("write");
    let link = dir.join("link.csv");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let out = memsight(&["whatif", s(&snap), "--curve", s(&link)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&real)
            .expect("read")
            .starts_with("device,event")
    );

    // A link to nothing is refused, and nothing is created.
    let dangling = dir.join("dangling.csv");
    std::os::unix::fs::symlink(dir.join("nowhere.csv"), &dangling).expect("symlink");
    let out = memsight(&["whatif", s(&snap), "--curve", s(&dangling)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!dir.join("nowhere.csv").exists());

    // A read-only file stays as it was, read-only (root could write it: memsight refuses).
    let read_only = dir.join("kept.csv");
    std::fs::write(&read_only, "mine").expect("write");
    std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let out = memsight(&["whatif", s(&snap), "--curve", s(&read_only)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("read-only"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&read_only).expect("read"), "mine");
    let png = dir.join("kept.png");
    std::fs::write(&png, "mine").expect("write");
    std::fs::set_permissions(&png, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let out = memsight(&["screenshot", s(&snap), "-o", s(&png)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&png).expect("read"), "mine");

    // An existing file keeps its permissions.
    let shared = dir.join("shared.csv");
    std::fs::write(&shared, "old").expect("write");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let out = memsight(&["whatif", s(&snap), "--curve", s(&shared)]);
    assert!(out.status.success(), "{}", text(&out));
    let mode = std::fs::metadata(&shared)
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);

    // A folder is refused.
    let out = memsight(&["whatif", s(&snap), "--curve", s(&dir)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("a folder"), "{}", text(&out));

    // /dev/null is written into and stays a character device.
    let out = memsight(&["whatif", s(&snap), "--curve", "/dev/null"]);
    assert!(out.status.success(), "{}", text(&out));
    let null = std::fs::metadata("/dev/null").expect("/dev/null");
    assert!(
        null.file_type().is_char_device(),
        "/dev/null is still a device"
    );

    // A FIFO is written into (a reader gets the CSV) and stays a FIFO.
    let fifo = dir.join("pipe.csv");
    let mkfifo = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(mkfifo.success());
    let reader = Command::new("timeout")
        .args(["60", "cat", s(&fifo)])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("a reader");
    let out = memsight(&["whatif", s(&snap), "--curve", s(&fifo)]);
    assert!(out.status.success(), "{}", text(&out));
    let piped = reader.wait_with_output().expect("the reader ends");
    assert!(String::from_utf8_lossy(&piped.stdout).starts_with("device,event"));
    assert!(
        std::fs::metadata(&fifo)
            .expect("fifo")
            .file_type()
            .is_fifo()
    );
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn gen_is_capped_and_refuses_what_it_must_not_write() {
    let dir = temp_dir("gen");
    let out_file = dir.join("huge.pickle");
    let out = memsight(&[
        "gen",
        "--scenario",
        "leak",
        "--events",
        "1000000000",
        "-o",
        s(&out_file),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--events must be at most 50000000"),
        "{}",
        text(&out)
    );
    assert!(!out_file.exists());

    // Its truth file, read-only, is checked before the snapshot is written.
    let snap = dir.join("kept.pickle");
    let truth = dir.join("kept.pickle.truth.json");
    std::fs::write(&truth, "mine").expect("write");
    std::fs::set_permissions(&truth, std::os::unix::fs::PermissionsExt::from_mode(0o444))
        .expect("chmod");
    let out = memsight(&[
        "gen",
        "--scenario",
        "leak",
        "--events",
        "100",
        "-o",
        s(&snap),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!snap.exists(), "nothing written");
    assert_eq!(std::fs::read_to_string(&truth).expect("read"), "mine");
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn a_trace_that_frees_more_than_it_holds_prints_no_negative_figure() {
    let dir = temp_dir("negative");
    // One MiB allocated and never freed, while the final state holds nothing: undoing the trace
    // gives -1 MiB before the first event.
    let file = dir.join("frees.pickle");
    handmade(&file, Vec::new(), vec![event("alloc", 0x1000, 1 << 20, 10)]);
    for command in ["stats", "whatif", "analyze"] {
        let out = memsight(&[command, s(&file)]);
        assert!(out.status.success(), "{command}: {}", text(&out));
        assert_sane(&String::from_utf8_lossy(&out.stdout));
    }
    let out = memsight(&["stats", s(&file)]);
    assert!(
        text(&out).contains("less than nothing before the first event"),
        "{}",
        text(&out)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&memsight(&["stats", "--json", s(&file)]).stdout).expect("JSON");
    let device = &json["devices"][0];
    for key in [
        "allocated_bytes_final",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
    ] {
        assert!(
            device[key].as_i64().is_some_and(|v| v >= 0),
            "{key}: {device}"
        );
    }
    // whatif: what is unused at the peak is never more than the peak itself.
    let json: serde_json::Value =
        serde_json::from_slice(&memsight(&["whatif", "--json", s(&file)]).stdout).expect("JSON");
    for side in ["recorded", "predicted"] {
        let outcome = &json["devices"][0][side];
        let (unused, peak) = (
            outcome["peak_fragmentation_bytes"].as_u64(),
            outcome["peak_reserved_bytes"].as_u64(),
        );
        assert!(unused.is_some() && peak.is_some(), "{side}: {outcome}");
        assert!(unused <= peak, "{side}: {outcome}");
    }
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn sizes_no_device_holds_and_impossible_times_are_said_not_printed() {
    let dir = temp_dir("impossible");
    let huge = dir.join("huge.pickle");
    handmade(
        &huge,
        Vec::new(),
        vec![
            event("alloc", 0x1000, (1 << 63) - 1, 1),
            event("alloc", 0x2000, (1 << 63) - 1, 2),
        ],
    );
    let out = memsight(&["stats", s(&huge)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("more than 1 PiB") && text(&out).contains("huge.pickle"));

    // Times that go backwards, and times that span 292,000 years.
    for (name, times) in [
        ("backwards", [100, 50]),
        ("forever", [0, i128::from(i64::MAX) - 5]),
    ] {
        let file = dir.join(format!("{name}.pickle"));
        handmade(
            &file,
            Vec::new(),
            vec![
                event("alloc", 0x1000, 1 << 20, times[0]),
                event("free_completed", 0x1000, 1 << 20, times[1]),
            ],
        );
        let out = memsight(&["stats", s(&file)]);
        assert!(out.status.success(), "{}", text(&out));
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(printed.contains("time span n/a"), "{name}: {printed}");
        assert!(
            printed.contains("go backwards") || printed.contains("more than a year"),
            "{name}: {printed}"
        );
        let json: serde_json::Value =
            serde_json::from_slice(&memsight(&["stats", "--json", s(&file)]).stdout).expect("JSON");
        assert!(json["devices"][0]["time_span_us"].is_null(), "{name}");
    }
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn whatif_options_and_oom_entries_give_possible_figures() {
    let dir = temp_dir("whatif");
    let snap = dir.join("run.pickle");
    generated(&snap);
    let out = memsight(&["whatif", s(&snap), "--capacity", "18446744073709551615"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--capacity must be between"),
        "{}",
        text(&out)
    );
    let out = memsight(&["whatif", s(&snap), "--capacity", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // 0 is what the outputs write for "off": it is taken as input too.
    let out = memsight(&["whatif", s(&snap), "--set", "roundup_power2_divisions:0"]);
    assert!(out.status.success(), "{}", text(&out));

    // An oom entry without device_free: no capacity is known, so the request is not replayed (it
    // was replayed as a 50 MiB segment: +2500 %).
    let oom = dir.join("oom.pickle");
    let block = |address: i128, requested: i128, state: &'static str| {
        Py::Dict(vec![
            ("address", Py::Int(address)),
            ("size", Py::Int(1 << 20)),
            ("requested_size", Py::Int(requested)),
            ("state", Py::Str(state)),
        ])
    };
    let segment = Py::Dict(vec![
        ("device", Py::Int(0)),
        ("address", Py::Int(0x100_0000)),
        ("total_size", Py::Int(2 << 20)),
        ("stream", Py::Int(0)),
        ("segment_type", Py::Str("large")),
        (
            "blocks",
            Py::List(vec![
                block(0x100_0000, 1 << 20, "active_allocated"),
                block(0x110_0000, 0, "inactive"),
            ]),
        ),
    ]);
    handmade(
        &oom,
        vec![segment],
        vec![
            event("segment_alloc", 0x100_0000, 2 << 20, 1),
            event("alloc", 0x100_0000, 1 << 20, 2),
            event("oom", 0, 50 << 20, 3),
        ],
    );
    let json: serde_json::Value =
        serde_json::from_slice(&memsight(&["whatif", "--json", s(&oom)]).stdout).expect("JSON");
    let device = &json["devices"][0];
    assert_eq!(
        device["recorded"]["peak_reserved_bytes"], device["predicted"]["peak_reserved_bytes"],
        "{device}"
    );
    assert_eq!(device["predicted"]["segment_allocs"], 1, "{device}");
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn profiler_rows_no_device_holds_are_warned_and_stats_reads_profiler_folders() {
    let dir = temp_dir("profiler")
        .join("rank0_ascend_pt")
        .join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&dir).expect("folder");
    std::fs::write(
        dir.join("memory_record.csv"),
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n\
         APP,1000,100,1526,100,0,NPU:0\n\
         APP,2000,1e308,1526,100,0,NPU:0\n\
         APP,3000,120,1526,120,0,NPU:0\n",
    )
    .expect("write");
    let root = dir.parent().and_then(Path::parent).expect("root");
    for command in ["stats", "analyze"] {
        let out = memsight(&[command, s(root)]);
        assert!(out.status.success(), "{command}: {}", text(&out));
        let printed = text(&out);
        assert_sane(&printed);
        assert!(!printed.contains("no torch_npu profiler data"), "{printed}");
    }
    let printed = text(&memsight(&["stats", s(root)]));
    assert!(
        printed.contains("\"1e308\" is more than 1 PiB"),
        "{printed}"
    );
    assert!(printed.contains("line 3"), "{printed}");
    assert!(
        printed.contains("APP") && printed.contains("120 MiB"),
        "{printed}"
    );
    std::fs::remove_dir_all(root).expect("clean up");
}

#[test]
fn no_file_of_an_input_folder_is_replaced() {
    let dir = temp_dir("in-folder");
    let run = dir
        .join("msmemscope_1_20251201000000_ascend")
        .join("device_0")
        .join("dump");
    std::fs::create_dir_all(&run).expect("folders");
    let csv = run.join("memscope_dump_20251201.csv");
    let rows = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/memsight-core/tests/data/msmemscope/baseline.csv"),
    )
    .expect("the sample");
    std::fs::write(&csv, &rows).expect("write");
    let root = dir.join("msmemscope_1_20251201000000_ascend");
    // A data file of the recording is never replaced (any CSV below the folder may be read) …
    let out = memsight(&["whatif", s(&root), "--curve", s(&csv)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("inside the input folder"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read(&csv).expect("read"),
        rows,
        "the recording is unchanged"
    );
    // … while a new file beside the data is written.
    let out = memsight(&["whatif", s(&root), "--curve", s(&run.join("curve.csv"))]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read(&csv).expect("read"),
        rows,
        "the recording is unchanged"
    );
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// A file that needs more memory than the bound (`MEMSIGHT_MEMORY_LIMIT`, here 4 MiB; by default
/// three quarters of the machine's memory) is refused by every command with exit 2 and a message
/// naming the file and the bound, snapshot and msMemScope recording alike; under the default
/// bound the same files open.
#[test]
fn a_file_too_big_for_the_memory_bound_is_refused_naming_it() {
    let dir = temp_dir("budget");
    let snapshot = dir.join("big.pickle");
    let out = memsight(&[
        "gen",
        "--scenario",
        "steady",
        "--events",
        "200000",
        "-o",
        s(&snapshot),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let recording = dir.join("recording");
    let out = memsight(&[
        "gen",
        "--format",
        "memscope",
        "--devices",
        "1",
        "--events",
        "200000",
        "-o",
        s(&recording),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    for input in [&snapshot, &recording] {
        for command in ["stats", "analyze", "state", "whatif"] {
            let bounded = Command::new(env!("CARGO_BIN_EXE_memsight"))
                .args([command, s(input)])
                .env("MEMSIGHT_MEMORY_LIMIT", "4M")
                .output()
                .expect("memsight runs");
            let said = text(&bounded);
            assert_eq!(
                bounded.status.code(),
                Some(2),
                "{command} {input:?}: {said}"
            );
            assert!(
                said.contains("more than 4.00 MiB")
                    && said.contains("MEMSIGHT_MEMORY_LIMIT")
                    && said.contains(input.file_name().and_then(|n| n.to_str()).unwrap_or("?")),
                "{command} {input:?}: {said}"
            );
            assert_sane(&said);
        }
        let out = memsight(&["stats", s(input)]);
        assert!(out.status.success(), "{input:?}: {}", text(&out));
    }
    std::fs::remove_dir_all(dir).expect("clean up");
}

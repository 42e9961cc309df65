//! msMemScope recordings on the command line, as an Ascend engineer runs it: every command opens
//! the samples and a generated recording (in a Chinese folder), `diff` shows the leaking run's
//! growth, and bad recordings exit 2 with the file and line, writing nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/memsight-core/tests/data/msmemscope")
        .join(name)
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "memsight-memscope-cli-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn every_command_opens_a_generated_recording_in_a_chinese_folder() {
    let dir = temp_dir("gen").join("训练记录");
    let out = memsight(&[
        "gen",
        "--format",
        "memscope",
        "--devices",
        "2",
        "--events",
        "30000",
        "-o",
        s(&dir),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(dir.join("memsight-truth.json").is_file());
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("memsight-truth.json")).expect("truth"))
            .expect("JSON");

    let stats: serde_json::Value =
        serde_json::from_slice(&memsight(&["stats", "--json", s(&dir)]).stdout).expect("JSON");
    for (device, t) in stats["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .zip(truth["devices"].as_array().expect("devices"))
    {
        assert_eq!(device["peak_allocated_bytes"], t["peak_allocated_bytes"]);
    }

    let analyze: serde_json::Value =
        serde_json::from_slice(&memsight(&["analyze", "--json", s(&dir)]).stdout).expect("JSON");
    let findings = analyze["files"][0]["findings"]
        .as_array()
        .expect("findings");
    let kinds: Vec<&str> = findings.iter().filter_map(|f| f["kind"].as_str()).collect();
    assert!(
        kinds.contains(&"leak") && kinds.contains(&"inefficient_memory"),
        "{kinds:?}"
    );
    let peak = findings
        .iter()
        .find(|f| f["kind"] == "peak")
        .expect("a peak finding");
    let owners: u64 = peak["owners"]
        .as_array()
        .expect("owners")
        .iter()
        .map(|o| o["bytes"].as_u64().expect("bytes"))
        .sum();
    assert_eq!(Some(owners), peak["bytes"].as_u64());

    let out = memsight(&["state", s(&dir), "--device", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = memsight(&["whatif", s(&dir), "--device", "0"]);
    assert!(out.status.success(), "{}", text(&out));
    let shot = dir.join("图.png");
    let out = memsight(&[
        "screenshot",
        s(&dir),
        "--width",
        "800",
        "--height",
        "500",
        "-o",
        s(&shot),
    ]);
    // Rendering needs a GL driver (Mesa); without one the command says so and writes nothing.
    if out.status.success() {
        assert!(std::fs::metadata(&shot).expect("the picture").len() > 10_000);
    } else {
        assert!(!shot.exists(), "{}", text(&out));
    }
    let out = memsight(&[
        "gen",
        "--format",
        "memscope-db",
        "--devices",
        "1",
        "--events",
        "5000",
        "-o",
        s(&dir.join("db")),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let out = memsight(&["stats", s(&dir.join("db"))]);
    assert!(
        out.status.success() && text(&out).contains("device 0"),
        "{}",
        text(&out)
    );
    std::fs::remove_dir_all(dir.parent().expect("parent")).expect("clean up");
}

#[test]
fn the_leaking_run_stands_out_against_its_baseline() {
    let out = memsight(&["diff", s(&sample("baseline.csv")), s(&sample("leaks.csv"))]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = text(&out);
    let first_site = printed
        .lines()
        .skip_while(|l| !l.starts_with("call sites by"))
        .nth(2)
        .unwrap_or_default();
    assert!(
        first_site.contains("aten._to_copy.default") && first_site.contains("+3.81 MiB"),
        "{printed}"
    );
}

#[test]
fn bad_recordings_exit_2_name_the_line_and_write_nothing() {
    let dir = temp_dir("bad");
    let bad = dir.join("memscope_dump_1.csv");
    std::fs::write(
        &bad,
        "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n\
         1,MALLOC,PTA,N/A,12,1,1,0,0x10,\"{size:12,total\",,\n",
    )
    .expect("write");
    let curve = dir.join("curve.csv");
    for args in [
        vec!["stats", s(&bad)],
        vec!["analyze", s(&bad)],
        vec!["whatif", s(&bad), "--curve", s(&curve)],
    ] {
        let out = memsight(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains("memscope_dump_1.csv: line 2"),
            "{}",
            text(&out)
        );
    }
    assert!(!curve.exists(), "nothing written");
    let out = memsight(&["stats", s(&sample("host_pinned.db"))]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no device memory"), "{}", text(&out));
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn msmemscope_own_comparison_is_shown_as_a_table() {
    let dir = temp_dir("compare");
    let path = dir.join("memory_compare_20251203120000.csv");
    std::fs::write(
        &path,
        ",,,Base,Compare\n\
         Event,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff Memory(byte)\n\
         ATEN_END,aten.addmm,0,1536,1536,0\n\
         ATEN_END,aten._to_copy,0,N/A,4000256,4000256\n\
         ATEN_END,aten.mm,0,2048,1024,-1024\n",
    )
    .expect("write");
    let out = memsight(&["stats", s(&path)]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = text(&out);
    let first = printed.lines().nth(2).unwrap_or_default();
    assert!(
        first.contains("+3.81 MiB") && first.contains("aten._to_copy [only in compare]"),
        "{printed}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&memsight(&["stats", "--json", s(&path)]).stdout).expect("JSON");
    assert_eq!(json.as_array().map(Vec::len), Some(3));
    assert!(json[0]["base_bytes"].is_null());
    std::fs::write(&path, "Event,Name\nATEN_END,x,0,1,2,zz\n").expect("write");
    let out = memsight(&["stats", s(&path)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("line 2"), "{}", text(&out));
    std::fs::remove_dir_all(dir).expect("clean up");
}

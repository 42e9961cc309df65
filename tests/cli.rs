//! The command line as a user runs it: the bundled demo, JSON keys scripts rely on, errors on
//! stderr with a non-zero exit, and the generator.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn memsight(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memsight"))
        .args(args)
        .output()
        .expect("memsight runs")
}

fn stdout_json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("valid JSON")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memsight-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn stats_without_a_file_reports_on_the_bundled_demo() {
    let output = memsight(&["stats"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.starts_with("device 0: 20000 events"), "{text}");
}

#[test]
fn stats_json_keeps_the_promised_keys() {
    let json = stdout_json(&memsight(&["stats", "--json"]));
    let device = &json["devices"][0];
    for key in [
        "device",
        "trace_events",
        "actions",
        "segments",
        "blocks",
        "reserved_bytes_final",
        "allocated_bytes_final",
        "active_bytes_final",
        "peak_reserved_bytes",
        "peak_allocated_bytes",
        "peak_active_bytes",
    ] {
        assert!(!device[key].is_null(), "missing {key}");
    }
    assert_eq!(device["trace_events"], 20000);
    let actions = device["actions"].as_object().expect("actions object");
    let counted: u64 = actions.values().map(|v| v.as_u64().expect("count")).sum();
    assert_eq!(counted, 20000);
    assert!(json["warnings"].is_array());
}

#[test]
fn state_json_describes_the_pool_after_an_event() {
    let json = stdout_json(&memsight(&["state", "--event", "1000", "--json"]));
    assert_eq!(json["event"], 1000);
    for key in [
        "device",
        "reserved_bytes",
        "allocated_bytes",
        "active_bytes",
    ] {
        assert!(json[key].is_number(), "missing {key}");
    }
    let segments = json["segments"].as_array().expect("segments");
    let reserved: u64 = segments
        .iter()
        .map(|s| s["total_size"].as_u64().expect("size"))
        .sum();
    assert_eq!(json["reserved_bytes"].as_u64(), Some(reserved));
    let block = &segments[0]["blocks"][0];
    for key in ["address", "size", "requested_size", "state"] {
        assert!(!block[key].is_null(), "missing block {key}");
    }
    // Every live block says what it is for; free gaps do not.
    let categories = [
        "parameter",
        "gradient",
        "optimizer_state",
        "weight_copy",
        "activation",
        "temporary",
        "workspace",
        "retained",
        "unknown",
    ];
    for b in segments
        .iter()
        .flat_map(|s| s["blocks"].as_array().expect("blocks"))
    {
        if b["state"] == "inactive" {
            assert!(b["category"].is_null(), "{b}");
        } else {
            let category = b["category"].as_str().expect("a category");
            assert!(categories.contains(&category), "{b}");
        }
    }
    let before = stdout_json(&memsight(&["state", "--event", "-1", "--json"]));
    assert!(before["event"].is_null());
}

#[test]
fn errors_name_the_file_and_exit_non_zero() {
    let missing = memsight(&["stats", "/nonexistent/snap.pickle"]);
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.starts_with("memsight: cannot read /nonexistent/snap.pickle"),
        "{stderr}"
    );
    // The cause once, not repeated by the error chain.
    assert_eq!(stderr.matches("os error").count(), 1, "{stderr}");

    let dir = temp_dir("errors");
    let evil = dir.join("evil.pkl");
    std::fs::write(&evil, b"\x80\x02cposix\nsystem\nq\x00.").expect("write");
    let refused = memsight(&["stats", evil.to_str().expect("utf-8 path")]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("not a memory snapshot") && stderr.contains("nothing was executed"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));

    let out_of_range = memsight(&["state", "--event", "99999999"]);
    assert!(!out_of_range.status.success());
    assert!(String::from_utf8_lossy(&out_of_range.stderr).contains("out of range"));
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// Exit status 0 success, 1 findings at or above --fail-on (or a failure while working), 2 a
/// usage or input error — as `--help` says; and files that are something else say what they are.
#[test]
fn exit_codes_and_input_errors_say_what_went_wrong() {
    let code = |out: &Output| out.status.code();
    let dir = temp_dir("exit");
    assert!(
        String::from_utf8_lossy(&memsight(&["--help"]).stdout)
            .contains("Exit status: 0 success; 1 findings")
    );
    assert_eq!(code(&memsight(&["analyze", "--fail-on", "bogus"])), Some(2));
    assert_eq!(
        code(&memsight(&["analyze", "--fail-on", "warning"])),
        Some(1),
        "the demo leaks"
    );
    assert_eq!(code(&memsight(&["analyze", "--fail-on", "error"])), Some(0));
    assert_eq!(
        code(&memsight(&["stats", "/nonexistent/snap.pickle"])),
        Some(2)
    );

    let text = dir.join("notes.txt");
    std::fs::write(&text, "some notes about the run\nsecond line\n").expect("write");
    let out = memsight(&["stats", text.to_str().expect("utf-8")]);
    assert_eq!(code(&out), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a pickle: it starts with text (\"some notes about the run\")")
            && stderr.contains("torch.cuda.memory._dump_snapshot()")
            && stderr.trim_end().ends_with("notes.txt"),
        "{stderr}"
    );
    let csv = dir.join("memory_record.pkl");
    std::fs::write(
        &csv,
        "Component,Timestamp(us),Total Allocated(MB)\nAPP,1,2\n",
    )
    .expect("write");
    let out = memsight(&["analyze", csv.to_str().expect("utf-8")]);
    assert_eq!(code(&out), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("a profiler CSV given where a snapshot is expected")
    );

    let out = memsight(&[
        "gen",
        "--scenario",
        "leak",
        "--events",
        "0",
        "-o",
        "/tmp/never.pickle",
    ]);
    assert_eq!(code(&out), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--events must be at least 1"));
    let help = String::from_utf8_lossy(&memsight(&["gen", "--help"]).stdout).to_string();
    assert!(
        help.contains("expandable, transformer, transformer-leak"),
        "{help}"
    );
    let help = String::from_utf8_lossy(&memsight(&["screenshot", "--help"]).stdout).to_string();
    for described in [
        "The image to write",
        "Device ordinal",
        "Image width",
        "Image height",
    ] {
        assert!(help.contains(described), "{help}");
    }
    assert!(!String::from_utf8_lossy(&memsight(&["--help"]).stdout).contains('`'));
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// `screenshot` checks the image format before any work, writes JPEG too, and leaves no file
/// behind when it cannot render (no graphics adapter: one line that says what to install).
#[test]
fn screenshot_formats_and_a_missing_renderer_are_clear() {
    let dir = temp_dir("shot-formats");
    let bmp = dir.join("x.bmp");
    let out = memsight(&["screenshot", "-o", bmp.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must end in .png, .jpg or .jpeg"));
    assert!(!bmp.exists(), "nothing written");

    let jpg = dir.join("x.jpg");
    let out = memsight(&[
        "screenshot",
        "--width",
        "320",
        "--height",
        "200",
        "-o",
        jpg.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&jpg).expect("written");
    assert!(bytes.starts_with(&[0xff, 0xd8]), "a JPEG");

    // A backend this machine does not have: no adapter.
    let png = dir.join("none.png");
    let out = Command::new(env!("CARGO_BIN_EXE_memsight"))
        .args(["screenshot", "-o", png.to_str().expect("utf-8")])
        .env("WGPU_BACKEND", "dx12")
        .output()
        .expect("memsight runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no graphics adapter") && stderr.contains("WGPU_BACKEND=gl"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("panicked") && stderr.lines().count() == 1,
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "only x.jpg: {left:?}");
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn gen_writes_a_snapshot_and_its_ground_truth() {
    let dir = temp_dir("gen");
    let file = dir.join("oom.pickle");
    let path = file.to_str().expect("utf-8 path");
    let output = memsight(&[
        "gen",
        "--scenario",
        "oom",
        "--events",
        "5000",
        "--protocol",
        "5",
        "-o",
        path,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let truth: serde_json::Value = serde_json::from_slice(
        &std::fs::read(Path::new(&format!("{path}.truth.json"))).expect("truth file"),
    )
    .expect("JSON");
    let oom_event = truth["oom"]["event"].as_u64().expect("oom event");
    let stats = stdout_json(&memsight(&["stats", path, "--json"]));
    assert_eq!(stats["devices"][0]["trace_events"], 5000);
    assert_eq!(stats["devices"][0]["actions"]["oom"], 1);
    assert_eq!(oom_event, 4999, "the OOM ends the run");

    let bad = memsight(&["gen", "--scenario", "nope", "-o", path]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown scenario `nope`"));
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn screenshot_renders_without_a_display() {
    let dir = temp_dir("screenshot");
    let out = dir.join("timeline.png");
    let path = out.to_str().expect("utf-8 path");
    let output = Command::new(env!("CARGO_BIN_EXE_memsight"))
        .args([
            "screenshot",
            "-o",
            path,
            "--view",
            "timeline",
            "--width",
            "480",
            "--height",
            "300",
            "--select-event",
            "2000",
        ])
        .env("WGPU_BACKEND", "gl")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("memsight runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let png = std::fs::read(&out).expect("PNG written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width and height, big endian, right after the signature and chunk header.
    let (width, height) = (
        u32::from_be_bytes([png[16], png[17], png[18], png[19]]),
        u32::from_be_bytes([png[20], png[21], png[22], png[23]]),
    );
    assert_eq!((width, height), (480, 300));

    let bad = memsight(&["screenshot", "-o", path, "--select-event", "99999999"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("event 99999999 is out of range"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// The pool chart of the app and `memsight state` agree at the same event, segment for segment.
#[test]
fn the_pool_chart_agrees_with_memsight_state() {
    let Some(dir) = memsight_core::testing::fixtures_dir() else {
        return;
    };
    let fixture = dir.join("snapshots/cuda_ctx512_forward_mixed.pickle");
    let path = fixture.to_str().expect("utf-8 path");
    let json = stdout_json(&memsight(&["state", path, "--event", "701", "--json"]));

    let options = memsight_ui::headless::ScreenshotOptions {
        view: memsight_ui::View::Pool,
        event: Some(701),
        ..memsight_ui::headless::ScreenshotOptions::default()
    };
    let app =
        memsight_ui::headless::prepared_app(&memsight_ui::Source::Path(fixture.clone()), &options)
            .expect("loads");
    let mut harness = egui_kittest::Harness::builder()
        .with_size(egui::vec2(900.0, 600.0))
        .build_ui_state(
            |ui, app: &mut memsight_ui::MemsightApp| app.ui_root(ui),
            app,
        );
    harness.run_steps(3);
    let pool = harness.state().documents()[0]
        .pool
        .pool()
        .expect("the pool chart shows a pool")
        .clone();

    let from_cli: Vec<(u64, u64, usize)> = json["segments"]
        .as_array()
        .expect("segments")
        .iter()
        .map(|s| {
            (
                s["address"].as_u64().expect("address"),
                s["total_size"].as_u64().expect("size"),
                s["blocks"].as_array().expect("blocks").len(),
            )
        })
        .collect();
    let from_chart: Vec<(u64, u64, usize)> = pool
        .segments
        .iter()
        .map(|s| (s.address, s.total_size_bytes, s.blocks.len()))
        .collect();
    assert_eq!(from_chart, from_cli);
    assert_eq!(
        json["allocated_bytes"].as_i64(),
        Some(pool.totals.allocated_bytes)
    );
}

#[test]
fn analyze_finds_the_demo_leak_and_can_gate_ci() {
    let json = stdout_json(&memsight(&["analyze", "--json"]));
    let findings = json["files"][0]["findings"].as_array().expect("findings");
    let leak = findings
        .iter()
        .find(|f| f["kind"] == "leak")
        .expect("the demo leaks one tensor per step");
    for key in [
        "severity",
        "device",
        "title",
        "summary",
        "bytes",
        "events",
        "time_us",
        "stack",
        "suggestion",
    ] {
        assert!(!leak[key].is_null(), "missing {key}");
    }
    let frames = leak["stack"].as_array().expect("stack");
    assert!(
        frames
            .iter()
            .any(|f| f["filename"] == "metrics.py" && f["line"] == 42 && f["name"] == "accumulate")
    );
    assert!(
        !findings.iter().any(|f| f["kind"] == "oom"),
        "the demo never runs out of memory"
    );
    // The anatomy of the peak: its breakdown adds up to the peak allocated bytes of `stats`.
    let peak = findings
        .iter()
        .find(|f| f["kind"] == "peak")
        .expect("a peak finding");
    let parts = peak["breakdown"].as_array().expect("a breakdown");
    let sum: u64 = parts
        .iter()
        .map(|p| p["bytes"].as_u64().expect("bytes"))
        .sum();
    assert_eq!(peak["bytes"].as_u64(), Some(sum));
    let stats = stdout_json(&memsight(&["stats", "--json"]));
    assert_eq!(
        stats["devices"][0]["peak_allocated_bytes"].as_u64(),
        Some(sum)
    );
    assert!(parts.iter().all(|p| p["category"].is_string()));

    let gate = memsight(&["analyze", "--fail-on", "warning"]);
    assert!(!gate.status.success());
    assert!(String::from_utf8_lossy(&gate.stderr).contains("finding(s) at or above warning"));
    assert!(
        memsight(&["analyze", "--fail-on", "error"])
            .status
            .success(),
        "a leak is a warning, not an error"
    );
    let markdown = memsight(&["analyze", "--markdown"]);
    assert!(String::from_utf8_lossy(&markdown.stdout).contains("- **Warning** Leak"));
}

/// A finding's header names where it happened: "at" a Python frame, "in" a C++ operator (the
/// cppframes fixture's peak falls in `pow_backward`, a frame of `PyTorch`'s autograd, by its
/// trace); `at at::…` read like a typo.
#[test]
fn analyze_headers_say_in_for_an_operator() {
    let Some(dir) = memsight_core::testing::fixtures_dir() else {
        memsight_core::testing::skip("corpus not found");
        return;
    };
    let path = dir.join("snapshots/cuda_cppframes_snapshotevents.pickle");
    let output = memsight(&["analyze", path.to_str().expect("a UTF-8 path")]);
    let text = String::from_utf8_lossy(&output.stdout);
    let header = text
        .lines()
        .find(|l| l.contains("[Info] Peak:"))
        .expect("a peak finding");
    assert!(
        header.contains(" in torch::autograd::generated::details::pow_backward"),
        "{header}"
    );
    assert!(
        !text.contains(" at torch::") && !text.contains(" at at::"),
        "{text}"
    );
}

/// Profiler data through the command line: a generated two-rank run with a stall on one rank is
/// analysed as one run (JSON with the rank), and its curves render headless.
#[test]
fn profiler_folders_are_analysed_together_and_render() {
    use memsight_core::r#gen::profiler::{ProfilerGenOptions, write_rank};
    let dir = temp_dir("profiler");
    for (rank, stall) in [(0, None), (1, Some((3_000, 2u64 << 30, 2_000)))] {
        write_rank(
            &dir.join(format!("rank{rank}_ascend_pt"))
                .join("ASCEND_PROFILER_OUTPUT"),
            &ProfilerGenOptions {
                samples: 6_000,
                stall,
                device: rank,
                // Beyond a tenth of APP's peak: worth a finding.
                unaccounted_bytes: 2 << 30,
                ..ProfilerGenOptions::default()
            },
        )
        .expect("written");
    }
    let root = dir.to_str().expect("utf-8 path");
    let json = stdout_json(&memsight(&["analyze", "--json", root]));
    let findings = json["files"][0]["findings"].as_array().expect("findings");
    let stalls: Vec<&serde_json::Value> = findings
        .iter()
        .filter(|f| f["kind"] == "allocator_stall")
        .collect();
    assert_eq!(stalls.len(), 1, "{findings:?}");
    assert_eq!(stalls[0]["rank"], "rank1_ascend_pt");
    assert_eq!(stalls[0]["device"], 1);
    assert!(
        stalls[0]["time_us"]
            .as_array()
            .is_some_and(|t| t.len() == 2)
    );
    assert!(findings.iter().any(|f| f["kind"] == "unaccounted_memory"));

    let out = dir.join("curves.png");
    let output = Command::new(env!("CARGO_BIN_EXE_memsight"))
        .args([
            "screenshot",
            root,
            "-o",
            out.to_str().expect("utf-8"),
            "--view",
            "timeline",
        ])
        .env("WGPU_BACKEND", "gl")
        .output()
        .expect("memsight runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        &std::fs::read(&out).expect("PNG written")[..8],
        b"\x89PNG\r\n\x1a\n"
    );
    let pool = memsight(&[
        "screenshot",
        root,
        "-o",
        out.to_str().expect("utf-8"),
        "--view",
        "pool",
    ]);
    assert!(
        String::from_utf8_lossy(&pool.stderr).contains("profiler data has `app` and `timeline`")
    );

    let empty = temp_dir("profiler-empty");
    let err = memsight(&["analyze", empty.to_str().expect("utf-8")]);
    assert!(!err.status.success());
    std::fs::remove_dir_all(dir).expect("clean up");
    std::fs::remove_dir_all(empty).expect("clean up");
}

/// `whatif`: settings are checked before the file is read (exit 2, listing the valid keys); on a
/// real file the recorded settings reproduce what it recorded, and JSON says which settings ran.
#[test]
fn whatif_checks_its_settings_and_replays_a_real_file() {
    for (set, says) in [
        (
            "foo:1",
            "unknown allocator setting \"foo\" (the replay follows: expandable_segments, \
             max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold)",
        ),
        ("max_split_size_mb:12", "at least 20"),
        ("garbage_collection_threshold:2", "between 0 and 1"),
        ("roundup_power2_divisions:[256:3]", "power of two"),
        ("expandable_segments:maybe", "takes True or False"),
        ("expandable_segments", "is not KEY:VALUE"),
    ] {
        let out = memsight(&["whatif", "--set", set]);
        assert_eq!(out.status.code(), Some(2), "{set}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{set}: {stderr}");
    }
    let Some(dir) = memsight_core::testing::fixtures_dir() else {
        memsight_core::testing::skip("corpus not found");
        return;
    };
    let file = dir.join("snapshots").join("cuda_2023_no_time.pickle");
    let out = memsight(&["whatif", file.to_str().expect("utf-8"), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let device = &report["devices"][0];
    assert_eq!(device["settings"]["expandable_segments"], false);
    // 152 segment_alloc events in the trace (Python's pickle).
    assert_eq!(device["recorded"]["segment_allocs"], 152);
    assert_eq!(device["predicted"]["segment_allocs"], 152);
    assert_eq!(
        device["recorded"]["peak_reserved_bytes"],
        device["predicted"]["peak_reserved_bytes"]
    );
    // The model follows the file event by event, and says so.
    assert_eq!(
        device["predicted"]["first_divergence_event"],
        serde_json::Value::Null
    );
    // No oom and no stall in the file: the capacity is unknown, so stalls and OOMs are not
    // predicted, and the JSON says so with null rather than a 0 it cannot know.
    assert_eq!(
        device["settings"]["capacity_bytes"],
        serde_json::Value::Null
    );
    assert_eq!(device["predicted"]["stalls"], serde_json::Value::Null);
    assert_eq!(device["recorded"]["stalls"], 0);
    assert_eq!(
        device["recorded"]["peak_fragmentation_bytes"],
        device["predicted"]["peak_fragmentation_bytes"]
    );

    // --sweep: the recorded settings and the common changes, best first: expandable segments,
    // max_split_size_mb 128 and 512, roundup_power2_divisions 4, and the recorded empty_cache()
    // calls left out (alone and with expandable segments); no garbage collection, which needs a
    // capacity. On the empty_cache NPU run, expandable segments lower the peak (the same
    // workload recorded with them: 614 MiB).
    let file = dir
        .join("snapshots")
        .join("npu_snapshot_with_empty_cache.pkl");
    let out = memsight(&["whatif", file.to_str().expect("utf-8"), "--sweep", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let tried = report["devices"].as_array().expect("one entry per setting");
    assert_eq!(tried.len(), 7);
    assert!(
        tried
            .iter()
            .all(|t| t["settings"]["garbage_collection_threshold"].is_null())
    );
    assert_eq!(tried[0]["settings"]["expandable_segments"], true);
    assert_eq!(tried[0]["predicted"]["peak_reserved_bytes"], 614u64 << 20);
    let as_recorded = tried
        .iter()
        .find(|t| {
            t["settings"]["expandable_segments"] == false && t["settings"]["skip_releases"] == false
        })
        .expect("the recorded settings are tried");
    assert_eq!(as_recorded["predicted"]["segment_allocs"], 79);
    assert_eq!(
        as_recorded["predicted"]["peak_reserved_bytes"],
        as_recorded["recorded"]["peak_reserved_bytes"]
    );
    let text = memsight(&["whatif", file.to_str().expect("utf-8"), "--sweep"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("settings (best first)"), "{text}");
}

/// Two generated runs (batch 2 and 4 of one training loop) in a Chinese folder of their own.
fn two_runs(name: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir(name).join("对比");
    std::fs::create_dir_all(&dir).expect("folder");
    let (a, b) = (dir.join("批量2.pkl"), dir.join("批量4.pkl"));
    for (path, batch) in [(&a, "2"), (&b, "4")] {
        let out = memsight(&[
            "gen",
            "--scenario",
            "transformer",
            "--events",
            "8000",
            "--seed",
            "4",
            "--batch",
            batch,
            "-o",
            path.to_str().expect("utf-8"),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (a, b)
}

/// `diff` in text, Markdown and JSON: the keys, and the deltas at peak add up to the
/// difference of the peaks.
#[test]
fn diff_compares_two_runs_in_text_markdown_and_json() {
    let (a, b) = two_runs("diff");
    let (a, b) = (a.to_str().expect("utf-8"), b.to_str().expect("utf-8"));
    let text = memsight(&["diff", a, b]);
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    let text = String::from_utf8_lossy(&text.stdout);
    for line in [
        "peak allocated",
        "peak reserved",
        "call sites by |Δ at peak|",
        "forward (model.py:",
        "activation",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    let markdown = memsight(&["diff", a, b, "--markdown", "--top", "3"]);
    let markdown = String::from_utf8_lossy(&markdown.stdout);
    assert!(markdown.starts_with("## memsight diff"), "{markdown}");
    assert!(markdown.contains("| Δ at peak | A at peak |"), "{markdown}");

    let report = stdout_json(&memsight(&["diff", a, b, "--json"]));
    assert_eq!(report["a"], a);
    let device = &report["devices"][0];
    assert_eq!(device["device_a"], 0);
    for key in [
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "peak_active_bytes",
    ] {
        assert!(device["a"][key].as_u64().is_some_and(|v| v > 0), "{key}");
    }
    let sites = device["call_sites"].as_array().expect("call sites");
    let first = &sites[0];
    for key in [
        "stack",
        "top_frame",
        "a",
        "b",
        "delta_at_peak_bytes",
        "only_in",
    ] {
        assert!(first.get(key).is_some(), "{key}");
    }
    assert!(first["stack"][0].get("filename").is_some() && first["stack"][0].get("line").is_some());
    for key in [
        "bytes_at_peak",
        "allocs",
        "bytes_requested",
        "largest_bytes",
    ] {
        assert!(first["a"][key].is_u64(), "{key}");
    }
    let delta: i64 = sites
        .iter()
        .map(|s| s["delta_at_peak_bytes"].as_i64().expect("bytes"))
        .sum();
    let peak = |side: &str| {
        device[side]["peak_allocated_bytes"]
            .as_i64()
            .expect("bytes")
    };
    assert_eq!(delta, peak("b") - peak("a"));
    assert!(delta > 0, "twice the batch, a higher peak");
    let top = stdout_json(&memsight(&["diff", a, b, "--json", "--top", "3"]));
    assert_eq!(
        top["devices"][0]["call_sites"].as_array().map(Vec::len),
        Some(3)
    );
}

/// What `diff` cannot compare says so, naming the file (exit 2); `screenshot --view diff` renders
/// the compare view and wants two snapshots.
#[test]
fn diff_refuses_what_it_cannot_compare_and_renders_the_compare_view() {
    let (a, b) = two_runs("diff-refused");
    let (a, b) = (a.to_str().expect("utf-8"), b.to_str().expect("utf-8"));
    let mut refused = vec![
        (
            vec!["diff", a, b, "--device-a", "7"],
            "no device 7 with a trace (devices with one: 0)".to_string(),
        ),
        (
            vec!["diff", a, "/nonexistent/x.pkl"],
            "/nonexistent/x.pkl".to_string(),
        ),
    ];
    let (legacy, profiler);
    if let Some(f) = memsight_core::testing::fixtures_dir() {
        legacy = f
            .join("snapshots/cuda_legacy_list.pkl")
            .to_string_lossy()
            .into_owned();
        profiler = f
            .join("profiler/rank0_level0")
            .to_string_lossy()
            .into_owned();
        refused.push((
            vec!["diff", &legacy, a],
            format!("no trace to compare: the file records only the final pool (record with torch.cuda.memory._record_memory_history() before the dump): {legacy}"),
        ));
        refused.push((
            vec!["diff", a, &profiler],
            "cannot compare a snapshot with profiler data".to_string(),
        ));
    }
    for (args, says) in &refused {
        let out = memsight(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says.as_str()), "{args:?}: {stderr}");
    }

    let png = std::path::Path::new(a).with_file_name("对比.png");
    let png = png.to_str().expect("utf-8");
    let args = [
        "screenshot",
        "--view",
        "diff",
        a,
        b,
        "-o",
        png,
        "--width",
        "1200",
        "--height",
        "800",
    ];
    let out = memsight(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(png).expect("PNG written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let be32 =
        |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    assert_eq!((be32(16), be32(20)), (1200, 800));
    let out = memsight(&["screenshot", "--view", "diff", a, "-o", png]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--view diff needs two snapshots"));
}

/// `whatif --curve`: the recorded and predicted reserved bytes per event, as CSV, in a Chinese
/// folder; under the recorded settings the two columns agree after every alloc (the replay
/// follows the file; between a `segment_alloc` and its `alloc`, and inside a run of releases,
/// the model takes one step where the file takes several); `--curve` with `--sweep` is refused.
#[test]
fn whatif_writes_the_predicted_curve() {
    let dir = temp_dir("whatif-curve").join("曲线");
    std::fs::create_dir_all(&dir).expect("folder");
    let file = dir.join("停顿.pkl");
    let out = memsight(&[
        "gen",
        "--scenario",
        "stall",
        "--events",
        "5000",
        "-o",
        file.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    let csv = dir.join("预测.csv");
    let out = memsight(&[
        "whatif",
        file.to_str().expect("utf-8"),
        "--curve",
        csv.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).expect("the CSV");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("device,event,action,recorded_reserved_bytes,predicted_reserved_bytes")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 5000);
    assert!(rows.iter().all(|r| r.len() == 5));
    let allocs: Vec<&Vec<&str>> = rows.iter().filter(|r| r[2] == "alloc").collect();
    assert!(allocs.len() > 1000, "{}", allocs.len());
    assert!(
        allocs.iter().all(|r| r[3] == r[4]),
        "{:?}",
        allocs.iter().find(|r| r[3] != r[4])
    );
    let out = memsight(&[
        "whatif",
        file.to_str().expect("utf-8"),
        "--sweep",
        "--curve",
        csv.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(dir.parent().expect("parent")).expect("clean up");
}

/// `gen` to a stream writes the snapshot there and no `.truth.json` beside it (there is no
/// beside: `/dev/stdout.truth.json` was made once); a batch no device could hold is refused
/// before anything is written, naming the bound.
#[test]
fn gen_writes_only_what_memsight_reads_where_it_was_told() {
    let dir = temp_dir("gen-stream");
    let fifo = dir.join("stream");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    // Read the FIFO on a thread while gen writes it.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).expect("read the FIFO"))
    };
    let out = memsight(&[
        "gen",
        "--scenario",
        "steady",
        "--events",
        "500",
        "-o",
        fifo.to_str().expect("utf-8"),
    ]);
    let bytes = reader.join().expect("reader");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        bytes.starts_with(&[0x80, 4]),
        "a protocol-4 pickle came through"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ground truth"));
    let names: Vec<_> = std::fs::read_dir(&dir)
        .expect("folder")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["stream"], "nothing but the FIFO");

    let big = dir.join("big.pickle");
    let out = memsight(&[
        "gen",
        "--scenario",
        "transformer",
        "--batch",
        "4294967295",
        "-o",
        big.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--batch must be from 1 to 65536"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!big.exists());
}

/// `whatif` on what it cannot replay says what the input is and names it: a snapshot without a
/// trace (generated, with every event dropped by a one-entry buffer: a state-only file) and, where
/// the corpus is present, a profiler rank folder (not "a folder with no profiler data").
#[test]
fn whatif_names_the_file_it_cannot_replay() {
    let dir = temp_dir("whatif-names");
    let empty = dir.join("空的.pickle");
    std::fs::write(
        &empty,
        // {"segments": [], "device_traces": [[]]}, protocol 4.
        b"\x80\x04\x95\x29\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94\x8c\x0edevice_traces\x94]\x94]\x94au.",
    )
    .expect("write");
    let out = memsight(&["whatif", empty.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("has a trace to replay") && err.contains("空的.pickle"),
        "{err}"
    );

    let Some(fixtures) = memsight_core::testing::fixtures_dir() else {
        memsight_core::testing::skip("whatif on profiler data: corpus not found");
        return;
    };
    let rank = fixtures.join("profiler/rank0_level0");
    let out = memsight(&["whatif", rank.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("rank0_level0 is torch_npu profiler data"),
        "{err}"
    );
}

/// A folder of a recording that cannot be opened (`device_1/` without read permission) is an
/// error naming it, exit 2, as an unreadable file is; it used to be skipped with exit 0. Root
/// reads every folder: the check runs as `nobody` (`setpriv`), where the test runs as root.
#[test]
fn an_unreadable_folder_of_a_recording_is_an_error_naming_it() {
    use std::os::unix::fs::PermissionsExt as _;
    let root_user = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    if !root_user || !setpriv {
        memsight_core::testing::skip("unreadable folder: needs root and setpriv to act as nobody");
        return;
    }
    let dir = temp_dir("unreadable");
    let _ = std::fs::remove_dir_all(&dir);
    let recording = dir.join("rec");
    let out = memsight(&[
        "gen",
        "--format",
        "memscope",
        "--devices",
        "2",
        "--events",
        "4000",
        "-o",
        recording.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut folders = vec![dir.clone()];
    let mut device_1 = None;
    while let Some(folder) = folders.pop() {
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        for entry in std::fs::read_dir(&folder).expect("folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                if path.ends_with("device_1") {
                    device_1 = Some(path.clone());
                }
                folders.push(path);
            } else {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
                    .expect("chmod");
            }
        }
    }
    let device_1 = device_1.expect("a device_1 folder");
    std::fs::set_permissions(&device_1, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_memsight"))
        .arg("stats")
        .arg(&recording)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("cannot read {}", device_1.display())),
        "{err}"
    );
    std::fs::set_permissions(&device_1, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let _ = std::fs::remove_dir_all(&dir);
}

//! Runs on the command line: a folder of snapshots, one per rank and dump, generated with known
//! truth and built from the real fixtures.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn memsight(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memsight"))
        .args(args)
        .output()
        .expect("memsight runs")
}

fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("valid JSON")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memsight-run-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

fn findings(report: &Value) -> &Vec<Value> {
    report["findings"].as_array().expect("findings")
}

/// `stats RUN --json`: one row per file (ranks × dumps), the OOM rank's last dump an exit dump
/// with its `oom`, every file read.
fn check_stats_rows(dir: &Path, truth: &Value, oom: u64, iterations: &[u64]) {
    let stats = json_of(&memsight(&["stats", text(dir), "--json"]));
    let rows = stats["files"].as_array().expect("rows");
    assert_eq!(rows.len() as u64, truth["files"].as_u64().expect("files"));
    for row in rows {
        let exit = row["exit"].as_bool().expect("exit");
        let is_oom_dump = row["rank"].as_u64() == Some(oom)
            && row["iteration"].as_u64() == iterations.last().copied();
        assert_eq!(exit, is_oom_dump, "{row}");
        assert_eq!(
            row["oom_events"].as_u64().expect("oom") > 0,
            is_oom_dump,
            "{row}"
        );
        assert!(row["error"].is_null(), "{row}");
    }
}

/// The comparison the imbalance finding suggests runs: a median rank against the heavy one, the
/// difference its extra activation.
fn check_rank_diff(dir: &Path, heavy: u64, truth: &Value) {
    let compare = memsight(&[
        "diff",
        text(dir),
        "--device-a",
        "2",
        "--device-b",
        &heavy.to_string(),
        "--json",
    ]);
    let diff = json_of(&compare);
    let delta = diff["devices"][0]["call_sites"][0]["delta_at_peak_bytes"]
        .as_i64()
        .expect("a delta");
    assert_eq!(
        delta as u64,
        truth["heavy_extra_bytes"].as_u64().expect("bytes")
    );
}

/// A generated run under a Chinese folder name: the doctor names the truth's OOM rank first, the
/// heavy rank with its call site, and the leaking rank's growth; nothing about the others.
#[test]
fn a_generated_run_s_truth_is_found() {
    let dir = temp_dir("gen").join("训练运行");
    let made = memsight(&[
        "gen",
        "--run",
        "--ranks",
        "6",
        "--iterations",
        "3",
        "-o",
        text(&dir),
    ]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let truth: Value = serde_json::from_slice(
        &std::fs::read(dir.join("memsight-run-truth.json")).expect("the truth is written"),
    )
    .expect("truth JSON");
    let rank = |key: &str| truth[key].as_u64().expect("a rank");
    let (heavy, leak, oom) = (rank("heavy_rank"), rank("leak_rank"), rank("oom_rank"));
    let iterations: Vec<u64> = truth["iterations"]
        .as_array()
        .expect("iterations")
        .iter()
        .map(|i| i.as_u64().expect("a number"))
        .collect();

    check_stats_rows(&dir, &truth, oom, &iterations);

    let report = json_of(&memsight(&["analyze", text(&dir), "--json"]));
    let all = findings(&report);
    let first = &all[0];
    assert_eq!(first["kind"], "oom");
    assert!(
        first["scope"]
            .as_str()
            .expect("scope")
            .starts_with(&format!(
                "rank {oom} at iteration {} (exit dump)",
                iterations[2]
            )),
        "{first}"
    );
    let run_level = |kind: &str| -> Vec<&Value> {
        all.iter()
            .filter(|f| {
                f["kind"] == kind && !f["evidence"].as_array().expect("evidence").is_empty()
            })
            .collect()
    };
    let imbalance = run_level("imbalance");
    assert_eq!(imbalance.len(), 1, "{imbalance:?}");
    assert!(
        imbalance[0]["title"]
            .as_str()
            .expect("title")
            .starts_with(&format!("Rank {heavy} "))
    );
    assert!(
        imbalance[0]["summary"]
            .as_str()
            .expect("summary")
            .contains(truth["heavy_site"].as_str().expect("site")),
        "{}",
        imbalance[0]
    );
    assert_eq!(
        imbalance[0]["bytes"].as_u64(),
        truth["heavy_extra_bytes"].as_u64(),
        "the heavy rank's excess is its extra activation"
    );
    let growth = run_level("leak");
    assert_eq!(growth.len(), 1, "only the leaking rank grows: {growth:?}");
    let summary = growth[0]["summary"].as_str().expect("summary");
    assert!(
        growth[0]["title"]
            .as_str()
            .expect("title")
            .starts_with(&format!("Rank {leak}'s"))
    );
    assert!(
        summary.contains(truth["leak_site"].as_str().expect("site")),
        "{summary}"
    );
    // Kept between the first dump and the last: one block per step.
    let kept =
        (iterations[2] - iterations[0]) * truth["leak_bytes_per_step"].as_u64().expect("bytes");
    let kept_words = memsight_core::units::format_bytes(kept as i64);
    assert!(
        summary.contains(&format!(
            "that were not at iteration {}: {kept_words}",
            iterations[0]
        )),
        "{summary}"
    );

    check_rank_diff(&dir, heavy, &truth);
    let _ = std::fs::remove_dir_all(dir.parent().expect("temp"));
}

#[test]
fn a_run_diff_without_both_ranks_is_refused_with_the_ranks_it_has() {
    let dir = temp_dir("refused");
    let made = memsight(&[
        "gen",
        "--run",
        "--ranks",
        "3",
        "--iterations",
        "1",
        "-o",
        text(&dir),
    ]);
    assert!(made.status.success());
    let output = memsight(&["diff", text(&dir), "--device-a", "1"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("needs --device-a and --device-b (ranks: ranks 0–2)"),
        "{stderr}"
    );
    let output = memsight(&["diff", text(&dir), "--device-a", "1", "--device-b", "9"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("has both rank 1 and rank 9"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Links `target` at `link` (a copy where links cannot be made): a run built from the fixtures
/// without copying them into the repository.
fn place(target: &Path, link: &Path) {
    std::fs::create_dir_all(link.parent().expect("a folder")).expect("folder");
    #[cfg(unix)]
    std::os::unix::fs::symlink(target, link).expect("link");
    #[cfg(not(unix))]
    std::fs::copy(target, link).expect("copy");
}

/// Eight ranks of real files: seven copies of one training step, one heavier file (the same
/// model at twice the context: 1024 tokens against 512), two iterations, and an exit dump
/// holding the file that ran out of memory. The OOM first, the heavy rank named, the seven alike
/// said once, and no growth claimed between identical dumps.
#[test]
fn a_run_of_real_files_names_the_oom_the_heavy_rank_and_groups_the_alike() {
    let Some(fixtures) = memsight_core::testing::fixtures_dir() else {
        memsight_core::testing::skip("corpus not found");
        return;
    };
    let snapshots = fixtures.join("snapshots");
    let dir = temp_dir("fixtures").join("memory_snapshot");
    for iteration in [10, 20] {
        for rank in 0..8 {
            let file = if rank == 7 {
                "cuda_medium_1024_training.pickle"
            } else {
                "cuda_medium_512_training.pickle"
            };
            place(
                &snapshots.join(file),
                &dir.join(format!(
                    "iteration_{iteration}/rank{rank}_memory_snapshot.pickle"
                )),
            );
        }
    }
    place(
        &snapshots.join("cuda_4gpu_expandable_oom.pickle"),
        &dir.join("iteration_20_exit/rank3_memory_snapshot.pickle"),
    );
    let report = json_of(&memsight(&["analyze", text(&dir), "--json"]));
    let all = findings(&report);
    assert_eq!(all[0]["kind"], "oom");
    assert_eq!(all[0]["scope"], "rank 3 at iteration 20 (exit dump)");
    let heavy: Vec<&Value> = all
        .iter()
        .filter(|f| {
            f["kind"] == "imbalance"
                && f["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("Rank 7 "))
        })
        .collect();
    assert_eq!(heavy.len(), 1, "{all:?}");
    assert_eq!(heavy[0]["scope"], "rank 7 at iterations 10 and 20");
    // Figures an auditor recomputed from the two pickles in Python (replaying the traces, blocks
    // at each file's own peak grouped by their innermost Python frame of the user's code):
    // 24,209,133,576 − 12,428,595,208 bytes at the peaks; softmax +4.500 GiB, attention
    // +2.211 GiB, forward (model.py:39) +1,157.5 MiB.
    assert_eq!(heavy[0]["bytes"], 24_209_133_576_u64 - 12_428_595_208);
    let evidence: Vec<&str> = heavy[0]["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for (site, delta) in [
        ("cs336_basics/nn_utils.py:6)", "+4.50 GiB"),
        ("cs336_basics/model.py:434)", "+2.21 GiB"),
        ("cs336_basics/model.py:39)", "+1.13 GiB"),
    ] {
        assert!(
            evidence
                .iter()
                .any(|l| l.contains(site) && l.contains(delta)),
            "{site} {delta}: {evidence:?}"
        );
    }
    let alike = all
        .iter()
        .find(|f| f["kind"] == "peak" && f["scope"] == "ranks 0–6 at iterations 10 and 20");
    assert!(alike.is_some(), "the seven copies' peak said once: {all:?}");
    assert!(
        !all.iter().any(|f| f["kind"] == "leak"
            && f["title"]
                .as_str()
                .is_some_and(|t| t.contains("grows between dumps"))),
        "identical dumps do not grow"
    );
    let _ = std::fs::remove_dir_all(dir.parent().expect("temp"));
}

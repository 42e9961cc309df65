//! A run's tab as a user meets it: a folder of snapshots (one per rank and dump, under a
//! Chinese folder name) given on the command line opens as a run tab; its findings name the
//! heavy rank; a finding's file opens in a tab of its own; "Compare with the median rank" opens
//! the compare view. At 1600×1000 and at 900×600. Run with `WGPU_BACKEND=gl` (CI pins it).

mod common;

use std::path::{Path, PathBuf};

use egui::vec2;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use memsight_core::r#gen::run::{RunGenOptions, write_run};
use memsight_ui::{MemsightApp, Source};

fn generated_run(name: &str) -> (PathBuf, memsight_core::r#gen::run::RunTruth) {
    let dir = std::env::temp_dir()
        // No process id in the name: the path is on the image snapshot.
        .join(format!("memsight-run-tab-{name}"))
        .join("八卡训练");
    let _ = std::fs::remove_dir_all(&dir);
    let truth = write_run(
        &dir,
        &RunGenOptions {
            ranks: 8,
            iterations: 3,
            events: 2_000,
            seed: 1,
        },
    )
    .expect("run written");
    (dir, truth)
}

fn harness_of(dir: &Path, width: f32, height: f32) -> Harness<'static, MemsightApp> {
    let mut harness = Harness::builder()
        .with_size(vec2(width, height))
        .with_step_dt(1.0 / 60.0)
        .with_context_setup(memsight_ui::fonts::install)
        .allow_missing_glyphs()
        .wgpu()
        .build_ui_state(
            move |ui, app: &mut MemsightApp| app.ui_root(ui),
            MemsightApp::new(
                &egui::Context::default(),
                vec![Source::Path(dir.to_path_buf())],
                None,
            ),
        );
    common::settle(&mut harness);
    harness
}

fn check_run_tab(width: f32, height: f32) {
    let (dir, truth) = generated_run(&format!("{width}"));
    let mut harness = harness_of(&dir, width, height);
    let app = harness.state();
    assert_eq!(app.runs().len(), 1, "the folder opens as a run");
    assert!(
        app.window_title().contains("八卡训练 (run)"),
        "{}",
        app.window_title()
    );
    let summaries = app.runs()[0].summaries.as_ref().expect("summarised");
    assert_eq!(summaries.len(), truth.files);
    // The doctor's verdicts are on screen: the heavy rank by name.
    let heavy_title = app.runs()[0]
        .findings
        .iter()
        .find(|f| {
            f.title
                .starts_with(&format!("Rank {} peaks", truth.heavy_rank))
        })
        .expect("the heavy rank's finding")
        .title
        .clone();
    harness.get_by_label(&heavy_title);
    let oom_title = format!("Rank {} ran out of memory", truth.oom_rank);
    harness.get_by_label(&oom_title);
    assert_eq!(
        app.export_name(memsight_ui::app::ExportTarget::Chart),
        "八卡训练-run-chart.png"
    );
    harness.snapshot(format!("run_tab_{width}x{height}"));

    // Picking the heavy rank's finding picks its file; compare it with the median rank.
    harness.get_by_label(&heavy_title).click();
    common::settle(&mut harness);
    harness.get_by_label("Compare with the median rank").click();
    common::settle(&mut harness);
    for _ in 0..200 {
        if !harness.state().compares().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        harness.step();
    }
    common::settle(&mut harness);
    let app = harness.state();
    assert_eq!(app.compares().len(), 1, "a compare tab opened");
    assert_eq!(
        app.documents().len(),
        2,
        "the median rank's file and the heavy rank's"
    );
    // Tabs of a run's files are named by their path in the run: dumps of one rank told apart.
    // (A finding's click picks its first file: the heavy rank's first dump.)
    let first = truth.iterations[0];
    let heavy_tab = format!(
        "iteration_{first}/rank{}_memory_snapshot.pickle",
        truth.heavy_rank
    );
    assert!(
        app.documents().iter().any(|d| d.name == heavy_tab),
        "{:?}",
        app.documents().iter().map(|d| &d.name).collect::<Vec<_>>()
    );
    assert!(
        app.window_title()
            .contains(&format!("rank{}_memory_snapshot", truth.heavy_rank)),
        "{}",
        app.window_title()
    );
    let _ = std::fs::remove_dir_all(dir.parent().expect("temp"));
}

#[test]
fn a_run_folder_opens_as_a_run_tab_at_1600x1000() {
    check_run_tab(1600.0, 1000.0);
}

#[test]
fn a_run_folder_opens_as_a_run_tab_at_900x600() {
    check_run_tab(900.0, 600.0);
}

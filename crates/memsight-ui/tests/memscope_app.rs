//! An msMemScope recording in the app, as an Ascend engineer uses it: the generated recording
//! opens as a tab, View colours the chart by owner, View → Memory by owner shows the owners at the
//! peak adding up to the peak, and the event list's "inefficient" box keeps the flagged blocks.
//! Run with `WGPU_BACKEND=gl` (CI pins it).

mod common;

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use memsight_core::r#gen::memscope::{MemscopeOptions, write};
use memsight_core::units::format_bytes;
use memsight_ui::MemsightApp;
use memsight_ui::document::{Document, Opened, Source};
use memsight_ui::palette::ColorBy;

/// A generated one-device recording in a Chinese folder, loaded as a tab.
fn harness(name: &str) -> (Harness<'static, MemsightApp>, std::path::PathBuf) {
    let dir = std::env::temp_dir()
        .join(format!(
            "memsight-memscope-app-{name}-{}",
            std::process::id()
        ))
        .join("记录");
    let _ = std::fs::remove_dir_all(&dir);
    write(
        &dir,
        &MemscopeOptions {
            events: 30_000,
            devices: 1,
            seed: 3,
            db: false,
        },
    )
    .expect("written");
    let source = Source::Path(dir.clone());
    let doc = match source.load(None).expect("loads") {
        Opened::Snapshot(prepared) => Document::new("记录".into(), Some(dir.clone()), *prepared),
        Opened::Profiler(_) | Opened::MemscopeCompare(_) => {
            unreachable!("a recording reads as a snapshot")
        }
    };
    (
        common::harness_of(MemsightApp::with_documents(vec![doc])),
        dir,
    )
}

#[test]
fn owners_colour_the_chart_and_their_window_adds_up_to_the_peak() {
    let (mut harness, dir) = harness("owners");
    harness.get_by_label("View").click();
    harness.run_steps(2);
    harness
        .get_by_label("owner (msMemScope: PTA@gradient …)")
        .click();
    common::settle(&mut harness);
    assert_eq!(
        harness.state().documents()[0].lifecycle.color_by,
        ColorBy::Owner
    );
    harness.key_press(egui::Key::Escape);
    common::settle(&mut harness);
    harness.get_by_label("View").click();
    harness.run_steps(2);
    harness.get_by_label("Memory by owner (msMemScope)").click();
    common::settle(&mut harness);
    harness.key_press(egui::Key::Escape);
    common::settle(&mut harness);
    assert!(harness.state().documents()[0].owners.open);
    // Docked beside the chart (issue 36: it floated over the findings and the chart).
    let chart = harness.state().layout.chart.expect("the chart is drawn");
    let panel = harness.get_by_label("Memory by owner").rect();
    assert!(
        panel.left() >= chart.right() - 1.0,
        "the panel {panel:?} lies right of the chart {chart:?}"
    );
    // Nothing selected: the table is the peak's, and its total is the peak allocated.
    let doc = &harness.state().documents()[0];
    let peak = &doc.data.loaded.replays[0].peak_allocated;
    let heading = format!(
        "{} allocated at the peak (event {}): by owner",
        format_bytes(peak.bytes),
        peak.event.expect("a peak event")
    );
    harness.get_by_label(&heading);
    for owner in [
        "PTA@ops@aten",
        "PTA@model@optimizer_state",
        "PTA@model@weight",
        "PTA@model@gradient",
    ] {
        assert!(
            harness.query_all_by_label(owner).count() >= 1,
            "{owner} is listed"
        );
    }
    std::fs::remove_dir_all(dir.parent().expect("parent")).expect("clean up");
}

#[test]
fn the_inefficient_box_keeps_the_flagged_blocks_and_the_finding_is_listed() {
    let (mut harness, dir) = harness("inefficient");
    harness.get_by_label_contains("Inefficient memory: the peak would be");
    // msMemScope's SNAPSHOT rows: the memory outside the pool, in the summary bar.
    harness.get_by_label_contains("used of 64.0 GiB, 2.50 GiB outside the pool");
    harness.get_by_label("inefficient").click();
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    assert!(doc.events.inefficient_only);
    let flagged = memsight_ui::views::event_list::inefficient_allocs(&doc.data, 0);
    let device = &doc.data.loaded.snapshot.devices[0];
    assert!(!flagged.is_empty());
    assert!(
        flagged.iter().all(|&e| device
            .block_use
            .iter()
            .any(|u| u.alloc_event == e && (u.flags != 0 || u.recorded_flags != 0))),
        "only flagged blocks"
    );
    // The list shows the first flagged alloc as its first row.
    harness.get_by_label(&flagged[0].to_string());
    std::fs::remove_dir_all(dir.parent().expect("parent")).expect("clean up");
}

#[test]
fn msmemscope_own_comparison_opens_as_a_table() {
    let dir = std::env::temp_dir()
        .join(format!("memsight-memscope-compare-{}", std::process::id()))
        .join("对比");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("folder");
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
    let mut harness = common::harness_of(MemsightApp::with_documents(Vec::new()));
    let ctx = harness.ctx.clone();
    harness.state_mut().open(&ctx, path);
    common::settle(&mut harness);
    harness.get_by_label("msMemScope comparison: memory_compare_20251203120000.csv");
    harness.get_by_label_contains("3 operators aligned by msMemScope, 2 allocate a different");
    // Largest difference first; the operator the base run lacks is marked; equal rows hidden.
    harness.get_by_label("aten._to_copy (only in compare)");
    harness.get_by_label("+3.81 MiB");
    harness.get_by_label("-1.00 KiB");
    assert_eq!(harness.query_all_by_label("aten.addmm").count(), 0);
    harness.get_by_label("only rows that differ").click();
    common::settle(&mut harness);
    harness.get_by_label("aten.addmm");
    std::fs::remove_dir_all(dir.parent().expect("parent")).expect("clean up");
}

/// Issue 36, item 9: at 900×600 with the findings panel open, Memory by owner is docked right
/// of the chart (it floated over the findings and the chart), the chart keeps half the width, and
/// long owner names scroll inside the panel instead of widening it.
#[test]
fn memory_by_owner_is_docked_beside_the_chart_in_a_small_window() {
    let (mut harness, dir) = harness("docked");
    harness.set_size(egui::vec2(900.0, 600.0));
    common::settle(&mut harness);
    harness.state_mut().show_findings = true;
    harness.state_mut().documents_mut()[0].owners.open = true;
    common::settle(&mut harness);
    let layout = harness.state().layout;
    let (window, chart) = (
        layout.window.expect("drawn"),
        layout.chart.expect("the chart is drawn"),
    );
    let findings = layout.findings.expect("the findings panel is open");
    let panel = harness.get_by_label("Memory by owner").rect();
    assert!(
        panel.left() >= chart.right() - 1.0,
        "{panel:?} beside {chart:?}"
    );
    assert!(
        chart.left() >= findings.right() - 1.0,
        "{chart:?} beside {findings:?}"
    );
    assert!(
        chart.width() >= 0.5 * window.width() - 1.0,
        "chart {chart:?} in {window:?}"
    );
    assert!(
        panel.right() <= window.right() + 1.0,
        "{panel:?} in {window:?}"
    );
    std::fs::remove_dir_all(dir.parent().expect("parent")).expect("clean up");
}

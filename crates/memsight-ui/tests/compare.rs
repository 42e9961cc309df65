//! Comparing two snapshots as a user does: open both, File → Compare with… (or the tab's
//! context menu) → the other file; the compare tab shows the summary, the call-site table and
//! both charts; a click on a row highlights that call site's blocks in both charts; Ctrl+E
//! exports the view. Run with `WGPU_BACKEND=gl` (CI pins it).

mod common;

use std::path::PathBuf;

use egui::{Key, Modifiers};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use memsight_core::r#gen::{self, GenOptions, Scenario};
use memsight_ui::MemsightApp;
use memsight_ui::app::dialogs::Backend;
use memsight_ui::document::{Document, Source};

/// The transformer loop at `batch` sequences per micro-batch, loaded as a tab named `name`.
fn document(name: &str, batch: u64) -> Document {
    let bytes = r#gen::generate(&GenOptions {
        scenario: Scenario::Transformer,
        events: 6000,
        seed: 4,
        batch,
        ..GenOptions::default()
    })
    .write_pickle(Vec::new())
    .expect("in memory");
    let source = Source::Bytes {
        name: name.into(),
        bytes: Box::leak(bytes.into_boxed_slice()),
    };
    Document::new(
        name.into(),
        None,
        source.load_snapshot(None).expect("loads"),
    )
}

fn harness() -> Harness<'static, MemsightApp> {
    let mut app = MemsightApp::with_documents(vec![
        document("batch2.pickle", 2),
        document("batch4.pickle", 4),
    ]);
    app.dialogs.backend = Backend::Builtin;
    common::harness_of(app)
}

/// Clicks the menu entry named `label` (not the tab of that name, drawn at `tab`).
fn click_menu_entry(harness: &mut Harness<'static, MemsightApp>, label: &str, tab: egui::Rect) {
    harness
        .query_all_by_label(label)
        .find(|n| n.rect() != tab)
        .expect("the menu lists the file")
        .click();
}

/// Where the tab named `label` is drawn.
fn tab_rect(harness: &Harness<'static, MemsightApp>, label: &str) -> egui::Rect {
    harness.get_by_label(label).rect()
}

#[test]
fn compare_with_from_the_file_menu_opens_a_compare_tab_whose_rows_highlight_both_charts() {
    let mut harness = harness();
    let tab = tab_rect(&harness, "batch4.pickle");
    // The first tab is shown: compare it with the second.
    harness.get_by_label("File").click();
    harness.run_steps(2);
    harness.get_by_label("Compare with…").hover();
    harness.run_steps(2);
    click_menu_entry(&mut harness, "batch4.pickle", tab);
    harness.run_steps(2);
    common::settle(&mut harness);
    let compare = &harness.state().compares()[0];
    assert_eq!(compare.name, "batch2.pickle vs batch4.pickle");
    let compared = std::sync::Arc::clone(compare.compared.as_ref().expect("compared"));
    let diff = &compared.diff;
    // Twice the batch: the peak grows, the top row is the model's forward, and it shows.
    assert!(diff.peak_allocated_delta_bytes() > 0);
    let top = diff.call_sites[0].top_frame.clone();
    assert!(top.starts_with("forward (model.py"), "{top}");
    harness.get_by_label_contains("peak allocated");
    // The same program: every call site on both sides.
    harness.get_by_label_contains("(0 only in A, 0 only in B)");
    assert_eq!(compare.highlighted(0), None);

    // A click on the top row highlights its blocks on both charts; a second click clears it.
    harness.get_by_label(&top).click();
    harness.run_steps(2);
    common::settle(&mut harness);
    let compare = &harness.state().compares()[0];
    assert_eq!(compare.selected, Some(0));
    let (a, b) = (compare.highlighted(0), compare.highlighted(1));
    assert!(
        a.is_some_and(|n| n > 0) && b.is_some_and(|n| n > 0),
        "{a:?} {b:?}"
    );
    harness.snapshot_options("compare_view_highlighted", &common::snapshot_options());
    // The same call site allocates as often in both runs (only the sizes grew).
    assert_eq!(diff.call_sites[0].a.allocs, diff.call_sites[0].b.allocs);
    harness.get_by_label(&top).click();
    harness.run_steps(2);
    assert_eq!(harness.state().compares()[0].highlighted(0), None);

    // Both charts on one byte scale, tall enough for either peak; unticked, each its own.
    let compare = &harness.state().compares()[0];
    let (a, b) = (compare.charts[0].y_range, compare.charts[1].y_range);
    assert_eq!(a, b);
    let top_bytes = a.expect("a shared scale").1;
    for side in 0..2 {
        let replay = &compare.data[side].loaded.replays[compare.device_indexes[side]];
        assert!(
            top_bytes >= replay.peak_reserved.bytes as f64,
            "{side}: {top_bytes}"
        );
    }
    harness
        .get_by_label("same byte scale on both charts")
        .click();
    harness.run_steps(2);
    common::settle(&mut harness);
    let compare = &harness.state().compares()[0];
    assert_eq!(
        (compare.charts[0].y_range, compare.charts[1].y_range),
        (None, None)
    );

    // Ctrl+E exports the compare view through the browser, named after both files.
    let dir = std::env::temp_dir().join(format!("memsight-compare-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    harness.state_mut().dialogs.last_export_dir = Some(dir.clone());
    // The picture says what it shows.
    assert_eq!(
        harness.state().export_caption(),
        "batch2.pickle vs batch4.pickle · memsight"
    );
    harness.key_press_modifiers(Modifiers::COMMAND, Key::E);
    harness.run_steps(2);
    harness.get_by_label("Save").click();
    harness.run_steps(4);
    let png: PathBuf = dir.join("batch2-vs-batch4-compare-chart.png");
    let image = image::open(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert!(
        image.width() > 1000 && image.height() > 600,
        "{}x{}",
        image.width(),
        image.height()
    );
    // Ctrl+W closes the compare tab; the files stay open.
    harness.key_press_modifiers(Modifiers::COMMAND, Key::W);
    harness.run_steps(2);
    assert!(harness.state().compares().is_empty());
    assert_eq!(harness.state().documents().len(), 2);
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn a_tabs_context_menu_compares_it_with_another_file() {
    let mut harness = harness();
    let tab = tab_rect(&harness, "batch2.pickle");
    harness.get_by_label("batch4.pickle").click_secondary();
    harness.run_steps(2);
    harness.get_by_label("Compare with…").hover();
    harness.run_steps(2);
    click_menu_entry(&mut harness, "batch2.pickle", tab);
    harness.run_steps(2);
    common::settle(&mut harness);
    let compare = &harness.state().compares()[0];
    assert_eq!(
        compare.names,
        ["batch4.pickle".to_string(), "batch2.pickle".to_string()]
    );
    // B is the smaller batch: the peak shrinks.
    let diff = &compare.compared.as_ref().expect("compared").diff;
    assert!(diff.peak_allocated_delta_bytes() < 0);
    harness.snapshot_options("compare_view", &common::snapshot_options());
}

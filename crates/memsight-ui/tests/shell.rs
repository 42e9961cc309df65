//! The app shell as a user meets it: Ctrl+O without a desktop file dialog opens memsight's own
//! browser, which opens a file; Ctrl+E exports the chart through the same browser and says where
//! the PNG went; Ctrl+W closes the tab; Escape closes floating windows; at 900×600 and 800×500
//! nothing overlaps and the chart keeps half the width; the event list's cells show whole values.
//! Run with `WGPU_BACKEND=gl` (CI pins it).

mod common;

use std::path::{Path, PathBuf};

use egui::{Key, Modifiers, Rect, vec2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use memsight_core::r#gen::{self, GenOptions, Scenario};
use memsight_ui::app::dialogs::Backend;
use memsight_ui::headless::{ScreenshotOptions, prepared_app};
use memsight_ui::{MemsightApp, Source};

fn generated(scenario: Scenario, events: usize) -> Vec<u8> {
    r#gen::generate(&GenOptions {
        scenario,
        events,
        seed: 5,
        protocol: 4,
        ..GenOptions::default()
    })
    .write_pickle(Vec::new())
    .expect("in memory")
}

fn harness_of(source: &Source, width: f32, height: f32) -> Harness<'static, MemsightApp> {
    let options = ScreenshotOptions {
        width,
        height,
        ..ScreenshotOptions::default()
    };
    let mut app = prepared_app(source, &options).unwrap_or_else(|e| panic!("{e}"));
    // As on a desktop without xdg-desktop-portal or zenity: the desktop cannot show a dialog.
    app.dialogs.backend = Backend::Builtin;
    let mut harness = Harness::builder()
        .with_size(vec2(width, height))
        .with_step_dt(1.0 / 60.0)
        .allow_missing_glyphs()
        .wgpu()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    common::settle(&mut harness);
    harness
}

/// A folder of its own under the temp dir, emptied first.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memsight-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn leak_source() -> Source {
    let bytes: &'static [u8] = Box::leak(generated(Scenario::Leak, 4000).into_boxed_slice());
    Source::Bytes {
        name: "leak.pickle".into(),
        bytes,
    }
}

#[test]
fn ctrl_o_without_a_desktop_dialog_opens_the_browser_which_opens_a_snapshot() {
    let dir = scratch("browser");
    std::fs::create_dir_all(dir.join("runs")).expect("folder");
    std::fs::write(
        dir.join("runs").join("step_3000.pickle"),
        generated(Scenario::Stall, 3000),
    )
    .expect("snapshot written");
    std::fs::write(dir.join("runs").join("notes.txt"), "not a snapshot").expect("written");
    let mut harness = harness_of(&leak_source(), 1000.0, 700.0);
    harness.state_mut().dialogs.last_dir = Some(dir.clone());

    harness.key_press_modifiers(Modifiers::COMMAND, Key::O);
    harness.run_steps(2);
    harness.get_by_label_contains("Open a memory snapshot");
    // Into the folder (a double click), then pick the snapshot and press Open.
    let folder = harness.get_by_label_contains("runs").rect().center();
    common::double_click(&mut harness, folder);
    harness.run_steps(2);
    assert!(
        harness.query_by_label_contains("notes.txt").is_none(),
        "only snapshots and profiler CSVs are listed"
    );
    harness.get_by_label_contains("step_3000.pickle").click();
    harness.run_steps(1);
    harness.get_by_label("Open").click();
    harness.run_steps(2);
    common::settle(&mut harness);
    let app = harness.state();
    assert!(!app.dialogs.is_open(), "the browser closed");
    let names: Vec<&str> = app.documents().iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["leak.pickle", "step_3000.pickle"]);
    assert_eq!(
        app.dialogs.last_dir.as_deref(),
        Some(dir.join("runs").as_path()),
        "the next dialog starts where this one ended"
    );
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn ctrl_e_exports_the_chart_as_a_png_and_says_where_it_went() {
    let dir = scratch("export");
    // A snapshot lies in the folder: the export dialog does not list it (nothing to overwrite
    // by a slip), only folders and pictures.
    std::fs::write(dir.join("step_1200.pickle"), b"not listed").expect("write");
    let mut harness = harness_of(&leak_source(), 1000.0, 700.0);
    harness.state_mut().dialogs.last_export_dir = Some(dir.clone());
    harness.key_press_modifiers(Modifiers::COMMAND, Key::E);
    harness.run_steps(2);
    // The title says what is exported; the suggested name says what it shows: the file, the
    // device, the view.
    harness.get_by_label_contains("Export the chart as PNG");
    assert!(
        harness
            .query_by_label_contains("step_1200.pickle")
            .is_none()
    );
    harness.get_by_label("Save").click();
    harness.run_steps(4);
    let png = dir.join("leak-device0-timeline.png");
    let image = image::open(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    let chart = harness.state().layout.chart.expect("the chart is drawn");
    assert_eq!(
        (image.width(), image.height()),
        (
            (chart.width() + 8.0).round() as u32,
            (chart.height() + 26.0).round() as u32
        ),
        "the chart, with the caption's band above it and a margin on the right"
    );
    let notice = harness
        .state()
        .notices
        .current()
        .iter()
        .find(|n| n.path.as_deref() == Some(png.as_path()))
        .expect("a notice names the file")
        .text
        .clone();
    harness.get_by_label_contains(&notice);
    harness.get_by_label("copy path");
    // Nothing half-written beside it.
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .expect("listed")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["leak-device0-timeline.png", "step_1200.pickle"]);
    assert_eq!(
        std::fs::read(dir.join("step_1200.pickle")).expect("still there"),
        b"not listed",
        "untouched"
    );
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn an_export_that_cannot_be_written_says_why() {
    let mut harness = harness_of(&leak_source(), 1000.0, 700.0);
    let ctx = harness.ctx.clone();
    let missing = Path::new("/nonexistent-memsight-folder/chart.png").to_path_buf();
    harness
        .state()
        .export_screenshot(&ctx, memsight_ui::ExportTarget::Chart, missing);
    harness.run_steps(3);
    let errors = harness.state().errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("/nonexistent-memsight-folder/chart.png"),
        "{errors:?}"
    );
    harness.get_by_label_contains("could not save");
}

#[test]
fn ctrl_w_closes_the_tab_and_escape_closes_the_warnings_window() {
    let mut harness = harness_of(&leak_source(), 1000.0, 700.0);
    harness.get_by_label_contains("warning").click();
    harness.run_steps(2);
    harness.get_by_label("Esc closes");
    harness.key_press(Key::Escape);
    harness.run_steps(2);
    assert!(harness.query_by_label("Esc closes").is_none());
    harness.key_press_modifiers(Modifiers::COMMAND, Key::W);
    harness.run_steps(2);
    assert!(harness.state().documents().is_empty());
    harness.get_by_label_contains("Open a memory snapshot");
}

fn assert_apart(what: (&str, Rect), other: (&str, Rect)) {
    let overlap = what.1.intersect(other.1);
    assert!(
        overlap.width() <= 1.0 || overlap.height() <= 1.0,
        "{} {:?} overlaps {} {:?}",
        what.0,
        what.1,
        other.0,
        other.1
    );
}

#[test]
fn small_windows_keep_the_chart_at_half_the_width_and_nothing_overlaps() {
    for (width, height) in [(900.0, 600.0), (800.0, 500.0)] {
        let mut harness = harness_of(&leak_source(), width, height);
        // The findings panel collapses below 1300 px; open it, and pin a block for the details.
        harness.state_mut().show_findings = true;
        let id = harness.state().documents()[0].data.loaded.replays[0]
            .lifetimes
            .len() as u32
            / 2;
        harness.state_mut().documents_mut()[0]
            .commands
            .push(memsight_ui::selection::Command::PickInPool(id));
        common::settle(&mut harness);
        let layout = harness.state().layout;
        let window = layout.window.expect("drawn");
        let chart = layout.chart.expect("the chart is drawn");
        let findings = layout.findings.expect("the findings panel is open");
        let details = layout.details.expect("the details panel is open");
        let bottom = layout.bottom.expect("the bottom area is open");
        assert!(
            chart.width() >= 0.5 * window.width(),
            "{width}×{height}: chart {} px of {} px",
            chart.width(),
            window.width()
        );
        assert!(chart.height() >= 120.0, "{width}×{height}: chart {chart:?}");
        let parts = [
            ("chart", chart),
            ("findings", findings),
            ("details", details),
            ("bottom", bottom),
        ];
        for (i, a) in parts.iter().enumerate() {
            assert!(
                window.expand(1.0).contains_rect(a.1),
                "{width}×{height}: {} {:?} outside the window",
                a.0,
                a.1
            );
            for b in &parts[i + 1..] {
                assert_apart(*a, *b);
            }
        }
        // The event list and the pool chart are tabs at this width.
        harness.get_by_label("Events");
        harness.get_by_label("Pool").click();
        harness.run_steps(2);
        harness.get_by_label_contains("Pool after event");
    }
}

#[test]
fn image_snapshot_of_the_app_at_900_by_600() {
    let mut harness = harness_of(&leak_source(), 900.0, 600.0);
    harness.state_mut().documents_mut()[0]
        .commands
        .push(memsight_ui::selection::Command::SelectEvent(Some(1500)));
    common::settle(&mut harness);
    harness.snapshot_options("leak_app_900x600", &common::snapshot_options());
}

/// The event list's default column widths fit the widest values of a 1 M-event file.
#[test]
fn event_list_cells_show_whole_values_on_a_million_events() {
    let bytes: &'static [u8] =
        Box::leak(generated(Scenario::Transformer, 1_000_000).into_boxed_slice());
    let source = Source::Bytes {
        name: "million.pickle".into(),
        bytes,
    };
    let mut harness = harness_of(&source, 1400.0, 900.0);
    let doc = &harness.state().documents()[0];
    let last = doc.data.loaded.snapshot.devices[0].trace.len() - 1;
    harness.state_mut().documents_mut()[0].commands.push(
        memsight_ui::selection::Command::SelectEvent(Some(last as u32)),
    );
    common::settle(&mut harness);
    // The last event's cells are shown whole: each label is as wide as its text, not cut.
    let doc = &harness.state().documents()[0];
    let trace = &doc.data.loaded.snapshot.devices[0].trace;
    let totals = doc.data.loaded.replays[0].totals_after(Some(last as u32));
    let texts = [
        last.to_string(),
        trace.action[last]
            .name(&doc.data.loaded.snapshot.strings)
            .to_string(),
        format!("0x{:x}", trace.addr[last]),
        memsight_core::units::format_bytes(totals.allocated_bytes),
        memsight_core::units::format_bytes(totals.reserved_bytes),
    ];
    let font = egui::TextStyle::Body.resolve(&harness.ctx.global_style());
    for text in texts {
        let full = harness.ctx.fonts_mut(|f| {
            f.layout_no_wrap(text.clone(), font.clone(), egui::Color32::BLACK)
                .size()
                .x
        });
        let shown = harness
            .query_all_by_label(&text)
            .map(|n| n.rect().width())
            .fold(0.0f32, f32::max);
        assert!(
            shown >= full - 0.5,
            "{text:?} shown {shown} px of its {full} px"
        );
    }
}

#[test]
fn file_menu_opens_a_profiler_folder_through_the_browser() {
    let Some(dir) = memsight_core::testing::fixtures_dir() else {
        return;
    };
    let mut harness = harness_of(&leak_source(), 1000.0, 700.0);
    harness.state_mut().dialogs.last_dir = Some(dir.join("profiler"));
    harness.get_by_label("File").click();
    harness.run_steps(2);
    harness.get_by_label("Open run or folder…").click();
    // The menu closes, then the browser window sizes itself over a frame or two.
    harness.run_steps(5);
    harness.get_by_label_contains("Open a run, a torch_npu profiler or an msMemScope folder");
    // A folder picker: its field says so.
    harness.get_by_label("Folder:");
    harness.get_by_label_contains("rank0_level0").click();
    harness.run_steps(1);
    harness.get_by_label("Open").click();
    harness.run_steps(2);
    common::settle(&mut harness);
    let app = harness.state();
    assert!(!app.dialogs.is_open());
    assert_eq!(app.errors(), Vec::<String>::new());
    let names: Vec<&str> = app.profilers().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].contains("rank0_level0"), "{names:?}");
}

#[test]
fn the_folder_picker_lists_folders_only() {
    let dir = scratch("folders");
    std::fs::create_dir_all(dir.join("rank3_ascend_pt")).expect("folder");
    std::fs::write(dir.join("notes.csv"), b"a,b").expect("file");
    let mut harness = harness_of(&leak_source(), 1000.0, 700.0);
    harness.state_mut().dialogs.last_dir = Some(dir.clone());
    harness.get_by_label("File").click();
    harness.run_steps(2);
    harness.get_by_label("Open run or folder…").click();
    harness.run_steps(5);
    harness.get_by_label_contains("rank3_ascend_pt");
    assert!(harness.query_by_label_contains("notes.csv").is_none());
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn no_tooltip_draws_over_an_open_file_dialog() {
    let mut harness = harness_of(&leak_source(), 1400.0, 900.0);
    harness.state_mut().show_pool = false;
    common::settle(&mut harness);
    let (id, pos) = harness.state().documents()[0]
        .lifecycle
        .find_band(3.0)
        .expect("a band tall enough to hover");
    let addr = format!(
        "0x{:x}",
        harness.state().documents()[0].data.loaded.replays[0].lifetimes[id as usize].addr
    );
    // The browser is centred: a band near the chart's left edge stays outside it.
    harness.key_press_modifiers(Modifiers::COMMAND, Key::O);
    harness.run_steps(3);
    assert!(harness.state().dialogs.builtin_is_open());
    harness.hover_at(pos);
    harness.run_steps(60);
    assert!(
        harness.query_by_label(&addr).is_none(),
        "no tooltip with a dialog open"
    );
    // Closed, the same hover shows the band's tooltip.
    harness.key_press(Key::Escape);
    harness.run_steps(2);
    harness.hover_at(pos + egui::vec2(0.0, 1.0));
    harness.run_steps(60);
    harness.get_by_label(&addr);
}

/// Ctrl+Tab / Ctrl+PgDn make the next tab active and Ctrl+Shift+Tab / Ctrl+PgUp the one before,
/// wrapping past either end: every tab is reachable without the mouse (at 900×600 most of ten
/// tabs were past the bar's right edge).
#[test]
fn ctrl_tab_and_ctrl_page_keys_move_through_the_tabs() {
    let dir = scratch("tab-keys");
    let mut harness = harness_of(&leak_source(), 900.0, 600.0);
    let ctx = harness.ctx.clone();
    for name in ["二.pickle", "three.pickle"] {
        let path = dir.join(name);
        std::fs::write(&path, generated(Scenario::Steady, 2000)).expect("write");
        harness.state_mut().open(&ctx, path);
        common::settle(&mut harness);
    }
    assert_eq!(harness.state().documents().len(), 3);
    let title = |h: &Harness<'static, MemsightApp>| h.state().window_title();
    assert!(
        title(&harness).contains("three.pickle"),
        "{}",
        title(&harness)
    );
    // Each key, and the tab it makes active: past the last the first, before the first the last.
    for (modifiers, key, tab) in [
        (Modifiers::COMMAND, Key::Tab, "leak.pickle"),
        (Modifiers::COMMAND, Key::PageDown, "二.pickle"),
        (
            Modifiers::COMMAND | Modifiers::SHIFT,
            Key::Tab,
            "leak.pickle",
        ),
        (Modifiers::COMMAND, Key::PageUp, "three.pickle"),
    ] {
        harness.key_press_modifiers(modifiers, key);
        harness.run_steps(2);
        assert!(
            title(&harness).contains(tab),
            "{key:?}: {}",
            title(&harness)
        );
    }
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// Ten tabs at 900×600: the tab bar scrolls, so the tab made active (by Ctrl+Tab or from the
/// "Tabs (10)" list) is brought into the window, never left past its right edge; the list names
/// every open tab and opens the one clicked.
#[test]
fn ten_tabs_at_900_by_600_are_each_reachable_and_shown() {
    let dir = scratch("ten-tabs");
    let mut harness = harness_of(&leak_source(), 900.0, 600.0);
    let ctx = harness.ctx.clone();
    let names: Vec<String> = (1..10)
        .map(|k| format!("训练_rank{k}_step200.pickle"))
        .collect();
    for name in &names {
        let path = dir.join(name);
        std::fs::write(&path, generated(Scenario::Steady, 1500)).expect("write");
        harness.state_mut().open(&ctx, path);
        common::settle(&mut harness);
    }
    assert_eq!(harness.state().documents().len(), 10);
    // The tab's label in the menu bar (the name may show elsewhere too), inside the window.
    let visible = |h: &Harness<'static, MemsightApp>, name: &str| {
        h.query_all_by_label(name)
            .map(|node| node.rect())
            .filter(|rect| rect.max.y < 40.0)
            .any(|rect| rect.min.x >= 0.0 && rect.max.x <= 900.0)
    };
    // The last opened is shown, and its tab is in view; Ctrl+Tab to the first and back to the
    // last brings each into view in turn.
    assert!(
        visible(&harness, &names[8]),
        "the last tab is past the edge"
    );
    harness.key_press_modifiers(Modifiers::COMMAND, Key::Tab);
    common::settle(&mut harness);
    assert!(harness.state().window_title().contains("leak.pickle"));
    assert!(
        visible(&harness, "leak.pickle"),
        "the first tab is past the edge"
    );
    harness.key_press_modifiers(Modifiers::COMMAND | Modifiers::SHIFT, Key::Tab);
    common::settle(&mut harness);
    assert!(
        visible(&harness, &names[8]),
        "the last tab is past the edge"
    );
    // The list: every tab, and a click opens it.
    let fifth = &names[4];
    let before = harness.query_all_by_label(fifth).count();
    harness.get_by_label("Tabs (10)").click();
    common::settle(&mut harness);
    let entries = harness.query_all_by_label(fifth).count();
    assert_eq!(entries, before + 1, "{fifth}: listed once more");
    // The list's entry: below the menu bar.
    harness
        .query_all_by_label(fifth)
        .find(|node| node.rect().min.y > 40.0)
        .expect("listed")
        .click();
    common::settle(&mut harness);
    assert!(
        harness.state().window_title().contains(fifth.as_str()),
        "{}",
        harness.state().window_title()
    );
    assert!(visible(&harness, fifth));
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// Issue 36, item 11: Ctrl+O gives the keyboard to the browser's File field: a path typed
/// straight away and Enter open the file, no click needed.
#[test]
fn ctrl_o_then_typing_a_path_and_enter_opens_it() {
    let dir = scratch("typed");
    let file = dir.join("typed_step.pickle");
    std::fs::write(&file, generated(Scenario::Stall, 3000)).expect("snapshot written");
    let mut harness = harness_of(&leak_source(), 1000.0, 700.0);
    harness.key_press_modifiers(Modifiers::COMMAND, Key::O);
    harness.run_steps(3);
    harness.get_by_label_contains("Open a memory snapshot");
    harness.event(egui::Event::Text(file.display().to_string()));
    harness.run_steps(1);
    harness.key_press(Key::Enter);
    harness.run_steps(2);
    common::settle(&mut harness);
    let names: Vec<&str> = harness
        .state()
        .documents()
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["leak.pickle", "typed_step.pickle"]);
    std::fs::remove_dir_all(dir).expect("clean up");
}

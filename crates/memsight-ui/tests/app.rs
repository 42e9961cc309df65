//! The app as a user drives it, through `egui_kittest`: open a snapshot, hover a band and read its
//! tooltip, click to pin it, zoom, export a PNG; plus a few small image snapshots.
//! Run with `WGPU_BACKEND=gl` for stable pixels (CI pins it).

mod common;

use common::{click_at, fixture, generated};

use std::path::PathBuf;

use egui::{Event, Modifiers, vec2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use memsight_core::r#gen::Scenario;
use memsight_ui::headless::{ScreenshotOptions, prepared_app};
use memsight_ui::palette::ColorBy;
use memsight_ui::{ExportTarget, MemsightApp, Source};

fn harness(source: &Source, options: &ScreenshotOptions) -> Harness<'static, MemsightApp> {
    let app = prepared_app(source, options).unwrap_or_else(|e| panic!("{e}"));
    let mut harness = Harness::builder()
        .with_size(vec2(options.width, options.height))
        .with_step_dt(1.0 / 60.0)
        .wgpu()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    common::settle(&mut harness);
    harness
}

fn small() -> ScreenshotOptions {
    ScreenshotOptions {
        width: 900.0,
        height: 560.0,
        ..ScreenshotOptions::default()
    }
}

#[test]
fn hovering_a_band_shows_its_allocation_and_clicking_pins_it() {
    let Some(source) = fixture("cuda_modern_compilectx.pickle") else {
        return;
    };
    let mut harness = harness(&source, &small());
    // The lifecycle chart alone, as tall as the window allows.
    harness.state_mut().show_pool = false;
    common::settle(&mut harness);
    let (id, pos) = harness.state().documents()[0]
        .lifecycle
        .find_band(6.0)
        .expect("a band tall enough to hover");
    harness.hover_at(pos);
    // Tooltips wait for the pointer to rest.
    harness.run_steps(60);
    let lifetime =
        harness.state().documents()[0].data.loaded.replays[0].lifetimes[id as usize].clone();
    // The tooltip names the address and the requested size of exactly this allocation.
    harness.get_by_label(&format!("0x{:x}", lifetime.addr));
    harness.get_by_label_contains("requested");

    click_at(&mut harness, pos);
    assert_eq!(harness.state().documents()[0].selection.lifetime, Some(id));
    // The details panel: the whole stack with a copy button.
    harness.get_by_label("Copy stack").click();
    harness.step();
    harness.get_by_label("internal frames");
}

#[test]
fn the_view_menu_colours_allocations_by_category_and_tooltips_name_it() {
    let mut harness = harness(&generated(Scenario::Transformer, 12_000), &small());
    harness.state_mut().show_pool = false;
    common::settle(&mut harness);
    harness.get_by_label("View").click();
    harness.run_steps(2);
    harness
        .get_by_label("category (parameter, gradient, activation …)")
        .click();
    common::settle(&mut harness);
    assert_eq!(
        harness.state().documents()[0].lifecycle.color_by,
        ColorBy::Category
    );
    // Close the menu, then hover a band: the tooltip names its category.
    harness.key_press(egui::Key::Escape);
    common::settle(&mut harness);
    let (id, pos) = harness.state().documents()[0]
        .lifecycle
        .find_band(6.0)
        .expect("a band tall enough to hover");
    harness.hover_at(pos);
    harness.run_steps(60);
    let category = harness.state().documents()[0].data.category(0, id);
    harness.get_by_label("category");
    harness.get_by_label(&category.words());
}

#[test]
fn image_snapshot_of_the_timeline_by_category() {
    let options = ScreenshotOptions {
        width: 640.0,
        height: 400.0,
        view: memsight_ui::View::Timeline,
        ..ScreenshotOptions::default()
    };
    let mut timeline = harness(&generated(Scenario::Transformer, 12_000), &options);
    timeline.state_mut().documents_mut()[0].lifecycle.color_by = ColorBy::Category;
    common::settle(&mut timeline);
    timeline.snapshot_options(
        "transformer_timeline_by_category",
        &common::snapshot_options(),
    );
}

#[test]
fn the_wheel_zooms_the_time_range_and_double_click_resets_it() {
    let mut harness = harness(&generated(Scenario::Steady, 20_000), &small());
    assert_eq!(harness.state().documents()[0].lifecycle.x_range, None);
    let rect = harness.state().documents()[0]
        .lifecycle
        .chart_rect()
        .expect("laid out");
    harness.hover_at(rect.center());
    harness.event(Event::MouseWheel {
        unit: egui::MouseWheelUnit::Point,
        delta: vec2(0.0, 300.0),
        modifiers: Modifiers::NONE,
        phase: egui::TouchPhase::Move,
        source: egui::MouseWheelSource::Wheel,
    });
    common::settle(&mut harness);
    let (a, b) = harness.state().documents()[0]
        .lifecycle
        .x_range
        .expect("zoomed in");
    assert!(b - a < 20_000.0 * 0.9 && a > 0.0, "visible range {a}..{b}");
    let columns = harness.state().documents()[0]
        .lifecycle
        .laid_columns()
        .expect("laid out");
    assert!(
        columns.first().and_then(|c| c.event).unwrap_or(0) > 0,
        "the layout follows the zoom"
    );

    let center = rect.center();
    common::double_click(&mut harness, center);
    common::settle(&mut harness);
    assert_eq!(
        harness.state().documents()[0].lifecycle.x_range,
        None,
        "double-click resets"
    );
}

#[test]
fn export_writes_png_files_of_the_window_and_of_the_chart() {
    let mut harness = harness(&generated(Scenario::Leak, 5000), &small());
    let dir = std::env::temp_dir().join(format!("memsight-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (window, chart) = (dir.join("window.png"), dir.join("chart.png"));
    let ctx = harness.ctx.clone();
    harness
        .state()
        .export_screenshot(&ctx, ExportTarget::Window, window.clone());
    harness.step();
    harness
        .state()
        .export_screenshot(&ctx, ExportTarget::Chart, chart.clone());
    harness.step();
    harness.step();
    let window_png = image::open(&window).expect("window PNG written");
    let chart_png = image::open(&chart).expect("chart PNG written");
    assert_eq!((window_png.width(), window_png.height()), (900, 560));
    assert!(chart_png.width() < 900 && chart_png.height() < 560 && chart_png.width() > 400);
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn a_file_without_a_trace_says_so() {
    let Some(source) = fixture("cuda_legacy_list.pkl") else {
        return;
    };
    let harness = harness(&source, &small());
    harness.get_by_label_contains("no allocation in this device's trace");
}

/// One place sets the thresholds: software rendering differs a little between Mesa versions.

#[test]
fn image_snapshot_of_the_timeline() {
    let options = ScreenshotOptions {
        width: 640.0,
        height: 400.0,
        view: memsight_ui::View::Timeline,
        ..ScreenshotOptions::default()
    };
    let mut timeline = harness(&generated(Scenario::Leak, 4000), &options);
    timeline.snapshot_options("leak_timeline", &common::snapshot_options());
}

#[test]
fn image_snapshot_of_the_app_with_a_pinned_allocation() {
    let app_view = ScreenshotOptions {
        width: 1100.0,
        height: 680.0,
        select_event: Some(1500),
        ..ScreenshotOptions::default()
    };
    let mut app = harness(&generated(Scenario::Stall, 6000), &app_view);
    // Panels settle their widths over a few frames, and the chart is laid out again for its
    // final width: the picture is taken after both.
    app.run_steps(20);
    common::settle(&mut app);
    app.snapshot_options(
        "stall_app_with_pinned_allocation",
        &common::snapshot_options(),
    );
}

#[test]
fn every_fixture_renders() {
    let Some(Source::Path(first)) = fixture("cuda_2023_no_time.pickle") else {
        return;
    };
    let dir = first.parent().expect("snapshots folder").to_path_buf();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    names.sort();
    for path in names {
        let mut harness = harness(&Source::Path(path.clone()), &small());
        let app = harness.state();
        assert!(
            app.errors().is_empty(),
            "{}: {:?}",
            path.display(),
            app.errors()
        );
        let doc = &app.documents()[0];
        let i = doc.device_index().expect("a device");
        if doc.data.loaded.snapshot.devices[i].trace.is_empty() {
            continue;
        }
        let columns = doc.lifecycle.laid_columns().expect("laid out");
        assert!(
            columns.iter().any(|c| !c.runs.is_empty()),
            "{}: bands drawn",
            path.display()
        );
        let image = harness.render().expect("renders");
        assert_eq!((image.width(), image.height()), (900, 560));
    }
}

#[test]
fn a_file_that_fails_shows_its_error_and_the_others_stay_open() {
    let dir = std::env::temp_dir().join(format!("memsight-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("truncated.pickle");
    std::fs::write(&bad, b"\x80\x04}\x94(\x8c\x08segm").expect("write");
    let good = generated(Scenario::Steady, 3000);
    let ctx = egui::Context::default();
    let app = MemsightApp::new(&ctx, vec![good, Source::Path(bad.clone())], None);
    let mut harness = Harness::builder()
        .with_size(vec2(900.0, 560.0))
        .with_step_dt(1.0 / 60.0)
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    common::settle(&mut harness);
    let app = harness.state();
    assert_eq!(app.documents().len(), 1, "the good file is open");
    assert_eq!(app.errors().len(), 1);
    let error = &app.errors()[0];
    assert!(
        error.contains("truncated") && error.contains(&bad.display().to_string()),
        "{error}"
    );
    harness.get_by_label(error);
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn the_pool_chart_follows_segment_allocs_and_a_block_click_shows_its_band() {
    let Some(source) = fixture("npu_snapshot_with_empty_cache.pkl") else {
        return;
    };
    let options = ScreenshotOptions {
        width: 1100.0,
        height: 800.0,
        ..ScreenshotOptions::default()
    };
    let mut harness = harness(&source, &options);
    // At 1100 px the event list and the pool chart share the bottom area as tabs.
    harness.get_by_label("Pool").click();
    harness.run_steps(2);
    // With nothing selected, "<" goes to the last segment_alloc of the trace.
    harness.get_by_label("< segment_alloc").click();
    harness.run_steps(3);
    let doc = &harness.state().documents()[0];
    let trace = &doc.data.loaded.snapshot.devices[0].trace;
    let last_alloc = (0..trace.len())
        .rev()
        .find(|&i| trace.action[i] == memsight_core::model::Action::SegmentAlloc)
        .map(|i| i as u32);
    assert_eq!(doc.selection.event, last_alloc);
    harness.state_mut().documents_mut()[0]
        .commands
        .push(memsight_ui::selection::Command::SelectEvent(None));
    harness.run_steps(2);
    // segment_alloc events of the trace, read with Python's pickle: 0 (44040192 bytes at
    // 20617048883200), 8 (at 20617099214848), 12.
    harness.get_by_label("segment_alloc >").click();
    harness.run_steps(3);
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.selection.event, Some(0));
    let pool = doc.pool.pool().expect("a pool is shown");
    assert!(
        pool.segments
            .iter()
            .any(|s| s.address == 20_617_048_883_200 && s.total_size_bytes == 44_040_192)
    );
    harness.get_by_label_contains("Pool after event 0 (segment_alloc)");
    harness.get_by_label("segment_alloc >").click();
    harness.run_steps(3);
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.selection.event, Some(8));
    let pool = doc.pool.pool().expect("shown");
    assert!(
        pool.segments
            .iter()
            .any(|s| s.address == 20_617_099_214_848)
    );
    // The segment just allocated is highlighted and scrolled into the visible rows.
    let (segment, visible) = doc
        .pool
        .highlighted_segment()
        .expect("the new segment is highlighted");
    assert!(
        visible.contains_rect(segment),
        "{segment:?} is inside the visible rows {visible:?}"
    );

    // Click a block: its allocation is pinned and the lifecycle chart brings it into view.
    let (rect, id) = doc
        .pool
        .block_rect(None)
        .expect("a live block wide enough to click");
    click_at(&mut harness, rect.center());
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.selection.lifetime, Some(id));
    let lifetime = &doc.data.loaded.replays[0].lifetimes[id as usize];
    if let Some(alloc) = lifetime.alloc_event {
        // Zoomed to the allocation, or showing the whole trace when it spans all of it.
        let (a, b) = doc.lifecycle.x_range.unwrap_or((0.0, f64::MAX));
        assert!(
            a <= f64::from(alloc) && f64::from(alloc) <= b,
            "{a}..{b} shows event {alloc}"
        );
    }
    harness.get_by_label("Copy stack");
}

#[test]
fn ctrl_drag_selects_a_range_and_the_panel_reports_what_it_left_behind() {
    let mut harness = harness(&generated(Scenario::Leak, 8000), &small());
    harness.state_mut().show_pool = false;
    common::settle(&mut harness);
    let rect = harness.state().documents()[0]
        .lifecycle
        .chart_rect()
        .expect("laid out");
    let (from, to) = (
        egui::pos2(rect.left() + rect.width() * 0.2, rect.center().y),
        egui::pos2(rect.left() + rect.width() * 0.7, rect.center().y),
    );
    common::ctrl_drag(&mut harness, from, to);
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    let (first, last) = doc.selection.range.expect("a range is selected");
    assert!(first > 0 && last > first && last < 8000, "{first}..{last}");
    assert_eq!(
        doc.lifecycle.x_range, None,
        "a range selection does not pan or zoom"
    );
    let report = memsight_core::range::RangeReport::new(&doc.data.loaded.replays[0], first, last);
    assert!(
        !report.unreleased.is_empty(),
        "the leak leaves blocks behind"
    );
    harness.get_by_label_contains(&format!(
        "{} blocks allocated here and not freed by its end",
        report.unreleased.len()
    ));
    // What they are for: the leaked blocks are made in the forward pass and kept.
    harness.get_by_label_contains("left behind by category: ");
    harness.get_by_label("dim every other band").click();
    harness.run_steps(2);
    assert!(harness.state().documents()[0].range.dim_others);
}

#[test]
fn clicking_a_segment_alloc_row_shows_that_segment() {
    let Some(source) = fixture("npu_snapshot_with_empty_cache.pkl") else {
        return;
    };
    let options = ScreenshotOptions {
        width: 1300.0,
        height: 900.0,
        ..ScreenshotOptions::default()
    };
    let mut harness = harness(&source, &options);
    harness.state_mut().documents_mut()[0].events.filter =
        Some(memsight_core::model::Action::SegmentAlloc);
    harness.run_steps(2);
    // The second segment_alloc of the trace is event 8, at 20617099214848 = 0x12c04ae00000
    // (read with Python's pickle).
    harness.get_by_label("0x12c04ae00000").click();
    harness.run_steps(3);
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.selection.event, Some(8));
    let pool = doc.pool.pool().expect("a pool is shown");
    assert!(
        pool.segments
            .iter()
            .any(|s| s.address == 20_617_099_214_848)
    );
    // ↓ steps to the next event and the pool follows.
    harness.key_press(egui::Key::ArrowDown);
    harness.run_steps(2);
    assert_eq!(harness.state().documents()[0].selection.event, Some(9));
    harness.get_by_label_contains("Pool after event 9");
}

#[test]
fn clicking_a_finding_puts_its_evidence_on_screen() {
    // The torch_npu leak demo: 40 MiB left behind at memory_leaks_demo.py:11 in each of its three
    // iterations (events 1, 2949, 5565), and three empty_cache() bursts (2934–2947, 5544–5563,
    // 8160–8179, read with Python's pickle).
    let Some(source) = fixture("npu_snapshot_with_empty_cache.pkl") else {
        return;
    };
    let mut harness = harness(
        &source,
        &ScreenshotOptions {
            width: 1400.0,
            height: 860.0,
            ..ScreenshotOptions::default()
        },
    );
    // Leak, empty_cache note, the peak (62 MiB above the allocated peak, 9 % of reserved, is the
    // cache's normal overhead: no fragmentation note).
    harness.get_by_label("Findings (3)");
    // Where each finding is, said as `analyze` says it: the peak is one event.
    harness.get_by_label_contains("device 0 · events 1–5565");
    harness.get_by_label_contains("device 0 · event 7498");
    harness
        .get_by_label("Leak: 40.0 MiB per iteration from one call site")
        .click();
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.selection.range, Some((1, 5565)));
    let pinned = doc
        .selection
        .lifetime
        .expect("the first leaked block is pinned");
    assert_eq!(
        doc.data.loaded.replays[0].lifetimes[pinned as usize].alloc_event,
        Some(1)
    );
    let (x0, x1) = doc
        .lifecycle
        .x_range
        .expect("the chart zoomed to the evidence");
    assert!(x0 <= 1.0 && (5565.0..8179.0).contains(&x1), "{x0}..{x1}");
    // The finding opens with its explanation; the range panel reports on its events.
    harness.get_by_label_contains("were still alive 2 iterations later or never freed");
    harness.get_by_label("events 1 – 5565");

    // The three empty_cache() calls are one note, not stalls; it shows the pool after the first.
    harness
        .get_by_label("empty_cache() called: 3 times")
        .click();
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    let calls = doc
        .data
        .findings
        .iter()
        .find(|f| f.kind == memsight_core::detect::FindingKind::EmptyCache)
        .expect("the note")
        .events;
    assert!(calls.0 < calls.1, "{calls:?}");
    assert_eq!(
        doc.selection.range,
        Some(calls),
        "the calls' range opens (issue 36: the note opened none)"
    );
    assert_eq!(
        doc.selection.event,
        Some(2947),
        "the pool after the first call"
    );
    harness.get_by_label_contains("Pool after event 2947");
    harness.get_by_label_contains("while no request was waiting");
}

/// Files opened together load side by side and finish in any order; their tabs keep the order
/// they were given in (a large file first finishes last, its tab stays first).
#[test]
fn tabs_keep_the_order_the_files_were_given_in() {
    let big = generated(Scenario::Steady, 200_000);
    let small = (1..=3).map(|_| generated(Scenario::Leak, 2000));
    let sources: Vec<Source> = std::iter::once(big).chain(small).collect();
    let ctx = egui::Context::default();
    let app = MemsightApp::new(&ctx, sources, None);
    let mut harness = Harness::builder()
        .with_size(vec2(900.0, 560.0))
        .with_step_dt(1.0 / 60.0)
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(2);
    while harness.state().documents().len() < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        harness.step();
    }
    let names: Vec<&str> = harness
        .state()
        .documents()
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(names[0], "steady.pickle", "{names:?}");
}

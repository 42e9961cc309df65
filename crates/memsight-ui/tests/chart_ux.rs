//! The chart and the pool as a memory expert uses them (issue 22): the legend, segment stepping
//! on expandable segments, which segment the pool follows, the chart following the event list,
//! honest zoom, search hits, the Help menu, the OOM device, the window's title, room for the
//! chart in small windows, the block table, the segment timeline, the fragmentation track, the
//! export at a size, the demo's way to one's own file, step shading, What-if answers scrolled
//! into view, stack lines wrapped in the details panel, the dividers' colour.
//! Run with `WGPU_BACKEND=gl` (CI pins it).

mod common;

use common::{click_at, fixture, generated};

use egui::{Event, Modifiers, PointerButton, Pos2, vec2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use memsight_core::r#gen::{self, Scenario};
use memsight_core::model::Action;
use memsight_ui::headless::{ScreenshotOptions, prepared_app};
use memsight_ui::selection::Command;
use memsight_ui::{MemsightApp, Source};

fn harness(source: &Source, width: f32, height: f32) -> Harness<'static, MemsightApp> {
    let options = ScreenshotOptions {
        width,
        height,
        ..ScreenshotOptions::default()
    };
    let app = prepared_app(source, &options).unwrap_or_else(|e| panic!("{e}"));
    // The fonts the window installs (the file browser's icons among them).
    let mut harness = Harness::builder()
        .with_size(vec2(width, height))
        .with_step_dt(1.0 / 60.0)
        .with_context_setup(memsight_ui::fonts::install)
        .wgpu()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    common::settle(&mut harness);
    harness
}

#[test]
fn the_legend_names_file_and_line_and_a_click_highlights_a_call_site_without_pinning() {
    let mut harness = harness(&generated(Scenario::Transformer, 20_000), 1400.0, 900.0);
    let doc = &harness.state().documents()[0];
    let drawn = doc.lifecycle.legend_drawn().to_vec();
    assert!(drawn.len() >= 3, "a header and rows: {drawn:?}");
    // Every row names a function and a file:line, no folder: "forward (model.py:61)  10 %".
    for (_, text) in &drawn[1..] {
        assert!(!text.contains('/'), "{text}");
        assert!(text.ends_with('%'), "{text}");
    }
    // Rows read differently (sites with one headline are told apart).
    let mut texts: Vec<&str> = drawn[1..]
        .iter()
        .map(|(_, t)| t.rsplit_once("  ").map_or(t.as_str(), |(name, _)| name))
        .collect();
    texts.sort_unstable();
    let before = texts.len();
    texts.dedup();
    assert_eq!(texts.len(), before, "{drawn:?}");

    // A click on a row highlights its call site; it does not fall through to the chart.
    click_at(&mut harness, drawn[1].0.center());
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    assert!(doc.lifecycle.legend_highlight.is_some());
    assert_eq!(
        doc.selection.lifetime, None,
        "nothing pinned under the legend"
    );
    assert_eq!(
        doc.selection.event, None,
        "no event picked under the legend"
    );
    // A second click clears it; the header folds the legend to one button.
    click_at(&mut harness, drawn[1].0.center());
    common::settle(&mut harness);
    assert!(
        harness.state().documents()[0]
            .lifecycle
            .legend_highlight
            .is_none()
    );
    click_at(&mut harness, drawn[0].0.center());
    common::settle(&mut harness);
    let legend = harness.state().documents()[0]
        .lifecycle
        .legend_drawn()
        .to_vec();
    assert_eq!(legend.len(), 1, "folded to its header: {legend:?}");
}

#[test]
fn a_small_chart_starts_with_its_legend_folded() {
    let harness = harness(&generated(Scenario::Transformer, 20_000), 800.0, 500.0);
    let doc = &harness.state().documents()[0];
    assert_eq!(
        doc.lifecycle.legend_drawn().len(),
        1,
        "at 800×500 the legend would cover much of the chart: one button"
    );
}

#[test]
fn segment_map_stepping_on_an_expandable_npu_file_outlines_the_range_mapped() {
    let Some(source) = fixture("npu_snapshot_expandable.pkl") else {
        return;
    };
    let mut harness = harness(&source, 1400.0, 900.0);
    // The file's segment_map events, read from the trace: the first maps 40 MiB at its start.
    let data = std::sync::Arc::clone(&harness.state().documents()[0].data);
    let trace = &data.loaded.snapshot.devices[0].trace;
    let maps: Vec<u32> = (0..trace.len())
        .filter(|&i| trace.action[i] == Action::SegmentMap)
        .map(|i| i as u32)
        .collect();
    assert_eq!(maps.len(), 45, "read with Python's pickle: 45 segment_map");
    // Two steps: the second map (event 8) maps 20 MiB into a segment that is larger by then.
    harness.get_by_label("segment_map >").click();
    harness.run_steps(3);
    harness.get_by_label("segment_map >").click();
    harness.run_steps(3);
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.selection.event, Some(maps[1]));
    harness.get_by_label_contains(&format!("Pool after event {} (segment_map)", maps[1]));
    let (outlined, visible) = doc
        .pool
        .highlighted_segment()
        .expect("the mapped range is outlined");
    assert!(
        visible.contains_rect(outlined),
        "in view: {outlined:?} {visible:?}"
    );
    let event = maps[1] as usize;
    let (addr, size) = (trace.addr[event], trace.size_bytes[event]);
    let pool = doc.pool.pool().expect("shown");
    let segment = pool
        .segments
        .iter()
        .find(|s| (s.address..s.address + s.total_size_bytes).contains(&addr))
        .expect("the mapped range lies in a segment");
    if segment.total_size_bytes > size {
        // Narrower than the whole row: only the pages just mapped.
        let row = doc.pool.block_rect(None).map(|(r, _)| r.height());
        assert!(row.is_some_and(|h| (outlined.height() - h).abs() < 1.0));
        let share = size as f32 / segment.total_size_bytes as f32;
        let full = outlined.width() / share;
        assert!(
            full > outlined.width() * 1.2,
            "{outlined:?} is a part of its segment"
        );
    }
    // Stepping back lands on the first map.
    harness.get_by_label("< segment_map").click();
    harness.run_steps(3);
    assert_eq!(
        harness.state().documents()[0].selection.event,
        Some(maps[0])
    );
}

#[test]
fn a_segment_alloc_stepped_to_is_shown_even_with_a_block_pinned() {
    let mut harness = harness(&generated(Scenario::Fragmentation, 8000), 1400.0, 900.0);
    let doc = &harness.state().documents()[0];
    let trace = &doc.data.loaded.snapshot.devices[0].trace;
    let allocs: Vec<u32> = (0..trace.len())
        .filter(|&i| trace.action[i] == Action::SegmentAlloc)
        .map(|i| i as u32)
        .collect();
    assert!(allocs.len() >= 4, "{}", allocs.len());
    // Pin a block of the first segment, then step to a later segment_alloc.
    harness.state_mut().documents_mut()[0]
        .commands
        .push(Command::SelectEvent(Some(allocs[0] + 1)));
    common::settle(&mut harness);
    let (rect, pinned) = harness.state().documents()[0]
        .pool
        .block_rect(None)
        .expect("a block to pin");
    click_at(&mut harness, rect.center());
    common::settle(&mut harness);
    assert_eq!(
        harness.state().documents()[0].selection.lifetime,
        Some(pinned)
    );
    let target = *allocs.last().expect("several");
    harness.state_mut().documents_mut()[0]
        .commands
        .push(Command::SelectEvent(Some(target - 1)));
    common::settle(&mut harness);
    harness.get_by_label("segment_alloc >").click();
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.selection.event, Some(target));
    assert_eq!(doc.selection.lifetime, Some(pinned), "still pinned");
    // The new segment, not the pinned block's, is outlined and in view.
    let addr = doc.data.loaded.snapshot.devices[0].trace.addr[target as usize];
    let (outlined, visible) = doc.pool.highlighted_segment().expect("outlined");
    assert!(
        visible.contains_rect(outlined),
        "{outlined:?} in {visible:?}"
    );
    let pool = doc.pool.pool().expect("shown");
    assert!(pool.segments.iter().any(|s| s.address == addr));
}

#[test]
fn the_chart_pans_to_an_event_picked_in_the_list() {
    let mut harness = harness(&generated(Scenario::Leak, 8000), 1400.0, 900.0);
    harness.state_mut().documents_mut()[0].lifecycle.x_range = Some((100.0, 1100.0));
    common::settle(&mut harness);
    harness.state_mut().documents_mut()[0]
        .commands
        .push(Command::SelectEvent(Some(6000)));
    common::settle(&mut harness);
    let (a, b) = harness.state().documents()[0]
        .lifecycle
        .x_range
        .expect("still zoomed");
    assert!(a <= 6000.0 && 6000.0 <= b, "{a}..{b} shows event 6000");
    assert!((b - a - 1000.0).abs() < 1.0, "the zoom is kept: {a}..{b}");
}

/// Shift+drag from `from` to `to`: the pointer jumps 40 px in the first frame (the drag is
/// recognised there), then moves on in ten steps.
fn shift_drag(harness: &mut Harness<'static, MemsightApp>, from: Pos2, to: Pos2) {
    harness.event(Event::PointerMoved(from));
    harness.event(Event::PointerButton {
        pos: from,
        button: PointerButton::Primary,
        pressed: true,
        modifiers: Modifiers::SHIFT,
    });
    harness.step();
    let jump = from + (to - from).normalized() * 40.0;
    harness.event_modifiers(Event::PointerMoved(jump), Modifiers::SHIFT);
    harness.step();
    for k in 1..=10 {
        harness.event_modifiers(
            Event::PointerMoved(jump + (to - jump) * (k as f32 / 10.0)),
            Modifiers::SHIFT,
        );
        harness.step();
    }
    harness.event(Event::PointerButton {
        pos: to,
        button: PointerButton::Primary,
        pressed: false,
        modifiers: Modifiers::SHIFT,
    });
    harness.step();
}

#[test]
fn a_box_zoom_starts_where_the_button_went_down_and_a_flat_box_zooms_time_only() {
    let mut harness = harness(&generated(Scenario::Leak, 8000), 1400.0, 900.0);
    harness.state_mut().show_pool = false;
    common::settle(&mut harness);
    let rect = harness.state().documents()[0]
        .lifecycle
        .chart_rect()
        .expect("laid out");
    let x_at = |px: f32| f64::from((px - rect.left()) / rect.width()) * 8000.0;
    // Flat: 4 px tall.
    let (from, to) = (
        egui::pos2(rect.left() + rect.width() * 0.3, rect.center().y),
        egui::pos2(rect.left() + rect.width() * 0.6, rect.center().y + 4.0),
    );
    shift_drag(&mut harness, from, to);
    common::settle(&mut harness);
    let lifecycle = &harness.state().documents()[0].lifecycle;
    let (a, b) = lifecycle.x_range.expect("zoomed");
    assert!(
        (a - x_at(from.x)).abs() < 30.0,
        "starts at the press: {a} vs {}",
        x_at(from.x)
    );
    assert!((b - x_at(to.x)).abs() < 30.0, "{b} vs {}", x_at(to.x));
    assert_eq!(lifecycle.y_range, None, "a flat box zooms time only");
    // Tall: bytes too.
    harness.key_press(egui::Key::Home);
    common::double_click(&mut harness, rect.center());
    common::settle(&mut harness);
    let (from, to) = (
        egui::pos2(
            rect.left() + rect.width() * 0.3,
            rect.top() + rect.height() * 0.3,
        ),
        egui::pos2(
            rect.left() + rect.width() * 0.6,
            rect.top() + rect.height() * 0.7,
        ),
    );
    shift_drag(&mut harness, from, to);
    common::settle(&mut harness);
    assert!(harness.state().documents()[0].lifecycle.y_range.is_some());
}

#[test]
fn a_search_counts_its_matches_goes_to_the_first_and_marks_the_chart() {
    let mut harness = harness(&generated(Scenario::Leak, 8000), 1400.0, 900.0);
    // The generator's leak comes from metrics.py; which events mention it, read from the stacks.
    let doc = &harness.state().documents()[0];
    let s = &doc.data.loaded.snapshot;
    let trace = &s.devices[0].trace;
    let expected: Vec<u32> = (0..trace.len())
        .filter(|&i| {
            s.stack_frames(trace.stack[i])
                .any(|f| s.str(f.filename).contains("metrics.py"))
        })
        .map(|i| i as u32)
        .collect();
    assert!(!expected.is_empty());
    harness.state_mut().documents_mut()[0].events.search = "metrics.py".to_string();
    common::settle(&mut harness);
    harness.get_by_label(&format!("{} matches", expected.len()));
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.selection.event, Some(expected[0]), "the first match");
    assert_eq!(
        doc.lifecycle.search_hits.as_deref(),
        Some(&expected),
        "marked on the chart"
    );
}

#[test]
fn files_without_times_show_no_time_column() {
    let Some(source) = fixture("npu_snapshot_with_empty_cache.pkl") else {
        return;
    };
    let harness = harness(&source, 1400.0, 900.0);
    assert!(harness.query_by_label("time (s)").is_none());
    harness.get_by_label("address");
    // A file with times keeps it.
    let harness = self::harness(&generated(Scenario::Leak, 4000), 1400.0, 900.0);
    harness.get_by_label("time (s)");
}

#[test]
fn help_lists_the_keys() {
    let mut harness = harness(&generated(Scenario::Leak, 4000), 1400.0, 900.0);
    harness.get_by_label("Help").click();
    harness.run_steps(2);
    harness.get_by_label("Keys and mouse").hover();
    harness.run_steps(3);
    harness.get_by_label("Shift+wheel");
    harness.get_by_label("zoom time and bytes together");
}

#[test]
fn the_app_opens_on_the_device_that_ran_out_of_memory_and_marks_it() {
    // Two devices with the same trace; only device 1's ends in an OOM (device 0's OOM entry is
    // turned into an annotation). The busiest-device rule alone would pick device 0.
    let (_, loaded) = r#gen::generate_loaded(Scenario::Oom, 6000, 3);
    let mut snapshot = loaded.snapshot;
    let mut calm = snapshot.devices[0].clone();
    assert!(
        calm.trace.action.contains(&Action::Oom),
        "the scenario ends in an OOM"
    );
    for a in &mut calm.trace.action {
        if *a == Action::Oom {
            *a = Action::Annotate;
        }
    }
    calm.trace.oom_device_free_bytes.clear();
    snapshot.devices[0].ordinal = 1;
    calm.ordinal = 0;
    snapshot.devices.insert(0, calm);
    let prepared = memsight_ui::prepared::Prepared::new(memsight_core::Loaded::new(snapshot));
    let doc = memsight_ui::document::Document::new("two.pickle".into(), None, prepared);
    assert_eq!(doc.device, 1);
    let app = MemsightApp::with_documents(vec![doc]);
    let mut harness = Harness::builder()
        .with_size(vec2(1400.0, 900.0))
        .with_step_dt(1.0 / 60.0)
        .wgpu()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    common::settle(&mut harness);
    harness.get_by_value("1 (OOM)");
    assert_eq!(
        harness.state().window_title(),
        "memsight — two.pickle (device 1)"
    );
}

#[test]
fn small_windows_keep_half_the_height_for_the_chart_and_what_if_sits_beside_it() {
    for (width, height) in [(1400.0, 900.0), (900.0, 600.0), (800.0, 500.0)] {
        let mut harness = harness(&generated(Scenario::Stall, 8000), width, height);
        let layout = harness.state().layout;
        let (window, chart) = (layout.window.expect("drawn"), layout.chart.expect("drawn"));
        assert!(
            chart.height() >= 0.5 * height && window.contains_rect(chart),
            "{width}×{height}: the chart is {} px tall",
            chart.height()
        );
        // The What-if panel opens beside the chart, never over it.
        harness.state_mut().documents_mut()[0].whatif.open = true;
        common::settle(&mut harness);
        let layout = harness.state().layout;
        let (chart, whatif) = (layout.chart.expect("drawn"), layout.whatif.expect("open"));
        assert!(
            chart.right() <= whatif.left() + 1.0,
            "{width}×{height}: chart {chart:?}, What if {whatif:?}"
        );
        assert!(
            chart.width() >= 0.5 * width - 1.0,
            "{width}×{height}: {chart:?}"
        );
    }
}

/// In a small window the What-if panel scrolls, and the answer to a click is brought into view:
/// the replay's table when it lands, the sweep's ranking (its first "use" button) when that does.
#[test]
fn what_if_answers_scroll_into_view_in_a_small_window() {
    let mut harness = harness(&generated(Scenario::Stall, 8000), 800.0, 500.0);
    harness.state_mut().documents_mut()[0].whatif.open = true;
    common::settle(&mut harness);
    let panel = harness.state().layout.whatif.expect("open");
    let visible = |rect: egui::Rect| rect.top() >= panel.top() && rect.bottom() <= panel.bottom();
    let predicted = harness.get_by_label("predicted").rect();
    assert!(
        visible(predicted),
        "the table's head {predicted:?} in {panel:?}"
    );
    // The button lies below the fold here: the user scrolls down to it.
    harness.hover_at(panel.center());
    for _ in 0..20 {
        if visible(harness.get_by_label("Try the common settings").rect()) {
            break;
        }
        harness.event(Event::MouseWheel {
            unit: egui::MouseWheelUnit::Point,
            delta: vec2(0.0, -40.0),
            modifiers: Modifiers::NONE,
            phase: egui::TouchPhase::Move,
            source: egui::MouseWheelSource::Wheel,
        });
        harness.step();
    }
    // Let the smooth scroll come to rest before clicking.
    harness.run_steps(90);
    let button = harness.get_by_label("Try the common settings").rect();
    assert!(visible(button), "scrolled to {button:?}");
    harness.get_by_label("Try the common settings").click();
    harness.run_steps(2);
    common::settle(&mut harness);
    let first_use = harness
        .query_all_by_label("use")
        .next()
        .expect("a use button per row")
        .rect();
    assert!(
        visible(first_use),
        "the first \"use\" {first_use:?} in {panel:?}"
    );
}

#[test]
fn the_block_table_lists_the_live_blocks_sorts_filters_and_pins() {
    // Below 1300 px the bottom area shows one part at a time: the table gets the whole width.
    let mut harness = harness(&generated(Scenario::Leak, 8000), 1200.0, 900.0);
    harness.state_mut().documents_mut()[0]
        .commands
        .push(Command::SelectEvent(Some(5000)));
    common::settle(&mut harness);
    harness.get_by_label("Blocks").click();
    common::settle(&mut harness);
    // The blocks live after event 5000, read from the lifetimes (not from the pool replay the
    // table uses): allocated at or before it, not freed by it.
    let doc = &harness.state().documents()[0];
    let lifetimes = &doc.data.loaded.replays[0].lifetimes;
    let mut expected: Vec<u32> = (0..lifetimes.len() as u32)
        .filter(|&id| {
            let l = &lifetimes[id as usize];
            l.alloc_event.is_none_or(|a| a <= 5000)
                && l.free_completed_event.is_none_or(|f| f > 5000)
        })
        .collect();
    expected.sort_unstable();
    let rows = doc.blocks.shown_rows().to_vec();
    let mut shown: Vec<u32> = rows.iter().map(|r| r.lifetime).collect();
    shown.sort_unstable();
    assert_eq!(shown, expected);
    harness.get_by_label_contains(&format!("{} blocks", expected.len()));
    // Largest first.
    assert!(rows.windows(2).all(|w| w[0].size_bytes >= w[1].size_bytes));
    // A click on "size" sorts the other way.
    harness.get_by_label("size (down)").click();
    common::settle(&mut harness);
    let rows = harness.state().documents()[0].blocks.shown_rows().to_vec();
    assert!(rows.windows(2).all(|w| w[0].size_bytes <= w[1].size_bytes));
    // The leak's call site (metrics.py) as a filter: only its blocks.
    harness.state_mut().documents_mut()[0].blocks.filter = "metrics.py".into();
    common::settle(&mut harness);
    let rows = harness.state().documents()[0].blocks.shown_rows().to_vec();
    assert!(!rows.is_empty() && rows.len() < expected.len());
    assert!(rows.iter().all(|r| r.call_site.contains("metrics.py")));
    // A click on a row pins its block.
    let first = rows[0].clone();
    let label = format!("0x{:x}", first.address);
    harness.get_by_label(&label).click();
    common::settle(&mut harness);
    assert_eq!(
        harness.state().documents()[0].selection.lifetime,
        Some(first.lifetime)
    );
}

#[test]
fn the_fragmentation_track_shows_unused_reserved_and_the_largest_free_block() {
    let harness = harness(&generated(Scenario::Fragmentation, 8000), 1400.0, 900.0);
    let doc = &harness.state().documents()[0];
    let track = doc.lifecycle.fragmentation().expect("laid out").to_vec();
    let chart = doc.lifecycle.chart_rect().expect("drawn");
    assert_eq!(track.len(), chart.width() as usize, "one value per column");
    // Where sampled, the largest free block fits in what is free: reserved − allocated over
    // the column's events is at least its largest free block (at the column's last state).
    let sampled: Vec<(u64, u64)> = track
        .iter()
        .filter_map(|&(unused, largest)| largest.map(|l| (unused, l)))
        .collect();
    assert!(sampled.len() >= 100, "{} pools sampled", sampled.len());
    assert!(sampled.iter().all(|&(unused, largest)| largest <= unused));
    // The scenario fragments its pool: somewhere the largest free block is under half of what
    // is free.
    assert!(
        sampled
            .iter()
            .any(|&(unused, largest)| unused > 0 && largest * 2 < unused),
        "no fragmentation seen"
    );
    // Each column's figure is the most reserved − allocated over its events, read from the
    // replay's totals.
    let replay = &doc.data.loaded.replays[0];
    let most = (0..replay.event_count())
        .map(|e| {
            let t = replay.totals_after(Some(e as u32));
            (t.reserved_bytes - t.allocated_bytes).max(0) as u64
        })
        .max()
        .unwrap_or(0);
    assert_eq!(track.iter().map(|t| t.0).max(), Some(most));
}

#[test]
fn the_segment_timeline_shows_segments_over_time_and_a_click_shows_the_pool_of_one() {
    let mut harness = harness(&generated(Scenario::Fragmentation, 8000), 1400.0, 900.0);
    harness.get_by_label("Segments").click();
    common::settle(&mut harness);
    let rect = harness.state().documents()[0]
        .segments
        .drawn_rect()
        .expect("the timeline is drawn");
    // Low in the middle of the trace: a segment live there.
    let at = egui::pos2(rect.center().x, rect.bottom() - 3.0);
    let (k, _) = harness.state().documents()[0]
        .segments
        .span_under(at)
        .expect("a segment under the pointer");
    let span = {
        let doc = &harness.state().documents()[0];
        memsight_core::segments::spans(&doc.data.loaded.snapshot.devices[0])[k].clone()
    };
    click_at(&mut harness, at);
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    if let Some(opened) = span.opened_at {
        // The pool right after the event that reserved it: a segment_alloc at its address.
        assert_eq!(doc.selection.event, Some(opened));
        let trace = &doc.data.loaded.snapshot.devices[0].trace;
        assert_eq!(trace.action[opened as usize], Action::SegmentAlloc);
        assert_eq!(trace.addr[opened as usize], span.address);
    } else {
        assert!(doc.selection.event.is_some());
    }
}

#[test]
fn the_chart_exports_at_a_chosen_size_with_its_caption() {
    let mut harness = harness(&generated(Scenario::Leak, 4000), 1400.0, 900.0);
    harness.state_mut().documents_mut()[0].lifecycle.x_range = Some((500.0, 2500.0));
    common::settle(&mut harness);
    assert_eq!(
        harness.state().export_caption(),
        "leak.pickle (device 0) · blocks by call site · memsight"
    );
    let dir = std::env::temp_dir().join(format!("memsight-sized-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let png = dir.join("leak-chart-1280.png");
    let ctx = harness.ctx.clone();
    harness.state_mut().export_at_size(
        &ctx,
        memsight_ui::ExportTarget::Chart,
        png.clone(),
        [1280, 720],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(2);
    while !png.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        harness.step();
    }
    harness.step();
    let image = image::open(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert_eq!((image.width(), image.height()), (1280, 720));
    let notices: Vec<String> = harness
        .state()
        .notices
        .current()
        .iter()
        .map(|n| n.text.clone())
        .collect();
    assert!(
        notices
            .iter()
            .any(|n| n.contains("saved") && n.contains("leak-chart-1280.png")),
        "{notices:?}"
    );
    std::fs::remove_dir_all(dir).expect("clean up");
}

#[test]
fn the_demo_says_how_to_open_ones_own_file() {
    // Data from memory (the bundled demo) offers the dialog in the summary bar; a file does not.
    let mut harness = harness(&generated(Scenario::Leak, 4000), 1400.0, 900.0);
    harness.state_mut().dialogs.backend = memsight_ui::app::dialogs::Backend::Builtin;
    harness
        .get_by_label("demo data: open yours (Ctrl+O)…")
        .click();
    harness.run_steps(3);
    assert!(harness.state().dialogs.builtin_is_open());
    let Some(file) = fixture("npu_snapshot_with_empty_cache.pkl") else {
        return;
    };
    let harness = self::harness(&file, 1400.0, 900.0);
    assert!(
        harness
            .query_by_label("demo data: open yours (Ctrl+O)…")
            .is_none()
    );
}

#[test]
fn a_band_clicked_on_the_chart_shows_its_block_s_segment_in_the_pool() {
    let mut harness = harness(&generated(Scenario::Leak, 4000), 1400.0, 900.0);
    let (id, pos) = harness.state().documents()[0]
        .lifecycle
        .find_band(3.0)
        .expect("a band tall enough to click");
    click_at(&mut harness, pos);
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.selection.lifetime, Some(id));
    // The click picks the column's event too; the pool outlines the pinned block's segment,
    // not the segment at that event's address.
    let addr = doc.data.loaded.replays[0].lifetimes[id as usize].addr;
    let pool = doc.pool.pool().expect("shown");
    let segment = pool
        .segments
        .iter()
        .find(|s| (s.address..s.address + s.total_size_bytes).contains(&addr))
        .expect("the block is in a segment");
    assert_eq!(
        doc.pool.highlighted_address(),
        Some((segment.address, true)),
        "outlined and in view"
    );
}

/// The step shading and labels: every other step shaded and labelled where it is wide enough;
/// steps a few pixels wide or less (thousands of them in a long run seen whole) are neither
/// shaded nor labelled. Laying out their labels was most of a zoomed-out frame at 5 M events.
#[test]
fn steps_are_shaded_and_labelled_where_they_fit_and_skipped_where_they_do_not() {
    let shown = |harness: &Harness<'static, MemsightApp>| {
        let (mut shaded, mut labels) = (0, Vec::new());
        for clipped in &harness.output().shapes {
            match &clipped.shape {
                egui::Shape::Rect(r) if r.fill == memsight_ui::palette::STEP_SHADE => shaded += 1,
                egui::Shape::Text(t)
                    if t.galley.text().starts_with("step #")
                        || t.galley.text().starts_with('#') =>
                {
                    labels.push(t.galley.text().to_string());
                }
                _ => {}
            }
        }
        (shaded, labels)
    };
    // 20,000 events of the steady run: 51 steps (the truth file's step count), about 20 px each.
    let few = harness(&generated(Scenario::Steady, 20_000), 1400.0, 900.0);
    let steps = few.state().documents()[0].data.steps[0].len();
    assert!((40..=60).contains(&steps), "{steps} steps");
    let (shaded, labels) = shown(&few);
    // Every other step, but the steps' lengths vary: a few are too short.
    assert!(
        (steps / 3..=steps / 2 + 1).contains(&shaded),
        "{shaded} of {steps} steps shaded"
    );
    assert!(labels.len() >= steps / 3, "{labels:?}");
    // 400,000 events: about 1,000 steps, each a pixel or so wide: no shade, no label.
    let mut many = harness(&generated(Scenario::Steady, 400_000), 1400.0, 900.0);
    assert!(many.state().documents()[0].data.steps[0].len() > 900);
    assert_eq!(shown(&many), (0, Vec::new()));
    // Zoomed in (+ six times: a 64th of the run), its steps are wide again.
    let center = many.state().documents()[0]
        .lifecycle
        .chart_rect()
        .expect("laid out")
        .center();
    many.hover_at(center);
    for _ in 0..6 {
        many.key_press(egui::Key::Plus);
        many.step();
    }
    common::settle(&mut many);
    let (shaded, labels) = shown(&many);
    assert!(
        shaded >= 5 && labels.len() >= 10,
        "{shaded} shaded, {labels:?}"
    );
}

/// A pinned allocation's stack in the details panel: a line longer than the panel is wrapped
/// inside it, whole, never cut. The real file with the longest frames (CUDA 2023 paths under
/// `/mnt/…`), in a 900×600 window.
#[test]
fn long_stack_lines_wrap_inside_the_details_panel() {
    let Some(source) = fixture("cuda_2023_no_time.pickle") else {
        memsight_core::testing::skip("corpus not found");
        return;
    };
    let mut harness = harness(&source, 900.0, 600.0);
    let doc = &harness.state().documents()[0];
    let device = doc.device_index().expect("a device");
    let data = std::sync::Arc::clone(&doc.data);
    let replay = &data.loaded.replays[device];
    // The allocation whose stack has the longest line (as the panel writes it).
    let (id, line) = (0..replay.lifetimes.len().min(20_000))
        .filter_map(|id| {
            let l = &replay.lifetimes[id];
            let lines =
                memsight_core::frames::display_frames(&data.loaded.snapshot, l.stack, false);
            let longest = lines
                .into_iter()
                .filter(|f| f.repeat <= 1)
                .map(|f| f.text)
                .max_by_key(String::len)?;
            Some((id as u32, longest))
        })
        .max_by_key(|(_, text)| text.len())
        .expect("stacks");
    assert!(line.len() > 80, "{line}");
    let event = replay.lifetimes[id as usize]
        .alloc_event
        .or(replay.lifetimes[id as usize].free_completed_event);
    harness.state_mut().documents_mut()[0]
        .commands
        .push(Command::PickInChart {
            event,
            lifetime: Some(id),
        });
    common::settle(&mut harness);
    let panel = harness
        .state()
        .layout
        .details
        .expect("the details panel is open");
    let label = harness.get_by_label(&line).rect();
    assert!(
        label.left() >= panel.left() && label.right() <= panel.right() + 1.0,
        "{line:?} at {label:?}, the panel {panel:?}"
    );
    assert!(label.height() > 20.0, "one line, {label:?}: not wrapped");
}

/// The lines between the chart and the panels are dark enough to find and drag: the row of
/// pixels at the bottom panel's top edge is mostly `palette::DIVIDER` grey (egui's light theme
/// draws it at grey 190, nearly invisible on the 248 background).
#[test]
fn the_divider_above_the_bottom_panel_is_drawn_dark() {
    let mut harness = harness(&generated(Scenario::Steady, 8000), 900.0, 600.0);
    let bottom = harness.state().layout.bottom.expect("drawn");
    let image = harness.render().expect("renders");
    let scale = harness.ctx.pixels_per_point();
    let darkest_row = ((bottom.top() - 3.0) * scale) as u32..=((bottom.top() + 3.0) * scale) as u32;
    let xs = ((bottom.left() + 50.0) * scale) as u32..((bottom.right() - 50.0) * scale) as u32;
    let share_dark = darkest_row
        .map(|y| {
            let dark = xs
                .clone()
                .filter(|&x| {
                    let p = image.get_pixel(x, y);
                    let divider = memsight_ui::palette::DIVIDER;
                    (0..3).all(|c| p[c].abs_diff([divider.r(), divider.g(), divider.b()][c]) <= 20)
                })
                .count();
            dark as f32 / xs.len() as f32
        })
        .fold(0.0, f32::max);
    assert!(share_dark > 0.8, "{share_dark} of the divider row is dark");
}

/// A window shrunk and grown again: the event list never stays a row tall, the chart keeps at
/// least half the height, at every size on the way.
#[test]
fn resizing_the_window_keeps_rows_of_the_list_and_half_the_height_for_the_chart() {
    let mut harness = harness(&generated(Scenario::Steady, 8000), 1400.0, 900.0);
    for (width, height) in [
        (800.0, 500.0),
        (1400.0, 900.0),
        (900.0, 420.0),
        (1600.0, 1000.0),
    ] {
        harness.set_size(vec2(width, height));
        common::settle(&mut harness);
        let layout = harness.state().layout;
        let (chart, bottom) = (layout.chart.expect("drawn"), layout.bottom.expect("drawn"));
        assert!(
            chart.height() >= 0.5 * height,
            "{width}×{height}: the chart is {} px tall",
            chart.height()
        );
        // The list's rows: the tab bar, the filter line, the header and at least two rows.
        let rows = harness.query_all_by_label_contains("free_").count()
            + harness.query_all_by_label_contains("alloc").count();
        assert!(
            bottom.height() >= 100.0 && rows >= 2,
            "{width}×{height}: the bottom panel is {} px tall, {rows} rows",
            bottom.height()
        );
    }
}

/// A run thinner than a pixel that holds one allocation is that allocation: its tooltip gives
/// its address and size (it read "1 allocations, each thinner than a pixel"), and a click pins
/// it.
#[test]
fn a_lone_allocation_thinner_than_a_pixel_is_still_that_allocation() {
    use memsight_core::lifecycle::Band;
    let mut harness = harness(&generated(Scenario::Steady, 20_000), 1400.0, 900.0);
    let (id, pos) = harness.state().documents()[0]
        .lifecycle
        .find_run(|band, _| match band {
            Band::Merged { count: 1, largest } => Some(largest),
            _ => None,
        })
        .expect("a lone thin allocation in the steady run");
    harness.hover_at(pos);
    harness.run_steps(60);
    let addr = harness.state().documents()[0].data.loaded.replays[0].lifetimes[id as usize].addr;
    harness.get_by_label(&format!("0x{addr:x}"));
    assert!(harness.query_by_label_contains("1 allocations").is_none());
    click_at(&mut harness, pos);
    assert_eq!(harness.state().documents()[0].selection.lifetime, Some(id));
}

/// Issue 36, item 12: at full view most pixels hold many allocations; the tooltip names the
/// largest of them as it names one (its address), says how many share the pixel, and a click
/// pins that largest one.
#[test]
fn many_allocations_under_a_pixel_are_named_by_their_largest() {
    use memsight_core::lifecycle::Band;
    let mut harness = harness(&generated(Scenario::Steady, 20_000), 1400.0, 900.0);
    let (id, pos) = harness.state().documents()[0]
        .lifecycle
        .find_run(|band, _| match band {
            Band::Merged { count, largest } if count > 1 => Some(largest),
            _ => None,
        })
        .expect("a pixel of many allocations in the steady run at full view");
    harness.hover_at(pos);
    harness.run_steps(60);
    let addr = harness.state().documents()[0].data.loaded.replays[0].lifetimes[id as usize].addr;
    harness.get_by_label(&format!("0x{addr:x}"));
    harness.get_by_label_contains("allocations thinner than a pixel here");
    harness.get_by_label_contains("the largest of ");
    click_at(&mut harness, pos);
    assert_eq!(harness.state().documents()[0].selection.lifetime, Some(id));
}

/// Issue 36, item 3: what an export saves is what the screen shows, with its caption and no
/// widget: the frame drawn for Ctrl+E has the caption above the chart and no legend button;
/// the PNG holds the chart with the caption's band and a margin (labels past the chart's edges
/// are not cut); an export at another size names the legend's call sites with the screen's
/// shares, under a name of its own; an existing file is replaced only when the user says so.
#[test]
fn exports_carry_the_caption_and_the_screen_s_legend_and_never_replace_a_file_unasked() {
    let mut harness = harness(&generated(Scenario::Leak, 4000), 1400.0, 900.0);
    common::settle(&mut harness);
    let legend: Vec<String> = harness.state().documents()[0]
        .lifecycle
        .legend_drawn()
        .iter()
        .map(|(_, label)| label.clone())
        .collect();
    assert!(legend.len() > 2 && legend[0].is_empty(), "{legend:?}");
    let texts = |harness: &Harness<'static, MemsightApp>| -> Vec<String> {
        harness
            .output()
            .shapes
            .iter()
            .filter_map(|c| match &c.shape {
                egui::Shape::Text(t) => Some(t.galley.text().to_string()),
                _ => None,
            })
            .collect()
    };
    assert!(texts(&harness).iter().any(|t| t == "legend: fold"));
    let dir = std::env::temp_dir().join(format!("memsight-exports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let png = dir.join("chart.png");
    let ctx = harness.ctx.clone();
    let chart = harness.state().layout.chart.expect("a chart");
    harness
        .state()
        .export_screenshot(&ctx, memsight_ui::ExportTarget::Chart, png.clone());
    harness.step();
    let drawn = texts(&harness);
    let caption = harness.state().export_caption();
    assert!(drawn.contains(&caption), "{drawn:?}");
    assert!(!drawn.iter().any(|t| t.starts_with("legend")), "{drawn:?}");
    harness.step();
    let image = image::open(&png).expect("the chart's PNG").to_rgba8();
    // The chart, 26 points of caption above it and 8 on the right (1 pixel per point here).
    assert_eq!(
        (image.width(), image.height()),
        (
            (chart.width() + 8.0).round() as u32,
            (chart.height() + 26.0).round() as u32
        )
    );
    // The caption's text is in its band: dark pixels in the top rows.
    let dark = (0..image.width())
        .flat_map(|x| (0..18).map(move |y| (x, y)))
        .filter(|&(x, y)| image.get_pixel(x, y).0[..3].iter().all(|&c| c < 140))
        .count();
    assert!(dark > 50, "{dark} dark pixels in the caption's band");
    // The next frames are the screen's again.
    harness.step();
    assert!(texts(&harness).iter().any(|t| t == "legend: fold"));

    // At another size: the screen's legend, under a name of its own.
    let at_size = harness
        .state()
        .export_name_at(memsight_ui::ExportTarget::Chart, [1920, 1080]);
    assert_ne!(
        at_size,
        harness
            .state()
            .export_name(memsight_ui::ExportTarget::Chart)
    );
    assert!(at_size.ends_with("-1920x1080.png"), "{at_size}");
    let doc = &harness.state().documents()[0];
    let mut copy = memsight_ui::document::Document::shared(
        doc.name.clone(),
        doc.path.clone(),
        std::sync::Arc::clone(&doc.data),
    );
    copy.lifecycle.copy_view(&doc.lifecycle);
    let mut big = common::harness_of(MemsightApp::with_documents(vec![copy]));
    big.set_size(egui::vec2(1920.0, 1080.0));
    common::settle(&mut big);
    let big_legend: Vec<String> = big.state().documents()[0]
        .lifecycle
        .legend_drawn()
        .iter()
        .map(|(_, label)| label.clone())
        .collect();
    assert_eq!(big_legend, legend);

    // An existing file: asked first; Cancel keeps it, Replace replaces it.
    std::fs::write(&png, b"kept").expect("a file in the way");
    harness.state_mut().export_picked(
        &ctx,
        (memsight_ui::ExportTarget::Chart, png.clone(), None),
        false,
    );
    harness.run_steps(2);
    harness.get_by_label_contains("already exists");
    harness.get_by_label("Cancel").click();
    harness.run_steps(3);
    assert_eq!(std::fs::read(&png).expect("still there"), b"kept");
    assert!(harness.query_by_label_contains("already exists").is_none());
    harness.state_mut().export_picked(
        &ctx,
        (memsight_ui::ExportTarget::Chart, png.clone(), None),
        false,
    );
    harness.run_steps(2);
    harness.get_by_label("Replace").click();
    harness.run_steps(4);
    assert!(image::open(&png).is_ok(), "replaced by the picture");
    std::fs::remove_dir_all(dir).expect("clean up");
}

/// Issue 36, item 5: a range mapped into an expandable segment, clicked in the Segments tab, with
/// a block pinned before: the Pool tab comes forward, nothing stays pinned, and the pool outlines
/// that range inside its segment, not the pinned block's segment nor the whole segment.
#[test]
fn a_mapped_range_clicked_in_the_segments_tab_is_outlined_in_the_pool_tab() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../memsight-core/tests/data/npu_snapshots/snapshot_with_empty_cache_expandable.pkl");
    let mut harness = harness(&Source::Path(path), 1400.0, 900.0);
    common::settle(&mut harness);
    let (id, pos) = harness.state().documents()[0]
        .lifecycle
        .find_band(3.0)
        .expect("a band to pin");
    click_at(&mut harness, pos);
    common::settle(&mut harness);
    assert_eq!(harness.state().documents()[0].selection.lifetime, Some(id));
    harness.get_by_label("Segments").click();
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    let rect = doc.segments.drawn_rect().expect("the timeline is drawn");
    let spans = memsight_core::segments::spans(&doc.data.loaded.snapshot.devices[0]);
    let trace = &doc.data.loaded.snapshot.devices[0].trace;
    // A band of a range a segment_map made (smaller than its segment).
    let (at, k) = (0..40)
        .flat_map(|i| (0..20).map(move |j| (i, j)))
        .map(|(i, j)| {
            egui::pos2(
                rect.left() + rect.width() * (i as f32 + 0.5) / 40.0,
                rect.bottom() - rect.height() * (j as f32 + 0.5) / 20.0,
            )
        })
        .find_map(|p| {
            let (k, _) = doc.segments.span_under(p)?;
            let opened = spans[k].opened_at? as usize;
            (trace.action[opened] == Action::SegmentMap).then_some((p, k))
        })
        .expect("a mapped range on the timeline");
    let span = spans[k].clone();
    click_at(&mut harness, at);
    common::settle(&mut harness);
    let app = harness.state();
    assert_eq!(app.bottom_tab, memsight_ui::app::BottomTab::Pool);
    let doc = &app.documents()[0];
    assert_eq!(doc.selection.lifetime, None, "nothing pinned");
    assert_eq!(doc.selection.event, span.opened_at);
    let pool = doc.pool.pool().expect("the pool is shown");
    let segment = pool
        .segments
        .iter()
        .find(|s| (s.address..s.address + s.total_size_bytes).contains(&span.address))
        .expect("the range is in a segment");
    assert!(segment.total_size_bytes > span.size_bytes, "{segment:?}");
    assert_eq!(
        doc.pool.highlighted_address(),
        Some((segment.address, true)),
        "its segment, in view"
    );
    let (outlined, rows) = doc.pool.highlighted_segment().expect("outlined");
    let share = span.size_bytes as f32 / segment.total_size_bytes as f32;
    assert!(
        outlined.width() < rows.width() * (share + 0.1),
        "the range ({share:.2} of its segment) outlined, not the segment: {outlined:?} in {rows:?}"
    );
}

/// Issue 36, item 11: the chart's keys work wherever the pointer is (nothing else has the
/// keyboard), and F8 / Shift+F8 go through the findings as clicks on them do.
#[test]
fn keys_zoom_the_chart_and_go_through_findings_without_the_pointer_on_the_chart() {
    let mut harness = harness(&generated(Scenario::Leak, 4000), 1400.0, 900.0);
    common::settle(&mut harness);
    let chart = harness.state().layout.chart.expect("a chart");
    // The pointer on the findings panel, left of the chart.
    harness.hover_at(egui::pos2(chart.left() - 100.0, chart.center().y));
    harness.run_steps(2);
    harness.key_press(egui::Key::Plus);
    common::settle(&mut harness);
    let (x0, x1) = harness.state().documents()[0]
        .lifecycle
        .x_range
        .expect("+ zoomed in");
    assert!(x1 - x0 < 3000.0, "{x0}..{x1}");
    harness.key_press(egui::Key::ArrowRight);
    common::settle(&mut harness);
    let (y0, _) = harness.state().documents()[0]
        .lifecycle
        .x_range
        .expect("still zoomed");
    assert!(y0 > x0, "→ panned: {x0} → {y0}");
    harness.key_press(egui::Key::Home);
    common::settle(&mut harness);
    assert_eq!(harness.state().documents()[0].lifecycle.x_range, None);

    let findings = harness.state().documents()[0].data.findings.len();
    assert!(findings >= 2, "{findings} findings");
    harness.key_press(egui::Key::F8);
    common::settle(&mut harness);
    assert_eq!(harness.state().documents()[0].findings.selected, Some(0));
    let first = harness.state().documents()[0].selection.clone();
    harness.key_press(egui::Key::F8);
    common::settle(&mut harness);
    assert_eq!(harness.state().documents()[0].findings.selected, Some(1));
    harness.key_press_modifiers(egui::Modifiers::SHIFT, egui::Key::F8);
    common::settle(&mut harness);
    let doc = &harness.state().documents()[0];
    assert_eq!(doc.findings.selected, Some(0));
    assert_eq!(
        doc.selection.event, first.event,
        "the first finding's evidence again"
    );
}

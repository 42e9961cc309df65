//! Profiler data in the app, driven like a user does through `egui_kittest`: open rank folders,
//! read the findings and click one, zoom the curves, sort and filter the operator table, mark a
//! row, look at the components, the static graph and the rank comparison.
//! Run with `WGPU_BACKEND=gl` (CI pins it).

mod common;

use std::path::PathBuf;

use egui::{Event, Modifiers, MouseWheelUnit, vec2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use memsight_core::r#gen::profiler::{ProfilerGenOptions, write_rank};
use memsight_ui::headless::{ScreenshotOptions, prepared_app};
use memsight_ui::views::profiler::{SortBy, Tab};
use memsight_ui::{MemsightApp, Source};

fn profiler_fixtures() -> Option<PathBuf> {
    memsight_core::testing::fixtures_dir().map(|dir| dir.join("profiler"))
}

fn harness(source: &Source) -> Harness<'static, MemsightApp> {
    let options = ScreenshotOptions::default();
    let app = prepared_app(source, &options).unwrap_or_else(|e| panic!("{e}"));
    let mut harness = Harness::builder()
        .with_size(vec2(options.width, options.height))
        .with_step_dt(1.0 / 60.0)
        .wgpu()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    harness.run_steps(4);
    harness
}

#[test]
fn real_ranks_show_curves_findings_and_tables() {
    let Some(dir) = profiler_fixtures() else {
        return;
    };
    let mut harness = harness(&Source::Path(dir));
    // Memory outside the allocator and the peak, on each rank; static_graph_rank1's rounded
    // timestamps (a damaged file) and its static graph's plan.
    harness.get_by_label("Findings (6)");
    harness.get_by_label_contains("Static graph plan on static_graph_rank1");
    harness.get_by_label_contains("Unaccounted memory on rank0_level0");
    harness.get_by_label_contains(
        "Peak on rank0_level0: 1.16 GiB allocated; aten::_foreach_add holds 20%",
    );
    harness.get_by_label_contains("Rounded timestamps on static_graph_rank1");
    // The static plan's finding opens the static graph's chart, its evidence.
    harness
        .get_by_label_contains("Static graph plan on static_graph_rank1")
        .click();
    harness.run_steps(2);
    assert_eq!(harness.state().profilers()[0].tab, Tab::StaticGraph);
    harness.get_by_label("Operators").click();
    harness.run_steps(1);
    assert_eq!(harness.state().profilers()[0].tab, Tab::Operators);
    // The two ranks were recorded a year apart: each counts from its own start.
    assert!(harness.state().profilers()[0].align_starts);

    // The operator table, largest first; a click marks the row on the curves.
    let doc = &harness.state().profilers()[0];
    assert_eq!(doc.table.sort, SortBy::Size);
    harness.get_by_label("205 of 205 rows (click a row: mark it on the curves)");
    // The largest row comes first (two rows share its name).
    harness
        .get_all_by_label("aten::native_batch_norm")
        .next()
        .expect("listed")
        .click();
    harness.run_steps(2);
    let (rank, row) = harness.state().profilers()[0].marked.expect("marked");
    let data = &harness.state().profilers()[0].data;
    let marked = &data.run.ranks[rank].operators[row];
    assert_eq!(
        data.run.ranks[rank].operator_name(marked),
        "aten::native_batch_norm"
    );

    // Filter by name.
    harness.get_by_label("operator name").click();
    harness.run_steps(1);
    harness.event(Event::Text("aten::mm".into()));
    harness.run_steps(2);
    // aten::mm rows of rank0_level0 (`grep -c '^aten::mm,' operator_memory.csv`).
    harness.get_by_label_contains("of 205 rows");
    let rows_shown = harness.state().profilers()[0]
        .data
        .run
        .ranks
        .iter()
        .flat_map(|r| r.operators.iter().map(move |o| r.operator_name(o)))
        .filter(|n| n.contains("aten::mm"))
        .count();
    harness.get_by_label(&format!(
        "{rows_shown} of 205 rows (click a row: mark it on the curves)"
    ));

    harness.get_by_label("Components").click();
    harness.run_steps(2);
    harness.get_by_label("HCCL");
    harness.get_by_label("peak 404 MiB");
    harness.get_by_label("Static graph").click();
    harness.run_steps(2);
    harness.get_by_label_contains("static_graph_rank1: 54 nodes");
    // One chart per graph, on its own node indices (Python over static_op_mem.csv: 27 nodes
    // each; at most 6.01 MiB alive at node index 27, and 8.30 MiB at 32).
    harness.get_by_label_contains(
        "model 0, graph 0 (static_graph_rank1): 27 nodes over node indices 0 – 33",
    );
    harness.get_by_label_contains("at most 6.01 MiB alive at node index 27");
    harness.get_by_label_contains(
        "model 0, graph 1 (static_graph_rank1): 27 nodes over node indices 0 – 36",
    );
    harness.get_by_label_contains("at most 8.30 MiB alive at node index 32");
    harness.get_by_label("Ranks").click();
    harness.run_steps(2);
    harness.get_by_label("peak APP reserved");
    harness.get_by_label("2.06 GiB");

    // The fragmentation track: the operator pool's reserved − allocated, sample by sample, as
    // the rows of operator memory_record.csv give them (a gap where either is missing).
    // (The toolbar's switch, and the plots' legend entries.)
    assert!(harness.get_all_by_label("reserved − allocated").count() >= 2);
    let data = &harness.state().profilers()[0].data;
    for rank in 0..data.run.ranks.len() {
        let Some((curve, values, _)) = data.unused_series(rank) else {
            continue;
        };
        assert_eq!(values.len(), curve.len());
        for (k, &v) in values.iter().enumerate() {
            let (r, a) = (curve.reserved_bytes[k], curve.allocated_bytes[k]);
            if r.is_nan() || a.is_nan() {
                assert!(v.is_nan(), "rank {rank} sample {k}");
            } else {
                assert!(
                    (v - (r - a).max(0.0)).abs() < 0.5,
                    "rank {rank} sample {k}: {v}"
                );
            }
        }
    }
    assert!(
        (0..data.run.ranks.len()).any(|r| data.unused_series(r).is_some()),
        "a rank records the operator pool"
    );
}

/// Two generated ranks (8,000 samples of 0.5 ms); rank1 stalls from sample 4,000 to 5,999.
fn two_rank_run(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!(
        "memsight-ui-profiler-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    write_rank(
        &root.join("rank0"),
        &ProfilerGenOptions {
            samples: 8_000,
            ..ProfilerGenOptions::default()
        },
    )
    .expect("written");
    write_rank(
        &root.join("rank1"),
        &ProfilerGenOptions {
            samples: 8_000,
            stall: Some((4_000, 3 << 30, 2_000)),
            device: 1,
            ..ProfilerGenOptions::default()
        },
    )
    .expect("written");
    root
}

#[test]
fn a_stall_finding_zooms_to_it_and_the_wheel_and_double_click_work() {
    let root = two_rank_run("stall");
    let mut harness = harness(&Source::Profiler(vec![
        root.join("rank0"),
        root.join("rank1"),
    ]));
    // One run on one clock: time is shared.
    assert!(!harness.state().profilers()[0].align_starts);
    harness
        .get_by_label_contains("Allocator stall on rank1")
        .click();
    harness.run_steps(2);
    let doc = &harness.state().profilers()[0];
    let (x0, x1) = doc.x_range.expect("zoomed to the stall");
    // The stall runs from sample 4,000 to 5,999 at 0.5 ms a sample: 2.0 s to 3.0 s.
    assert!(x0 < 2.0e6 && x1 > 3.0e6 && x1 - x0 < 2.0e6, "{x0}..{x1}");

    // Wheel over the chart zooms in around the pointer; double-click shows everything again.
    // Inside the first rank's plot (the curves area holds one plot per rank).
    let chart = doc.chart_rect.expect("drawn");
    let at = egui::pos2(chart.center().x, chart.top() + chart.height() * 0.25);
    harness.hover_at(at);
    harness.event(Event::MouseWheel {
        unit: MouseWheelUnit::Point,
        delta: vec2(0.0, 200.0),
        modifiers: Modifiers::NONE,
        phase: egui::TouchPhase::Move,
        source: egui::MouseWheelSource::Wheel,
    });
    harness.run_steps(3);
    let (z0, z1) = harness.state().profilers()[0].x_range.expect("zoomed");
    assert!(z1 - z0 < x1 - x0, "{z0}..{z1} within {x0}..{x1}");
    // Half a second later (quicker, and egui counts the finding's click: a triple click).
    harness.run_steps(30);
    common::double_click(&mut harness, at);
    harness.run_steps(2);
    assert_eq!(harness.state().profilers()[0].x_range, None);

    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn ctrl_drag_picks_a_range_for_the_operator_table() {
    let root = two_rank_run("range");
    let mut harness = harness(&Source::Profiler(vec![
        root.join("rank0"),
        root.join("rank1"),
    ]));
    let chart = harness.state().profilers()[0].chart_rect.expect("drawn");
    let at = egui::pos2(chart.center().x, chart.top() + chart.height() * 0.25);
    // Ctrl+drag picks a range; the operator table can keep only the rows inside it.
    let (from, to) = (
        egui::pos2(chart.left() + chart.width() * 0.3, at.y),
        egui::pos2(chart.left() + chart.width() * 0.6, at.y),
    );
    common::ctrl_drag(&mut harness, from, to);
    harness.run_steps(2);
    let doc = &harness.state().profilers()[0];
    assert_eq!(doc.x_range, None, "a range pick does not pan or zoom");
    let (a, b) = doc.range.expect("a range is picked");
    assert!(a > 0.0 && b > a, "{a}..{b}");
    let t0 = doc.data.t0_us;
    let inside = |t: f64| !t.is_nan() && t >= a + t0 && t <= b + t0;
    let expected = doc
        .data
        .run
        .ranks
        .iter()
        .flat_map(|r| &r.operators)
        .filter(|o| inside(o.alloc_us) || inside(o.release_us))
        .count();
    let total: usize = doc.data.run.ranks.iter().map(|r| r.operators.len()).sum();
    assert!(expected > 0 && expected < total);
    harness.state_mut().profilers_mut()[0].table.only_visible = true;
    harness.run_steps(2);
    harness.get_by_label(&format!(
        "{expected} of {total} rows (click a row: mark it on the curves)"
    ));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn image_snapshot_of_two_ranks_curves() {
    let root = two_rank_run("image");
    let options = ScreenshotOptions {
        width: 720.0,
        height: 440.0,
        view: memsight_ui::View::Timeline,
        ..ScreenshotOptions::default()
    };
    let app = prepared_app(
        &Source::Profiler(vec![root.join("rank0"), root.join("rank1")]),
        &options,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut harness = Harness::builder()
        .with_size(vec2(options.width, options.height))
        .wgpu()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    harness.run_steps(4);
    harness.snapshot_options("profiler_two_ranks_curves", &common::snapshot_options());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_profiler_tab_opened_with_a_snapshot_sits_after_it() {
    let root = two_rank_run("tabs");
    let g = memsight_core::r#gen::generate(&memsight_core::r#gen::GenOptions {
        events: 2000,
        ..memsight_core::r#gen::GenOptions::default()
    });
    let bytes: &'static [u8] = Box::leak(
        g.write_pickle(Vec::new())
            .expect("in memory")
            .into_boxed_slice(),
    );
    let ctx = egui::Context::default();
    // The profiler run is asked for first; the tab bar still lists it after the snapshot.
    let app = MemsightApp::new(
        &ctx,
        vec![
            Source::Path(root.join("rank0")),
            Source::Bytes {
                name: "steady.pickle".into(),
                bytes,
            },
        ],
        None,
    );
    let mut harness = Harness::builder()
        .with_size(vec2(1400.0, 860.0))
        .with_step_dt(1.0 / 60.0)
        .wgpu()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    common::settle(&mut harness);
    assert_eq!(harness.state().profilers().len(), 1);
    assert_eq!(harness.state().documents().len(), 1);
    let snapshot_tab = harness.get_by_label("steady.pickle").rect();
    let profiler_tab = harness.get_by_label("rank0").rect();
    assert!(
        snapshot_tab.left() < profiler_tab.left(),
        "{snapshot_tab:?} {profiler_tab:?}"
    );
    let _ = std::fs::remove_dir_all(root);
}

/// Issue 36, item 7 in the profiler view: a peak is one sample; its finding zooms to it with
/// the time around it (at least a twentieth of the run), not to a flat 2 ms.
#[test]
fn a_peak_finding_is_shown_with_the_time_around_it() {
    let root = two_rank_run("peak");
    let mut harness = harness(&Source::Profiler(vec![
        root.join("rank0"),
        root.join("rank1"),
    ]));
    harness
        .query_all_by_label_contains("Peak on rank")
        .next()
        .expect("a peak finding per rank")
        .click();
    harness.run_steps(2);
    let doc = &harness.state().profilers()[0];
    let (x0, x1) = doc.x_range.expect("zoomed to the peak");
    let (f0, f1) = doc.full_range();
    assert!(
        x1 - x0 >= (f1 - f0) / 20.0 - 1.0,
        "{x0}..{x1} of {f0}..{f1}"
    );
    assert!(x1 - x0 < f1 - f0, "zoomed: {x0}..{x1} of {f0}..{f1}");
}

//! The compare view: two recordings side by side. Their allocated / reserved curves overlaid
//! (x as each trace's fraction, or aligned by iteration when both have iterations), the summary
//! and the call-site table of core `diff` sorted by |Δ at peak|, and both lifecycle charts, each
//! on its own y scale, with the clicked call site's bands highlighted in both.
//!
//! The comparison is computed on a thread when the view opens (core `diff::diff_devices`, the
//! curves' per-bucket maxima); frames only draw what it made.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError, channel};

use egui::{Rect, Sense, Ui, UiBuilder, pos2, vec2};
use egui_plot::{Legend, Line, LineStyle, Plot, PlotPoints};
use memsight_core::category::classify;
use memsight_core::detect::steps;
use memsight_core::diff::{self, CallSiteDiff, DeviceDiff, DeviceInput, Matched, Side};
use memsight_core::replay::LifetimeId;
use memsight_core::units::format_bytes;
use rustc_hash::FxHashSet;

use crate::palette;
use crate::prepared::Prepared;
use crate::selection::{Command, Selection};
use crate::views::lifecycle::{LifecycleState, lifecycle_ui};

/// Points per overlaid curve (per-bucket maxima: a peak is never averaged away).
const CURVE_POINTS: usize = 2000;
/// Rows of the call-site table.
const TABLE_ROWS: usize = 200;

/// One side's curves, x in trace fraction and, when known, in iterations.
struct Curves {
    /// `(x as fraction of the trace, allocated, reserved)` per bucket.
    by_fraction: Vec<[f64; 3]>,
    /// The same buckets with x in iterations, when the trace has them.
    by_iteration: Option<Vec<[f64; 3]>>,
}

/// What the thread made.
pub struct Compared {
    pub diff: DeviceDiff,
    curves: [Curves; 2],
}

/// The next `CompareDoc::key`.
static NEXT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One compare tab.
pub struct CompareDoc {
    pub name: String,
    /// The two recordings (A, B) and the device shown of each (index into `snapshot.devices`).
    pub data: [Arc<Prepared>; 2],
    pub names: [String; 2],
    pub device_indexes: [usize; 2],
    /// Unique for the life of the process: each tab keeps its own plot and table state.
    key: u64,
    pending: Option<Receiver<Result<Compared, String>>>,
    pub compared: Option<Arc<Compared>>,
    /// Why the comparison could not be made (a failure of the thread).
    pub failed: Option<String>,
    /// The call-site row clicked (index into `diff.call_sites`).
    pub selected: Option<usize>,
    /// Its blocks on each side, for the charts.
    highlight: [Option<FxHashSet<LifetimeId>>; 2],
    pub charts: [LifecycleState; 2],
    selections: [Selection; 2],
    /// x by iteration instead of trace fraction (when both sides have iterations).
    pub by_iteration: bool,
    /// Both charts on one byte scale (0 to the larger peak), so their heights compare.
    pub same_scale: bool,
    /// The shared scale last put on the charts (a chart the user zoomed keeps its own).
    applied_scale: Option<(f64, f64)>,
}

impl CompareDoc {
    /// Starts comparing device `device_indexes[0]` of `a` with `device_indexes[1]` of `b` (indexes
    /// into `snapshot.devices`) on a thread.
    pub fn new(
        ctx: &egui::Context,
        (a, name_a): (Arc<Prepared>, String),
        (b, name_b): (Arc<Prepared>, String),
        device_indexes: [usize; 2],
    ) -> Self {
        let (tx, rx) = channel();
        let data = [Arc::clone(&a), Arc::clone(&b)];
        let ctx = ctx.clone();
        std::thread::spawn(move || {
            let compared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                compare(&a, &b, device_indexes)
            }))
            .map_err(|panic| {
                let why = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("unknown");
                format!("the comparison failed: {why}")
            });
            let _ = tx.send(compared);
            ctx.request_repaint();
        });
        Self {
            name: format!("{} vs {}", short(&name_a), short(&name_b)),
            data,
            names: [name_a, name_b],
            device_indexes,
            key: NEXT_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            pending: Some(rx),
            compared: None,
            failed: None,
            selected: None,
            highlight: [None, None],
            // One colour for the clicked call site on both charts (their palettes differ: each
            // file numbers its stacks its own way).
            charts: [(); 2].map(|()| {
                let mut chart = LifecycleState::default();
                chart.highlight_color = Some(palette::COMPARE_HIGHLIGHT);
                chart
            }),
            selections: [Selection::default(), Selection::default()],
            by_iteration: false,
            same_scale: true,
            applied_scale: None,
        }
    }

    /// True until the comparison is there and both charts are laid out.
    pub fn is_busy(&self) -> bool {
        self.pending.is_some() || self.charts.iter().any(LifecycleState::is_laying_out)
    }

    fn poll(&mut self) {
        let Some(rx) = &self.pending else { return };
        match rx.try_recv() {
            Ok(Ok(compared)) => {
                self.compared = Some(Arc::new(compared));
                self.pending = None;
            }
            Ok(Err(why)) => {
                self.failed = Some(why);
                self.pending = None;
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => {
                self.failed = Some("the comparison stopped before it finished".into());
                self.pending = None;
            }
        }
    }

    /// How many blocks of side `side` (0: A, 1: B) are highlighted (`None`: no row selected).
    pub fn highlighted(&self, side: usize) -> Option<usize> {
        self.highlight.get(side)?.as_ref().map(FxHashSet::len)
    }

    /// Selects call-site row `row` (`None`: none): its blocks are highlighted on both charts.
    pub fn select(&mut self, row: Option<usize>) {
        self.selected = row;
        let Some(compared) = self.compared.clone() else {
            return;
        };
        let site = row.and_then(|r| compared.diff.call_sites.get(r));
        for side in 0..2 {
            self.highlight[side] = site.map(|site| {
                let stacks = if side == 0 {
                    &site.stacks_a
                } else {
                    &site.stacks_b
                };
                let stacks: FxHashSet<u32> = stacks.iter().copied().collect();
                let replay = &self.data[side].loaded.replays[self.device_indexes[side]];
                replay
                    .lifetimes
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| stacks.contains(&l.stack))
                    .map(|(id, _)| id as LifetimeId)
                    .collect()
            });
        }
    }
}

/// A file name without its folders.
pub fn short(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

/// The comparison and both sides' curves (on the calling thread).
fn compare(a: &Prepared, b: &Prepared, device_indexes: [usize; 2]) -> Compared {
    let sides = [a, b];
    let prepare = |k: usize| {
        let (loaded, i) = (&sides[k].loaded, device_indexes[k]);
        let device = &loaded.snapshot.devices[i];
        let categories = classify(&loaded.snapshot, device, &loaded.replays[i]);
        let steps = steps::find(&loaded.snapshot, device, &loaded.replays[i], &categories);
        (categories, steps)
    };
    let ((cat_a, steps_a), (cat_b, steps_b)) = rayon::join(|| prepare(0), || prepare(1));
    let input = |k: usize, categories| DeviceInput {
        snapshot: &sides[k].loaded.snapshot,
        device: &sides[k].loaded.snapshot.devices[device_indexes[k]],
        replay: &sides[k].loaded.replays[device_indexes[k]],
        categories,
    };
    let diff = diff::diff_devices(&input(0, &cat_a), &input(1, &cat_b));
    let both_have_steps = steps_a.is_some() && steps_b.is_some();
    let curves = |k: usize, steps: Option<&steps::Steps>| {
        let replay = &sides[k].loaded.replays[device_indexes[k]];
        curves(replay, steps.filter(|_| both_have_steps))
    };
    Compared {
        curves: [curves(0, steps_a.as_ref()), curves(1, steps_b.as_ref())],
        diff,
    }
}

/// Per-bucket maxima of allocated and reserved, at most [`CURVE_POINTS`] buckets.
fn curves(replay: &memsight_core::DeviceReplay, steps: Option<&steps::Steps>) -> Curves {
    let (allocated, reserved) = (replay.allocated_bytes(), replay.reserved_bytes());
    let n = allocated.len();
    let bucket = n.div_ceil(CURVE_POINTS).max(1);
    // x of an event in iterations: k + the fraction of iteration k it lies at.
    let iteration_x = |e: usize| -> f64 {
        let Some(s) = steps else { return 0.0 };
        let bounds = &s.bounds;
        let k = bounds.partition_point(|&b| b as usize <= e);
        if k == 0 {
            let first = f64::from(bounds[0]).max(1.0);
            return e as f64 / first - 1.0;
        }
        let (start, end) = (
            bounds[k - 1] as usize,
            bounds.get(k).map_or(n, |&b| b as usize),
        );
        (k - 1) as f64 + (e - start) as f64 / (end - start).max(1) as f64
    };
    let mut by_fraction = Vec::with_capacity(n / bucket + 1);
    let mut by_iteration = Vec::with_capacity(n / bucket + 1);
    for start in (0..n).step_by(bucket) {
        let end = (start + bucket).min(n);
        let max = |v: &[i64]| v[start..end].iter().copied().max().unwrap_or(0) as f64;
        let (a, r) = (max(allocated), max(reserved));
        by_fraction.push([end as f64 / n as f64, a, r]);
        by_iteration.push([iteration_x(end - 1), a, r]);
    }
    Curves {
        by_fraction,
        by_iteration: steps.map(|_| by_iteration),
    }
}

/// The whole compare tab inside `ui`.
pub fn compare_ui(ui: &mut Ui, doc: &mut CompareDoc) {
    doc.poll();
    if let Some(why) = &doc.failed {
        ui.colored_label(palette::ERROR_TEXT, why);
        return;
    }
    let Some(compared) = doc.compared.clone() else {
        ui.centered_and_justified(|ui| ui.label("comparing…"));
        return;
    };
    let d = &compared.diff;
    summary_ui(ui, doc, d);
    let rest = ui.available_rect_before_wrap();
    ui.allocate_rect(rest, Sense::hover());
    if rest.width() < 200.0 || rest.height() < 200.0 {
        ui.label("the window is too small for the compare view");
        return;
    }
    let top_height = (rest.height() * 0.42).clamp(80.0, rest.height() - 120.0);
    let top = Rect::from_min_size(rest.min, vec2(rest.width(), top_height));
    let curves_rect = Rect::from_min_max(top.min, pos2(top.min.x + top.width() * 0.4, top.max.y));
    let table_rect = Rect::from_min_max(pos2(curves_rect.max.x + 8.0, top.min.y), top.max);
    let charts = Rect::from_min_max(pos2(rest.min.x, top.max.y + 6.0), rest.max);
    ui.scope_builder(
        UiBuilder::new()
            .max_rect(curves_rect)
            .id_salt(("compare-curves", doc.key)),
        |ui| {
            curves_ui(ui, doc, &compared);
        },
    );
    ui.scope_builder(
        UiBuilder::new()
            .max_rect(table_rect)
            .id_salt(("compare-table", doc.key)),
        |ui| {
            table_ui(ui, doc, d);
        },
    );
    share_scale(doc);
    let half = (charts.width() - 8.0) / 2.0;
    for side in 0..2 {
        let x0 = charts.min.x + side as f32 * (half + 8.0);
        let chart_rect = Rect::from_min_size(pos2(x0, charts.min.y), vec2(half, charts.height()));
        ui.scope_builder(
            UiBuilder::new()
                .max_rect(chart_rect)
                .id_salt(("compare-chart", doc.key, side)),
            |ui| {
                let name = format!(
                    "{}: {} (device {})",
                    ["A", "B"][side],
                    short(&doc.names[side]),
                    doc.data[side].loaded.snapshot.devices[doc.device_indexes[side]].ordinal
                );
                ui.label(egui::RichText::new(name).strong());
                // Room for the y axis' top label above the plot.
                ui.add_space(6.0);
                let mut commands: Vec<Command> = Vec::new();
                lifecycle_ui(
                    ui,
                    &doc.data[side],
                    doc.device_indexes[side],
                    &mut doc.charts[side],
                    &doc.selections[side],
                    &mut commands,
                    doc.highlight[side].as_ref(),
                );
                // Each chart keeps its own selection (a picked block, a zoom to events).
                let (device, replay) = (
                    &doc.data[side].loaded.snapshot.devices[doc.device_indexes[side]],
                    &doc.data[side].loaded.replays[doc.device_indexes[side]],
                );
                doc.selections[side].apply(commands, device, replay);
            },
        );
    }
}

/// With `same_scale`, both charts show 0 to the larger of the two peaks (reserved or active,
/// plus 5 %), unless the user zoomed a chart's bytes; without it, each its own.
fn share_scale(doc: &mut CompareDoc) {
    let shared = doc.same_scale.then(|| {
        let peak = (0..2)
            .map(|side| {
                let r = &doc.data[side].loaded.replays[doc.device_indexes[side]];
                r.peak_reserved.bytes.max(r.peak_active.bytes).max(1024)
            })
            .max()
            .unwrap_or(1024);
        (0.0, peak as f64 * 1.05)
    });
    for chart in &mut doc.charts {
        if chart.y_range.is_none() || chart.y_range == doc.applied_scale {
            chart.y_range = shared;
        }
    }
    doc.applied_scale = shared;
}

fn summary_ui(ui: &mut Ui, doc: &mut CompareDoc, d: &DeviceDiff) {
    ui.horizontal_wrapped(|ui| {
        ui.label(egui::RichText::new(format!("A: {}", doc.names[0])).color(palette::COMPARE_A));
        ui.label(egui::RichText::new(format!("B: {}", doc.names[1])).color(palette::COMPARE_B));
        ui.separator();
        ui.checkbox(&mut doc.same_scale, "same byte scale on both charts")
            .on_hover_text("0 to the larger peak on both, so heights compare; off: each its own");
    });
    ui.horizontal_wrapped(|ui| {
        let quantity = |ui: &mut Ui, what: &str, a: u64, b: u64| {
            let delta = b as i64 - a as i64;
            let percent = if a == 0 || delta == 0 {
                String::new()
            } else {
                format!(" ({:+.1} %)", delta as f64 / a as f64 * 100.0)
            };
            let text = format!(
                "{what} {} → {}, Δ {}{percent}",
                format_bytes(a as i64),
                format_bytes(b as i64),
                signed(delta)
            );
            ui.add(egui::Label::new(text).wrap_mode(egui::TextWrapMode::Extend));
            ui.separator();
        };
        quantity(
            ui,
            "peak allocated",
            d.a.peak_allocated_bytes,
            d.b.peak_allocated_bytes,
        );
        quantity(
            ui,
            "peak reserved",
            d.a.peak_reserved_bytes,
            d.b.peak_reserved_bytes,
        );
        quantity(
            ui,
            "peak active",
            d.a.peak_active_bytes,
            d.b.peak_active_bytes,
        );
        ui.label(format!("allocations {} → {}", d.a.allocs, d.b.allocs));
        if let (Some(ia), Some(ib)) = (d.a.iterations, d.b.iterations) {
            ui.separator();
            ui.label(format!("iterations {ia} → {ib}"));
        }
    });
    let grown: Vec<String> = d
        .categories
        .iter()
        .filter(|c| c.delta_bytes != 0)
        .map(|c| format!("{} {}", c.category.words(), signed(c.delta_bytes)))
        .collect();
    for note in &d.notes {
        ui.colored_label(palette::WARNING_TEXT, note);
    }
    if d.differs_only_in_layout() && d.a.peak_reserved_bytes == d.b.peak_reserved_bytes {
        ui.label(format!(
            "Same requests ({} allocations, every call site alike), the same blocks at both peaks and the same peak reserved.",
            d.a.allocs
        ));
    } else if d.differs_only_in_layout() {
        ui.label(format!(
            "Same requests ({} allocations, every call site alike) and the same blocks at both peaks: what differs in reserved comes from the segment layout ({} vs {} segment allocs / maps).",
            d.a.allocs, d.a.segment_allocs, d.b.segment_allocs
        ));
    } else if d.same_requests {
        ui.label(format!(
            "Same requests ({} allocations, every call site alike), freed in another order.",
            d.a.allocs
        ));
    } else if !grown.is_empty() {
        ui.label(format!("At the peaks, by category: {}", grown.join(", ")));
    }
}

fn signed(bytes: i64) -> String {
    if bytes > 0 {
        format!("+{}", format_bytes(bytes))
    } else {
        format_bytes(bytes)
    }
}

fn curves_ui(ui: &mut Ui, doc: &mut CompareDoc, compared: &Compared) {
    let iterations = compared.curves.iter().all(|c| c.by_iteration.is_some());
    ui.horizontal(|ui| {
        ui.strong("allocated / reserved");
        if iterations {
            ui.checkbox(&mut doc.by_iteration, "aligned by iteration");
        } else {
            ui.weak("x: fraction of each trace");
        }
    });
    let by_iteration = iterations && doc.by_iteration;
    let colors = [palette::COMPARE_A, palette::COMPARE_B];
    let plot = Plot::new(("compare-curves", doc.key))
        .legend(Legend::default().position(egui_plot::Corner::RightBottom))
        .allow_scroll(false)
        .y_grid_spacer(|input| crate::views::axes::byte_grid(&input, false))
        .y_axis_formatter(|mark, _| format_bytes(mark.value as i64))
        .x_axis_label(if by_iteration {
            "iteration"
        } else {
            "fraction of the trace"
        })
        .show_axes([true, true]);
    plot.show(ui, |plot_ui| {
        for side in 0..2 {
            let curves = &compared.curves[side];
            let points = if by_iteration {
                curves
                    .by_iteration
                    .as_deref()
                    .unwrap_or(&curves.by_fraction)
            } else {
                &curves.by_fraction
            };
            let label = ["A", "B"][side];
            let allocated: PlotPoints = points.iter().map(|p| [p[0], p[1]]).collect();
            let reserved: PlotPoints = points.iter().map(|p| [p[0], p[2]]).collect();
            plot_ui.line(
                Line::new(format!("{label} allocated"), allocated)
                    .color(colors[side])
                    .width(1.5),
            );
            plot_ui.line(
                Line::new(format!("{label} reserved"), reserved)
                    .color(colors[side])
                    .style(LineStyle::dashed_loose())
                    .width(1.0),
            );
        }
    });
}

/// The call-site table: one row per call site, largest |Δ at peak| first; a click highlights it.
fn table_ui(ui: &mut Ui, doc: &mut CompareDoc, d: &DeviceDiff) {
    let only = |side| {
        d.call_sites
            .iter()
            .filter(|c| c.only_in == Some(side))
            .count()
    };
    ui.horizontal(|ui| {
        ui.strong("call sites by |Δ at peak|");
        let shown = if d.call_sites.len() > TABLE_ROWS {
            format!("the first {TABLE_ROWS} of {}", d.call_sites.len())
        } else {
            d.call_sites.len().to_string()
        };
        ui.weak(format!(
            "{shown} ({} only in A, {} only in B); click a row: its blocks on both charts",
            only(Side::A),
            only(Side::B)
        ));
    });
    let rows = d.call_sites.len().min(TABLE_ROWS);
    let mut clicked = None;
    egui_extras::TableBuilder::new(ui)
        .id_salt(("compare-table", doc.key))
        .striped(true)
        .resizable(true)
        .sense(Sense::click())
        .auto_shrink([false, false])
        .min_scrolled_height(0.0)
        .cell_layout(egui::Layout::left_to_right(egui::Align::Center))
        .column(egui_extras::Column::initial(84.0).at_least(50.0).clip(true))
        .column(egui_extras::Column::initial(76.0).at_least(50.0).clip(true))
        .column(egui_extras::Column::initial(76.0).at_least(50.0).clip(true))
        .column(egui_extras::Column::initial(90.0).at_least(50.0).clip(true))
        .column(egui_extras::Column::remainder().at_least(80.0).clip(true))
        .header(20.0, |mut header| {
            for title in [
                "Δ at peak",
                "A at peak",
                "B at peak",
                "allocs A → B",
                "call site",
            ] {
                header.col(|ui| {
                    ui.strong(title);
                });
            }
        })
        .body(|body| {
            body.rows(18.0, rows, |mut row| {
                let k = row.index();
                let site: &CallSiteDiff = &d.call_sites[k];
                row.set_selected(doc.selected == Some(k));
                let tag = match (site.only_in, site.matched_by) {
                    (Some(Side::A), _) => "  [only in A]",
                    (Some(Side::B), _) => "  [only in B]",
                    (None, Matched::Exact) => "",
                    (None, Matched::FileFunction) => "  [lines moved]",
                    (None, Matched::WithoutEntryPoint) => "  [other entry point]",
                    (None, Matched::FileNames) => "  [other folder]",
                };
                let frames: Vec<String> = site.stack.iter().map(diff::SiteFrame::text).collect();
                let hover = if frames.is_empty() {
                    "no stack recorded".to_string()
                } else {
                    frames.join("\n")
                };
                let cells = [
                    signed(site.delta_at_peak_bytes),
                    format_bytes(site.a.bytes_at_peak as i64),
                    format_bytes(site.b.bytes_at_peak as i64),
                    format!("{} → {}", site.a.allocs, site.b.allocs),
                    // Folders dropped (the hover has the whole stack): file:line stays in view.
                    format!(
                        "{}{tag}",
                        crate::views::lifecycle::short_site(&site.top_frame, 200)
                    ),
                ];
                for (c, text) in cells.into_iter().enumerate() {
                    row.col(|ui| {
                        let label = ui.add(egui::Label::new(text).truncate().selectable(false));
                        if c == 4 {
                            label.on_hover_text(&hover);
                        }
                    });
                }
                if row.response().clicked() {
                    clicked = Some(k);
                }
            });
        });
    if let Some(k) = clicked {
        let next = if doc.selected == Some(k) {
            None
        } else {
            Some(k)
        };
        doc.select(next);
    }
}

//! The chart's plot: where it sits in its area, the cached band mesh as one plot item, the x axis's grid and labels.

use std::sync::Arc;

use egui::{Color32, Mesh, Rect, Sense, Shape, Ui, pos2, vec2};
use memsight_core::units::format_bytes;

use crate::palette;
use crate::prepared::Prepared;
use crate::views::axes::{byte_grid, grid_marks, nice_step};

use super::{
    Axis, Laid, LifecycleState, OVERVIEW_MAX_HEIGHT, OVERVIEW_MIN_HEIGHT, TRACK_MAX_HEIGHT,
    TRACK_MIN_HEIGHT, Y_AXIS_MIN_WIDTH, axis,
};

/// Where `egui_plot` will put its frame in `plot_rect` (its axes take what their labels need):
/// where it put it last time, with the same margins when the space changed size. `None` before
/// it has drawn here at all: one frame then draws an empty plot to learn them, so the first
/// layout is made for the right rectangle (not made twice).
pub(super) fn expected_plot_frame(state: &LifecycleState, plot_rect: Rect) -> Option<Rect> {
    match state.plot_frame {
        Some((space, frame)) if space == plot_rect => Some(frame),
        Some((space, frame)) => Some(Rect::from_min_max(
            plot_rect.min + (frame.min - space.min),
            plot_rect.max - (space.max - frame.max),
        )),
        None => None,
    }
}

/// The chart's space split top to bottom: the plot, the fragmentation track (when shown) and the
/// overview strip; their heights follow the space, within bounds.
pub(super) fn split_area(full: Rect, hide_track: bool) -> (Rect, f32, f32) {
    let overview_height = (full.height() * 0.1).clamp(OVERVIEW_MIN_HEIGHT, OVERVIEW_MAX_HEIGHT);
    let track_height = if hide_track {
        0.0
    } else {
        (full.height() * 0.08).clamp(TRACK_MIN_HEIGHT, TRACK_MAX_HEIGHT) + 4.0
    };
    let plot_rect = Rect::from_min_max(
        full.min,
        pos2(
            full.max.x,
            full.max.y - overview_height - 4.0 - track_height,
        ),
    );
    (plot_rect, track_height, overview_height)
}

/// Where `egui_plot` put its frame in the plot's space this frame; when the axes took another
/// width than the chart was laid out for, another frame lays it out again.
pub(super) fn remember_plot_frame(
    ui: &Ui,
    state: &mut LifecycleState,
    placed: (Rect, Rect),
    chart_rect: Rect,
) {
    if state.plot_frame != Some(placed) {
        state.plot_frame = Some(placed);
        if placed.1 != chart_rect {
            ui.ctx().request_repaint();
        }
    }
}

/// Whether a chart fits in `rect` (a window can leave it a few pixels).
pub(super) fn roomy(rect: Rect) -> bool {
    rect.width() >= 10.0 && rect.height() >= 10.0
}

/// Draws an empty plot in `plot_rect` to learn where `egui_plot` puts its frame there (kept only
/// when a chart fits in it).
pub(super) fn measure_plot_frame(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    state: &mut LifecycleState,
    plot_rect: Rect,
) {
    if !roomy(plot_rect) {
        return;
    }
    let ax = axis(data, device, state.use_time);
    let peak = data.loaded.replays[device].peak_reserved.bytes.max(1024) as f64;
    let view = state.x_range.unwrap_or_else(|| ax.full_range());
    let empty = Arc::new(Mesh::default());
    let frame = plot_ui(ui, plot_rect, &ax, view, (0.0, peak), empty);
    if roomy(frame) {
        state.plot_frame = Some((plot_rect, frame));
        ui.ctx().request_repaint();
    }
}

/// The layout's mesh, or, while the layout of this view is on its way, the last one stretched
/// to this view.
pub(super) fn mesh_for_view(
    laid: &Laid,
    current: bool,
    chart_rect: Rect,
    x_of: &dyn Fn(f64) -> f32,
) -> Arc<Mesh> {
    if current {
        return Arc::clone(&laid.mesh);
    }
    let mut mesh = (*laid.mesh).clone();
    let (old, was) = ((laid.key.x0, laid.key.x1), laid.key.rect);
    for v in &mut mesh.vertices {
        let x = old.0 + f64::from((v.pos.x - was.left()) / was.width()) * (old.1 - old.0);
        v.pos.x = x_of(x).clamp(chart_rect.left(), chart_rect.right());
        // Same bytes, another height when the chart was resized.
        v.pos.y = chart_rect.top() + (v.pos.y - was.top()) * chart_rect.height() / was.height();
    }
    Arc::new(mesh)
}

/// The plot around the bands: `egui_plot` draws the grid, the axes and their labels, and our band
/// mesh as a plot item; it takes no input (the chart's own interaction owns the view). Returns
/// where it put the plot's frame.
pub(super) fn plot_ui(
    ui: &mut Ui,
    rect: Rect,
    ax: &Axis<'_>,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    mesh: Arc<Mesh>,
) -> Rect {
    let mut ui = ui.new_child(
        egui::UiBuilder::new()
            .max_rect(rect)
            .id_salt("lifecycle-plot"),
    );
    let time = ax.times.is_some();
    let unit = if time { "time" } else { "event" };
    let plot = crate::views::axes::drawing_only(egui_plot::Plot::new("lifecycle-plot"))
        .width(rect.width())
        .height(rect.height())
        .sense(Sense::hover())
        .show_background(false)
        .grid_color(palette::PLOT_GRID)
        .set_margin_fraction(vec2(0.0, 0.0))
        .x_axis_label(unit)
        .x_grid_spacer(move |input| x_grid(&input, time))
        .x_axis_formatter(move |mark, _| x_label(mark.value, mark.step_size, time))
        .y_grid_spacer(|input| byte_grid(&input, true))
        .y_axis_formatter(|mark, _| format_bytes(mark.value as i64))
        .y_axis_min_width(Y_AXIS_MIN_WIDTH);
    let shown = plot.show(&mut ui, |plot| {
        plot.set_plot_bounds(egui_plot::PlotBounds::from_min_max([x0, y0], [x1, y1]));
        plot.add(BandsItem::new(mesh, (x0, x1), (y0, y1)));
    });
    *shown.transform.frame()
}

/// Grid lines for the x axis: 1-2-5 steps, whole events at least (never "421, 421, 422").
pub(super) fn x_grid(input: &egui_plot::GridInput, time: bool) -> Vec<egui_plot::GridMark> {
    let (lo, hi) = input.bounds;
    let step = nice_step((hi - lo) / 8.0);
    let step = if time { step } else { step.max(1.0) };
    let mut marks = grid_marks(
        lo,
        hi,
        step,
        if time || step >= 5.0 {
            step / 5.0
        } else {
            step
        },
    );
    // A label centred on the right edge would be cut ("2000" for 20000), and one on the left
    // edge would run into the y axis' "0 B": those ticks go unlabelled.
    for mark in &mut marks {
        if hi - mark.value < (hi - lo) * 0.02 || mark.value - lo < (hi - lo) * 0.02 {
            mark.step_size = step / 5.0;
        }
    }
    marks
}

/// An x tick's label: the event index, or seconds (x in µs) with the decimals the step needs.
pub(super) fn x_label(x: f64, step: f64, time: bool) -> String {
    if time {
        let decimals = (-(step / 1e6).log10()).ceil().clamp(0.0, 6.0) as usize;
        format!("{:.decimals$} s", x / 1e6)
    } else {
        thousands(x.round() as i64)
    }
}

/// An integer with its thousands separated by commas: "1,250,000".
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// Our band mesh as an `egui_plot` item: built for the plot's frame, drawn as it is, in the plot's
/// item layer (over the grid, under the axes' labels).
pub(super) struct BandsItem {
    base: egui_plot::PlotItemBase,
    mesh: Arc<Mesh>,
    bounds: egui_plot::PlotBounds,
}

impl BandsItem {
    fn new(mesh: Arc<Mesh>, (x0, x1): (f64, f64), (y0, y1): (f64, f64)) -> Self {
        Self {
            base: egui_plot::PlotItemBase::new("allocations".to_string()),
            mesh,
            bounds: egui_plot::PlotBounds::from_min_max([x0, y0], [x1, y1]),
        }
    }
}

impl egui_plot::PlotItem for BandsItem {
    fn shapes(&self, _ui: &Ui, _transform: &egui_plot::PlotTransform, shapes: &mut Vec<Shape>) {
        shapes.push(Shape::mesh(Arc::clone(&self.mesh)));
    }

    fn initialize(&mut self, _x_range: std::ops::RangeInclusive<f64>) {}

    fn color(&self) -> Color32 {
        palette::AXIS
    }

    fn geometry(&self) -> egui_plot::PlotGeometry<'_> {
        egui_plot::PlotGeometry::None
    }

    fn bounds(&self) -> egui_plot::PlotBounds {
        self.bounds
    }

    fn base(&self) -> &egui_plot::PlotItemBase {
        &self.base
    }

    fn base_mut(&mut self) -> &mut egui_plot::PlotItemBase {
        &mut self.base
    }
}

//! The memory-block lifecycle chart: every allocation as a band in the falling-stack layout,
//! reserved bytes as a line above, segment events as ticks, steps, OOMs and snapshots as marks,
//! an overview strip with a draggable window.
//!
//! The layout (core `lifecycle::layout`) and the mesh are built on rayon, off the UI thread, once
//! per view (range, size, device); a frame only paints the cached mesh and looks up the hovered
//! column, so its cost is bounded by the screen.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};

use egui::{Align2, Color32, FontId, Mesh, Pos2, Rect, Sense, Shape, Stroke, Ui, pos2, vec2};
use memsight_core::category::Category;
use memsight_core::frames::display_frames;
use memsight_core::lifecycle::{Band, Column, LayoutRequest, even_columns, layout};
use memsight_core::model::{Action, NO_STR};
use memsight_core::replay::LifetimeId;
use memsight_core::units::format_bytes;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::palette::{self, ColorBy};
use crate::prepared::{Prepared, Step};
use crate::selection::{Command, Selection};
use crate::views::axes::{byte_grid, grid_marks, nice_step};

/// The overview strip's height: a tenth of the chart's space, within these bounds.
const OVERVIEW_MAX_HEIGHT: f32 = 44.0;
const OVERVIEW_MIN_HEIGHT: f32 = 18.0;
/// The fragmentation track's height: a twelfth of the chart's space, within these bounds.
const TRACK_MAX_HEIGHT: f32 = 48.0;
const TRACK_MIN_HEIGHT: f32 = 20.0;
/// Pools replayed for the track's largest free block, at most, per layout (each well under a
/// millisecond: BENCHMARKS.md).
const TRACK_POOL_SAMPLES: usize = 160;
/// A box zoom also zooms the bytes when it is at least this tall; flatter, it zooms time only
/// (and its preview is full height).
const BOX_ZOOM_MIN_HEIGHT_PX: f32 = 8.0;
/// The least room the y axis' labels get ("1023 MiB").
const Y_AXIS_MIN_WIDTH: f32 = 56.0;
/// Call sites the legend names at most.
const LEGEND_ENTRIES: usize = 6;
/// Vertices of the band mesh that keep a frame's tessellation within a few milliseconds.
const MAX_MESH_VERTICES: usize = 120_000;

/// What the chart shows and what the user picked; `Default` is the whole trace.
#[derive(Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one switch per option the View menu offers"
)]
pub struct LifecycleState {
    /// Visible x range (event index, or µs since the first event in time mode); `None`: all.
    pub x_range: Option<(f64, f64)>,
    /// Visible bytes (set by proportional or box zoom); `None`: 0 to the window's peak.
    pub y_range: Option<(f64, f64)>,
    /// Real time on the x axis (only when the trace has times).
    pub use_time: bool,
    /// What the bands are coloured by (the pool chart follows).
    pub color_by: ColorBy,
    /// The colour legend on the chart (call sites or categories).
    pub hide_legend: bool,
    /// The fragmentation track under the chart (reserved − allocated, the largest free block).
    pub hide_fragmentation: bool,
    pub show_internal_frames: bool,
    /// The colour of highlighted bands (`None`: their own); the compare view gives both charts
    /// one, so a call site reads the same in A and B.
    pub highlight_color: Option<Color32>,
    /// The legend entry clicked: its bands stay, the others are dimmed.
    pub legend_highlight: Option<LegendKey>,
    /// The legend folded to one button (`None`: folded when it would cover much of the chart).
    pub legend_folded: Option<bool>,
    /// The events the event list's search matches, marked under the chart.
    pub search_hits: Option<Arc<Vec<u32>>>,
    /// The selected event the chart last followed: it pans to a new one that is out of view.
    followed_event: Option<u32>,
    /// The legend's header and rows as drawn last frame, with their text (tests, tools).
    legend_drawn: Vec<(Rect, String)>,
    /// The fragmentation track of the layout shown, and the job computing one: started only
    /// once the view rests (no layout on its way), so it never competes with zooming.
    track: Option<(LayoutKey, Track)>,
    track_pending: Option<(LayoutKey, Receiver<Track>)>,
    laid: Option<Laid>,
    pending: Option<(LayoutKey, Receiver<Laid>)>,
    /// The view of the last frame: the layout is current when it has this key.
    wanted: Option<LayoutKey>,
    /// Layouts received so far.
    layouts_received: u64,
    box_start: Option<Pos2>,
    /// Where a Ctrl+drag range selection started.
    range_start: Option<Pos2>,
    overview: Option<(LayoutKey, Arc<Vec<f32>>)>,
    /// The space the plot had and where `egui_plot` put its frame in it, last frame: the bands
    /// are laid out for that frame.
    plot_frame: Option<(Rect, Rect)>,
    /// The what-if replay's reserved bytes per event, drawn dashed over the recorded line.
    pub predicted_reserved: Option<Arc<memsight_core::whatif::Prediction>>,
    /// Its highest bytes per column of the layout it was computed for.
    predicted_columns: Option<(LayoutKey, usize, Arc<[u64]>)>,
}

/// What one legend entry stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegendKey {
    CallSite(memsight_core::model::StackId),
    Category(Category),
    /// An owner's index in `Prepared::owner_names`.
    Owner(usize),
}

impl LegendKey {
    /// Whether lifetime `id`'s band belongs to this entry.
    fn holds(self, data: &Prepared, device: usize, id: LifetimeId) -> bool {
        match self {
            Self::CallSite(stack) => {
                data.loaded.replays[device].lifetimes[id as usize].stack == stack
            }
            Self::Category(c) => data.category(device, id) == c,
            Self::Owner(k) => data.owner_index(device, id) == Some(k),
        }
    }
}

/// Everything a layout depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LayoutKey {
    device: usize,
    x0: f64,
    x1: f64,
    rect: Rect,
    use_time: bool,
    /// Bytes shown, bottom to top; `None`: from 0 to the window's peak.
    y_range: Option<(f64, f64)>,
    color_by: ColorBy,
}

/// A finished layout and its mesh.
struct Laid {
    key: LayoutKey,
    columns: Arc<Vec<Column>>,
    mesh: Arc<Mesh>,
    /// First and last event of the layout's columns.
    events: (u32, u32),
    y_min_bytes: f64,
    y_max_bytes: f64,
    /// The call stacks that fill most of the chart, largest area first, with their share.
    top_stacks: Vec<(memsight_core::model::StackId, f64)>,
}

/// The fragmentation track of one layout: per column, the most bytes reserved and not
/// allocated, and the largest free block of the pool (sampled: `None` between samples).
type Track = Arc<Vec<(u64, Option<u64>)>>;

impl Laid {
    fn y_of(&self, rect: Rect, bytes: f64) -> f32 {
        rect.bottom()
            - ((bytes - self.y_min_bytes) / (self.y_max_bytes - self.y_min_bytes)) as f32
                * rect.height()
    }

    fn bytes_at(&self, rect: Rect, y: f32) -> f64 {
        self.y_min_bytes
            + f64::from((rect.bottom() - y) / rect.height()) * (self.y_max_bytes - self.y_min_bytes)
    }
}

/// The x axis of one device: event index or time, and the mapping between them.
struct Axis<'a> {
    /// Monotone µs since the first event, per event (time mode only).
    times: Option<&'a [f64]>,
    event_count: usize,
}

impl Axis<'_> {
    fn full_range(&self) -> (f64, f64) {
        match self.times {
            Some(t) => (0.0, t.last().copied().unwrap_or(0.0).max(1.0)),
            None => (0.0, self.event_count.max(1) as f64),
        }
    }

    /// First event at or after x.
    fn event_at(&self, x: f64) -> u32 {
        match self.times {
            Some(t) => t.partition_point(|&v| v < x) as u32,
            None => x.ceil().clamp(0.0, self.event_count as f64) as u32,
        }
    }

    fn x_of_event(&self, e: usize) -> f64 {
        match self.times {
            Some(t) => t
                .get(e)
                .copied()
                .unwrap_or_else(|| t.last().copied().unwrap_or(0.0)),
            None => e as f64,
        }
    }

    fn columns(&self, x0: f64, x1: f64, width: usize) -> Vec<std::ops::Range<u32>> {
        if self.times.is_none() {
            return even_columns(x0, x1, width);
        }
        let step = (x1 - x0) / width.max(1) as f64;
        (0..width)
            .map(|c| self.event_at(x0 + step * c as f64)..self.event_at(x0 + step * (c + 1) as f64))
            .collect()
    }
}

fn axis(data: &Prepared, device: usize, use_time: bool) -> Axis<'_> {
    let event_count = data.loaded.replays[device].event_count();
    let times = if use_time {
        data.times[device].as_deref()
    } else {
        None
    };
    Axis { times, event_count }
}

/// The chart and its overview strip, filling `ui`'s remaining space. In frame order: follow the
/// selection, take the input (so this frame draws the new view), ask for the layout, draw the
/// plot (`egui_plot`: axes, grid; our band mesh as its item), then what lies over the bands.
pub fn lifecycle_ui(
    ui: &mut Ui,
    data: &Arc<Prepared>,
    device: usize,
    state: &mut LifecycleState,
    selection: &Selection,
    commands: &mut Vec<Command>,
    highlight: Option<&FxHashSet<LifetimeId>>,
) {
    if data.times[device].is_none() {
        state.use_time = false;
    }
    let full = ui.available_rect_before_wrap();
    let (plot_rect, track_height, overview_height) = split_area(full, state.hide_fragmentation);
    ui.allocate_rect(full, Sense::hover());
    let Some(chart_rect) = expected_plot_frame(state, plot_rect) else {
        measure_plot_frame(ui, data, device, state, plot_rect);
        return;
    };
    let overview_rect = Rect::from_min_max(
        pos2(chart_rect.min.x, full.max.y - overview_height),
        full.max,
    );
    if !roomy(chart_rect) {
        state.no_room();
        return;
    }
    let ax = axis(data, device, state.use_time);
    let full_x = ax.full_range();
    follow_selection(data, device, state, selection, commands, &ax);
    // Input first, so this frame paints the new view.
    let response = ui.interact(
        chart_rect,
        ui.scope_id().with("lifecycle-chart"),
        Sense::click_and_drag(),
    );
    let view = view_input(ui, &response, chart_rect, state, commands, &ax);
    let key = LayoutKey {
        device,
        x0: view.0,
        x1: view.1,
        rect: chart_rect,
        use_time: state.use_time,
        y_range: state.y_range,
        color_by: state.color_by,
    };
    request_layout(ui.ctx(), data, state, key, &ax);

    let painter = ui.painter_at(full);
    painter.rect_filled(chart_rect, 0.0, palette::BACKGROUND);
    let x_of =
        |x: f64| chart_rect.left() + ((x - view.0) / (view.1 - view.0)) as f32 * chart_rect.width();
    paint_steps(
        &painter,
        data,
        device,
        chart_rect,
        view,
        &x_of,
        state.use_time,
    );
    let Some(laid) = &state.laid else {
        painter.text(
            chart_rect.center(),
            Align2::CENTER_CENTER,
            "laying out…",
            FontId::proportional(14.0),
            palette::AXIS,
        );
        return;
    };
    let current = laid.key == key;
    let mesh = mesh_for_view(laid, current, chart_rect, &x_of);
    let y_bytes = (laid.y_min_bytes, laid.y_max_bytes);
    let frame = plot_ui(ui, plot_rect, &ax, view, y_bytes, mesh);
    remember_plot_frame(ui, state, (plot_rect, frame), chart_rect);
    let predicted = predicted_columns(state, &ax);
    let laid = state.laid.as_ref().expect("checked above");
    let y_of = |bytes: f64| laid.y_of(chart_rect, bytes);
    paint_marks(&painter, laid, chart_rect, &y_of);
    paint_predicted(&painter, predicted.as_deref(), chart_rect, &y_of);
    paint_highlights(
        &painter,
        (data, device),
        state,
        highlight,
        selection.lifetime,
        chart_rect,
        &y_of,
    );
    paint_search_hits(&painter, state, chart_rect, &ax, &x_of);
    paint_picks(
        &painter, chart_rect, state, selection, &response, &ax, &x_of,
    );
    // The legend last: drawn over the bands, and its clicks are its own (not the chart's).
    let over_legend = !state.hide_legend && legend_ui(ui, data, state, chart_rect);
    let laid = state.laid.as_ref().expect("checked above");
    if !over_legend {
        hover_and_click(data, device, laid, current, chart_rect, &response, commands);
    }
    if !state.hide_fragmentation {
        let track_rect = Rect::from_min_max(
            pos2(chart_rect.min.x, overview_rect.min.y - track_height),
            pos2(chart_rect.max.x, overview_rect.min.y - 4.0),
        );
        request_track(ui.ctx(), data, state, &ax);
        fragmentation_ui(ui, state, track_rect, current);
    }
    overview_ui(ui, data, device, state, overview_rect, full_x, view);
}

/// The fragmentation track: per column, the bytes reserved and not allocated (the shaded area)
/// and the largest free block of the pool (the line): where the two part, free memory is in
/// pieces too small for a large request. Hover: the figures at that column.
fn fragmentation_ui(ui: &mut Ui, state: &LifecycleState, rect: Rect, current: bool) {
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 0.0, palette::BACKGROUND);
    painter.rect_stroke(
        rect,
        0.0,
        Stroke::new(1.0, palette::GRID),
        egui::StrokeKind::Inside,
    );
    let Some(track) = state
        .laid
        .as_ref()
        .filter(|_| current)
        .and_then(|laid| state.track.as_ref().filter(|(k, _)| *k == laid.key))
        .map(|(_, t)| Arc::clone(t))
    else {
        painter.text(
            rect.left_top() + vec2(4.0, 1.0),
            Align2::LEFT_TOP,
            "reserved − allocated · largest free block: when the view rests",
            FontId::proportional(10.0),
            palette::AXIS,
        );
        return;
    };
    let top = track
        .iter()
        .map(|&(unused, _)| unused)
        .max()
        .unwrap_or(0)
        .max(1) as f32;
    let col_w = rect.width() / track.len().max(1) as f32;
    let y_of = |bytes: u64| rect.bottom() - 1.0 - bytes as f32 / top * (rect.height() - 3.0);
    let mut area = Mesh::default();
    let mut line: Vec<Pos2> = Vec::new();
    for (c, &(unused, largest)) in track.iter().enumerate() {
        let x = rect.left() + c as f32 * col_w;
        area.add_colored_rect(
            Rect::from_min_max(pos2(x, y_of(unused)), pos2(x + col_w, rect.bottom() - 1.0)),
            palette::UNUSED_RESERVED,
        );
        if let Some(l) = largest {
            line.push(pos2(x + col_w / 2.0, y_of(l)));
        }
    }
    painter.add(Shape::mesh(area));
    painter.add(Shape::line(line, Stroke::new(1.2, palette::LARGEST_FREE)));
    painter.text(
        rect.left_top() + vec2(4.0, 1.0),
        Align2::LEFT_TOP,
        format!(
            "reserved − allocated (up to {}) · line: largest free block",
            format_bytes(top as i64)
        ),
        FontId::proportional(10.0),
        palette::AXIS,
    );
    let response = ui.interact(
        rect,
        ui.scope_id().with("lifecycle-fragmentation"),
        Sense::hover(),
    );
    if let Some(p) = response.hover_pos() {
        let c = (((p.x - rect.left()) / col_w) as usize).min(track.len().saturating_sub(1));
        // The nearest sampled pool for the largest free block.
        let largest = (0..track.len())
            .filter_map(|k| track[k].1.map(|l| (k.abs_diff(c), l)))
            .min_by_key(|&(d, _)| d)
            .map(|(_, l)| l);
        let unused = track.get(c).map_or(0, |t| t.0);
        response.on_hover_ui_at_pointer(|ui| {
            ui.label(format!(
                "reserved − allocated: up to {}",
                format_bytes(unused as i64)
            ));
            if let Some(l) = largest {
                ui.label(format!("largest free block: {}", format_bytes(l as i64)));
                if unused > 0 {
                    ui.weak(
                        "a request larger than the largest free block needs a new segment, \
                         whatever is free in total",
                    );
                }
            }
        });
    }
}

/// The predicted reserved bytes at their highest in each column of the current layout (cached
/// per layout and prediction).
fn predicted_columns(state: &mut LifecycleState, ax: &Axis) -> Option<Arc<[u64]>> {
    let prediction = state.predicted_reserved.as_ref()?;
    let laid = state.laid.as_ref()?;
    let id = Arc::as_ptr(prediction) as usize;
    if let Some((key, p, columns)) = &state.predicted_columns
        && *key == laid.key
        && *p == id
    {
        return Some(Arc::clone(columns));
    }
    let reserved = &prediction.reserved_bytes;
    let ranges = ax.columns(laid.key.x0, laid.key.x1, laid.columns.len());
    let columns: Arc<[u64]> = ranges
        .iter()
        .map(|r| {
            let (a, b) = (r.start as usize, (r.end as usize).min(reserved.len()));
            reserved
                .get(a..b)
                .and_then(|v| v.iter().copied().max())
                .unwrap_or_else(|| {
                    // An empty column shows the state after the event before it.
                    a.checked_sub(1)
                        .and_then(|e| reserved.get(e))
                        .copied()
                        .unwrap_or(0)
                })
        })
        .collect();
    state.predicted_columns = Some((laid.key, id, Arc::clone(&columns)));
    Some(columns)
}

/// Where `egui_plot` will put its frame in `plot_rect` (its axes take what their labels need):
/// where it put it last time, with the same margins when the space changed size. `None` before
/// it has drawn here at all: one frame then draws an empty plot to learn them, so the first
/// layout is made for the right rectangle (not made twice).
fn expected_plot_frame(state: &LifecycleState, plot_rect: Rect) -> Option<Rect> {
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
fn split_area(full: Rect, hide_track: bool) -> (Rect, f32, f32) {
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
fn remember_plot_frame(
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

/// The predicted reserved line (if any), dashed, over the recorded one (clipped at the chart's
/// top).
fn paint_predicted(
    painter: &egui::Painter,
    columns: Option<&[u64]>,
    rect: Rect,
    y_of: &dyn Fn(f64) -> f32,
) {
    let Some(columns) = columns else {
        return;
    };
    let col_w = rect.width() / columns.len().max(1) as f32;
    let points: Vec<Pos2> = columns
        .iter()
        .enumerate()
        .map(|(c, &bytes)| {
            pos2(
                rect.left() + (c as f32 + 0.5) * col_w,
                y_of(bytes as f64).clamp(rect.top(), rect.bottom()),
            )
        })
        .collect();
    painter.extend(Shape::dashed_line(
        &points,
        Stroke::new(1.5, palette::PREDICTED_LINE),
        6.0,
        4.0,
    ));
}

/// Whether a chart fits in `rect` (a window can leave it a few pixels).
fn roomy(rect: Rect) -> bool {
    rect.width() >= 10.0 && rect.height() >= 10.0
}

/// Draws an empty plot in `plot_rect` to learn where `egui_plot` puts its frame there (kept only
/// when a chart fits in it).
fn measure_plot_frame(
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
fn mesh_for_view(
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
fn plot_ui(
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
fn x_grid(input: &egui_plot::GridInput, time: bool) -> Vec<egui_plot::GridMark> {
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
fn x_label(x: f64, step: f64, time: bool) -> String {
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
struct BandsItem {
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

/// Brings the pinned allocation, or a finding's evidence, into view once when asked.
fn follow_selection(
    data: &Prepared,
    device: usize,
    state: &mut LifecycleState,
    selection: &Selection,
    commands: &mut Vec<Command>,
    ax: &Axis<'_>,
) {
    let (full_x0, full_x1) = ax.full_range();
    if selection.reveal
        && let Some(id) = selection.lifetime
        && let Some(l) = data.loaded.replays[device].lifetimes.get(id as usize)
    {
        // Bring the pinned allocation into view, with some context on both sides.
        let count = ax.event_count;
        let (a, b) = (
            l.alloc_event.map_or(0, |e| e as usize),
            l.free_completed_event.map_or(count, |e| e as usize + 1),
        );
        let (xa, xb) = (
            ax.x_of_event(a),
            ax.x_of_event(b.min(count.saturating_sub(1)))
                .max(ax.x_of_event(a) + 1.0),
        );
        let pad = (xb - xa) * 0.5 + 1.0;
        state.x_range = Some(clamp_view((xa - pad, xb + pad), (full_x0, full_x1)));
        state.y_range = None;
        commands.push(Command::Revealed);
    }
    if selection.event != state.followed_event {
        state.followed_event = selection.event;
        // A new event picked elsewhere (the event list, the arrow keys, a segment step) and out of
        // view: the chart pans to it, keeping its zoom.
        if let (Some(e), Some((x0, x1))) = (selection.event, state.x_range)
            && selection.zoom_to.is_none()
            && !selection.reveal
        {
            let x = ax.x_of_event(e as usize);
            if !(x0..=x1).contains(&x) {
                let half = (x1 - x0) / 2.0;
                state.x_range = Some(clamp_view((x - half, x + half), (full_x0, full_x1)));
            }
        }
    }
    if let Some((first, last)) = selection.zoom_to {
        // Zoom to the evidence of a finding, with a little context on both sides.
        let count = ax.event_count;
        let (xa, xb) = (
            ax.x_of_event(first as usize),
            ax.x_of_event((last as usize + 1).min(count.saturating_sub(1)))
                .max(ax.x_of_event(first as usize) + 1.0),
        );
        let pad = (xb - xa) * 0.05 + 1.0;
        state.x_range = Some(clamp_view((xa - pad, xb + pad), (full_x0, full_x1)));
        state.y_range = None;
        commands.push(Command::Shown);
    }
}

/// Wheel, keys, drags and double-click over the chart: the new view (also kept in `state`), and
/// a range selection when Ctrl+drag ends.
fn view_input(
    ui: &Ui,
    response: &egui::Response,
    chart_rect: Rect,
    state: &mut LifecycleState,
    commands: &mut Vec<Command>,
    ax: &Axis<'_>,
) -> (f64, f64) {
    let (full_x0, full_x1) = ax.full_range();
    let (x0, x1) = state.x_range.unwrap_or((full_x0, full_x1));
    let to_x = |px: f32, (x0, x1): (f64, f64)| {
        x0 + f64::from((px - chart_rect.left()) / chart_rect.width()) * (x1 - x0)
    };
    let mut view = (x0, x1);
    let auto_y = state.laid.as_ref().map(|l| (l.y_min_bytes, l.y_max_bytes));
    let mut y_view = state.y_range;
    let to_bytes = |py: f32, (y0, y1): (f64, f64)| {
        y0 + f64::from((chart_rect.bottom() - py) / chart_rect.height()) * (y1 - y0)
    };
    if response.hovered() {
        let (scroll, zoom, shift) =
            ui.input(|i| (i.smooth_scroll_delta, i.zoom_delta(), i.modifiers.shift));
        let mut factor = f64::from(zoom).recip();
        // Shift: proportional zoom, both axes (some platforms turn Shift+wheel into x scrolling).
        let wheel = if shift { scroll.x + scroll.y } else { scroll.y };
        if wheel != 0.0 {
            factor *= (-f64::from(wheel) * 0.003).exp();
        }
        if (factor - 1.0).abs() > 1e-6
            && let Some(pointer) = response.hover_pos()
        {
            let at = to_x(pointer.x, view);
            view = (at - (at - view.0) * factor, at + (view.1 - at) * factor);
            if shift && let Some((y0, y1)) = y_view.or(auto_y) {
                let at = to_bytes(pointer.y, (y0, y1));
                y_view = Some((at - (at - y0) * factor, at + (y1 - at) * factor));
            }
        }
        (view, y_view) = key_zoom(ui, view, y_view, (full_x0, full_x1));
    }
    // Ctrl+drag: select a range of events for range analysis. Drags start where the button
    // went down, not where the drag was recognised (a few pixels on, or a slow frame later).
    let ranging = ui.input(|i| i.modifiers.command);
    let pressed_at = ui
        .input(|i| i.pointer.press_origin())
        .or_else(|| response.interact_pointer_pos());
    if response.drag_started() && ranging {
        state.range_start = pressed_at;
    }
    if let Some(start) = state.range_start
        && response.drag_stopped()
    {
        if let Some(end) = response.interact_pointer_pos()
            && (end.x - start.x).abs() > 2.0
        {
            let first = ax.event_at(to_x(start.x.min(end.x), view));
            let last = ax
                .event_at(to_x(start.x.max(end.x), view))
                .saturating_sub(1)
                .max(first);
            commands.push(Command::SelectRange(Some((first, last))));
        }
        state.range_start = None;
    }
    let box_zooming = !ranging
        && (ui.input(|i| i.modifiers.shift) || response.dragged_by(egui::PointerButton::Secondary));
    if response.drag_started() && box_zooming {
        state.box_start = pressed_at;
    }
    if state.range_start.is_some() {
        // A range is being drawn: no pan.
    } else if let Some(start) = state.box_start {
        if response.drag_stopped() {
            if let Some(end) = response.interact_pointer_pos()
                && (end.x - start.x).abs() > 3.0
            {
                let (a, b) = (
                    to_x(start.x.min(end.x), view),
                    to_x(start.x.max(end.x), view),
                );
                view = (a, b);
                if (end.y - start.y).abs() >= BOX_ZOOM_MIN_HEIGHT_PX
                    && let Some(y) = y_view.or(auto_y)
                {
                    y_view = Some((
                        to_bytes(start.y.max(end.y), y),
                        to_bytes(start.y.min(end.y), y),
                    ));
                }
            }
            state.box_start = None;
        }
    } else if response.dragged_by(egui::PointerButton::Primary) {
        let dx = f64::from(response.drag_delta().x / chart_rect.width()) * (view.1 - view.0);
        view = (view.0 - dx, view.1 - dx);
        if let Some((y0, y1)) = y_view {
            let dy = f64::from(response.drag_delta().y / chart_rect.height()) * (y1 - y0);
            y_view = Some((y0 + dy, y1 + dy));
        }
    }
    if response.double_clicked() {
        view = (full_x0, full_x1);
        y_view = None;
    }
    let view = clamp_view(view, (full_x0, full_x1));
    state.x_range = if view == (full_x0, full_x1) {
        None
    } else {
        Some(view)
    };
    state.y_range = y_view.map(clamp_y);

    view
}

/// + / − zoom, ← / → pan, Home or 0 shows everything (while the pointer is over the chart).
fn key_zoom(
    ui: &Ui,
    mut view: (f64, f64),
    mut y_view: Option<(f64, f64)>,
    (full_x0, full_x1): (f64, f64),
) -> ((f64, f64), Option<(f64, f64)>) {
    let keys = ui.input(|i| {
        (
            i.key_pressed(egui::Key::Plus) || i.key_pressed(egui::Key::Equals),
            i.key_pressed(egui::Key::Minus),
            i.key_pressed(egui::Key::ArrowLeft),
            i.key_pressed(egui::Key::ArrowRight),
            i.key_pressed(egui::Key::Home) || i.key_pressed(egui::Key::Num0),
        )
    });
    let width = view.1 - view.0;
    let center = f64::midpoint(view.0, view.1);
    if keys.0 {
        view = (center - width / 4.0, center + width / 4.0);
    }
    if keys.1 {
        view = (center - width, center + width);
    }
    if keys.2 {
        view = (view.0 - width / 5.0, view.1 - width / 5.0);
    }
    if keys.3 {
        view = (view.0 + width / 5.0, view.1 + width / 5.0);
    }
    if keys.4 {
        view = (full_x0, full_x1);
        y_view = None;
    }
    (view, y_view)
}

/// The selected range's outline, and the range or box being dragged.
fn paint_picks(
    painter: &egui::Painter,
    chart_rect: Rect,
    state: &LifecycleState,
    selection: &Selection,
    response: &egui::Response,
    ax: &Axis<'_>,
    x_of: &dyn Fn(f64) -> f32,
) {
    if let Some((first, last)) = selection.range {
        let (l, r) = (
            x_of(ax.x_of_event(first as usize)),
            x_of(ax.x_of_event(last as usize + 1)),
        );
        let span = Rect::from_x_y_ranges(
            l.max(chart_rect.left())..=r.min(chart_rect.right()).max(l.max(chart_rect.left())),
            chart_rect.y_range(),
        );
        painter.rect_stroke(
            span,
            0.0,
            Stroke::new(1.0, palette::RANGE),
            egui::StrokeKind::Inside,
        );
    }
    if let (Some(start), Some(now)) = (state.range_start, response.interact_pointer_pos()) {
        let r = Rect::from_x_y_ranges(
            start.x.min(now.x)..=start.x.max(now.x),
            chart_rect.y_range(),
        );
        painter.rect_filled(r, 0.0, palette::RANGE_DRAG);
    }
    if let (Some(start), Some(now)) = (state.box_start, response.interact_pointer_pos()) {
        // The preview is what the zoom will show: the box, or the full height when the box is
        // too flat to zoom the bytes.
        let y_range = if (now.y - start.y).abs() >= BOX_ZOOM_MIN_HEIGHT_PX {
            egui::Rangef::new(
                start.y.min(now.y).max(chart_rect.top()),
                start.y.max(now.y).min(chart_rect.bottom()),
            )
        } else {
            chart_rect.y_range()
        };
        let r = Rect::from_x_y_ranges(start.x.min(now.x)..=start.x.max(now.x), y_range);
        painter.rect_filled(r, 0.0, palette::BOX_ZOOM);
        painter.rect_stroke(
            r,
            0.0,
            Stroke::new(1.0, palette::SELECTION),
            egui::StrokeKind::Inside,
        );
    }

    // The selected event, as a line across the chart.
    if let Some(e) = selection.event {
        let px = x_of(ax.x_of_event(e as usize));
        if chart_rect.x_range().contains(px) {
            painter.line_segment(
                [pos2(px, chart_rect.top()), pos2(px, chart_rect.bottom())],
                Stroke::new(1.0, palette::SELECTED_EVENT),
            );
        }
    }
}

/// A click pins the allocation under the pointer (and selects its column's event); hovering a
/// band shows what it is.
fn hover_and_click(
    data: &Prepared,
    device: usize,
    laid: &Laid,
    current: bool,
    chart_rect: Rect,
    response: &egui::Response,
    commands: &mut Vec<Command>,
) {
    let hovered = response
        .hover_pos()
        .and_then(|p| band_at(laid, chart_rect, p));
    if response.clicked()
        && let Some(p) = response.interact_pointer_pos()
        && let Some(c) = column_at(laid, chart_rect, p).filter(|_| current)
    {
        let lifetime = match hovered {
            Some((
                Band::Lifetime(id)
                | Band::Merged {
                    count: 1,
                    largest: id,
                },
                _,
            )) => Some(id),
            _ => None,
        };
        commands.push(Command::PickInChart {
            event: laid.columns[c].event,
            lifetime,
        });
    }
    if let Some((band, column)) = hovered {
        response.clone().on_hover_ui_at_pointer(|ui| match band {
            // One allocation alone under a pixel is still that allocation.
            Band::Lifetime(id)
            | Band::Merged {
                count: 1,
                largest: id,
            } => {
                lifetime_tooltip_ui(ui, data, device, id);
            }
            Band::Merged { count, .. } => {
                ui.label(format!(
                    "{count} allocations, each thinner than a pixel here: Shift+wheel, or a \
                     Shift+drag box, zooms time and bytes to show them (the wheel alone zooms \
                     time)"
                ));
                if let Some(e) = laid.columns.get(column).and_then(|c| c.event) {
                    ui.label(format!("state after event {e}"));
                }
            }
        });
    }
}

impl LifecycleState {
    /// No room for a chart: nothing is laid out, nothing is waited for.
    fn no_room(&mut self) {
        self.plot_frame = None;
        self.pending = None;
        self.wanted = None;
    }

    /// Shows what `other` shows: the same view, colouring and options (not its layout, which is
    /// made again for this chart's size).
    pub fn copy_view(&mut self, other: &Self) {
        self.x_range = other.x_range;
        self.y_range = other.y_range;
        self.use_time = other.use_time;
        self.color_by = other.color_by;
        self.hide_legend = other.hide_legend;
        self.hide_fragmentation = other.hide_fragmentation;
        self.legend_highlight = other.legend_highlight;
        self.legend_folded = other.legend_folded;
        self.search_hits.clone_from(&other.search_hits);
    }

    /// The fragmentation track of the layout shown: per column, the most bytes reserved and not
    /// allocated, and the largest free block where the pool was sampled.
    pub fn fragmentation(&self) -> Option<&[(u64, Option<u64>)]> {
        let laid = self.laid.as_ref()?;
        self.track
            .as_ref()
            .filter(|(k, _)| *k == laid.key)
            .map(|(_, t)| t.as_slice())
    }

    /// The legend as drawn last frame: its header (fold / show), then one rectangle per row with
    /// the row's text; empty when no legend is drawn.
    pub fn legend_drawn(&self) -> &[(Rect, String)] {
        &self.legend_drawn
    }

    /// True until the layout for the current view has arrived.
    pub fn is_laying_out(&self) -> bool {
        // A chart never drawn (no room for it in a small window) waits for nothing; one whose
        // plot has been measured waits for its first layout, and for one made for the frame the
        // plot last took (its axes' labels may take another width after a layout lands).
        let frame_changed = self
            .plot_frame
            .is_some_and(|(_, frame)| self.laid.as_ref().is_none_or(|l| l.key.rect != frame));
        // The fragmentation track follows once the layout has landed.
        let track_due = !self.hide_fragmentation
            && self.laid.as_ref().is_some_and(|l| {
                self.track.as_ref().map(|(k, _)| *k) != Some(l.key) && self.wanted == Some(l.key)
            });
        frame_changed
            || track_due
            || self.pending.is_some()
            || self
                .wanted
                .is_some_and(|wanted| self.laid.as_ref().map(|l| l.key) != Some(wanted))
    }

    /// Columns of the current layout (for tests and tools).
    pub fn laid_columns(&self) -> Option<&[Column]> {
        self.laid.as_ref().map(|l| l.columns.as_slice())
    }

    /// An allocation drawn at least `min_height_px` tall near the middle of the chart, and the
    /// screen point at its centre there.
    pub fn find_band(&self, min_height_px: f32) -> Option<(LifetimeId, Pos2)> {
        self.find_run(|band, height_px| match band {
            Band::Lifetime(id) if height_px >= min_height_px => Some(id),
            _ => None,
        })
    }

    /// The first run near the middle of the chart for which `wanted(band, its height in
    /// pixels)` names an allocation, and the screen point at its centre (tests and tools).
    pub fn find_run(
        &self,
        wanted: impl Fn(Band, f32) -> Option<LifetimeId>,
    ) -> Option<(LifetimeId, Pos2)> {
        let laid = self.laid.as_ref()?;
        let rect = laid.key.rect;
        let n = laid.columns.len();
        let col_w = rect.width() / n.max(1) as f32;
        let y_of = |bytes: u64| laid.y_of(rect, bytes as f64);
        (n / 3..2 * n / 3).find_map(|c| {
            laid.columns[c].runs.iter().find_map(|r| {
                let id = wanted(r.band, y_of(r.y0_bytes) - y_of(r.y1_bytes))?;
                Some((
                    id,
                    pos2(
                        rect.left() + (c as f32 + 0.5) * col_w,
                        f32::midpoint(y_of(r.y0_bytes), y_of(r.y1_bytes)),
                    ),
                ))
            })
        })
    }

    /// Layouts received since the document opened.
    pub fn layouts_received(&self) -> u64 {
        self.layouts_received
    }

    /// Events covered by the last layout (the visible range).
    pub fn visible_events(&self) -> Option<(u32, u32)> {
        self.laid.as_ref().map(|l| l.events)
    }

    /// The chart's rectangle in the last layout.
    pub fn chart_rect(&self) -> Option<Rect> {
        self.laid.as_ref().map(|l| l.key.rect)
    }
}

/// Bytes never below 0, at least 1 KiB tall.
fn clamp_y((a, b): (f64, f64)) -> (f64, f64) {
    let height = (b - a).max(1024.0);
    let start = a.max(0.0);
    (start, start + height)
}

fn clamp_view((a, b): (f64, f64), (lo, hi): (f64, f64)) -> (f64, f64) {
    let min_width = if hi - lo > 8.0 {
        4.0
    } else {
        (hi - lo).max(1e-3)
    };
    let width = (b - a).clamp(min_width, hi - lo);
    let start = a.clamp(lo, hi - width);
    (start, start + width)
}

/// Starts a layout job when the view changed, and takes its result when it is done.
fn request_layout(
    ctx: &egui::Context,
    data: &Arc<Prepared>,
    state: &mut LifecycleState,
    key: LayoutKey,
    ax: &Axis<'_>,
) {
    state.wanted = Some(key);
    if let Some((_, rx)) = &state.pending
        && let Ok(laid) = rx.try_recv()
    {
        state.laid = Some(laid);
        state.pending = None;
        state.layouts_received += 1;
    }
    // One job at a time: while the user keeps zooming, the next job starts from the view of the
    // moment the previous one lands, and frames meanwhile stretch the last mesh.
    if state.pending.is_some() || state.laid.as_ref().map(|l| l.key) == Some(key) {
        return;
    }
    let width = key.rect.width().max(1.0) as usize;
    let columns = ax.columns(key.x0, key.x1, width);
    let (send, rx) = channel();
    let (data, ctx) = (Arc::clone(data), ctx.clone());
    rayon::spawn(move || {
        let laid = compute_layout(&data, key, &columns);
        let _ = send.send(laid);
        ctx.request_repaint();
    });
    state.pending = Some((key, rx));
}

fn compute_layout(data: &Prepared, key: LayoutKey, columns: &[std::ops::Range<u32>]) -> Laid {
    let (device, replay) = (
        &data.loaded.snapshot.devices[key.device],
        &data.loaded.replays[key.device],
    );
    // y shows up to the window's peak reserved bytes, as PyTorch's viewer rescales to its brush.
    let first = columns.first().map_or(0, |c| c.start) as usize;
    let last = columns.last().map_or(0, |c| c.end) as usize;
    let reserved = replay.reserved_bytes();
    let active = replay.active_bytes();
    let window_peak = reserved
        .get(first..last.min(reserved.len()))
        .and_then(|r| r.iter().copied().max())
        .unwrap_or(0);
    let active_peak = active
        .get(first..last.min(active.len()))
        .and_then(|r| r.iter().copied().max())
        .unwrap_or(0);
    let at_start = replay.totals_after((first as u32).checked_sub(1));
    let peak = window_peak
        .max(active_peak)
        .max(at_start.reserved_bytes)
        .max(at_start.active_bytes)
        .max(1);
    let (y_min_bytes, y_max_bytes) = key.y_range.unwrap_or((0.0, peak as f64 * 1.05));
    // Bands thinner than `min_band_px` merge. One pixel, unless the mesh would exceed the frame
    // budget (deep zoom into a busy stack: every event moves the bands above it); then coarser.
    let mut min_band_px = 1.0f32;
    loop {
        let request = LayoutRequest {
            columns: columns.to_vec(),
            y_min_bytes,
            y_max_bytes,
            height_px: key.rect.height() / min_band_px,
        };
        let laid_columns = layout(device, replay, &data.orders[key.device], &request);
        let mesh = build_mesh(data, key, &laid_columns, (y_min_bytes, y_max_bytes));
        if mesh.vertices.len() <= MAX_MESH_VERTICES || min_band_px >= 16.0 {
            let top_stacks = top_stacks(replay, &laid_columns, LEGEND_ENTRIES);
            return Laid {
                key,
                top_stacks,
                columns: Arc::new(laid_columns),
                mesh: Arc::new(mesh),
                events: (
                    first as u32,
                    (last as u32).saturating_sub(1).max(first as u32),
                ),
                y_min_bytes,
                y_max_bytes,
            };
        }
        min_band_px *= 2.0;
    }
}

/// Takes a finished track; once the layout of the view has landed and none is on its way,
/// starts the track for it (on rayon).
fn request_track(ctx: &egui::Context, data: &Arc<Prepared>, state: &mut LifecycleState, ax: &Axis) {
    if let Some((key, rx)) = &state.track_pending
        && let Ok(track) = rx.try_recv()
    {
        state.track = Some((*key, track));
        state.track_pending = None;
    }
    let Some(laid) = state.laid.as_ref().filter(|_| state.pending.is_none()) else {
        return;
    };
    let key = laid.key;
    let done = state.track.as_ref().is_some_and(|(k, _)| *k == key);
    let asked = state.track_pending.as_ref().is_some_and(|(k, _)| *k == key);
    if done || asked || state.wanted != Some(key) {
        return;
    }
    let columns = Arc::clone(&laid.columns);
    let ranges = ax.columns(key.x0, key.x1, columns.len());
    let (send, rx) = channel();
    let (data, ctx) = (Arc::clone(data), ctx.clone());
    rayon::spawn(move || {
        let (device, replay) = (
            &data.loaded.snapshot.devices[key.device],
            &data.loaded.replays[key.device],
        );
        let track = fragmentation_track(device, replay, &ranges, &columns);
        let _ = send.send(Arc::new(track));
        ctx.request_repaint();
    });
    state.track_pending = Some((key, rx));
}

/// Per column: the most bytes reserved and not allocated over its events, and, every few
/// columns (at most `TRACK_POOL_SAMPLES` pools replayed), the largest free block of the pool at
/// the column's shown state.
fn fragmentation_track(
    device: &memsight_core::model::Device,
    replay: &memsight_core::replay::DeviceReplay,
    ranges: &[std::ops::Range<u32>],
    columns: &[Column],
) -> Vec<(u64, Option<u64>)> {
    let (reserved, allocated) = (replay.reserved_bytes(), replay.allocated_bytes());
    let unused = |e: usize| {
        reserved
            .get(e)
            .zip(allocated.get(e))
            .map_or(0, |(r, a)| u64::try_from(r - a).unwrap_or(0))
    };
    let every = ranges.len().div_ceil(TRACK_POOL_SAMPLES).max(1);
    ranges
        .iter()
        .zip(columns)
        .enumerate()
        .map(|(c, (range, column))| {
            let most = (range.start as usize..range.end as usize)
                .map(unused)
                .max()
                .unwrap_or_else(|| column.event.map_or(0, |e| unused(e as usize)));
            let largest = (c % every == 0).then(|| {
                replay
                    .pool_after(device, column.event)
                    .segments
                    .iter()
                    .flat_map(|s| &s.blocks)
                    .filter(|b| b.state == memsight_core::model::BlockState::Inactive)
                    .map(|b| b.size_bytes)
                    .max()
                    .unwrap_or(0)
            });
            (most, largest)
        })
        .collect()
}

/// The `n` call stacks whose bands cover the most of the chart (bytes × columns), with their
/// share of it: what the legend names in call-site colouring.
fn top_stacks(
    replay: &memsight_core::replay::DeviceReplay,
    columns: &[Column],
    n: usize,
) -> Vec<(memsight_core::model::StackId, f64)> {
    let mut area: FxHashMap<memsight_core::model::StackId, f64> = FxHashMap::default();
    let mut total = 0.0;
    for run in columns.iter().flat_map(|c| &c.runs) {
        let id = match run.band {
            Band::Lifetime(id) | Band::Merged { largest: id, .. } => id,
        };
        let bytes = run.y1_bytes.saturating_sub(run.y0_bytes) as f64;
        *area.entry(replay.lifetimes[id as usize].stack).or_default() += bytes;
        total += bytes;
    }
    let mut top: Vec<_> = area.into_iter().collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    top.truncate(n);
    top.into_iter()
        .map(|(stack, bytes)| (stack, bytes / total.max(1.0)))
        .collect()
}

/// One quad per run, extended to the right while the next column has the same run.
fn build_mesh(
    data: &Prepared,
    key: LayoutKey,
    columns: &[Column],
    (y_min_bytes, y_max_bytes): (f64, f64),
) -> Mesh {
    let rect = key.rect;
    let col_w = rect.width() / columns.len().max(1) as f32;
    let y_of = |bytes: u64| {
        rect.bottom()
            - ((bytes as f64 - y_min_bytes) / (y_max_bytes - y_min_bytes)) as f32 * rect.height()
    };
    let mut quads: Vec<(Rect, Color32)> = Vec::new();
    // Open quads of the previous column, by (band, top, bottom) in quarter pixels.
    let mut open: FxHashMap<(Band, i32, i32), usize> = FxHashMap::default();
    for (c, column) in columns.iter().enumerate() {
        let x0 = rect.left() + c as f32 * col_w;
        let mut next_open = FxHashMap::default();
        for run in &column.runs {
            // Edges snapped to quarter pixels: neighbours in a column share an edge exactly, and a
            // quad extended into the next column matches that column's run exactly (no seams).
            let (top_q, bottom_q) = (
                (y_of(run.y1_bytes).max(rect.top()) * 4.0).round() as i32,
                (y_of(run.y0_bytes).min(rect.bottom()) * 4.0).round() as i32,
            );
            let (top, bottom) = (top_q as f32 / 4.0, bottom_q as f32 / 4.0);
            let id = (run.band, top_q, bottom_q);
            if let Some(&q) = open.get(&id) {
                let quad: &mut (Rect, Color32) = &mut quads[q];
                quad.0.max.x = x0 + col_w;
                next_open.insert(id, q);
                continue;
            }
            let color = match run.band {
                Band::Lifetime(lt) => data.band_color(key.device, lt, key.color_by),
                Band::Merged { largest, .. } => {
                    data.merged_band_color(key.device, largest, key.color_by)
                }
            };
            quads.push((
                Rect::from_min_max(pos2(x0, top), pos2(x0 + col_w, bottom.max(top + 0.25))),
                color,
            ));
            next_open.insert(id, quads.len() - 1);
        }
        open = next_open;
    }
    let mut mesh = Mesh::default();
    for (r, color) in quads {
        mesh.add_colored_rect(r, color);
    }
    mesh
}

fn column_at(laid: &Laid, rect: Rect, p: Pos2) -> Option<usize> {
    if !rect.contains(p) {
        return None;
    }
    let c = (((p.x - rect.left()) / rect.width()) * laid.columns.len() as f32) as usize;
    (c < laid.columns.len()).then_some(c)
}

fn band_at(laid: &Laid, rect: Rect, p: Pos2) -> Option<(Band, usize)> {
    if !rect.contains(p) {
        return None;
    }
    let c = (((p.x - rect.left()) / rect.width()) * laid.columns.len() as f32) as usize;
    let column = laid.columns.get(c)?;
    let bytes = laid.bytes_at(rect, p.y);
    let i = column
        .runs
        .partition_point(|r| (r.y1_bytes as f64) <= bytes);
    column
        .runs
        .get(i)
        .filter(|r| (r.y0_bytes as f64) <= bytes)
        .map(|r| (r.band, c))
}

fn paint_marks(painter: &egui::Painter, laid: &Laid, rect: Rect, y_of: &dyn Fn(f64) -> f32) {
    let col_w = rect.width() / laid.columns.len().max(1) as f32;
    let points: Vec<Pos2> = laid
        .columns
        .iter()
        .enumerate()
        .map(|(c, col)| {
            pos2(
                rect.left() + (c as f32 + 0.5) * col_w,
                y_of(col.reserved_max_bytes as f64).max(rect.top()),
            )
        })
        .collect();
    painter.add(Shape::line(
        points.clone(),
        Stroke::new(1.5, palette::RESERVED_LINE),
    ));
    for (col, p) in laid.columns.iter().zip(&points) {
        if col.segment_events > 0 {
            painter.line_segment(
                [*p - vec2(0.0, 4.0), *p + vec2(0.0, 4.0)],
                Stroke::new(1.0, palette::SEGMENT_TICK),
            );
        }
        if col.oom_events > 0 {
            painter.line_segment(
                [pos2(p.x, rect.top()), pos2(p.x, rect.bottom())],
                Stroke::new(2.0, palette::OOM),
            );
            painter.text(
                pos2(p.x + 3.0, rect.top() + 2.0),
                Align2::LEFT_TOP,
                "OOM",
                FontId::proportional(11.0),
                palette::OOM,
            );
        }
        if col.snapshot_events > 0 {
            let top = pos2(p.x, rect.top());
            painter.add(Shape::convex_polygon(
                vec![
                    top,
                    top + vec2(-4.0, -0.0) + vec2(0.0, 7.0),
                    top + vec2(4.0, 7.0),
                ],
                palette::SNAPSHOT_MARK,
                Stroke::NONE,
            ));
        }
    }
}

/// The screen rectangles of the runs of the lifetimes `wanted` accepts, merged across columns
/// while a band keeps its place.
fn band_rects(
    laid: &Laid,
    rect: Rect,
    y_of: &dyn Fn(f64) -> f32,
    wanted: &dyn Fn(LifetimeId) -> bool,
) -> Vec<(Rect, LifetimeId, bool)> {
    let col_w = rect.width() / laid.columns.len().max(1) as f32;
    // Open rectangles of the previous column, by lifetime.
    let mut open: FxHashMap<LifetimeId, usize> = FxHashMap::default();
    // (rect, lifetime, whether it stands for a merged run).
    let mut rects: Vec<(Rect, LifetimeId, bool)> = Vec::new();
    for (c, col) in laid.columns.iter().enumerate() {
        let x0 = rect.left() + c as f32 * col_w;
        let mut next_open = FxHashMap::default();
        for run in &col.runs {
            // A run of allocations thinner than a pixel stands for its largest: where that one
            // is wanted, so is the run (else a call site of many small blocks never shows).
            let (id, merged) = match run.band {
                Band::Lifetime(id) => (id, false),
                Band::Merged { largest, .. } => (largest, true),
            };
            if !wanted(id) {
                continue;
            }
            let here = Rect::from_min_max(
                pos2(x0, y_of(run.y1_bytes as f64)),
                pos2(x0 + col_w, y_of(run.y0_bytes as f64)),
            );
            match open.get(&id) {
                Some(&k)
                    if (rects[k].0.top() - here.top()).abs() < 0.5
                        && (rects[k].0.bottom() - here.bottom()).abs() < 0.5 =>
                {
                    rects[k].0.max.x = here.max.x;
                    next_open.insert(id, k);
                }
                _ => {
                    rects.push((here, id, merged));
                    next_open.insert(id, rects.len() - 1);
                }
            }
        }
        open = next_open;
    }
    rects
}

fn paint_selection(
    painter: &egui::Painter,
    laid: &Laid,
    selected: LifetimeId,
    rect: Rect,
    y_of: &dyn Fn(f64) -> f32,
) {
    for (r, _, _) in band_rects(laid, rect, y_of, &|id| id == selected) {
        painter.rect_stroke(
            r,
            0.0,
            Stroke::new(2.0, palette::SELECTION),
            egui::StrokeKind::Outside,
        );
    }
}

/// What stands out over the bands: the range's blocks or a legend entry's (the rest dimmed),
/// and the pinned allocation's outline.
fn paint_highlights(
    painter: &egui::Painter,
    (data, device): (&Prepared, usize),
    state: &LifecycleState,
    range: Option<&FxHashSet<LifetimeId>>,
    pinned: Option<LifetimeId>,
    rect: Rect,
    y_of: &dyn Fn(f64) -> f32,
) {
    if let Some(keep) = range {
        paint_dimmed_except(
            painter,
            data,
            device,
            state,
            &|id| keep.contains(&id),
            rect,
            y_of,
        );
    } else if let Some(key) = state.legend_highlight.filter(|_| !state.hide_legend) {
        paint_dimmed_except(
            painter,
            data,
            device,
            state,
            &|id| key.holds(data, device, id),
            rect,
            y_of,
        );
    }
    if let (Some(selected), Some(laid)) = (pinned, &state.laid) {
        paint_selection(painter, laid, selected, rect, y_of);
    }
}

/// Dims the chart except the bands `keep` accepts (range analysis, a legend entry).
fn paint_dimmed_except(
    painter: &egui::Painter,
    data: &Prepared,
    device: usize,
    state: &LifecycleState,
    keep: &dyn Fn(LifetimeId) -> bool,
    rect: Rect,
    y_of: &dyn Fn(f64) -> f32,
) {
    let Some(laid) = &state.laid else { return };
    let highlight_color = state.highlight_color;
    painter.rect_filled(rect, 0.0, palette::DIM);
    for (r, id, merged) in band_rects(laid, rect, y_of, keep) {
        let color =
            highlight_color.unwrap_or_else(|| data.band_color(device, id, laid.key.color_by));
        // A merged run holds other blocks too: drawn paler than the blocks it is sure of.
        let color = if merged {
            color.gamma_multiply(0.5)
        } else {
            color
        };
        painter.rect_filled(r, 0.0, color);
    }
}

/// One legend row: its colour, the short label drawn, what its hover says, what it stands for.
struct LegendRow {
    color: Color32,
    label: String,
    detail: String,
    key: LegendKey,
}

/// The legend's rows for the colouring shown: the call sites that fill most of the chart (each at
/// least 2 %), the categories, or the file's owners (at most 12).
fn legend_rows(data: &Prepared, state: &LifecycleState) -> Vec<LegendRow> {
    let snapshot = &data.loaded.snapshot;
    match state.color_by {
        ColorBy::Category => Category::ALL
            .iter()
            .map(|&c| LegendRow {
                color: palette::category_color(c, 0),
                label: c.name().replace('_', " "),
                detail: format!("category: {}", c.name().replace('_', " ")),
                key: LegendKey::Category(c),
            })
            .collect(),
        ColorBy::Owner => data
            .owner_names
            .iter()
            .take(12)
            .enumerate()
            .map(|(k, o)| LegendRow {
                color: palette::owner_color(Some(k), 0),
                label: o.clone(),
                detail: format!("owner: {o}"),
                key: LegendKey::Owner(k),
            })
            .collect(),
        ColorBy::CallSite => {
            let stacks: Vec<_> = state
                .laid
                .iter()
                .flat_map(|laid| &laid.top_stacks)
                .filter(|(_, share)| *share >= 0.02)
                .copied()
                .collect();
            let headlines: Vec<String> = stacks
                .iter()
                .map(|&(stack, _)| {
                    memsight_core::frames::headline_frame(snapshot, stack)
                        .unwrap_or_else(|| "(no stack)".to_string())
                })
                .collect();
            stacks
                .iter()
                .zip(&headlines)
                .map(|(&(stack, share), headline)| {
                    // Two sites with one headline (one line, called from two places or running two
                    // operators) are told apart by the first frame where their stacks differ.
                    let twin = stacks
                        .iter()
                        .zip(&headlines)
                        .find(|((other, _), h)| *other != stack && *h == headline)
                        .map(|((other, _), _)| *other);
                    let headline =
                        match twin.and_then(|other| first_difference(snapshot, stack, other)) {
                            Some(frame) => format!("{} · {frame}", short_site(headline, 44)),
                            None => headline.clone(),
                        };
                    let frames: Vec<String> = display_frames(snapshot, stack, false)
                        .into_iter()
                        .take(8)
                        .map(|l| l.text)
                        .collect();
                    LegendRow {
                        color: palette::band_color(stack, 0),
                        label: format!("{}  {:.0} %", short_site(&headline, 84), share * 100.0),
                        detail: format!(
                            "{:.1} % of the allocated area in view\n{}",
                            share * 100.0,
                            if frames.is_empty() {
                                "no stack recorded".to_string()
                            } else {
                                frames.join("\n")
                            }
                        ),
                        key: LegendKey::CallSite(stack),
                    }
                })
                .collect()
        }
    }
}

/// The first frame of `stack`, innermost first and internal frames included, where it differs
/// from `other`, shortened (`None` when one is a prefix of the other).
fn first_difference(
    snapshot: &memsight_core::model::Snapshot,
    stack: memsight_core::model::StackId,
    other: memsight_core::model::StackId,
) -> Option<String> {
    let (a, b) = (
        display_frames(snapshot, stack, true),
        display_frames(snapshot, other, true),
    );
    let i = a.iter().zip(&b).position(|(x, y)| x.text != y.text)?;
    Some(short_site(&a[i].text, 36))
}

/// A call site's headline as a legend fits it: each `(path:line)` cut to `(file:line)`, then the
/// whole cut at the end to `max_chars`, so the function and file stay readable (never cut in the
/// middle of a path, where six sites in one folder would read the same).
pub fn short_site(headline: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(headline.len());
    let mut rest = headline;
    while let Some(open) = rest.find('(') {
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let Some(close) = rest.find(')') else { break };
        let inner = &rest[..close];
        match inner.rfind(':') {
            Some(colon) if inner[..colon].contains(['/', '\\']) => {
                let path = &inner[..colon];
                out.push_str(path.rsplit(['/', '\\']).next().unwrap_or(path));
                out.push_str(&inner[colon..]);
            }
            _ => out.push_str(inner),
        }
        rest = &rest[close..];
    }
    out.push_str(rest);
    if out.chars().count() > max_chars {
        out = out
            .chars()
            .take(max_chars.saturating_sub(1))
            .chain(['…'])
            .collect();
    }
    out
}

/// The legend over the chart, in the top corner where the data is lowest; folded to one button
/// where it would cover more than a fifth of the chart. Hovering a row shows the whole call
/// site; a click keeps its bands and dims the rest (a second click clears). Returns whether the
/// pointer is over the legend (its clicks are not the chart's).
fn legend_ui(ui: &mut Ui, data: &Prepared, state: &mut LifecycleState, chart_rect: Rect) -> bool {
    let rows = legend_rows(data, state);
    state.legend_drawn.clear();
    if rows.is_empty() {
        return false;
    }
    let painter = ui.painter_at(chart_rect);
    let font = FontId::proportional(11.0);
    let row_h = 15.0;
    let galleys: Vec<_> = rows
        .iter()
        .map(|r| painter.layout_no_wrap(r.label.clone(), font.clone(), palette::AXIS))
        .collect();
    let width = galleys.iter().map(|g| g.size().x).fold(0.0, f32::max) + 24.0;
    let size = vec2(width, row_h * (rows.len() + 1) as f32 + 4.0);
    let covers_much = size.x * size.y > chart_rect.area() * 0.2;
    let folded = state.legend_folded.unwrap_or(covers_much);
    let left = legend_goes_left(state, chart_rect, size.x);
    let header = if folded {
        format!("legend ({}): show", rows.len())
    } else {
        "legend: fold".to_string()
    };
    let header_galley = painter.layout_no_wrap(header, font.clone(), palette::AXIS);
    let size = if folded {
        vec2(header_galley.size().x + 12.0, row_h + 4.0)
    } else {
        size
    };
    let x = if left {
        chart_rect.left() + 6.0
    } else {
        chart_rect.right() - size.x - 6.0
    };
    let backing = Rect::from_min_size(pos2(x, chart_rect.top() + 6.0), size);
    painter.rect_filled(backing, 2.0, palette::LEGEND_BACKING);
    let header_rect = Rect::from_min_size(backing.min, vec2(backing.width(), row_h + 2.0));
    painter.galley(
        header_rect.min + vec2(6.0, 2.0),
        header_galley,
        palette::AXIS,
    );
    let id = ui.scope_id().with("lifecycle-legend");
    let header_response = ui
        .interact(header_rect, id.with("header"), Sense::click())
        .on_hover_text(if folded {
            "show the legend"
        } else {
            "fold the legend"
        });
    if header_response.clicked() {
        state.legend_folded = Some(!folded);
    }
    let mut hovered = header_response.hovered();
    state.legend_drawn = vec![(header_rect, String::new())];
    if !folded {
        for (k, (row, galley)) in rows.iter().zip(galleys).enumerate() {
            let rect = Rect::from_min_size(
                pos2(backing.left(), header_rect.bottom() + row_h * k as f32),
                vec2(backing.width(), row_h),
            );
            let chosen = state.legend_highlight == Some(row.key);
            if chosen {
                painter.rect_filled(rect, 0.0, palette::SELECTION.gamma_multiply(0.25));
            }
            let swatch =
                Rect::from_min_size(pos2(rect.left() + 4.0, rect.top() + 2.0), vec2(10.0, 10.0));
            painter.rect_filled(swatch, 1.0, row.color);
            painter.galley(pos2(rect.left() + 18.0, rect.top()), galley, palette::AXIS);
            let response = ui
                .interact(rect, id.with(k), Sense::click())
                .on_hover_ui(|ui| {
                    ui.label(&row.detail);
                    ui.weak(if chosen {
                        "click: show every band again"
                    } else {
                        "click: keep these bands, dim the rest"
                    });
                });
            hovered |= response.hovered();
            state.legend_drawn.push((rect, row.label.clone()));
            if response.clicked() {
                state.legend_highlight = (!chosen).then_some(row.key);
            }
        }
    }
    hovered
}

/// Whether a legend `width` wide goes in the top-left corner: where the reserved line under it
/// reaches less high than under the top-right one.
fn legend_goes_left(state: &LifecycleState, chart_rect: Rect, width: f32) -> bool {
    let Some(laid) = &state.laid else {
        return false;
    };
    let n = laid.columns.len().max(1);
    let col = |x: f32| {
        (((x - chart_rect.left()) / chart_rect.width()) * n as f32).clamp(0.0, n as f32 - 1.0)
            as usize
    };
    let top_under = |left: f32| {
        laid.columns[col(left)..=col(left + width)]
            .iter()
            .map(|c| laid.y_of(chart_rect, c.reserved_max_bytes as f64))
            .fold(chart_rect.bottom(), f32::min)
    };
    top_under(chart_rect.left() + 6.0) > top_under(chart_rect.right() - width - 6.0)
}

/// The events the event list's search matches, as ticks along the bottom of the chart (one per
/// pixel column at most).
fn paint_search_hits(
    painter: &egui::Painter,
    state: &LifecycleState,
    rect: Rect,
    ax: &Axis<'_>,
    x_of: &dyn Fn(f64) -> f32,
) {
    let Some(hits) = &state.search_hits else {
        return;
    };
    let (x0, x1) = state.x_range.unwrap_or_else(|| ax.full_range());
    let (first, last) = (ax.event_at(x0), ax.event_at(x1));
    let from = hits.partition_point(|&e| e < first);
    let mut last_px = f32::NEG_INFINITY;
    for &e in hits[from..].iter().take_while(|&&e| e <= last) {
        let px = x_of(ax.x_of_event(e as usize)).round();
        if px - last_px < 1.0 || !rect.x_range().contains(px) {
            continue;
        }
        last_px = px;
        painter.line_segment(
            [pos2(px, rect.bottom() - 7.0), pos2(px, rect.bottom())],
            Stroke::new(1.0, palette::SEARCH_HIT),
        );
    }
}

/// `record_function` steps (`ProfilerStep#N` …) as shaded, labelled spans: only the visible ones.
/// Narrower steps are neither shaded nor labelled.
const STEP_MIN_PX: f32 = 3.0;
/// No glyph of the 10-point step labels is narrower: a span with less room per character is not
/// worth laying the label out.
const STEP_LABEL_MIN_CHAR_PX: f32 = 4.0;

fn paint_steps(
    painter: &egui::Painter,
    data: &Prepared,
    device: usize,
    rect: Rect,
    view: (f64, f64),
    x_of: &dyn Fn(f64) -> f32,
    use_time: bool,
) {
    let steps = &data.steps[device];
    let span_x = |step: &Step| {
        if use_time {
            (step.start_us, step.end_us)
        } else {
            (step.start_event, step.end_event)
        }
    };
    let first = steps.partition_point(|s| span_x(s).1 < view.0);
    for (i, step) in steps.iter().enumerate().skip(first) {
        let (start, end) = span_x(step);
        if start > view.1 {
            break;
        }
        let (left, right) = (x_of(start).max(rect.left()), x_of(end).min(rect.right()));
        // Steps under a few pixels would shade into one grey blur and can hold no label;
        // skipping them keeps a zoomed-out view of thousands of steps cheap (at 12,820 steps
        // their labels' text layout was most of the frame).
        if right - left < STEP_MIN_PX {
            continue;
        }
        if i % 2 == 0 {
            painter.rect_filled(
                Rect::from_x_y_ranges(left..=right, rect.y_range()),
                0.0,
                palette::STEP_SHADE,
            );
        }
        // The longest label that fits the span whole: "step #12", else "#12", else "12"; none
        // when even the number does not fit (never a label cut to "step #").
        let number = step.name.strip_prefix("ProfilerStep#");
        let room = right - left - 5.0;
        let shortest = number.unwrap_or(&step.name).chars().count();
        if room < STEP_LABEL_MIN_CHAR_PX * shortest as f32 {
            continue;
        }
        let labels: Vec<String> = match number {
            Some(n) => vec![format!("step #{n}"), format!("#{n}"), n.to_string()],
            None => vec![step.name.clone()],
        };
        if let Some(galley) = labels
            .into_iter()
            .map(|l| painter.layout_no_wrap(l, FontId::proportional(10.0), palette::STEP_LABEL))
            .find(|g| g.size().x <= room)
        {
            painter.galley(
                pos2(left + 3.0, rect.top() + 12.0),
                galley,
                palette::STEP_LABEL,
            );
        }
    }
}

/// The overview's curve: the highest allocated bytes in each of `width` columns over `full`.
fn overview_curve(
    data: &Prepared,
    device: usize,
    use_time: bool,
    full: (f64, f64),
    width: f32,
) -> Vec<f32> {
    let ax = axis(data, device, use_time);
    let allocated = data.loaded.replays[device].allocated_bytes();
    let columns = ax.columns(full.0, full.1, width.max(1.0) as usize);

    // A column with no event (a quiet stretch in time mode) shows the state after the event
    // before it, never a drop to 0 that is not in the data.
    columns
        .iter()
        .map(|c| {
            allocated
                .get(c.start as usize..(c.end as usize).min(allocated.len()))
                .and_then(|s| s.iter().copied().max())
                .or_else(|| {
                    (c.start as usize)
                        .checked_sub(1)
                        .and_then(|e| allocated.get(e))
                        .copied()
                })
                .unwrap_or(0) as f32
        })
        .collect()
}

fn overview_ui(
    ui: &mut Ui,
    data: &Arc<Prepared>,
    device: usize,
    state: &mut LifecycleState,
    rect: Rect,
    full: (f64, f64),
    view: (f64, f64),
) {
    let key = LayoutKey {
        device,
        x0: full.0,
        x1: full.1,
        rect,
        use_time: state.use_time,
        y_range: None,
        // The overview is a curve: its colour never changes.
        color_by: ColorBy::CallSite,
    };
    if state.overview.as_ref().map(|(k, _)| *k) != Some(key) {
        let curve = overview_curve(data, device, state.use_time, full, rect.width());
        state.overview = Some((key, Arc::new(curve)));
    }
    let Some((_, curve)) = &state.overview else {
        return;
    };
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 0.0, palette::BACKGROUND);
    let peak = curve.iter().copied().fold(1.0f32, f32::max);
    let step = rect.width() / curve.len().max(1) as f32;
    let points: Vec<Pos2> = curve
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            pos2(
                rect.left() + (i as f32 + 0.5) * step,
                rect.bottom() - v / peak * (rect.height() - 2.0),
            )
        })
        .collect();
    let to_px = |x: f64| rect.left() + ((x - full.0) / (full.1 - full.0)) as f32 * rect.width();
    let window = Rect::from_x_y_ranges(
        to_px(view.0)..=to_px(view.1).max(to_px(view.0) + 2.0),
        rect.y_range(),
    );
    // The part outside the view is shaded, the view stays clear, and the curve is drawn on top
    // of both: nothing hides it, zoomed in or out.
    for outside in [
        Rect::from_x_y_ranges(rect.left()..=window.left(), rect.y_range()),
        Rect::from_x_y_ranges(window.right()..=rect.right(), rect.y_range()),
    ] {
        if outside.width() > 0.0 {
            painter.rect_filled(outside, 0.0, palette::OVERVIEW_OUTSIDE);
        }
    }
    // The area under the curve, one quad per column (a path fill needs a convex shape).
    let mut area = egui::Mesh::default();
    for pair in points.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let base = area.vertices.len() as u32;
        for p in [a, b, pos2(b.x, rect.bottom()), pos2(a.x, rect.bottom())] {
            area.colored_vertex(p, palette::OVERVIEW_FILL);
        }
        area.add_triangle(base, base + 1, base + 2);
        area.add_triangle(base, base + 2, base + 3);
    }
    painter.add(Shape::mesh(area));
    painter.add(Shape::line(
        points,
        Stroke::new(1.5, palette::OVERVIEW_CURVE),
    ));
    painter.rect_stroke(
        rect,
        0.0,
        Stroke::new(1.0, palette::GRID),
        egui::StrokeKind::Inside,
    );
    if window.width() < rect.width() - 1.0 {
        painter.rect_stroke(
            window,
            0.0,
            Stroke::new(1.5, palette::SELECTION),
            egui::StrokeKind::Inside,
        );
    }
    let response = ui.interact(
        rect,
        ui.scope_id().with("lifecycle-overview"),
        Sense::click_and_drag(),
    );
    if (response.dragged() || response.clicked())
        && let Some(p) = response.interact_pointer_pos()
    {
        let center = full.0 + f64::from((p.x - rect.left()) / rect.width()) * (full.1 - full.0);
        let half = (view.1 - view.0) / 2.0;
        let v = clamp_view((center - half, center + half), full);
        state.x_range = if v == full { None } else { Some(v) };
    }
}

/// Requested size, address, events, lifetime, stream, pool, context and the top frames.
pub fn lifetime_tooltip_ui(ui: &mut Ui, data: &Prepared, device: usize, id: LifetimeId) {
    let lifetime = &data.loaded.replays[device].lifetimes[id as usize];
    lifetime_facts_ui(ui, data, device, id);
    let s = &data.loaded.snapshot;
    let frames = display_frames(s, lifetime.stack, false);
    if frames.is_empty() {
        ui.weak("no stack recorded");
    }
    for line in frames.iter().take(6) {
        let text = if line.repeat > 1 {
            format!("{} (×{})", line.text, line.repeat)
        } else {
            line.text.clone()
        };
        ui.monospace(text);
    }
    if frames.len() > 6 {
        ui.weak(format!(
            "… {} more frames (click to pin and see all)",
            frames.len() - 6
        ));
    }
}

/// The facts of one allocation, as a grid.
/// The facts of lifetime `id`: size, address, events, category, stream, pool.
pub fn lifetime_facts_ui(ui: &mut Ui, data: &Prepared, device: usize, id: LifetimeId) {
    let l = &data.loaded.replays[device].lifetimes[id as usize];
    let s = &data.loaded.snapshot;
    let trace = &s.devices[device].trace;
    let event_text = |e: Option<u32>, missing: &str| match e {
        None => missing.to_string(),
        Some(e) => match trace
            .time_us
            .get(e as usize)
            .filter(|&&t| t != memsight_core::model::NO_TIME)
        {
            Some(&t) => format!(
                "event {e} (t = {:.6} s)",
                (t - trace.time_us[0]) as f64 / 1e6
            ),
            None => format!("event {e}"),
        },
    };
    egui::Grid::new(ui.scope_id().with("facts"))
        .num_columns(2)
        .show(ui, |ui| {
            let size = match l.size_bytes {
                Some(rounded) => format!(
                    "{} requested, {} block",
                    format_bytes(l.requested_size_bytes as i64),
                    format_bytes(rounded as i64)
                ),
                None => format!(
                    "{} requested ({} bytes)",
                    format_bytes(l.requested_size_bytes as i64),
                    l.requested_size_bytes
                ),
            };
            ui.label("size");
            ui.label(size);
            ui.end_row();
            ui.label("address");
            ui.monospace(format!("0x{:x}", l.addr));
            ui.end_row();
            ui.label("allocated");
            ui.label(event_text(l.alloc_event, "before the trace began"));
            ui.end_row();
            if let Some(e) = l.free_requested_event {
                ui.label("free requested");
                ui.label(event_text(Some(e), ""));
                ui.end_row();
            }
            ui.label("freed");
            ui.label(event_text(l.free_completed_event, "still live at the end"));
            ui.end_row();
            if let (Some(a), Some(f)) = (l.alloc_event, l.free_completed_event) {
                ui.label("lifetime");
                let dt = match (trace.time_us.get(a as usize), trace.time_us.get(f as usize)) {
                    (Some(&ta), Some(&tf)) if ta != memsight_core::model::NO_TIME => {
                        format!(", {:.3} ms", (tf - ta) as f64 / 1e3)
                    }
                    _ => String::new(),
                };
                ui.label(format!("{} events{dt}", f - a));
                ui.end_row();
            }
            ui.label("category");
            ui.label(data.category(device, id).name().replace('_', " "));
            ui.end_row();
            ui.label("stream");
            ui.label(format!(
                "{} (raw {})",
                l.stream,
                s.streams.get(l.stream as usize).copied().unwrap_or(0)
            ));
            ui.end_row();
            if let Some(e) = l.alloc_event.or(l.free_completed_event) {
                let e = e as usize;
                if let Some(&(a, b)) = s.pools.get(trace.pool[e] as usize) {
                    ui.label("pool");
                    ui.label(format!("({a}, {b})"));
                    ui.end_row();
                }
                for (what, id) in [
                    ("compile context", trace.compile_context[e]),
                    ("user metadata", trace.user_metadata[e]),
                ] {
                    if id != NO_STR && !s.str(id).is_empty() && s.str(id) != "N/A" {
                        ui.label(what);
                        ui.label(s.str(id));
                        ui.end_row();
                    }
                }
                if trace.action[e] == Action::Alloc {
                    let after = data.loaded.replays[device].totals_after(Some(e as u32));
                    ui.label("allocated after");
                    ui.label(format_bytes(after.allocated_bytes));
                    ui.end_row();
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overview_in_time_mode_never_drops_to_zero_between_events() {
        // A generated run has times; 4,000 events over 3,000 columns leave columns with no
        // event in them. Allocated memory never falls to 0 once the parameters are there
        // (read from the replay's totals), so neither may the curve.
        let data = Prepared::new(
            memsight_core::r#gen::generate_loaded(memsight_core::r#gen::Scenario::Leak, 4000, 1).1,
        );
        let ax = axis(&data, 0, true);
        assert!(ax.times.is_some(), "the generated trace has times");
        let full = ax.full_range();
        let curve = overview_curve(&data, 0, true, full, 3000.0);
        let columns = ax.columns(full.0, full.1, 3000);
        assert!(
            columns.iter().any(std::ops::Range::is_empty),
            "some columns hold no event"
        );
        let allocated = data.loaded.replays[0].allocated_bytes();
        let first_nonzero = allocated.iter().position(|&a| a > 0).expect("allocates") as u32;
        for (c, range) in columns.iter().enumerate() {
            if range.start > first_nonzero {
                assert!(curve[c] > 0.0, "column {c} ({range:?}) drops to 0");
            }
        }
    }

    #[test]
    fn views_stay_inside_the_trace() {
        assert_eq!(clamp_view((-50.0, 50.0), (0.0, 1000.0)), (0.0, 100.0));
        assert_eq!(clamp_view((950.0, 1100.0), (0.0, 1000.0)), (850.0, 1000.0));
        assert_eq!(clamp_view((-10.0, 2000.0), (0.0, 1000.0)), (0.0, 1000.0));
        assert_eq!(clamp_view((10.0, 11.0), (0.0, 1000.0)), (10.0, 14.0));
    }

    #[test]
    fn large_event_numbers_are_grouped_by_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
        assert_eq!(thousands(-4500), "-4,500");
        assert_eq!(x_label(5_000_000.0, 1e6, false), "5,000,000");
    }

    #[test]
    fn short_sites_keep_the_function_and_file_not_the_folders() {
        assert_eq!(
            short_site(
                "update_nodes (/mnt/data3/work/project/model/graph.py:212)",
                48
            ),
            "update_nodes (graph.py:212)"
        );
        assert_eq!(
            short_site(r"forward (D:\work\model.py:39)", 48),
            "forward (model.py:39)"
        );
        // No path, or an operator's argument list: as it is, cut at the end.
        assert_eq!(short_site("at::_ops::empty", 48), "at::_ops::empty");
        assert_eq!(
            short_site("a_very_long_function_name_indeed (x.py:1)", 20),
            "a_very_long_functio…"
        );
    }

    #[test]
    fn nice_steps_are_1_2_5() {
        use crate::views::axes::nice_step;
        assert!((nice_step(0.7) - 1.0).abs() < 1e-12);
        assert!((nice_step(130.0) - 200.0).abs() < 1e-9);
        assert!((nice_step(4100.0) - 5000.0).abs() < 1e-9);
    }
}

//! The memory-block lifecycle chart: every allocation as a band in the falling-stack layout,
//! reserved bytes as a line above, segment events as ticks, steps, OOMs and snapshots as marks,
//! an overview strip with a draggable window.
//!
//! The layout (core `lifecycle::layout`) and the mesh are built on rayon, off the UI thread, once
//! per view (range, size, device); a frame only paints the cached mesh and looks up the hovered
//! column, so its cost is bounded by the screen.

use std::sync::Arc;
use std::sync::mpsc::Receiver;

use egui::{Align2, Color32, FontId, Mesh, Pos2, Rect, Sense, Ui, pos2};
use memsight_core::category::Category;
use memsight_core::lifecycle::{Band, Column, even_columns};
use memsight_core::replay::LifetimeId;
use rustc_hash::FxHashSet;

use crate::palette::{self, ColorBy};
use crate::prepared::Prepared;
use crate::selection::{Command, Selection};

mod facts;
mod input;
mod layout;
mod legend;
mod marks;
mod overview;
mod plot;
mod track;

use input::{follow_selection, hover_and_click, view_input};
use layout::request_layout;
use legend::legend_ui;
use marks::{paint_highlights, paint_marks, paint_picks, paint_search_hits, paint_steps};
use overview::overview_ui;
use plot::{
    expected_plot_frame, measure_plot_frame, mesh_for_view, plot_ui, remember_plot_frame, roomy,
    split_area,
};
use track::{fragmentation_ui, paint_predicted, predicted_columns, request_track};

pub use facts::{lifetime_facts_ui, lifetime_tooltip_ui};
pub use legend::short_site;
pub use plot::thousands;

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
    /// Whether the legend was folded when last drawn (what `None` above came to).
    legend_was_folded: Option<bool>,
    /// The call sites and shares the legend names, fixed: an export at another size names what
    /// the screen named (shares are measured on the drawn bands, which depend on the size).
    legend_stacks: Option<Vec<(memsight_core::model::StackId, f64)>>,
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

impl LifecycleState {
    /// No room for a chart: nothing is laid out, nothing is waited for.
    fn no_room(&mut self) {
        self.plot_frame = None;
        self.pending = None;
        self.wanted = None;
    }

    /// Shows what `other` shows: the same view, colouring and options (not its layout, which is
    /// made again for this chart's size), and its legend as drawn: the same fold state and the
    /// same call sites with the same shares (measured on the other's bands). For an export at
    /// another size: the legend then stays fixed.
    pub fn copy_view(&mut self, other: &Self) {
        self.x_range = other.x_range;
        self.y_range = other.y_range;
        self.use_time = other.use_time;
        self.color_by = other.color_by;
        self.hide_legend = other.hide_legend;
        self.hide_fragmentation = other.hide_fragmentation;
        self.legend_highlight = other.legend_highlight;
        self.legend_folded = other.legend_folded.or(other.legend_was_folded);
        self.legend_stacks = other.laid.as_ref().map(|l| l.top_stacks.clone());
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

#[cfg(test)]
mod tests {
    use super::overview::overview_curve;
    use super::plot::x_label;
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

//! Profiler data in the app: memory curves per rank (side by side or overlaid, one time axis),
//! the operator table, the CANN components, the static-graph lifetimes and a rank comparison.
//!
//! Curves are drawn one stroke per pixel column from each series' min / max envelope
//! (`memsight_core::profiler::envelope`), so millions of samples cost what the window's width
//! costs; zoomed in far enough, the samples themselves are drawn as steps.

use std::collections::BTreeSet;
use std::sync::Arc;

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Ui, pos2, vec2};
use memsight_core::detect::Finding;
use memsight_core::profiler::envelope::Envelope;
use memsight_core::profiler::{APP_COMPONENT, Curve, OPERATOR_COMPONENT, ProfilerRun, Rank};
use memsight_core::units::format_bytes;
use rayon::prelude::*;

use crate::findings_view::FindingsState;
use crate::palette;

const AXIS_WIDTH: f32 = 70.0;
const AXIS_HEIGHT: f32 = 18.0;
/// Zoomed in so far that a plot shows fewer samples than this many per pixel: draw the samples.
const RAW_SAMPLES_PER_PIXEL: f64 = 2.0;

/// Which value of a curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    Allocated,
    Reserved,
    Active,
}

impl Field {
    fn values(self, curve: &Curve) -> &[f64] {
        match self {
            Self::Allocated => &curve.allocated_bytes,
            Self::Reserved => &curve.reserved_bytes,
            Self::Active => &curve.active_bytes,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Allocated => "allocated",
            Self::Reserved => "reserved",
            Self::Active => "active",
        }
    }
}

/// Where a series' samples are: a `memory_record` curve or an `npu_module_mem` one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    pub module: bool,
    pub component: String,
    pub field: Field,
}

/// A run with what the views precompute once (off the UI thread).
pub struct PreparedProfiler {
    pub run: ProfilerRun,
    pub findings: Vec<Finding>,
    /// Earliest and latest sample over every rank: the shared time axis.
    pub t0_us: f64,
    pub t1_us: f64,
    /// Per rank: its first and last sample.
    pub rank_spans_us: Vec<(f64, f64)>,
    /// Whether the ranks' spans overlap: one run on one clock, so absolute times line up.
    pub same_clock: bool,
    /// Per rank: the envelope of every series.
    envelopes: Vec<Vec<(SeriesKey, Envelope)>>,
    /// Per rank: the figures the tables show, computed once (a peak scans every sample).
    pub summaries: Vec<RankSummary>,
}

/// One rank's figures for the rank comparison and the components table.
#[derive(Clone, Debug, Default)]
pub struct RankSummary {
    pub samples: usize,
    pub peak_operator_allocated: Option<f64>,
    pub peak_operator_reserved: Option<f64>,
    pub peak_app_reserved: Option<f64>,
    /// CANN components that held memory, with their peak reserved bytes, largest first.
    pub module_peaks: Vec<(String, f64)>,
    /// Components that held nothing.
    pub idle_modules: usize,
}

impl RankSummary {
    fn new(rank: &Rank) -> Self {
        let peak =
            |c: &str, f: fn(&Curve) -> Option<(f64, usize)>| rank.curve(c).and_then(f).map(|p| p.0);
        let mut module_peaks: Vec<(String, f64)> = rank
            .modules
            .iter()
            .filter_map(|c| Some((c.component.clone(), c.peak_reserved()?.0)))
            .filter(|&(_, p)| p > 0.0)
            .collect();
        module_peaks.sort_by(|a, b| b.1.total_cmp(&a.1));
        Self {
            samples: rank.curves.iter().map(Curve::len).sum(),
            peak_operator_allocated: peak(OPERATOR_COMPONENT, Curve::peak_allocated),
            peak_operator_reserved: peak(OPERATOR_COMPONENT, Curve::peak_reserved),
            peak_app_reserved: peak(APP_COMPONENT, Curve::peak_reserved),
            idle_modules: rank.modules.len() - module_peaks.len(),
            module_peaks,
        }
    }
}

impl PreparedProfiler {
    pub fn new(run: ProfilerRun) -> Self {
        let findings = memsight_core::profiler::detect::analyze(&run);
        let rank_spans_us: Vec<(f64, f64)> = run
            .ranks
            .iter()
            .map(|r| r.time_span_us().unwrap_or((0.0, 1.0)))
            .collect();
        let starts = rank_spans_us.iter().map(|s| s.0);
        let ends = rank_spans_us.iter().map(|s| s.1);
        let (t0_us, latest_start) = starts
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
                (lo.min(t), hi.max(t))
            });
        let (earliest_end, t1_us) = ends.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
            (lo.min(t), hi.max(t))
        });
        let (t0_us, t1_us) = if t0_us <= t1_us {
            (t0_us, t1_us)
        } else {
            (0.0, 1.0)
        };
        let same_clock = latest_start <= earliest_end;
        // Every series of every rank, its envelope built on rayon (off the UI thread already:
        // this runs in the load job).
        let envelopes = run
            .ranks
            .par_iter()
            .map(|rank| {
                let series: Vec<(bool, &Curve, Field)> =
                    [(false, &rank.curves), (true, &rank.modules)]
                        .into_iter()
                        .flat_map(|(module, curves)| {
                            curves.iter().flat_map(move |curve| {
                                [Field::Allocated, Field::Reserved, Field::Active]
                                    .into_iter()
                                    .map(move |field| (module, curve, field))
                            })
                        })
                        .filter(|(_, curve, field)| field.values(curve).iter().any(|v| !v.is_nan()))
                        .collect();
                series
                    .into_par_iter()
                    .map(|(module, curve, field)| {
                        let key = SeriesKey {
                            module,
                            component: curve.component.clone(),
                            field,
                        };
                        (key, Envelope::new(field.values(curve)))
                    })
                    .collect()
            })
            .collect();
        let summaries = run.ranks.par_iter().map(RankSummary::new).collect();
        Self {
            run,
            findings,
            t0_us,
            t1_us,
            rank_spans_us,
            same_clock,
            envelopes,
            summaries,
        }
    }

    /// Operator row `row` of rank `rank`.
    pub fn operator(
        &self,
        rank: usize,
        row: usize,
    ) -> Option<&memsight_core::profiler::OperatorRow> {
        self.run.ranks.get(rank)?.operators.get(row)
    }

    fn series(&self, rank: usize, key: &SeriesKey) -> Option<(&Curve, &[f64], &Envelope)> {
        let r = self.run.ranks.get(rank)?;
        let curves = if key.module { &r.modules } else { &r.curves };
        let curve = curves.iter().find(|c| c.component == key.component)?;
        let env = self.envelopes[rank]
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, e)| e)?;
        Some((curve, key.field.values(curve), env))
    }
}

/// Which curves are on.
#[derive(Clone, Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one switch per curve the toolbar offers"
)]
pub struct Shown {
    pub allocated: bool,
    pub reserved: bool,
    pub active: bool,
    pub app: bool,
    /// Other `memory_record` components (PTA, GE, WORKSPACE) and `npu_module_mem` components.
    pub extra: BTreeSet<SeriesKey>,
}

impl Default for Shown {
    fn default() -> Self {
        Self {
            allocated: true,
            reserved: true,
            active: true,
            app: true,
            extra: BTreeSet::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Tab {
    #[default]
    Operators,
    Components,
    StaticGraph,
    Ranks,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortBy {
    #[default]
    Size,
    Duration,
    Time,
}

/// The operator table's settings and its rows in display order (rebuilt when they change).
#[derive(Default)]
pub struct TableState {
    pub sort: SortBy,
    pub ascending: bool,
    pub filter: String,
    /// Only rows allocated or released inside the picked range (Ctrl+drag), or the visible one.
    pub only_visible: bool,
    /// Rows matching the name filter, sorted; and what they were built from.
    sorted: Vec<(usize, usize)>,
    sorted_key: Option<(SortBy, bool, String)>,
    /// `sorted` limited to the range when `only_visible`; and the range it was built for.
    rows: Vec<(usize, usize)>,
    key: Option<(bool, u64, u64, bool)>,
}

/// One open profiler run.
pub struct ProfilerDoc {
    pub name: String,
    pub data: Arc<PreparedProfiler>,
    /// Visible time range, µs since `t0_us`; `None`: all.
    pub x_range: Option<(f64, f64)>,
    pub shown: Shown,
    /// Several ranks in one plot instead of one plot each.
    pub overlay: bool,
    /// Each rank's time counts from its own first sample (ranks recorded at different times);
    /// otherwise all count from the run's first sample.
    pub align_starts: bool,
    pub tab: Tab,
    pub table: TableState,
    /// The operator row whose allocation and release are marked on the curves: (rank, row).
    pub marked: Option<(usize, usize)>,
    pub findings: FindingsState,
    /// Where the curves were drawn last frame (for "export chart").
    pub chart_rect: Option<Rect>,
    /// A time range picked with Ctrl+drag (µs on the axis), for the operator table.
    pub range: Option<(f64, f64)>,
    /// Where a Ctrl+drag started.
    range_start: Option<f64>,
}

impl ProfilerDoc {
    pub fn new(name: String, data: PreparedProfiler) -> Self {
        Self {
            name,
            align_starts: !data.same_clock,
            data: Arc::new(data),
            x_range: None,
            shown: Shown::default(),
            overlay: false,
            tab: Tab::default(),
            table: TableState::default(),
            marked: None,
            findings: FindingsState::default(),
            chart_rect: None,
            range: None,
            range_start: None,
        }
    }

    /// Where rank `rank`'s time axis starts (epoch µs).
    pub fn offset_us(&self, rank: usize) -> f64 {
        if self.align_starts {
            self.data
                .rank_spans_us
                .get(rank)
                .map_or(self.data.t0_us, |s| s.0)
        } else {
            self.data.t0_us
        }
    }

    fn full_range(&self) -> (f64, f64) {
        let end = (0..self.data.rank_spans_us.len())
            .map(|r| self.data.rank_spans_us[r].1 - self.offset_us(r))
            .fold(1.0, f64::max);
        (0.0, end)
    }

    pub fn view(&self) -> (f64, f64) {
        self.x_range.unwrap_or_else(|| self.full_range())
    }

    /// Marks operator row `row` of `rank` on the curves, panning them to its allocation when it
    /// is out of view (the zoom stays).
    pub fn mark(&mut self, rank: usize, row: usize) {
        self.marked = Some((rank, row));
        let Some(o) = self.data.operator(rank, row) else {
            return;
        };
        let at = if o.alloc_us.is_nan() {
            o.release_us
        } else {
            o.alloc_us
        } - self.offset_us(rank);
        let (x0, x1) = self.view();
        if !at.is_nan() && (at < x0 || at > x1) {
            let half = (x1 - x0) / 2.0;
            self.x_range = Some(clamp_view((at - half, at + half), self.full_range()));
        }
    }

    /// Shows finding `index`: zooms to its time span, marks its operator row when it has one.
    pub fn show_finding(&mut self, index: usize) {
        let Some(f) = self.data.findings.get(index) else {
            return;
        };
        let rank = f
            .rank
            .as_ref()
            .and_then(|name| self.data.run.ranks.iter().position(|r| &r.name == name));
        if let Some((a, b)) = f.time_range_us {
            let offset = self.offset_us(rank.unwrap_or(0));
            let (a, b) = (a - offset, b - offset);
            let pad = ((b - a) * 0.25).max(1_000.0);
            self.x_range = Some(clamp_view((a - pad, b + pad), self.full_range()));
        }
        if f.kind == memsight_core::detect::FindingKind::OutlierAllocation
            && let (Some(rank), Some(row)) = (rank, f.focus_event)
        {
            self.mark(rank, row as usize);
        }
    }
}

fn clamp_view((a, b): (f64, f64), (lo, hi): (f64, f64)) -> (f64, f64) {
    let width = (b - a).clamp(1.0, hi - lo);
    let a = a.clamp(lo, hi - width);
    (a, a + width)
}

/// One line to draw in a plot.
struct Line<'a> {
    label: String,
    /// Epoch µs where this line's rank starts on the axis.
    offset_us: f64,
    color: Color32,
    curve: &'a Curve,
    values: &'a [f64],
    envelope: &'a Envelope,
    width: f32,
}

/// The lines of `rank` that `shown` asks for (own colours; `rank_color` in overlay mode).
fn lines_for<'a>(
    data: &'a PreparedProfiler,
    rank: usize,
    offset_us: f64,
    shown: &Shown,
    rank_color: Option<Color32>,
) -> Vec<Line<'a>> {
    let mut wanted: Vec<(SeriesKey, String, Color32, f32)> = Vec::new();
    let op = |field| SeriesKey {
        module: false,
        component: OPERATOR_COMPONENT.to_string(),
        field,
    };
    let prefix = rank_color.map_or_else(String::new, |_| format!("{} ", data.run.ranks[rank].name));
    let tint = |c: Color32| rank_color.unwrap_or(c);
    if shown.reserved {
        wanted.push((
            op(Field::Reserved),
            format!("{prefix}operator reserved"),
            tint(palette::CURVE_RESERVED),
            1.5,
        ));
    }
    // Active under allocated: where they are equal (most of the time) allocated shows.
    if shown.active && rank_color.is_none() {
        wanted.push((
            op(Field::Active),
            format!("{prefix}operator active"),
            palette::CURVE_ACTIVE,
            1.0,
        ));
    }
    if shown.allocated {
        wanted.push((
            op(Field::Allocated),
            format!("{prefix}operator allocated"),
            tint(palette::CURVE_ALLOCATED),
            1.0,
        ));
    }
    if shown.app {
        let key = SeriesKey {
            module: false,
            component: APP_COMPONENT.to_string(),
            field: Field::Reserved,
        };
        let color = rank_color.map_or(palette::CURVE_APP, |c| c.gamma_multiply(0.6));
        wanted.push((key, format!("{prefix}APP reserved"), color, 1.5));
    }
    for (i, key) in shown.extra.iter().enumerate() {
        let what = if key.module { "module " } else { "" };
        wanted.push((
            key.clone(),
            format!("{prefix}{what}{} {}", key.component, key.field.name()),
            palette::series_color(i + 3),
            1.0,
        ));
    }
    wanted
        .into_iter()
        .filter_map(|(key, label, color, width)| {
            let (curve, values, envelope) = data.series(rank, &key)?;
            Some(Line {
                label,
                offset_us,
                color,
                curve,
                values,
                envelope,
                width,
            })
        })
        .collect()
}

/// Index range of `curve`'s samples within `[a_us, b_us]` (absolute), one more on each side.
fn visible(curve: &Curve, a_us: f64, b_us: f64) -> (usize, usize) {
    let a = curve
        .time_us
        .partition_point(|&t| t < a_us)
        .saturating_sub(1);
    let b = (curve.time_us.partition_point(|&t| t <= b_us) + 1).min(curve.len());
    (a, b)
}

/// The y range that fits every line over the view (µs on the axis).
fn y_range(lines: &[Line], x0: f64, x1: f64) -> (f64, f64) {
    let mut hi = 0.0f64;
    for line in lines {
        let (a, b) = visible(line.curve, x0 + line.offset_us, x1 + line.offset_us);
        if let Some((_, max)) = line.envelope.range(line.values, a, b) {
            hi = hi.max(max);
        }
    }
    (0.0, if hi > 0.0 { hi * 1.08 } else { 1024.0 * 1024.0 })
}

/// Draws `lines` into `rect` over the doc's view; handles zoom, pan, hover; returns the time (µs
/// since t0) under the pointer when hovered.
fn plot_ui(ui: &mut Ui, rect: Rect, doc: &mut ProfilerDoc, title: &str, lines: &[Line], id: &str) {
    let chart = Rect::from_min_max(
        rect.min + vec2(AXIS_WIDTH, 16.0),
        pos2(rect.max.x - 8.0, rect.max.y - AXIS_HEIGHT),
    );
    if chart.width() < 20.0 || chart.height() < 20.0 {
        return;
    }
    let response = ui.interact(chart, ui.scope_id().with(id), Sense::click_and_drag());
    let full = doc.full_range();
    let (mut x0, mut x1) = doc.view();
    // Wheel: zoom around the pointer; drag: pan; double-click: everything.
    if response.hovered() {
        let (scroll, zoom) = ui.input(|i| (i.smooth_scroll_delta, i.zoom_delta()));
        let mut factor = f64::from(zoom).recip();
        let wheel = scroll.y + scroll.x;
        if wheel != 0.0 {
            factor *= (-f64::from(wheel) * 0.003).exp();
        }
        if (factor - 1.0).abs() > 1e-6
            && let Some(p) = response.hover_pos()
        {
            let at = x0 + f64::from((p.x - chart.left()) / chart.width()) * (x1 - x0);
            (x0, x1) = clamp_view((at - (at - x0) * factor, at + (x1 - at) * factor), full);
            doc.x_range = Some((x0, x1));
        }
    }
    // Ctrl+drag picks a time range (for the operator table); a plain drag pans.
    let at_pointer = |p: Pos2| x0 + f64::from((p.x - chart.left()) / chart.width()) * (x1 - x0);
    if response.drag_started()
        && ui.input(|i| i.modifiers.command)
        && let Some(p) = response.interact_pointer_pos()
    {
        doc.range_start = Some(at_pointer(p));
    }
    if response.dragged() {
        if let (Some(start), Some(p)) = (doc.range_start, response.interact_pointer_pos()) {
            let end = at_pointer(p);
            doc.range = Some((start.min(end), start.max(end)));
        } else {
            let dx = f64::from(response.drag_delta().x / chart.width()) * (x1 - x0);
            (x0, x1) = clamp_view((x0 - dx, x1 - dx), full);
            doc.x_range = Some((x0, x1));
        }
    }
    if response.drag_stopped() {
        doc.range_start = None;
    }
    if response.double_clicked() {
        doc.x_range = None;
        (x0, x1) = full;
    }
    let (y0, y1) = y_range(lines, x0, x1);
    let painter = ui.painter_at(rect);
    painter.rect_filled(chart, 0.0, palette::BACKGROUND);
    crate::lifecycle_view::paint_y_axis(&painter, chart, (y0, y1));
    paint_time_axis(&painter, chart, (x0, x1));
    painter.text(
        pos2(rect.left() + 4.0, rect.top() + 2.0),
        Align2::LEFT_TOP,
        title,
        FontId::proportional(12.0),
        palette::AXIS,
    );
    for line in lines {
        paint_line(&painter, chart, line, (x0, x1), (y0, y1));
    }
    paint_range(&painter, chart, doc.range, (x0, x1));
    paint_marked(&painter, chart, doc, (x0, x1));
    paint_legend(&painter, chart, lines);
    if let Some(p) = response.hover_pos() {
        let t = x0 + f64::from((p.x - chart.left()) / chart.width()) * (x1 - x0);
        painter.line_segment(
            [pos2(p.x, chart.top()), pos2(p.x, chart.bottom())],
            Stroke::new(1.0, palette::HOVER_LINE),
        );
        response.on_hover_ui_at_pointer(|ui| {
            ui.label(format!("t = {:.6} s", t / 1e6));
            for line in lines {
                let i = line
                    .curve
                    .time_us
                    .partition_point(|&x| x <= t + line.offset_us);
                if let Some(i) = i.checked_sub(1)
                    && !line.values[i].is_nan()
                {
                    ui.label(
                        egui::RichText::new(format!(
                            "{}: {} ({} B)",
                            line.label,
                            format_bytes(line.values[i] as i64),
                            line.values[i] as i64
                        ))
                        .color(line.color),
                    );
                }
            }
        });
    }
}

/// One line: one stroke per pixel column from its envelope, or its samples as steps when few.
fn paint_line(
    painter: &egui::Painter,
    chart: Rect,
    line: &Line,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) {
    let columns = chart.width().max(1.0) as usize;
    // This line's samples are on the axis at their time minus its rank's offset.
    let (a_us, b_us) = (x0 + line.offset_us, x1 + line.offset_us);
    let to_px = |t_us: f64, v: f64| {
        pos2(
            chart.left() + ((t_us - a_us) / (b_us - a_us)) as f32 * chart.width(),
            chart.bottom() - ((v - y0) / (y1 - y0)) as f32 * chart.height(),
        )
    };
    let (a, b) = visible(line.curve, a_us, b_us);
    let stroke = Stroke::new(line.width, line.color);
    if (b - a) as f64 <= RAW_SAMPLES_PER_PIXEL * columns as f64 {
        // Few samples: steps through each one (a value holds until the next sample).
        let mut points: Vec<Pos2> = Vec::with_capacity((b - a) * 2);
        for i in a..b {
            let v = line.values[i];
            if v.is_nan() {
                continue;
            }
            let p = to_px(line.curve.time_us[i], v);
            if let Some(last) = points.last().copied() {
                points.push(pos2(p.x, last.y));
            }
            points.push(p);
        }
        if points.len() >= 2 {
            painter.add(egui::Shape::line(points, stroke));
        }
    } else {
        // One vertical stroke per column, from the column's min to its max.
        let mut points: Vec<Pos2> = Vec::with_capacity(columns * 2);
        for c in 0..columns {
            let ta = a_us + (b_us - a_us) * c as f64 / columns as f64;
            let tb = a_us + (b_us - a_us) * (c + 1) as f64 / columns as f64;
            let ia = line.curve.time_us.partition_point(|&t| t < ta);
            let ib = line.curve.time_us.partition_point(|&t| t < tb);
            let Some((lo, hi)) = line.envelope.range(line.values, ia, ib) else {
                continue;
            };
            let x = chart.left() + c as f32 + 0.5;
            let (py_lo, py_hi) = (to_px(ta, lo).y, to_px(ta, hi).y);
            points.push(pos2(x, py_hi));
            points.push(pos2(x, py_lo.max(py_hi + 1.0)));
        }
        if points.len() >= 2 {
            painter.add(egui::Shape::line(points, stroke));
        }
    }
}

/// The picked time range, shaded.
fn paint_range(
    painter: &egui::Painter,
    chart: Rect,
    range: Option<(f64, f64)>,
    (x0, x1): (f64, f64),
) {
    if let Some((a, b)) = range {
        let px = |t: f64| chart.left() + ((t - x0) / (x1 - x0)) as f32 * chart.width();
        let (pa, pb) = (px(a).max(chart.left()), px(b).min(chart.right()));
        if pb > pa {
            painter.rect_filled(
                Rect::from_x_y_ranges(pa..=pb, chart.y_range()),
                0.0,
                palette::RANGE_DRAG,
            );
        }
    }
}

/// The marked operator row's allocation and release as vertical lines.
fn paint_marked(painter: &egui::Painter, chart: Rect, doc: &ProfilerDoc, (x0, x1): (f64, f64)) {
    let Some((rank, row)) = doc.marked else {
        return;
    };
    let Some(o) = doc.data.operator(rank, row) else {
        return;
    };
    let (a_us, b_us) = (x0 + doc.offset_us(rank), x1 + doc.offset_us(rank));
    for (t, what) in [(o.alloc_us, "alloc"), (o.release_us, "release")] {
        if t.is_nan() || t < a_us || t > b_us {
            continue;
        }
        let x = chart.left() + ((t - a_us) / (b_us - a_us)) as f32 * chart.width();
        painter.line_segment(
            [pos2(x, chart.top()), pos2(x, chart.bottom())],
            Stroke::new(1.5, palette::MARK),
        );
        painter.text(
            pos2(x + 3.0, chart.top() + 2.0),
            Align2::LEFT_TOP,
            what,
            FontId::proportional(11.0),
            palette::MARK,
        );
    }
}

/// The legend in the chart's top right corner, as wide as its longest label.
fn paint_legend(painter: &egui::Painter, chart: Rect, lines: &[Line]) {
    let font = FontId::proportional(11.0);
    let widest = lines
        .iter()
        .map(|l| {
            painter
                .layout_no_wrap(l.label.clone(), font.clone(), palette::AXIS)
                .size()
                .x
        })
        .fold(0.0f32, f32::max);
    let x = chart.right() - widest - 28.0;
    let mut y = chart.top() + 4.0;
    // A backing so the labels read over the curves.
    painter.rect_filled(
        Rect::from_min_size(
            pos2(x - 4.0, y - 2.0),
            vec2(widest + 28.0, lines.len() as f32 * 14.0 + 4.0),
        ),
        2.0,
        palette::LEGEND_BACKING,
    );
    for line in lines {
        painter.line_segment(
            [pos2(x, y + 6.0), pos2(x + 16.0, y + 6.0)],
            Stroke::new(2.0, line.color),
        );
        painter.text(
            pos2(x + 20.0, y),
            Align2::LEFT_TOP,
            &line.label,
            font.clone(),
            palette::AXIS,
        );
        y += 14.0;
    }
}

fn paint_time_axis(painter: &egui::Painter, chart: Rect, (x0, x1): (f64, f64)) {
    let step = crate::lifecycle_view::nice_step((x1 - x0) / 8.0);
    let mut t = (x0 / step).ceil() * step;
    while t <= x1 {
        let x = chart.left() + ((t - x0) / (x1 - x0)) as f32 * chart.width();
        painter.line_segment(
            [pos2(x, chart.top()), pos2(x, chart.bottom())],
            Stroke::new(1.0, palette::GRID),
        );
        painter.text(
            pos2(x, chart.bottom() + 2.0),
            Align2::CENTER_TOP,
            format_seconds(t / 1e6, step / 1e6),
            FontId::proportional(11.0),
            palette::AXIS,
        );
        t += step;
    }
}

/// Seconds with as many decimals as the tick step needs.
fn format_seconds(s: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).clamp(0.0, 6.0) as usize;
    format!("{s:.decimals$} s")
}

/// The curves: one plot per rank, or every rank in one plot.
pub fn curves_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    let data = Arc::clone(&doc.data);
    let rect = ui.available_rect_before_wrap();
    ui.allocate_rect(rect, Sense::hover());
    doc.chart_rect = Some(rect);
    let ranks = data.run.ranks.len();
    if ranks == 0 {
        ui.label("no rank found");
        return;
    }
    if doc.overlay && ranks > 1 {
        let lines: Vec<Line> = (0..ranks)
            .flat_map(|r| {
                lines_for(
                    &data,
                    r,
                    doc.offset_us(r),
                    &doc.shown,
                    Some(palette::series_color(r)),
                )
            })
            .collect();
        plot_ui(ui, rect, doc, "all ranks", &lines, "overlay");
    } else {
        let height = rect.height() / ranks as f32;
        for r in 0..ranks {
            let plot = Rect::from_min_size(
                pos2(rect.left(), rect.top() + height * r as f32),
                vec2(rect.width(), height),
            );
            let lines = lines_for(&data, r, doc.offset_us(r), &doc.shown, None);
            let rank = &data.run.ranks[r];
            let title = format!(
                "{}{}{}",
                rank.name,
                rank.device
                    .as_ref()
                    .map_or_else(String::new, |d| format!(" ({d})")),
                if rank.coarse_times {
                    "  -  memory_record.csv has rounded timestamps (1.69512E+15): its curves cannot be placed in time"
                } else {
                    ""
                }
            );
            plot_ui(ui, plot, doc, &title, &lines, &format!("rank-{r}"));
        }
    }
}

/// The bar above the curves: which curves, overlay, zoom reset.
pub fn toolbar_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    let data = Arc::clone(&doc.data);
    ui.horizontal_wrapped(|ui| {
        ui.label(format!("{} rank(s)", data.run.ranks.len()));
        let warnings: Vec<&memsight_core::profiler::ProfilerWarning> =
            data.run.ranks.iter().flat_map(|r| &r.warnings).collect();
        let dropped: u64 = data.run.ranks.iter().map(|r| r.warnings_dropped).sum();
        if !warnings.is_empty() {
            ui.label(
                egui::RichText::new(crate::count(warnings.len() + dropped as usize, "warning"))
                    .color(palette::WARNING_TEXT),
            )
            .on_hover_ui(|ui| {
                for w in warnings.iter().take(20) {
                    let line = w.line.map_or_else(String::new, |l| format!(":{l}"));
                    ui.label(format!("{}{line}: {}", w.file.display(), w.message));
                }
                if warnings.len() > 20 || dropped > 0 {
                    ui.weak(format!("… and {} more", warnings.len().saturating_sub(20) as u64 + dropped));
                }
            });
        }
        ui.separator();
        ui.checkbox(&mut doc.shown.allocated, "operator allocated");
        ui.checkbox(&mut doc.shown.reserved, "operator reserved");
        ui.checkbox(&mut doc.shown.active, "operator active");
        ui.checkbox(&mut doc.shown.app, "APP reserved");
        // The other memory_record components, on demand.
        let others: BTreeSet<String> = data
            .run
            .ranks
            .iter()
            .flat_map(|r| &r.curves)
            .map(|c| c.component.clone())
            .filter(|c| c != OPERATOR_COMPONENT && c != APP_COMPONENT)
            .collect();
        for component in others {
            let label = format!("{component} reserved");
            series_checkbox(ui, &mut doc.shown, false, component, &label);
        }
        ui.separator();
        if data.run.ranks.len() > 1 {
            ui.checkbox(&mut doc.overlay, "overlay ranks");
            ui.checkbox(&mut doc.align_starts, "each rank from its own start")
                .on_hover_text(if data.same_clock {
                    "the ranks overlap in time: off, they share one clock"
                } else {
                    "the ranks were recorded at different times, so each counts from its first sample"
                });
        }
        if ui.button("reset zoom").clicked() {
            doc.x_range = None;
        }
        if let Some((a, b)) = doc.range {
            ui.label(
                egui::RichText::new(format!("range {:.6} – {:.6} s", a / 1e6, b / 1e6))
                    .color(palette::RANGE),
            );
            if ui.small_button("clear range").clicked() {
                doc.range = None;
            }
        }
        let (x0, x1) = doc.view();
        ui.weak(format!(
            "showing {:.3} – {:.3} s (wheel: zoom, drag: pan, Ctrl+drag: pick a range, double-click: all)",
            x0 / 1e6,
            x1 / 1e6
        ));
    });
}

/// A checkbox that adds the reserved curve of `component` (of `npu_module_mem.csv` when `module`)
/// to the plots or takes it away.
fn series_checkbox(
    ui: &mut Ui,
    shown: &mut Shown,
    module: bool,
    component: String,
    label: &str,
) -> egui::Response {
    let key = SeriesKey {
        module,
        component,
        field: Field::Reserved,
    };
    let mut on = shown.extra.contains(&key);
    let response = ui.checkbox(&mut on, label);
    if response.changed() {
        if on {
            shown.extra.insert(key);
        } else {
            shown.extra.remove(&key);
        }
    }
    response
}

/// The tabs under the curves.
pub fn tables_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    ui.horizontal(|ui| {
        for (tab, label) in [
            (Tab::Operators, "Operators"),
            (Tab::Components, "Components"),
            (Tab::StaticGraph, "Static graph"),
            (Tab::Ranks, "Ranks"),
        ] {
            ui.selectable_value(&mut doc.tab, tab, label);
        }
    });
    ui.separator();
    match doc.tab {
        Tab::Operators => operators_ui(ui, doc),
        Tab::Components => components_ui(ui, doc),
        Tab::StaticGraph => static_graph_ui(ui, doc),
        Tab::Ranks => ranks_ui(ui, doc),
    }
}

/// Seconds on the axis of a rank that starts at `offset_us`.
fn relative_s(offset_us: f64, t_us: f64) -> String {
    if t_us.is_nan() {
        "-".to_string()
    } else {
        format!("{:.6}", (t_us - offset_us) / 1e6)
    }
}

/// Rebuilds the table's rows when their settings changed: sorting and the name filter once per
/// change (the expensive part), the time range on top of that every time it moves (a linear pass,
/// so zooming with "only rows in the range" on stays smooth on millions of rows).
fn table_rows(doc: &mut ProfilerDoc) {
    let t = &doc.table;
    let sort_key = (t.sort, t.ascending, t.filter.clone());
    if t.sorted_key.as_ref() != Some(&sort_key) {
        doc.table.sorted = sorted_rows(&doc.data, &doc.table);
        doc.table.sorted_key = Some(sort_key);
        doc.table.key = None;
    }
    let (x0, x1) = doc.range.unwrap_or_else(|| doc.view());
    let t = &doc.table;
    let key = if t.only_visible {
        (true, x0.to_bits(), x1.to_bits(), doc.align_starts)
    } else {
        (false, 0, 0, false)
    };
    if t.key == Some(key) {
        return;
    }
    let rows = if t.only_visible {
        let data = &doc.data;
        let offsets: Vec<f64> = (0..data.run.ranks.len())
            .map(|r| doc.offset_us(r))
            .collect();
        let inside = |r: usize, v: f64| !v.is_nan() && v >= x0 + offsets[r] && v <= x1 + offsets[r];
        t.sorted
            .iter()
            .copied()
            .filter(|&(r, i)| {
                let o = &data.run.ranks[r].operators[i];
                inside(r, o.alloc_us) || inside(r, o.release_us)
            })
            .collect()
    } else {
        t.sorted.clone()
    };
    doc.table.rows = rows;
    doc.table.key = Some(key);
}

/// Every operator row whose name matches the filter, in the table's sort order (unknown values
/// last either way).
fn sorted_rows(data: &PreparedProfiler, t: &TableState) -> Vec<(usize, usize)> {
    let filter = t.filter.to_lowercase();
    let mut rows: Vec<(usize, usize)> = data
        .run
        .ranks
        .iter()
        .enumerate()
        .flat_map(|(r, rank)| {
            rank.operators
                .iter()
                .enumerate()
                .filter(|(_, o)| {
                    filter.is_empty() || rank.operator_name(o).to_lowercase().contains(&filter)
                })
                .map(move |(i, _)| (r, i))
        })
        .collect();
    let op = |&(r, i): &(usize, usize)| &data.run.ranks[r].operators[i];
    let value = |row: &(usize, usize)| match t.sort {
        SortBy::Size => op(row).size_bytes as f64,
        SortBy::Duration => op(row).duration_us(),
        SortBy::Time => op(row).alloc_us,
    };
    rows.sort_by(|a, b| {
        let (va, vb) = (value(a), value(b));
        match (va.is_nan(), vb.is_nan()) {
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ if t.ascending => va.total_cmp(&vb),
            _ => vb.total_cmp(&va),
        }
    });
    rows
}

/// A table cell exactly `width` wide, so header and rows line up.
fn cell<R>(ui: &mut Ui, width: f32, add: impl FnOnce(&mut Ui) -> R) -> R {
    ui.allocate_ui_with_layout(
        vec2(width, 18.0),
        egui::Layout::left_to_right(egui::Align::Center),
        |ui| {
            ui.set_min_width(width);
            ui.set_max_width(width);
            add(ui)
        },
    )
    .inner
}

/// Widths of the operator table's columns: rank, name, size, allocated, released, duration.
const COLUMN_WIDTHS: [f32; 6] = [160.0, 220.0, 90.0, 100.0, 100.0, 90.0];

/// The operator table's header; the sortable columns are buttons.
fn operators_header(ui: &mut Ui, doc: &mut ProfilerDoc, multi: bool) {
    let header = |ui: &mut Ui, doc: &mut ProfilerDoc, label: &str, sort: Option<SortBy>| {
        let Some(sort) = sort else {
            ui.strong(label);
            return;
        };
        let arrow = if doc.table.sort == sort {
            if doc.table.ascending { " ^" } else { " v" }
        } else {
            ""
        };
        if ui.button(format!("{label}{arrow}")).clicked() {
            if doc.table.sort == sort {
                doc.table.ascending = !doc.table.ascending;
            } else {
                doc.table.sort = sort;
                doc.table.ascending = false;
            }
        }
    };
    ui.horizontal(|ui| {
        for (k, (label, sort)) in [
            ("rank", None),
            ("name", None),
            ("size", Some(SortBy::Size)),
            ("allocated (s)", Some(SortBy::Time)),
            ("released (s)", None),
            ("duration", Some(SortBy::Duration)),
        ]
        .into_iter()
        .enumerate()
        {
            if k == 0 && !multi {
                continue;
            }
            cell(ui, COLUMN_WIDTHS[k], |ui| header(ui, doc, label, sort));
        }
    });
}

fn operators_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    ui.horizontal(|ui| {
        let label = ui.label("operator name");
        ui.add(
            egui::TextEdit::singleline(&mut doc.table.filter)
                .desired_width(160.0)
                .hint_text("filter"),
        )
        .labelled_by(label.id);
        ui.checkbox(
            &mut doc.table.only_visible,
            "only rows allocated or released in the range (Ctrl+drag on the curves; without one, the visible range)",
        );
    });
    table_rows(doc);
    let data = Arc::clone(&doc.data);
    let total: usize = data.run.ranks.iter().map(|r| r.operators.len()).sum();
    ui.weak(format!(
        "{} of {total} rows (click a row: mark it on the curves)",
        doc.table.rows.len()
    ));
    let multi = data.run.ranks.len() > 1;
    operators_header(ui, doc, multi);
    let widths = COLUMN_WIDTHS;
    // Taken out for the frame (no copy), put back below.
    let rows = std::mem::take(&mut doc.table.rows);
    egui::ScrollArea::vertical()
        .id_salt("operator-rows")
        .auto_shrink([false, false])
        .show_rows(ui, 18.0, rows.len(), |ui, range| {
            for &(r, i) in &rows[range] {
                let rank = &data.run.ranks[r];
                let o = &rank.operators[i];
                let selected = doc.marked == Some((r, i));
                let cells = [
                    rank.name.clone(),
                    rank.operator_name(o).to_string(),
                    format_bytes(o.size_bytes),
                    relative_s(doc.offset_us(r), o.alloc_us),
                    relative_s(doc.offset_us(r), o.release_us),
                    if o.duration_us().is_nan() {
                        "-".to_string()
                    } else {
                        format!("{:.3} ms", o.duration_us() / 1e3)
                    },
                ];
                let clicked = ui
                    .horizontal(|ui| {
                        let mut clicked = false;
                        for (k, value) in cells.iter().enumerate() {
                            if k == 0 && !multi {
                                continue;
                            }
                            let text = egui::RichText::new(value).color(if selected {
                                palette::MARK
                            } else {
                                palette::AXIS
                            });
                            clicked |= cell(ui, widths[k], |ui| {
                                ui.add(egui::Label::new(text).truncate().sense(Sense::click()))
                                    .clicked()
                            });
                        }
                        clicked
                    })
                    .inner;
                if clicked {
                    doc.mark(r, i);
                }
            }
        });
    doc.table.rows = rows;
}

fn components_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    let data = Arc::clone(&doc.data);
    egui::ScrollArea::vertical()
        .id_salt("components")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            for (rank, summary) in data.run.ranks.iter().zip(&data.summaries) {
                ui.strong(&rank.name);
                if rank.modules.is_empty() {
                    ui.weak("no npu_module_mem.csv for this rank");
                    continue;
                }
                let peaks = &summary.module_peaks;
                let zero = summary.idle_modules;
                let largest = peaks.first().map_or(1.0, |p| p.1);
                egui::Grid::new(format!("components-{}", rank.name))
                    .striped(true)
                    .show(ui, |ui| {
                        for (name, peak) in peaks {
                            let peak = *peak;
                            series_checkbox(ui, &mut doc.shown, true, name.clone(), name)
                                .on_hover_text("plot it on the curves");
                            ui.label(format!("peak {}", format_bytes(peak as i64)));
                            let (bar, _) =
                                ui.allocate_exact_size(vec2(200.0, 10.0), Sense::hover());
                            ui.painter().rect_filled(
                                Rect::from_min_size(
                                    bar.min,
                                    vec2(bar.width() * (peak / largest) as f32, bar.height()),
                                ),
                                0.0,
                                palette::CURVE_ALLOCATED,
                            );
                            ui.end_row();
                        }
                    });
                ui.weak(format!("{zero} more components held nothing"));
                ui.separator();
            }
        });
}

fn static_graph_ui(ui: &mut Ui, doc: &ProfilerDoc) {
    let data = &doc.data;
    let Some(rank) = data.run.ranks.iter().find(|r| !r.static_ops.is_empty()) else {
        ui.weak("no static_op_mem.csv (static graph mode) in this run");
        return;
    };
    static_graph_plot(ui, rank);
}

/// Static-graph nodes as bars over node indices, packed into rows.
fn static_graph_plot(ui: &mut Ui, rank: &Rank) {
    let ops = &rank.static_ops;
    let end_of = |o: &memsight_core::profiler::StaticOp, last: u64| o.node_end.unwrap_or(last);
    let last = ops
        .iter()
        .filter_map(|o| o.node_end)
        .max()
        .unwrap_or(1)
        .max(1)
        + 1;
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| (ops[i].node_start, end_of(&ops[i], last)));
    // Greedy packing: each node goes into the first row free at its start.
    let mut row_ends: Vec<u64> = Vec::new();
    let mut placed: Vec<(usize, usize)> = Vec::new();
    for i in order {
        let start = ops[i].node_start;
        let row = row_ends
            .iter()
            .position(|&e| e <= start)
            .unwrap_or_else(|| {
                row_ends.push(0);
                row_ends.len() - 1
            });
        row_ends[row] = end_of(&ops[i], last).max(start + 1);
        placed.push((i, row));
    }
    ui.label(format!(
        "{}: {} nodes over node indices 0 – {last} (bars end at the graph's end where the file says 4294967295)",
        rank.name,
        ops.len()
    ));
    let height = (row_ends.len() as f32 * 16.0 + AXIS_HEIGHT).min(ui.available_height().max(60.0));
    let (rect, response) =
        ui.allocate_exact_size(vec2(ui.available_width(), height), Sense::hover());
    let painter = ui.painter_at(rect);
    let chart = Rect::from_min_max(
        rect.min + vec2(8.0, 0.0),
        pos2(rect.max.x - 8.0, rect.max.y - AXIS_HEIGHT),
    );
    let largest = ops.iter().map(|o| o.size_bytes).max().unwrap_or(1).max(1);
    let row_h = (chart.height() / row_ends.len().max(1) as f32).min(16.0);
    let x_of = |n: u64| chart.left() + n as f32 / last as f32 * chart.width();
    let mut hovered = None;
    for &(i, row) in &placed {
        let o = &ops[i];
        let bar = Rect::from_min_max(
            pos2(x_of(o.node_start), chart.top() + row as f32 * row_h + 1.0),
            pos2(
                x_of(end_of(o, last)).max(x_of(o.node_start) + 2.0),
                chart.top() + (row + 1) as f32 * row_h - 1.0,
            ),
        );
        let shade = 0.35 + 0.65 * (o.size_bytes as f32 / largest as f32);
        painter.rect_filled(bar, 1.0, palette::CURVE_ALLOCATED.gamma_multiply(shade));
        if response.hover_pos().is_some_and(|p| bar.contains(p)) {
            hovered = Some(i);
        }
    }
    let step = crate::lifecycle_view::nice_step(last as f64 / 8.0).max(1.0);
    let mut n = 0.0;
    while n <= last as f64 {
        painter.text(
            pos2(x_of(n as u64), chart.bottom() + 2.0),
            Align2::CENTER_TOP,
            format!("{n}"),
            FontId::proportional(11.0),
            palette::AXIS,
        );
        n += step;
    }
    if let Some(i) = hovered {
        let o = &ops[i];
        response.on_hover_ui_at_pointer(|ui| {
            ui.label(&o.op_name);
            ui.label(format!(
                "{} (model {}, graph {})",
                format_bytes(o.size_bytes),
                o.model_name,
                o.graph_id
            ));
            ui.label(format!(
                "nodes {} – {}",
                o.node_start,
                o.node_end
                    .map_or_else(|| "end of graph".to_string(), |e| e.to_string())
            ));
        });
    }
}

fn ranks_ui(ui: &mut Ui, doc: &ProfilerDoc) {
    use memsight_core::detect::FindingKind;
    let data = &doc.data;
    egui::Grid::new("ranks-table").striped(true).show(ui, |ui| {
        for h in [
            "rank",
            "device",
            "samples",
            "peak operator allocated",
            "peak operator reserved",
            "peak APP reserved",
            "stalls",
            "APP - operator reserved (median)",
        ] {
            ui.strong(h);
        }
        ui.end_row();
        for (rank, summary) in data.run.ranks.iter().zip(&data.summaries) {
            let peak =
                |p: Option<f64>| p.map_or_else(|| "-".to_string(), |p| format_bytes(p as i64));
            let of_rank = |kind| {
                data.findings.iter().filter(move |f| {
                    f.kind == kind && f.rank.as_deref() == Some(rank.name.as_str())
                })
            };
            let stalls: Vec<&Finding> = of_rank(FindingKind::AllocatorStall).collect();
            ui.label(&rank.name);
            ui.label(rank.device.as_deref().unwrap_or("-"));
            ui.label(summary.samples.to_string());
            ui.label(peak(summary.peak_operator_allocated));
            ui.label(peak(summary.peak_operator_reserved));
            ui.label(peak(summary.peak_app_reserved));
            ui.label(if stalls.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "{} ({} released)",
                    stalls.len(),
                    format_bytes(stalls.iter().map(|f| f.bytes as i64).sum())
                )
            });
            ui.label(
                of_rank(FindingKind::UnaccountedMemory)
                    .next()
                    .map_or_else(|| "small".to_string(), |f| format_bytes(f.bytes as i64)),
            );
            ui.end_row();
        }
    });
}

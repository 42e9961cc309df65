//! The memory curves: one plot per rank (linked time axes) or every rank overlaid.

use std::sync::Arc;

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Ui, pos2, vec2};
use memsight_core::profiler::{APP_COMPONENT, Curve, OPERATOR_COMPONENT};
use memsight_core::units::format_bytes;

use memsight_core::profiler::envelope::Envelope;

use super::{
    AXIS_HEIGHT, AXIS_WIDTH, Field, PreparedProfiler, ProfilerDoc, RAW_SAMPLES_PER_PIXEL,
    SeriesKey, Shown, clamp_view,
};
use crate::palette;

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

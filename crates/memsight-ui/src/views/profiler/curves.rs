//! The memory curves: one plot per rank (linked time axes) or every rank overlaid.

use std::sync::Arc;

use egui::{Align2, Color32, Pos2, Rect, Sense, Ui, pos2, vec2};
use memsight_core::profiler::{APP_COMPONENT, Curve, OPERATOR_COMPONENT};
use memsight_core::units::format_bytes;

use memsight_core::profiler::envelope::Envelope;

use super::{
    Field, PreparedProfiler, ProfilerDoc, RAW_SAMPLES_PER_PIXEL, SeriesKey, Shown, clamp_view,
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
    let mut lines: Vec<Line> = wanted
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
        .collect();
    // The fragmentation track, on each rank's own plot (not in the overlay of every rank).
    if shown.unused
        && rank_color.is_none()
        && let Some((curve, values, envelope)) = data.unused_series(rank)
    {
        lines.push(Line {
            label: "reserved − allocated".to_string(),
            offset_us,
            color: palette::LARGEST_FREE,
            curve,
            values,
            envelope,
            width: 1.0,
        });
    }
    lines
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
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for line in lines {
        let (a, b) = visible(line.curve, x0 + line.offset_us, x1 + line.offset_us);
        if let Some((min, max)) = line.envelope.range(line.values, a, b) {
            lo = lo.min(min);
            hi = hi.max(max);
        }
    }
    y_bounds(lo, hi)
}

/// The byte axis for curves between `lo` and `hi` in view: from zero, except where every curve
/// stays above half the highest (zoomed in on a peak): then from just below the lowest, so
/// their changes show.
fn y_bounds(lo: f64, hi: f64) -> (f64, f64) {
    if hi <= 0.0 {
        return (0.0, 1024.0 * 1024.0);
    }
    if lo.is_finite() && lo > hi * 0.5 {
        let pad = ((hi - lo) * 0.1).max(hi * 0.002);
        return ((lo - pad).max(0.0), hi + pad);
    }
    (0.0, hi * 1.08)
}

/// Draws `lines` into `rect` over the doc's view, on an `egui_plot` plot (axes, grid, legend,
/// linked cursor); the view itself stays the doc's, so every rank's plot shows the same time
/// range. Wheel: zoom around the pointer; drag: pan; Ctrl+drag: pick a range; double-click: all.
fn plot_ui(
    ui: &mut Ui,
    rect: Rect,
    doc: &mut ProfilerDoc,
    (title, id): (&str, &str),
    lines: &[Line],
    legend: bool,
) {
    if rect.width() < 80.0 || rect.height() < 60.0 {
        // Too small to read: say so rather than leave the space blank.
        ui.put(
            rect,
            egui::Label::new(
                egui::RichText::new(format!(
                    "{title}: too little room for a plot (View → Overlay ranks, or a taller window)"
                ))
                .size(11.0)
                .color(palette::AXIS),
            )
            .truncate(),
        );
        return;
    }
    let (x0, x1) = doc.view();
    let (y0, y1) = y_range(lines, x0, x1);
    let mut ui = ui.new_child(egui::UiBuilder::new().max_rect(rect).id_salt(id));
    ui.add(egui::Label::new(egui::RichText::new(title).size(12.0).color(palette::AXIS)).truncate());
    let height = ui.available_height();
    // The doc owns the view (shared by every rank): the plot only draws it.
    let plot = crate::views::axes::drawing_only(egui_plot::Plot::new(("profiler-curves", id)))
        .height(height)
        .set_margin_fraction(vec2(0.0, 0.0))
        .x_axis_formatter(|mark, _| format_seconds(mark.value, mark.step_size))
        .y_axis_formatter(|mark, _| format_bytes(mark.value as i64))
        .y_grid_spacer(|input| crate::views::axes::byte_grid(&input, false))
        .y_axis_min_width(56.0)
        .grid_color(palette::PLOT_GRID)
        .link_cursor(egui::Id::unique("profiler-curves-cursor"), [true, false]);
    // One legend names the lines of every rank's plot (they are the same lines), and only where
    // the plot is tall enough that it does not cover it.
    let plot = if legend && height >= 160.0 {
        plot.legend(egui_plot::Legend::default().position(egui_plot::Corner::RightTop))
    } else {
        plot
    };
    let range = doc.range;
    let marked = marked_times(doc, (x0, x1));
    let shown = plot.show(&mut ui, |plot| {
        // Zero sits a little above the bottom, so its label clears the time axis' first one.
        plot.set_plot_bounds(egui_plot::PlotBounds::from_min_max(
            [x0 / 1e6, y0 - 0.04 * (y1 - y0)],
            [x1 / 1e6, y1],
        ));
        let columns = plot.transform().frame().width().max(1.0) as usize;
        for line in lines {
            plot.line(
                egui_plot::Line::new(line.label.clone(), line_points(line, (x0, x1), columns))
                    .color(line.color)
                    .width(line.width)
                    .allow_hover(false),
            );
        }
        if let Some((a, b)) = range {
            plot.span(
                egui_plot::Span::new("picked range", a / 1e6..=b / 1e6)
                    .fill(palette::RANGE_DRAG)
                    .border_width(0.0),
            );
        }
        // The marked operator's allocation and release: labels on the outer side of each line;
        // lines closer than 60 px get one label for both ("alloc" and "release" side by side
        // read as one word).
        let px_per_us = f64::from(plot.transform().frame().width()) / (x1 - x0).max(1e-9);
        let marked = match marked.as_slice() {
            [(a, _, _), (b, _, _)] if (b - a).abs() * px_per_us < 60.0 => {
                vec![
                    (*a, "alloc / release", Align2::RIGHT_TOP),
                    (*b, "", Align2::LEFT_TOP),
                ]
            }
            _ => marked,
        };
        for (t_us, what, anchor) in marked {
            plot.vline(
                egui_plot::VLine::new(what, t_us / 1e6)
                    .color(palette::MARK)
                    .width(1.5)
                    .allow_hover(false),
            );
            plot.text(
                egui_plot::Text::new(
                    what,
                    egui_plot::PlotPoint::new(t_us / 1e6, y1),
                    egui::RichText::new(what).size(11.0).color(palette::MARK),
                )
                .anchor(anchor)
                .allow_hover(false),
            );
        }
    });
    view_input(&ui, &shown.response, *shown.transform.frame(), doc, lines);
}

/// Wheel: zoom around the pointer; drag: pan; Ctrl+drag: pick a range; double-click: all; hover:
/// every line's value under the pointer.
fn view_input(
    ui: &Ui,
    response: &egui::Response,
    chart: Rect,
    doc: &mut ProfilerDoc,
    lines: &[Line],
) {
    let full = doc.full_range();
    let (x0, x1) = doc.view();
    let at_pointer = |p: Pos2| x0 + f64::from((p.x - chart.left()) / chart.width()) * (x1 - x0);
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
            let at = at_pointer(p);
            doc.x_range = Some(clamp_view(
                (at - (at - x0) * factor, at + (x1 - at) * factor),
                full,
            ));
        }
    }
    // Ctrl+drag picks a time range (for the operator table); a plain drag pans.
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
            doc.x_range = Some(clamp_view((x0 - dx, x1 - dx), full));
        }
    }
    if response.drag_stopped() {
        doc.range_start = None;
    }
    if response.double_clicked() {
        doc.x_range = None;
    }
    if let Some(p) = response.hover_pos() {
        let t = at_pointer(p);
        response
            .clone()
            .on_hover_ui_at_pointer(|ui| values_at_ui(ui, lines, t));
    }
}

/// Every line's value at `t` (µs on the axis), exact.
fn values_at_ui(ui: &mut Ui, lines: &[Line], t: f64) {
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
}

/// The marked operator row's allocation and release inside the view (µs on the axis), with the
/// side each label goes: allocation to the left of its line, release to the right.
fn marked_times(doc: &ProfilerDoc, (x0, x1): (f64, f64)) -> Vec<(f64, &'static str, Align2)> {
    let Some((rank, row)) = doc.marked else {
        return Vec::new();
    };
    let Some(o) = doc.data.operator(rank, row) else {
        return Vec::new();
    };
    let offset = doc.offset_us(rank);
    [
        (o.alloc_us, "alloc", Align2::RIGHT_TOP),
        (o.release_us, "release", Align2::LEFT_TOP),
    ]
    .into_iter()
    .filter(|(t, _, _)| !t.is_nan())
    .map(|(t, what, anchor)| (t - offset, what, anchor))
    .filter(|(t, _, _)| (x0..=x1).contains(t))
    .collect()
}

/// A line's points in plot coordinates (seconds on the axis, bytes): per pixel column the
/// envelope's min and max (one vertical stroke each), or the samples as steps when few.
fn line_points(line: &Line, (x0, x1): (f64, f64), columns: usize) -> Vec<[f64; 2]> {
    // This line's samples are on the axis at their time minus its rank's offset.
    let (a_us, b_us) = (x0 + line.offset_us, x1 + line.offset_us);
    let x_of = |t_us: f64| (t_us - line.offset_us) / 1e6;
    let (a, b) = visible(line.curve, a_us, b_us);
    let mut points: Vec<[f64; 2]> = Vec::new();
    if (b - a) as f64 <= RAW_SAMPLES_PER_PIXEL * columns as f64 {
        // Few samples: steps through each one (a value holds until the next sample).
        for i in a..b {
            let v = line.values[i];
            if v.is_nan() {
                continue;
            }
            let x = x_of(line.curve.time_us[i]);
            if let Some(&[_, last_y]) = points.last() {
                points.push([x, last_y]);
            }
            points.push([x, v]);
        }
    } else {
        for c in 0..columns {
            let ta = a_us + (b_us - a_us) * c as f64 / columns as f64;
            let tb = a_us + (b_us - a_us) * (c + 1) as f64 / columns as f64;
            let ia = line.curve.time_us.partition_point(|&t| t < ta);
            let ib = line.curve.time_us.partition_point(|&t| t < tb);
            // A column without samples holds the value before it (memory stays until the next
            // sample says otherwise): no diagonal between distant samples.
            let held = || {
                let v = line.values[ia.checked_sub(1)?];
                (!v.is_nan()).then_some((v, v))
            };
            let Some((lo, hi)) = line.envelope.range(line.values, ia, ib).or_else(held) else {
                continue;
            };
            let x = x_of(f64::midpoint(ta, tb));
            points.push([x, hi]);
            points.push([x, lo]);
        }
    }
    points
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
        plot_ui(ui, rect, doc, ("all ranks", "overlay"), &lines, true);
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
            plot_ui(
                ui,
                plot,
                doc,
                (&title, &format!("rank-{r}")),
                &lines,
                r == 0,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::y_bounds;

    #[test]
    fn the_byte_axis_follows_a_zoom_onto_a_peak() {
        const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
        // The whole run: from zero.
        assert_eq!(y_bounds(2.0 * GIB, 10.0 * GIB), (0.0, 10.8 * GIB));
        // Zoomed in on a peak between 9.5 and 10 GiB: from just below 9.5 GiB.
        let (a, b) = y_bounds(9.5 * GIB, 10.0 * GIB);
        assert!(
            (9.4 * GIB..9.5 * GIB).contains(&a) && b > 10.0 * GIB && b < 10.1 * GIB,
            "{a} {b}"
        );
        // A flat line: a sliver around it, not a zero-height axis.
        let (a, b) = y_bounds(10.0 * GIB, 10.0 * GIB);
        assert!(a < 10.0 * GIB && b > 10.0 * GIB);
        // Nothing in view.
        assert_eq!(y_bounds(f64::INFINITY, 0.0), (0.0, 1024.0 * 1024.0));
    }
}

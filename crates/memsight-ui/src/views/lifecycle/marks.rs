//! What is painted over the bands: picks, segment and OOM marks, the selection, highlights, dimming, search hits and step marks.

use egui::{Align2, FontId, Pos2, Rect, Shape, Stroke, pos2, vec2};
use memsight_core::lifecycle::Band;
use memsight_core::replay::LifetimeId;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::palette;
use crate::prepared::{Prepared, Step};
use crate::selection::Selection;

use super::{Axis, BOX_ZOOM_MIN_HEIGHT_PX, Laid, LifecycleState};

/// The selected range's outline, and the range or box being dragged.
pub(super) fn paint_picks(
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

pub(super) fn paint_marks(
    painter: &egui::Painter,
    laid: &Laid,
    rect: Rect,
    y_of: &dyn Fn(f64) -> f32,
) {
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
pub(super) fn band_rects(
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

pub(super) fn paint_selection(
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
pub(super) fn paint_highlights(
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
pub(super) fn paint_dimmed_except(
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

/// The events the event list's search matches, as ticks along the bottom of the chart (one per
/// pixel column at most).
pub(super) fn paint_search_hits(
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
pub(super) const STEP_MIN_PX: f32 = 3.0;

/// No glyph of the 10-point step labels is narrower: a span with less room per character is not
/// worth laying the label out.
pub(super) const STEP_LABEL_MIN_CHAR_PX: f32 = 4.0;

pub(super) fn paint_steps(
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

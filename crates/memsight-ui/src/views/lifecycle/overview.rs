//! The overview strip above the chart: the whole trace's curve with a draggable window on the view.

use std::sync::Arc;

use egui::{Pos2, Rect, Sense, Shape, Stroke, Ui, pos2};

use crate::palette::{self, ColorBy};
use crate::prepared::Prepared;

use super::{LayoutKey, LifecycleState, axis, clamp_view};

/// The overview's curve: the highest allocated bytes in each of `width` columns over `full`.
pub(super) fn overview_curve(
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

pub(super) fn overview_ui(
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

//! What the mouse and keys do to the chart: pan, zoom, box zoom, following the selection, hovering and clicking a band.

use egui::{Pos2, Rect, Ui};
use memsight_core::lifecycle::Band;

use crate::prepared::Prepared;
use crate::selection::{Command, Selection};

use super::facts::lifetime_tooltip_ui;
use super::{Axis, BOX_ZOOM_MIN_HEIGHT_PX, Laid, LifecycleState, clamp_view, clamp_y};

/// Brings the pinned allocation, or a finding's evidence, into view once when asked.
pub(super) fn follow_selection(
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
pub(super) fn view_input(
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
    }
    (view, y_view) = key_zoom(ui, response, (view, y_view), (full_x0, full_x1));
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

/// Plus and minus zoom, the arrows pan, Home or 0 shows everything: where the pointer is over
/// the chart, and anywhere no text field or other widget has the keyboard (the chart is what
/// they are for).
pub(super) fn key_zoom(
    ui: &Ui,
    response: &egui::Response,
    (mut view, mut y_view): ((f64, f64), Option<(f64, f64)>),
    (full_x0, full_x1): (f64, f64),
) -> ((f64, f64), Option<(f64, f64)>) {
    let keys_free = !ui.ctx().text_edit_focused() && ui.memory(|m| m.focused().is_none());
    if !(response.hovered() || keys_free) {
        return (view, y_view);
    }
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

/// A click pins the allocation under the pointer (and selects its column's event); hovering a
/// band shows what it is.
pub(super) fn hover_and_click(
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
        // Allocations thinner than a pixel: the largest of them, as the tooltip names it.
        let lifetime = hovered.map(|(Band::Lifetime(id) | Band::Merged { largest: id, .. }, _)| id);
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
            // Many: the largest of them, named as one is (a click pins it), and how to see
            // the others.
            Band::Merged { count, largest } => {
                ui.strong(format!(
                    "the largest of {count} allocations thinner than a pixel here"
                ));
                lifetime_tooltip_ui(ui, data, device, largest);
                ui.separator();
                ui.weak(
                    "a click pins this one; Shift+wheel, or a Shift+drag box, zooms time and \
                     bytes to show the others (the wheel alone zooms time)",
                );
                if let Some(e) = laid.columns.get(column).and_then(|c| c.event) {
                    ui.weak(format!("state after event {e}"));
                }
            }
        });
    }
}

pub(super) fn column_at(laid: &Laid, rect: Rect, p: Pos2) -> Option<usize> {
    if !rect.contains(p) {
        return None;
    }
    let c = (((p.x - rect.left()) / rect.width()) * laid.columns.len() as f32) as usize;
    (c < laid.columns.len()).then_some(c)
}

pub(super) fn band_at(laid: &Laid, rect: Rect, p: Pos2) -> Option<(Band, usize)> {
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

//! The fragmentation track under the chart: free bytes inside segments over the view, and the what-if replay's predicted curve painted over it.

use std::sync::Arc;
use std::sync::mpsc::channel;

use egui::{Align2, FontId, Mesh, Pos2, Rect, Sense, Shape, Stroke, Ui, pos2, vec2};
use memsight_core::lifecycle::Column;
use memsight_core::units::format_bytes;

use crate::palette;
use crate::prepared::Prepared;

use super::{Axis, LifecycleState, TRACK_POOL_SAMPLES};

/// The fragmentation track: per column, the bytes reserved and not allocated (the shaded area)
/// and the largest free block of the pool (the line): where the two part, free memory is in
/// pieces too small for a large request. Hover: the figures at that column.
pub(super) fn fragmentation_ui(ui: &mut Ui, state: &LifecycleState, rect: Rect, current: bool) {
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
pub(super) fn predicted_columns(state: &mut LifecycleState, ax: &Axis) -> Option<Arc<[u64]>> {
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

/// The predicted reserved line (if any), dashed, over the recorded one (clipped at the chart's
/// top).
pub(super) fn paint_predicted(
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

/// Takes a finished track; once the layout of the view has landed and none is on its way,
/// starts the track for it (on rayon).
pub(super) fn request_track(
    ctx: &egui::Context,
    data: &Arc<Prepared>,
    state: &mut LifecycleState,
    ax: &Axis,
) {
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
pub(super) fn fragmentation_track(
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

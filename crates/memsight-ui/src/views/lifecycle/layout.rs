//! The layout and its mesh, built on rayon off the UI thread once per view, and the call sites that cover most of it.

use std::sync::Arc;
use std::sync::mpsc::channel;

use egui::{Color32, Mesh, Rect, pos2};
use memsight_core::lifecycle::{Band, Column, LayoutRequest, layout};
use rustc_hash::FxHashMap;

use crate::prepared::Prepared;

use super::{Axis, LEGEND_ENTRIES, Laid, LayoutKey, LifecycleState, MAX_MESH_VERTICES};

/// Starts a layout job when the view changed, and takes its result when it is done.
pub(super) fn request_layout(
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

pub(super) fn compute_layout(
    data: &Prepared,
    key: LayoutKey,
    columns: &[std::ops::Range<u32>],
) -> Laid {
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

/// The `n` call stacks whose bands cover the most of the chart (bytes × columns), with their
/// share of it: what the legend names in call-site colouring.
pub(super) fn top_stacks(
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
pub(super) fn build_mesh(
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

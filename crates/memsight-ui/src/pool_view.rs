//! The memory-pool state chart: the pool right after the selected event, one row per segment
//! (largest first, then by address), blocks at their offsets coloured by state, free space empty,
//! a header with the fragmentation figures. Rows are virtualized, so pools of thousands of
//! segments scroll smoothly; Ctrl+wheel zooms the rows horizontally.

use std::fmt::Write as _;
use std::sync::Arc;

use egui::{Align2, FontId, Rect, Sense, Stroke, Ui, pos2, vec2};
use memsight_core::frames::display_frames;
use memsight_core::model::{Action, BlockState};
use memsight_core::replay::{LifetimeId, PoolSegment, PoolState};
use memsight_core::units::format_bytes;

use crate::document::Prepared;
use crate::palette::{self, ColorBy};
use crate::selection::{Command, Selection};

const ROW_HEIGHT: f32 = 18.0;
const LABEL_WIDTH: f32 = 96.0;

/// The pool of one (device, event), with its rows in display order.
struct ShownPool {
    device: usize,
    event: Option<u32>,
    pool: Arc<PoolState>,
    /// Segment indices, largest first, then by address.
    order: Arc<[usize]>,
}

#[derive(Default)]
pub struct PoolViewState {
    /// What blocks are coloured by (the lifecycle chart's choice).
    pub color_by: ColorBy,
    pool: Option<ShownPool>,
    /// Horizontal zoom of the rows (1 = the largest segment fills the width).
    zoom: f32,
    /// Where each live block was drawn last frame (for tests and tools).
    block_rects: Vec<(Rect, LifetimeId)>,
}

impl PoolViewState {
    /// The pool currently shown.
    pub fn pool(&self) -> Option<&PoolState> {
        self.pool.as_ref().map(|p| p.pool.as_ref())
    }

    /// Where a block of `lifetime` was drawn last frame; or any live block at least 4 px wide
    /// when `lifetime` is `None`.
    pub fn block_rect(&self, lifetime: Option<LifetimeId>) -> Option<(Rect, LifetimeId)> {
        self.block_rects
            .iter()
            .copied()
            .find(|(r, id)| lifetime.map_or(r.width() >= 4.0, |l| l == *id))
    }
}

/// Free bytes, gap count, largest gap and 1 − largest / free, over the whole pool.
pub fn fragmentation(pool: &PoolState) -> (u64, usize, u64, f64) {
    let (free, gaps, largest) = pool
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == BlockState::Inactive)
        .fold((0u64, 0usize, 0u64), |(f, n, l), b| {
            (f + b.size_bytes, n + 1, l.max(b.size_bytes))
        });
    let figure = if free == 0 {
        0.0
    } else {
        1.0 - largest as f64 / free as f64
    };
    (free, gaps, largest, figure)
}

pub fn pool_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    selection: &Selection,
    state: &mut PoolViewState,
    commands: &mut Vec<Command>,
) {
    let replay = &data.loaded.replays[device];
    let dev = &data.loaded.snapshot.devices[device];
    let event = selection
        .event
        .or_else(|| replay.event_count().checked_sub(1).map(|e| e as u32));
    if state.pool.as_ref().map(|p| (p.device, p.event)) != Some((device, event)) {
        // At most one checkpoint interval of replay: well under a frame (BENCHMARKS.md).
        let pool = replay.pool_after(dev, event);
        let mut order: Vec<usize> = (0..pool.segments.len()).collect();
        order.sort_by_key(|&i| {
            (
                std::cmp::Reverse(pool.segments[i].total_size_bytes),
                pool.segments[i].address,
            )
        });
        state.pool = Some(ShownPool {
            device,
            event,
            pool: Arc::new(pool),
            order: order.into(),
        });
    }
    if state.zoom < 1.0 {
        state.zoom = 1.0;
    }
    let Some(shown) = &state.pool else {
        return;
    };
    let (pool, order) = (Arc::clone(&shown.pool), Arc::clone(&shown.order));

    header_ui(ui, data, device, &pool, event, commands);
    let largest = pool
        .segments
        .iter()
        .map(|s| s.total_size_bytes)
        .max()
        .unwrap_or(1)
        .max(1);
    let width = (ui.available_width() - LABEL_WIDTH).max(50.0) * state.zoom;
    let mut rects = Vec::new();
    let output = egui::ScrollArea::both()
        .auto_shrink([false, false])
        .show_rows(ui, ROW_HEIGHT, order.len(), |ui, rows| {
            for &i in &order[rows] {
                let seg = &pool.segments[i];
                let (rect, response) =
                    ui.allocate_exact_size(vec2(LABEL_WIDTH + width, ROW_HEIGHT), Sense::click());
                segment_row(
                    ui,
                    data,
                    (device, state.color_by),
                    seg,
                    rect,
                    largest,
                    selection,
                    &mut rects,
                );
                let hovered_block = response.hover_pos().and_then(|p| {
                    rects
                        .iter()
                        .rev()
                        .find(|(r, _)| r.contains(p))
                        .map(|(_, id)| *id)
                });
                if response.clicked()
                    && let Some(id) = hovered_block
                {
                    commands.push(Command::PickInPool(id));
                }
                if let Some(id) = hovered_block {
                    response
                        .on_hover_ui_at_pointer(|ui| block_tooltip_ui(ui, data, device, id, event));
                } else {
                    response.on_hover_ui_at_pointer(|ui| {
                        segment_tooltip_ui(ui, data, device, seg, event);
                    });
                }
            }
        });
    if ui.rect_contains_pointer(output.inner_rect) {
        let zoom = ui.input(egui::InputState::zoom_delta);
        if (zoom - 1.0).abs() > 1e-3 {
            state.zoom = (state.zoom * zoom).clamp(1.0, 256.0);
        }
    }
    state.block_rects = rects;
}

fn header_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    pool: &PoolState,
    event: Option<u32>,
    commands: &mut Vec<Command>,
) {
    let (free, gaps, largest_gap, figure) = fragmentation(pool);
    let trace = &data.loaded.snapshot.devices[device].trace;
    ui.horizontal_wrapped(|ui| {
        let when = match event {
            None if trace.is_empty() => "at dump time (no trace)".to_string(),
            None => "before the first event".to_string(),
            Some(e) => format!("after event {e} ({})", trace.action[e as usize].name(&data.loaded.snapshot.strings)),
        };
        ui.strong(format!("Pool {when}"));
        if ui.small_button("< segment_alloc").on_hover_text("previous segment_alloc").clicked() {
            commands.push(Command::SegmentAlloc { forward: false });
        }
        if ui.small_button("segment_alloc >").on_hover_text("next segment_alloc").clicked() {
            commands.push(Command::SegmentAlloc { forward: true });
        }
        ui.separator();
        ui.label(format!(
            "{} allocated / {} reserved · {} free in {gaps} gaps · largest gap {} · fragmentation {:.0} %",
            format_bytes(pool.totals.allocated_bytes),
            format_bytes(pool.totals.reserved_bytes),
            format_bytes(free as i64),
            format_bytes(largest_gap as i64),
            figure * 100.0
        ));
        ui.label(format!("{} segments", pool.segments.len()));
    });
}

#[expect(
    clippy::too_many_arguments,
    reason = "one row needs the data, its place and the selection"
)]
fn segment_row(
    ui: &Ui,
    data: &Prepared,
    (device, color_by): (usize, ColorBy),
    seg: &PoolSegment,
    rect: Rect,
    largest: u64,
    selection: &Selection,
    rects: &mut Vec<(Rect, LifetimeId)>,
) {
    let painter = ui.painter();
    let s = &data.loaded.snapshot;
    let mut label = format_bytes(seg.total_size_bytes as i64);
    if seg.is_expandable {
        label.push_str(" exp.");
    }
    if seg.stream != 0 {
        let _ = write!(label, " s{}", seg.stream);
    }
    if let Some(&(a, b)) = s.pools.get(seg.pool as usize)
        && (a, b) != (0, 0)
    {
        let _ = write!(label, " pool({a},{b})");
    }
    painter.text(
        pos2(rect.left() + 4.0, rect.center().y),
        Align2::LEFT_CENTER,
        label,
        FontId::proportional(11.0),
        palette::AXIS,
    );
    let box_w = (rect.width() - LABEL_WIDTH) * (seg.total_size_bytes as f32 / largest as f32);
    let seg_rect = Rect::from_min_size(
        pos2(rect.left() + LABEL_WIDTH, rect.top() + 2.0),
        vec2(box_w.max(1.0), ROW_HEIGHT - 4.0),
    );
    painter.rect_filled(seg_rect, 0.0, palette::FREE_SPACE);
    let x_of = |addr: u64| {
        seg_rect.left()
            + ((addr - seg.address) as f32 / seg.total_size_bytes.max(1) as f32) * seg_rect.width()
    };
    for b in &seg.blocks {
        if b.state == BlockState::Inactive {
            continue;
        }
        let r = Rect::from_x_y_ranges(
            x_of(b.address)..=x_of(b.address + b.size_bytes).max(x_of(b.address) + 1.0),
            seg_rect.y_range(),
        );
        let color = match (b.state, b.lifetime) {
            (BlockState::ActivePendingFree, _) => palette::PENDING_FREE,
            (_, Some(id)) => data.band_color(device, id, color_by),
            _ => palette::MERGED_BAND,
        };
        painter.rect_filled(r, 0.0, color);
        if b.size_exact && b.size_bytes > b.requested_size_bytes {
            // Rounding waste at the end of the block, where the rounded size is known.
            let waste = Rect::from_x_y_ranges(
                x_of(b.address + b.requested_size_bytes)..=r.right(),
                r.bottom() - 3.0..=r.bottom(),
            );
            painter.rect_filled(waste, 0.0, palette::ROUNDING_WASTE);
        }
        if let Some(id) = b.lifetime {
            if selection.lifetime == Some(id) {
                painter.rect_stroke(
                    r,
                    0.0,
                    Stroke::new(2.0, palette::SELECTION),
                    egui::StrokeKind::Outside,
                );
            }
            rects.push((r, id));
        }
    }
    painter.rect_stroke(
        seg_rect,
        0.0,
        Stroke::new(1.0, palette::SEGMENT_OUTLINE),
        egui::StrokeKind::Inside,
    );
}

fn block_tooltip_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    id: LifetimeId,
    event: Option<u32>,
) {
    let l = &data.loaded.replays[device].lifetimes[id as usize];
    let state = match l.state_after(event) {
        BlockState::ActiveAllocated => "allocated",
        BlockState::ActivePendingFree => "pending free (freed, still used by another stream)",
        BlockState::Inactive => "free",
    };
    ui.label(format!("state: {state}"));
    crate::lifecycle_view::lifetime_facts_ui(ui, data, device, id);
    for line in display_frames(&data.loaded.snapshot, l.stack, false)
        .iter()
        .take(6)
    {
        ui.monospace(&line.text);
    }
    ui.weak("click: show it on the lifecycle chart");
}

fn segment_tooltip_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    seg: &PoolSegment,
    event: Option<u32>,
) {
    let s = &data.loaded.snapshot;
    let allocated: u64 = seg
        .blocks
        .iter()
        .filter(|b| b.state != BlockState::Inactive)
        .map(|b| b.size_bytes)
        .sum();
    let (gaps, largest) = seg.gaps();
    egui::Grid::new("segment-facts")
        .num_columns(2)
        .show(ui, |ui| {
            for (k, v) in [
                ("segment", format!("0x{:x}", seg.address)),
                ("size", format_bytes(seg.total_size_bytes as i64)),
                ("in blocks", format_bytes(allocated as i64)),
                (
                    "free",
                    format!(
                        "{} in {gaps} gaps",
                        format_bytes(seg.total_size_bytes.saturating_sub(allocated) as i64)
                    ),
                ),
                ("largest gap", format_bytes(largest as i64)),
                (
                    "stream",
                    format!(
                        "{} (raw {})",
                        seg.stream,
                        s.streams.get(seg.stream as usize).copied().unwrap_or(0)
                    ),
                ),
                (
                    "pool",
                    s.pools
                        .get(seg.pool as usize)
                        .map_or_else(|| "default".to_string(), |(a, b)| format!("({a}, {b})")),
                ),
                ("expandable", seg.is_expandable.to_string()),
            ] {
                ui.label(k);
                ui.label(v);
                ui.end_row();
            }
        });
    // The stack that created it: the last segment_alloc / segment_map at its address up to the
    // shown event, else the final pool's record of it.
    let trace = &s.devices[device].trace;
    let upto = event.map_or(0, |e| e as usize + 1).min(trace.len());
    let created = (0..upto)
        .rev()
        .find(|&i| {
            matches!(trace.action[i], Action::SegmentAlloc | Action::SegmentMap)
                && trace.addr[i] == seg.address
        })
        .map(|i| trace.stack[i]);
    let stack = created.or_else(|| {
        s.devices[device]
            .segments
            .iter()
            .find(|f| f.address == seg.address)
            .map(|f| f.stack)
    });
    if let Some(stack) = stack {
        ui.label("created by:");
        for line in display_frames(s, stack, false).iter().take(6) {
            ui.monospace(&line.text);
        }
    }
}

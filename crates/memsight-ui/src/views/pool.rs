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

use crate::palette::{self, ColorBy};
use crate::prepared::Prepared;
use crate::selection::{Command, Selection, is_segment_step};

const ROW_HEIGHT: f32 = 18.0;
const LABEL_WIDTH: f32 = 96.0;
/// A segment never draws narrower than this, however small next to the largest.
const MIN_SEGMENT_PX: f32 = 8.0;

/// The pool of one (device, event), with its rows in display order.
struct ShownPool {
    device: usize,
    event: Option<u32>,
    /// The what-if replay's pool rather than the recorded one.
    predicted: bool,
    pool: Arc<PoolState>,
    /// Segment indices, largest first, then by address.
    order: Arc<[usize]>,
}

impl ShownPool {
    fn new(data: &Prepared, device: usize, event: Option<u32>) -> Self {
        // At most one checkpoint interval of replay: well under a frame (BENCHMARKS.md).
        let pool =
            data.loaded.replays[device].pool_after(&data.loaded.snapshot.devices[device], event);
        Self::of(Arc::new(pool), device, event, false)
    }

    fn of(pool: Arc<PoolState>, device: usize, event: Option<u32>, predicted: bool) -> Self {
        let mut order: Vec<usize> = (0..pool.segments.len()).collect();
        order.sort_by_key(|&i| {
            (
                std::cmp::Reverse(pool.segments[i].total_size_bytes),
                pool.segments[i].address,
            )
        });
        Self {
            device,
            event,
            predicted,
            pool,
            order: order.into(),
        }
    }
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
    /// Each row fills the width (its own scale) instead of all rows on the largest's scale.
    pub row_scale: bool,
    /// The segment the selection points at (the one just allocated, or the pinned block's),
    /// and the selection it was found for: the rows scroll to it once per change.
    followed: Option<(Option<u32>, Option<LifetimeId>)>,
    /// What the rows follow: the selected event's segment, or the pinned block's (whichever
    /// the user changed last).
    follow: Follow,
    /// Where the highlighted segment (or mapped range) was drawn last frame, the rows' visible
    /// area, the segment's address, and the range outlined within it (address, bytes) where
    /// only a range is.
    highlight: Option<Highlight>,
    /// The rows' visible area last frame.
    rows_rect: Option<Rect>,
    /// The device's segment steps ([`is_segment_step`]), in order, for the ‹ › buttons.
    segment_steps: Option<(usize, Arc<[u32]>)>,
    /// The what-if replay's pool at the selected event, shown instead of the recorded one (the
    /// What-if panel sets it), and the settings it was predicted under.
    pub predicted: Option<(Arc<PoolState>, String)>,
}

/// Where the highlighted segment (or range) was drawn, the rows' visible area, the segment's
/// address, and the range outlined within it, if only a range is.
type Highlight = (Rect, Rect, u64, Option<(u64, u64)>);

impl PoolViewState {
    /// The pool currently shown.
    pub fn pool(&self) -> Option<&PoolState> {
        self.pool.as_ref().map(|p| p.pool.as_ref())
    }

    /// Where the highlighted segment was drawn last frame, and the visible area of the rows.
    pub fn highlighted_segment(&self) -> Option<(Rect, Rect)> {
        self.highlight.map(|(r, visible, _, _)| (r, visible))
    }

    /// Forgets where things were drawn: called each frame before the views draw, so a pool not
    /// drawn this frame (the Blocks tab shown) reports nothing outlined.
    pub fn forget_drawn(&mut self) {
        self.highlight = None;
        self.block_rects.clear();
    }

    /// The address of the segment outlined last frame, and whether it was in the visible rows.
    pub fn highlighted_address(&self) -> Option<(u64, bool)> {
        self.highlight
            .map(|(r, visible, address, _)| (address, visible.contains_rect(r)))
    }

    /// The range (address, bytes) outlined last frame inside its segment, where only a range
    /// of it is (a `segment_map`, or a range clicked in the Segments tab).
    pub fn highlighted_range(&self) -> Option<(u64, u64)> {
        self.highlight.and_then(|(_, _, _, range)| range)
    }

    /// Where a block of `lifetime` was drawn last frame; or any live block at least 4 px wide
    /// and wholly in the visible rows when `lifetime` is `None`.
    pub fn block_rect(&self, lifetime: Option<LifetimeId>) -> Option<(Rect, LifetimeId)> {
        self.block_rects.iter().copied().find(|(r, id)| {
            lifetime.map_or(
                r.width() >= 4.0 && self.rows_rect.is_some_and(|v| v.contains_rect(*r)),
                |l| l == *id,
            )
        })
    }
}

/// What the segment buttons step through, for their hover text.
const STEPPED: &str = "segment_alloc, segment_map or segment_unmap";

/// Which segment the rows scroll to and outline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Follow {
    /// The segment at the selected event's address (a `segment_alloc` just made, a page range
    /// just mapped).
    #[default]
    Event,
    /// The segment holding the pinned block.
    Pinned,
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
    choose_pool(state, data, device, event);
    if state.zoom < 1.0 {
        state.zoom = 1.0;
    }
    let Some(shown) = &state.pool else {
        return;
    };
    let (pool, order) = (Arc::clone(&shown.pool), Arc::clone(&shown.order));
    let is_predicted = shown.predicted;

    predicted_label(ui, state, is_predicted);
    let jumps = segment_steps(state, dev, device, selection.event);
    header_ui(ui, data, device, &pool, event, jumps, state, commands);
    let (target, scroll_to, mapped) = follow(state, &pool, &order, dev, selection);
    let largest = pool
        .segments
        .iter()
        .map(|s| s.total_size_bytes)
        .max()
        .unwrap_or(1)
        .max(1);
    let width = (ui.available_width() - LABEL_WIDTH).max(50.0) * state.zoom;
    let mut rects = Vec::new();
    let mut highlight = None;
    let mut scroll = egui::ScrollArea::both().auto_shrink([false, false]);
    if let Some(row) = scroll_to {
        let pitch = ROW_HEIGHT + ui.spacing().item_spacing.y;
        scroll = scroll.vertical_scroll_offset((row as f32 - 2.0).max(0.0) * pitch);
    }
    let row_scale = state.row_scale;
    let output = scroll.show_rows(ui, ROW_HEIGHT, order.len(), |ui, rows| {
        for (row, &i) in rows.clone().zip(&order[rows]) {
            let seg = &pool.segments[i];
            let (rect, response) =
                ui.allocate_exact_size(vec2(LABEL_WIDTH + width, ROW_HEIGHT), Sense::click());
            let scale = if row_scale {
                seg.total_size_bytes
            } else {
                largest
            };
            let seg_rect = segment_row(
                ui,
                data,
                (device, state.color_by),
                seg,
                rect,
                scale.max(1),
                selection,
                &mut rects,
            );
            if target == Some(row) {
                let range = mapped.and_then(|(addr, size_bytes)| {
                    sub_rect(seg, seg_rect, addr, size_bytes).map(|r| (r, (addr, size_bytes)))
                });
                let outlined = range.map_or(seg_rect, |(r, _)| r);
                ui.painter().rect_stroke(
                    outlined.expand(1.0),
                    0.0,
                    Stroke::new(2.0, palette::SELECTED_EVENT),
                    egui::StrokeKind::Outside,
                );
                highlight = Some((outlined, seg.address, range.map(|(_, r)| r)));
            }
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
                response.on_hover_ui_at_pointer(|ui| block_tooltip_ui(ui, data, device, id, event));
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
    state.highlight = highlight.map(|(r, address, range)| (r, output.inner_rect, address, range));
    state.rows_rect = Some(output.inner_rect);
}

/// The row the pool outlines (the selected event's segment or the pinned block's, whichever the
/// user changed last), the row to scroll to (once per change), and the page range a selected
/// `segment_map` mapped (outlined instead of its whole segment).
fn follow(
    state: &mut PoolViewState,
    pool: &PoolState,
    order: &[usize],
    dev: &memsight_core::model::Device,
    selection: &Selection,
) -> (Option<usize>, Option<usize>, Option<(u64, u64)>) {
    let key = (selection.event, selection.lifetime);
    // A range clicked in the Segments tab: its segment, and the range itself outlined.
    if let Some((address, size_bytes)) = selection.outlined_range {
        state.follow = Follow::Event;
        let target = order.iter().position(|&i| {
            let seg = &pool.segments[i];
            (seg.address..seg.address + seg.total_size_bytes.max(1)).contains(&address)
        });
        let scroll_to = (state.followed != Some(key)).then_some(target).flatten();
        state.followed = Some(key);
        let whole = target.is_some_and(|t| {
            let seg = &pool.segments[order[t]];
            seg.address == address && seg.total_size_bytes == size_bytes
        });
        return (target, scroll_to, (!whole).then_some((address, size_bytes)));
    }
    if let Some((event_was, pinned_was)) = state.followed {
        // The rows follow what the user changed last: a block just pinned (in the pool, the
        // table, or a band clicked on the chart, which picks its event too), else a new event
        // (a segment_alloc stepped to, a row clicked) over a block pinned earlier.
        if selection.lifetime != pinned_was && selection.lifetime.is_some() {
            state.follow = Follow::Pinned;
        } else if selection.event != event_was {
            state.follow = Follow::Event;
        }
    }
    let target = followed_segment(pool, order, dev, selection, state.follow);
    let scroll_to = (state.followed != Some(key)).then_some(target).flatten();
    state.followed = Some(key);
    // A segment_map maps one page range into its segment: that range is outlined, not the whole.
    let mapped = selection
        .event
        .map(|e| e as usize)
        .filter(|&e| dev.trace.action[e] == Action::SegmentMap && state.follow == Follow::Event)
        .map(|e| (dev.trace.addr[e], dev.trace.size_bytes[e]));
    (target, scroll_to, mapped)
}

/// Shows the what-if replay's pool for `event` where the What-if panel has one, else the recorded
/// pool (each built once per event).
fn choose_pool(state: &mut PoolViewState, data: &Prepared, device: usize, event: Option<u32>) {
    let predicted = state
        .predicted
        .as_ref()
        .filter(|(p, _)| p.event == event)
        .map(|(p, _)| Arc::clone(p));
    let shown_key = state
        .pool
        .as_ref()
        .map(|p| (p.device, p.event, p.predicted));
    if let Some(pool) = predicted {
        let same = state
            .pool
            .as_ref()
            .is_some_and(|p| p.predicted && Arc::ptr_eq(&p.pool, &pool));
        if !same {
            state.pool = Some(ShownPool::of(pool, device, event, true));
        }
    } else if shown_key != Some((device, event, false)) {
        state.pool = Some(ShownPool::new(data, device, event));
    }
}

/// Says that the pool shown is the what-if replay's, under which settings.
fn predicted_label(ui: &mut Ui, state: &PoolViewState, predicted: bool) {
    if predicted {
        let settings = state.predicted.as_ref().map_or("", |(_, s)| s.as_str());
        ui.colored_label(
            palette::PREDICTED_LINE,
            format!("Predicted pool (what if {settings}), at the model's addresses"),
        );
    }
}

/// Where the bytes `addr .. addr + size_bytes` lie in a segment drawn at `seg_rect` (`None` when
/// they are not inside it).
fn sub_rect(seg: &PoolSegment, seg_rect: Rect, addr: u64, size_bytes: u64) -> Option<Rect> {
    let end = seg.address.checked_add(seg.total_size_bytes)?;
    if addr < seg.address || addr >= end {
        return None;
    }
    let x_of = |a: u64| {
        seg_rect.left()
            + ((a.min(end) - seg.address) as f64 / seg.total_size_bytes.max(1) as f64) as f32
                * seg_rect.width()
    };
    let (left, right) = (x_of(addr), x_of(addr.saturating_add(size_bytes)));
    Some(Rect::from_x_y_ranges(
        left..=right.max(left + 2.0),
        seg_rect.y_range(),
    ))
}

/// What the segment buttons step through, as the file has it: `segment_alloc`, `segment_map`
/// (expandable segments: their maps and unmaps), or "segment event" (both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentSteps {
    pub earlier: bool,
    pub later: bool,
    pub name: &'static str,
}

/// Whether there is a segment step before / after `selected` (with none selected: from either
/// end), for the ‹ › buttons, and what they are called.
fn segment_steps(
    state: &mut PoolViewState,
    dev: &memsight_core::model::Device,
    device: usize,
    selected: Option<u32>,
) -> SegmentSteps {
    let trace = &dev.trace;
    if state.segment_steps.as_ref().map(|(d, _)| *d) != Some(device) {
        let steps: Vec<u32> = (0..trace.len())
            .filter(|&i| is_segment_step(trace.action[i]))
            .map(|i| i as u32)
            .collect();
        state.segment_steps = Some((device, steps.into()));
    }
    let steps: &[u32] = state.segment_steps.as_ref().map_or(&[], |(_, a)| a);
    let allocs = steps
        .iter()
        .any(|&e| trace.action[e as usize] == Action::SegmentAlloc);
    let maps = steps
        .iter()
        .any(|&e| trace.action[e as usize] != Action::SegmentAlloc);
    SegmentSteps {
        earlier: steps
            .first()
            .is_some_and(|&a| selected.is_none_or(|e| a < e)),
        later: steps
            .last()
            .is_some_and(|&a| selected.is_none_or(|e| a > e)),
        name: match (allocs, maps) {
            (true, true) => "segment event",
            (false, true) => "segment_map",
            _ => "segment_alloc",
        },
    }
}

/// The row of the segment the selection points at: the one holding the selected event's
/// address (the segment a `segment_alloc` just created) or the pinned block's, as `follow` says,
/// else the other.
fn followed_segment(
    pool: &PoolState,
    order: &[usize],
    dev: &memsight_core::model::Device,
    selection: &Selection,
    follow: Follow,
) -> Option<usize> {
    let pinned = || {
        let id = selection.lifetime?;
        order.iter().position(|&i| {
            pool.segments[i]
                .blocks
                .iter()
                .any(|b| b.lifetime == Some(id) && b.state != BlockState::Inactive)
        })
    };
    let at_event = || {
        let addr = dev.trace.addr[selection.event? as usize];
        order.iter().position(|&i| {
            let seg = &pool.segments[i];
            (seg.address..seg.address + seg.total_size_bytes.max(1)).contains(&addr)
        })
    };
    match follow {
        Follow::Event => at_event().or_else(pinned),
        Follow::Pinned => pinned().or_else(at_event),
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "the header shows the pool, where it is in the trace and the row options"
)]
fn header_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    pool: &PoolState,
    event: Option<u32>,
    steps: SegmentSteps,
    state: &mut PoolViewState,
    commands: &mut Vec<Command>,
) {
    let (free, gaps, largest_gap, figure) = fragmentation(pool);
    let trace = &data.loaded.snapshot.devices[device].trace;
    ui.horizontal_wrapped(|ui| {
        let when = match event {
            None if trace.is_empty() => "at dump time (no trace)".to_string(),
            None => "before the first event".to_string(),
            Some(e) => format!(
                "after event {e} ({})",
                trace.action[e as usize].name(&data.loaded.snapshot.strings)
            ),
        };
        ui.strong(format!("Pool {when}"));
        // Disabled, with the reason, where there is no segment step to go to.
        let name = steps.name;
        if ui
            .add_enabled(
                steps.earlier,
                egui::Button::new(format!("< {name}")).small(),
            )
            .on_hover_text(format!(
                "previous {STEPPED} (the pool right after it); key: ["
            ))
            .on_disabled_hover_text(format!("no {name} before this event"))
            .clicked()
        {
            commands.push(Command::SegmentStep { forward: false });
        }
        if ui
            .add_enabled(steps.later, egui::Button::new(format!("{name} >")).small())
            .on_hover_text(format!("next {STEPPED} (the pool right after it); key: ]"))
            .on_disabled_hover_text(format!("no {name} after this event"))
            .clicked()
        {
            commands.push(Command::SegmentStep { forward: true });
        }
        ui.checkbox(&mut state.row_scale, "rows to own scale")
            .on_hover_text("each segment fills the width, so small ones show their blocks");
    });
    // The figures on one line of their own, cut to the width (all of them on hover), so a
    // narrow panel keeps its rows for the segments.
    let figures = format!(
        "{} allocated / {} reserved · {} segments · {} free in {gaps} gaps · largest gap {} · \
         fragmentation {:.0} %",
        format_bytes(pool.totals.allocated_bytes),
        format_bytes(pool.totals.reserved_bytes),
        pool.segments.len(),
        format_bytes(free as i64),
        format_bytes(largest_gap as i64),
        figure * 100.0
    );
    ui.add(egui::Label::new(&figures).truncate())
        .on_hover_text(figures);
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
) -> Rect {
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
        vec2(box_w.max(MIN_SEGMENT_PX), ROW_HEIGHT - 4.0),
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
    seg_rect
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
    crate::views::lifecycle::lifetime_facts_ui(ui, data, device, id);
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

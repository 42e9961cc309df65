//! The segment timeline (the `PyTorch` viewer calls it the "Active Cached Segment Timeline"): every
//! segment, or range of pages mapped into an expandable one, as a band from the event that
//! reserved it to the one that released it, stacked in the order they came (core `segments`).
//! It shows the events the lifecycle chart shows, so the two line up. Hover: the segment; a click:
//! the Pool tab, after the event that reserved it, with that range outlined (a range mapped into
//! an expandable segment, not the whole segment). The selected event is
//! a line; the segment holding its address is outlined.

use std::sync::Arc;

use egui::{Color32, Mesh, Pos2, Rect, Sense, Stroke, Ui, pos2};
use memsight_core::segments::SegmentSpan;
use memsight_core::units::format_bytes;

use crate::palette;
use crate::prepared::Prepared;
use crate::selection::{Command, Selection};

/// What a drawing depends on: device, events shown, the rectangle.
type DrawKey = (usize, u32, u32, Rect);

#[derive(Default)]
pub struct SegmentTimelineState {
    spans: Option<(usize, Arc<Vec<SegmentSpan>>)>,
    drawn: Option<(DrawKey, Drawing)>,
}

/// One column: the event whose state it shows, and its spans bottom up as (span index, bottom
/// bytes, top bytes).
type ColumnStack = (u32, Vec<(usize, u64, u64)>);

/// One drawing: the bands' mesh and, per column, its event and stacked spans (for hovering).
struct Drawing {
    mesh: Arc<Mesh>,
    /// Per column, left to right.
    columns: Vec<ColumnStack>,
    top_bytes: u64,
}

impl SegmentTimelineState {
    /// The span drawn under `p` last frame (its index in the spans, and its column's event), for
    /// tests and tools.
    pub fn span_under(&self, p: Pos2) -> Option<(usize, u32)> {
        let ((_, _, _, rect), drawing) = self.drawn.as_ref()?;
        span_at(drawing, *rect, p)
    }

    /// Where the timeline was drawn last frame.
    pub fn drawn_rect(&self) -> Option<Rect> {
        self.drawn.as_ref().map(|((_, _, _, rect), _)| *rect)
    }

    /// The device's spans, in the order they were reserved.
    pub fn spans(&mut self, data: &Prepared, device: usize) -> Arc<Vec<SegmentSpan>> {
        if self.spans.as_ref().map(|(d, _)| *d) != Some(device) {
            let spans = memsight_core::segments::spans(&data.loaded.snapshot.devices[device]);
            self.spans = Some((device, Arc::new(spans)));
            self.drawn = None;
        }
        self.spans
            .as_ref()
            .map(|(_, s)| Arc::clone(s))
            .unwrap_or_default()
    }
}

/// The timeline over events `first..=last` (the lifecycle chart's view), filling `ui`.
pub fn segments_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    (first, last): (u32, u32),
    selection: &Selection,
    state: &mut SegmentTimelineState,
    commands: &mut Vec<Command>,
) {
    let spans = state.spans(data, device);
    ui.horizontal_wrapped(|ui| {
        ui.strong("Segments over time");
        ui.weak(format!(
            "{} reserved ranges · events {first} – {last}, as on the chart above · click a band: \
             the pool after it was reserved",
            spans.len()
        ));
    });
    let rect = ui.available_rect_before_wrap();
    let response = ui.allocate_rect(rect, Sense::click());
    if rect.width() < 20.0 || rect.height() < 20.0 || spans.is_empty() {
        return;
    }
    let key = (device, first, last, rect);
    if state.drawn.as_ref().map(|(k, _)| *k) != Some(key) {
        state.drawn = Some((key, draw(&spans, (first, last), rect)));
    }
    let Some((_, drawing)) = &state.drawn else {
        return;
    };
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 0.0, palette::BACKGROUND);
    painter.add(egui::Shape::mesh(Arc::clone(&drawing.mesh)));
    let col_w = rect.width() / drawing.columns.len().max(1) as f32;
    let y_of = |bytes: u64| {
        rect.bottom() - (bytes as f64 / drawing.top_bytes as f64) as f32 * rect.height()
    };
    painter.text(
        rect.left_top() + egui::vec2(4.0, 2.0),
        egui::Align2::LEFT_TOP,
        format_bytes(drawing.top_bytes as i64),
        egui::FontId::proportional(10.0),
        palette::AXIS,
    );
    // The selected event: a line, and the segment holding its address outlined.
    if let Some(e) = selection.event.filter(|e| (first..=last).contains(e)) {
        let c = drawing.columns.partition_point(|(ce, _)| *ce < e);
        let x = rect.left() + (c as f32 + 0.5) * col_w;
        painter.line_segment(
            [pos2(x, rect.top()), pos2(x, rect.bottom())],
            Stroke::new(1.0, palette::SELECTED_EVENT),
        );
        let addr = data.loaded.snapshot.devices[device].trace.addr[e as usize];
        if let Some((_, stack)) = drawing.columns.get(c)
            && let Some(&(_, y0, y1)) = stack.iter().find(|&&(k, _, _)| {
                let s = &spans[k];
                (s.address..s.address.saturating_add(s.size_bytes.max(1))).contains(&addr)
            })
        {
            painter.rect_stroke(
                Rect::from_x_y_ranges(x - 4.0..=x + 4.0, y_of(y1)..=y_of(y0)),
                0.0,
                Stroke::new(2.0, palette::SELECTED_EVENT),
                egui::StrokeKind::Outside,
            );
        }
    }
    let hovered = response.hover_pos().and_then(|p| span_at(drawing, rect, p));
    if let Some((k, _)) = hovered {
        let span = &spans[k];
        response
            .clone()
            .on_hover_ui_at_pointer(|ui| span_tooltip_ui(ui, span));
    }
    if response.clicked()
        && let Some((k, column_event)) = hovered
    {
        // The pool right after the event that reserved it (one from before the trace: the
        // state the column shows), with that range outlined and no block pinned.
        commands.push(Command::ShowSegment {
            event: Some(spans[k].opened_at.unwrap_or(column_event)),
            address: spans[k].address,
            size_bytes: spans[k].size_bytes,
        });
    }
}

/// The bands of every span live in each column of `rect` over events `first..=last`.
fn draw(spans: &[SegmentSpan], (first, last): (u32, u32), rect: Rect) -> Drawing {
    let width = rect.width().max(1.0) as usize;
    let count = u64::from(last - first) + 1;
    // Each column shows the state after its last event.
    let column_events: Vec<u32> = (0..width)
        .map(|c| first + ((c as u64 + 1) * count / width as u64).saturating_sub(1) as u32)
        .collect();
    // A sweep: spans join the live set when reserved and leave it when released (spans come
    // in the order they were reserved, so the set's order is the stacking order).
    let mut by_close: Vec<usize> = (0..spans.len())
        .filter(|&k| spans[k].closed_at.is_some())
        .collect();
    by_close.sort_by_key(|&k| spans[k].closed_at);
    let (mut next_open, mut next_close) = (0, 0);
    let mut live = std::collections::BTreeSet::new();
    let columns: Vec<ColumnStack> = column_events
        .iter()
        .map(|&e| {
            while next_open < spans.len() && spans[next_open].opened_at.is_none_or(|o| o <= e) {
                live.insert(next_open);
                next_open += 1;
            }
            while next_close < by_close.len()
                && spans[by_close[next_close]]
                    .closed_at
                    .is_some_and(|c| c <= e)
            {
                live.remove(&by_close[next_close]);
                next_close += 1;
            }
            let mut at = 0u64;
            let stack = live
                .iter()
                .map(|&k| {
                    let bottom = at;
                    at += spans[k].size_bytes;
                    (k, bottom, at)
                })
                .collect();
            (e, stack)
        })
        .collect();
    let top_bytes = columns
        .iter()
        .filter_map(|(_, s)| s.last().map(|&(_, _, top)| top))
        .max()
        .unwrap_or(0)
        .max(1)
        .saturating_mul(21)
        / 20;
    let col_w = rect.width() / width as f32;
    let y_of =
        |bytes: u64| rect.bottom() - (bytes as f64 / top_bytes as f64) as f32 * rect.height();
    // One quad per band, extended to the right while it keeps its place.
    let mut quads: Vec<(Rect, Color32)> = Vec::new();
    let mut open: Vec<Option<usize>> = vec![None; spans.len()];
    for (c, (_, stack)) in columns.iter().enumerate() {
        let x0 = rect.left() + c as f32 * col_w;
        for &(k, bottom, top) in stack {
            let (y_top, y_bottom) = (y_of(top), y_of(bottom));
            match open[k] {
                Some(q)
                    if (quads[q].0.top() - y_top).abs() < 0.25
                        && (quads[q].0.max.x - x0).abs() < 0.5 =>
                {
                    quads[q].0.max.x = x0 + col_w;
                }
                _ => {
                    quads.push((
                        Rect::from_min_max(
                            pos2(x0, y_top),
                            pos2(x0 + col_w, y_bottom.max(y_top + 0.5)),
                        ),
                        span_color(&spans[k], k),
                    ));
                    open[k] = Some(quads.len() - 1);
                }
            }
        }
    }
    let mut mesh = Mesh::default();
    for (r, color) in quads {
        mesh.add_colored_rect(r, color);
        // A thin line on top of each band keeps neighbours apart.
        mesh.add_colored_rect(
            Rect::from_min_max(r.min, pos2(r.max.x, r.min.y + 0.5)),
            palette::SEGMENT_OUTLINE,
        );
    }
    Drawing {
        mesh: Arc::new(mesh),
        columns,
        top_bytes,
    }
}

/// A colour per span, steady for its life; pages mapped into an expandable segment in the
/// mapping hues.
fn span_color(span: &SegmentSpan, k: usize) -> Color32 {
    let base = palette::series_color(k % 10);
    if span.mapped {
        base.gamma_multiply(0.75)
    } else {
        base
    }
}

/// The span under `p`, and the event of its column.
fn span_at(drawing: &Drawing, rect: Rect, p: Pos2) -> Option<(usize, u32)> {
    if !rect.contains(p) {
        return None;
    }
    let c = (((p.x - rect.left()) / rect.width()) * drawing.columns.len() as f32) as usize;
    let (event, stack) = drawing.columns.get(c)?;
    let bytes = f64::from((rect.bottom() - p.y) / rect.height()) * drawing.top_bytes as f64;
    stack
        .iter()
        .find(|&&(_, b, t)| (b as f64) <= bytes && bytes < t as f64)
        .map(|&(k, _, _)| (k, *event))
}

fn span_tooltip_ui(ui: &mut Ui, span: &SegmentSpan) {
    let when =
        |e: Option<u32>, none: &str| e.map_or_else(|| none.to_string(), |e| format!("event {e}"));
    egui::Grid::new("segment-span")
        .num_columns(2)
        .show(ui, |ui| {
            for (k, v) in [
                (
                    if span.mapped { "pages at" } else { "segment" },
                    format!("0x{:x}", span.address),
                ),
                ("size", format_bytes(span.size_bytes as i64)),
                ("reserved", when(span.opened_at, "before the trace")),
                (
                    "released",
                    when(span.closed_at, "never (still reserved at the end)"),
                ),
                ("stream", span.stream.to_string()),
            ] {
                ui.label(k);
                ui.label(v);
                ui.end_row();
            }
        });
    ui.weak("click: the pool right after it was reserved");
}

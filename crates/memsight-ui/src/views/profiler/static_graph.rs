//! The static graph's node-index lifetimes as packed bars.

use egui::{Align2, FontId, Rect, Sense, Ui, pos2, vec2};
use memsight_core::profiler::Rank;
use memsight_core::units::format_bytes;

use super::{AXIS_HEIGHT, ProfilerDoc};
use crate::palette;

pub(super) fn static_graph_ui(ui: &mut Ui, doc: &ProfilerDoc) {
    let data = &doc.data;
    let Some(rank) = data.run.ranks.iter().find(|r| !r.static_ops.is_empty()) else {
        ui.weak("no static_op_mem.csv (static graph mode) in this run");
        return;
    };
    static_graph_plot(ui, rank);
}

/// Static-graph nodes as bars over node indices, packed into rows.
fn static_graph_plot(ui: &mut Ui, rank: &Rank) {
    let ops = &rank.static_ops;
    let end_of = |o: &memsight_core::profiler::StaticOp, last: u64| o.node_end.unwrap_or(last);
    let last = ops
        .iter()
        .filter_map(|o| o.node_end)
        .max()
        .unwrap_or(1)
        .max(1)
        + 1;
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| (ops[i].node_start, end_of(&ops[i], last)));
    // Greedy packing: each node goes into the first row free at its start.
    let mut row_ends: Vec<u64> = Vec::new();
    let mut placed: Vec<(usize, usize)> = Vec::new();
    for i in order {
        let start = ops[i].node_start;
        let row = row_ends
            .iter()
            .position(|&e| e <= start)
            .unwrap_or_else(|| {
                row_ends.push(0);
                row_ends.len() - 1
            });
        row_ends[row] = end_of(&ops[i], last).max(start + 1);
        placed.push((i, row));
    }
    ui.label(format!(
        "{}: {} nodes over node indices 0 – {last} (bars end at the graph's end where the file says 4294967295)",
        rank.name,
        ops.len()
    ));
    let height = (row_ends.len() as f32 * 16.0 + AXIS_HEIGHT).min(ui.available_height().max(60.0));
    let (rect, response) =
        ui.allocate_exact_size(vec2(ui.available_width(), height), Sense::hover());
    let painter = ui.painter_at(rect);
    let chart = Rect::from_min_max(
        rect.min + vec2(8.0, 0.0),
        pos2(rect.max.x - 8.0, rect.max.y - AXIS_HEIGHT),
    );
    let largest = ops.iter().map(|o| o.size_bytes).max().unwrap_or(1).max(1);
    let row_h = (chart.height() / row_ends.len().max(1) as f32).min(16.0);
    let x_of = |n: u64| chart.left() + n as f32 / last as f32 * chart.width();
    let mut hovered = None;
    for &(i, row) in &placed {
        let o = &ops[i];
        let bar = Rect::from_min_max(
            pos2(x_of(o.node_start), chart.top() + row as f32 * row_h + 1.0),
            pos2(
                x_of(end_of(o, last)).max(x_of(o.node_start) + 2.0),
                chart.top() + (row + 1) as f32 * row_h - 1.0,
            ),
        );
        let shade = 0.35 + 0.65 * (o.size_bytes as f32 / largest as f32);
        painter.rect_filled(bar, 1.0, palette::CURVE_ALLOCATED.gamma_multiply(shade));
        if response.hover_pos().is_some_and(|p| bar.contains(p)) {
            hovered = Some(i);
        }
    }
    let step = crate::views::axes::nice_step(last as f64 / 8.0).max(1.0);
    let mut n = 0.0;
    while n <= last as f64 {
        painter.text(
            pos2(x_of(n as u64), chart.bottom() + 2.0),
            Align2::CENTER_TOP,
            format!("{n}"),
            FontId::proportional(11.0),
            palette::AXIS,
        );
        n += step;
    }
    if let Some(i) = hovered {
        let o = &ops[i];
        response.on_hover_ui_at_pointer(|ui| {
            ui.label(&o.op_name);
            ui.label(format!(
                "{} (model {}, graph {})",
                format_bytes(o.size_bytes),
                o.model_name,
                o.graph_id
            ));
            ui.label(format!(
                "nodes {} – {}",
                o.node_start,
                o.node_end
                    .map_or_else(|| "end of graph".to_string(), |e| e.to_string())
            ));
        });
    }
}

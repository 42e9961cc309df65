//! The static graph's node-index lifetimes as packed bars, one chart per graph: node indices
//! count within a graph, so two graphs on one axis would overlap where nothing overlaps.

use egui::{Align2, FontId, Rect, Sense, Stroke, Ui, pos2, vec2};
use memsight_core::profiler::static_graph::{self, GraphPlan};
use memsight_core::profiler::{Rank, StaticOp};
use memsight_core::units::format_bytes;

use super::{AXIS_HEIGHT, ProfilerDoc};
use crate::palette;

/// The tallest a row of bars is drawn.
const ROW_HEIGHT: f32 = 16.0;

pub(super) fn static_graph_ui(ui: &mut Ui, doc: &ProfilerDoc) {
    let data = &doc.data;
    let Some(rank) = data.run.ranks.iter().find(|r| !r.static_ops.is_empty()) else {
        ui.weak("no static_op_mem.csv (static graph mode) in this run");
        return;
    };
    let plans = static_graph::plans(rank);
    ui.label(format!(
        "{}: {} nodes in {} graph(s). Bars run from a node's start index to its end index (to the \
         graph's end where the file says 4294967295); the line marks the index where the most is \
         alive.",
        rank.name,
        rank.static_ops.len(),
        plans.len()
    ));
    egui::ScrollArea::vertical()
        .auto_shrink([false, false])
        .show(ui, |ui| {
            for plan in &plans {
                static_graph_plot(ui, rank, plan);
                ui.add_space(8.0);
            }
        });
}

/// One graph's nodes as bars over its node indices, packed into rows.
fn static_graph_plot(ui: &mut Ui, rank: &Rank, plan: &GraphPlan) {
    let ops = &plan.ops;
    let end_of = |o: &StaticOp, last: u64| o.node_end.unwrap_or(last);
    let last = ops
        .iter()
        .flat_map(|o| [Some(o.node_start), o.node_end])
        .flatten()
        .max()
        .unwrap_or(1)
        .max(1)
        + 1;
    let (rows, placed) = pack_rows(ops, last);
    ui.strong(format!(
        "model {}, graph {} ({}): {} nodes over node indices 0 – {last}; at most {} alive at \
         node index {}{}",
        plan.model,
        plan.graph,
        rank.name,
        ops.len(),
        format_bytes(plan.peak_bytes),
        plan.peak_index,
        plan.total_bytes.map_or_else(String::new, |t| format!(
            "; its TOTAL row requests {}",
            format_bytes(t)
        )),
    ));
    let height = rows as f32 * ROW_HEIGHT + AXIS_HEIGHT;
    let (rect, response) =
        ui.allocate_exact_size(vec2(ui.available_width(), height), Sense::hover());
    let painter = ui.painter_at(rect);
    let chart = Rect::from_min_max(
        rect.min + vec2(8.0, 0.0),
        pos2(rect.max.x - 8.0, rect.max.y - AXIS_HEIGHT),
    );
    let largest = ops.iter().map(|o| o.size_bytes).max().unwrap_or(1).max(1);
    let x_of = |n: u64| chart.left() + n as f32 / last as f32 * chart.width();
    let mut hovered = None;
    for &(i, row) in &placed {
        let o = ops[i];
        let bar = Rect::from_min_max(
            pos2(
                x_of(o.node_start),
                chart.top() + row as f32 * ROW_HEIGHT + 1.0,
            ),
            pos2(
                x_of(end_of(o, last)).max(x_of(o.node_start) + 2.0),
                chart.top() + (row + 1) as f32 * ROW_HEIGHT - 1.0,
            ),
        );
        let shade = 0.35 + 0.65 * (o.size_bytes as f32 / largest as f32);
        painter.rect_filled(bar, 1.0, palette::CURVE_ALLOCATED.gamma_multiply(shade));
        if response.hover_pos().is_some_and(|p| bar.contains(p)) {
            hovered = Some(o);
        }
    }
    let peak_x = x_of(plan.peak_index);
    painter.line_segment(
        [pos2(peak_x, chart.top()), pos2(peak_x, chart.bottom())],
        Stroke::new(1.5, palette::MARK),
    );
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
    if let Some(o) = hovered {
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

/// Greedy packing of `ops` (ending at `last` where they live to the graph's end): each node, by
/// start index, goes into the first row free at its start. The row count, and (node, row) pairs.
fn pack_rows(ops: &[&StaticOp], last: u64) -> (usize, Vec<(usize, usize)>) {
    let end_of = |o: &StaticOp| o.node_end.unwrap_or(last);
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| (ops[i].node_start, end_of(ops[i])));
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
        row_ends[row] = end_of(ops[i]).max(start + 1);
        placed.push((i, row));
    }
    (row_ends.len(), placed)
}

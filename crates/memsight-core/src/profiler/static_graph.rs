//! `static_op_mem.csv` per graph: a static graph's compiler plans each node's memory from its
//! start node index through its end node index before the graph runs. The plan of one graph: what
//! its nodes add up to, the file's own `TOTAL`, the most alive at one node index and the nodes
//! alive then, and what lives to the end of the graph. The doctor reports it
//! (`detect::static_plan`), the app draws it, one chart per graph (node indices are per graph).

use std::collections::BTreeMap;

use super::{Rank, StaticOp};

/// One graph of `static_op_mem.csv`, summarised.
pub struct GraphPlan<'a> {
    pub model: &'a str,
    pub graph: &'a str,
    /// Its nodes, in file order.
    pub ops: Vec<&'a StaticOp>,
    /// Every node's bytes added up.
    pub all_bytes: i64,
    /// The most alive at one node index, and that index.
    pub peak_bytes: i64,
    pub peak_index: u64,
    /// The nodes alive at `peak_index`, largest first.
    pub holders: Vec<&'a StaticOp>,
    /// Nodes that live to the end of the graph.
    pub to_end_bytes: i64,
    /// The file's `TOTAL` row for the graph: what it requests in all.
    pub total_bytes: Option<i64>,
}

/// The plan of every graph of `rank`'s `static_op_mem.csv`, by (model, graph).
pub fn plans(rank: &Rank) -> Vec<GraphPlan<'_>> {
    let mut graphs: BTreeMap<(&str, &str), Vec<&StaticOp>> = BTreeMap::new();
    for op in &rank.static_ops {
        graphs
            .entry((op.model_name.as_str(), op.graph_id.as_str()))
            .or_default()
            .push(op);
    }
    graphs
        .into_iter()
        .map(|(key, ops)| plan(rank, key, ops))
        .collect()
}

/// The plan of one graph's nodes `ops`: a node counts from its start index through its end
/// index (when its last user runs).
fn plan<'a>(
    rank: &'a Rank,
    (model, graph): (&'a str, &'a str),
    ops: Vec<&'a StaticOp>,
) -> GraphPlan<'a> {
    // Sweep over node indices: +size at a start, −size after an end.
    let mut steps: Vec<(u64, i64)> = Vec::with_capacity(2 * ops.len());
    for op in &ops {
        steps.push((op.node_start, op.size_bytes));
        if let Some(end) = op.node_end {
            steps.push((end.saturating_add(1), -op.size_bytes));
        }
    }
    steps.sort_unstable();
    let (mut alive, mut peak_bytes, mut peak_index) = (0i64, 0i64, 0u64);
    for (k, &(index, delta)) in steps.iter().enumerate() {
        alive = alive.saturating_add(delta);
        let last_at_index = steps.get(k + 1).is_none_or(|&(next, _)| next != index);
        if last_at_index && alive > peak_bytes {
            (peak_bytes, peak_index) = (alive, index);
        }
    }
    let mut holders: Vec<&StaticOp> = ops
        .iter()
        .copied()
        .filter(|op| op.node_start <= peak_index && op.node_end.is_none_or(|end| peak_index <= end))
        .collect();
    holders.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| a.op_name.cmp(&b.op_name))
    });
    GraphPlan {
        model,
        graph,
        all_bytes: ops.iter().map(|op| op.size_bytes).sum(),
        peak_bytes,
        peak_index,
        holders,
        to_end_bytes: ops
            .iter()
            .filter(|op| op.node_end.is_none())
            .map(|op| op.size_bytes)
            .sum(),
        total_bytes: rank
            .static_totals
            .iter()
            .find(|t| t.model_name == model && t.graph_id == graph)
            .map(|t| t.size_bytes),
        ops,
    }
}

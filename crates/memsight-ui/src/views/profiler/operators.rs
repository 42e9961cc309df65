//! The operator table: every allocation an operator made, sortable, filterable, marked on the
//! curves.

use std::sync::Arc;

use egui::{Sense, Ui};
use memsight_core::units::format_bytes;

use super::{PreparedProfiler, ProfilerDoc, SortBy, TableState};

/// Seconds on the axis of a rank that starts at `offset_us`.
fn relative_s(offset_us: f64, t_us: f64) -> String {
    if t_us.is_nan() {
        "-".to_string()
    } else {
        format!("{:.6}", (t_us - offset_us) / 1e6)
    }
}

/// Rebuilds the table's rows when their settings changed: sorting and the name filter once per
/// change (the expensive part), the time range on top of that every time it moves (a linear pass,
/// so zooming with "only rows in the range" on stays smooth on millions of rows).
fn table_rows(doc: &mut ProfilerDoc) {
    let t = &doc.table;
    let sort_key = (t.sort, t.ascending, t.filter.clone());
    if t.sorted_key.as_ref() != Some(&sort_key) {
        doc.table.sorted = sorted_rows(&doc.data, &doc.table);
        doc.table.sorted_key = Some(sort_key);
        doc.table.key = None;
    }
    let (x0, x1) = doc.range.unwrap_or_else(|| doc.view());
    let t = &doc.table;
    let key = if t.only_visible {
        (true, x0.to_bits(), x1.to_bits(), doc.align_starts)
    } else {
        (false, 0, 0, false)
    };
    if t.key == Some(key) {
        return;
    }
    let rows = if t.only_visible {
        let data = &doc.data;
        let offsets: Vec<f64> = (0..data.run.ranks.len())
            .map(|r| doc.offset_us(r))
            .collect();
        let inside = |r: usize, v: f64| !v.is_nan() && v >= x0 + offsets[r] && v <= x1 + offsets[r];
        t.sorted
            .iter()
            .copied()
            .filter(|&(r, i)| {
                let o = &data.run.ranks[r].operators[i];
                inside(r, o.alloc_us) || inside(r, o.release_us)
            })
            .collect()
    } else {
        t.sorted.clone()
    };
    doc.table.rows = rows;
    doc.table.key = Some(key);
}

/// Every operator row whose name matches the filter, in the table's sort order (unknown values
/// last either way).
fn sorted_rows(data: &PreparedProfiler, t: &TableState) -> Vec<(usize, usize)> {
    let filter = t.filter.to_lowercase();
    let mut rows: Vec<(usize, usize)> = data
        .run
        .ranks
        .iter()
        .enumerate()
        .flat_map(|(r, rank)| {
            rank.operators
                .iter()
                .enumerate()
                .filter(|(_, o)| {
                    filter.is_empty() || rank.operator_name(o).to_lowercase().contains(&filter)
                })
                .map(move |(i, _)| (r, i))
        })
        .collect();
    let op = |&(r, i): &(usize, usize)| &data.run.ranks[r].operators[i];
    let value = |row: &(usize, usize)| match t.sort {
        SortBy::Size => op(row).size_bytes as f64,
        SortBy::Duration => op(row).duration_us(),
        SortBy::Time => op(row).alloc_us,
    };
    rows.sort_by(|a, b| {
        let (va, vb) = (value(a), value(b));
        match (va.is_nan(), vb.is_nan()) {
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ if t.ascending => va.total_cmp(&vb),
            _ => vb.total_cmp(&va),
        }
    });
    rows
}

/// The operator table's columns: title, sort key (for the sortable ones), default width.
const COLUMNS: [(&str, Option<SortBy>, f32); 6] = [
    ("rank", None, 120.0),
    ("name", None, 240.0),
    ("size", Some(SortBy::Size), 90.0),
    ("allocated (s)", Some(SortBy::Time), 110.0),
    ("released (s)", None, 110.0),
    ("duration", Some(SortBy::Duration), 90.0),
];

/// A column title; the sortable ones are buttons that sort by them (again: the other way).
fn header_cell(ui: &mut Ui, doc: &mut ProfilerDoc, label: &str, sort: Option<SortBy>) {
    let Some(sort) = sort else {
        ui.strong(label);
        return;
    };
    let arrow = if doc.table.sort == sort {
        if doc.table.ascending { " ^" } else { " v" }
    } else {
        ""
    };
    if ui.button(format!("{label}{arrow}")).clicked() {
        if doc.table.sort == sort {
            doc.table.ascending = !doc.table.ascending;
        } else {
            doc.table.sort = sort;
            doc.table.ascending = false;
        }
    }
}

pub(super) fn operators_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    ui.horizontal_wrapped(|ui| {
        let label = ui.label("operator name");
        ui.add(
            egui::TextEdit::singleline(&mut doc.table.filter)
                .desired_width(160.0)
                .hint_text("filter"),
        )
        .labelled_by(label.id);
        ui.checkbox(
            &mut doc.table.only_visible,
            "only rows allocated or released in the range (Ctrl+drag on the curves; without one, the visible range)",
        );
    });
    table_rows(doc);
    let data = Arc::clone(&doc.data);
    let total: usize = data.run.ranks.iter().map(|r| r.operators.len()).sum();
    ui.weak(format!(
        "{} of {total} rows (click a row: mark it on the curves)",
        doc.table.rows.len()
    ));
    let multi = data.run.ranks.len() > 1;
    // One rank: no rank column.
    let columns: Vec<_> = COLUMNS.iter().skip(usize::from(!multi)).collect();
    // Taken out for the frame (no copy), put back below.
    let rows = std::mem::take(&mut doc.table.rows);
    let mut table = egui_extras::TableBuilder::new(ui)
        .id_salt("operator-table")
        .striped(true)
        .resizable(true)
        .sense(Sense::click())
        .auto_shrink([false, false])
        // The rows take the height the panel has, however small (not egui_extras' 200 px).
        .min_scrolled_height(0.0)
        .cell_layout(egui::Layout::left_to_right(egui::Align::Center));
    for (k, (_, _, width)) in columns.iter().enumerate() {
        let column = egui_extras::Column::initial(*width)
            .at_least(40.0)
            .clip(true);
        table = table.column(if k + 1 == columns.len() {
            column.resizable(false)
        } else {
            column
        });
    }
    let mut marked = None;
    table
        .header(22.0, |mut header| {
            for (label, sort, _) in &columns {
                header.col(|ui| header_cell(ui, doc, label, *sort));
            }
        })
        .body(|body| {
            body.rows(18.0, rows.len(), |mut row| {
                let (r, i) = rows[row.index()];
                let rank = &data.run.ranks[r];
                let o = &rank.operators[i];
                row.set_selected(doc.marked == Some((r, i)));
                let duration = if o.duration_us().is_nan() {
                    "-".to_string()
                } else {
                    format!("{:.3} ms", o.duration_us() / 1e3)
                };
                let cells = [
                    (rank.name.clone(), rank.name.clone()),
                    (
                        rank.operator_name(o).to_string(),
                        rank.operator_name(o).to_string(),
                    ),
                    (
                        format_bytes(o.size_bytes),
                        format!("{} bytes", o.size_bytes),
                    ),
                    (
                        relative_s(doc.offset_us(r), o.alloc_us),
                        "allocated, seconds on the axis".to_string(),
                    ),
                    (
                        relative_s(doc.offset_us(r), o.release_us),
                        "released, seconds on the axis".to_string(),
                    ),
                    (duration, "allocated to released".to_string()),
                ];
                for (text, full) in cells.into_iter().skip(usize::from(!multi)) {
                    row.col(|ui| {
                        ui.add(egui::Label::new(text).truncate().selectable(false))
                            .on_hover_text(full);
                    });
                }
                if row.response().clicked() {
                    marked = Some((r, i));
                }
            });
        });
    doc.table.rows = rows;
    if let Some((r, i)) = marked {
        doc.mark(r, i);
    }
}

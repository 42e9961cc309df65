//! The operator table: every allocation an operator made, sortable, filterable, marked on the
//! curves.

use std::sync::Arc;

use egui::{Sense, Ui, vec2};
use memsight_core::units::format_bytes;

use super::{PreparedProfiler, ProfilerDoc, SortBy, TableState};
use crate::palette;

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

/// A table cell exactly `width` wide, so header and rows line up.
fn cell<R>(ui: &mut Ui, width: f32, add: impl FnOnce(&mut Ui) -> R) -> R {
    ui.allocate_ui_with_layout(
        vec2(width, 18.0),
        egui::Layout::left_to_right(egui::Align::Center),
        |ui| {
            ui.set_min_width(width);
            ui.set_max_width(width);
            add(ui)
        },
    )
    .inner
}

/// Widths of the operator table's columns: rank, name, size, allocated, released, duration.
const COLUMN_WIDTHS: [f32; 6] = [160.0, 220.0, 90.0, 100.0, 100.0, 90.0];

/// The operator table's header; the sortable columns are buttons.
fn operators_header(ui: &mut Ui, doc: &mut ProfilerDoc, multi: bool) {
    let header = |ui: &mut Ui, doc: &mut ProfilerDoc, label: &str, sort: Option<SortBy>| {
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
    };
    ui.horizontal(|ui| {
        for (k, (label, sort)) in [
            ("rank", None),
            ("name", None),
            ("size", Some(SortBy::Size)),
            ("allocated (s)", Some(SortBy::Time)),
            ("released (s)", None),
            ("duration", Some(SortBy::Duration)),
        ]
        .into_iter()
        .enumerate()
        {
            if k == 0 && !multi {
                continue;
            }
            cell(ui, COLUMN_WIDTHS[k], |ui| header(ui, doc, label, sort));
        }
    });
}

pub(super) fn operators_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    ui.horizontal(|ui| {
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
    operators_header(ui, doc, multi);
    let widths = COLUMN_WIDTHS;
    // Taken out for the frame (no copy), put back below.
    let rows = std::mem::take(&mut doc.table.rows);
    egui::ScrollArea::vertical()
        .id_salt("operator-rows")
        .auto_shrink([false, false])
        .show_rows(ui, 18.0, rows.len(), |ui, range| {
            for &(r, i) in &rows[range] {
                let rank = &data.run.ranks[r];
                let o = &rank.operators[i];
                let selected = doc.marked == Some((r, i));
                let cells = [
                    rank.name.clone(),
                    rank.operator_name(o).to_string(),
                    format_bytes(o.size_bytes),
                    relative_s(doc.offset_us(r), o.alloc_us),
                    relative_s(doc.offset_us(r), o.release_us),
                    if o.duration_us().is_nan() {
                        "-".to_string()
                    } else {
                        format!("{:.3} ms", o.duration_us() / 1e3)
                    },
                ];
                let clicked = ui
                    .horizontal(|ui| {
                        let mut clicked = false;
                        for (k, value) in cells.iter().enumerate() {
                            if k == 0 && !multi {
                                continue;
                            }
                            let text = egui::RichText::new(value).color(if selected {
                                palette::MARK
                            } else {
                                palette::AXIS
                            });
                            clicked |= cell(ui, widths[k], |ui| {
                                ui.add(egui::Label::new(text).truncate().sense(Sense::click()))
                                    .clicked()
                            });
                        }
                        clicked
                    })
                    .inner;
                if clicked {
                    doc.mark(r, i);
                }
            }
        });
    doc.table.rows = rows;
}

//! msMemScope's own comparison of two runs (`memory_compare_*.csv`) as a table in a window: the
//! operators of both runs aligned, with the bytes each allocated, largest difference first, a
//! filter, and the operators one run lacks marked.

use egui::Ui;
use egui_extras::{Column, TableBuilder};
use memsight_core::memscope::compare::CompareRow;
use memsight_core::units::format_bytes;

/// One opened `memory_compare_*.csv`.
pub struct CompareTable {
    pub name: String,
    /// In the file's order.
    pub rows: Vec<CompareRow>,
    pub open: bool,
    pub filter: String,
    pub only_differing: bool,
    /// Largest |Δ| first (else the file's order: the runs' order of operators).
    pub by_difference: bool,
}

impl CompareTable {
    pub fn new(name: String, rows: Vec<CompareRow>) -> Self {
        Self {
            name,
            rows,
            open: true,
            filter: String::new(),
            only_differing: true,
            by_difference: true,
        }
    }

    /// The rows shown: filtered and sorted as the user chose (indexes into `rows`).
    pub fn shown(&self) -> Vec<usize> {
        let needle = self.filter.trim().to_lowercase();
        let mut shown: Vec<usize> = (0..self.rows.len())
            .filter(|&i| {
                let r = &self.rows[i];
                (!self.only_differing || r.diff_bytes != 0)
                    && (needle.is_empty() || r.name.to_lowercase().contains(&needle))
            })
            .collect();
        if self.by_difference {
            shown.sort_by_key(|&i| (std::cmp::Reverse(self.rows[i].diff_bytes.unsigned_abs()), i));
        }
        shown
    }
}

fn signed(bytes: i64) -> String {
    if bytes > 0 {
        format!("+{}", format_bytes(bytes))
    } else {
        format_bytes(bytes)
    }
}

/// What one side allocated, or that it lacks the operator.
fn side(bytes: Option<i64>) -> String {
    bytes.map_or_else(|| "absent".to_string(), format_bytes)
}

/// The window's contents.
pub fn compare_ui(ui: &mut Ui, table: &mut CompareTable) {
    let rows = &table.rows;
    let total: i64 = rows.iter().map(|r| r.diff_bytes).sum();
    let differing = rows.iter().filter(|r| r.diff_bytes != 0).count();
    let only_base = rows
        .iter()
        .filter(|r| r.base_bytes.is_some() && r.compare_bytes.is_none())
        .count();
    let only_compare = rows
        .iter()
        .filter(|r| r.base_bytes.is_none() && r.compare_bytes.is_some())
        .count();
    ui.label(format!(
        "{} operators aligned by msMemScope, {differing} allocate a different amount; {only_base} \
         only in the base run, {only_compare} only in the compared run. The differences add up \
         to {}.",
        rows.len(),
        signed(total)
    ));
    ui.weak("Bytes: what the operator allocated (the first block after it ended), per run.");
    ui.horizontal_wrapped(|ui| {
        ui.label("operator");
        ui.add(
            egui::TextEdit::singleline(&mut table.filter)
                .hint_text("filter")
                .desired_width(160.0),
        );
        ui.checkbox(&mut table.only_differing, "only rows that differ");
        ui.checkbox(&mut table.by_difference, "largest difference first")
            .on_hover_text("off: in the runs' order");
    });
    let shown = table.shown();
    ui.weak(format!("{} of {} rows", shown.len(), table.rows.len()));
    let rows = &table.rows;
    TableBuilder::new(ui)
        .id_salt(("memscope-compare", &table.name))
        .striped(true)
        .resizable(true)
        .auto_shrink([false, false])
        .min_scrolled_height(0.0)
        .column(Column::initial(96.0).at_least(60.0))
        .column(Column::initial(86.0).at_least(60.0))
        .column(Column::initial(86.0).at_least(60.0))
        .column(Column::initial(52.0).at_least(40.0))
        .column(Column::remainder().at_least(120.0).clip(true))
        .header(20.0, |mut header| {
            for title in ["Δ", "base", "compare", "device", "operator"] {
                header.col(|ui| {
                    ui.strong(title);
                });
            }
        })
        .body(|body| {
            body.rows(18.0, shown.len(), |mut row| {
                let r = &rows[shown[row.index()]];
                let cells = [
                    signed(r.diff_bytes),
                    side(r.base_bytes),
                    side(r.compare_bytes),
                    r.device.clone(),
                ];
                for text in cells {
                    row.col(|ui| {
                        ui.label(text);
                    });
                }
                row.col(|ui| {
                    let name = match (r.base_bytes, r.compare_bytes) {
                        (None, Some(_)) => format!("{} (only in compare)", r.name),
                        (Some(_), None) => format!("{} (only in base)", r.name),
                        _ => r.name.clone(),
                    };
                    ui.add(egui::Label::new(name).truncate())
                        .on_hover_text(format!("{} ({}), line {}", r.name, r.event, r.line));
                });
            });
        });
}

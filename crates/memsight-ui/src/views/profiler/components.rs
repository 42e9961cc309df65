//! The CANN components of `npu_module_mem.csv` / `memory_record.csv`: peaks, tick to plot.

use std::sync::Arc;

use egui::{Rect, Sense, Ui, vec2};
use memsight_core::units::format_bytes;

use super::{ProfilerDoc, series_checkbox};
use crate::palette;

pub(super) fn components_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    let data = Arc::clone(&doc.data);
    egui::ScrollArea::vertical()
        .id_salt("components")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            for (rank, summary) in data.run.ranks.iter().zip(&data.summaries) {
                ui.strong(&rank.name);
                if rank.modules.is_empty() {
                    ui.weak("no npu_module_mem.csv for this rank");
                    continue;
                }
                let peaks = &summary.module_peaks;
                let zero = summary.idle_modules;
                let largest = peaks.first().map_or(1.0, |p| p.1);
                egui::Grid::new(format!("components-{}", rank.name))
                    .striped(true)
                    .show(ui, |ui| {
                        for (name, peak) in peaks {
                            let peak = *peak;
                            series_checkbox(ui, &mut doc.shown, true, name.clone(), name)
                                .on_hover_text("plot it on the curves");
                            ui.label(format!("peak {}", format_bytes(peak as i64)));
                            let (bar, _) =
                                ui.allocate_exact_size(vec2(200.0, 10.0), Sense::hover());
                            ui.painter().rect_filled(
                                Rect::from_min_size(
                                    bar.min,
                                    vec2(bar.width() * (peak / largest) as f32, bar.height()),
                                ),
                                0.0,
                                palette::CURVE_ALLOCATED,
                            );
                            ui.end_row();
                        }
                    });
                ui.weak(format!("{zero} more components held nothing"));
                ui.separator();
            }
        });
}

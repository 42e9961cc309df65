//! The ranks side by side: peaks, stalls, APP − operator gap.

use egui::Ui;
use memsight_core::detect::Finding;
use memsight_core::units::format_bytes;

use super::ProfilerDoc;

pub(super) fn ranks_ui(ui: &mut Ui, doc: &ProfilerDoc) {
    use memsight_core::detect::FindingKind;
    let data = &doc.data;
    egui::Grid::new("ranks-table").striped(true).show(ui, |ui| {
        for h in [
            "rank",
            "device",
            "samples",
            "peak operator allocated",
            "peak operator reserved",
            "peak APP reserved",
            "stalls",
            "APP - operator reserved (median)",
        ] {
            ui.strong(h);
        }
        ui.end_row();
        for (rank, summary) in data.run.ranks.iter().zip(&data.summaries) {
            let peak =
                |p: Option<f64>| p.map_or_else(|| "-".to_string(), |p| format_bytes(p as i64));
            let of_rank = |kind| {
                data.findings.iter().filter(move |f| {
                    f.kind == kind && f.rank.as_deref() == Some(rank.name.as_str())
                })
            };
            let stalls: Vec<&Finding> = of_rank(FindingKind::AllocatorStall).collect();
            ui.label(&rank.name);
            ui.label(rank.device.as_deref().unwrap_or("-"));
            ui.label(summary.samples.to_string());
            ui.label(peak(summary.peak_operator_allocated));
            ui.label(peak(summary.peak_operator_reserved));
            ui.label(peak(summary.peak_app_reserved));
            ui.label(if stalls.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "{} ({} released)",
                    stalls.len(),
                    format_bytes(stalls.iter().map(|f| f.bytes as i64).sum())
                )
            });
            ui.label(
                of_rank(FindingKind::UnaccountedMemory)
                    .next()
                    .map_or_else(|| "small".to_string(), |f| format_bytes(f.bytes as i64)),
            );
            ui.end_row();
        }
    });
}

//! Memory by owner (msMemScope recordings): a stacked chart of allocated bytes by owner over the
//! trace, at the owner depth the user picks (1: `PTA`, 2: `PTA@model`, 3: `PTA@model@gradient`, …), as the decomposition
//! view of `MindStudio Insight` shows it, and the table of the owners at the selected event, which
//! adds up to the allocated bytes there.

use std::sync::Arc;

use egui::Ui;
use memsight_core::owner::{NAMING_DEPTH, OwnerBytes, bytes_by_owner, max_depth, series_by_owner};
use memsight_core::units::format_bytes;

use crate::palette;
use crate::prepared::Prepared;

/// Samples of the stacked chart, at most.
const SAMPLES: usize = 2000;

/// The owners' bytes over the trace at one depth.
pub struct Series {
    pub device: usize,
    pub depth: usize,
    /// Sampled event indices.
    pub events: Vec<u32>,
    pub owners: Vec<String>,
    /// Per owner, its bytes after each sampled event.
    pub bytes: Vec<Vec<u64>>,
}

/// The window's state, one per open file.
pub struct OwnersState {
    pub open: bool,
    /// Owner levels shown (1 ..= the file's deepest).
    pub depth: usize,
    series: Option<Arc<Series>>,
}

impl Default for OwnersState {
    fn default() -> Self {
        Self {
            open: false,
            depth: NAMING_DEPTH,
            series: None,
        }
    }
}

impl OwnersState {
    /// The series for `device` at the chosen depth, computed when either changes.
    fn series(&mut self, data: &Prepared, device: usize) -> Arc<Series> {
        if let Some(s) = self
            .series
            .as_ref()
            .filter(|s| s.device == device && s.depth == self.depth)
        {
            return Arc::clone(s);
        }
        let snapshot = &data.loaded.snapshot;
        let dev = &snapshot.devices[device];
        let n = dev.trace.len();
        let step = n.div_ceil(SAMPLES).max(1);
        let events: Vec<u32> = (0..n).step_by(step).map(|e| e as u32).collect();
        let (owners, bytes) = series_by_owner(
            snapshot,
            dev,
            &data.loaded.replays[device],
            self.depth,
            &events,
        );
        let series = Arc::new(Series {
            device,
            depth: self.depth,
            events,
            owners,
            bytes,
        });
        self.series = Some(Arc::clone(&series));
        series
    }
}

/// An owner's colour: its place among `names` (sorted), as on the lifecycle chart at
/// [`NAMING_DEPTH`].
fn color_of(names: &[String], owner: &str) -> egui::Color32 {
    let index = names.binary_search_by(|n| n.as_str().cmp(owner)).ok();
    palette::owner_color(index, 0)
}

/// The window's contents: depth, the stacked chart, the owners at `event`.
pub fn owners_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    event: Option<u32>,
    state: &mut OwnersState,
) {
    let snapshot = &data.loaded.snapshot;
    let dev = &snapshot.devices[device];
    let deepest = max_depth(snapshot, dev).max(1);
    state.depth = state.depth.clamp(1, deepest);
    ui.horizontal(|ui| {
        ui.label("owner levels");
        ui.add(egui::Slider::new(&mut state.depth, 1..=deepest));
    });
    let series = state.series(data, device);
    // At the chart's depth (or where the owners stop before it), the chart's own list (every
    // device's owners), so colours match.
    let names: Vec<String> = if state.depth >= NAMING_DEPTH.min(deepest) {
        data.owner_names.clone()
    } else {
        let mut names: Vec<String> = series
            .owners
            .iter()
            .filter(|o| !o.starts_with('('))
            .cloned()
            .collect();
        names.sort_unstable();
        names
    };
    let xs: Vec<f64> = series.events.iter().map(|&e| f64::from(e)).collect();
    let mut lower = vec![0.0f64; xs.len()];
    let height = (ui.available_height() * 0.55).clamp(140.0, 320.0);
    egui_plot::Plot::new(("owners-stacked", device))
        .height(height)
        .x_axis_label("event")
        .y_axis_formatter(|mark, _| format_bytes(mark.value as i64))
        .y_grid_spacer(|input| crate::views::axes::byte_grid(&input, false))
        .grid_color(palette::PLOT_GRID)
        // No legend over the bands: the table under the plot names each colour.
        .show(ui, |plot| {
            // Each owner's band between the owners below it and itself (stacked areas).
            for (owner, bytes) in series.owners.iter().zip(&series.bytes) {
                let upper: Vec<f64> = lower
                    .iter()
                    .zip(bytes)
                    .map(|(l, &b)| l + b as f64)
                    .collect();
                let color = color_of(&names, owner);
                plot.add(
                    egui_plot::FilledArea::new(owner.clone(), &xs, &lower, &upper)
                        .fill_color(color)
                        .stroke(egui::Stroke::new(0.5, color)),
                );
                lower = upper;
            }
            if let Some(e) = event {
                plot.vline(
                    egui_plot::VLine::new("selected event", f64::from(e))
                        .color(palette::SELECTED_EVENT),
                );
            }
        });
    let at = event.or_else(|| data.loaded.replays[device].peak_allocated.event);
    let owners: Vec<OwnerBytes> =
        bytes_by_owner(snapshot, dev, &data.loaded.replays[device], at, state.depth);
    let total: u64 = owners.iter().map(|o| o.bytes).sum();
    ui.label(format!(
        "{} allocated {}: by owner",
        format_bytes(total as i64),
        match (event, at) {
            (Some(e), _) => format!("after event {e}"),
            (None, Some(e)) => format!("at the peak (event {e})"),
            (None, None) => "before the first event".to_string(),
        }
    ));
    egui::Grid::new(("owners-table", device))
        .striped(true)
        .num_columns(3)
        .show(ui, |ui| {
            for o in &owners {
                ui.colored_label(color_of(&names, &o.owner), "■");
                ui.label(&o.owner);
                ui.label(format!(
                    "{}  ({:.1} %)",
                    format_bytes(o.bytes as i64),
                    o.bytes as f64 * 100.0 / total.max(1) as f64
                ));
                ui.end_row();
            }
        });
}

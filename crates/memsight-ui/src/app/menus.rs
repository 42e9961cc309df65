//! The menu bar, the load progress line and the summary bar.

use std::sync::Arc;

use egui::Ui;
use memsight_core::units::format_bytes;

use super::dialogs::Purpose;
use super::{ExportTarget, MemsightApp};
use crate::palette::{self, ColorBy};

impl MemsightApp {
    /// The View menu: options of the chart shown (a profiler run's or a snapshot's).
    pub(super) fn view_menu(&mut self, ui: &mut Ui) {
        if let Some(doc) = self.active_profiler.and_then(|p| self.profilers.get_mut(p)) {
            ui.checkbox(&mut self.show_findings, "Findings panel");
            if doc.data.run.ranks.len() > 1 {
                ui.checkbox(&mut doc.overlay, "Overlay ranks");
            }
            if ui.button("Reset zoom  (double-click)").clicked() {
                doc.x_range = None;
            }
        } else if let Some(doc) = self.docs.get_mut(self.active) {
            let has_time = doc
                .device_index()
                .is_some_and(|i| doc.data.times[i].is_some());
            ui.add_enabled(
                has_time,
                egui::Checkbox::new(&mut doc.lifecycle.use_time, "Time on the x axis"),
            )
            .on_disabled_hover_text("this trace has no times: the x axis is the event index");
            ui.checkbox(&mut self.show_pool, "Pool state chart");
            ui.checkbox(&mut self.show_findings, "Findings panel");
            ui.separator();
            ui.label("Colour allocations by");
            ui.radio_value(&mut doc.lifecycle.color_by, ColorBy::CallSite, "call site");
            ui.radio_value(
                &mut doc.lifecycle.color_by,
                ColorBy::Category,
                "category (parameter, gradient, activation …)",
            );
            if doc.data.has_owners() {
                ui.radio_value(
                    &mut doc.lifecycle.color_by,
                    ColorBy::Owner,
                    "owner (msMemScope: PTA@gradient …)",
                );
            }
            let mut legend = !doc.lifecycle.hide_legend;
            if ui.checkbox(&mut legend, "Legend on the chart").changed() {
                doc.lifecycle.hide_legend = !legend;
            }
            ui.separator();
            if ui
                .button("Analyse the visible range  (or Ctrl+drag)")
                .clicked()
                && let Some(range) = doc.lifecycle.visible_events()
            {
                doc.commands
                    .push(crate::selection::Command::SelectRange(Some(range)));
            }
            if ui.button("Reset zoom  (double-click)").clicked() {
                doc.lifecycle.x_range = None;
            }
            // Last, so the rows above keep their places.
            ui.separator();
            ui.checkbox(
                &mut doc.whatif.open,
                "What if: replay under other allocator settings",
            );
            if doc.data.has_owners() {
                ui.checkbox(&mut doc.owners.open, "Memory by owner (msMemScope)");
            }
        }
    }

    /// The File menu: open, recent, exports, compare, close.
    fn file_menu(&mut self, ui: &mut Ui) {
        if shortcut_button(ui, "Open…", "Ctrl+O").clicked() {
            self.start_dialog(Purpose::OpenSnapshots);
        }
        if ui.button("Open folder (profiler, msMemScope)…").clicked() {
            self.start_dialog(Purpose::OpenProfilerFolder);
        }
        if ui
            .button("Open with memsight's browser…")
            .on_hover_text("where the desktop's file dialog does not appear")
            .clicked()
        {
            self.dialogs.start_builtin(Purpose::OpenSnapshots);
        }
        ui.menu_button("Open recent", |ui| {
            if self.recent.is_empty() {
                ui.weak("nothing yet");
            }
            for p in self.recent.clone() {
                if ui.button(p.display().to_string()).clicked() {
                    self.open(ui.ctx(), p);
                }
            }
        });
        ui.separator();
        if ui
            .add_enabled(
                self.chart_rect.is_some(),
                egui::Button::new("Export chart as PNG…").shortcut_text("Ctrl+E"),
            )
            .clicked()
        {
            self.start_export(ExportTarget::Chart);
        }
        if shortcut_button(ui, "Export window as PNG…", "Ctrl+Shift+E").clicked() {
            self.start_export(ExportTarget::Window);
        }
        ui.separator();
        // Below the exports, so the rows above keep their places.
        let snapshot_shown = self.active_profiler.is_none()
            && self.active_compare.is_none()
            && self.active < self.docs.len();
        ui.add_enabled_ui(snapshot_shown, |ui| {
            ui.menu_button("Compare with…", |ui| {
                self.compare_menu_ui(ui, self.active);
            })
            .response
            .on_disabled_hover_text("show a snapshot's tab first");
        });
        ui.separator();
        let open = !self.docs.is_empty() || !self.profilers.is_empty() || !self.compares.is_empty();
        if ui
            .add_enabled(open, egui::Button::new("Close tab").shortcut_text("Ctrl+W"))
            .clicked()
        {
            self.close_active();
        }
        if ui.button("Quit").clicked() {
            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    pub(super) fn menu_ui(&mut self, ui: &mut Ui) {
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| self.file_menu(ui));
            ui.menu_button("View", |ui| self.view_menu(ui));
            ui.separator();
            for (i, doc) in self.profilers.iter().enumerate() {
                if ui
                    .selectable_label(self.active_profiler == Some(i), &doc.name)
                    .on_hover_text("profiler data")
                    .clicked()
                {
                    self.active_profiler = Some(i);
                    self.active_compare = None;
                }
            }
            let tabs: Vec<(String, String)> = self
                .docs
                .iter()
                .map(|doc| {
                    let hover = doc
                        .path
                        .as_ref()
                        .map_or_else(|| "bundled demo".to_string(), |p| p.display().to_string());
                    (doc.name.clone(), hover)
                })
                .collect();
            for (i, (name, hover)) in tabs.into_iter().enumerate() {
                let tab = ui
                    .selectable_label(
                        self.active_profiler.is_none()
                            && self.active_compare.is_none()
                            && i == self.active,
                        name,
                    )
                    .on_hover_text(format!("{hover}\n(right-click: compare with…)"));
                if tab.clicked() {
                    self.active = i;
                    self.active_profiler = None;
                    self.active_compare = None;
                }
                tab.context_menu(|ui| {
                    ui.menu_button("Compare with…", |ui| self.compare_menu_ui(ui, i));
                });
            }
            self.compare_tabs_ui(ui);
        });
    }

    pub(super) fn status_ui(&mut self, ui: &mut Ui) {
        let mut cancel = None;
        for (i, job) in self.jobs.iter().enumerate() {
            ui.horizontal(|ui| {
                ui.label(format!("loading {}", job.source.name()));
                let bytes = job
                    .progress
                    .bytes_read
                    .load(std::sync::atomic::Ordering::Relaxed);
                let events = job
                    .progress
                    .events_read
                    .load(std::sync::atomic::Ordering::Relaxed);
                let text = format!("{} parsed, {events} events", format_bytes(bytes as i64));
                ui.add(
                    egui::ProgressBar::new(job.fraction())
                        .desired_width(240.0)
                        .text(text),
                );
                if ui.button("Cancel").clicked() {
                    cancel = Some(i);
                }
            });
        }
        if let Some(i) = cancel {
            self.jobs[i].cancel();
        }
    }

    pub(super) fn summary_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let data = Arc::clone(&doc.data);
        let snapshot = &data.loaded.snapshot;
        ui.horizontal_wrapped(|ui| {
            egui::ComboBox::from_label("device")
                .selected_text(doc.device.to_string())
                .show_ui(ui, |ui| {
                    for d in &snapshot.devices {
                        let text = format!(
                            "{} ({} events, {} segments)",
                            d.ordinal,
                            d.trace.len(),
                            d.segments.len()
                        );
                        if ui
                            .selectable_value(&mut doc.device, d.ordinal, text)
                            .changed()
                        {
                            // Another device: another trace, so nothing selected carries over.
                            doc.selection = crate::selection::Selection::default();
                            doc.lifecycle = crate::views::lifecycle::LifecycleState::default();
                        }
                    }
                });
            let Some(i) = doc.device_index() else { return };
            let (device, replay) = (&snapshot.devices[i], &data.loaded.replays[i]);
            ui.separator();
            ui.label(format!("{} events", device.trace.len()));
            if let Some(times) = &data.times[i] {
                ui.label(format!(
                    "{:.3} s",
                    times.last().copied().unwrap_or(0.0) / 1e6
                ));
            }
            ui.separator();
            let when = |e: Option<u32>| {
                e.map_or_else(|| "before the trace".to_string(), |e| format!("event {e}"))
            };
            for (what, peak) in [
                ("allocated", replay.peak_allocated),
                ("active", replay.peak_active),
                ("reserved", replay.peak_reserved),
            ] {
                // Whole figures move to the next line; they are never cut in the middle.
                let text = format!(
                    "peak {what} {} ({})",
                    format_bytes(peak.bytes),
                    when(peak.event)
                );
                ui.add(egui::Label::new(text).wrap_mode(egui::TextWrapMode::Extend));
            }
            device_memory_label(ui, device, replay);
            ui.separator();
            let findings = data.findings.len();
            let worst = data.findings.iter().map(|f| f.severity).max();
            let color = match worst {
                Some(memsight_core::detect::Severity::Error) => palette::ERROR_TEXT,
                Some(memsight_core::detect::Severity::Warning) => palette::WARNING_TEXT,
                _ => palette::AXIS,
            };
            if ui
                .button(egui::RichText::new(crate::count(findings, "finding")).color(color))
                .on_hover_text("show or hide the findings panel")
                .clicked()
            {
                self.show_findings = !self.show_findings;
            }
            let warnings = data.loaded.warnings.len();
            let text =
                egui::RichText::new(crate::count(warnings, "warning")).color(if warnings > 0 {
                    palette::WARNING_TEXT
                } else {
                    palette::AXIS
                });
            if ui.button(text).clicked() {
                self.show_warnings = !self.show_warnings;
            }
            if !device.trace.is_empty()
                && ui
                    .selectable_label(doc.whatif.open, "What if…")
                    .on_hover_text(
                        "replay this trace through the caching allocator under other settings",
                    )
                    .clicked()
            {
                doc.whatif.open = !doc.whatif.open;
            }
        });
    }
}

/// msMemScope measured the whole device: how full it was at the fullest, and what lay outside the
/// allocator then.
fn device_memory_label(
    ui: &mut Ui,
    device: &memsight_core::model::Device,
    replay: &memsight_core::replay::DeviceReplay,
) {
    let Some(m) = memsight_core::device_memory::fullest(device, replay) else {
        return;
    };
    let text = format!(
        "device {} used of {}, {} outside the pool",
        format_bytes(m.sample.used_bytes() as i64),
        format_bytes(m.sample.total_bytes as i64),
        format_bytes(m.outside_pool_bytes as i64)
    );
    let when = m
        .sample
        .after_event
        .map_or_else(|| "before the trace".to_string(), |e| format!("event {e}"));
    ui.add(egui::Label::new(text).wrap_mode(egui::TextWrapMode::Extend))
        .on_hover_text(format!(
            "the fullest of {} measurements of the whole device by msMemScope (SNAPSHOT rows; \
             {when}): the pool reserved {} then; the rest is CANN's runtime, HCCL buffers or \
             other processes",
            device.memory_samples.len(),
            format_bytes(m.pool_reserved_bytes as i64)
        ));
}

/// A menu button with its shortcut on the right.
pub(super) fn shortcut_button(ui: &mut Ui, text: &str, shortcut: &str) -> egui::Response {
    ui.add(egui::Button::new(text).shortcut_text(shortcut))
}

//! The menu bar, the load progress line and the summary bar.

use std::sync::Arc;

use egui::Ui;
use memsight_core::units::format_bytes;

use super::dialogs::Purpose;
use super::{ExportTarget, MemsightApp, TabId};
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
            // After the rows above, which keep their places.
            let mut track = !doc.lifecycle.hide_fragmentation;
            if ui
                .checkbox(&mut track, "Fragmentation track under the chart")
                .changed()
            {
                doc.lifecycle.hide_fragmentation = !track;
            }
        }
    }

    /// The File menu: open, recent, exports, compare, close.
    fn file_menu(&mut self, ui: &mut Ui) {
        if shortcut_button(ui, "Open…", "Ctrl+O").clicked() {
            self.start_dialog(Purpose::OpenSnapshots);
        }
        // One row for every folder: the folder says what it is (a run of snapshots, profiler
        // data, an msMemScope recording).
        if ui
            .button("Open run or folder…")
            .on_hover_text(
                "a run (a folder of snapshots, one per rank and dump: which rank peaks, which \
                 ran out, what grows between dumps), torch_npu profiler data, or an msMemScope \
                 recording",
            )
            .clicked()
        {
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
            && self.active_run.is_none()
            && self.active < self.docs.len();
        ui.add_enabled_ui(snapshot_shown, |ui| {
            ui.menu_button("Compare with…", |ui| {
                self.compare_menu_ui(ui, self.active);
            })
            .response
            .on_disabled_hover_text("show a snapshot's tab first");
            // Below Compare, so the rows above keep their places.
            ui.menu_button("Export chart at a size…", |ui| {
                ui.weak("rendered off screen at this size, the view as shown");
                for size in EXPORT_SIZES {
                    if ui.button(format!("{} × {}", size[0], size[1])).clicked() {
                        self.start_export_at(ExportTarget::Chart, size);
                    }
                }
            })
            .response
            .on_disabled_hover_text("show a snapshot's tab first");
        });
        ui.separator();
        let open = !self.docs.is_empty()
            || !self.profilers.is_empty()
            || !self.compares.is_empty()
            || !self.runs.is_empty();
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

    /// The Help menu: the keys and mouse of the charts, and About.
    fn help_menu(ui: &mut Ui) {
        ui.menu_button("Keys and mouse", |ui| {
            egui::Grid::new("help-keys")
                .num_columns(2)
                .striped(true)
                .show(ui, |ui| {
                    for (keys, what) in KEYS {
                        ui.strong(*keys);
                        ui.label(*what);
                        ui.end_row();
                    }
                });
        });
        ui.menu_button("About memsight", |ui| {
            ui.strong(format!("memsight {}", env!("CARGO_PKG_VERSION")));
            ui.label(
                "A visualizer and doctor for device memory of PyTorch jobs on GPUs (CUDA) and \
                 Ascend NPUs (torch_npu): memory snapshots, torch_npu profiler CSVs and \
                 msMemScope recordings.",
            );
            ui.label("Nothing in a file is ever run: pickles are read as data only.");
        });
    }

    pub(super) fn menu_ui(&mut self, ui: &mut Ui) {
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| self.file_menu(ui));
            ui.menu_button("View", |ui| self.view_menu(ui));
            ui.menu_button("Help", Self::help_menu);
            ui.separator();
            self.tab_list_ui(ui);
            // The tab bar scrolls (wheel or drag) where the tabs do not fit, and brings the
            // active tab into view when another becomes active or the window's width changes.
            let shown = (self.active_tab(), ui.available_width().round() as u32);
            let reveal = self.tab_in_view != Some(shown);
            self.tab_in_view = Some(shown);
            // Over the bar, the mouse wheel scrolls it sideways (a bar of tabs has no other
            // direction); its scroll bar stays hidden, as it would cover the names.
            let pointer = ui.ctx().pointer_hover_pos();
            if pointer.is_some_and(|p| self.tab_bar_rect.is_some_and(|r| r.contains(p))) {
                ui.ctx().input_mut(|i| {
                    if i.smooth_scroll_delta.x == 0.0 {
                        i.smooth_scroll_delta = egui::vec2(i.smooth_scroll_delta.y, 0.0);
                    }
                });
            }
            let bar = egui::ScrollArea::horizontal()
                .id_salt("tab bar")
                .scroll_bar_visibility(egui::scroll_area::ScrollBarVisibility::AlwaysHidden)
                .show(ui, |ui| {
                    ui.horizontal(|ui| self.tabs_ui(ui, reveal));
                });
            self.tab_bar_rect = Some(bar.inner_rect);
        });
    }

    /// Every tab, in order: snapshots, profiler runs, compares, runs.
    fn tabs_ui(&mut self, ui: &mut Ui, reveal: bool) {
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
            let selected = self.active_tab() == TabId::Doc(i);
            let tab = tab_label(ui, selected, &name, reveal)
                .on_hover_text(format!("{hover}\n(right-click: compare with…)"));
            if tab.clicked() {
                self.show_tab(TabId::Doc(i));
            }
            tab.context_menu(|ui| {
                ui.menu_button("Compare with…", |ui| self.compare_menu_ui(ui, i));
            });
        }
        // Profiler runs after the snapshots: a tab opened later never lands in front.
        for i in 0..self.profilers.len() {
            let selected = self.active_tab() == TabId::Profiler(i);
            if tab_label(ui, selected, &self.profilers[i].name, reveal)
                .on_hover_text("profiler data")
                .clicked()
            {
                self.show_tab(TabId::Profiler(i));
            }
        }
        self.compare_tabs_ui(ui, reveal);
        self.run_tabs_ui(ui, reveal);
    }

    /// "Tabs (N)": every open tab in a list, to jump to one the bar has scrolled away.
    fn tab_list_ui(&mut self, ui: &mut Ui) {
        let tabs = self.tabs();
        if tabs.len() < 2 {
            return;
        }
        let active = self.active_tab();
        let mut chosen = None;
        ui.menu_button(format!("Tabs ({})", tabs.len()), |ui| {
            for &tab in &tabs {
                if ui
                    .selectable_label(tab == active, self.tab_title(tab))
                    .clicked()
                {
                    chosen = Some(tab);
                    ui.close();
                }
            }
        })
        .response
        .on_hover_text("every open tab (Ctrl+Tab and Ctrl+Shift+Tab move through them)");
        if let Some(tab) = chosen {
            self.show_tab(tab);
        }
    }

    /// The name a tab shows.
    fn tab_title(&self, tab: TabId) -> &str {
        match tab {
            TabId::Doc(i) => &self.docs[i].name,
            TabId::Profiler(i) => &self.profilers[i].name,
            TabId::Compare(i) => &self.compares[i].name,
            TabId::Run(i) => &self.runs[i].name,
        }
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
                // Once the file is read, the bar stays full: say what is being done.
                let phase = match job.progress.phase() {
                    memsight_core::LoadPhase::Reading => "reading the file",
                    memsight_core::LoadPhase::Replaying => "replaying the allocator over the trace",
                    memsight_core::LoadPhase::Analysing => {
                        "running the detectors and indexing for the charts"
                    }
                };
                ui.label(phase);
                if job.progress.phase() != memsight_core::LoadPhase::Reading {
                    ui.spinner();
                }
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
        let mut open_dialog = false;
        ui.horizontal_wrapped(|ui| {
            device_combo_ui(ui, doc, snapshot);
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
            if doc.path.is_none() {
                // The bundled demo (or data from memory): say how to see one's own file.
                ui.separator();
                if ui
                    .button(
                        egui::RichText::new("demo data: open yours (Ctrl+O)…")
                            .color(palette::SELECTION),
                    )
                    .on_hover_text(
                        "File → Open, or drop a snapshot, profiler folder or msMemScope \
                         recording on the window",
                    )
                    .clicked()
                {
                    open_dialog = true;
                }
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
        if open_dialog {
            self.start_dialog(Purpose::OpenSnapshots);
        }
    }
}

/// The device shown, picked from the file's devices; the one that ran out of memory says so.
fn device_combo_ui(
    ui: &mut Ui,
    doc: &mut crate::document::Document,
    snapshot: &memsight_core::model::Snapshot,
) {
    let oom_here = doc.device_index().is_some_and(|i| doc.data.has_oom(i));
    let selected = if oom_here {
        egui::RichText::new(format!("{} (OOM)", doc.device)).color(palette::ERROR_TEXT)
    } else {
        egui::RichText::new(doc.device.to_string())
    };
    egui::ComboBox::from_label("device")
        .selected_text(selected)
        .show_ui(ui, |ui| {
            for (k, d) in snapshot.devices.iter().enumerate() {
                let oom = if doc.data.has_oom(k) { ", OOM" } else { "" };
                let text = format!(
                    "{} ({} events, {} segments{oom})",
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

/// The sizes "Export chart at a size" offers: full HD, QHD, 4K.
const EXPORT_SIZES: [[u32; 2]; 3] = [[1920, 1080], [2560, 1440], [3840, 2160]];

/// What the keys and the mouse do, for Help → Keys and mouse.
const KEYS: &[(&str, &str)] = &[
    (
        "Ctrl+O",
        "open snapshots, profiler CSVs or msMemScope files",
    ),
    (
        "Ctrl+E / Ctrl+Shift+E",
        "export the chart / the window as PNG",
    ),
    ("Ctrl+W", "close the tab"),
    (
        "Up / Down arrow (Shift: 100)",
        "step through events; the pool and the chart follow",
    ),
    (
        "[ / ]",
        "previous / next segment_alloc (segment_map / unmap on expandable segments)",
    ),
    ("wheel over the chart", "zoom time (x) around the pointer"),
    ("Shift+wheel", "zoom time and bytes together"),
    (
        "Shift+drag or right-drag",
        "zoom to a box (a flat box zooms time only)",
    ),
    ("drag", "pan"),
    ("Ctrl+drag", "select a range of events: what it left behind"),
    (
        "+ / - / Left / Right",
        "zoom / pan the chart (unless a text field has the keys)",
    ),
    (
        "F8 / Shift+F8",
        "the next / previous finding, with its evidence",
    ),
    ("Home, 0 or double-click", "show the whole trace"),
    ("click a band", "pin the allocation: its stack and events"),
    (
        "click a legend row",
        "keep that call site's bands, dim the rest",
    ),
    ("click a pool block", "pin it and show it on the chart"),
    ("Ctrl+wheel over the pool", "zoom the pool's rows"),
    ("Esc", "close the warnings or the file browser"),
];

/// One tab of the tab bar, scrolled into view when it is the one shown and `reveal` is set.
pub(super) fn tab_label(ui: &mut Ui, selected: bool, name: &str, reveal: bool) -> egui::Response {
    let response = ui.selectable_label(selected, name);
    if selected && reveal {
        response.scroll_to_me(Some(egui::Align::Center));
    }
    response
}

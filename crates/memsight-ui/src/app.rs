//! The application: open files, background loads, the summary bar, the lifecycle chart and the
//! details of the pinned allocation. `MemsightApp::ui_root` draws everything, so the window, the
//! headless screenshot and the tests all run the same code.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use egui::{Rect, Ui};
use memsight_core::frames::stack_text;
use memsight_core::units::format_bytes;

use crate::dialogs::{Backend, Dialogs, Picked, Purpose};
use crate::document::{Document, LoadJob, Opened, Source};
use crate::lifecycle_view::{lifecycle_ui, lifetime_facts_ui};
use crate::notices::{Level, Notices};
use crate::palette::{self, ColorBy};
use crate::profiler_view::ProfilerDoc;

const MAX_RECENT: usize = 10;
/// Below this window width the findings panel starts collapsed and the event list and pool
/// chart share the bottom area as tabs.
const NARROW_WIDTH: f32 = 1300.0;
/// Side panels together leave the chart at least this share of the width.
const CHART_MIN_SHARE: f32 = 0.5;

/// Where the parts of the window were drawn last frame (tests check that nothing overlaps).
#[derive(Clone, Copy, Debug, Default)]
pub struct Layout {
    pub window: Option<Rect>,
    pub findings: Option<Rect>,
    pub details: Option<Rect>,
    pub bottom: Option<Rect>,
    pub chart: Option<Rect>,
}

/// What the bottom area shows when it is too narrow for both side by side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BottomTab {
    #[default]
    Events,
    Pool,
}

/// What the app draws: everything, or one chart alone (`memsight screenshot --view`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    App,
    Timeline,
    Pool,
}

/// What a screenshot covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportTarget {
    Window,
    Chart,
}

pub struct MemsightApp {
    docs: Vec<Document>,
    active: usize,
    /// Open profiler runs; while `active_profiler` is set, the window shows that one.
    profilers: Vec<ProfilerDoc>,
    active_profiler: Option<usize>,
    jobs: Vec<LoadJob>,
    /// Saved, copied, failed: transient messages in the corner; failures stay until dismissed.
    pub notices: Notices,
    /// Where the recent-files list is kept; `None`: not kept (tests, headless).
    recent_store: Option<PathBuf>,
    recent: Vec<PathBuf>,
    pub dialogs: Dialogs,
    /// Exports finished by the screenshot callback, to report as notices.
    exports_done: Arc<Mutex<Vec<Result<PathBuf, String>>>>,
    show_warnings: bool,
    /// The findings panel on the left.
    pub show_findings: bool,
    /// The pool-state chart under the lifecycle chart.
    pub show_pool: bool,
    /// Only the chart, no menus or panels (`memsight screenshot --view timeline`).
    pub view: View,
    /// Where the chart was drawn last frame, for "export chart".
    chart_rect: Option<Rect>,
    /// Where everything was drawn last frame.
    pub layout: Layout,
    /// Whether the window was narrow last frame: crossing the line collapses or reopens the
    /// findings panel once, and the user's toggle wins until the next crossing.
    was_narrow: Option<bool>,
    pub bottom_tab: BottomTab,
}

impl MemsightApp {
    /// Starts loading `sources` in the background.
    pub fn new(ctx: &egui::Context, sources: Vec<Source>, recent_store: Option<PathBuf>) -> Self {
        let recent = recent_store.as_deref().map(read_recent).unwrap_or_default();
        let jobs = sources
            .into_iter()
            .map(|s| LoadJob::start(s, ctx))
            .collect();
        Self {
            docs: Vec::new(),
            active: 0,
            profilers: Vec::new(),
            active_profiler: None,
            jobs,
            notices: Notices::default(),
            recent_store,
            recent,
            dialogs: Dialogs::new(Backend::from_env()),
            exports_done: Arc::new(Mutex::new(Vec::new())),
            show_warnings: false,
            show_findings: true,
            show_pool: true,
            view: View::App,
            chart_rect: None,
            layout: Layout::default(),
            was_narrow: None,
            bottom_tab: BottomTab::default(),
        }
    }

    /// An app holding documents that are already loaded (headless rendering, tests).
    pub fn with_documents(docs: Vec<Document>) -> Self {
        let mut app = Self::new(&egui::Context::default(), Vec::new(), None);
        app.docs = docs;
        app
    }

    /// An app holding a profiler run that is already loaded (headless rendering, tests).
    pub fn with_profiler(doc: ProfilerDoc) -> Self {
        let mut app = Self::new(&egui::Context::default(), Vec::new(), None);
        app.profilers.push(doc);
        app.active_profiler = Some(0);
        app
    }

    pub fn profilers(&self) -> &[ProfilerDoc] {
        &self.profilers
    }

    pub fn profilers_mut(&mut self) -> &mut [ProfilerDoc] {
        &mut self.profilers
    }

    pub fn documents(&self) -> &[Document] {
        &self.docs
    }

    pub fn documents_mut(&mut self) -> &mut [Document] {
        &mut self.docs
    }

    /// The failures on screen (failed loads, exports), oldest first.
    pub fn errors(&self) -> Vec<String> {
        self.notices
            .current()
            .iter()
            .filter(|n| n.level == Level::Error)
            .map(|n| n.text.clone())
            .collect()
    }

    /// True while a file loads or a chart layout is being computed.
    pub fn is_busy(&self) -> bool {
        // The lifecycle chart lays out in the background, when it is drawn and has a trace.
        let charting = |d: &Document| {
            self.view != View::Pool
                && d.device_index()
                    .is_some_and(|i| !d.data.loaded.snapshot.devices[i].trace.is_empty())
        };
        !self.jobs.is_empty()
            || (self.active_profiler.is_none()
                && self
                    .docs
                    .get(self.active)
                    .is_some_and(|d| charting(d) && d.lifecycle.is_laying_out()))
    }

    pub fn open(&mut self, ctx: &egui::Context, path: PathBuf) {
        self.jobs.push(LoadJob::start(Source::Path(path), ctx));
    }

    /// Asks the integration for a screenshot and saves it (or the chart alone) as PNG at `path`.
    pub fn export_screenshot(&self, ctx: &egui::Context, target: ExportTarget, path: PathBuf) {
        let crop = match target {
            ExportTarget::Window => None,
            ExportTarget::Chart => self.chart_rect,
        };
        let done = Arc::clone(&self.exports_done);
        let pixels_per_point = ctx.pixels_per_point();
        let ctx2 = ctx.clone();
        ctx.request_screenshot(move |image| {
            let result = crate::save_screenshot(&image, crop.map(|r| r * pixels_per_point), &path)
                .map(|()| path.clone())
                .map_err(|e| format!("could not save {}: {e}", path.display()));
            if let Ok(mut done) = done.lock() {
                done.push(result);
            }
            ctx2.request_repaint();
        });
    }

    /// A file name for an export: the file's name, its device and what is shown.
    pub fn export_name(&self, target: ExportTarget) -> String {
        let what = match target {
            ExportTarget::Window => "window",
            ExportTarget::Chart => "chart",
        };
        if let Some(doc) = self.active_profiler.and_then(|p| self.profilers.get(p)) {
            return format!("{}-profiler-{what}.png", file_stem(&doc.name));
        }
        match self.docs.get(self.active) {
            Some(doc) => {
                let chart = match (target, doc.lifecycle.color_by) {
                    (ExportTarget::Window, _) => "window",
                    (ExportTarget::Chart, ColorBy::CallSite) => "timeline",
                    (ExportTarget::Chart, ColorBy::Category) => "timeline-by-category",
                };
                format!("{}-device{}-{chart}.png", file_stem(&doc.name), doc.device)
            }
            None => format!("memsight-{what}.png"),
        }
    }

    /// Opens a file dialog (the desktop's, else memsight's browser).
    fn start_dialog(&mut self, purpose: Purpose) {
        if let Some(note) = self.dialogs.start(purpose) {
            self.notices.info(note);
        }
    }

    fn start_export(&mut self, target: ExportTarget) {
        if target == ExportTarget::Chart && self.chart_rect.is_none() {
            self.notices.error("nothing to export: no chart is shown");
            return;
        }
        let name = self.export_name(target);
        self.start_dialog(Purpose::Export { target, name });
    }

    /// Ctrl+O, Ctrl+E, Ctrl+Shift+E, Ctrl+W, Escape: whenever the window has focus.
    fn shortcuts(&mut self, ctx: &egui::Context) {
        use egui::{Key, KeyboardShortcut, Modifiers};
        let pressed = |m, k| ctx.input_mut(|i| i.consume_shortcut(&KeyboardShortcut::new(m, k)));
        if pressed(Modifiers::COMMAND, Key::O) {
            self.start_dialog(Purpose::OpenSnapshots);
        }
        // Shift first: Ctrl+E alone would also match Ctrl+Shift+E.
        if pressed(Modifiers::COMMAND | Modifiers::SHIFT, Key::E) {
            self.start_export(ExportTarget::Window);
        }
        if pressed(Modifiers::COMMAND, Key::E) {
            self.start_export(ExportTarget::Chart);
        }
        if pressed(Modifiers::COMMAND, Key::W) {
            self.close_active();
        }
        if ctx.input(|i| i.key_pressed(Key::Escape)) {
            if self.dialogs.builtin_is_open() {
                self.dialogs.close_builtin();
            } else {
                self.show_warnings = false;
            }
        }
    }

    /// Dialog answers and finished exports.
    fn poll_dialogs(&mut self, ctx: &egui::Context) {
        let outcome = self.dialogs.show(ctx);
        if let Some(note) = outcome.note {
            self.notices.info(note);
        }
        match outcome.picked {
            Some(Picked::Open(paths)) => self.open_all(ctx, paths),
            Some(Picked::Export(target, path)) => self.export_screenshot(ctx, target, path),
            None => {}
        }
        let done = self
            .exports_done
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default();
        for result in done {
            match result {
                Ok(path) => self
                    .notices
                    .success(format!("saved {}", path.display()), Some(path)),
                Err(e) => self.notices.error(e),
            }
        }
    }

    /// Everything, inside `ui`.
    pub fn ui_root(&mut self, ui: &mut Ui) {
        let ctx = ui.ctx().clone();
        // Light, like the charts people know from PyTorch's viewer.
        if ctx.theme() != egui::Theme::Light {
            ctx.set_theme(egui::Theme::Light);
        }
        self.poll_jobs();
        self.take_dropped_files(&ctx);
        if self.view == View::App {
            self.shortcuts(&ctx);
            self.poll_dialogs(&ctx);
            self.notices.show(&ctx);
        }
        if let Some(p) = self.active_profiler.filter(|&p| p < self.profilers.len()) {
            self.profiler_root(ui, p);
            return;
        }
        match self.view {
            View::App => {}
            View::Timeline => {
                egui::CentralPanel::default().show(ui, |ui| self.chart_ui(ui));
                return;
            }
            View::Pool => {
                egui::CentralPanel::default().show(ui, |ui| self.pool_ui(ui));
                if let Some(doc) = self.docs.get_mut(self.active) {
                    doc.apply_commands();
                }
                return;
            }
        }
        egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
        if !self.jobs.is_empty() {
            egui::Panel::top("status").show(ui, |ui| self.status_ui(ui));
        }
        if !self.docs.is_empty() {
            egui::Panel::top("summary").show(ui, |ui| self.summary_ui(ui));
        }
        self.panels_ui(ui, &ctx);
        egui::CentralPanel::default().show(ui, |ui| self.chart_ui(ui));
        self.layout.chart = self.chart_rect;
        self.step_keys(&ctx);
        // Every view has drawn and queued its commands: change the selection once.
        if let Some(doc) = self.docs.get_mut(self.active) {
            doc.apply_commands();
        }
        if self.show_warnings {
            self.warnings_window(&ctx);
        }
        if ctx.input(|i| !i.raw.hovered_files.is_empty()) {
            let painter = ctx.layer_painter(egui::LayerId::new(
                egui::Order::Foreground,
                egui::Id::unique("memsight-drop-overlay"),
            ));
            let screen = ctx.content_rect();
            painter.rect_filled(screen, 0.0, palette::BOX_ZOOM);
            painter.text(
                screen.center(),
                egui::Align2::CENTER_CENTER,
                "drop to open",
                egui::FontId::proportional(24.0),
                palette::AXIS,
            );
        }
        if self.is_busy() {
            ctx.request_repaint_after(std::time::Duration::from_millis(50));
        }
    }

    /// The side and bottom panels around the chart, sized for the window: below
    /// `NARROW_WIDTH` the findings panel starts collapsed and the bottom area shows tabs.
    fn panels_ui(&mut self, ui: &mut Ui, ctx: &egui::Context) {
        let width = ui.available_width();
        let narrow = ctx.content_rect().width() < NARROW_WIDTH;
        if self.was_narrow != Some(narrow) {
            self.show_findings = !narrow;
            self.was_narrow = Some(narrow);
        }
        self.layout = Layout {
            window: Some(ui.max_rect()),
            ..Layout::default()
        };
        // The side panels share at most half the width, so the chart keeps the rest.
        // (Less the margins each panel draws around its content.)
        let side_budget = width * (1.0 - CHART_MIN_SHARE) - 24.0;
        if self.show_findings && !self.docs.is_empty() {
            let panel = egui::Panel::left("findings")
                .resizable(true)
                .default_size((width * 0.2).clamp(160.0, 300.0))
                .min_size(120.0)
                .max_size(side_budget * 0.45)
                .show(ui, |ui| self.findings_panel_ui(ui));
            self.layout.findings = Some(panel.response.rect);
        }
        let side_panel = self
            .docs
            .get(self.active)
            .is_some_and(|d| d.selection.lifetime.is_some() || d.selection.range.is_some());
        if side_panel {
            let left = self.layout.findings.map_or(0.0, |r| r.width());
            let panel = egui::Panel::right("details")
                .resizable(true)
                .default_size((width * 0.3).clamp(200.0, 360.0))
                .min_size(160.0)
                .max_size((side_budget - left).max(160.0))
                .show(ui, |ui| {
                    // Content wider than the panel scrolls; it never pushes the panel off-screen.
                    egui::ScrollArea::both()
                        .id_salt("details-scroll")
                        .auto_shrink([false, false])
                        .show(ui, |ui| {
                            self.range_ui(ui);
                            self.details_ui(ui);
                        });
                });
            self.layout.details = Some(panel.response.rect);
        }
        if self.show_pool && !self.docs.is_empty() {
            // At most half the window, so the lifecycle chart always keeps room.
            let max_height = (ui.available_height() * 0.5).max(120.0);
            let panel = egui::Panel::bottom("pool")
                .resizable(true)
                .default_size(260.0_f32.min(max_height))
                .min_size(100.0)
                .max_size(max_height)
                .show(ui, |ui| self.bottom_ui(ui, narrow));
            self.layout.bottom = Some(panel.response.rect);
        }
    }

    /// ↑ / ↓ step through events (Shift: 100 at a time) unless a text field has the keys.
    fn step_keys(&mut self, ctx: &egui::Context) {
        if let Some(doc) = self.docs.get_mut(self.active)
            && !ctx.memory(|m| m.focused().is_some())
        {
            let (up, down, shift) = ctx.input(|i| {
                (
                    i.key_pressed(egui::Key::ArrowUp),
                    i.key_pressed(egui::Key::ArrowDown),
                    i.modifiers.shift,
                )
            });
            let step = if shift { 100 } else { 1 };
            if up {
                doc.commands.push(crate::selection::Command::Step(-step));
            }
            if down {
                doc.commands.push(crate::selection::Command::Step(step));
            }
        }
    }

    /// A profiler run fills the window: menu, findings on the left, curves, tables below.
    fn profiler_root(&mut self, ui: &mut Ui, p: usize) {
        if self.view == View::Timeline {
            egui::CentralPanel::default().show(ui, |ui| {
                crate::profiler_view::curves_ui(ui, &mut self.profilers[p]);
            });
            self.chart_rect = self.profilers[p].chart_rect;
            return;
        }
        egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
        if !self.jobs.is_empty() {
            egui::Panel::top("status").show(ui, |ui| self.status_ui(ui));
        }
        let Some(doc) = self.profilers.get_mut(p) else {
            return;
        };
        egui::Panel::top("profiler-toolbar")
            .show(ui, |ui| crate::profiler_view::toolbar_ui(ui, doc));
        if self.show_findings {
            let width = ui.available_width();
            egui::Panel::left("profiler-findings")
                .resizable(true)
                .default_size((width * 0.2).clamp(180.0, 300.0))
                .show(ui, |ui| {
                    let data = Arc::clone(&doc.data);
                    if let Some(i) = crate::findings_view::findings_ui(
                        ui,
                        &data.findings,
                        None,
                        &mut doc.findings,
                    ) {
                        doc.show_finding(i);
                    }
                });
        }
        let max_height = (ui.available_height() * 0.5).max(120.0);
        egui::Panel::bottom("profiler-tables")
            .resizable(true)
            .default_size(240.0_f32.min(max_height))
            .max_size(max_height)
            .show(ui, |ui| crate::profiler_view::tables_ui(ui, doc));
        egui::CentralPanel::default().show(ui, |ui| crate::profiler_view::curves_ui(ui, doc));
        self.chart_rect = doc.chart_rect;
    }

    /// Closes the file shown (snapshot or profiler run); the next one left takes its place.
    fn close_active(&mut self) {
        if let Some(p) = self.active_profiler.take() {
            if p < self.profilers.len() {
                self.profilers.remove(p);
            }
            if self.docs.is_empty() && !self.profilers.is_empty() {
                self.active_profiler = Some(p.saturating_sub(1).min(self.profilers.len() - 1));
            }
        } else if self.active < self.docs.len() {
            self.docs.remove(self.active);
            self.active = self.active.saturating_sub(1);
            if self.docs.is_empty() && !self.profilers.is_empty() {
                self.active_profiler = Some(0);
            }
        }
    }

    fn poll_jobs(&mut self) {
        let mut still_running = Vec::new();
        for job in std::mem::take(&mut self.jobs) {
            match job.poll() {
                None => still_running.push(job),
                Some(Ok(Opened::Profiler(prepared))) => {
                    let prepared = *prepared;
                    if let Some(p) = job.source.path() {
                        self.remember(p);
                    }
                    self.profilers
                        .push(ProfilerDoc::new(job.source.name(), prepared));
                    self.active_profiler = Some(self.profilers.len() - 1);
                }
                Some(Ok(Opened::Snapshot(prepared))) => {
                    let prepared = *prepared;
                    let path = match &job.source {
                        Source::Path(p) => Some(p.clone()),
                        Source::Bytes { .. } | Source::Profiler(_) => None,
                    };
                    if let Some(p) = &path {
                        self.remember(p);
                    }
                    for warning in prepared.loaded.warnings.iter().filter(|w| {
                        w.kind == memsight_core::model::WarningKind::TraceDisagreesWithSegments
                    }) {
                        self.notices
                            .error(format!("{}: {warning}", job.source.name()));
                    }
                    self.docs
                        .push(Document::new(job.source.name(), path, prepared));
                    self.active = self.docs.len() - 1;
                    self.active_profiler = None;
                }
                Some(Err(message)) => self.notices.error(message),
            }
        }
        self.jobs = still_running;
    }

    fn remember(&mut self, path: &Path) {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.recent.retain(|p| *p != path);
        self.recent.insert(0, path);
        self.recent.truncate(MAX_RECENT);
        if let Some(store) = &self.recent_store {
            write_recent(store, &self.recent);
        }
    }

    fn take_dropped_files(&mut self, ctx: &egui::Context) {
        let dropped: Vec<PathBuf> = ctx.input(|i| {
            i.raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        });
        if !dropped.is_empty() {
            self.open_all(ctx, dropped);
        }
    }

    /// Opens snapshots each in its own tab and profiler data (folders, CSVs) together as one run.
    pub fn open_all(&mut self, ctx: &egui::Context, paths: Vec<PathBuf>) {
        let (profiler, snapshots): (Vec<PathBuf>, Vec<PathBuf>) = paths
            .into_iter()
            .partition(|p| memsight_core::profiler::is_profiler_path(p));
        for p in snapshots {
            self.open(ctx, p);
        }
        if !profiler.is_empty() {
            self.jobs
                .push(LoadJob::start(Source::Profiler(profiler), ctx));
        }
    }

    /// The View menu: options of the chart shown (a profiler run's or a snapshot's).
    fn view_menu(&mut self, ui: &mut Ui) {
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
        }
    }

    fn menu_ui(&mut self, ui: &mut Ui) {
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| {
                if shortcut_button(ui, "Open…", "Ctrl+O").clicked() {
                    self.start_dialog(Purpose::OpenSnapshots);
                }
                if ui.button("Open profiler folder…").clicked() {
                    self.start_dialog(Purpose::OpenProfilerFolder);
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
                let open = !self.docs.is_empty() || !self.profilers.is_empty();
                if ui
                    .add_enabled(open, egui::Button::new("Close tab").shortcut_text("Ctrl+W"))
                    .clicked()
                {
                    self.close_active();
                }
                if ui.button("Quit").clicked() {
                    ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
                }
            });
            ui.menu_button("View", |ui| self.view_menu(ui));
            ui.separator();
            for (i, doc) in self.profilers.iter().enumerate() {
                if ui
                    .selectable_label(self.active_profiler == Some(i), &doc.name)
                    .on_hover_text("profiler data")
                    .clicked()
                {
                    self.active_profiler = Some(i);
                }
            }
            for (i, doc) in self.docs.iter().enumerate() {
                if ui
                    .selectable_label(
                        self.active_profiler.is_none() && i == self.active,
                        &doc.name,
                    )
                    .on_hover_text(
                        doc.path.as_ref().map_or_else(
                            || "bundled demo".to_string(),
                            |p| p.display().to_string(),
                        ),
                    )
                    .clicked()
                {
                    self.active = i;
                    self.active_profiler = None;
                }
            }
        });
    }

    fn status_ui(&mut self, ui: &mut Ui) {
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

    fn summary_ui(&mut self, ui: &mut Ui) {
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
                            doc.lifecycle = crate::lifecycle_view::LifecycleState::default();
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
        });
    }

    fn chart_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            ui.centered_and_justified(|ui| {
                ui.label(if self.jobs.is_empty() {
                    "Open a memory snapshot: File → Open (Ctrl+O), or drop it here"
                } else {
                    "loading…"
                });
            });
            return;
        };
        let Some(i) = doc.device_index() else {
            ui.label("this file has no device with events or segments");
            return;
        };
        let trace_empty = doc.data.loaded.snapshot.devices[i].trace.is_empty();
        if trace_empty {
            ui.label("no trace events on this device: the file holds only the final pool (a legacy file, or history recording was off)");
            return;
        }
        self.chart_rect = Some(ui.available_rect_before_wrap());
        let data = Arc::clone(&doc.data);
        let highlight = doc
            .range_report()
            .filter(|_| doc.range.dim_others)
            .map(|(_, set)| set);
        lifecycle_ui(
            ui,
            &data,
            i,
            &mut doc.lifecycle,
            &doc.selection,
            &mut doc.commands,
            highlight.as_deref(),
        );
    }

    /// The event list beside the pool chart, or the two as tabs when the window is narrow.
    fn bottom_ui(&mut self, ui: &mut Ui, narrow: bool) {
        let has_trace = self.docs.get(self.active).is_some_and(|d| {
            d.device_index()
                .is_some_and(|i| !d.data.loaded.snapshot.devices[i].trace.is_empty())
        });
        if !has_trace {
            self.pool_ui(ui);
        } else if narrow {
            ui.horizontal(|ui| {
                ui.selectable_value(&mut self.bottom_tab, BottomTab::Events, "Events");
                ui.selectable_value(&mut self.bottom_tab, BottomTab::Pool, "Pool");
            });
            match self.bottom_tab {
                BottomTab::Events => self.event_list_ui(ui),
                BottomTab::Pool => self.pool_ui(ui),
            }
        } else {
            let width = ui.available_width();
            egui::Panel::left("events")
                .resizable(true)
                .default_size((width * 0.62).min(760.0))
                .min_size(240.0)
                .max_size(width * 0.7)
                .show(ui, |ui| self.event_list_ui(ui));
            self.pool_ui(ui);
        }
    }

    fn event_list_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let Some(i) = doc.device_index() else { return };
        let data = Arc::clone(&doc.data);
        // Scroll positions are kept per tab.
        ui.push_id(("events", doc.key), |ui| {
            crate::event_list::event_list_ui(
                ui,
                &data,
                i,
                &doc.selection,
                &mut doc.events,
                &mut doc.commands,
            );
        });
    }

    fn pool_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let Some(i) = doc.device_index() else { return };
        let data = Arc::clone(&doc.data);
        // The pool chart colours blocks as the lifecycle chart colours bands.
        doc.pool.color_by = doc.lifecycle.color_by;
        ui.push_id(("pool", doc.key), |ui| {
            crate::pool_view::pool_ui(
                ui,
                &data,
                i,
                &doc.selection,
                &mut doc.pool,
                &mut doc.commands,
            );
        });
    }

    /// The range analysis: what the selected range left behind, by call stack.
    fn range_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let (Some(i), Some((first, last))) = (doc.device_index(), doc.selection.range) else {
            return;
        };
        let Some((report, _)) = doc.range_report() else {
            return;
        };
        let data = Arc::clone(&doc.data);
        ui.horizontal(|ui| {
            ui.heading("Range");
            if ui.small_button("clear").clicked() {
                doc.commands
                    .push(crate::selection::Command::SelectRange(None));
            }
        });
        ui.label(format!("events {first} – {last}"));
        ui.label(format!(
            "{} blocks allocated here and not freed by its end: {} (largest {}, smallest {})",
            report.unreleased.len(),
            format_bytes(report.unreleased_bytes as i64),
            format_bytes(report.largest_bytes as i64),
            format_bytes(report.smallest_bytes as i64)
        ));
        // What the blocks left behind are for: a leak is rarely parameters or optimizer state.
        let lifetimes = &data.loaded.replays[i].lifetimes;
        let by_category = memsight_core::detect::breakdown(report.unreleased.iter().map(|&id| {
            (
                data.category(i, id),
                lifetimes[id as usize].requested_size_bytes,
            )
        }));
        if !by_category.is_empty() {
            ui.label(format!(
                "left behind by category: {}",
                by_category
                    .iter()
                    .map(|c| format!(
                        "{} {}",
                        c.category.name().replace('_', " "),
                        format_bytes(c.bytes as i64)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        ui.label(format!(
            "{} blocks alive through the whole range: {}",
            report.alive_through.len(),
            format_bytes(report.alive_through_bytes as i64)
        ));
        ui.checkbox(&mut doc.range.dim_others, "dim every other band");
        ui.label("by call stack (click: show its largest block)");
        egui::ScrollArea::vertical()
            .id_salt("range-groups")
            .max_height(220.0)
            .show(ui, |ui| {
                egui::Grid::new("range-groups-grid")
                    .num_columns(3)
                    .striped(true)
                    .show(ui, |ui| {
                        for group in report.by_stack.iter().take(100) {
                            // The frame the findings name: the user's code, not the unwinder.
                            let top = memsight_core::frames::headline_frame(
                                &data.loaded.snapshot,
                                group.stack,
                            )
                            .unwrap_or_else(|| "(no stack)".to_string());
                            if ui.link(top).clicked() {
                                let lifetimes = &data.loaded.replays[i].lifetimes;
                                if let Some(&largest) = group
                                    .lifetimes
                                    .iter()
                                    .max_by_key(|&&id| lifetimes[id as usize].requested_size_bytes)
                                {
                                    doc.commands
                                        .push(crate::selection::Command::PickInPool(largest));
                                }
                            }
                            ui.label(format!("{}×", group.count));
                            ui.label(format_bytes(group.bytes as i64));
                            ui.end_row();
                        }
                    });
            });
        ui.separator();
    }

    fn findings_panel_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let data = Arc::clone(&doc.data);
        if let Some(index) = crate::findings_view::findings_ui(
            ui,
            &data.findings,
            Some(&data.loaded.snapshot),
            &mut doc.findings,
        ) {
            doc.show_finding(index);
        }
    }

    fn details_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let (Some(i), Some(id)) = (doc.device_index(), doc.selection.lifetime) else {
            return;
        };
        let data = Arc::clone(&doc.data);
        let lifetime = &data.loaded.replays[i].lifetimes[id as usize];
        ui.horizontal(|ui| {
            ui.heading("Allocation");
            if ui.small_button("unpin").clicked() {
                doc.commands.push(crate::selection::Command::Unpin);
            }
        });
        lifetime_facts_ui(ui, &data, i, id);
        ui.horizontal(|ui| {
            for (what, event) in [
                ("alloc event", lifetime.alloc_event),
                ("free event", lifetime.free_completed_event),
            ] {
                if let Some(e) = event
                    && ui.button(format!("pool at {what} {e}")).clicked()
                {
                    doc.commands
                        .push(crate::selection::Command::SelectEvent(Some(e)));
                }
            }
        });
        ui.separator();
        ui.horizontal(|ui| {
            ui.checkbox(&mut doc.lifecycle.show_internal_frames, "internal frames");
            if ui.button("Copy stack").clicked() {
                ui.ctx().copy_text(stack_text(
                    &data.loaded.snapshot,
                    lifetime.stack,
                    doc.lifecycle.show_internal_frames,
                ));
            }
        });
        egui::ScrollArea::vertical().show(ui, |ui| {
            let lines = memsight_core::frames::display_frames(
                &data.loaded.snapshot,
                lifetime.stack,
                doc.lifecycle.show_internal_frames,
            );
            if lines.is_empty() {
                ui.weak("no stack recorded");
            }
            for line in lines {
                let text = if line.repeat > 1 {
                    format!("{} (×{})", line.text, line.repeat)
                } else {
                    line.text
                };
                let rich = egui::RichText::new(text).monospace();
                ui.label(if line.internal { rich.weak() } else { rich });
            }
        });
    }

    fn warnings_window(&mut self, ctx: &egui::Context) {
        let Some(doc) = self.docs.get(self.active) else {
            return;
        };
        let mut open = self.show_warnings;
        // Below the menu and summary bars, never over them; Escape closes it (`shortcuts`).
        let mut area = ctx.content_rect();
        area.min.y += 64.0;
        egui::Window::new("Warnings")
            .open(&mut open)
            .constrain_to(area)
            .default_pos(area.min + egui::vec2(area.width() * 0.3, 0.0))
            .default_width((area.width() * 0.5).min(640.0))
            .vscroll(true)
            .show(ctx, |ui| {
                ui.weak("Esc closes");
                if doc.data.loaded.warnings.is_empty() {
                    ui.label("none");
                }
                for w in &doc.data.loaded.warnings {
                    ui.label(w.to_string());
                }
            });
        self.show_warnings = open;
    }
}

impl eframe::App for MemsightApp {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        self.ui_root(ui);
    }
}

/// A menu button with its shortcut on the right.
fn shortcut_button(ui: &mut Ui, text: &str, shortcut: &str) -> egui::Response {
    ui.add(egui::Button::new(text).shortcut_text(shortcut))
}

/// `内存快照` of `内存快照.pkl.gz`: the name without the snapshot extensions.
fn file_stem(name: &str) -> &str {
    let name = name.strip_suffix(".gz").unwrap_or(name);
    [".pickle", ".pkl", ".pt", ".csv"]
        .iter()
        .find_map(|e| name.strip_suffix(e))
        .unwrap_or(name)
}

/// The recent-files list kept at `store` (one path a line); empty when absent or unreadable.
fn read_recent(store: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string(store)
        .map(|text| {
            text.lines()
                .filter(|l| !l.is_empty())
                .map(PathBuf::from)
                .take(MAX_RECENT)
                .collect()
        })
        .unwrap_or_default()
}

/// Best effort: a list that cannot be written is only a convenience lost.
fn write_recent(store: &Path, recent: &[PathBuf]) {
    if let Some(dir) = store.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let text: Vec<String> = recent.iter().map(|p| p.display().to_string()).collect();
    let _ = std::fs::write(store, text.join("\n"));
}

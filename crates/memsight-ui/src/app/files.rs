//! Opening files (dialogs, drops, recent files, background loads) and exporting pictures.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::dialogs::{Picked, Purpose};
use super::{ExportTarget, MAX_RECENT, MemsightApp};
use crate::document::{Document, LoadJob, Opened, Source};
use crate::palette::ColorBy;
use crate::views::profiler::ProfilerDoc;

impl MemsightApp {
    pub fn open(&mut self, ctx: &egui::Context, path: PathBuf) {
        if self.open_run(ctx, &path) {
            return;
        }
        self.jobs.push(LoadJob::start(Source::Path(path), ctx));
    }

    /// Asks the integration for a screenshot and saves it (or the chart alone, with its caption)
    /// as PNG at `path`. Until the picture comes back every frame is drawn as the export.
    pub fn export_screenshot(&self, ctx: &egui::Context, target: ExportTarget, path: PathBuf) {
        let crop = self.export_crop(target);
        // The open snapshots: an export never replaces one of them.
        let inputs: Vec<PathBuf> = self.docs.iter().filter_map(|d| d.path.clone()).collect();
        let done = Arc::clone(&self.exports_done);
        let capturing = Arc::clone(&self.capturing);
        if let Ok(mut c) = capturing.lock() {
            *c = Some((target, std::time::Instant::now()));
        }
        let pixels_per_point = ctx.pixels_per_point();
        let ctx2 = ctx.clone();
        ctx.request_screenshot(move |image| {
            if let Ok(mut c) = capturing.lock() {
                *c = None;
            }
            let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
            let crop = crop.map(|r| r * pixels_per_point);
            let result = crate::save_screenshot(&image, crop, &path, &inputs)
                .map(|()| path.clone())
                .map_err(|e| format!("could not save {}: {e}", path.display()));
            if let Ok(mut done) = done.lock() {
                done.push(result);
            }
            ctx2.request_repaint();
        });
    }

    /// A file name for an export: the file's name, its device and what is shown (a tab named by
    /// its path in a run, `iteration_20/rank3…`, gives `iteration_20_rank3…`).
    pub fn export_name(&self, target: ExportTarget) -> String {
        self.export_name_of_tabs(target).replace(['/', '\\'], "_")
    }

    fn export_name_of_tabs(&self, target: ExportTarget) -> String {
        let what = match target {
            ExportTarget::Window => "window",
            ExportTarget::Chart => "chart",
        };
        if let Some(run) = self.active_run.and_then(|r| self.runs.get(r)) {
            let folder = run
                .run
                .root
                .file_name()
                .map_or_else(|| "run".to_string(), |n| n.to_string_lossy().into_owned());
            return format!("{folder}-run-{what}.png");
        }
        if let Some(doc) = self.active_compare.and_then(|c| self.compares.get(c)) {
            return format!(
                "{}-vs-{}-compare-{what}.png",
                file_stem(crate::views::compare::short(&doc.names[0])),
                file_stem(crate::views::compare::short(&doc.names[1]))
            );
        }
        if let Some(doc) = self.active_profiler.and_then(|p| self.profilers.get(p)) {
            return format!("{}-profiler-{what}.png", file_stem(&doc.name));
        }
        match self.docs.get(self.active) {
            Some(doc) => {
                let chart = match (target, doc.lifecycle.color_by) {
                    (ExportTarget::Window, _) => "window",
                    (ExportTarget::Chart, ColorBy::CallSite) => "timeline",
                    (ExportTarget::Chart, ColorBy::Category) => "timeline-by-category",
                    (ExportTarget::Chart, ColorBy::Owner) => "timeline-by-owner",
                };
                format!("{}-device{}-{chart}.png", file_stem(&doc.name), doc.device)
            }
            None => format!("memsight-{what}.png"),
        }
    }

    /// Opens a file dialog (the desktop's, else memsight's browser).
    pub(super) fn start_dialog(&mut self, purpose: Purpose) {
        if let Some(note) = self.dialogs.start(purpose) {
            self.notices.info(note);
        }
    }

    /// The file name an export at `size` suggests: its own, so that it never meets the picture
    /// at the window's size (Ctrl+E) under one name.
    pub fn export_name_at(&self, target: ExportTarget, [width, height]: [u32; 2]) -> String {
        let name = self.export_name(target);
        let stem = name.strip_suffix(".png").unwrap_or(&name);
        format!("{stem}-{width}x{height}.png")
    }

    /// "Export chart at a size": the dialog, then an off-screen rendering at `size` pixels.
    pub(super) fn start_export_at(&mut self, target: ExportTarget, size: [u32; 2]) {
        if target == ExportTarget::Chart && self.chart_rect.is_none() {
            self.notices.error("nothing to export: no chart is shown");
            return;
        }
        let name = self.export_name_at(target, size);
        self.start_dialog(Purpose::Export { target, name });
        if self.dialogs.is_open() {
            self.export_size = Some(size);
        }
    }

    /// Renders the snapshot shown, as it is shown (device, zoom, colouring, selection), off
    /// screen at `size` pixels on a thread, with its caption, and saves it to `path`; the
    /// outcome comes back as a notice.
    pub fn export_at_size(
        &mut self,
        ctx: &egui::Context,
        target: ExportTarget,
        path: PathBuf,
        [width, height]: [u32; 2],
    ) {
        let shown = self
            .docs
            .get(self.active)
            .filter(|_| self.active_profiler.is_none() && self.active_compare.is_none());
        let Some(doc) = shown else {
            self.notices
                .error("an export at a size renders a snapshot's chart: show one first");
            return;
        };
        let mut copy = crate::document::Document::shared(
            doc.name.clone(),
            doc.path.clone(),
            Arc::clone(&doc.data),
        );
        copy.device = doc.device;
        copy.selection = doc.selection.clone();
        copy.lifecycle.copy_view(&doc.lifecycle);
        let inputs: Vec<PathBuf> = self.docs.iter().filter_map(|d| d.path.clone()).collect();
        let done = Arc::clone(&self.exports_done);
        let ctx = ctx.clone();
        let caption = self.export_caption();
        self.notices.info(format!(
            "rendering {} at {width} × {height}…",
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
        std::thread::spawn(move || {
            let mut app = MemsightApp::with_documents(vec![copy]);
            app.view = match target {
                ExportTarget::Chart => crate::View::Timeline,
                ExportTarget::Window => crate::View::App,
            };
            app.fixed_caption = Some(caption);
            let options = super::screenshot::ScreenshotOptions {
                width: width as f32,
                height: height as f32,
                view: app.view,
                ..super::screenshot::ScreenshotOptions::default()
            };
            let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
            let result = super::screenshot::render(app, &options)
                .and_then(|image| crate::write_image(&image, &path, &inputs))
                .map(|()| path.clone())
                .map_err(|e| format!("could not save {}: {e}", path.display()));
            if let Ok(mut done) = done.lock() {
                done.push(result);
            }
            ctx.request_repaint();
        });
    }

    pub(super) fn start_export(&mut self, target: ExportTarget) {
        if target == ExportTarget::Chart && self.chart_rect.is_none() {
            self.notices.error("nothing to export: no chart is shown");
            return;
        }
        let name = self.export_name(target);
        self.start_dialog(Purpose::Export { target, name });
    }

    /// Dialog answers, the question whether to replace a file, and finished exports.
    pub(super) fn poll_dialogs(&mut self, ctx: &egui::Context) {
        let outcome = self.dialogs.show(ctx);
        if let Some(note) = outcome.note {
            self.notices.info(note);
        }
        // The frame a dialog answers in still shows the dialog: an export waits one frame.
        if let Some((target, path)) = self.pending_export.take() {
            self.export_screenshot(ctx, target, path);
        }
        match outcome.picked {
            Some(Picked::Open(paths)) => self.open_all(ctx, paths),
            Some(Picked::Export {
                target,
                path,
                replace_asked,
            }) => {
                let size = self.export_size.take();
                self.export_picked(ctx, (target, path, size), replace_asked);
            }
            None => {}
        }
        self.replace_question(ctx);
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

    /// An export the user picked a file for (rendered at `size`, else from the window): where
    /// the file exists and no dialog asked, the user is asked first whether to replace it.
    pub fn export_picked(
        &mut self,
        ctx: &egui::Context,
        (target, path, size): (ExportTarget, PathBuf, Option<[u32; 2]>),
        replace_asked: bool,
    ) {
        if path.exists() && !replace_asked {
            self.confirm_replace = Some((target, path, size));
            ctx.request_repaint();
        } else {
            self.export_to(ctx, target, path, size);
        }
    }

    /// Saves the export picked: rendered at `size` off screen, else from the window next frame.
    fn export_to(
        &mut self,
        ctx: &egui::Context,
        target: ExportTarget,
        path: PathBuf,
        size: Option<[u32; 2]>,
    ) {
        if let Some(size) = size {
            self.export_at_size(ctx, target, path, size);
        } else {
            self.pending_export = Some((target, path));
            ctx.request_repaint();
        }
    }

    /// "FILE exists: replace it?", while an export waits on the answer.
    fn replace_question(&mut self, ctx: &egui::Context) {
        let Some((_, path, _)) = &self.confirm_replace else {
            return;
        };
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let folder = path
            .parent()
            .map_or_else(String::new, |p| p.display().to_string());
        let mut answer = None;
        egui::Modal::new(egui::Id::unique("memsight-replace-export")).show(ctx, |ui| {
            ui.set_max_width(460.0);
            ui.heading(format!("{name} already exists"));
            ui.label(format!("in {folder}. Replace it with this picture?"));
            ui.horizontal(|ui| {
                if ui.button("Replace").clicked() {
                    answer = Some(true);
                }
                if ui.button("Cancel").clicked() || ui.input(|i| i.key_pressed(egui::Key::Escape)) {
                    answer = Some(false);
                }
            });
        });
        match answer {
            Some(true) => {
                if let Some((target, path, size)) = self.confirm_replace.take() {
                    self.export_to(ctx, target, path, size);
                }
            }
            Some(false) => {
                self.confirm_replace = None;
                self.notices.info("not exported: the file was kept");
            }
            None => {}
        }
    }

    /// Closes the file shown (snapshot or profiler run); the next one left takes its place.
    pub(super) fn close_active(&mut self) {
        if let Some(r) = self.active_run.take() {
            if r < self.runs.len() {
                self.runs[r].cancel();
                self.runs.remove(r);
            }
            if self.docs.is_empty()
                && self.profilers.is_empty()
                && self.compares.is_empty()
                && !self.runs.is_empty()
            {
                self.show_run(r.min(self.runs.len() - 1));
            }
            return;
        }
        if let Some(c) = self.active_compare.take() {
            if c < self.compares.len() {
                self.compares.remove(c);
            }
            // Back to a file; with none open, to a profiler run, else to another compare tab.
            if self.docs.is_empty() {
                if !self.profilers.is_empty() {
                    self.active_profiler = Some(0);
                } else if !self.compares.is_empty() {
                    self.active_compare = Some(c.min(self.compares.len() - 1));
                }
            }
            return;
        }
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
            } else if self.docs.is_empty() && !self.compares.is_empty() {
                // Its compare tabs hold the files they compare: they stay.
                self.active_compare = Some(0);
            }
        }
    }

    pub(super) fn poll_jobs(&mut self) {
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
                    self.active_compare = None;
                    self.active_run = None;
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
                    let mut doc = Document::new(self.tab_name(&job.source), path, prepared);
                    doc.load_order = job.order;
                    // Its tab goes where the user's order puts it (files opened together load
                    // side by side and finish in any order).
                    let at = self.docs.partition_point(|d| d.load_order < job.order);
                    self.docs.insert(at, doc);
                    self.active = at;
                    self.active_profiler = None;
                    self.active_compare = None;
                    self.active_run = None;
                }
                Some(Ok(Opened::MemscopeCompare(rows))) => {
                    if let Some(p) = job.source.path() {
                        self.remember(p);
                    }
                    // Opened again: the one window, read afresh (a window's title is its id).
                    let name = job.source.name();
                    self.memscope_compares.retain(|t| t.name != name);
                    self.memscope_compares
                        .push(crate::views::memscope_compare::CompareTable::new(
                            name, rows,
                        ));
                }
                Some(Err(message)) => self.notices.error(message),
            }
        }
        self.jobs = still_running;
    }

    pub(super) fn remember(&mut self, path: &Path) {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.recent.retain(|p| *p != path);
        self.recent.insert(0, path);
        self.recent.truncate(MAX_RECENT);
        if let Some(store) = &self.recent_store {
            write_recent(store, &self.recent);
        }
    }

    pub(super) fn take_dropped_files(&mut self, ctx: &egui::Context) {
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
}

/// `内存快照` of `内存快照.pkl.gz`: the name without the snapshot extensions.
pub(super) fn file_stem(name: &str) -> &str {
    let name = name.strip_suffix(".gz").unwrap_or(name);
    [".pickle", ".pkl", ".pt", ".csv"]
        .iter()
        .find_map(|e| name.strip_suffix(e))
        .unwrap_or(name)
}

/// The recent-files list kept at `store` (one path a line); empty when absent or unreadable.
pub(super) fn read_recent(store: &Path) -> Vec<PathBuf> {
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
pub(super) fn write_recent(store: &Path, recent: &[PathBuf]) {
    if let Some(dir) = store.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let text: Vec<String> = recent.iter().map(|p| p.display().to_string()).collect();
    let _ = std::fs::write(store, text.join("\n"));
}

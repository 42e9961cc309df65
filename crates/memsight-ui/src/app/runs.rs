//! Run tabs: a folder of snapshots, one per rank and dump (File → Open run…, a folder dropped
//! or given on the command line). While `active_run` is set the window shows that run; its
//! cells open files in tabs of their own, and "Compare with the median rank" opens both files,
//! then their compare tab once both are loaded.

use std::path::{Path, PathBuf};

use egui::Ui;

use super::{MemsightApp, View};
use crate::views::run::{RunAction, RunDoc, run_ui};

impl MemsightApp {
    /// Opens `path` as a run when it is a folder of snapshots; false otherwise.
    pub(super) fn open_run(&mut self, ctx: &egui::Context, path: &Path) -> bool {
        let Some(run) = memsight_core::run::as_run(path) else {
            return false;
        };
        self.remember(path);
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| format!("{} (run)", n.to_string_lossy()),
        );
        self.runs.push(RunDoc::start(ctx, name, run));
        self.show_run(self.runs.len() - 1);
        true
    }

    /// Makes run tab `i` the one shown.
    pub(super) fn show_run(&mut self, i: usize) {
        self.active_run = Some(i);
        self.active_profiler = None;
        self.active_compare = None;
    }

    pub fn runs(&self) -> &[RunDoc] {
        &self.runs
    }

    pub fn runs_mut(&mut self) -> &mut [RunDoc] {
        &mut self.runs
    }

    /// The run tabs, after the compare tabs in the menu bar.
    pub(super) fn run_tabs_ui(&mut self, ui: &mut Ui, reveal: bool) {
        for i in 0..self.runs.len() {
            let doc = &self.runs[i];
            if super::menus::tab_label(ui, self.active_run == Some(i), &doc.name, reveal)
                .on_hover_text(format!(
                    "{}\n{} files",
                    doc.run.root.display(),
                    doc.run.files.len()
                ))
                .clicked()
            {
                self.show_run(i);
            }
        }
    }

    /// A run tab fills the window below the menu bar.
    pub(super) fn run_root(&mut self, ui: &mut Ui, r: usize) {
        if self.view == View::App {
            egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
            if !self.jobs.is_empty() {
                egui::Panel::top("status").show(ui, |ui| self.status_ui(ui));
            }
        }
        let mut action = None;
        egui::CentralPanel::default().show(ui, |ui| {
            self.chart_rect = Some(ui.available_rect_before_wrap());
            action = run_ui(ui, &mut self.runs[r]);
        });
        self.layout.chart = self.chart_rect;
        match action {
            Some(RunAction::Open(file)) => {
                let path = self.runs[r].run.files[file].path.clone();
                self.open_or_show(ui.ctx(), path);
            }
            Some(RunAction::Compare { median, file }) => {
                let files = &self.runs[r].run.files;
                let (a, b) = (files[median].path.clone(), files[file].path.clone());
                for path in [&a, &b] {
                    if self.doc_of(path).is_none() {
                        self.open(ui.ctx(), path.clone());
                    }
                }
                self.pending_compare = Some((a, b));
                self.compare_when_loaded(ui.ctx());
            }
            None => {}
        }
        if self.is_busy() {
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(50));
        }
    }

    /// A file's tab name: its name, or, for a file of an open run, its path in the run
    /// (`iteration_20/rank3_memory_snapshot.pickle`: two dumps of one rank are told apart).
    pub(super) fn tab_name(&self, source: &crate::document::Source) -> String {
        let in_run = source.path().and_then(|path| {
            self.runs
                .iter()
                .flat_map(|r| &r.run.files)
                .find(|f| f.path == path)
                .map(|f| f.name.clone())
        });
        in_run.unwrap_or_else(|| source.name())
    }

    /// The open snapshot tab of `path`, if any.
    fn doc_of(&self, path: &Path) -> Option<usize> {
        self.docs
            .iter()
            .position(|d| d.path.as_deref() == Some(path))
    }

    /// Shows `path`'s tab when it is open, else opens it.
    fn open_or_show(&mut self, ctx: &egui::Context, path: PathBuf) {
        match self.doc_of(&path) {
            Some(i) => {
                self.active = i;
                self.active_run = None;
                self.active_profiler = None;
                self.active_compare = None;
            }
            None => self.open(ctx, path),
        }
    }

    /// Opens the compare tab asked for from a run once both of its files are loaded.
    pub(super) fn compare_when_loaded(&mut self, ctx: &egui::Context) {
        let Some((a, b)) = &self.pending_compare else {
            return;
        };
        if let (Some(ia), Some(ib)) = (self.doc_of(a), self.doc_of(b)) {
            self.pending_compare = None;
            self.active_run = None;
            self.compare(ctx, ia, ib);
        } else if self.jobs.is_empty() {
            // A load failed (its notice says why): nothing left to wait for.
            self.pending_compare = None;
        }
    }
}

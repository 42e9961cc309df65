//! The app shell: tabs of open files, menus and shortcuts, file dialogs, notices, background
//! loads, and the panels the views are drawn in (`views` draws their content).
//! `MemsightApp::ui_root` draws everything, so the window, the headless screenshot and the tests
//! all run the same code. Codemap: `mod.rs` (the state, a frame in order, shortcuts), `files.rs`
//! (open, load, export, recent files), `menus.rs` (menu bar, progress, summary), `panels.rs` (the
//! layout around the chart), `dialogs.rs` (file dialogs that always appear), `notices.rs`.

mod compare;
pub mod dialogs;
mod files;
mod menus;
pub mod notices;
mod panels;
mod runs;
pub mod screenshot;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use egui::{Rect, Ui};

use crate::app::dialogs::{Backend, Dialogs, Purpose};
use crate::app::notices::{Level, Notices};
use crate::document::{Document, LoadJob, Source};
use crate::palette;
use crate::views::profiler::ProfilerDoc;

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
    /// The What-if panel, where open.
    pub whatif: Option<Rect>,
}

/// What the bottom area shows: when it is too narrow for two parts side by side, one of these;
/// else the event list beside the pool chart or the block table (`Events` shows the pool there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BottomTab {
    #[default]
    Events,
    Pool,
    /// The live blocks at the selected event, as a table.
    Blocks,
    /// Segments over time.
    Segments,
}

/// What the app draws: everything, or one chart alone (`memsight screenshot --view`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    App,
    Timeline,
    Pool,
    /// The compare view of two snapshots (`memsight screenshot --view diff A B`).
    Diff,
}

/// What a screenshot covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportTarget {
    Window,
    Chart,
}

/// One tab of the tab bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TabId {
    Doc(usize),
    Profiler(usize),
    Compare(usize),
    Run(usize),
}

pub struct MemsightApp {
    docs: Vec<Document>,
    active: usize,
    /// Open profiler runs; while `active_profiler` is set, the window shows that one.
    profilers: Vec<ProfilerDoc>,
    active_profiler: Option<usize>,
    /// Open compare tabs; while `active_compare` is set, the window shows that one.
    compares: Vec<crate::views::compare::CompareDoc>,
    active_compare: Option<usize>,
    /// Open runs (folders of snapshots); while `active_run` is set, the window shows that one.
    runs: Vec<crate::views::run::RunDoc>,
    active_run: Option<usize>,
    /// The tab the tab bar last scrolled into view, and the bar's width then: when another
    /// becomes active (a key, the tab list, a file opened) or the window is resized, the bar
    /// scrolls to it.
    tab_in_view: Option<(TabId, u32)>,
    /// Where the tab bar was drawn last frame: the mouse wheel over it scrolls it sideways.
    tab_bar_rect: Option<Rect>,
    /// Two files a run asked to compare, opened and awaited: the compare tab opens once both
    /// are loaded.
    pending_compare: Option<(PathBuf, PathBuf)>,
    /// Opened `memory_compare_*.csv` files, each in its window.
    pub memscope_compares: Vec<crate::views::memscope_compare::CompareTable>,
    jobs: Vec<LoadJob>,
    /// Saved, copied, failed: transient messages in the corner; failures stay until dismissed.
    pub notices: Notices,
    /// Where the recent-files list is kept; `None`: not kept (tests, headless).
    recent_store: Option<PathBuf>,
    recent: Vec<PathBuf>,
    pub dialogs: Dialogs,
    /// An export picked in a dialog, taken next frame (when the dialog is gone from the picture).
    pending_export: Option<(ExportTarget, PathBuf)>,
    /// Exports finished by the screenshot callback, to report as notices.
    exports_done: Arc<Mutex<Vec<Result<PathBuf, String>>>>,
    /// What a screenshot asked for and not yet taken captures, and when it was asked for: until
    /// it comes back (or `CAPTURE_TIMEOUT` passes), every frame is drawn as the picture
    /// (caption, no fold button), whichever frame it is.
    capturing: Arc<Mutex<Option<(ExportTarget, std::time::Instant)>>>,
    /// An export whose file exists, waiting for the user to say whether to replace it (with the
    /// size it renders at, for an export at a size).
    confirm_replace: Option<(ExportTarget, PathBuf, Option<[u32; 2]>)>,
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
    /// The window's title as last set: the file and device shown.
    title: String,
    /// The last line written to `MEMSIGHT_UI_LOG`.
    logged: String,
    /// The size the export being asked for renders at (Export chart at a size).
    export_size: Option<[u32; 2]>,
    /// A caption drawn on every frame (an off-screen rendering for an export: the caption of
    /// the view it copies).
    pub fixed_caption: Option<String>,
}

/// The height of the caption's band above an exported chart, and the margin kept around the
/// chart (the labels that reach past its edges), in points.
const CAPTION_BAND: f32 = 26.0;
const EXPORT_MARGIN: f32 = 8.0;
/// How long an export waits for the window's picture before it gives up.
const CAPTURE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl MemsightApp {
    /// Starts loading `sources` in the background.
    pub fn new(ctx: &egui::Context, sources: Vec<Source>, recent_store: Option<PathBuf>) -> Self {
        let recent = recent_store
            .as_deref()
            .map(files::read_recent)
            .unwrap_or_default();
        let dialogs = Dialogs::new(Backend::from_env(), last_folder(&recent));
        // A run folder opens a run tab (below); everything else loads as a file.
        let (run_folders, sources): (Vec<Source>, Vec<Source>) = sources
            .into_iter()
            .partition(|s| matches!(s, Source::Path(p) if p.is_dir()));
        let jobs = sources
            .into_iter()
            .map(|s| LoadJob::start(s, ctx))
            .collect();
        let mut app = Self {
            docs: Vec::new(),
            active: 0,
            profilers: Vec::new(),
            active_profiler: None,
            compares: Vec::new(),
            active_compare: None,
            runs: Vec::new(),
            active_run: None,
            tab_in_view: None,
            tab_bar_rect: None,
            pending_compare: None,
            memscope_compares: Vec::new(),
            jobs,
            notices: Notices::default(),
            recent_store,
            recent,
            dialogs,
            pending_export: None,
            exports_done: Arc::new(Mutex::new(Vec::new())),
            capturing: Arc::new(Mutex::new(None)),
            confirm_replace: None,
            show_warnings: false,
            show_findings: true,
            show_pool: true,
            view: View::App,
            chart_rect: None,
            layout: Layout::default(),
            was_narrow: None,
            bottom_tab: BottomTab::default(),
            title: "memsight".to_string(),
            logged: String::new(),
            export_size: None,
            fixed_caption: None,
        };
        for folder in run_folders {
            if let Source::Path(path) = folder
                && !app.open_run(ctx, &path)
            {
                // Not a run: a folder of profiler data or an msMemScope recording.
                app.jobs.push(LoadJob::start(Source::Path(path), ctx));
            }
        }
        app
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

    pub fn compares(&self) -> &[crate::views::compare::CompareDoc] {
        &self.compares
    }

    pub fn compares_mut(&mut self) -> &mut [crate::views::compare::CompareDoc] {
        &mut self.compares
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

    /// True while a file loads, a chart layout or a what-if replay is being computed.
    pub fn is_busy(&self) -> bool {
        // The lifecycle chart lays out in the background, when it is drawn and has a trace.
        let charting = |d: &Document| {
            self.view != View::Pool
                && d.device_index()
                    .is_some_and(|i| !d.data.loaded.snapshot.devices[i].trace.is_empty())
        };
        if let Some(r) = self.active_run.and_then(|r| self.runs.get(r)) {
            return !self.jobs.is_empty() || r.is_busy();
        }
        if let Some(c) = self.active_compare.and_then(|c| self.compares.get(c)) {
            return !self.jobs.is_empty() || c.is_busy();
        }
        !self.jobs.is_empty()
            || (self.active_profiler.is_none()
                && self.docs.get(self.active).is_some_and(|d| {
                    (charting(d) && d.lifecycle.is_laying_out())
                        || (d.whatif.open && d.whatif.busy())
                }))
    }

    /// Ctrl+O, Ctrl+E, Ctrl+Shift+E, Ctrl+W, Ctrl+(Shift+)Tab, Ctrl+`PgUp` / `PgDn`, Escape: whenever
    /// the window has focus.
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
        // Through the tabs, as browsers do: Ctrl+Tab / Ctrl+PgDn the next, with Shift / PgUp the
        // one before (every tab is reachable without the mouse, however many are open).
        if pressed(Modifiers::COMMAND | Modifiers::SHIFT, Key::Tab)
            || pressed(Modifiers::COMMAND, Key::PageUp)
        {
            self.cycle_tabs(false);
        }
        if pressed(Modifiers::COMMAND, Key::Tab) || pressed(Modifiers::COMMAND, Key::PageDown) {
            self.cycle_tabs(true);
        }
        // Through the findings: F8 the next, Shift+F8 the one before (as editors go through
        // problems), each shown as a click shows it.
        if pressed(Modifiers::SHIFT, Key::F8) {
            self.step_findings(false);
        }
        if pressed(Modifiers::NONE, Key::F8) {
            self.step_findings(true);
        }
        if ctx.input(|i| i.key_pressed(Key::Escape)) {
            if self.dialogs.builtin_is_open() {
                self.dialogs.close_builtin();
            } else {
                self.show_warnings = false;
            }
        }
    }

    /// Shows the next (or the previous) finding of the tab shown, wrapping, as a click on it
    /// does.
    fn step_findings(&mut self, forward: bool) {
        let step = |selected: Option<usize>, n: usize| {
            (n > 0).then(|| match (selected, forward) {
                (None, true) => 0,
                (None, false) => n - 1,
                (Some(i), true) => (i + 1) % n,
                (Some(i), false) => (i + n - 1) % n,
            })
        };
        match self.active_tab() {
            TabId::Doc(d) => {
                if let Some(doc) = self.docs.get_mut(d)
                    && let Some(i) = step(doc.findings.selected, doc.data.findings.len())
                {
                    doc.findings.selected = Some(i);
                    doc.show_finding(i);
                }
            }
            TabId::Profiler(p) => {
                if let Some(doc) = self.profilers.get_mut(p)
                    && let Some(i) = step(doc.findings.selected, doc.data.findings.len())
                {
                    doc.findings.selected = Some(i);
                    doc.show_finding(i);
                }
            }
            TabId::Compare(_) | TabId::Run(_) => {}
        }
    }

    /// Every tab, in the tab bar's order: snapshots, then profiler runs, compares and runs.
    fn tabs(&self) -> Vec<TabId> {
        (0..self.docs.len())
            .map(TabId::Doc)
            .chain((0..self.profilers.len()).map(TabId::Profiler))
            .chain((0..self.compares.len()).map(TabId::Compare))
            .chain((0..self.runs.len()).map(TabId::Run))
            .collect()
    }

    /// The tab the window shows.
    fn active_tab(&self) -> TabId {
        match (self.active_run, self.active_compare, self.active_profiler) {
            (Some(r), _, _) => TabId::Run(r),
            (None, Some(c), _) => TabId::Compare(c),
            (None, None, Some(p)) => TabId::Profiler(p),
            (None, None, None) => TabId::Doc(self.active),
        }
    }

    /// Makes `tab` the one the window shows.
    fn show_tab(&mut self, tab: TabId) {
        self.active_run = None;
        match tab {
            TabId::Doc(i) => {
                self.active = i;
                self.active_profiler = None;
                self.active_compare = None;
            }
            TabId::Profiler(i) => {
                self.active_profiler = Some(i);
                self.active_compare = None;
            }
            TabId::Compare(i) => {
                self.active_compare = Some(i);
                self.active_profiler = None;
            }
            TabId::Run(i) => self.show_run(i),
        }
    }

    /// Makes the next tab (or the one before) active, in the tab bar's order; past the last,
    /// the first.
    fn cycle_tabs(&mut self, forward: bool) {
        let tabs = self.tabs();
        if tabs.is_empty() {
            return;
        }
        let current = self.active_tab();
        let at = tabs.iter().position(|&t| t == current).unwrap_or(0);
        let next = if forward {
            (at + 1) % tabs.len()
        } else {
            (at + tabs.len() - 1) % tabs.len()
        };
        self.show_tab(tabs[next]);
    }

    /// Everything, inside `ui`.
    pub fn ui_root(&mut self, ui: &mut Ui) {
        let ctx = ui.ctx().clone();
        // Light, like the charts people know from PyTorch's viewer; the lines between panels
        // dark enough to find and drag.
        if ctx.theme() != egui::Theme::Light {
            ctx.set_theme(egui::Theme::Light);
        }
        if ctx
            .global_style()
            .visuals
            .widgets
            .noninteractive
            .bg_stroke
            .color
            != palette::DIVIDER
        {
            ctx.global_style_mut(|style| {
                style.visuals.widgets.noninteractive.bg_stroke.color = palette::DIVIDER;
            });
        }
        self.poll_jobs();
        self.take_dropped_files(&ctx);
        if self.view == View::App {
            self.follow_title(&ctx);
            self.shortcuts(&ctx);
            self.poll_dialogs(&ctx);
            self.caption_or_notices(&ctx);
            // A file dialog is modal: behind it nothing answers the pointer, and no tooltip
            // draws over it.
            if self.dialogs.is_open() {
                ui.disable();
            }
        }
        self.compare_when_loaded(&ctx);
        if let Some(r) = self.active_run.filter(|&r| r < self.runs.len()) {
            self.run_root(ui, r);
            return;
        }
        if let Some(c) = self.active_compare.filter(|&c| c < self.compares.len()) {
            self.compare_root(ui, c);
            return;
        }
        if let Some(p) = self.active_profiler.filter(|&p| p < self.profilers.len()) {
            self.profiler_root(ui, p);
            return;
        }
        match self.view {
            View::App | View::Diff => {}
            View::Timeline => {
                // An export's picture: its caption in a line of its own above the chart, and no
                // button that only a pointer uses.
                if let Some(text) = self.fixed_caption.clone() {
                    crate::views::set_exporting(&ctx, true);
                    egui::Panel::top("caption").show(ui, |ui| {
                        ui.label(egui::RichText::new(text).size(12.0).color(palette::AXIS));
                    });
                }
                egui::CentralPanel::default().show(ui, |ui| self.chart_ui(ui));
                return;
            }
            View::Pool => {
                egui::CentralPanel::default().show(ui, |ui| self.pool_ui(ui));
                if let Some(doc) = self.docs.get_mut(self.active)
                    && doc.apply_commands()
                {
                    ctx.request_repaint();
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
        self.layout = Layout {
            window: Some(ui.max_rect()),
            ..Layout::default()
        };
        if let Some(doc) = self.docs.get_mut(self.active) {
            doc.pool.forget_drawn();
        }
        // Before the charts, so they show this frame's predictions.
        self.whatif_panel(ui);
        self.owners_panel(ui);
        if self.show_warnings {
            self.warnings_panel(ui);
        }
        self.panels_ui(ui, &ctx);
        egui::CentralPanel::default().show(ui, |ui| self.chart_ui(ui));
        self.layout.chart = self.chart_rect;
        self.step_keys(&ctx);
        // Every view has drawn and queued its commands: change the selection once, and draw
        // again so that every view shows it (the event list lagged one `[` / `]` behind until the
        // pointer moved).
        if let Some(doc) = self.docs.get_mut(self.active)
            && doc.apply_commands()
        {
            ctx.request_repaint();
        }
        self.log_selection();
        self.memscope_compare_windows(&ctx);
        paint_drop_overlay(&ctx);
        if self.is_busy() {
            ctx.request_repaint_after(std::time::Duration::from_millis(50));
        }
    }

    /// The window's title names what is shown: "memsight — file (device 0)".
    pub fn window_title(&self) -> String {
        let shown = if let Some(r) = self.active_run.and_then(|r| self.runs.get(r)) {
            Some(r.name.clone())
        } else if let Some(c) = self.active_compare.and_then(|c| self.compares.get(c)) {
            Some(c.name.clone())
        } else if let Some(p) = self.active_profiler.and_then(|p| self.profilers.get(p)) {
            Some(format!("{} (profiler)", p.name))
        } else {
            self.docs
                .get(self.active)
                .map(|d| format!("{} (device {})", d.name, d.device))
        };
        shown.map_or_else(|| "memsight".to_string(), |s| format!("memsight — {s}"))
    }

    /// The picture of this frame may be the export (a screenshot asked for and not yet taken):
    /// then no notice over it, a caption on it that says what it shows, and no button that only
    /// a pointer uses; else the notices.
    fn caption_or_notices(&mut self, ctx: &egui::Context) {
        let mut capturing = self.capturing.lock().ok().and_then(|c| *c);
        // A screenshot that never comes back (an integration without them) must not keep the
        // window in the picture's look, repainting, for ever.
        if capturing.is_some_and(|(_, asked)| asked.elapsed() > CAPTURE_TIMEOUT) {
            if let Ok(mut c) = self.capturing.lock() {
                *c = None;
            }
            capturing = None;
            self.notices
                .error("the export failed: the window's picture never came back");
        }
        crate::views::set_exporting(ctx, capturing.is_some());
        if let Some((target, _)) = capturing {
            self.paint_caption(ctx, &self.export_caption(), target);
            ctx.request_repaint();
        } else {
            self.notices.show(ctx);
        }
    }

    /// The caption an exported picture carries: the file, the device and the view, in a band of
    /// its own above the chart (over what the window has there: "Export chart" crops to the
    /// chart and that band, [`Self::export_crop`]); for the whole window, over the menu bar's
    /// right end.
    fn paint_caption(&self, ctx: &egui::Context, text: &str, target: ExportTarget) {
        let painter = ctx.layer_painter(egui::LayerId::new(
            egui::Order::Foreground,
            egui::Id::unique("memsight-export-caption"),
        ));
        let galley = painter.layout_no_wrap(
            text.to_string(),
            egui::FontId::proportional(12.0),
            palette::AXIS,
        );
        if let (ExportTarget::Chart, Some(chart)) = (target, self.chart_rect) {
            let band = egui::Rect::from_min_max(
                egui::pos2(chart.left(), chart.top() - CAPTION_BAND),
                egui::pos2(chart.right() + EXPORT_MARGIN, chart.top() - EXPORT_MARGIN),
            );
            painter.rect_filled(band, 0.0, palette::BACKGROUND);
            let at = egui::pos2(band.left() + 4.0, band.center().y - galley.size().y / 2.0);
            painter.galley(at, galley, palette::AXIS);
        } else if let Some(window) = self.layout.window {
            let at = egui::pos2(window.right() - galley.size().x - 12.0, window.top() + 4.0);
            painter.rect_filled(
                egui::Rect::from_min_size(at, galley.size()).expand(3.0),
                2.0,
                palette::LEGEND_BACKING,
            );
            painter.galley(at, galley, palette::AXIS);
        }
    }

    /// What "Export chart" saves of the window: the chart, the caption's band above it and a
    /// margin on the right (the axes' labels reach past the chart's edges); `None`: the whole
    /// window.
    fn export_crop(&self, target: ExportTarget) -> Option<Rect> {
        match target {
            ExportTarget::Window => None,
            ExportTarget::Chart => self.chart_rect.map(|chart| {
                egui::Rect::from_min_max(
                    egui::pos2(chart.left(), chart.top() - CAPTION_BAND),
                    egui::pos2(chart.right() + EXPORT_MARGIN, chart.bottom()),
                )
            }),
        }
    }

    /// What an exported picture says it shows: "file (device 0) · blocks by call site · memsight".
    pub fn export_caption(&self) -> String {
        let what = self
            .docs
            .get(self.active)
            .filter(|_| self.active_profiler.is_none() && self.active_compare.is_none())
            .map(|d| match d.lifecycle.color_by {
                crate::palette::ColorBy::CallSite => " · blocks by call site",
                crate::palette::ColorBy::Category => " · blocks by category",
                crate::palette::ColorBy::Owner => " · blocks by owner",
            })
            .unwrap_or_default();
        let shown = self.window_title();
        format!(
            "{}{what} · memsight",
            shown.strip_prefix("memsight — ").unwrap_or(&shown)
        )
    }

    fn follow_title(&mut self, ctx: &egui::Context) {
        let title = self.window_title();
        if title != self.title {
            ctx.send_viewport_cmd(egui::ViewportCommand::Title(title.clone()));
            self.title = title;
        }
    }

    /// With `MEMSIGHT_UI_LOG=FILE`, appends a line to FILE whenever what the user picked or what
    /// the pool outlines changes: how the real-window check (`scripts/gui-smoke.sh`) reads what
    /// a click did. Off (nothing written) otherwise.
    fn log_selection(&mut self) {
        let Some(path) = std::env::var_os("MEMSIGHT_UI_LOG") else {
            return;
        };
        let Some(doc) = self.docs.get(self.active) else {
            return;
        };
        let Some(i) = doc.device_index() else { return };
        let trace = &doc.data.loaded.snapshot.devices[i].trace;
        let event = doc.selection.event.map(|e| e as usize);
        let line = format!(
            "file={} event={} action={} event_addr={} list={} pinned={} range={} outlined={}\n",
            doc.name,
            event.map_or_else(|| "none".to_string(), |e| e.to_string()),
            event.map_or("none", |e| trace.action[e]
                .name(&doc.data.loaded.snapshot.strings)),
            event.map_or_else(|| "none".to_string(), |e| format!("0x{:x}", trace.addr[e])),
            doc.events
                .shown_event()
                .map_or_else(|| "none".to_string(), |e| e.to_string()),
            doc.selection
                .lifetime
                .map_or_else(|| "none".to_string(), |l| l.to_string()),
            doc.pool.highlighted_range().map_or_else(
                || "none".to_string(),
                |(a, bytes)| format!("0x{a:x}+{bytes}")
            ),
            doc.pool.highlighted_address().map_or_else(
                || "none".to_string(),
                |(a, visible)| format!("0x{a:x}{}", if visible { "" } else { "(hidden)" })
            ),
        );
        if line != self.logged {
            use std::io::Write as _;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = f.write_all(line.as_bytes());
            }
            self.logged = line;
        }
    }

    /// ↑ / ↓ step through events (Shift: 100 at a time), [ / ] through segment steps, unless a
    /// text field has the keys.
    fn step_keys(&mut self, ctx: &egui::Context) {
        if let Some(doc) = self.docs.get_mut(self.active)
            && !ctx.text_edit_focused()
        {
            let (up, down, shift, earlier, later) = ctx.input(|i| {
                (
                    i.key_pressed(egui::Key::ArrowUp),
                    i.key_pressed(egui::Key::ArrowDown),
                    i.modifiers.shift,
                    i.key_pressed(egui::Key::OpenBracket),
                    i.key_pressed(egui::Key::CloseBracket),
                )
            });
            // [ / ]: the pool's segment buttons (segment_alloc, segment_map / unmap).
            if earlier {
                doc.commands
                    .push(crate::selection::Command::SegmentStep { forward: false });
            }
            if later {
                doc.commands
                    .push(crate::selection::Command::SegmentStep { forward: true });
            }
            let step = if shift { 100 } else { 1 };
            if up {
                doc.commands.push(crate::selection::Command::Step(-step));
            }
            if down {
                doc.commands.push(crate::selection::Command::Step(step));
            }
        }
    }
}

/// "drop to open" over the whole window while files are dragged over it.
fn paint_drop_overlay(ctx: &egui::Context) {
    if ctx.input(|i| i.raw.hovered_files.is_empty()) {
        return;
    }
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

/// The folder of the most recent file that still exists: where the first dialog starts.
fn last_folder(recent: &[PathBuf]) -> Option<PathBuf> {
    recent.iter().find_map(|p| {
        p.parent()
            .filter(|d| d.is_dir())
            .map(std::path::Path::to_path_buf)
    })
}

impl eframe::App for MemsightApp {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        self.ui_root(ui);
    }
}

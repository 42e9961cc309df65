//! A run's tab: every rank and dumped iteration at once. A ranks × dumps heat map (peak
//! allocated or reserved; OOM cells outlined; sortable by rank or by peak), the ranks' allocated
//! curves of one dump overlaid, and the run doctor's findings. A click opens that file in a tab
//! of its own; "Compare with the median rank" opens the compare view.
//!
//! The files are summarised on a background thread (core `run::summary`, on rayon): the tab
//! shows progress and Cancel until they are in.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, channel};

use egui::{Align2, FontId, Rect, Sense, Stroke, Ui, vec2};
use memsight_core::detect::Severity;
use memsight_core::run::doctor::{self, RunFinding};
use memsight_core::run::summary::{FileSummary, RunProgress, summarize};
use memsight_core::run::{Run, dump_words};
use memsight_core::units::format_bytes;
use rustc_hash::FxHashMap;

use crate::palette;

/// Curves overlaid at most; past that, the median, the heaviest and the picked rank.
const MAX_CURVES: usize = 64;
const CELL_WIDTH: f32 = 84.0;
const CELL_HEIGHT: f32 = 20.0;
const RANK_COLUMN_WIDTH: f32 = 64.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    PeakAllocated,
    PeakReserved,
}

impl Metric {
    fn of(self, s: &FileSummary) -> u64 {
        match self {
            Self::PeakAllocated => s.peak_allocated_bytes,
            Self::PeakReserved => s.peak_reserved_bytes,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    Rank,
    /// By the metric at the dump shown, heaviest first.
    Peak,
}

/// What the user asked of the run tab, for the app to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunAction {
    /// Open file `i` of the run in its own tab.
    Open(usize),
    /// Compare the median rank's file (`median`) with file `file` of the same dump.
    Compare { median: usize, file: usize },
}

type Summarised = Option<(Vec<FileSummary>, Vec<RunFinding>)>;

/// A dump: its iteration (if its path has one) and whether it is an exit dump.
type Dump = (Option<u64>, bool);

pub struct RunDoc {
    pub name: String,
    pub run: Run,
    progress: Arc<RunProgress>,
    job: Option<Receiver<Summarised>>,
    pub summaries: Option<Vec<FileSummary>>,
    pub findings: Vec<RunFinding>,
    pub cancelled: bool,
    pub metric: Metric,
    pub sort: SortBy,
    /// The cell picked last (file index).
    pub picked: Option<usize>,
    /// The dump shown in the curves and sorted by (index into `dumps`).
    pub dump: usize,
    /// The run's ranks and dumps, and the file of each (rank, dump): made once, read every frame.
    ranks: Vec<u32>,
    dumps: Vec<Dump>,
    cells: FxHashMap<(Option<u32>, Dump), usize>,
}

impl RunDoc {
    /// Starts summarising `run` on a background thread.
    pub fn start(ctx: &egui::Context, name: String, run: Run) -> Self {
        let progress = Arc::new(RunProgress::default());
        let (send, receive) = channel();
        let (job_run, job_progress, ctx) = (run.clone(), Arc::clone(&progress), ctx.clone());
        std::thread::spawn(move || {
            let summarised = summarize(&job_run, Some(&job_progress)).map(|summaries| {
                let findings = doctor::analyze(&job_run, &summaries);
                (summaries, findings)
            });
            let _ = send.send(summarised);
            ctx.request_repaint();
        });
        // The last dump that is not an exit dump: the one every rank has.
        let dumps = run.dumps();
        let mut cells = FxHashMap::default();
        for (i, f) in run.files.iter().enumerate() {
            cells.entry((f.rank, (f.iteration, f.exit))).or_insert(i);
        }
        let dump = dumps
            .iter()
            .rposition(|&(_, exit)| !exit)
            .unwrap_or(dumps.len().saturating_sub(1));
        Self {
            name,
            progress,
            job: Some(receive),
            summaries: None,
            findings: Vec::new(),
            cancelled: false,
            metric: Metric::PeakAllocated,
            sort: SortBy::Rank,
            picked: None,
            dump,
            ranks: run.ranks(),
            dumps,
            cells,
            run,
        }
    }

    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    pub fn cancel(&mut self) {
        self.progress.cancel.store(true, Ordering::Relaxed);
    }

    /// Takes the summaries when the background job has them.
    fn poll(&mut self) {
        let Some(job) = &self.job else { return };
        match job.try_recv() {
            Ok(Some((summaries, findings))) => {
                self.summaries = Some(summaries);
                self.findings = findings;
                self.job = None;
            }
            Ok(None) | Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                self.cancelled = true;
                self.job = None;
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
        }
    }

    /// The file of `rank` at dump `dump` (an exit dump's file where it has one there).
    fn file_at(&self, rank: Option<u32>, dump: (Option<u64>, bool)) -> Option<usize> {
        self.cells.get(&(rank, dump)).copied()
    }

    /// The file of the median rank (by peak allocated) at `file`'s dump.
    pub fn median_of(&self, file: usize) -> Option<usize> {
        let summaries = self.summaries.as_ref()?;
        let at = &self.run.files[file];
        // An exit dump is compared with the ranks' regular dump of the same iteration.
        let mut peers: Vec<usize> = (0..summaries.len())
            .filter(|&i| {
                let f = &self.run.files[i];
                f.iteration == at.iteration
                    && !f.exit
                    && f.rank.is_some()
                    && summaries[i].error.is_none()
            })
            .collect();
        peers.sort_by_key(|&i| (summaries[i].peak_allocated_bytes, self.run.files[i].rank));
        peers.get(peers.len().checked_sub(1)? / 2).copied()
    }
}

/// The run tab; what the user asked for, if anything.
pub fn run_ui(ui: &mut Ui, doc: &mut RunDoc) -> Option<RunAction> {
    doc.poll();
    let mut action = None;
    ui.horizontal_wrapped(|ui| {
        ui.strong(doc.run.root.display().to_string());
        ui.label(format!(
            "{} files · {} ranks · {} dumps",
            doc.run.files.len(),
            doc.ranks.len(),
            doc.dumps.len()
        ));
    });
    if doc.is_busy() {
        let done = doc.progress.files_done.load(Ordering::Relaxed);
        ui.horizontal(|ui| {
            ui.add(
                egui::ProgressBar::new(done as f32 / doc.run.files.len().max(1) as f32)
                    .desired_width(240.0)
                    .text(format!("reading {done} of {} files", doc.run.files.len())),
            );
            if ui.button("Cancel").clicked() {
                doc.cancel();
            }
        });
        ui.ctx()
            .request_repaint_after(std::time::Duration::from_millis(100));
        return None;
    }
    if doc.cancelled {
        ui.label("Cancelled: close this tab and open the run again to read it.");
        return None;
    }
    // The findings take at most 45 % of the width, also after the window shrank: the heat map
    // keeps the rest.
    let width = ui.available_width();
    egui::Panel::right("run-findings")
        .resizable(true)
        .default_size(width * 0.38)
        .min_size(160.0_f32.min(width * 0.3))
        .max_size(width * 0.45)
        .show(ui, |ui| findings_ui(ui, doc, &mut action));
    controls_ui(ui, doc, &mut action);
    ui.separator();
    let heat_height = (ui.available_height() * 0.55).max(80.0);
    ui.allocate_ui(vec2(ui.available_width(), heat_height), |ui| {
        heat_map_ui(ui, doc, &mut action);
    });
    ui.separator();
    curves_ui(ui, doc);
    action
}

fn controls_ui(ui: &mut Ui, doc: &mut RunDoc, action: &mut Option<RunAction>) {
    ui.horizontal_wrapped(|ui| {
        ui.label("Cells:");
        ui.selectable_value(&mut doc.metric, Metric::PeakAllocated, "peak allocated");
        ui.selectable_value(&mut doc.metric, Metric::PeakReserved, "peak reserved");
        ui.separator();
        ui.label("Rows by:");
        ui.selectable_value(&mut doc.sort, SortBy::Rank, "rank");
        ui.selectable_value(&mut doc.sort, SortBy::Peak, "peak at the dump shown");
        ui.separator();
        let dumps = doc.dumps.clone();
        let shown = dumps
            .get(doc.dump)
            .map_or_else(String::new, |&(i, exit)| dump_words(i, exit));
        egui::ComboBox::new(("run-dump", &doc.name), "curves and sorting")
            .selected_text(shown)
            .show_ui(ui, |ui| {
                for (k, &(i, exit)) in dumps.iter().enumerate() {
                    ui.selectable_value(&mut doc.dump, k, dump_words(i, exit));
                }
            });
        if let Some(file) = doc.picked {
            ui.separator();
            ui.label(doc.run.files[file].name.clone());
            if ui.button("Open").clicked() {
                *action = Some(RunAction::Open(file));
            }
            let median = doc.median_of(file).filter(|&m| m != file);
            if ui
                .add_enabled(
                    median.is_some(),
                    egui::Button::new("Compare with the median rank"),
                )
                .on_disabled_hover_text(
                    "this file is the median rank's, or its dump has no other rank",
                )
                .clicked()
                && let Some(median) = median
            {
                *action = Some(RunAction::Compare { median, file });
            }
        }
    });
}

/// Rows: ranks (files with no rank last, one row each); columns: dumps.
fn heat_map_ui(ui: &mut Ui, doc: &mut RunDoc, action: &mut Option<RunAction>) {
    let Some(summaries) = doc.summaries.as_ref() else {
        return;
    };
    let dumps = doc.dumps.clone();
    let mut rows: Vec<Option<u32>> = doc.ranks.iter().copied().map(Some).collect();
    let unranked: Vec<usize> = (0..doc.run.files.len())
        .filter(|&i| doc.run.files[i].rank.is_none())
        .collect();
    if !unranked.is_empty() {
        rows.push(None);
    }
    if doc.sort == SortBy::Peak
        && let Some(&dump) = dumps.get(doc.dump)
    {
        let value = |rank: &Option<u32>| {
            doc.file_at(*rank, dump)
                .map_or(0, |i| doc.metric.of(&summaries[i]))
        };
        rows.sort_by_key(|r| std::cmp::Reverse(value(r)));
    }
    let max = summaries
        .iter()
        .map(|s| doc.metric.of(s))
        .max()
        .unwrap_or(0)
        .max(1);
    let min = summaries
        .iter()
        .map(|s| doc.metric.of(s))
        .min()
        .unwrap_or(0);
    // The header: one column per dump.
    ui.horizontal(|ui| {
        ui.add_space(RANK_COLUMN_WIDTH);
        for &(i, exit) in &dumps {
            let text = match (i, exit) {
                (Some(i), false) => format!("iter {i}"),
                (Some(i), true) => format!("iter {i} exit"),
                (None, true) => "exit".to_string(),
                (None, false) => "no iteration".to_string(),
            };
            ui.add_sized(
                vec2(CELL_WIDTH, CELL_HEIGHT),
                egui::Label::new(egui::RichText::new(text).strong()).truncate(),
            );
        }
    });
    let mut picked = None;
    egui::ScrollArea::both()
        .id_salt(("run-heat", &doc.name))
        .auto_shrink([false, false])
        .show_rows(ui, CELL_HEIGHT + 2.0, rows.len(), |ui, range| {
            for &rank in &rows[range] {
                ui.horizontal(|ui| {
                    let label = rank.map_or_else(|| "no rank".to_string(), |r| format!("rank {r}"));
                    ui.add_sized(
                        vec2(RANK_COLUMN_WIDTH, CELL_HEIGHT),
                        egui::Label::new(label),
                    );
                    for &dump in &dumps {
                        let file = doc.file_at(rank, dump);
                        let (rect, response) =
                            ui.allocate_exact_size(vec2(CELL_WIDTH, CELL_HEIGHT), Sense::click());
                        let Some(file) = file else {
                            ui.painter().rect_stroke(
                                rect.shrink(1.0),
                                2.0,
                                Stroke::new(1.0, palette::GRID),
                                egui::StrokeKind::Inside,
                            );
                            continue;
                        };
                        cell(
                            ui,
                            rect,
                            &summaries[file],
                            doc.metric,
                            (min, max),
                            doc.picked == Some(file),
                        );
                        let response =
                            response.on_hover_ui(|ui| cell_tooltip(ui, &summaries[file]));
                        if response.clicked() {
                            picked = Some(file);
                        }
                        if response.double_clicked() {
                            *action = Some(RunAction::Open(file));
                        }
                    }
                });
            }
        });
    if let Some(file) = picked {
        doc.picked = Some(file);
        let at = &doc.run.files[file];
        if let Some(k) = dumps.iter().position(|&d| d == (at.iteration, at.exit)) {
            doc.dump = k;
        }
    }
}

fn cell(
    ui: &Ui,
    rect: Rect,
    s: &FileSummary,
    metric: Metric,
    (min, max): (u64, u64),
    picked: bool,
) {
    let painter = ui.painter();
    let rect = rect.shrink(1.0);
    if s.error.is_some() {
        painter.rect_filled(rect, 2.0, palette::GRID);
        painter.text(
            rect.center(),
            Align2::CENTER_CENTER,
            "unreadable",
            FontId::proportional(11.0),
            palette::ERROR_TEXT,
        );
        return;
    }
    let value = metric.of(s);
    let fraction = if max > min {
        (value - min) as f32 / (max - min) as f32
    } else {
        0.0
    };
    painter.rect_filled(rect, 2.0, palette::heat(fraction));
    let text = if s.oom_events > 0 {
        format!("OOM {}", format_bytes(value as i64))
    } else {
        format_bytes(value as i64)
    };
    painter.text(
        rect.center(),
        Align2::CENTER_CENTER,
        text,
        FontId::proportional(11.0),
        palette::heat_text(fraction),
    );
    if s.oom_events > 0 {
        painter.rect_stroke(
            rect,
            2.0,
            Stroke::new(2.0, palette::OOM),
            egui::StrokeKind::Inside,
        );
    }
    if picked {
        painter.rect_stroke(
            rect.expand(1.0),
            2.0,
            Stroke::new(2.0, palette::SELECTION),
            egui::StrokeKind::Outside,
        );
    }
}

fn cell_tooltip(ui: &mut Ui, s: &FileSummary) {
    ui.strong(&s.file.name);
    if let Some(e) = &s.error {
        ui.colored_label(palette::ERROR_TEXT, e);
        return;
    }
    ui.label(format!(
        "peak allocated {} · peak reserved {} · {} events{}",
        format_bytes(s.peak_allocated_bytes as i64),
        format_bytes(s.peak_reserved_bytes as i64),
        s.events,
        if s.oom_events > 0 {
            format!(" · {} OOM", s.oom_events)
        } else {
            String::new()
        }
    ));
    if !s.top_sites.is_empty() {
        ui.label("At its peak:");
        for site in &s.top_sites {
            ui.label(format!(
                "  {} — {}",
                format_bytes(site.bytes as i64),
                site.site
            ));
        }
    }
    ui.weak("click: pick · double-click: open");
}

/// The ranks' allocated curves at the dump shown, each over its own trace (0 to 1).
fn curves_ui(ui: &mut Ui, doc: &RunDoc) {
    let Some(summaries) = doc.summaries.as_ref() else {
        return;
    };
    let Some(&dump) = doc.dumps.get(doc.dump) else {
        return;
    };
    let mut files: Vec<usize> = (0..summaries.len())
        .filter(|&i| {
            (doc.run.files[i].iteration, doc.run.files[i].exit) == dump
                && !summaries[i].curve.is_empty()
        })
        .collect();
    let total = files.len();
    if files.len() > MAX_CURVES {
        files.sort_by_key(|&i| summaries[i].peak_allocated_bytes);
        let mut kept = vec![files[(files.len() - 1) / 2], files[files.len() - 1]];
        kept.extend(doc.picked.filter(|p| files.contains(p)));
        kept.sort_unstable();
        kept.dedup();
        files = kept;
    }
    ui.label(format!(
        "Allocated over each trace at {} ({}){}",
        dump_words(dump.0, dump.1),
        if total > MAX_CURVES {
            format!("{total} ranks: the median, the heaviest and the picked one")
        } else {
            format!("{total} ranks")
        },
        if doc.picked.is_some() {
            " · the picked rank is drawn thick"
        } else {
            ""
        }
    ));
    let plot = crate::views::axes::drawing_only(egui_plot::Plot::new(("run-curves", &doc.name)))
        .height(ui.available_height().max(60.0))
        .x_axis_formatter(|mark, _| format!("{:.0} %", mark.value * 100.0))
        .y_axis_formatter(|mark, _| format_bytes(mark.value as i64))
        .y_grid_spacer(|input| crate::views::axes::byte_grid(&input, false))
        .y_axis_min_width(56.0)
        .grid_color(palette::PLOT_GRID)
        .legend(egui_plot::Legend::default().position(egui_plot::Corner::RightTop));
    plot.show(ui, |plot| {
        for (k, &i) in files.iter().enumerate() {
            let curve = &summaries[i].curve;
            let n = (curve.len().max(2) - 1) as f64;
            let points: Vec<[f64; 2]> = curve
                .iter()
                .enumerate()
                .map(|(x, &y)| [x as f64 / n, y as f64])
                .collect();
            let name = doc.run.files[i]
                .rank
                .map_or_else(|| doc.run.files[i].name.clone(), |r| format!("rank {r}"));
            let mut line = egui_plot::Line::new(name, points).color(palette::series_color(k));
            if doc.picked == Some(i) {
                line = line.width(3.0);
            }
            plot.line(line);
        }
    });
}

fn findings_ui(ui: &mut Ui, doc: &mut RunDoc, action: &mut Option<RunAction>) {
    ui.heading("The run's findings");
    if doc.findings.is_empty() {
        ui.label("No findings.");
    }
    egui::ScrollArea::vertical()
        .id_salt(("run-findings-list", &doc.name))
        .auto_shrink([false, false])
        .show(ui, |ui| {
            for f in &doc.findings {
                let color = match f.severity {
                    Severity::Error => palette::ERROR_TEXT,
                    Severity::Warning => palette::WARNING_TEXT,
                    Severity::Info => palette::AXIS,
                };
                let header = ui.add(
                    egui::Label::new(egui::RichText::new(&f.title).color(color).strong())
                        .sense(Sense::click()),
                );
                ui.weak(&f.scope);
                if header.on_hover_text("click: pick its first file").clicked()
                    && let Some(&first) = f.files.first()
                {
                    doc.picked = Some(first);
                }
                ui.label(&f.summary);
                for line in &f.evidence {
                    ui.weak(format!("· {line}"));
                }
                if let Some(&first) = f.files.first()
                    && ui.small_button("Open its file").clicked()
                {
                    *action = Some(RunAction::Open(first));
                }
                ui.separator();
            }
        });
}

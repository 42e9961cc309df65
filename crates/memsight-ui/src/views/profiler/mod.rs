//! Profiler data in the app: memory curves per rank (side by side or overlaid, one time axis),
//! the operator table, the CANN components, the static-graph lifetimes and a rank comparison.
//!
//! Curves are drawn one stroke per pixel column from each series' min / max envelope
//! (`memsight_core::profiler::envelope`), so millions of samples cost what the window's width
//! costs; zoomed in far enough, the samples themselves are drawn as steps.

use std::collections::BTreeSet;
use std::sync::Arc;

use egui::{Rect, Ui};
use memsight_core::detect::Finding;
use memsight_core::profiler::envelope::Envelope;
use memsight_core::profiler::{APP_COMPONENT, Curve, OPERATOR_COMPONENT, ProfilerRun, Rank};
use rayon::prelude::*;

use crate::palette;
use crate::views::findings::FindingsState;

mod components;
mod curves;
mod operators;
mod ranks;
mod static_graph;

pub use curves::curves_ui;

/// Room under a plot for the time axis' labels.
const AXIS_HEIGHT: f32 = 18.0;
/// Zoomed in so far that a plot shows fewer samples than this many per pixel: draw the samples.
const RAW_SAMPLES_PER_PIXEL: f64 = 2.0;

/// Which value of a curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    Allocated,
    Reserved,
    Active,
}

impl Field {
    fn values(self, curve: &Curve) -> &[f64] {
        match self {
            Self::Allocated => &curve.allocated_bytes,
            Self::Reserved => &curve.reserved_bytes,
            Self::Active => &curve.active_bytes,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Allocated => "allocated",
            Self::Reserved => "reserved",
            Self::Active => "active",
        }
    }
}

/// Where a series' samples are: a `memory_record` curve or an `npu_module_mem` one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    pub module: bool,
    pub component: String,
    pub field: Field,
}

/// A run with what the views precompute once (off the UI thread).
pub struct PreparedProfiler {
    pub run: ProfilerRun,
    pub findings: Vec<Finding>,
    /// Earliest and latest sample over every rank: the shared time axis.
    pub t0_us: f64,
    pub t1_us: f64,
    /// Per rank: its first and last sample.
    pub rank_spans_us: Vec<(f64, f64)>,
    /// Whether the ranks' spans overlap: one run on one clock, so absolute times line up.
    pub same_clock: bool,
    /// Per rank: the envelope of every series.
    envelopes: Vec<Vec<(SeriesKey, Envelope)>>,
    /// Per rank: the operator curve's reserved − allocated bytes (the fragmentation track), and
    /// their envelope; `None` where the rank records either not at all.
    unused: Vec<Option<(Vec<f64>, Envelope)>>,
    /// Per rank: the figures the tables show, computed once (a peak scans every sample).
    pub summaries: Vec<RankSummary>,
}

/// One rank's figures for the rank comparison and the components table.
#[derive(Clone, Debug, Default)]
pub struct RankSummary {
    pub samples: usize,
    pub peak_operator_allocated: Option<f64>,
    pub peak_operator_reserved: Option<f64>,
    pub peak_app_reserved: Option<f64>,
    /// CANN components that held memory, with their peak reserved bytes, largest first.
    pub module_peaks: Vec<(String, f64)>,
    /// Components that held nothing.
    pub idle_modules: usize,
}

impl RankSummary {
    fn new(rank: &Rank) -> Self {
        let peak =
            |c: &str, f: fn(&Curve) -> Option<(f64, usize)>| rank.curve(c).and_then(f).map(|p| p.0);
        let mut module_peaks: Vec<(String, f64)> = rank
            .modules
            .iter()
            .filter_map(|c| Some((c.component.clone(), c.peak_reserved()?.0)))
            .filter(|&(_, p)| p > 0.0)
            .collect();
        module_peaks.sort_by(|a, b| b.1.total_cmp(&a.1));
        Self {
            samples: rank.curves.iter().map(Curve::len).sum(),
            peak_operator_allocated: peak(OPERATOR_COMPONENT, Curve::peak_allocated),
            peak_operator_reserved: peak(OPERATOR_COMPONENT, Curve::peak_reserved),
            peak_app_reserved: peak(APP_COMPONENT, Curve::peak_reserved),
            idle_modules: rank.modules.len() - module_peaks.len(),
            module_peaks,
        }
    }
}

impl PreparedProfiler {
    pub fn new(run: ProfilerRun) -> Self {
        let findings = memsight_core::profiler::detect::analyze(&run);
        let rank_spans_us: Vec<(f64, f64)> = run
            .ranks
            .iter()
            .map(|r| r.time_span_us().unwrap_or((0.0, 1.0)))
            .collect();
        let starts = rank_spans_us.iter().map(|s| s.0);
        let ends = rank_spans_us.iter().map(|s| s.1);
        let (t0_us, latest_start) = starts
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
                (lo.min(t), hi.max(t))
            });
        let (earliest_end, t1_us) = ends.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
            (lo.min(t), hi.max(t))
        });
        let (t0_us, t1_us) = if t0_us <= t1_us {
            (t0_us, t1_us)
        } else {
            (0.0, 1.0)
        };
        let same_clock = latest_start <= earliest_end;
        // Every series of every rank, its envelope built on rayon (off the UI thread already:
        // this runs in the load job).
        let envelopes = run
            .ranks
            .par_iter()
            .map(|rank| {
                let series: Vec<(bool, &Curve, Field)> =
                    [(false, &rank.curves), (true, &rank.modules)]
                        .into_iter()
                        .flat_map(|(module, curves)| {
                            curves.iter().flat_map(move |curve| {
                                [Field::Allocated, Field::Reserved, Field::Active]
                                    .into_iter()
                                    .map(move |field| (module, curve, field))
                            })
                        })
                        .filter(|(_, curve, field)| field.values(curve).iter().any(|v| !v.is_nan()))
                        .collect();
                series
                    .into_par_iter()
                    .map(|(module, curve, field)| {
                        let key = SeriesKey {
                            module,
                            component: curve.component.clone(),
                            field,
                        };
                        (key, Envelope::new(field.values(curve)))
                    })
                    .collect()
            })
            .collect();
        let summaries = run.ranks.par_iter().map(RankSummary::new).collect();
        let unused = run
            .ranks
            .par_iter()
            .map(|rank| {
                let curve = rank.curve(OPERATOR_COMPONENT)?;
                let (reserved, allocated) = (
                    Field::Reserved.values(curve),
                    Field::Allocated.values(curve),
                );
                let values: Vec<f64> = reserved
                    .iter()
                    .zip(allocated)
                    .map(|(&r, &a)| {
                        // Unrecorded stays a gap (NaN), never 0.
                        if r.is_nan() || a.is_nan() {
                            f64::NAN
                        } else {
                            (r - a).max(0.0)
                        }
                    })
                    .collect();
                values.iter().any(|v| !v.is_nan()).then(|| {
                    let envelope = Envelope::new(&values);
                    (values, envelope)
                })
            })
            .collect();
        Self {
            run,
            findings,
            t0_us,
            t1_us,
            rank_spans_us,
            same_clock,
            envelopes,
            unused,
            summaries,
        }
    }

    /// The operator curve of `rank` with its reserved − allocated bytes, and their envelope.
    pub fn unused_series(&self, rank: usize) -> Option<(&Curve, &[f64], &Envelope)> {
        let curve = self.run.ranks.get(rank)?.curve(OPERATOR_COMPONENT)?;
        let (values, envelope) = self.unused.get(rank)?.as_ref()?;
        Some((curve, values, envelope))
    }

    /// Operator row `row` of rank `rank`.
    pub fn operator(
        &self,
        rank: usize,
        row: usize,
    ) -> Option<&memsight_core::profiler::OperatorRow> {
        self.run.ranks.get(rank)?.operators.get(row)
    }

    fn series(&self, rank: usize, key: &SeriesKey) -> Option<(&Curve, &[f64], &Envelope)> {
        let r = self.run.ranks.get(rank)?;
        let curves = if key.module { &r.modules } else { &r.curves };
        let curve = curves.iter().find(|c| c.component == key.component)?;
        let env = self.envelopes[rank]
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, e)| e)?;
        Some((curve, key.field.values(curve), env))
    }
}

/// Which curves are on.
#[derive(Clone, Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one switch per curve the toolbar offers"
)]
pub struct Shown {
    pub allocated: bool,
    pub reserved: bool,
    pub active: bool,
    pub app: bool,
    /// The fragmentation track: operator reserved − allocated.
    pub unused: bool,
    /// Other `memory_record` components (PTA, GE, WORKSPACE) and `npu_module_mem` components.
    pub extra: BTreeSet<SeriesKey>,
}

impl Default for Shown {
    fn default() -> Self {
        Self {
            allocated: true,
            reserved: true,
            active: true,
            app: true,
            unused: true,
            extra: BTreeSet::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Tab {
    #[default]
    Operators,
    Components,
    StaticGraph,
    Ranks,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortBy {
    #[default]
    Size,
    Duration,
    Time,
}

/// The operator table's settings and its rows in display order (rebuilt when they change).
#[derive(Default)]
pub struct TableState {
    pub sort: SortBy,
    pub ascending: bool,
    pub filter: String,
    /// Only rows allocated or released inside the picked range (Ctrl+drag), or the visible one.
    pub only_visible: bool,
    /// Rows matching the name filter, sorted; and what they were built from.
    sorted: Vec<(usize, usize)>,
    sorted_key: Option<(SortBy, bool, String)>,
    /// `sorted` limited to the range when `only_visible`; and the range it was built for.
    rows: Vec<(usize, usize)>,
    key: Option<(bool, u64, u64, bool)>,
}

/// One open profiler run.
pub struct ProfilerDoc {
    pub name: String,
    pub data: Arc<PreparedProfiler>,
    /// Visible time range, µs since `t0_us`; `None`: all.
    pub x_range: Option<(f64, f64)>,
    pub shown: Shown,
    /// Several ranks in one plot instead of one plot each.
    pub overlay: bool,
    /// Each rank's time counts from its own first sample (ranks recorded at different times);
    /// otherwise all count from the run's first sample.
    pub align_starts: bool,
    pub tab: Tab,
    pub table: TableState,
    /// The operator row whose allocation and release are marked on the curves: (rank, row).
    pub marked: Option<(usize, usize)>,
    pub findings: FindingsState,
    /// Where the curves were drawn last frame (for "export chart").
    pub chart_rect: Option<Rect>,
    /// A time range picked with Ctrl+drag (µs on the axis), for the operator table.
    pub range: Option<(f64, f64)>,
    /// Where a Ctrl+drag started.
    range_start: Option<f64>,
}

impl ProfilerDoc {
    pub fn new(name: String, data: PreparedProfiler) -> Self {
        Self {
            name,
            align_starts: !data.same_clock,
            data: Arc::new(data),
            x_range: None,
            shown: Shown::default(),
            overlay: false,
            tab: Tab::default(),
            table: TableState::default(),
            marked: None,
            findings: FindingsState::default(),
            chart_rect: None,
            range: None,
            range_start: None,
        }
    }

    /// Where rank `rank`'s time axis starts (epoch µs).
    pub fn offset_us(&self, rank: usize) -> f64 {
        if self.align_starts {
            self.data
                .rank_spans_us
                .get(rank)
                .map_or(self.data.t0_us, |s| s.0)
        } else {
            self.data.t0_us
        }
    }

    /// The whole time axis (µs from the offset): every rank's samples.
    pub fn full_range(&self) -> (f64, f64) {
        let end = (0..self.data.rank_spans_us.len())
            .map(|r| self.data.rank_spans_us[r].1 - self.offset_us(r))
            .fold(1.0, f64::max);
        (0.0, end)
    }

    pub fn view(&self) -> (f64, f64) {
        self.x_range.unwrap_or_else(|| self.full_range())
    }

    /// Marks operator row `row` of `rank` on the curves, panning them to its allocation when it
    /// is out of view (the zoom stays).
    pub fn mark(&mut self, rank: usize, row: usize) {
        self.marked = Some((rank, row));
        let Some(o) = self.data.operator(rank, row) else {
            return;
        };
        let at = if o.alloc_us.is_nan() {
            o.release_us
        } else {
            o.alloc_us
        } - self.offset_us(rank);
        let (x0, x1) = self.view();
        if !at.is_nan() && (at < x0 || at > x1) {
            let half = (x1 - x0) / 2.0;
            self.x_range = Some(clamp_view((at - half, at + half), self.full_range()));
        }
    }

    /// Shows finding `index`: zooms to its time span, marks its operator row when it has one.
    pub fn show_finding(&mut self, index: usize) {
        let Some(f) = self.data.findings.get(index) else {
            return;
        };
        let rank = f
            .rank
            .as_ref()
            .and_then(|name| self.data.run.ranks.iter().position(|r| &r.name == name));
        if let Some((a, b)) = f.time_range_us {
            let offset = self.offset_us(rank.unwrap_or(0));
            let (a, b) = (a - offset, b - offset);
            // With the time around it: at least a twentieth of the run (a peak is one sample;
            // zoomed to it alone, every curve is a flat line).
            let full = self.full_range();
            let pad = ((b - a) * 0.25).max(1_000.0).max((full.1 - full.0) / 40.0);
            self.x_range = Some(clamp_view((a - pad, b + pad), full));
        }
        // The plan's evidence is the static graph's chart.
        let static_plan = f.kind == memsight_core::detect::FindingKind::StaticGraph;
        if f.kind == memsight_core::detect::FindingKind::OutlierAllocation
            && let (Some(rank), Some(row)) = (rank, f.focus_event)
        {
            self.mark(rank, row as usize);
        }
        if static_plan {
            self.tab = Tab::StaticGraph;
        }
    }
}

fn clamp_view((a, b): (f64, f64), (lo, hi): (f64, f64)) -> (f64, f64) {
    let width = (b - a).clamp(1.0, hi - lo);
    let a = a.clamp(lo, hi - width);
    (a, a + width)
}

/// The bar above the curves: which curves, overlay, zoom reset.
pub fn toolbar_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    let data = Arc::clone(&doc.data);
    ui.horizontal_wrapped(|ui| {
        ui.label(format!("{} rank(s)", data.run.ranks.len()));
        let warnings: Vec<&memsight_core::profiler::ProfilerWarning> =
            data.run.ranks.iter().flat_map(|r| &r.warnings).collect();
        let dropped: u64 = data.run.ranks.iter().map(|r| r.warnings_dropped).sum();
        if !warnings.is_empty() {
            ui.label(
                egui::RichText::new(crate::count(warnings.len() + dropped as usize, "warning"))
                    .color(palette::WARNING_TEXT),
            )
            .on_hover_ui(|ui| {
                for w in warnings.iter().take(20) {
                    let line = w.line.map_or_else(String::new, |l| format!(":{l}"));
                    ui.label(format!("{}{line}: {}", w.file.display(), w.message));
                }
                if warnings.len() > 20 || dropped > 0 {
                    ui.weak(format!("… and {} more", warnings.len().saturating_sub(20) as u64 + dropped));
                }
            });
        }
        ui.separator();
        ui.checkbox(&mut doc.shown.allocated, "operator allocated");
        ui.checkbox(&mut doc.shown.reserved, "operator reserved");
        ui.checkbox(&mut doc.shown.active, "operator active");
        ui.checkbox(&mut doc.shown.app, "APP reserved");
        ui.checkbox(&mut doc.shown.unused, "reserved − allocated")
            .on_hover_text(
                "the operator pool's cached, unallocated bytes: where it stays high, memory is \
                 reserved in pieces the requests do not fit (fragmentation) or kept by the cache",
            );
        // The other memory_record components, on demand.
        let others: BTreeSet<String> = data
            .run
            .ranks
            .iter()
            .flat_map(|r| &r.curves)
            .map(|c| c.component.clone())
            .filter(|c| c != OPERATOR_COMPONENT && c != APP_COMPONENT)
            .collect();
        for component in others {
            let label = format!("{component} reserved");
            series_checkbox(ui, &mut doc.shown, false, component, &label);
        }
        ui.separator();
        if data.run.ranks.len() > 1 {
            ui.checkbox(&mut doc.overlay, "overlay ranks");
            ui.checkbox(&mut doc.align_starts, "each rank from its own start")
                .on_hover_text(if data.same_clock {
                    "the ranks overlap in time: off, they share one clock"
                } else {
                    "the ranks were recorded at different times, so each counts from its first sample"
                });
        }
        if ui.button("reset zoom").clicked() {
            doc.x_range = None;
        }
        if let Some((a, b)) = doc.range {
            ui.label(
                egui::RichText::new(format!("range {:.6} – {:.6} s", a / 1e6, b / 1e6))
                    .color(palette::RANGE),
            );
            if ui.small_button("clear range").clicked() {
                doc.range = None;
            }
        }
        let (x0, x1) = doc.view();
        ui.weak(format!(
            "showing {:.3} – {:.3} s (wheel: zoom, drag: pan, Ctrl+drag: pick a range, double-click: all)",
            x0 / 1e6,
            x1 / 1e6
        ));
    });
}

/// A checkbox that adds the reserved curve of `component` (of `npu_module_mem.csv` when `module`)
/// to the plots or takes it away.
pub(crate) fn series_checkbox(
    ui: &mut Ui,
    shown: &mut Shown,
    module: bool,
    component: String,
    label: &str,
) -> egui::Response {
    let key = SeriesKey {
        module,
        component,
        field: Field::Reserved,
    };
    let mut on = shown.extra.contains(&key);
    let response = ui.checkbox(&mut on, label);
    if response.changed() {
        if on {
            shown.extra.insert(key);
        } else {
            shown.extra.remove(&key);
        }
    }
    response
}

/// The tabs under the curves.
pub fn tables_ui(ui: &mut Ui, doc: &mut ProfilerDoc) {
    ui.horizontal(|ui| {
        for (tab, label) in [
            (Tab::Operators, "Operators"),
            (Tab::Components, "Components"),
            (Tab::StaticGraph, "Static graph"),
            (Tab::Ranks, "Ranks"),
        ] {
            ui.selectable_value(&mut doc.tab, tab, label);
        }
    });
    ui.separator();
    match doc.tab {
        Tab::Operators => operators::operators_ui(ui, doc),
        Tab::Components => components::components_ui(ui, doc),
        Tab::StaticGraph => static_graph::static_graph_ui(ui, doc),
        Tab::Ranks => ranks::ranks_ui(ui, doc),
    }
}

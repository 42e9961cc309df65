//! The What-if panel: the open snapshot's requests replayed through the allocator model
//! (`memsight_core::whatif`) under settings the user changes, on a background thread. It shows
//! recorded against predicted, hands the predicted reserved curve to the lifecycle chart (drawn
//! dashed over the recorded one) and, on request, the predicted pool at the selected event to the
//! pool chart. A setting changed while a replay runs starts another; only the newest is shown, so
//! the window never waits.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError, channel};

use egui::{RichText, Ui};
use memsight_core::replay::PoolState;
use memsight_core::units::format_bytes;
use memsight_core::whatif::{self, Divisions, Outcome, Prediction, Recording, Settings};

use crate::palette;
use crate::prepared::Prepared;

const GIB: f64 = (1u64 << 30) as f64;
/// The choices of `roundup_power2_divisions` offered (0: off).
const DIVISION_CHOICES: [u32; 5] = [0, 2, 4, 8, 16];

/// A finished replay.
pub struct WhatIfResult {
    pub device: usize,
    pub settings: Settings,
    pub recorded: Outcome,
    pub prediction: Arc<Prediction>,
}

/// The predicted pool after one event.
pub struct PredictedPool {
    pub settings: Settings,
    pub event: Option<u32>,
    pub pool: Arc<PoolState>,
}

/// A predicted pool on its way: for which settings and event.
type PoolJob = ((Settings, Option<u32>), Receiver<PoolState>);

/// The panel's state, one per open file.
#[derive(Default)]
pub struct WhatIfState {
    pub open: bool,
    /// The settings being tried, and the device they are for (`None`: not yet read from it).
    settings: Option<(usize, Settings)>,
    /// The settings the file was recorded under, for that device.
    recorded_settings: Settings,
    /// The allocator the replay follows for that device, and why (core `allocator_of`).
    allocator: String,
    pub show_predicted_pool: bool,
    result: Option<Arc<WhatIfResult>>,
    job: Option<(Settings, Receiver<WhatIfResult>)>,
    pool_job: Option<PoolJob>,
    pool: Option<Arc<PredictedPool>>,
    /// A replay thread that stopped without an answer (a bug), for which settings: said in the
    /// panel, not waited on, not retried until the settings change.
    failed: Option<(Settings, String)>,
    sweep: Option<Sweep>,
    /// The last sweep's thread stopped without an answer.
    sweep_failed: bool,
    /// What just landed and is to be scrolled into view once (the panel scrolls, and the
    /// answer to a click may lie below its fold).
    reveal: Option<Reveal>,
}

/// An answer to scroll into view once.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reveal {
    Outcome,
    Sweep,
}

/// The common settings tried one by one and in pairs (core `whatif::sweep`), best first.
struct Sweep {
    device: usize,
    base: Settings,
    running: Option<Receiver<Vec<(Settings, Outcome)>>>,
    ranked: Vec<(Settings, Outcome)>,
}

impl WhatIfState {
    /// The newest finished replay, if it is of the settings being tried on `device`.
    pub fn current(&self, device: usize) -> Option<&Arc<WhatIfResult>> {
        let (d, settings) = self.settings.as_ref()?;
        self.result
            .as_ref()
            .filter(|r| r.device == device && *d == device && r.settings == *settings)
    }

    /// Whether a replay is running.
    pub fn busy(&self) -> bool {
        self.job.is_some()
            || self.pool_job.is_some()
            || self.sweep.as_ref().is_some_and(|s| s.running.is_some())
    }

    /// The settings the sweep ranked, best first, with what each predicts (tests and tools).
    pub fn swept(&self) -> Option<&[(Settings, Outcome)]> {
        self.sweep
            .as_ref()
            .filter(|s| s.running.is_none())
            .map(|s| s.ranked.as_slice())
    }

    /// The settings being tried, if read from the file yet.
    pub fn settings(&self) -> Option<Settings> {
        self.settings.map(|(_, s)| s)
    }

    fn poll_sweep(&mut self) {
        let Some(sweep) = &mut self.sweep else {
            return;
        };
        let Some(rx) = &sweep.running else {
            return;
        };
        match rx.try_recv() {
            Ok(ranked) => {
                sweep.ranked = ranked;
                sweep.running = None;
                self.reveal = Some(Reveal::Sweep);
            }
            Err(TryRecvError::Disconnected) => {
                self.sweep = None;
                self.sweep_failed = true;
            }
            Err(TryRecvError::Empty) => {}
        }
    }

    fn start_sweep(&mut self, ctx: &egui::Context, data: &Arc<Prepared>, device: usize) {
        let Some((_, base)) = self.settings else {
            return;
        };
        let (send, rx) = channel();
        let (data, ctx) = (Arc::clone(data), ctx.clone());
        std::thread::spawn(move || {
            let recording = Recording::of(&data.loaded, device);
            let _ = send.send(whatif::sweep(&recording, &base));
            ctx.request_repaint();
        });
        self.sweep_failed = false;
        self.sweep = Some(Sweep {
            device,
            base,
            running: Some(rx),
            ranked: Vec::new(),
        });
    }

    /// The predicted pool after `event`, when it is ready for the settings being tried.
    pub fn predicted_pool(&self, device: usize, event: Option<u32>) -> Option<Arc<PoolState>> {
        let result = self.current(device)?;
        self.pool
            .as_ref()
            .filter(|p| {
                self.show_predicted_pool && p.settings == result.settings && p.event == event
            })
            .map(|p| Arc::clone(&p.pool))
    }

    /// Sets the settings tried on `device` (tests and tools; the panel's controls do the same).
    pub fn set_settings(&mut self, device: usize, settings: Settings) {
        self.settings = Some((device, settings));
    }

    /// Takes finished replays and starts the ones the settings and selection call for.
    pub fn poll(
        &mut self,
        ctx: &egui::Context,
        data: &Arc<Prepared>,
        device: usize,
        event: Option<u32>,
    ) {
        if self.settings.as_ref().is_none_or(|(d, _)| *d != device) {
            // Another device: nothing computed for the last one carries over (results, pool,
            // sweep, failures); replies still on their way for it are dropped with their
            // receivers.
            *self = WhatIfState {
                open: self.open,
                show_predicted_pool: self.show_predicted_pool,
                ..WhatIfState::default()
            };
            let recording = Recording::of(&data.loaded, device);
            self.recorded_settings = Settings::recorded(&recording);
            self.allocator = memsight_core::whatif::allocator_of(&recording).describe();
            self.settings = Some((device, self.recorded_settings));
        }
        let Some((_, settings)) = self.settings else {
            return;
        };
        self.poll_sweep();
        if let Some((tried, rx)) = &self.job {
            match rx.try_recv() {
                Ok(result) => {
                    self.result = Some(Arc::new(result));
                    self.job = None;
                    self.reveal = Some(Reveal::Outcome);
                }
                Err(TryRecvError::Disconnected) => {
                    let why = format!("the replay under {} stopped unexpectedly", tried.describe());
                    self.failed = Some((*tried, why));
                    self.job = None;
                }
                Err(TryRecvError::Empty) => {}
            }
        }
        if let Some(((tried, _), rx)) = &self.pool_job {
            match rx.try_recv() {
                Ok(pool) => {
                    let ((settings, event), _) = self.pool_job.take().expect("checked above");
                    self.pool = Some(Arc::new(PredictedPool {
                        settings,
                        event,
                        pool: Arc::new(pool),
                    }));
                }
                Err(TryRecvError::Disconnected) => {
                    let why = "the predicted pool's replay stopped unexpectedly".to_string();
                    self.failed = Some((*tried, why));
                    self.pool_job = None;
                    self.show_predicted_pool = false;
                }
                Err(TryRecvError::Empty) => {}
            }
        }
        let refused = settings
            .refused_by(&Recording::of(&data.loaded, device))
            .is_some();
        // One replay in flight: settings changed meanwhile (a dragged slider) are replayed when
        // it is done, the newest only.
        let wanted = self.current(device).is_none()
            && self.failed.as_ref().is_none_or(|(s, _)| *s != settings)
            && self.job.is_none();
        if wanted && !refused {
            self.job = Some((settings, start_replay(ctx, data, device, settings)));
        }
        let pool_key = (settings, event);
        if self.show_predicted_pool
            && self.current(device).is_some()
            && self
                .pool
                .as_ref()
                .is_none_or(|p| (p.settings, p.event) != pool_key)
            && self.pool_job.is_none()
        {
            let (send, rx) = channel();
            let (data, ctx) = (Arc::clone(data), ctx.clone());
            std::thread::spawn(move || {
                let recording = Recording::of(&data.loaded, device);
                let _ = send.send(whatif::predicted_pool_after(&recording, &settings, event));
                ctx.request_repaint();
            });
            self.pool_job = Some((pool_key, rx));
        }
    }
}

fn start_replay(
    ctx: &egui::Context,
    data: &Arc<Prepared>,
    device: usize,
    settings: Settings,
) -> Receiver<WhatIfResult> {
    let (send, rx) = channel();
    let (data, ctx) = (Arc::clone(data), ctx.clone());
    std::thread::spawn(move || {
        let recording = Recording::of(&data.loaded, device);
        let result = WhatIfResult {
            device,
            settings,
            recorded: whatif::recorded(&recording),
            prediction: Arc::new(whatif::predict_curve(&recording, &settings)),
        };
        // The window may have closed meanwhile: nobody to tell.
        let _ = send.send(result);
        ctx.request_repaint();
    });
    rx
}

/// The panel's content: the settings, then recorded against predicted.
pub fn whatif_ui(ui: &mut Ui, data: &Arc<Prepared>, device: usize, state: &mut WhatIfState) {
    let Some((_, mut settings)) = state.settings else {
        ui.spinner();
        return;
    };
    sentence(
        ui,
        RichText::new(format!("Replayed as {}", state.allocator)).weak(),
    );
    settings_ui(ui, &mut settings, &state.recorded_settings);
    let refused = settings.refused_by(&Recording::of(&data.loaded, device));
    if let Some(why) = &refused {
        ui.colored_label(palette::ERROR_TEXT, why);
    }
    state.settings = Some((device, settings));
    ui.checkbox(
        &mut state.show_predicted_pool,
        "Pool chart: the predicted pool at the selected event",
    );
    ui.separator();
    let as_recorded = settings == state.recorded_settings;
    let failed = state
        .failed
        .as_ref()
        .filter(|(tried, _)| *tried == settings)
        .map(|(_, why)| why);
    if let Some(why) = failed {
        ui.colored_label(palette::ERROR_TEXT, why);
    }
    match state.current(device) {
        Some(result) => {
            let shown = outcome_ui(ui, data, device, result, as_recorded);
            if state.reveal == Some(Reveal::Outcome) {
                // The least scroll that shows the whole table: the settings stay in view
                // where the panel has room for both.
                ui.scroll_to_rect(shown, None);
                state.reveal = None;
            }
        }
        None if refused.is_some() || failed.is_some() => {
            ui.weak("no prediction for these settings");
        }
        None => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("replaying…");
            });
        }
    }
    ui.separator();
    sweep_ui(ui, data, device, state);
}

/// The button that tries the common settings, and their ranking: a click on "use" tries that
/// one above.
fn sweep_ui(ui: &mut Ui, data: &Arc<Prepared>, device: usize, state: &mut WhatIfState) {
    let running = state.sweep.as_ref().is_some_and(|s| s.running.is_some());
    ui.horizontal(|ui| {
        let button = ui
            .add_enabled(!running, egui::Button::new("Try the common settings"))
            .on_hover_text(
                "expandable segments, max_split_size_mb 128 / 512, roundup_power2_divisions 4, \
                 without empty_cache(), and garbage collection where the capacity is known: \
                 one by one and in two common pairs, ranked by OOMs, peak reserved, stalls, then reserved at peak allocated and its mean",
            );
        if button.clicked() {
            state.start_sweep(ui.ctx(), data, device);
        }
        if running {
            ui.spinner();
        }
        if state.sweep_failed {
            ui.colored_label(palette::ERROR_TEXT, "the sweep stopped unexpectedly");
        }
    });
    let Some(sweep) = state
        .sweep
        .as_ref()
        .filter(|s| s.device == device && s.running.is_none())
    else {
        return;
    };
    let mut chosen = None;
    let table = egui::Grid::new("whatif-sweep")
        .num_columns(5)
        .striped(true)
        .show(ui, |ui| {
            // The long column last, so a narrow panel cuts the settings' words, not the figures
            // or the button.
            for what in [
                "",
                "peak reserved",
                "at peak allocated",
                "stalls / OOMs",
                "change (best first)",
            ] {
                ui.label(RichText::new(what).strong());
            }
            ui.end_row();
            let known = |c: Option<u64>| c.map_or_else(|| "n/a".to_string(), |c| c.to_string());
            for (settings, outcome) in &sweep.ranked {
                if ui.small_button("use").clicked() {
                    chosen = Some(*settings);
                }
                ui.label(format_bytes(outcome.peak_reserved_bytes as i64));
                ui.label(format_bytes(
                    outcome.reserved_at_peak_allocated_bytes as i64,
                ));
                ui.label(format!(
                    "{} / {}",
                    known(outcome.stalls),
                    known(outcome.ooms)
                ));
                ui.label(settings.changes_from(&sweep.base));
                ui.end_row();
            }
        });
    if state.reveal == Some(Reveal::Sweep) {
        // The ranking answers the button above it: its top row in view.
        ui.scroll_to_rect(table.response.rect, Some(egui::Align::TOP));
        state.reveal = None;
    }
    if let Some(settings) = chosen {
        state.settings = Some((device, settings));
    }
}

/// The allocator settings as controls, `recorded` giving the reset.
fn settings_ui(ui: &mut Ui, s: &mut Settings, recorded: &Settings) {
    ui.horizontal(|ui| {
        ui.label(RichText::new("Allocator settings").strong());
        if ui
            .add_enabled(s != recorded, egui::Button::new("as recorded"))
            .clicked()
        {
            *s = *recorded;
        }
    });
    ui.checkbox(&mut s.expandable_segments, "expandable_segments");
    ui.horizontal(|ui| {
        let mut on = s.max_split_size_mb.is_some();
        ui.checkbox(&mut on, "max_split_size_mb");
        let mut mb = s.max_split_size_mb.unwrap_or(128);
        ui.add_enabled(on, egui::DragValue::new(&mut mb).range(20..=1_048_576));
        s.max_split_size_mb = on.then_some(mb);
    });
    let uniform = s.roundup_power2_divisions.0[0];
    let per_size = s.roundup_power2_divisions.0.iter().any(|&d| d != uniform);
    egui::ComboBox::from_label("roundup_power2_divisions")
        .selected_text(if per_size {
            "per size (as recorded)".to_string()
        } else if uniform <= 1 {
            "off".to_string()
        } else {
            uniform.to_string()
        })
        .show_ui(ui, |ui| {
            for d in DIVISION_CHOICES {
                let text = if d == 0 {
                    "off".to_string()
                } else {
                    d.to_string()
                };
                let chosen = Divisions([d; 16]);
                if ui
                    .selectable_label(s.roundup_power2_divisions == chosen, text)
                    .clicked()
                {
                    s.roundup_power2_divisions = chosen;
                }
            }
        });
    capacity_ui(ui, s, recorded);
    ui.checkbox(
        &mut s.skip_releases,
        "without the recorded empty_cache() calls",
    );
}

/// The capacity and garbage collection, which needs it.
fn capacity_ui(ui: &mut Ui, s: &mut Settings, recorded: &Settings) {
    ui.horizontal(|ui| {
        let mut on = s.capacity_bytes.is_some();
        ui.checkbox(&mut on, "capacity (GiB)").on_hover_text(
            "the device memory the allocator may reserve; with it the replay predicts stalls and OOMs",
        );
        let mut gib = s
            .capacity_bytes
            .or(recorded.capacity_bytes)
            .map_or(80.0, |b| b as f64 / GIB);
        ui.add_enabled(
            on,
            egui::DragValue::new(&mut gib)
                .range(0.001..=4096.0)
                .speed(0.1)
                .max_decimals(3),
        );
        s.capacity_bytes = on.then_some((gib * GIB) as u64);
    });
    if s.capacity_bytes.is_none() && recorded.capacity_bytes.is_none() {
        ui.weak("the file shows no capacity (no oom, no stall): OOMs and stalls are not predicted");
    }
    ui.horizontal(|ui| {
        let can = s.capacity_bytes.is_some();
        let mut on = s.garbage_collection_threshold.is_some() && can;
        ui.add_enabled(
            can,
            egui::Checkbox::new(&mut on, "garbage_collection_threshold"),
        )
        .on_hover_text(
            "acts only under a memory fraction below 1 (set_per_process_memory_fraction): \
             the replay takes its cap to be the capacity",
        )
        .on_disabled_hover_text(
            "the allocator collects only under a memory fraction: give a capacity",
        );
        let mut t = s.garbage_collection_threshold.unwrap_or(0.8);
        ui.add_enabled(on, egui::Slider::new(&mut t, 0.05..=0.95));
        // Without a capacity the box is disabled: a threshold the file recorded stays as it is
        // (it does nothing in the replay then, as in the allocator without a memory fraction).
        if can {
            s.garbage_collection_threshold = on.then_some(t);
        }
    });
}

/// A sentence wrapped at the panel's visible edge (see [`super::wrapped_at_visible_edge`]).
fn sentence(ui: &mut Ui, text: RichText) {
    super::wrapped_at_visible_edge(ui, |ui| ui.add(egui::Label::new(text).wrap()));
}

/// Recorded against predicted, and how far to trust it; returns the area it took.
fn outcome_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    result: &WhatIfResult,
    as_recorded: bool,
) -> egui::Rect {
    // Its whole area, for scrolling it into view.
    ui.scope(|ui| {
        let (r, p) = (&result.recorded, &result.prediction.outcome);
        let (lines, held_before) = whatif::compared_lines(r, p);
        egui::Grid::new("whatif-outcome")
            .num_columns(3)
            .striped(true)
            .show(ui, |ui| {
                ui.label("");
                ui.label(RichText::new("recorded").strong());
                ui.label(RichText::new("predicted").strong());
                ui.end_row();
                for line in lines {
                    ui.label(line.what);
                    ui.label(line.recorded);
                    // The change under the figure: the panel is narrow, and a cut percentage
                    // reads as another number.
                    ui.vertical(|ui| {
                        ui.label(line.predicted);
                        if let Some(change) = line.change {
                            ui.label(RichText::new(change).small().weak());
                        }
                    });
                    ui.end_row();
                }
            });
        let peak_before_trace = held_before.is_some();
        if let Some(note) = held_before {
            sentence(ui, RichText::new(note).color(palette::WARNING_TEXT));
        }
        // Under the recorded settings this is the fidelity; under others, where they first matter.
        let fidelity = match (p.first_divergence_event, as_recorded) {
            (None, _) => "the model's reserved bytes follow the recording at every alloc".to_string(),
            (Some(e), true) => format!(
                "fidelity: the model's reserved bytes first differ from the recording after event {e}"
            ),
            (Some(e), false) => {
                format!("reserved bytes first differ from the recording after event {e}")
            }
        };
        sentence(ui, RichText::new(fidelity));
        let before = data.loaded.replays[device]
            .totals_after(None)
            .reserved_bytes;
        if before > 0 && !peak_before_trace {
            sentence(
                ui,
                RichText::new(format!(
                    "{} was reserved before the trace; the replay keeps that pool as the recorded settings made it",
                    format_bytes(before)
                ))
                .weak(),
            );
        }
        ui.horizontal(|ui| {
            let (rect, _) = ui.allocate_exact_size(egui::vec2(28.0, 10.0), egui::Sense::hover());
            ui.painter().extend(egui::Shape::dashed_line(
                &[rect.left_center(), rect.right_center()],
                egui::Stroke::new(1.5, palette::PREDICTED_LINE),
                5.0,
                3.0,
            ));
            ui.label("on the chart: predicted reserved");
        });
    })
    .response
    .rect
}

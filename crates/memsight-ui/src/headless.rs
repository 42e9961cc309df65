//! Rendering without a display: the app's own drawing code on `egui_kittest`'s wgpu renderer
//! (software rendering where there is no GPU). Used by `memsight screenshot`.

use std::time::{Duration, Instant};

use crate::app::{MemsightApp, View};
use crate::document::{Document, Opened, Source};
use crate::views::profiler::ProfilerDoc;

#[derive(Clone, Debug)]
pub struct ScreenshotOptions {
    pub width: f32,
    pub height: f32,
    /// Device ordinal; the busiest when `None`.
    pub device: Option<u32>,
    /// Pin the allocation that event N belongs to.
    pub select_event: Option<u32>,
    /// The whole window, or one chart alone.
    pub view: View,
    /// The event whose pool is shown (default: the end, or the pinned event).
    pub event: Option<u32>,
}

impl Default for ScreenshotOptions {
    fn default() -> Self {
        Self {
            width: 1400.0,
            height: 860.0,
            device: None,
            select_event: None,
            view: View::App,
            event: None,
        }
    }
}

/// Loads `source` and prepares the app as `options` say (an error for a device or event that is
/// not in the file).
pub fn prepared_app(source: &Source, options: &ScreenshotOptions) -> Result<MemsightApp, String> {
    let prepared = match source.load(None)? {
        Opened::Snapshot(prepared) => *prepared,
        Opened::Profiler(prepared) => {
            if options.device.is_some() || options.select_event.is_some() || options.event.is_some()
            {
                return Err(
                    "--device, --select-event and --event apply to snapshots, not profiler data"
                        .into(),
                );
            }
            if options.view == View::Pool {
                return Err(
                    "--view pool shows a snapshot's pool; profiler data has `app` and `timeline`"
                        .into(),
                );
            }
            let mut app = MemsightApp::with_profiler(ProfilerDoc::new(source.name(), *prepared));
            app.view = options.view;
            return Ok(app);
        }
        Opened::MemscopeCompare(rows) => {
            if options.device.is_some()
                || options.select_event.is_some()
                || options.event.is_some()
                || options.view != View::App
            {
                return Err(
                    "msMemScope's comparison (memory_compare_*.csv) is a table: only --view app \
                     shows it, without --device or events"
                        .into(),
                );
            }
            let mut app = MemsightApp::with_documents(Vec::new());
            app.memscope_compares
                .push(crate::views::memscope_compare::CompareTable::new(
                    source.name(),
                    rows,
                ));
            return Ok(app);
        }
    };
    let path = match source {
        Source::Path(p) => Some(p.clone()),
        Source::Bytes { .. } | Source::Profiler(_) => None,
    };
    let mut doc = Document::new(source.name(), path, prepared);
    if let Some(d) = options.device {
        show_device(&mut doc, d)?;
    }
    if let Some(e) = options.select_event {
        let i = doc
            .device_index()
            .ok_or("the file has no device with events")?;
        let replay = &doc.data.loaded.replays[i];
        let lifetime = replay
            .event_lifetime
            .get(e as usize)
            .copied()
            .ok_or_else(|| {
                format!(
                    "event {e} is out of range: the device has {} events",
                    replay.event_count()
                )
            })?;
        if lifetime == memsight_core::replay::NO_LIFETIME {
            return Err(format!(
                "event {e} is not an alloc or free, so it selects no allocation"
            ));
        }
        doc.selection.event = Some(e);
        doc.selection.lifetime = Some(lifetime);
    }
    if let Some(e) = options.event {
        let i = doc
            .device_index()
            .ok_or("the file has no device with events")?;
        let count = doc.data.loaded.replays[i].event_count();
        if e as usize >= count {
            return Err(format!(
                "event {e} is out of range: the device has {count} events"
            ));
        }
        doc.selection.event = Some(e);
    }
    let mut app = MemsightApp::with_documents(vec![doc]);
    app.view = options.view;
    Ok(app)
}

/// Shows device `d` of `doc`; `Err` lists the devices there are.
fn show_device(doc: &mut Document, d: u32) -> Result<(), String> {
    let devices = &doc.data.loaded.snapshot.devices;
    if !devices.iter().any(|dev| dev.ordinal == d) {
        let known: Vec<String> = devices.iter().map(|dev| dev.ordinal.to_string()).collect();
        return Err(format!(
            "device {d} has no events or segments (devices: {})",
            known.join(", ")
        ));
    }
    doc.device = d;
    Ok(())
}

/// An app showing the compare view of two snapshots (`memsight screenshot --view diff A B`):
/// `options.device` on both sides, else each file's busiest device.
pub fn prepared_compare(
    a: &Source,
    b: &Source,
    options: &ScreenshotOptions,
) -> Result<MemsightApp, String> {
    let mut docs = Vec::new();
    for source in [a, b] {
        let prepared = match source.load(None)? {
            Opened::Snapshot(prepared) => *prepared,
            Opened::Profiler(_) => {
                return Err(format!(
                    "{} is profiler data: --view diff compares two snapshots (memsight diff \
                     compares profiler runs)",
                    source.name()
                ));
            }
            Opened::MemscopeCompare(_) => {
                return Err(format!(
                    "{} is msMemScope's comparison of two runs: --view diff compares two \
                     snapshots",
                    source.name()
                ));
            }
        };
        let path = source.path().map(std::path::Path::to_path_buf);
        let mut doc = Document::new(source.name(), path, prepared);
        if let Some(d) = options.device {
            show_device(&mut doc, d).map_err(|e| format!("{}: {e}", source.name()))?;
        }
        docs.push(doc);
    }
    let mut app = MemsightApp::with_documents(docs);
    app.compare(&egui::Context::default(), 0, 1);
    if let Some(error) = app.errors().pop() {
        return Err(error);
    }
    app.view = options.view;
    Ok(app)
}

/// What to say when no renderer can be made (no GPU driver, no Mesa, a backend that is absent).
pub const NO_ADAPTER: &str = "no graphics adapter for rendering: install Mesa (Debian / Ubuntu: apt-get install \
                              libegl-mesa0 libgl1-mesa-dri, or scripts/install-deps.sh) and try WGPU_BACKEND=gl";

/// Renders `app` at the size of `options` once its layout is ready. Without a usable graphics
/// adapter it returns [`NO_ADAPTER`] (the renderer panics there; the panic is caught, and its
/// message kept off the terminal).
pub fn render(app: MemsightApp, options: &ScreenshotOptions) -> Result<image::RgbaImage, String> {
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        render_unguarded(app, options)
    }));
    std::panic::set_hook(quiet);
    match result {
        Ok(rendered) => rendered,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("");
            if message.contains("adapter") || message.contains("render state") {
                Err(NO_ADAPTER.to_string())
            } else {
                Err(format!("the renderer failed: {message}"))
            }
        }
    }
}

/// Tries a finished frame this many times (each waits up to [`crate::render::FRAME_WAIT`]).
const RENDER_ATTEMPTS: usize = 2;

fn render_unguarded(
    app: MemsightApp,
    options: &ScreenshotOptions,
) -> Result<image::RgbaImage, String> {
    let renderer = crate::render::PatientRenderer::new()?;
    let mut harness = egui_kittest::Harness::builder()
        .with_size(egui::vec2(options.width, options.height))
        .renderer(renderer)
        .with_context_setup(crate::fonts::install)
        // User data may hold characters no installed font has: boxes, not a panic.
        .allow_missing_glyphs()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    let deadline = Instant::now() + Duration::from_mins(1);
    // A few frames settle the panels; then wait for the background layout.
    for _ in 0..3 {
        harness.step();
    }
    // Idle across two frames in a row: a frame can still move a panel (and so the chart) after
    // the last layout landed.
    let mut idle_frames = 0;
    while idle_frames < 2 {
        if Instant::now() > deadline {
            return Err("the chart layout did not finish within 60 s".into());
        }
        if harness.state().is_busy() {
            idle_frames = 0;
            std::thread::sleep(Duration::from_millis(5));
        } else {
            idle_frames += 1;
        }
        harness.step();
    }
    let mut last_error = String::new();
    for _ in 0..RENDER_ATTEMPTS {
        match harness.render() {
            Ok(image) => return Ok(image),
            Err(e) => last_error = e,
        }
        std::thread::sleep(Duration::from_millis(200));
        harness.step();
    }
    Err(format!("{last_error} (after {RENDER_ATTEMPTS} attempts)"))
}

//! The app drawn without a display, at a size of its own: the window's export and `memsight
//! screenshot` both render through [`render`] (`egui_kittest`'s wgpu renderer; software rendering
//! where there is no GPU).

use std::time::{Duration, Instant};

use crate::app::{MemsightApp, View};
use crate::render::{NO_ADAPTER, PatientRenderer};

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
    let renderer = PatientRenderer::new()?;
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

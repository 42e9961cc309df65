//! memsight-ui: the desktop app (egui / eframe) on top of `memsight-core`.
//!
//! `MemsightApp` draws everything through one `ui_root`, so the window (`run_app`), the headless
//! screenshot (`headless`) and the tests share the drawing code.

pub mod app;
pub mod document;
pub mod fonts;
pub mod headless;
pub mod palette;
pub mod prepared;
pub mod render;
pub mod selection;
pub mod views;

use std::path::{Path, PathBuf};

pub use app::{ExportTarget, MemsightApp, View};
pub use document::Source;

/// "1 finding", "3 findings".
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Opens the window on `sources` (loaded in the background) and runs until it is closed.
pub fn run_app(sources: Vec<Source>) -> Result<(), String> {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("memsight")
            .with_inner_size([1400.0, 860.0])
            .with_min_inner_size([800.0, 500.0])
            .with_drag_and_drop(true),
        // `fonts::install` adds the system fonts itself.
        system_font_fallback: false,
        ..Default::default()
    };
    eframe::run_native(
        "memsight",
        options,
        Box::new(move |cc| {
            fonts::install(&cc.egui_ctx);
            Ok(Box::new(MemsightApp::new(
                &cc.egui_ctx,
                sources,
                recent_store(),
            )))
        }),
    )
    .map_err(|e| window_error(&e.to_string()))
}

/// What to say when the window cannot open: what is missing and how to get it.
fn window_error(error: &str) -> String {
    // wgpu's error ends in an empty `{}` (its list of backends' errors).
    let error = error.trim_end_matches(": {}").trim_end_matches(" {}");
    if error.contains("DISPLAY") {
        format!(
            "cannot open the window: no display ({error}). Run it on a desktop, under Xvfb \
             (apt-get install xvfb; Xvfb :99 & DISPLAY=:99 memsight), or use `memsight screenshot` / \
             `memsight analyze`, which need none"
        )
    } else if error.contains("WGPU") || error.contains("adapter") || error.contains("surface") {
        format!("cannot open the window ({error}): {}", render::NO_ADAPTER)
    } else {
        format!("cannot open the window: {error}")
    }
}

/// `$XDG_CONFIG_HOME/memsight/recent`, else `~/.config/memsight/recent`.
fn recent_store() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("memsight").join("recent"))
}

/// Saves `image` (cropped to `crop_px`, in pixels, when given) in the format `path` names, never
/// over one of the open files (`inputs`).
pub fn save_screenshot(
    image: &egui::ColorImage,
    crop_px: Option<egui::Rect>,
    path: &Path,
    inputs: &[&Path],
) -> Result<(), String> {
    let [w, h] = image.size;
    let full = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(w as f32, h as f32));
    let r = crop_px.map_or(full, |c| c.intersect(full));
    let (x0, y0) = (r.min.x.round() as usize, r.min.y.round() as usize);
    let (x1, y1) = (r.max.x.round() as usize, r.max.y.round() as usize);
    if x1 <= x0 || y1 <= y0 {
        return Err("nothing to save: the area is empty".into());
    }
    let mut out = image::RgbaImage::new((x1 - x0) as u32, (y1 - y0) as u32);
    for y in y0..y1 {
        for x in x0..x1 {
            let c = image.pixels[y * w + x];
            out.put_pixel(
                (x - x0) as u32,
                (y - y0) as u32,
                image::Rgba([c.r(), c.g(), c.b(), c.a()]),
            );
        }
    }
    write_image(&out, path, inputs)
}

/// An image format memsight writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Jpeg,
}

/// The format `path`'s name asks for: `.png`, `.jpg` or `.jpeg` (any case).
pub fn image_kind(path: &Path) -> Result<ImageKind, String> {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("png") => Ok(ImageKind::Png),
        Some("jpg" | "jpeg") => Ok(ImageKind::Jpeg),
        _ => Err(format!(
            "{}: the image name must end in .png, .jpg or .jpeg",
            path.display()
        )),
    }
}

/// Writes `image` to `path` in the format its name asks for (JPEG without the alpha channel),
/// whole or not at all, and never over one of `inputs` (see [`memsight_core::output`]).
pub fn write_image(image: &image::RgbaImage, path: &Path, inputs: &[&Path]) -> Result<(), String> {
    let kind = image_kind(path)?;
    memsight_core::output::write_whole(path, inputs, |tmp| {
        match kind {
            ImageKind::Png => image.save_with_format(tmp, image::ImageFormat::Png),
            ImageKind::Jpeg => image::DynamicImage::ImageRgba8(image.clone())
                .to_rgb8()
                .save_with_format(tmp, image::ImageFormat::Jpeg),
        }
        .map_err(|e| e.to_string())
    })
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::window_error;

    #[test]
    fn a_window_that_cannot_open_says_what_is_missing() {
        let no_display = window_error(
            "winit EventLoopError: os error at x.rs:765: neither WAYLAND_DISPLAY nor WAYLAND_SOCKET nor DISPLAY is set.",
        );
        assert!(
            no_display.contains("no display") && no_display.contains("Xvfb"),
            "{no_display}"
        );
        let no_adapter =
            window_error("WGPU error: Failed to create surface for any enabled backend: {}");
        assert!(!no_adapter.contains("{}"), "{no_adapter}");
        assert!(
            no_adapter.contains("install Mesa") && no_adapter.contains("WGPU_BACKEND=gl"),
            "{no_adapter}"
        );
    }
}

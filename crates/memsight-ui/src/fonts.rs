//! Text in every script our users write. egui's bundled fonts cover Latin, Greek and Cyrillic;
//! Chinese, Japanese, Korean, emoji and the rest come from the system's own fonts, found at run
//! time through fontconfig (`egui_system_font_provider`, egui's maintained provider: fonts are
//! memory-mapped on first use, nothing is bundled). The file browser's icons (folder, file, disk:
//! emoji most systems lack) are drawn by a glyph rasterizer of our own. A character no installed
//! font has is drawn as a box ("tofu"), never a panic: paths, frames, operator names and
//! annotations are user data.

use std::sync::Arc;

use egui::epaint::text::{GlyphBitmap, GlyphRasterizer, RasterizedGlyph};
use egui::{Color32, ColorImage};
use egui_system_font_provider::SystemFontProvider;

/// Makes `ctx` draw any character: system fonts for what the bundled ones lack, the browser's
/// icons, a box for what no font has. Call once per context, before its first frame (the window,
/// `screenshot`, tests).
pub fn install(ctx: &egui::Context) {
    ctx.add_font_provider(Arc::new(SystemFontProvider::new()));
    ctx.add_glyph_rasterizer(icon_rasterizer());
    ctx.set_missing_glyph_policy(egui::MissingGlyphPolicy::Tofu);
}

/// An icon the file browser (`egui_file`) puts before its names and in its titles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Icon {
    Folder,
    File,
    Disk,
}

impl Icon {
    fn of(cluster: &str) -> Option<Self> {
        match cluster {
            "🗀" | "📁" | "📂" => Some(Self::Folder),
            "🗋" => Some(Self::File),
            "💾" => Some(Self::Disk),
            _ => None,
        }
    }

    /// Whether pixel (x, y) of a `w`×`h` icon is ink.
    fn covers(self, x: usize, y: usize, w: usize, h: usize, stroke: usize) -> bool {
        let edge = |lo: usize, hi: usize, v: usize| v < lo + stroke || v + stroke >= hi;
        match self {
            // A box with a tab on its top left.
            Self::Folder => {
                let tab_h = (h / 4).max(1);
                let tab_w = w * 2 / 5;
                if y < tab_h {
                    x < tab_w && (y < stroke || edge(0, tab_w, x))
                } else {
                    edge(0, w, x) || edge(tab_h, h, y)
                }
            }
            // A sheet with its top right corner folded.
            Self::File => {
                let fold = (w / 3).max(2);
                let corner_x = w - fold;
                if x >= corner_x && y < fold {
                    // The fold's diagonal, from the top edge down to the right edge.
                    let along = x - corner_x;
                    along == y || along + 1 == y
                } else {
                    edge(0, w, x) || edge(0, h, y)
                }
            }
            // A square with a shutter on top and a label below.
            Self::Disk => {
                let shutter = (x >= w / 4 && x < w * 3 / 4 && y < h / 3)
                    && (edge(w / 4, w * 3 / 4, x) || y + stroke >= h / 3);
                edge(0, w, x) || edge(0, h, y) || shutter
            }
        }
    }
}

/// Draws the browser's icons (a fallback: only asked for characters no font has).
fn icon_rasterizer() -> GlyphRasterizer {
    GlyphRasterizer::new("memsight::file_icons", |request| {
        let icon = Icon::of(request.cluster)?;
        let size = request.font_size_px.max(6.0);
        // A sheet stands upright; folders and disks are wider.
        let (w, h) = match icon {
            Icon::File => ((0.6 * size).round() as usize, (0.8 * size).round() as usize),
            _ => (
                (0.9 * size).round() as usize,
                (0.75 * size).round() as usize,
            ),
        };
        let stroke = (size / 12.0).round().max(1.0) as usize;
        let mut image = ColorImage::filled([w, h], Color32::TRANSPARENT);
        for y in 0..h {
            for x in 0..w {
                if icon.covers(x, y, w, h, stroke) {
                    image[(x, y)] = Color32::WHITE;
                }
            }
        }
        let bearing = (0.1 * size).round();
        Some(RasterizedGlyph {
            bitmap: GlyphBitmap {
                image,
                // The pen is at the baseline; the icon stands on it.
                offset_px: egui::vec2(bearing, -(h as f32)),
                is_color: false,
            },
            advance_px: w as f32 + 2.0 * bearing,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(cluster: &str) -> Option<ColorImage> {
        let family = egui::FontFamily::Proportional;
        let request = egui::epaint::text::GlyphRasterizerRequest {
            cluster,
            family: &family,
            font_size_px: 14.0,
            subpixel_offset_px: 0.0,
        };
        (icon_rasterizer().rasterize)(&request).map(|g| g.bitmap.image)
    }

    #[test]
    fn the_browsers_icons_are_drawn_and_differ() {
        let (folder, file, disk) = (
            draw("🗀").expect("folder"),
            draw("🗋").expect("file"),
            draw("💾").expect("disk"),
        );
        assert_eq!(draw("📂"), Some(folder.clone()), "every folder looks alike");
        assert_ne!(folder, file);
        assert_ne!(file, disk);
        // Something is inked, and not everything.
        for image in [&folder, &file, &disk] {
            let ink = image.pixels.iter().filter(|p| p.a() > 0).count();
            assert!(ink > 10 && ink < image.pixels.len(), "{ink}");
        }
        assert!(draw("a").is_none(), "letters are the fonts' business");
    }
}

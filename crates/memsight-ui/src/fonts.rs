//! Text in every script our users write. egui's bundled fonts cover Latin, Greek and Cyrillic;
//! Chinese, Japanese, Korean, emoji and the rest come from the system's own fonts, found at run
//! time through fontconfig (`egui_system_font_provider`, egui's maintained provider: fonts are
//! memory-mapped on first use, nothing is bundled). A character no installed font has is drawn as
//! a box ("tofu"), never a panic: paths, frames, operator names and annotations are user data.

use std::sync::Arc;

use egui_system_font_provider::SystemFontProvider;

/// Makes `ctx` draw any character: system fonts for what the bundled ones lack, a box for what no
/// font has. Call once per context, before its first frame (the window, `screenshot`, tests).
pub fn install(ctx: &egui::Context) {
    ctx.add_font_provider(Arc::new(SystemFontProvider::new()));
    ctx.set_missing_glyph_policy(egui::MissingGlyphPolicy::Tofu);
}

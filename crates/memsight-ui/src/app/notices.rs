//! Transient messages in the window's bottom-right corner: "saved …", "copied …", "could not
//! open …". Every user action that can fail reports here, once. Successes fade after a few
//! seconds; failures stay until dismissed, so nobody misses why nothing happened.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::palette;

/// How long a success stays on screen.
const SUCCESS_TTL: Duration = Duration::from_secs(8);
/// At most this many notices at once; the oldest go first.
const MAX_NOTICES: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Success,
    Info,
    Error,
}

#[derive(Clone, Debug)]
pub struct Notice {
    pub level: Level,
    pub text: String,
    /// A file the notice is about: the notice offers to copy its full path.
    pub path: Option<PathBuf>,
    shown_at: Instant,
}

#[derive(Default)]
pub struct Notices {
    notices: Vec<Notice>,
}

impl Notices {
    pub fn success(&mut self, text: impl Into<String>, path: Option<PathBuf>) {
        self.push(Level::Success, text.into(), path);
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.push(Level::Info, text.into(), None);
    }

    pub fn error(&mut self, text: impl Into<String>) {
        self.push(Level::Error, text.into(), None);
    }

    fn push(&mut self, level: Level, text: String, path: Option<PathBuf>) {
        self.notices.push(Notice {
            level,
            text,
            path,
            shown_at: Instant::now(),
        });
        if self.notices.len() > MAX_NOTICES {
            // The oldest success goes first: failures wait to be read.
            let oldest = self
                .notices
                .iter()
                .position(|n| n.level != Level::Error)
                .unwrap_or(0);
            self.notices.remove(oldest);
        }
    }

    /// The notices on screen, oldest first.
    pub fn current(&self) -> &[Notice] {
        &self.notices
    }

    /// Draws the notices over everything else; a copied path becomes a notice of its own.
    pub fn show(&mut self, ctx: &egui::Context) {
        self.notices
            .retain(|n| n.level == Level::Error || n.shown_at.elapsed() < SUCCESS_TTL);
        if self.notices.is_empty() {
            return;
        }
        let mut dismiss = None;
        let mut copied = None;
        egui::Area::new(egui::Id::unique("memsight-notices"))
            .order(egui::Order::Foreground)
            .anchor(egui::Align2::RIGHT_BOTTOM, egui::vec2(-12.0, -12.0))
            .interactable(true)
            .show(ctx, |ui| {
                ui.set_max_width((ctx.content_rect().width() * 0.6).min(560.0));
                for (i, notice) in self.notices.iter().enumerate() {
                    let color = match notice.level {
                        Level::Success => palette::OK_TEXT,
                        Level::Info => palette::AXIS,
                        Level::Error => palette::ERROR_TEXT,
                    };
                    egui::Frame::popup(ui.style()).show(ui, |ui| {
                        ui.horizontal(|ui| {
                            ui.add(
                                egui::Label::new(egui::RichText::new(&notice.text).color(color))
                                    .wrap(),
                            );
                            if let Some(path) = &notice.path
                                && ui
                                    .small_button("copy path")
                                    .on_hover_text(path.display().to_string())
                                    .clicked()
                            {
                                ui.ctx().copy_text(path.display().to_string());
                                copied = Some(path.clone());
                            }
                            if ui.small_button("×").on_hover_text("dismiss").clicked() {
                                dismiss = Some(i);
                            }
                        });
                    });
                }
            });
        if let Some(i) = dismiss {
            self.notices.remove(i);
        }
        if let Some(path) = copied {
            self.info(format!("copied {}", path.display()));
        }
        // Come back to fade the successes out (failures stay: nothing to wait for).
        if self.notices.iter().any(|n| n.level != Level::Error) {
            ctx.request_repaint_after(Duration::from_millis(500));
        }
    }
}

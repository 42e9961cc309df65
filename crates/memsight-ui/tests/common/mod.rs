//! Gestures the UI tests share.
#![allow(
    dead_code,
    reason = "each test binary uses some of these gestures, not all"
)]

use egui::{Event, Modifiers, PointerButton, Pos2};
use egui_kittest::{Harness, SnapshotOptions};
use memsight_ui::MemsightApp;

/// Ctrl+drag (Cmd on macOS) from `from` to `to` in ten moves, one frame each.
pub fn ctrl_drag(harness: &mut Harness<'static, MemsightApp>, from: Pos2, to: Pos2) {
    harness.event(Event::PointerMoved(from));
    harness.event(Event::PointerButton {
        pos: from,
        button: PointerButton::Primary,
        pressed: true,
        modifiers: Modifiers::COMMAND,
    });
    harness.step();
    for k in 1..=10 {
        harness.event_modifiers(
            Event::PointerMoved(from + (to - from) * (k as f32 / 10.0)),
            Modifiers::COMMAND,
        );
        harness.step();
    }
    harness.event(Event::PointerButton {
        pos: to,
        button: PointerButton::Primary,
        pressed: false,
        modifiers: Modifiers::COMMAND,
    });
}

/// Two clicks at `at`, a frame per press and per release.
pub fn double_click(harness: &mut Harness<'static, MemsightApp>, at: Pos2) {
    for _ in 0..2 {
        for pressed in [true, false] {
            harness.event(Event::PointerButton {
                pos: at,
                button: PointerButton::Primary,
                pressed,
                modifiers: Modifiers::NONE,
            });
            harness.step();
        }
    }
}

/// Image snapshots tolerate small text rendering differences between Mesa versions.
pub fn snapshot_options() -> SnapshotOptions {
    SnapshotOptions::new().threshold(1.2).max_failed_pixels(400)
}

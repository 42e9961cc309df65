//! Gestures the UI tests share.
#![allow(
    dead_code,
    reason = "each test binary uses some of these gestures, not all"
)]

use egui::{Event, Modifiers, PointerButton, Pos2};
use egui_kittest::{Harness, SnapshotOptions};
use memsight_core::r#gen::{self, GenOptions, Scenario};
use memsight_ui::{MemsightApp, Source};

/// A generated snapshot (seed 3) in memory, kept for the life of the test process.
pub fn generated(scenario: Scenario, events: usize) -> Source {
    let g = r#gen::generate(&GenOptions {
        scenario,
        events,
        seed: 3,
        protocol: 4,
        ..GenOptions::default()
    });
    let bytes: &'static [u8] = Box::leak(
        g.write_pickle(Vec::new())
            .expect("in memory")
            .into_boxed_slice(),
    );
    Source::Bytes {
        name: format!("{}.pickle", scenario.name()),
        bytes,
    }
}

/// A snapshot of the corpus; `None` where the corpus is absent.
pub fn fixture(name: &str) -> Option<Source> {
    memsight_core::testing::fixtures_dir().map(|dir| Source::Path(dir.join("snapshots").join(name)))
}

/// A click at `pos`: hover, press, release, two frames.
pub fn click_at(harness: &mut Harness<'static, MemsightApp>, pos: Pos2) {
    harness.hover_at(pos);
    for pressed in [true, false] {
        harness.event(Event::PointerButton {
            pos,
            button: PointerButton::Primary,
            pressed,
            modifiers: Modifiers::NONE,
        });
    }
    harness.step();
    harness.step();
}

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

/// Steps until the app has been idle (no load, no layout on its way) for two frames in a row: a
/// frame can still move a panel, and so the chart, after the last layout landed.
pub fn settle(harness: &mut Harness<'static, MemsightApp>) {
    harness.run_steps(3);
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    let mut idle_frames = 0;
    while idle_frames < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the app never settled"
        );
        if harness.state().is_busy() {
            idle_frames = 0;
            std::thread::sleep(std::time::Duration::from_millis(5));
        } else {
            idle_frames += 1;
        }
        harness.step();
    }
}

/// The app in a 1400×900 harness with the system's fonts (arrows, CJK), as the window has them,
/// settled.
pub fn harness_of(app: MemsightApp) -> Harness<'static, MemsightApp> {
    let mut harness = Harness::builder()
        .with_size(egui::vec2(1400.0, 900.0))
        .with_step_dt(1.0 / 60.0)
        .allow_missing_glyphs()
        .with_context_setup(memsight_ui::fonts::install)
        .wgpu()
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    settle(&mut harness);
    harness
}

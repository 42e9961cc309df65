//! CPU per frame of the linked views (release build):
//! - selecting a random event (the pool chart rebuilds from the nearest checkpoint and redraws);
//! - holding ↓ (one event per frame, the event list and the pool chart follow);
//! - scrolling the event list from the first row to the last.
//!
//! `cargo run --release -p memsight-ui --example selection_times -- FILE`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use egui::{Event, Modifiers, MouseWheelSource, MouseWheelUnit, TouchPhase, vec2};
use egui_kittest::Harness;
use memsight_ui::MemsightApp;
use memsight_ui::headless::{ScreenshotOptions, prepared_app};
use memsight_ui::selection::Command;

fn frame(harness: &mut Harness<'_, MemsightApp>) -> f64 {
    let t = Instant::now();
    harness.step();
    let shapes = harness.output().shapes.clone();
    std::hint::black_box(
        harness
            .ctx
            .tessellate(shapes, harness.ctx.pixels_per_point()),
    );
    t.elapsed().as_secs_f64() * 1e3
}

fn summary(name: &str, mut ms: Vec<f64>) {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q) as usize];
    println!(
        "{name}: {} frames, median {:.2} ms, p99 {:.2} ms, worst {:.2} ms",
        ms.len(),
        at(0.5),
        at(0.99),
        ms[ms.len() - 1]
    );
}

fn main() {
    let Some(path) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: selection_times FILE");
        std::process::exit(2);
    };
    let options = ScreenshotOptions::default();
    let app = prepared_app(&memsight_ui::Source::Path(path), &options).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let mut harness = Harness::builder()
        .with_size(vec2(options.width, options.height))
        .with_step_dt(1.0 / 60.0)
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    harness.step();
    while harness.state().is_busy() {
        std::thread::sleep(Duration::from_millis(1));
        harness.step();
    }
    let n = harness.state().documents()[0].data.loaded.replays[0].event_count() as u64;

    // Random events, two frames each: the first applies the command, the second rebuilds the pool.
    let mut state = 7u64;
    let mut select = Vec::new();
    for _ in 0..200 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let e = ((state >> 33) % n) as u32;
        harness.state_mut().documents_mut()[0]
            .commands
            .push(Command::SelectEvent(Some(e)));
        select.push(frame(&mut harness) + frame(&mut harness));
    }
    summary("select a random event (pool chart updated)", select);

    // Holding ↓: one event per frame.
    let mut step = Vec::new();
    for _ in 0..300 {
        harness.key_press(egui::Key::ArrowDown);
        step.push(frame(&mut harness));
    }
    let mut sorted = step.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "holding the down arrow: {:.0} events per second of CPU (median frame)",
        1000.0 / sorted[sorted.len() / 2]
    );
    summary("holding the down arrow", step);

    // Scrolling the event list to its last row, then back to the first.
    let list = egui::pos2(200.0, options.height - 100.0);
    harness.hover_at(list);
    let mut scroll = Vec::new();
    for k in 0..240 {
        let dy = if k < 120 { -250_000.0 } else { 250_000.0 };
        harness.event(Event::MouseWheel {
            unit: MouseWheelUnit::Point,
            delta: vec2(0.0, dy),
            modifiers: Modifiers::NONE,
            phase: TouchPhase::Move,
            source: MouseWheelSource::Wheel,
        });
        scroll.push(frame(&mut harness));
    }
    summary("scrolling the event list end to end", scroll);
}

//! CPU time per frame of the app while the user zooms and pans continuously over a snapshot (or
//! the curves of profiler data), and how long after loading the first chart frame appears.
//! Release build:
//!
//! `cargo run --release -p memsight-ui --example frame_times -- FILE_OR_PROFILER_DIR [FRAMES]`
//!
//! Each frame runs the whole UI pass plus tessellation (what the UI thread does before the GPU),
//! with a wheel or drag event every frame, paced at 60 frames a second; layouts run on rayon
//! meanwhile, as in the app.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use egui::{Event, Modifiers, MouseWheelSource, MouseWheelUnit, PointerButton, TouchPhase, vec2};
use egui_kittest::Harness;
use memsight_ui::MemsightApp;
use memsight_ui::headless::{ScreenshotOptions, prepared_app};

const FRAME: Duration = Duration::from_micros(16_667);

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: frame_times FILE [FRAMES]");
        std::process::exit(2);
    };
    let frames: usize = args
        .next()
        .and_then(|f| f.to_str().and_then(|s| s.parse().ok()))
        .unwrap_or(600);
    let options = ScreenshotOptions::default();
    let start = Instant::now();
    let app = prepared_app(&memsight_ui::Source::Path(path), &options).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let loaded = start.elapsed();
    let mut harness = Harness::builder()
        .with_size(vec2(options.width, options.height))
        .with_step_dt(1.0 / 60.0)
        .build_ui_state(|ui, app: &mut MemsightApp| app.ui_root(ui), app);
    let first_frame_start = Instant::now();
    harness.step();
    while harness.state().is_busy() {
        std::thread::sleep(Duration::from_millis(1));
        harness.step();
    }
    let first_chart = first_frame_start.elapsed();
    println!(
        "loaded and indexed in {:.3} s; first chart frame {:.0} ms after that",
        loaded.as_secs_f64(),
        first_chart.as_secs_f64() * 1e3
    );

    let profiler = !harness.state().profilers().is_empty();
    let center = if profiler {
        // Inside the first rank's plot.
        let rect = harness.state().profilers()[0].chart_rect.expect("drawn");
        egui::pos2(rect.center().x, rect.top() + rect.height() * 0.25)
    } else {
        harness.state().documents()[0]
            .lifecycle
            .chart_rect()
            .expect("laid out")
            .center()
    };
    let layouts_received = |h: &Harness<'_, MemsightApp>| {
        h.state()
            .documents()
            .first()
            .map_or(0, |d| d.lifecycle.layouts_received())
    };
    harness.hover_at(center);
    let mut ms = Vec::with_capacity(frames);
    let layouts_before = layouts_received(&harness);
    // Frames over 16 ms: how many took a layout that had just landed, and in which gesture.
    let (mut slow, mut slow_landed, mut slow_by_gesture) = (0, 0, [0usize; 3]);
    for f in 0..frames {
        interact(&harness, f, center);
        let landed_before = layouts_received(&harness);
        let t = Instant::now();
        harness.step();
        let output = harness.output().shapes.clone();
        let primitives = harness
            .ctx
            .tessellate(output, harness.ctx.pixels_per_point());
        std::hint::black_box(&primitives);
        let took = t.elapsed();
        ms.push(took.as_secs_f64() * 1e3);
        if took > Duration::from_millis(16) {
            slow += 1;
            slow_landed += usize::from(layouts_received(&harness) != landed_before);
            slow_by_gesture[gesture(f)] += 1;
        }
        // Paced at 60 frames a second, as a display would.
        std::thread::sleep(FRAME.saturating_sub(took));
    }
    let layouts = layouts_received(&harness) - layouts_before;
    let vertices = harness
        .output()
        .shapes
        .iter()
        .map(|s| match &s.shape {
            egui::Shape::Mesh(m) => m.vertices.len(),
            egui::Shape::Path(p) => p.points.len(),
            _ => 0,
        })
        .sum::<usize>();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q) as usize];
    println!(
        "{frames} frames of continuous zoom and pan: median {:.2} ms, p99 {:.2} ms, worst {:.2} ms per frame (UI thread); \
         {layouts} layouts landed meanwhile (off the UI thread, {:.1} a second); {vertices} mesh vertices and path points in the last frame",
        at(0.5),
        at(0.99),
        ms[ms.len() - 1],
        layouts as f64 / (frames as f64 * FRAME.as_secs_f64())
    );
    println!(
        "{slow} frames over 16 ms: {slow_landed} took a layout that had just landed; \
         {} while zooming in, {} while dragging, {} while zooming out",
        slow_by_gesture[0], slow_by_gesture[1], slow_by_gesture[2]
    );
}

/// Frame `f`'s gesture: 0 zoom in, 1 drag, 2 zoom out (see `interact`).
fn gesture(f: usize) -> usize {
    match f % 200 {
        0..80 => 0,
        80..120 => 1,
        _ => 2,
    }
}

/// Frame `f`'s input: zoom in for 80 frames, drag for 40, zoom out for 80, again and again.
fn interact(harness: &Harness<'_, MemsightApp>, f: usize, center: egui::Pos2) {
    // Zoom in for a while, pan by dragging, zoom out: continuous interaction.
    let phase = f % 200;
    if phase < 80 || (120..200).contains(&phase) {
        let dy = if phase < 80 { 40.0 } else { -40.0 };
        harness.event(Event::MouseWheel {
            unit: MouseWheelUnit::Point,
            delta: vec2(0.0, dy),
            modifiers: Modifiers::NONE,
            phase: TouchPhase::Move,
            source: MouseWheelSource::Wheel,
        });
    } else {
        let pressed = phase == 80;
        if pressed {
            harness.event(Event::PointerButton {
                pos: center,
                button: PointerButton::Primary,
                pressed: true,
                modifiers: Modifiers::NONE,
            });
        }
        let x = center.x + (phase as f32 - 80.0) * 6.0;
        harness.event(Event::PointerMoved(egui::pos2(x, center.y)));
        if phase == 119 {
            harness.event(Event::PointerButton {
                pos: egui::pos2(x, center.y),
                button: PointerButton::Primary,
                pressed: false,
                modifiers: Modifiers::NONE,
            });
        }
    }
}

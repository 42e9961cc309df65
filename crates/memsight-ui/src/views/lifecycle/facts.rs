//! A lifetime's tooltip and the facts the details panel lists for it.

use egui::Ui;
use memsight_core::frames::display_frames;
use memsight_core::model::{Action, NO_STR};
use memsight_core::replay::LifetimeId;
use memsight_core::units::format_bytes;

use crate::prepared::Prepared;

/// Requested size, address, events, lifetime, stream, pool, context and the top frames.
pub fn lifetime_tooltip_ui(ui: &mut Ui, data: &Prepared, device: usize, id: LifetimeId) {
    let lifetime = &data.loaded.replays[device].lifetimes[id as usize];
    lifetime_facts_ui(ui, data, device, id);
    let s = &data.loaded.snapshot;
    let frames = display_frames(s, lifetime.stack, false);
    if frames.is_empty() {
        ui.weak("no stack recorded");
    }
    for line in frames.iter().take(6) {
        let text = if line.repeat > 1 {
            format!("{} (×{})", line.text, line.repeat)
        } else {
            line.text.clone()
        };
        ui.monospace(text);
    }
    if frames.len() > 6 {
        ui.weak(format!(
            "… {} more frames (click to pin and see all)",
            frames.len() - 6
        ));
    }
}

/// The facts of one allocation, as a grid.
/// The facts of lifetime `id`: size, address, events, category, stream, pool.
pub fn lifetime_facts_ui(ui: &mut Ui, data: &Prepared, device: usize, id: LifetimeId) {
    let l = &data.loaded.replays[device].lifetimes[id as usize];
    let s = &data.loaded.snapshot;
    let trace = &s.devices[device].trace;
    let event_text = |e: Option<u32>, missing: &str| match e {
        None => missing.to_string(),
        Some(e) => match trace
            .time_us
            .get(e as usize)
            .filter(|&&t| t != memsight_core::model::NO_TIME)
        {
            Some(&t) => format!(
                "event {e} (t = {:.6} s)",
                (t - trace.time_us[0]) as f64 / 1e6
            ),
            None => format!("event {e}"),
        },
    };
    egui::Grid::new(ui.scope_id().with("facts"))
        .num_columns(2)
        .show(ui, |ui| {
            let size = match l.size_bytes {
                Some(rounded) => format!(
                    "{} requested, {} block",
                    format_bytes(l.requested_size_bytes as i64),
                    format_bytes(rounded as i64)
                ),
                None => format!(
                    "{} requested ({} bytes)",
                    format_bytes(l.requested_size_bytes as i64),
                    l.requested_size_bytes
                ),
            };
            ui.label("size");
            ui.label(size);
            ui.end_row();
            ui.label("address");
            ui.monospace(format!("0x{:x}", l.addr));
            ui.end_row();
            ui.label("allocated");
            ui.label(event_text(l.alloc_event, "before the trace began"));
            ui.end_row();
            if let Some(e) = l.free_requested_event {
                ui.label("free requested");
                ui.label(event_text(Some(e), ""));
                ui.end_row();
            }
            ui.label("freed");
            ui.label(event_text(l.free_completed_event, "still live at the end"));
            ui.end_row();
            if let (Some(a), Some(f)) = (l.alloc_event, l.free_completed_event) {
                ui.label("lifetime");
                let dt = match (trace.time_us.get(a as usize), trace.time_us.get(f as usize)) {
                    (Some(&ta), Some(&tf)) if ta != memsight_core::model::NO_TIME => {
                        format!(", {:.3} ms", (tf - ta) as f64 / 1e3)
                    }
                    _ => String::new(),
                };
                ui.label(format!("{} events{dt}", f - a));
                ui.end_row();
            }
            ui.label("category");
            ui.label(data.category(device, id).words());
            ui.end_row();
            ui.label("stream");
            ui.label(format!(
                "{} (raw {})",
                l.stream,
                s.streams.get(l.stream as usize).copied().unwrap_or(0)
            ));
            ui.end_row();
            if let Some(e) = l.alloc_event.or(l.free_completed_event) {
                let e = e as usize;
                if let Some(&(a, b)) = s.pools.get(trace.pool[e] as usize) {
                    ui.label("pool");
                    ui.label(format!("({a}, {b})"));
                    ui.end_row();
                }
                for (what, id) in [
                    ("compile context", trace.compile_context[e]),
                    ("user metadata", trace.user_metadata[e]),
                ] {
                    if id != NO_STR && !s.str(id).is_empty() && s.str(id) != "N/A" {
                        ui.label(what);
                        ui.label(s.str(id));
                        ui.end_row();
                    }
                }
                if trace.action[e] == Action::Alloc {
                    let after = data.loaded.replays[device].totals_after(Some(e as u32));
                    ui.label("allocated after");
                    ui.label(format_bytes(after.allocated_bytes));
                    ui.end_row();
                }
            }
        });
}

//! Every event of the device in a virtualized table: only the visible rows are laid out, so
//! millions of rows scroll smoothly. Filter by action, search by hex address or stack text; a
//! click (or ↑ / ↓) selects the event and the pool chart follows.

use std::sync::Arc;

use egui::{Label, RichText, Sense, Ui, vec2};
use memsight_core::model::{Action, NO_TIME};
use memsight_core::units::format_bytes;

use crate::document::Prepared;
use crate::selection::{Command, Selection};

const ROW_HEIGHT: f32 = 18.0;
/// Column widths: index, time, action, address, size, stream, allocated, active, reserved.
const WIDTHS: [f32; 9] = [64.0, 78.0, 110.0, 124.0, 74.0, 44.0, 74.0, 74.0, 74.0];

/// What the matching rows depend on: device, action filter, search text.
type RowsKey = (usize, Option<Action>, String);

#[derive(Default)]
pub struct EventListState {
    /// Only this action (`None`: all).
    pub filter: Option<Action>,
    pub search: String,
    /// The matching events for (device, filter, search), when filtered.
    rows: Option<(RowsKey, Arc<Vec<u32>>)>,
    /// The event the list last scrolled to, so it follows the selection only when it changes.
    followed: Option<u32>,
}

impl EventListState {
    /// The events the list shows: `None` means all of them.
    fn rows(&mut self, data: &Prepared, device: usize) -> Option<Arc<Vec<u32>>> {
        if self.filter.is_none() && self.search.trim().is_empty() {
            return None;
        }
        let key = (device, self.filter, self.search.trim().to_string());
        if self.rows.as_ref().map(|(k, _)| k) != Some(&key) {
            let rows = matching_events(data, device, self.filter, &key.2);
            self.rows = Some((key, Arc::new(rows)));
        }
        self.rows.as_ref().map(|(_, r)| Arc::clone(r))
    }
}

/// Events of `device` with `action` (if given) whose address is `search` (`0x…`) or whose stack
/// mentions it (case-insensitive).
pub fn matching_events(
    data: &Prepared,
    device: usize,
    action: Option<Action>,
    search: &str,
) -> Vec<u32> {
    let s = &data.loaded.snapshot;
    let trace = &s.devices[device].trace;
    let address = search
        .strip_prefix("0x")
        .or_else(|| search.strip_prefix("0X"))
        .and_then(|h| u64::from_str_radix(h, 16).ok());
    let needle = search.to_lowercase();
    // Which stacks mention the text, decided once per stack.
    let stack_matches: Vec<bool> = if search.is_empty() || address.is_some() {
        Vec::new()
    } else {
        s.stacks
            .iter()
            .map(|frames| {
                frames.iter().any(|&f| {
                    let frame = &s.frames[f as usize];
                    s.str(frame.name).to_lowercase().contains(&needle)
                        || s.str(frame.filename).to_lowercase().contains(&needle)
                })
            })
            .collect()
    };
    (0..trace.len())
        .filter(|&i| action.is_none_or(|a| trace.action[i] == a))
        .filter(|&i| match address {
            Some(a) => trace.addr[i] == a,
            None => {
                search.is_empty()
                    || stack_matches
                        .get(trace.stack[i] as usize)
                        .copied()
                        .unwrap_or(false)
            }
        })
        .map(|i| i as u32)
        .collect()
}

pub fn event_list_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    selection: &Selection,
    state: &mut EventListState,
    commands: &mut Vec<Command>,
) {
    let s = &data.loaded.snapshot;
    let trace = &s.devices[device].trace;
    let replay = &data.loaded.replays[device];
    toolbar_ui(ui, data, device, state, commands);
    // Columns shrink with the panel (cells truncate), so the table never pushes the pool aside.
    // Spacing between cells plus room for the scroll bar, so the rows never ask for more width
    // than the panel has (a panel grows to fit its content).
    let spacing = ui.spacing().item_spacing.x * (WIDTHS.len() as f32 - 1.0)
        + ui.spacing().scroll.bar_width
        + 24.0;
    let scale = ((ui.available_width() - spacing) / WIDTHS.iter().sum::<f32>()).clamp(0.3, 1.0);
    let widths = WIDTHS.map(|w| (w * scale).floor());
    let rows = state.rows(data, device);
    let count = rows.as_ref().map_or(trace.len(), |r| r.len());
    let event_of = |row: usize| rows.as_ref().map_or(row as u32, |r| r[row]);
    ui.horizontal(|ui| {
        for (w, title) in widths.iter().zip([
            "event",
            "time (s)",
            "action",
            "address",
            "size",
            "strm",
            "allocated",
            "active",
            "reserved",
        ]) {
            ui.add_sized(
                vec2(*w, ROW_HEIGHT),
                Label::new(RichText::new(title).strong()),
            );
        }
    });
    if count == 0 {
        ui.weak("no event matches");
        return;
    }
    // Follow the selection when it changed since the last frame.
    let mut scroll = egui::ScrollArea::vertical()
        .id_salt("event-rows")
        .auto_shrink([false, false]);
    if selection.event != state.followed {
        state.followed = selection.event;
        if let Some(e) = selection.event {
            let row = rows
                .as_ref()
                .map_or(e as usize, |r| r.partition_point(|&x| x < e));
            let spacing = ui.spacing().item_spacing.y;
            scroll = scroll.vertical_scroll_offset(
                ((row as f32) * (ROW_HEIGHT + spacing) - 3.0 * ROW_HEIGHT).max(0.0),
            );
        }
    }
    let t0 = trace.time_us.first().copied().unwrap_or(0);
    scroll.show_rows(ui, ROW_HEIGHT, count, |ui, visible| {
        for row in visible {
            let e = event_of(row) as usize;
            let totals = replay.totals_after(Some(e as u32));
            let time = match trace.time_us[e] {
                NO_TIME => String::new(),
                t => format!("{:.6}", (t - t0) as f64 / 1e6),
            };
            let cells = [
                e.to_string(),
                time,
                trace.action[e].name(&s.strings).to_string(),
                format!("0x{:x}", trace.addr[e]),
                format_bytes(trace.size_bytes[e] as i64),
                trace.stream[e].to_string(),
                format_bytes(totals.allocated_bytes),
                format_bytes(totals.active_bytes),
                format_bytes(totals.reserved_bytes),
            ];
            let selected = selection.event == Some(e as u32);
            // Every cell is clickable: a click anywhere on the row selects its event.
            let clicked = ui
                .horizontal(|ui| {
                    let mut clicked = false;
                    for (w, text) in widths.iter().zip(cells) {
                        let text = if selected {
                            RichText::new(text)
                                .strong()
                                .color(crate::palette::SELECTED_EVENT)
                        } else {
                            RichText::new(text)
                        };
                        let cell = Label::new(text)
                            .truncate()
                            .selectable(false)
                            .sense(Sense::click());
                        clicked |= ui.add_sized(vec2(*w, ROW_HEIGHT), cell).clicked();
                    }
                    clicked
                })
                .inner;
            if clicked {
                commands.push(Command::SelectEvent(Some(e as u32)));
            }
        }
    });
}

/// Action filter, search box, first / last.
fn toolbar_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    state: &mut EventListState,
    commands: &mut Vec<Command>,
) {
    let s = &data.loaded.snapshot;
    let trace = &s.devices[device].trace;
    ui.horizontal(|ui| {
        egui::ComboBox::new("event-filter", "action")
            .selected_text(state.filter.map_or("all actions", |a| a.name(&s.strings)))
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut state.filter, None, "all actions");
                let mut seen: Vec<Action> = Vec::new();
                for &a in &trace.action {
                    if !seen.contains(&a) {
                        seen.push(a);
                    }
                    if seen.len() > 16 {
                        break;
                    }
                }
                seen.sort();
                for a in seen {
                    ui.selectable_value(&mut state.filter, Some(a), a.name(&s.strings));
                }
            });
        ui.add(
            egui::TextEdit::singleline(&mut state.search)
                .hint_text("0x address or stack text")
                .desired_width(180.0),
        );
        if ui.button("first").clicked() {
            commands.push(Command::SelectEvent(Some(0)));
        }
        if ui.button("last").clicked() {
            commands.push(Command::SelectEvent(
                trace.len().checked_sub(1).map(|e| e as u32),
            ));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use memsight_core::r#gen::{self, Scenario};

    fn prepared() -> Prepared {
        Prepared::new(r#gen::generate_loaded(Scenario::Leak, 5000, 4).1)
    }

    #[test]
    fn filters_by_action_address_and_stack_text() {
        let p = prepared();
        let trace = &p.loaded.snapshot.devices[0].trace;
        let frees = matching_events(&p, 0, Some(Action::FreeCompleted), "");
        assert_eq!(
            frees.len(),
            trace
                .action
                .iter()
                .filter(|&&a| a == Action::FreeCompleted)
                .count()
        );
        let addr = trace.addr[100];
        let at = matching_events(&p, 0, None, &format!("0x{addr:x}"));
        assert!(at.contains(&100) && at.iter().all(|&e| trace.addr[e as usize] == addr));
        // The generator's leak comes from metrics.py: only allocs of that stack mention it.
        let leak = matching_events(&p, 0, Some(Action::Alloc), "METRICS.PY");
        assert!(!leak.is_empty());
        assert!(
            leak.iter()
                .all(|&e| trace.size_bytes[e as usize] == 2 << 20)
        );
    }
}

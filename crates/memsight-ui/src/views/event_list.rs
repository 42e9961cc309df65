//! Every event of the device in a virtualized table: only the visible rows are laid out, so
//! millions of rows scroll smoothly. Filter by action, search by hex address or stack text; a
//! click (or ↑ / ↓) selects the event and the pool chart follows.

use std::sync::Arc;

use egui::{Label, RichText, Sense, Ui};
use egui_extras::{Column, TableBuilder};
use memsight_core::model::{Action, NO_TIME};
use memsight_core::units::format_bytes;

use crate::prepared::Prepared;
use crate::selection::{Command, Selection};

const ROW_HEIGHT: f32 = 18.0;

/// What the matching rows depend on: device, action filter, search text.
type RowsKey = (usize, Option<Action>, String, bool);

#[derive(Default)]
pub struct EventListState {
    /// Only this action (`None`: all).
    pub filter: Option<Action>,
    pub search: String,
    /// Only the allocations of inefficient blocks (msMemScope recordings).
    pub inefficient_only: bool,
    /// The matching events for (device, filter, search), when filtered.
    rows: Option<(RowsKey, Arc<Vec<u32>>)>,
    /// The event the list last scrolled to, so it follows the selection only when it changes.
    followed: Option<u32>,
    /// Default column widths fitted to the device's values, measured once per device.
    widths: Option<(usize, [f32; 9])>,
}

impl EventListState {
    /// The selected event the list showed (and scrolled to) when it was last drawn.
    pub fn shown_event(&self) -> Option<u32> {
        self.followed
    }

    /// The events the search text matches (with the action filter), for marking on the chart;
    /// `None` without a search.
    pub fn search_hits(&mut self, data: &Prepared, device: usize) -> Option<Arc<Vec<u32>>> {
        if self.search.trim().is_empty() {
            return None;
        }
        self.rows(data, device).map(|(rows, _)| rows)
    }

    /// The events the list shows (`None` means all of them), and whether they changed since the
    /// last call.
    fn rows(&mut self, data: &Prepared, device: usize) -> Option<(Arc<Vec<u32>>, bool)> {
        if self.filter.is_none() && self.search.trim().is_empty() && !self.inefficient_only {
            return None;
        }
        let key = (
            device,
            self.filter,
            self.search.trim().to_string(),
            self.inefficient_only,
        );
        let changed = self.rows.as_ref().map(|(k, _)| k) != Some(&key);
        if changed {
            let mut rows = matching_events(data, device, self.filter, &key.2);
            if self.inefficient_only {
                let flagged = inefficient_allocs(data, device);
                rows.retain(|e| flagged.binary_search(e).is_ok());
            }
            self.rows = Some((key, Arc::new(rows)));
        }
        self.rows.as_ref().map(|(_, r)| (Arc::clone(r), changed))
    }
}

/// The alloc events of `device`'s inefficient blocks (msMemScope's flags where it wrote them,
/// else computed from the accesses), sorted.
pub fn inefficient_allocs(data: &Prepared, device: usize) -> Vec<u32> {
    data.loaded.snapshot.devices[device]
        .block_use
        .iter()
        .filter(|u| u.flags != 0 || u.recorded_flags != 0)
        .map(|u| u.alloc_event)
        .collect()
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

/// The columns: title, and a sample of the widest value of the file (for the default width).
const COLUMNS: [&str; 9] = [
    "event",
    "time (s)",
    "action",
    "address",
    "size",
    "stream",
    "allocated",
    "active",
    "reserved",
];

/// One row's cells (short, as shown) and their full values (the tooltip).
fn cells(data: &Prepared, device: usize, e: usize, t0: i64) -> [(String, String); 9] {
    let s = &data.loaded.snapshot;
    let trace = &s.devices[device].trace;
    let totals = data.loaded.replays[device].totals_after(Some(e as u32));
    let (time, time_full) = match trace.time_us[e] {
        NO_TIME => (String::new(), "no time recorded".to_string()),
        t => {
            let seconds = (t - t0) as f64 / 1e6;
            (
                format!("{seconds:.3}"),
                format!("{seconds:.6} s after the first event"),
            )
        }
    };
    let bytes = |b: i64| (format_bytes(b), format!("{b} bytes"));
    let action = trace.action[e].name(&s.strings).to_string();
    // The action's hover: the event's call stack (segment events too), the user's frames first.
    let frames = memsight_core::frames::display_frames(s, trace.stack[e], false);
    let action_full = if frames.is_empty() {
        format!("{action}: no stack recorded")
    } else {
        let mut lines: Vec<String> = frames.iter().take(12).map(|l| l.text.clone()).collect();
        if frames.len() > 12 {
            lines.push(format!("… {} more frames", frames.len() - 12));
        }
        format!("{action}, called from:\n{}", lines.join("\n"))
    };
    let address = format!("0x{:x}", trace.addr[e]);
    [
        (e.to_string(), format!("event {e}")),
        (time, time_full),
        (action, action_full),
        (address.clone(), address),
        bytes(trace.size_bytes[e] as i64),
        (
            trace.stream[e].to_string(),
            format!(
                "stream {} (raw {})",
                trace.stream[e],
                s.streams
                    .get(trace.stream[e] as usize)
                    .copied()
                    .unwrap_or(0)
            ),
        ),
        bytes(totals.allocated_bytes),
        bytes(totals.active_bytes),
        bytes(totals.reserved_bytes),
    ]
}

/// The first recorded time of `trace` (the list shows seconds after it); 0 without times.
fn first_time_us(trace: &memsight_core::model::Trace) -> i64 {
    trace
        .time_us
        .iter()
        .copied()
        .find(|&t| t != NO_TIME)
        .unwrap_or(0)
}

/// Default column widths that fit the file's widest values, measured in the table's font.
fn fitted_widths(ui: &Ui, data: &Prepared, device: usize) -> [f32; 9] {
    let s = &data.loaded.snapshot;
    let trace = &s.devices[device].trace;
    let replay = &data.loaded.replays[device];
    let widest = |values: &mut dyn Iterator<Item = String>| {
        values.max_by_key(String::len).unwrap_or_default()
    };
    let bytes_sample = |b: i64| {
        // The widest a figure up to `b` prints: "1023.99 GiB" style.
        format_bytes(b).len().max("999 MiB".len())
    };
    let t0 = first_time_us(trace);
    let last_time = trace.time_us.iter().rev().copied().find(|&t| t != NO_TIME);
    let samples = [
        trace.len().saturating_sub(1).to_string(),
        last_time.map_or_else(String::new, |t| format!("{:.3}", (t - t0) as f64 / 1e6)),
        widest(
            &mut trace
                .action
                .iter()
                .take(200_000)
                .map(|a| a.name(&s.strings).to_string()),
        ),
        format!("0x{:x}", trace.addr.iter().copied().max().unwrap_or(0)),
        "0".repeat(bytes_sample(
            trace.size_bytes.iter().copied().max().unwrap_or(0) as i64,
        )),
        trace.stream.iter().copied().max().unwrap_or(0).to_string(),
        "0".repeat(bytes_sample(replay.peak_allocated.bytes)),
        "0".repeat(bytes_sample(replay.peak_active.bytes)),
        "0".repeat(bytes_sample(replay.peak_reserved.bytes)),
    ];
    let font = egui::TextStyle::Body.resolve(ui.style());
    let measure = |text: &str, strong: bool| {
        let color = if strong {
            egui::Color32::BLACK
        } else {
            egui::Color32::GRAY
        };
        ui.fonts_mut(|f| {
            f.layout_no_wrap(text.to_string(), font.clone(), color)
                .size()
                .x
        })
    };
    let mut widths = [0.0; 9];
    for (i, (title, sample)) in COLUMNS.iter().zip(&samples).enumerate() {
        // Bold titles are a little wider than their text in the body font.
        widths[i] = (measure(title, true) * 1.1)
            .max(measure(sample, false))
            .ceil()
            + 12.0;
    }
    widths
}

pub fn event_list_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    selection: &Selection,
    state: &mut EventListState,
    commands: &mut Vec<Command>,
) {
    let trace = &data.loaded.snapshot.devices[device].trace;
    let (rows, changed) = state
        .rows(data, device)
        .map_or((None, false), |(r, changed)| (Some(r), changed));
    let count = rows.as_ref().map_or(trace.len(), |r| r.len());
    // A new search goes to its first match (the pool and the chart follow).
    if changed
        && !state.search.trim().is_empty()
        && let Some(&first) = rows.as_ref().and_then(|r| r.first())
    {
        commands.push(Command::SelectEvent(Some(first)));
    }
    let matches = rows.as_ref().map(|r| r.len());
    if toolbar_ui(ui, data, device, state, matches, commands) {
        ui.ctx().request_repaint();
    }
    let event_of = |row: usize| rows.as_ref().map_or(row as u32, |r| r[row]);
    if count == 0 {
        ui.weak("no event matches");
        return;
    }
    // Files without times leave the time column out (it would be empty).
    let has_time = data.times[device].is_some();
    let columns: Vec<usize> = (0..COLUMNS.len()).filter(|&c| c != 1 || has_time).collect();
    if state.widths.as_ref().map(|(d, _)| *d) != Some(device) {
        state.widths = Some((device, fitted_widths(ui, data, device)));
    }
    let widths = state.widths.map(|(_, w)| w).unwrap_or_default();
    let t0 = first_time_us(trace);
    // The table is as wide as its columns; a narrower panel scrolls it sideways, never clips.
    // Its rows take the height left above the header and the sideways scroll bar.
    let rows_height = (ui.available_height()
        - ROW_HEIGHT
        - 2.0 * ui.spacing().scroll.bar_width
        - ui.spacing().item_spacing.y * 2.0)
        .max(ROW_HEIGHT);
    egui::ScrollArea::horizontal()
        .id_salt("event-table-x")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            let mut table = TableBuilder::new(ui)
                .id_salt(("event-table", device))
                .striped(true)
                .resizable(true)
                .sense(Sense::click())
                .auto_shrink([false, false])
                .min_scrolled_height(0.0)
                .max_scroll_height(rows_height)
                .cell_layout(egui::Layout::left_to_right(egui::Align::Center));
            for (i, &c) in columns.iter().enumerate() {
                let column = Column::initial(widths[c]).at_least(24.0).clip(true);
                table = table.column(if i == columns.len() - 1 {
                    column.resizable(false)
                } else {
                    column
                });
            }
            // Follow the selection when it changed since the last frame.
            if selection.event != state.followed {
                state.followed = selection.event;
                if let Some(e) = selection.event {
                    let row = rows
                        .as_ref()
                        .map_or(e as usize, |r| r.partition_point(|&x| x < e));
                    table = table.scroll_to_row(row.min(count - 1), Some(egui::Align::Center));
                }
            }
            table
                .header(ROW_HEIGHT + 2.0, |mut header| {
                    for title in columns.iter().map(|&c| COLUMNS[c]) {
                        header.col(|ui| {
                            ui.add(Label::new(RichText::new(title).strong()).selectable(false));
                        });
                    }
                })
                .body(|body| {
                    body.rows(ROW_HEIGHT, count, |mut row| {
                        let e = event_of(row.index()) as usize;
                        let selected = selection.event == Some(e as u32);
                        row.set_selected(selected);
                        let mut cells = cells(data, device, e, t0).map(Some);
                        for (text, full) in columns.iter().filter_map(|&c| cells[c].take()) {
                            row.col(|ui| {
                                let text = if selected {
                                    RichText::new(text).strong()
                                } else {
                                    RichText::new(text)
                                };
                                ui.add(Label::new(text).truncate().selectable(false))
                                    .on_hover_text(full);
                            });
                        }
                        if row.response().clicked() {
                            commands.push(Command::SelectEvent(Some(e as u32)));
                        }
                    });
                });
        });
}

/// Action filter, search box and its match count, first / last. Returns whether the search
/// text changed.
fn toolbar_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    state: &mut EventListState,
    matches: Option<usize>,
    commands: &mut Vec<Command>,
) -> bool {
    let mut changed = false;
    let s = &data.loaded.snapshot;
    let trace = &s.devices[device].trace;
    ui.horizontal_wrapped(|ui| {
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
        changed = ui
            .add(
                egui::TextEdit::singleline(&mut state.search)
                    .hint_text("0x address or stack text")
                    .desired_width(180.0),
            )
            .on_hover_text("matches are marked under the chart; a new search goes to the first")
            .changed();
        if let Some(n) = matches {
            ui.weak(if n == 1 {
                "1 match".to_string()
            } else {
                format!("{n} matches")
            });
        }
        if !s.devices[device].block_use.is_empty() {
            ui.checkbox(&mut state.inefficient_only, "inefficient")
                .on_hover_text(
                    "Only blocks msMemScope's rules flag: allocated early, freed late or idle \
                     (see the Inefficient memory finding)",
                );
        }
        if ui.button("first").clicked() {
            commands.push(Command::SelectEvent(Some(0)));
        }
        if ui.button("last").clicked() {
            commands.push(Command::SelectEvent(
                trace.len().checked_sub(1).map(|e| e as u32),
            ));
        }
    });
    changed
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

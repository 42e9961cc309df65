//! The live blocks right after the selected event as a table: size, requested, state, call site,
//! alloc and free events, address. Sorted by any column (a click on its title; again: the other
//! way), filtered by the text of any frame or a hex address; a click on a row pins the block, so
//! the pool and the lifecycle chart show it. Rows are virtualized: pools of 100 000 blocks scroll smoothly.

use std::sync::Arc;

use egui::{Label, RichText, Sense, Ui};
use egui_extras::{Column, TableBuilder};
use memsight_core::model::BlockState;
use memsight_core::replay::LifetimeId;
use memsight_core::units::format_bytes;
use rustc_hash::FxHashMap;

use crate::prepared::Prepared;
use crate::selection::{Command, Selection};

const ROW_HEIGHT: f32 = 18.0;

/// A column the table sorts by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortBy {
    #[default]
    Size,
    Requested,
    State,
    CallSite,
    AllocEvent,
    FreeEvent,
    Address,
}

/// The columns, title, sort and width; the call site last, so a narrow panel cuts its words
/// rather than the figures.
const COLUMNS: [(&str, SortBy, f32); 7] = [
    ("size", SortBy::Size, 72.0),
    ("requested", SortBy::Requested, 80.0),
    ("state", SortBy::State, 84.0),
    ("alloc event", SortBy::AllocEvent, 80.0),
    ("free event", SortBy::FreeEvent, 80.0),
    ("address", SortBy::Address, 116.0),
    ("call site", SortBy::CallSite, 320.0),
];

/// One live block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRow {
    pub lifetime: LifetimeId,
    pub address: u64,
    pub size_bytes: u64,
    pub requested_size_bytes: u64,
    pub state: BlockState,
    /// The frame that names its stack (the user's code), "(no stack)" where none was recorded.
    pub call_site: String,
    /// Every frame of its stack, internal ones included, lowercased: what the filter searches
    /// (`adam` finds `_init_group (adam.py:174)` below the headline frame).
    pub stack_lowercase: Arc<str>,
    pub alloc_event: Option<u32>,
    /// The event that freed it, later in the trace (`None`: never freed in it).
    pub free_event: Option<u32>,
}

/// What the rows shown depend on: device, event, filter, sort.
type RowsKey = (usize, Option<u32>, String, SortBy, bool);
/// Whose live blocks: device and event.
type LiveKey = (usize, Option<u32>);

#[derive(Default)]
pub struct BlockTableState {
    /// Text of any frame of its stack (case-insensitive) or a `0x` address inside the block.
    pub filter: String,
    pub sort: SortBy,
    pub descending_off: bool,
    /// The live blocks of (device, event), unsorted.
    live: Option<(LiveKey, Arc<Vec<BlockRow>>)>,
    /// The rows shown, filtered and sorted.
    shown: Option<(RowsKey, Arc<Vec<BlockRow>>)>,
}

impl BlockTableState {
    /// The rows as the table shows them (filtered and sorted), as of the last frame.
    pub fn shown_rows(&self) -> &[BlockRow] {
        self.shown.as_ref().map_or(&[], |(_, rows)| rows.as_slice())
    }

    fn rows(&mut self, data: &Prepared, device: usize, event: Option<u32>) -> Arc<Vec<BlockRow>> {
        let at = (device, event);
        if self.live.as_ref().map(|(k, _)| *k) != Some(at) {
            self.live = Some((at, Arc::new(live_blocks(data, device, event))));
        }
        let key = (
            device,
            event,
            self.filter.trim().to_lowercase(),
            self.sort,
            self.descending_off,
        );
        if self.shown.as_ref().map(|(k, _)| k) != Some(&key) {
            let live = self
                .live
                .as_ref()
                .map(|(_, r)| Arc::clone(r))
                .unwrap_or_default();
            let mut rows: Vec<BlockRow> = live
                .iter()
                .filter(|r| matches(r, &key.2))
                .cloned()
                .collect();
            sort_rows(&mut rows, self.sort, !self.descending_off);
            self.shown = Some((key, Arc::new(rows)));
        }
        self.shown
            .as_ref()
            .map(|(_, r)| Arc::clone(r))
            .unwrap_or_default()
    }
}

/// The blocks live (allocated, or freed and still in use by another stream) right after `event`
/// on `device`, from the replayed pool, each with its call site.
pub fn live_blocks(data: &Prepared, device: usize, event: Option<u32>) -> Vec<BlockRow> {
    let snapshot = &data.loaded.snapshot;
    let replay = &data.loaded.replays[device];
    let pool = replay.pool_after(&snapshot.devices[device], event);
    let mut sites: FxHashMap<memsight_core::model::StackId, (String, Arc<str>)> =
        FxHashMap::default();
    let mut rows = Vec::new();
    for block in pool.segments.iter().flat_map(|s| &s.blocks) {
        let Some(id) = block
            .lifetime
            .filter(|_| block.state != BlockState::Inactive)
        else {
            continue;
        };
        let lifetime = &replay.lifetimes[id as usize];
        let (call_site, stack_lowercase) = sites
            .entry(lifetime.stack)
            .or_insert_with(|| {
                (
                    memsight_core::frames::headline_frame(snapshot, lifetime.stack)
                        .unwrap_or_else(|| "(no stack)".to_string()),
                    memsight_core::frames::stack_text(snapshot, lifetime.stack, true)
                        .to_lowercase()
                        .into(),
                )
            })
            .clone();
        rows.push(BlockRow {
            lifetime: id,
            address: block.address,
            size_bytes: block.size_bytes,
            requested_size_bytes: block.requested_size_bytes,
            state: block.state,
            call_site,
            stack_lowercase,
            alloc_event: lifetime.alloc_event,
            free_event: lifetime.free_completed_event,
        });
    }
    rows
}

fn matches(row: &BlockRow, filter: &str) -> bool {
    if filter.is_empty() {
        return true;
    }
    if let Some(address) = filter
        .strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
    {
        return (row.address..row.address + row.size_bytes.max(1)).contains(&address);
    }
    row.call_site.to_lowercase().contains(filter) || row.stack_lowercase.contains(filter)
}

fn sort_rows(rows: &mut [BlockRow], by: SortBy, descending: bool) {
    // A block allocated before the trace was allocated before every event; one never freed in
    // it is freed after every event.
    let alloc = |e: Option<u32>| e.map_or(-1, i64::from);
    let free = |e: Option<u32>| e.map_or(i64::MAX, i64::from);
    rows.sort_by(|a, b| {
        let order = match by {
            SortBy::Size => a.size_bytes.cmp(&b.size_bytes),
            SortBy::Requested => a.requested_size_bytes.cmp(&b.requested_size_bytes),
            SortBy::State => state_name(a.state).cmp(state_name(b.state)),
            SortBy::CallSite => a.call_site.cmp(&b.call_site),
            SortBy::AllocEvent => alloc(a.alloc_event).cmp(&alloc(b.alloc_event)),
            SortBy::FreeEvent => free(a.free_event).cmp(&free(b.free_event)),
            SortBy::Address => a.address.cmp(&b.address),
        };
        let order = if descending { order.reverse() } else { order };
        order.then(a.address.cmp(&b.address))
    });
}

/// The table's title, its filter, and the count and bytes of the rows shown.
fn toolbar_ui(ui: &mut Ui, event: Option<u32>, rows: &[BlockRow], state: &mut BlockTableState) {
    let total: u64 = rows.iter().map(|r| r.size_bytes).sum();
    ui.horizontal_wrapped(|ui| {
        ui.strong(match event {
            Some(e) => format!("Live blocks after event {e}"),
            None => "Live blocks".to_string(),
        });
        ui.add(
            egui::TextEdit::singleline(&mut state.filter)
                .hint_text("stack text or 0x address")
                .desired_width(160.0),
        );
        ui.weak(format!(
            "{} · {}",
            crate::count(rows.len(), "block"),
            format_bytes(total as i64)
        ));
    });
}

fn state_name(state: BlockState) -> &'static str {
    match state {
        BlockState::ActiveAllocated => "allocated",
        BlockState::ActivePendingFree => "pending free",
        BlockState::Inactive => "free",
    }
}

pub fn blocks_ui(
    ui: &mut Ui,
    data: &Prepared,
    device: usize,
    selection: &Selection,
    state: &mut BlockTableState,
    commands: &mut Vec<Command>,
) {
    let event = selection.event.or_else(|| {
        data.loaded.replays[device]
            .event_count()
            .checked_sub(1)
            .map(|e| e as u32)
    });
    let rows = state.rows(data, device, event);
    toolbar_ui(ui, event, &rows, state);
    if rows.is_empty() {
        ui.weak("no live block matches");
        return;
    }
    let mut clicked_sort = None;
    egui::ScrollArea::horizontal()
        .id_salt("block-table-x")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            let rows_height =
                (ui.available_height() - ROW_HEIGHT - 2.0 * ui.spacing().scroll.bar_width)
                    .max(ROW_HEIGHT);
            let mut table = TableBuilder::new(ui)
                .id_salt(("block-table", device))
                .striped(true)
                .resizable(true)
                .sense(Sense::click())
                .auto_shrink([false, false])
                .min_scrolled_height(0.0)
                .max_scroll_height(rows_height)
                .cell_layout(egui::Layout::left_to_right(egui::Align::Center));
            for (_, _, width) in COLUMNS {
                table = table.column(Column::initial(width).at_least(24.0).clip(true));
            }
            table
                .header(ROW_HEIGHT + 2.0, |mut header| {
                    for (title, by, _) in COLUMNS {
                        header.col(|ui| {
                            let arrow = if state.sort != by {
                                ""
                            } else if state.descending_off {
                                " (up)"
                            } else {
                                " (down)"
                            };
                            if ui
                                .add(
                                    Label::new(RichText::new(format!("{title}{arrow}")).strong())
                                        .sense(Sense::click())
                                        .selectable(false),
                                )
                                .on_hover_text("sort by this column (again: the other way)")
                                .clicked()
                            {
                                clicked_sort = Some(by);
                            }
                        });
                    }
                })
                .body(|body| {
                    body.rows(ROW_HEIGHT, rows.len(), |mut row| {
                        let block = &rows[row.index()];
                        let selected = selection.lifetime == Some(block.lifetime);
                        row.set_selected(selected);
                        let event = |e: Option<u32>, none: &str| {
                            e.map_or_else(|| none.to_string(), |e| e.to_string())
                        };
                        let cells = [
                            format_bytes(block.size_bytes as i64),
                            format_bytes(block.requested_size_bytes as i64),
                            state_name(block.state).to_string(),
                            event(block.alloc_event, "before the trace"),
                            event(block.free_event, "never"),
                            format!("0x{:x}", block.address),
                            // Folders dropped, so file:line stays in view (the hover has it all).
                            crate::views::lifecycle::short_site(&block.call_site, 200),
                        ];
                        for (c, text) in cells.into_iter().enumerate() {
                            let full = if c == COLUMNS.len() - 1 {
                                block.call_site.clone()
                            } else {
                                text.clone()
                            };
                            row.col(|ui| {
                                ui.add(Label::new(text).truncate().selectable(false))
                                    .on_hover_text(full);
                            });
                        }
                        if row.response().clicked() {
                            commands.push(Command::PickInPool(block.lifetime));
                        }
                    });
                });
        });
    if let Some(by) = clicked_sort {
        if state.sort == by {
            state.descending_off = !state.descending_off;
        } else {
            state.sort = by;
            state.descending_off = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use memsight_core::model::BlockState;

    use super::{BlockRow, SortBy, matches, sort_rows};

    fn row(lifetime: u32, call_site: &str, stack: &str, alloc_event: Option<u32>) -> BlockRow {
        BlockRow {
            lifetime,
            address: 0x1000 * u64::from(lifetime + 1),
            size_bytes: 512,
            requested_size_bytes: 512,
            state: BlockState::ActiveAllocated,
            call_site: call_site.to_string(),
            stack_lowercase: Arc::from(stack.to_lowercase()),
            alloc_event,
            free_event: None,
        }
    }

    /// The filter searches every frame, not the headline alone: "adam" finds a block whose
    /// headline is the training step but whose stack holds `_init_group (adam.py:174)`.
    #[test]
    fn the_filter_searches_the_whole_stack() {
        let r = row(
            0,
            "train_step (train.py:88)",
            "train_step (train.py:88)\nstep (optimizer.py:485)\n_init_group (adam.py:174)",
            Some(5),
        );
        assert!(matches(&r, "adam"));
        assert!(matches(&r, "train_step"));
        assert!(!matches(&r, "sgd"));
    }

    /// Sorted by the event that allocated it, a block from before the trace comes first (it was
    /// allocated before every event), not after the latest events.
    #[test]
    fn blocks_from_before_the_trace_sort_first_by_allocation() {
        let mut rows = vec![
            row(0, "a", "a", Some(9)),
            row(1, "b", "b", None),
            row(2, "c", "c", Some(3)),
        ];
        sort_rows(&mut rows, SortBy::AllocEvent, false);
        let order: Vec<Option<u32>> = rows.iter().map(|r| r.alloc_event).collect();
        assert_eq!(order, [None, Some(3), Some(9)]);
    }
}

//! The panels around the chart, sized for the window: findings, details and range analysis,
//! the event list and the pool chart (side by side or as tabs), the chart itself, warnings.

use std::sync::Arc;

use egui::{Rect, Ui};
use memsight_core::frames::stack_text;
use memsight_core::units::format_bytes;

use super::{BottomTab, CHART_MIN_SHARE, Layout, MemsightApp, NARROW_WIDTH, View};
use crate::views::lifecycle::{lifecycle_ui, lifetime_facts_ui};

impl MemsightApp {
    /// Whether the window is narrow; crossing `NARROW_WIDTH` collapses or reopens the findings
    /// panel once (the user's toggle wins until the next crossing).
    pub(super) fn follow_window_width(&mut self, ctx: &egui::Context) -> bool {
        let narrow = ctx.content_rect().width() < NARROW_WIDTH;
        if self.was_narrow != Some(narrow) {
            self.show_findings = !narrow;
            self.was_narrow = Some(narrow);
        }
        narrow
    }

    /// The side and bottom panels around the chart, sized for the window: below
    /// `NARROW_WIDTH` the findings panel starts collapsed and the bottom area shows tabs.
    pub(super) fn panels_ui(&mut self, ui: &mut Ui, ctx: &egui::Context) {
        let width = ui.available_width();
        let narrow = self.follow_window_width(ctx);
        // The window and the What-if panel were placed before (`ui_root`, `whatif_panel`).
        self.layout = Layout {
            window: self.layout.window,
            whatif: self.layout.whatif,
            ..Layout::default()
        };
        // The side panels share at most half the width, so the chart keeps the rest.
        // (Less the margins each panel draws around its content.)
        let side_budget = width * (1.0 - CHART_MIN_SHARE) - 24.0;
        if self.show_findings && !self.docs.is_empty() {
            let panel = egui::Panel::left("findings")
                .resizable(true)
                .default_size((width * 0.2).clamp(160.0, 300.0))
                .min_size(120.0)
                .max_size(side_budget * 0.45)
                .show(ui, |ui| self.findings_panel_ui(ui));
            self.layout.findings = Some(panel.response.rect);
        }
        if self.show_pool && !self.docs.is_empty() {
            // A third of the height to start with, at most 45 %: the lifecycle chart keeps at
            // least half the window, at 800×500 too.
            let available = ui.available_height();
            // At least a few rows of the event list (a resize never leaves it one row tall), and
            // the chart still half the window at 800×500.
            let min_height = 150.0_f32.min(available * 0.3).max(100.0);
            // Also when the window shrank under a height chosen in a taller one (20 px: the
            // central panel's margins).
            let chart_keeps = ui.ctx().content_rect().height() * CHART_MIN_SHARE + 20.0;
            let max_height = (available * 0.45)
                .min(available - chart_keeps)
                .max(min_height);
            let panel = egui::Panel::bottom("pool")
                .resizable(true)
                .default_size(260.0_f32.min(available * 0.34).max(min_height))
                .min_size(min_height)
                .max_size(max_height)
                .show(ui, |ui| self.bottom_ui(ui, narrow));
            self.layout.bottom = Some(panel.response.rect);
        }
        let side_panel = self
            .docs
            .get(self.active)
            .is_some_and(|d| d.selection.lifetime.is_some() || d.selection.range.is_some());
        if side_panel {
            let left = self.layout.findings.map_or(0.0, |r| r.width());
            let panel = egui::Panel::right("details")
                .resizable(true)
                .default_size((width * 0.3).clamp(200.0, 360.0))
                .min_size(160.0)
                .max_size((side_budget - left).max(160.0))
                .show(ui, |ui| {
                    // Long stack lines wrap at the panel's width (not at the widest row's);
                    // wider content scrolls, it never pushes the panel off-screen.
                    let visible_width = ui.available_width();
                    egui::ScrollArea::both()
                        .id_salt("details-scroll")
                        .auto_shrink([false, false])
                        .show(ui, |ui| {
                            ui.set_max_width(visible_width);
                            self.range_ui(ui);
                            self.details_ui(ui);
                        });
                });
            self.layout.details = Some(panel.response.rect);
        }
    }

    /// A profiler run fills the window: menu, findings on the left, curves, tables below.
    pub(super) fn profiler_root(&mut self, ui: &mut Ui, p: usize) {
        if self.view == View::Timeline {
            egui::CentralPanel::default().show(ui, |ui| {
                crate::views::profiler::curves_ui(ui, &mut self.profilers[p]);
            });
            self.chart_rect = self.profilers[p].chart_rect;
            return;
        }
        egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
        if !self.jobs.is_empty() {
            egui::Panel::top("status").show(ui, |ui| self.status_ui(ui));
        }
        self.follow_window_width(ui.ctx());
        let Some(doc) = self.profilers.get_mut(p) else {
            return;
        };
        egui::Panel::top("profiler-toolbar")
            .show(ui, |ui| crate::views::profiler::toolbar_ui(ui, doc));
        if self.show_findings {
            let width = ui.available_width();
            egui::Panel::left("profiler-findings")
                .resizable(true)
                .default_size((width * 0.2).clamp(160.0, 300.0))
                .max_size((width * (1.0 - CHART_MIN_SHARE) - 24.0).max(120.0))
                .show(ui, |ui| {
                    let data = Arc::clone(&doc.data);
                    if let Some(i) = crate::views::findings::findings_ui(
                        ui,
                        &data.findings,
                        None,
                        &mut doc.findings,
                    ) {
                        doc.show_finding(i);
                    }
                });
        }
        let max_height = (ui.available_height() * 0.5).max(120.0);
        egui::Panel::bottom("profiler-tables")
            .resizable(true)
            .default_size(240.0_f32.min(max_height))
            .max_size(max_height)
            .show(ui, |ui| crate::views::profiler::tables_ui(ui, doc));
        egui::CentralPanel::default().show(ui, |ui| crate::views::profiler::curves_ui(ui, doc));
        self.chart_rect = doc.chart_rect;
    }

    pub(super) fn chart_ui(&mut self, ui: &mut Ui) {
        // Set again below only where a chart is drawn: "Export chart" never saves a stale area.
        self.chart_rect = None;
        let Some(doc) = self.docs.get_mut(self.active) else {
            ui.centered_and_justified(|ui| {
                ui.label(if self.jobs.is_empty() {
                    "Open a memory snapshot: File → Open (Ctrl+O), or drop it here"
                } else {
                    "loading…"
                });
            });
            return;
        };
        let Some(i) = doc.device_index() else {
            ui.label("this file has no device with events or segments");
            return;
        };
        let trace_empty = doc.data.loaded.snapshot.devices[i].trace.is_empty();
        if trace_empty {
            ui.label("no allocation in this device's trace: the file holds only the pool at dump time (the findings say how it was recorded)");
            return;
        }
        self.chart_rect = Some(ui.available_rect_before_wrap());
        let data = Arc::clone(&doc.data);
        doc.lifecycle.search_hits = doc.events.search_hits(&data, i);
        let highlight = doc
            .range_report()
            .filter(|_| doc.range.dim_others)
            .map(|(_, set)| set);
        lifecycle_ui(
            ui,
            &data,
            i,
            &mut doc.lifecycle,
            &doc.selection,
            &mut doc.commands,
            highlight.as_deref(),
        );
    }

    /// The event list beside the pool chart, or the two as tabs when the window is narrow.
    pub(super) fn bottom_ui(&mut self, ui: &mut Ui, narrow: bool) {
        let has_trace = self.docs.get(self.active).is_some_and(|d| {
            d.device_index()
                .is_some_and(|i| !d.data.loaded.snapshot.devices[i].trace.is_empty())
        });
        if !has_trace {
            self.pool_or_blocks_ui(ui);
        } else if narrow {
            ui.horizontal(|ui| {
                ui.selectable_value(&mut self.bottom_tab, BottomTab::Events, "Events");
                ui.selectable_value(&mut self.bottom_tab, BottomTab::Pool, "Pool");
                ui.selectable_value(&mut self.bottom_tab, BottomTab::Blocks, "Blocks");
                ui.selectable_value(&mut self.bottom_tab, BottomTab::Segments, "Segments");
            });
            match self.bottom_tab {
                BottomTab::Events => self.event_list_ui(ui),
                BottomTab::Pool => self.pool_ui(ui),
                BottomTab::Blocks => self.blocks_ui(ui),
                BottomTab::Segments => self.segments_ui(ui),
            }
        } else {
            let width = ui.available_width();
            egui::Panel::left("events")
                .resizable(true)
                .default_size((width * 0.62).min(760.0))
                .min_size(240.0)
                .max_size(width * 0.7)
                .show(ui, |ui| self.event_list_ui(ui));
            self.pool_or_blocks_ui(ui);
        }
    }

    /// The pool chart, the block table or the segment timeline, with tabs to switch (the part
    /// beside the event list; `Events` there means the pool).
    fn pool_or_blocks_ui(&mut self, ui: &mut Ui) {
        let mut shown = match self.bottom_tab {
            BottomTab::Events => BottomTab::Pool,
            other => other,
        };
        ui.horizontal(|ui| {
            ui.selectable_value(&mut shown, BottomTab::Pool, "Pool");
            ui.selectable_value(&mut shown, BottomTab::Blocks, "Blocks");
            ui.selectable_value(&mut shown, BottomTab::Segments, "Segments");
        });
        if shown != BottomTab::Pool || self.bottom_tab != BottomTab::Events {
            self.bottom_tab = shown;
        }
        match shown {
            BottomTab::Blocks => self.blocks_ui(ui),
            BottomTab::Segments => self.segments_ui(ui),
            _ => self.pool_ui(ui),
        }
    }

    pub(super) fn segments_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let Some(i) = doc.device_index() else { return };
        let data = Arc::clone(&doc.data);
        let count = data.loaded.replays[i].event_count() as u32;
        let Some(last) = count.checked_sub(1) else {
            ui.weak("no trace: no segment came or went");
            return;
        };
        // The events the lifecycle chart shows, so the two line up.
        let shown = doc.lifecycle.visible_events().unwrap_or((0, last));
        ui.push_id(("segments", doc.key), |ui| {
            crate::views::segments::segments_ui(
                ui,
                &data,
                i,
                shown,
                &doc.selection,
                &mut doc.segments,
                &mut doc.commands,
            );
        });
        // A range clicked: the Pool tab comes forward, showing it outlined.
        if doc
            .commands
            .iter()
            .any(|c| matches!(c, crate::selection::Command::ShowSegment { .. }))
        {
            self.bottom_tab = BottomTab::Pool;
        }
    }

    pub(super) fn blocks_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let Some(i) = doc.device_index() else { return };
        let data = Arc::clone(&doc.data);
        ui.push_id(("blocks", doc.key), |ui| {
            crate::views::blocks::blocks_ui(
                ui,
                &data,
                i,
                &doc.selection,
                &mut doc.blocks,
                &mut doc.commands,
            );
        });
    }

    pub(super) fn event_list_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let Some(i) = doc.device_index() else { return };
        let data = Arc::clone(&doc.data);
        // Scroll positions are kept per tab.
        ui.push_id(("events", doc.key), |ui| {
            crate::views::event_list::event_list_ui(
                ui,
                &data,
                i,
                &doc.selection,
                &mut doc.events,
                &mut doc.commands,
            );
        });
    }

    pub(super) fn pool_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let Some(i) = doc.device_index() else { return };
        let data = Arc::clone(&doc.data);
        // The pool chart colours blocks as the lifecycle chart colours bands.
        doc.pool.color_by = doc.lifecycle.color_by;
        ui.push_id(("pool", doc.key), |ui| {
            crate::views::pool::pool_ui(
                ui,
                &data,
                i,
                &doc.selection,
                &mut doc.pool,
                &mut doc.commands,
            );
        });
    }

    /// The range analysis: what the selected range left behind, by call stack.
    pub(super) fn range_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let (Some(i), Some((first, last))) = (doc.device_index(), doc.selection.range) else {
            return;
        };
        let Some((report, _)) = doc.range_report() else {
            return;
        };
        let data = Arc::clone(&doc.data);
        ui.horizontal(|ui| {
            ui.heading("Range");
            if ui.small_button("clear").clicked() {
                doc.commands
                    .push(crate::selection::Command::SelectRange(None));
            }
        });
        ui.label(format!("events {first} – {last}"));
        ui.label(format!(
            "{} blocks allocated here and not freed by its end: {} (largest {}, smallest {})",
            report.unreleased.len(),
            format_bytes(report.unreleased_bytes as i64),
            format_bytes(report.largest_bytes as i64),
            format_bytes(report.smallest_bytes as i64)
        ));
        // What the blocks left behind are for: a leak is rarely parameters or optimizer state.
        let lifetimes = &data.loaded.replays[i].lifetimes;
        let by_category = memsight_core::detect::breakdown(report.unreleased.iter().map(|&id| {
            (
                data.category(i, id),
                lifetimes[id as usize].requested_size_bytes,
            )
        }));
        if !by_category.is_empty() {
            ui.label(format!(
                "left behind by category: {}",
                by_category
                    .iter()
                    .map(|c| format!("{} {}", c.category.words(), format_bytes(c.bytes as i64)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        ui.label(format!(
            "{} blocks alive through the whole range: {}",
            report.alive_through.len(),
            format_bytes(report.alive_through_bytes as i64)
        ));
        ui.checkbox(&mut doc.range.dim_others, "dim every other band");
        ui.label("by call stack (click: show its largest block)");
        egui::ScrollArea::vertical()
            .id_salt("range-groups")
            .max_height(220.0)
            .show(ui, |ui| {
                egui::Grid::new("range-groups-grid")
                    .num_columns(3)
                    .striped(true)
                    .show(ui, |ui| {
                        for group in report.by_stack.iter().take(100) {
                            // The frame the findings name: the user's code, not the unwinder.
                            let top = memsight_core::frames::headline_frame(
                                &data.loaded.snapshot,
                                group.stack,
                            )
                            .unwrap_or_else(|| "(no stack)".to_string());
                            if ui.link(top).clicked() {
                                let lifetimes = &data.loaded.replays[i].lifetimes;
                                if let Some(&largest) = group
                                    .lifetimes
                                    .iter()
                                    .max_by_key(|&&id| lifetimes[id as usize].requested_size_bytes)
                                {
                                    doc.commands
                                        .push(crate::selection::Command::PickInPool(largest));
                                }
                            }
                            ui.label(format!("{}×", group.count));
                            ui.label(format_bytes(group.bytes as i64));
                            ui.end_row();
                        }
                    });
            });
        ui.separator();
    }

    pub(super) fn findings_panel_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let data = Arc::clone(&doc.data);
        if let Some(index) = crate::views::findings::findings_ui(
            ui,
            &data.findings,
            Some(&data.loaded.snapshot),
            &mut doc.findings,
        ) {
            doc.show_finding(index);
        }
    }

    pub(super) fn details_ui(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let (Some(i), Some(id)) = (doc.device_index(), doc.selection.lifetime) else {
            return;
        };
        let data = Arc::clone(&doc.data);
        let lifetime = &data.loaded.replays[i].lifetimes[id as usize];
        ui.horizontal(|ui| {
            ui.heading("Allocation");
            if ui.small_button("unpin").clicked() {
                doc.commands.push(crate::selection::Command::Unpin);
            }
        });
        lifetime_facts_ui(ui, &data, i, id);
        ui.horizontal(|ui| {
            for (what, event) in [
                ("alloc event", lifetime.alloc_event),
                ("free event", lifetime.free_completed_event),
            ] {
                if let Some(e) = event
                    && ui.button(format!("pool at {what} {e}")).clicked()
                {
                    doc.commands
                        .push(crate::selection::Command::SelectEvent(Some(e)));
                }
            }
        });
        ui.separator();
        ui.horizontal(|ui| {
            ui.checkbox(&mut doc.lifecycle.show_internal_frames, "internal frames");
            if ui.button("Copy stack").clicked() {
                ui.ctx().copy_text(stack_text(
                    &data.loaded.snapshot,
                    lifetime.stack,
                    doc.lifecycle.show_internal_frames,
                ));
            }
        });
        // The panel itself scrolls: the stack follows the facts (no second scroll area
        // inside it), wrapped at the visible edge, not at the facts' width.
        crate::views::wrapped_at_visible_edge(ui, |ui| {
            let lines = memsight_core::frames::display_frames(
                &data.loaded.snapshot,
                lifetime.stack,
                doc.lifecycle.show_internal_frames,
            );
            if lines.is_empty() {
                ui.weak("no stack recorded");
            }
            for line in lines {
                let text = if line.repeat > 1 {
                    format!("{} (×{})", line.text, line.repeat)
                } else {
                    line.text
                };
                let rich = egui::RichText::new(text).monospace();
                ui.add(egui::Label::new(if line.internal { rich.weak() } else { rich }).wrap());
            }
        });
    }

    /// The What-if panel of the active file, on the right (beside the chart, never over it):
    /// takes finished replays, starts the ones its settings call for, hands the predicted curve
    /// and pool to the charts, and draws its content. Closed, it takes the predictions off the
    /// charts.
    pub(super) fn whatif_panel(&mut self, ui: &mut Ui) {
        let ctx = ui.ctx().clone();
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let traced = doc
            .device_index()
            .filter(|&i| !doc.data.loaded.snapshot.devices[i].trace.is_empty());
        let Some(i) = traced.filter(|_| doc.whatif.open) else {
            doc.lifecycle.predicted_reserved = None;
            doc.pool.predicted = None;
            return;
        };
        let data = Arc::clone(&doc.data);
        let event = doc.selection.event.or_else(|| {
            data.loaded.replays[i]
                .event_count()
                .checked_sub(1)
                .map(|e| e as u32)
        });
        doc.whatif.poll(&ctx, &data, i, event);
        let current = doc.whatif.current(i).map(Arc::clone);
        doc.lifecycle.predicted_reserved = current.as_ref().map(|r| Arc::clone(&r.prediction));
        doc.pool.predicted = doc
            .whatif
            .predicted_pool(i, event)
            .zip(current.map(|r| r.settings.describe()));
        let width = ui.available_width();
        // Wide enough for its figures side by side; without the findings panel beside it
        // (collapsed in a narrow window), it may take the whole side budget.
        let share = if self.show_findings { 0.6 } else { 0.9 };
        let max_width = (width * (1.0 - CHART_MIN_SHARE) * share).max(220.0);
        let (rect, open) = docked_panel(
            ui,
            ("whatif", "What if"),
            ((width * 0.25).clamp(340.0, 400.0), 220.0, max_width),
            |ui| crate::views::whatif::whatif_ui(ui, &data, i, &mut doc.whatif),
        );
        self.layout.whatif = Some(rect);
        doc.whatif.open = open;
    }

    /// The memory-by-owner panel of the active file (msMemScope recordings with owners): docked
    /// on the right beside the chart, as the What-if panel is, never floating over the chart or
    /// the findings.
    pub(super) fn owners_panel(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get_mut(self.active) else {
            return;
        };
        let Some(i) = doc
            .device_index()
            .filter(|_| doc.owners.open && doc.data.has_owners())
        else {
            return;
        };
        let data = Arc::clone(&doc.data);
        let event = doc.selection.event;
        let width = ui.available_width();
        let max_width = (width * (1.0 - CHART_MIN_SHARE) * 0.6).max(220.0);
        let (_, open) = docked_panel(
            ui,
            ("owners", "Memory by owner"),
            (
                (width * 0.3).clamp(280.0, 460.0).min(max_width),
                220.0,
                max_width,
            ),
            |ui| crate::views::owners::owners_ui(ui, &data, i, event, &mut doc.owners),
        );
        doc.owners.open = open;
    }

    /// A window per opened `memory_compare_*.csv` (msMemScope's comparison of two runs).
    pub(super) fn memscope_compare_windows(&mut self, ctx: &egui::Context) {
        let mut area = ctx.content_rect();
        area.min.y = self.chart_rect.map_or(area.min.y + 64.0, |r| r.top());
        for (k, table) in self.memscope_compares.iter_mut().enumerate() {
            let mut open = table.open;
            egui::Window::new(format!("msMemScope comparison: {}", table.name))
                .open(&mut open)
                .constrain_to(area)
                .default_pos(area.left_top() + egui::vec2(24.0 + 24.0 * k as f32, 24.0))
                .default_width((area.width() * 0.6).clamp(360.0, 760.0))
                .default_height(area.height() * 0.8)
                .show(ctx, |ui| {
                    crate::views::memscope_compare::compare_ui(ui, table);
                });
            table.open = open;
        }
        self.memscope_compares.retain(|t| t.open);
    }

    pub(super) fn warnings_panel(&mut self, ui: &mut Ui) {
        let Some(doc) = self.docs.get(self.active) else {
            return;
        };
        // Docked on the right, as tall as its lines need: never an empty box over the chart.
        let width = ui.available_width();
        let max_width = (width * (1.0 - CHART_MIN_SHARE) * 0.6).max(200.0);
        let (_, open) = docked_panel(
            ui,
            ("warnings", "Warnings"),
            (
                (width * 0.25).clamp(240.0, 420.0).min(max_width),
                200.0,
                max_width,
            ),
            |ui| {
                ui.weak("Esc closes");
                if doc.data.loaded.warnings.is_empty() {
                    ui.label("none");
                }
                for w in &doc.data.loaded.warnings {
                    ui.label(w.to_string());
                    ui.separator();
                }
            },
        );
        self.show_warnings = open;
    }
}

/// A panel docked right of the chart (What if, Memory by owner, Warnings), never over it: a
/// heading with a close button, then `content`, whose text wraps at the panel's width and whose
/// wider content scrolls sideways (it never pushes the panel over the chart or off-screen). Solid
/// scroll bars take their own room: a floating one lay over the last row (the what-if sweep's
/// button at 800×500) and took its clicks. Returns where the panel is and whether it stays open.
fn docked_panel(
    ui: &mut Ui,
    (id, title): (&str, &str),
    (default_width, min_width, max_width): (f32, f32, f32),
    content: impl FnOnce(&mut Ui),
) -> (Rect, bool) {
    let mut open = true;
    let panel = egui::Panel::right(id)
        .resizable(true)
        .default_size(default_width)
        .min_size(min_width)
        .max_size(max_width)
        .show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.heading(title);
                if ui.small_button("close").clicked() {
                    open = false;
                }
            });
            let visible_width = ui.available_width();
            ui.spacing_mut().scroll = egui::style::ScrollStyle::solid();
            egui::ScrollArea::both()
                .id_salt((id, "scroll"))
                .auto_shrink([false, false])
                .show(ui, |ui| {
                    ui.set_max_width(visible_width);
                    content(ui);
                });
        });
    (panel.response.rect, open)
}

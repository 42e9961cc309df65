//! Compare tabs: File → Compare with… (and a snapshot tab's context menu) opens one for the
//! active snapshot and another open one; while `active_compare` is set the window shows it.

use std::sync::Arc;

use egui::Ui;

use super::{MemsightApp, View};
use crate::views::compare::{CompareDoc, compare_ui};

impl MemsightApp {
    /// Opens a compare tab: document `a` (A) against document `b` (B), each on the device it
    /// shows. An error notice when either shows a device without a trace.
    pub fn compare(&mut self, ctx: &egui::Context, a: usize, b: usize) {
        let (Some(doc_a), Some(doc_b)) = (self.docs.get(a), self.docs.get(b)) else {
            return;
        };
        let side = |doc: &crate::document::Document| -> Result<usize, String> {
            let i = doc
                .device_index()
                .ok_or_else(|| format!("{} has no device to compare", doc.name))?;
            if doc.data.loaded.snapshot.devices[i].trace.is_empty() {
                return Err(format!(
                    "{} has no trace on device {} to compare (it records only the final pool)",
                    doc.name, doc.device
                ));
            }
            Ok(i)
        };
        match (side(doc_a), side(doc_b)) {
            (Ok(ia), Ok(ib)) => {
                self.compares.push(CompareDoc::new(
                    ctx,
                    (Arc::clone(&doc_a.data), doc_a.name.clone()),
                    (Arc::clone(&doc_b.data), doc_b.name.clone()),
                    [ia, ib],
                ));
                self.active_compare = Some(self.compares.len() - 1);
                self.active_profiler = None;
            }
            (Err(e), _) | (_, Err(e)) => self.notices.error(e),
        }
    }

    /// The compare tabs, after the file tabs in the menu bar.
    pub(super) fn compare_tabs_ui(&mut self, ui: &mut Ui, reveal: bool) {
        for i in 0..self.compares.len() {
            let doc = &self.compares[i];
            let selected = self.active_tab() == super::TabId::Compare(i);
            if super::menus::tab_label(ui, selected, &doc.name, reveal)
                .on_hover_text(format!("A: {}\nB: {}", doc.names[0], doc.names[1]))
                .clicked()
            {
                self.show_tab(super::TabId::Compare(i));
            }
        }
    }

    /// Opens a compare tab of two devices of document `a` (indexes into its devices).
    fn compare_devices(&mut self, ctx: &egui::Context, a: usize, devices: [usize; 2]) {
        let Some(doc) = self.docs.get(a) else { return };
        let name = |i: usize| {
            format!(
                "{} (device {})",
                doc.name, doc.data.loaded.snapshot.devices[i].ordinal
            )
        };
        self.compares.push(CompareDoc::new(
            ctx,
            (Arc::clone(&doc.data), name(devices[0])),
            (Arc::clone(&doc.data), name(devices[1])),
            devices,
        ));
        self.active_compare = Some(self.compares.len() - 1);
        self.active_profiler = None;
    }

    /// "Compare with" entries for document `a`: every other open snapshot, and the other devices
    /// of this one that have a trace.
    pub(super) fn compare_menu_ui(&mut self, ui: &mut Ui, a: usize) {
        let mut offered = false;
        if let Some(doc) = self.docs.get(a)
            && let Some(shown) = doc.device_index()
        {
            let devices = &doc.data.loaded.snapshot.devices;
            let others: Vec<(usize, u32)> = (0..devices.len())
                .filter(|&i| i != shown && !devices[i].trace.is_empty())
                .map(|i| (i, devices[i].ordinal))
                .collect();
            for (i, ordinal) in others {
                offered = true;
                if ui
                    .button(format!("device {ordinal} of this file"))
                    .clicked()
                {
                    self.compare_devices(ui.ctx(), a, [shown, i]);
                    ui.close();
                }
            }
        }
        let others: Vec<(usize, String)> = self
            .docs
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != a)
            .map(|(i, d)| (i, d.name.clone()))
            .collect();
        if others.is_empty() && !offered {
            ui.weak("open another snapshot first (File → Open…)");
        }
        for (b, name) in others {
            if ui.button(name).clicked() {
                self.compare(ui.ctx(), a, b);
                ui.close();
            }
        }
    }

    /// A compare tab fills the window below the menu bar.
    pub(super) fn compare_root(&mut self, ui: &mut Ui, c: usize) {
        if self.view == View::App {
            egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
        }
        egui::CentralPanel::default().show(ui, |ui| {
            self.chart_rect = Some(ui.available_rect_before_wrap());
            compare_ui(ui, &mut self.compares[c]);
        });
        self.layout.chart = self.chart_rect;
        if self.is_busy() {
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(50));
        }
    }
}

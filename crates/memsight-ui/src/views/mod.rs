//! The views of an open file, each drawing one part of the window from a document's state: the
//! lifecycle chart, the pool-state chart, the event list, the live blocks (`blocks`), segments
//! over time (`segments`), the findings; and a profiler run's
//! curves and tables; two files compared (`compare`); the what-if replay (`whatif`); memory by
//! owner (`owners`, msMemScope recordings). Views know nothing of menus, dialogs or tabs (`app`), and read the data
//! through `Prepared` only.

pub mod axes;
pub mod blocks;
pub mod compare;
pub mod event_list;
pub mod findings;
pub mod lifecycle;
pub mod memscope_compare;
pub mod owners;
pub mod pool;
pub mod profiler;
pub mod run;
pub mod segments;
pub mod whatif;

/// Whether this frame is drawn for an exported picture: views leave out what only a pointer
/// uses (the legend's fold button). Set by the app once a frame.
pub fn exporting(ctx: &egui::Context) -> bool {
    ctx.data(|d| d.get_temp::<bool>(egui::Id::unique(EXPORTING_ID)))
        .unwrap_or(false)
}

/// Marks this frame as drawn for an exported picture, or not (see [`exporting`]).
pub fn set_exporting(ctx: &egui::Context, on: bool) {
    ctx.data_mut(|d| d.insert_temp(egui::Id::unique(EXPORTING_ID), on));
}

const EXPORTING_ID: &str = "memsight-exporting";

/// Runs `add_contents` with text wrapping at the visible edge of a scroll area that also scrolls
/// sideways: a table wider than the area, placed above, would otherwise set the wrap width, and
/// the wrapped lines would be cut again.
pub fn wrapped_at_visible_edge<R>(
    ui: &mut egui::Ui,
    add_contents: impl FnOnce(&mut egui::Ui) -> R,
) -> R {
    let width = (ui.clip_rect().right() - ui.cursor().left()).max(120.0);
    ui.scope(|ui| {
        ui.set_max_width(width);
        add_contents(ui)
    })
    .inner
}

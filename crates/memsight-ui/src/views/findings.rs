//! The findings panel: what the detectors found, most severe first. Clicking a finding puts its
//! evidence on screen through the selection model: its events become the analysed range and the
//! chart zooms to them, the pool shows its focus event, and its block is pinned when it has one.

use egui::{RichText, Ui};
use memsight_core::detect::{Finding, FindingKind, Severity};
use memsight_core::replay::DeviceReplay;

use crate::palette;
use crate::selection::Command;

/// Which finding is open.
#[derive(Default)]
pub struct FindingsState {
    pub selected: Option<usize>,
}

/// The commands that show `finding`'s evidence (on its own device's replay).
pub fn commands_for(finding: &Finding, replay: &DeviceReplay) -> Vec<Command> {
    let (first, last) = finding.events;
    let mut commands = Vec::new();
    // A range is selected only where "what it left behind" is the evidence; a whole-file
    // finding (settings, iterations, imbalance …) would open an analysis that says nothing.
    let range_is_evidence = matches!(
        finding.kind,
        FindingKind::Leak | FindingKind::Fragmentation | FindingKind::AllocatorStall
    );
    // (A previous finding's range is cleared, so the panel never speaks of other events.)
    commands.push(Command::SelectRange(
        (first != last && range_is_evidence).then_some((first, last)),
    ));
    let focus = finding.focus_event.unwrap_or(last);
    commands.push(Command::SelectEvent(Some(focus)));
    // The block behind the finding: the outlier request, or the first block a leak left behind.
    let block_event = match finding.kind {
        FindingKind::OutlierAllocation => finding.focus_event,
        FindingKind::Leak => Some(first),
        _ => None,
    };
    if let Some(id) = block_event
        .and_then(|e| replay.event_lifetime.get(e as usize).copied())
        .filter(|&id| (id as usize) < replay.lifetimes.len())
    {
        commands.push(Command::PickInPool(id));
    }
    commands.push(Command::ShowEvents(first, last.max(focus)));
    commands
}

/// `name (/a/b/file.py:12)` → `name (file.py:12)`: the panel is narrow; the details keep paths.
fn without_directories(frame: &str) -> String {
    match frame.split_once(" (") {
        Some((name, place)) => {
            let file = place.rsplit(['/', '\\']).next().unwrap_or(place);
            format!("{name} ({file}")
        }
        None => frame.to_string(),
    }
}

fn severity_text(severity: Severity) -> RichText {
    match severity {
        Severity::Error => RichText::new("ERROR").color(palette::ERROR_TEXT).strong(),
        Severity::Warning => RichText::new("WARN").color(palette::WARNING_TEXT).strong(),
        Severity::Info => RichText::new("INFO").color(palette::AXIS),
    }
}

/// Draws the list (`snapshot`: where stacks are resolved; `None` for profiler data); returns the
/// index of the finding clicked this frame.
pub fn findings_ui(
    ui: &mut Ui,
    findings: &[Finding],
    snapshot: Option<&memsight_core::Snapshot>,
    state: &mut FindingsState,
) -> Option<usize> {
    ui.heading(format!("Findings ({})", findings.len()));
    if findings.is_empty() {
        ui.weak("The detectors found no leak, fragmentation, allocator stall, OOM or outlier allocation.");
        return None;
    }
    ui.weak("Click one to show its evidence.");
    ui.separator();
    let mut clicked = None;
    egui::ScrollArea::vertical()
        .id_salt("findings-list")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            for (i, f) in findings.iter().enumerate() {
                let open = state.selected == Some(i);
                ui.horizontal_wrapped(|ui| {
                    ui.label(severity_text(f.severity));
                    if ui.selectable_label(open, &f.title).clicked() {
                        state.selected = Some(i);
                        clicked = Some(i);
                    }
                });
                let place = snapshot
                    .and_then(|s| memsight_core::frames::headline_frame(s, f.stack))
                    .map_or_else(String::new, |frame| {
                        format!(" · {}", without_directories(&frame))
                    });
                match (&f.rank, f.time_range_us) {
                    (Some(rank), Some((a, b))) => {
                        let lines = f
                            .source_lines
                            .as_ref()
                            .map_or_else(String::new, |l| format!(" · {}", l.words()));
                        ui.weak(format!(
                            "{rank} · device {} · over {:.3} s{lines}",
                            f.device,
                            (b - a) / 1e6
                        ));
                    }
                    // A rank's finding about its files (a static plan, rounded timestamps):
                    // no span of samples to give.
                    (Some(rank), None) => {
                        ui.weak(format!("{rank} · device {}", f.device));
                    }
                    // A finding with no event of its own (a pool without a trace) names the device
                    // alone, as `analyze` does.
                    (None, _) if f.events == (0, 0) && f.focus_event.is_none() => {
                        ui.weak(format!(
                            "{}{place}",
                            memsight_core::detect::devices_words(f.device, &f.devices)
                        ));
                    }
                    (None, _) => {
                        ui.weak(format!(
                            "{} · events {}–{}{place}",
                            memsight_core::detect::devices_words(f.device, &f.devices),
                            f.events.0,
                            f.events.1
                        ));
                    }
                }
                if open {
                    ui.label(&f.summary);
                    ui.label(RichText::new(format!("Fix: {}", f.suggestion)).italics());
                    if !f.evidence.is_empty() {
                        ui.collapsing("Evidence", |ui| {
                            for line in &f.evidence {
                                ui.weak(line);
                            }
                        });
                    }
                }
                ui.separator();
            }
        });
    clicked
}

#[cfg(test)]
mod tests {
    use memsight_core::detect::{FindingKind, analyze};
    use memsight_core::r#gen::{Scenario, generate_loaded};

    use super::{commands_for, without_directories};
    use crate::selection::{Command, Selection};

    #[test]
    fn a_leak_selects_its_range_pins_its_first_block_and_zooms() {
        let (g, loaded) = generate_loaded(Scenario::Leak, 20_000, 3);
        let leak = analyze(&loaded)
            .into_iter()
            .find(|f| f.kind == FindingKind::Leak)
            .expect("the injected leak");
        let replay = &loaded.replays[0];
        let commands = commands_for(&leak, replay);
        let mut selection = Selection::default();
        selection.apply(
            commands.iter().copied(),
            &loaded.snapshot.devices[0],
            replay,
        );
        assert_eq!(selection.range, Some(leak.events));
        let pinned = selection.lifetime.expect("a block pinned");
        let truth = g.truth.leak.expect("injected");
        assert_eq!(
            replay.lifetimes[pinned as usize].alloc_event.map(u64::from),
            truth.alloc_events.first().copied()
        );
        assert_eq!(selection.zoom_to, Some(leak.events));
        assert!(commands.contains(&Command::SelectEvent(Some(leak.events.1))));
    }

    #[test]
    fn frames_lose_their_directories() {
        assert_eq!(
            without_directories("step (/home/u/train.py:11)"),
            "step (train.py:11)"
        );
        assert_eq!(
            without_directories(r"fwd (D:\m\model.py:3)"),
            "fwd (model.py:3)"
        );
        assert_eq!(without_directories("at::mm"), "at::mm");
    }

    #[test]
    fn an_oom_shows_the_pool_at_the_failure() {
        let (g, loaded) = generate_loaded(Scenario::Oom, 20_000, 1);
        let oom = analyze(&loaded)
            .into_iter()
            .find(|f| f.kind == FindingKind::Oom)
            .expect("the injected oom");
        let replay = &loaded.replays[0];
        let mut selection = Selection::default();
        selection.apply(
            commands_for(&oom, replay),
            &loaded.snapshot.devices[0],
            replay,
        );
        let event = g.truth.oom.expect("injected").event;
        assert_eq!(selection.event.map(u64::from), Some(event));
        assert_eq!(selection.range, None);
        assert_eq!(selection.lifetime, None);
    }
}

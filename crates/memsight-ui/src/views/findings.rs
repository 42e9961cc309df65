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
        FindingKind::Leak
            | FindingKind::BoundedGrowth
            | FindingKind::Fragmentation
            | FindingKind::AllocatorStall
            | FindingKind::EmptyCache
    );
    // (A previous finding's range is cleared, so the panel never speaks of other events.)
    commands.push(Command::SelectRange(
        (first != last && range_is_evidence).then_some((first, last)),
    ));
    let focus = finding.focus_event.unwrap_or(last);
    commands.push(Command::SelectEvent(Some(focus)));
    // The block behind the finding: the outlier request, the first block a leak left behind,
    // or the flagged block an inefficiency finding names.
    let block_event = match finding.kind {
        FindingKind::OutlierAllocation | FindingKind::InefficientMemory => finding.focus_event,
        FindingKind::Leak | FindingKind::BoundedGrowth => Some(first),
        _ => None,
    };
    let block = block_event
        .and_then(|e| replay.event_lifetime.get(e as usize).copied())
        .filter(|&id| (id as usize) < replay.lifetimes.len());
    if let Some(id) = block {
        commands.push(Command::PickInPool(id));
    }
    // An inefficiency finding spans the whole recording: its block's life is what to look at.
    let shown = match (finding.kind, block) {
        (FindingKind::InefficientMemory, Some(id)) => {
            let l = &replay.lifetimes[id as usize];
            let born = l.alloc_event.unwrap_or(first);
            let gone = l
                .free_completed_event
                .or(l.free_requested_event)
                .unwrap_or(last);
            (born.min(gone), born.max(gone))
        }
        _ => (first, last.max(focus)),
    };
    let (a, b) = with_context(shown, replay.event_count());
    commands.push(Command::ShowEvents(a, b));
    commands
}

/// The events to zoom to for evidence `first..=last` of a trace of `events`: at least a
/// twentieth of the trace (and 200 events) around it. A peak or an OOM is one event: zoomed to
/// it alone, the chart is a flat wall; with the events around it, it is a peak.
pub fn with_context((first, last): (u32, u32), events: usize) -> (u32, u32) {
    let Some(end) = (events as u64).checked_sub(1) else {
        return (first, last);
    };
    let (first, last) = (u64::from(first).min(end), u64::from(last).min(end));
    let want = (last - first + 1)
        .max((events as u64 / 20).max(200))
        .min(end + 1);
    let pad = (want - (last - first + 1)) / 2;
    let a = first.saturating_sub(pad);
    let b = (a + want - 1).min(end);
    let a = (b + 1).saturating_sub(want);
    (a as u32, b as u32)
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
                    // One event is "event 36", as `analyze` says it, not "events 36–36".
                    (None, _) => {
                        let (first, last) = f.events;
                        let span = if first == last {
                            format!("event {first}")
                        } else {
                            format!("events {first}–{last}")
                        };
                        ui.weak(format!(
                            "{} · {span}{place}",
                            memsight_core::detect::devices_words(f.device, &f.devices),
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

    use super::{commands_for, with_context, without_directories};
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
        // Zoomed with the events around it (a twentieth of the trace), not to the one event.
        let (a, b) = selection.zoom_to.expect("zoomed");
        let n = replay.event_count() as u32;
        assert!(u64::from(a) <= event && event <= u64::from(b), "{a}..{b}");
        assert!(b - a + 1 >= (n / 20).min(n), "{a}..{b} of {n}");
    }

    #[test]
    fn a_single_event_is_shown_with_the_events_around_it() {
        assert_eq!(with_context((500, 500), 20_000), (1, 1000));
        assert_eq!(with_context((5000, 5000), 20_000), (4501, 5500));
        assert_eq!(with_context((19_990, 19_999), 20_000), (19_000, 19_999));
        // A short trace: all of it; a wide piece of evidence: itself.
        assert_eq!(with_context((10, 12), 50), (0, 49));
        assert_eq!(with_context((100, 9000), 20_000), (100, 9000));
        assert_eq!(with_context((3, 3), 0), (3, 3));
    }

    /// Issue 36, item 7: msMemScope's inefficient memory pins a block it flags (the largest one
    /// live at the peak) and zooms to that block's life, not to the whole recording.
    #[test]
    fn inefficient_memory_pins_a_flagged_block_and_shows_its_life() {
        let dir = std::env::temp_dir().join(format!("memsight-ineff-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        memsight_core::r#gen::memscope::write(
            &dir,
            &memsight_core::r#gen::memscope::MemscopeOptions {
                events: 20_000,
                devices: 1,
                seed: 1,
                db: false,
            },
        )
        .expect("generated");
        let loaded = memsight_core::Loaded::new(
            memsight_core::memscope::load(&dir).expect("the recording loads"),
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
        let finding = analyze(&loaded)
            .into_iter()
            .find(|f| f.kind == FindingKind::InefficientMemory)
            .expect("the generator's inefficient blocks");
        let replay = &loaded.replays[0];
        let mut selection = Selection::default();
        selection.apply(
            commands_for(&finding, replay),
            &loaded.snapshot.devices[0],
            replay,
        );
        let pinned = selection.lifetime.expect("a flagged block pinned");
        let block = &replay.lifetimes[pinned as usize];
        let born = block.alloc_event.expect("allocated in the trace");
        let flagged = loaded.snapshot.devices[0]
            .block_use
            .iter()
            .find(|u| u.alloc_event == born)
            .expect("the pinned block is one msMemScope judged");
        assert_ne!(flagged.recorded_flags | flagged.flags, 0);
        let (a, b) = selection.zoom_to.expect("zoomed");
        assert!(a <= born, "{a}..{b} shows its allocation at {born}");
        let gone = block.free_completed_event.or(block.free_requested_event);
        if let Some(gone) = gone {
            assert!(gone <= b, "{a}..{b} shows its free at {gone}");
        }
        assert!(
            (a, b) != finding.events || gone.is_none(),
            "not the whole span of every flagged block"
        );
    }
}

//! One selection model per document, shared by every view: the selected event (whose pool state
//! is shown) and the pinned allocation. Views read it and change it only through [`Command`]s,
//! which the app applies once per frame, so linked views never disagree within a frame.

use memsight_core::model::{Action, Device};
use memsight_core::replay::{DeviceReplay, LifetimeId};

/// What the user picked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// The event whose pool state is shown; `None`: the end of the trace.
    pub event: Option<u32>,
    /// The pinned allocation.
    pub lifetime: Option<LifetimeId>,
    /// The lifecycle chart should bring the pinned allocation into view (set by the pool chart).
    pub reveal: bool,
    /// Events `first..=last` selected for range analysis.
    pub range: Option<(u32, u32)>,
    /// The lifecycle chart should zoom to events `first..=last` (set by the findings panel).
    pub zoom_to: Option<(u32, u32)>,
    /// Bytes `address .. address + size` the pool outlines (a reserved range clicked in the
    /// Segments tab: a range mapped into an expandable segment, not the whole segment), until
    /// the event or the pinned block changes.
    pub outlined_range: Option<(u64, u64)>,
}

/// A change to the selection, from any view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// A click on the lifecycle chart: the state shown at that column, and the band under the
    /// pointer (or none).
    PickInChart {
        event: Option<u32>,
        lifetime: Option<LifetimeId>,
    },
    /// A click on a block of the pool chart: pin it and show it on the lifecycle chart.
    PickInPool(LifetimeId),
    SelectEvent(Option<u32>),
    /// A reserved range clicked in the Segments tab: the pool after `event` (the one that
    /// reserved it), no block pinned, and the range outlined.
    ShowSegment {
        event: Option<u32>,
        address: u64,
        size_bytes: u64,
    },
    /// Move the selected event by this many events (arrow keys).
    Step(i64),
    /// The next (`true`) or previous segment step from the selected event: a `segment_alloc`,
    /// or on expandable segments a `segment_map` / `segment_unmap` ([`is_segment_step`]).
    SegmentStep {
        forward: bool,
    },
    Unpin,
    /// Events `first..=last` for range analysis (`None`: clear).
    SelectRange(Option<(u32, u32)>),
    /// The lifecycle chart has brought the pinned allocation into view.
    Revealed,
    /// Zoom the lifecycle chart to events `first..=last`.
    ShowEvents(u32, u32),
    /// The lifecycle chart has zoomed as asked.
    Shown,
}

/// The events the pool's segment buttons step through: where the pool grew (`segment_alloc`,
/// `segment_map`) or gave pages back inside an expandable segment (`segment_unmap`).
/// `segment_free` is left out: `empty_cache` frees many at once, and stepping through each would
/// bury the allocations.
pub fn is_segment_step(action: Action) -> bool {
    matches!(
        action,
        Action::SegmentAlloc | Action::SegmentMap | Action::SegmentUnmap
    )
}

impl Selection {
    /// Applies `commands` in order; events are clamped to the trace.
    pub fn apply(
        &mut self,
        commands: impl IntoIterator<Item = Command>,
        device: &Device,
        replay: &DeviceReplay,
    ) {
        let n = device.trace.len();
        let last = n.checked_sub(1).map(|l| l as u32);
        let clamp = |e: Option<u32>| e.and_then(|e| last.map(|l| e.min(l)));
        for command in commands {
            if !matches!(
                command,
                Command::Revealed | Command::Shown | Command::SelectRange(_)
            ) {
                self.outlined_range = None;
            }
            match command {
                Command::PickInChart { event, lifetime } => {
                    self.event = clamp(event);
                    self.lifetime = lifetime;
                }
                Command::PickInPool(id) => {
                    if (id as usize) < replay.lifetimes.len() {
                        self.lifetime = Some(id);
                        self.reveal = true;
                    }
                }
                Command::SelectEvent(event) => self.event = clamp(event),
                Command::ShowSegment {
                    event,
                    address,
                    size_bytes,
                } => {
                    self.event = clamp(event);
                    self.lifetime = None;
                    self.outlined_range = Some((address, size_bytes));
                }
                Command::Step(delta) => {
                    let current = i64::from(self.event.or(last).unwrap_or(0));
                    let target = (current + delta).clamp(0, n.saturating_sub(1) as i64);
                    self.event = clamp(Some(target as u32));
                }
                Command::SegmentStep { forward } => {
                    // With no event selected, forward starts before the first event and backward
                    // after the last.
                    let is_step = |i: &usize| is_segment_step(device.trace.action[*i]);
                    let found = if forward {
                        (self.event.map_or(0, |e| e as usize + 1)..n).find(is_step)
                    } else {
                        (0..self.event.map_or(n, |e| e as usize))
                            .rev()
                            .find(is_step)
                    };
                    if let Some(i) = found {
                        self.event = Some(i as u32);
                    }
                }
                Command::Unpin => self.lifetime = None,
                Command::SelectRange(range) => {
                    self.range = range
                        .and_then(|(a, b)| Some((clamp(Some(a.min(b)))?, clamp(Some(a.max(b)))?)));
                }
                Command::Revealed => self.reveal = false,
                Command::ShowEvents(a, b) => {
                    self.zoom_to = clamp(Some(a.min(b))).zip(clamp(Some(a.max(b))));
                }
                Command::Shown => self.zoom_to = None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memsight_core::Loaded;
    use memsight_core::r#gen::{self, Scenario};

    fn loaded() -> Loaded {
        r#gen::generate_loaded(Scenario::Fragmentation, 4000, 2).1
    }

    fn check(commands: &[Command], expected: &Selection) {
        let l = loaded();
        let mut selection = Selection::default();
        selection.apply(
            commands.iter().copied(),
            &l.snapshot.devices[0],
            &l.replays[0],
        );
        assert_eq!(&selection, expected, "{commands:?}");
    }

    #[test]
    fn picking_in_the_chart_selects_the_event_and_the_band() {
        check(
            &[Command::PickInChart {
                event: Some(12),
                lifetime: Some(3),
            }],
            &Selection {
                event: Some(12),
                lifetime: Some(3),
                ..Selection::default()
            },
        );
        check(
            &[Command::PickInChart {
                event: Some(99_999),
                lifetime: None,
            }],
            &Selection {
                event: Some(3999),
                ..Selection::default()
            },
        );
    }

    #[test]
    fn picking_in_the_pool_pins_and_asks_for_a_reveal_until_done() {
        check(
            &[Command::PickInPool(5)],
            &Selection {
                lifetime: Some(5),
                reveal: true,
                ..Selection::default()
            },
        );
        check(
            &[Command::PickInPool(5), Command::Revealed],
            &Selection {
                lifetime: Some(5),
                ..Selection::default()
            },
        );
        check(&[Command::PickInPool(u32::MAX)], &Selection::default());
    }

    #[test]
    fn ranges_are_ordered_and_clamped() {
        check(
            &[Command::SelectRange(Some((900, 10)))],
            &Selection {
                range: Some((10, 900)),
                ..Selection::default()
            },
        );
        check(
            &[Command::SelectRange(Some((10, 99_999)))],
            &Selection {
                range: Some((10, 3999)),
                ..Selection::default()
            },
        );
        check(
            &[
                Command::SelectRange(Some((1, 2))),
                Command::SelectRange(None),
            ],
            &Selection::default(),
        );
    }

    #[test]
    fn stepping_stays_inside_the_trace() {
        check(
            &[Command::SelectEvent(Some(10)), Command::Step(-3)],
            &Selection {
                event: Some(7),
                ..Selection::default()
            },
        );
        check(
            &[Command::SelectEvent(Some(2)), Command::Step(-30)],
            &Selection {
                event: Some(0),
                ..Selection::default()
            },
        );
        check(
            &[Command::Step(5)],
            &Selection {
                event: Some(3999),
                ..Selection::default()
            },
        );
    }

    #[test]
    fn segment_steps_on_expandable_segments_land_on_maps_and_unmaps() {
        // An expandable-segment run: the generator maps and unmaps pages, never allocates a
        // segment. The expected events are read from the trace, not from the stepping code.
        let l = r#gen::generate_loaded(Scenario::Expandable, 20_000, 3).1;
        let trace = &l.snapshot.devices[0].trace;
        let steps: Vec<u32> = (0..trace.len())
            .filter(|&i| matches!(trace.action[i], Action::SegmentMap | Action::SegmentUnmap))
            .map(|i| i as u32)
            .collect();
        assert!(
            !trace.action.contains(&Action::SegmentAlloc) && steps.len() >= 2,
            "the run maps pages and allocates no segment"
        );
        assert!(
            trace.action.contains(&Action::SegmentUnmap),
            "its empty_cache() calls unmap pages"
        );
        let mut selection = Selection::default();
        let mut visited = Vec::new();
        for _ in 0..=steps.len() {
            selection.apply(
                [Command::SegmentStep { forward: true }],
                &l.snapshot.devices[0],
                &l.replays[0],
            );
            visited.push(selection.event.expect("a step lands on an event"));
        }
        visited.dedup();
        assert_eq!(
            visited, steps,
            "forward visits every map and unmap once, in order"
        );
        selection.apply(
            [Command::SegmentStep { forward: false }],
            &l.snapshot.devices[0],
            &l.replays[0],
        );
        assert_eq!(selection.event, steps.iter().rev().nth(1).copied());
    }

    #[test]
    fn segment_alloc_jumps_land_on_segment_allocs() {
        let l = loaded();
        let trace = &l.snapshot.devices[0].trace;
        let allocs: Vec<u32> = (0..trace.len())
            .filter(|&i| trace.action[i] == Action::SegmentAlloc)
            .map(|i| i as u32)
            .collect();
        assert!(allocs.len() >= 2, "the scenario allocates segments");
        let mut selection = Selection::default();
        selection.apply(
            [Command::SegmentStep { forward: true }],
            &l.snapshot.devices[0],
            &l.replays[0],
        );
        assert_eq!(
            selection.event,
            Some(allocs[0]),
            "from nothing selected: the first one"
        );
        selection.apply(
            [
                Command::SelectEvent(Some(0)),
                Command::SegmentStep { forward: true },
            ],
            &l.snapshot.devices[0],
            &l.replays[0],
        );
        assert_eq!(selection.event, allocs.iter().copied().find(|&a| a > 0));
        selection.apply(
            [
                Command::SegmentStep { forward: true },
                Command::SegmentStep { forward: false },
            ],
            &l.snapshot.devices[0],
            &l.replays[0],
        );
        assert_eq!(selection.event, allocs.iter().copied().find(|&a| a > 0));
    }
}

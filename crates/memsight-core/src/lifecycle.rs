//! Layout of the memory-block lifecycle chart, the "falling stack" users know from `PyTorch`'s
//! viewer and `MindStudio` Insight: live allocations stacked in allocation order (those alive before
//! the trace at the bottom); when one is freed, the bands above it fall.
//!
//! The layout is computed per screen column, so its cost is bounded by the screen, not the trace:
//! each column shows the stack at the event of the column where it peaks (so spikes
//! are never hidden), and consecutive bands thinner than a pixel merge into one aggregate band
//! instead of being dropped. Columns are laid out in parallel chunks, each starting from the
//! replay's nearest checkpoint.

use std::collections::BTreeMap;
use std::ops::Range;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::model::{Action, Device};
use crate::replay::{DeviceReplay, LifetimeId};

/// Stacking order of every lifetime of one device: alive-before-the-trace first (by address),
/// then by `alloc` event.
#[derive(Clone, Debug)]
pub struct StackOrder {
    rank: Vec<u32>,
}

impl StackOrder {
    pub fn new(replay: &DeviceReplay) -> Self {
        let lifetimes = &replay.lifetimes;
        let mut order: Vec<LifetimeId> = (0..lifetimes.len() as LifetimeId).collect();
        order.par_sort_unstable_by_key(|&id| {
            let l = &lifetimes[id as usize];
            (l.alloc_event.map_or(0, |e| u64::from(e) + 1), l.addr, id)
        });
        let mut rank = vec![0; lifetimes.len()];
        for (r, &id) in order.iter().enumerate() {
            rank[id as usize] = r as u32;
        }
        Self { rank }
    }

    pub fn rank(&self, id: LifetimeId) -> u32 {
        self.rank[id as usize]
    }
}

/// What a run of a column shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Band {
    /// One allocation.
    Lifetime(LifetimeId),
    /// Consecutive allocations each thinner than a pixel, merged.
    Merged {
        count: u32,
        /// The largest of them: its call stack colours the run.
        largest: LifetimeId,
    },
}

/// A vertical stretch of one column, in bytes from the bottom of the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub y0_bytes: u64,
    pub y1_bytes: u64,
    pub band: Band,
}

/// One screen column of the chart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Column {
    /// The event whose state the column shows (`None`: before the first event).
    pub event: Option<u32>,
    /// Bottom to top, only those that overlap the requested byte range.
    pub runs: Vec<Run>,
    /// Requested bytes of the live blocks in the shown state, pending frees included: the top of
    /// the stack, equal to the active bytes.
    pub stack_bytes: u64,
    /// Highest reserved bytes over the column's events (or at the shown state when it has none).
    pub reserved_max_bytes: i64,
    /// `segment_*` events in the column (ticks on the reserved line).
    pub segment_events: u32,
    /// `oom` events in the column.
    pub oom_events: u32,
    /// `snapshot` events in the column.
    pub snapshot_events: u32,
}

/// What to lay out: one event range per screen column (half-open, in order, possibly empty) and
/// the visible byte range.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutRequest {
    pub columns: Vec<Range<u32>>,
    pub y_min_bytes: f64,
    pub y_max_bytes: f64,
    pub height_px: f32,
}

/// Columns per parallel chunk: small enough to spread over the cores, large enough that the
/// replay to the chunk's start is amortized.
const CHUNK_COLUMNS: usize = 64;

/// Lays out the columns of `request` (in parallel).
pub fn layout(
    device: &Device,
    replay: &DeviceReplay,
    order: &StackOrder,
    request: &LayoutRequest,
) -> Vec<Column> {
    let bytes_per_px = ((request.y_max_bytes - request.y_min_bytes)
        / f64::from(request.height_px.max(1.0)))
    .max(1.0);
    request
        .columns
        .par_chunks(CHUNK_COLUMNS)
        .flat_map_iter(|chunk| {
            ChunkSweep::new(device, replay, order, chunk, request, bytes_per_px).run()
        })
        .collect()
}

struct ChunkSweep<'a> {
    device: &'a Device,
    replay: &'a DeviceReplay,
    order: &'a StackOrder,
    columns: &'a [Range<u32>],
    y_min: f64,
    y_max: f64,
    bytes_per_px: f64,
    /// Live allocations by stacking rank.
    live: BTreeMap<u32, LifetimeId>,
    by_addr: FxHashMap<u64, u32>,
    stack_bytes: u64,
    /// Events applied so far: the state is "after event `applied - 1`".
    applied: u32,
}

impl<'a> ChunkSweep<'a> {
    fn new(
        device: &'a Device,
        replay: &'a DeviceReplay,
        order: &'a StackOrder,
        columns: &'a [Range<u32>],
        request: &LayoutRequest,
        bytes_per_px: f64,
    ) -> Self {
        let start = columns.first().map_or(0, |c| c.start);
        let mut sweep = Self {
            device,
            replay,
            order,
            columns,
            y_min: request.y_min_bytes,
            y_max: request.y_max_bytes,
            bytes_per_px,
            live: BTreeMap::new(),
            by_addr: FxHashMap::default(),
            stack_bytes: 0,
            applied: start,
        };
        for (addr, id) in replay.live_after(device, start.checked_sub(1)) {
            sweep.insert(addr, id);
        }
        sweep
    }

    fn insert(&mut self, addr: u64, id: LifetimeId) {
        let rank = self.order.rank(id);
        if let Some(old) = self.by_addr.insert(addr, rank) {
            self.remove_rank(old);
        }
        self.live.insert(rank, id);
        self.stack_bytes += self.replay.lifetimes[id as usize].requested_size_bytes;
    }

    fn remove_rank(&mut self, rank: u32) {
        if let Some(id) = self.live.remove(&rank) {
            self.stack_bytes -= self.replay.lifetimes[id as usize].requested_size_bytes;
        }
    }

    /// Applies events up to and including `last`.
    fn advance_through(&mut self, last: u32) {
        let trace = &self.device.trace;
        while self.applied <= last && (self.applied as usize) < trace.len() {
            let i = self.applied as usize;
            match trace.action[i] {
                Action::Alloc => self.insert(trace.addr[i], self.replay.event_lifetime[i]),
                Action::FreeCompleted => {
                    if let Some(rank) = self.by_addr.remove(&trace.addr[i]) {
                        self.remove_rank(rank);
                    }
                }
                _ => {}
            }
            self.applied += 1;
        }
    }

    fn run(mut self) -> Vec<Column> {
        let active = self.replay.active_bytes();
        let reserved = self.replay.reserved_bytes();
        let mut out = Vec::with_capacity(self.columns.len());
        for range in self.columns {
            let (start, end) = (range.start as usize, (range.end as usize).min(active.len()));
            // The event where the stack (active bytes) peaks within the column (first of equals).
            let peak = (start..end)
                .max_by_key(|&i| (active[i], std::cmp::Reverse(i)))
                .map(|i| i as u32);
            if let Some(peak) = peak {
                self.advance_through(peak);
            } else if range.start > 0 {
                self.advance_through(range.start - 1);
            }
            let event = self.applied.checked_sub(1);
            let reserved_max_bytes = if start < end {
                reserved[start..end].iter().copied().max().unwrap_or(0)
            } else {
                self.replay.totals_after(event).reserved_bytes
            };
            let count = |wanted: &[Action]| {
                self.device.trace.action[start..end.max(start)]
                    .iter()
                    .filter(|a| wanted.contains(a))
                    .count() as u32
            };
            out.push(Column {
                event,
                runs: self.runs(),
                stack_bytes: self.stack_bytes,
                reserved_max_bytes,
                segment_events: count(&[
                    Action::SegmentAlloc,
                    Action::SegmentFree,
                    Action::SegmentMap,
                    Action::SegmentUnmap,
                ]),
                oom_events: count(&[Action::Oom]),
                snapshot_events: count(&[Action::Snapshot]),
            });
            if range.end > 0 {
                self.advance_through(range.end - 1);
            }
        }
        out
    }

    /// The current stack as runs over the visible byte range, thin bands merged.
    fn runs(&self) -> Vec<Run> {
        let mut runs = Vec::new();
        let mut pending: Option<Run> = None;
        let mut y = 0u64;
        for &id in self.live.values() {
            let size = self.replay.lifetimes[id as usize].requested_size_bytes;
            let (y0, y1) = (y, y + size);
            y = y1;
            if (y1 as f64) <= self.y_min {
                continue;
            }
            if (y0 as f64) >= self.y_max {
                break;
            }
            if (size as f64) < self.bytes_per_px {
                let run = pending.get_or_insert(Run {
                    y0_bytes: y0,
                    y1_bytes: y0,
                    band: Band::Merged {
                        count: 0,
                        largest: id,
                    },
                });
                run.y1_bytes = y1;
                if let Band::Merged { count, largest } = &mut run.band {
                    *count += 1;
                    if size > self.replay.lifetimes[*largest as usize].requested_size_bytes {
                        *largest = id;
                    }
                }
                if ((run.y1_bytes - run.y0_bytes) as f64) >= self.bytes_per_px {
                    runs.extend(pending.take());
                }
            } else {
                runs.extend(pending.take());
                runs.push(Run {
                    y0_bytes: y0,
                    y1_bytes: y1,
                    band: Band::Lifetime(id),
                });
            }
        }
        runs.extend(pending);
        runs
    }
}

/// `width_px` columns splitting the events `[first, last)` evenly (some empty when zoomed in past
/// one event per pixel).
pub fn even_columns(first: f64, last: f64, width_px: usize) -> Vec<Range<u32>> {
    let width = width_px.max(1);
    let step = (last - first) / width as f64;
    let at = |c: usize| (first + step * c as f64).ceil().max(0.0) as u32;
    (0..width).map(|c| at(c)..at(c + 1).max(at(c))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Loaded;
    use crate::r#gen::{self, Scenario};

    fn loaded(scenario: Scenario, events: usize) -> Loaded {
        r#gen::generate_loaded(scenario, events, 5).1
    }

    /// The stack at an event, computed the slow way: every lifetime live then, in rank order.
    fn brute_force_stack(
        l: &Loaded,
        order: &StackOrder,
        event: Option<u32>,
    ) -> Vec<(u64, u64, LifetimeId)> {
        let replay = &l.replays[0];
        let mut live: Vec<LifetimeId> = (0..replay.lifetimes.len() as u32)
            .filter(|&id| replay.lifetimes[id as usize].is_live_after(event))
            .collect();
        live.sort_by_key(|&id| order.rank(id));
        let mut y = 0;
        live.into_iter()
            .map(|id| {
                let size = replay.lifetimes[id as usize].requested_size_bytes;
                y += size;
                (y - size, y, id)
            })
            .collect()
    }

    #[test]
    fn one_event_per_column_matches_the_brute_force_stack() {
        let l = loaded(Scenario::Leak, 3000);
        let (device, replay) = (&l.snapshot.devices[0], &l.replays[0]);
        let order = StackOrder::new(replay);
        let columns: Vec<Range<u32>> = (0..3000).map(|e| e..e + 1).collect();
        let request = LayoutRequest {
            columns,
            y_min_bytes: 0.0,
            y_max_bytes: 1e13,
            height_px: 1e13,
        };
        let laid = layout(device, replay, &order, &request);
        for (e, column) in laid.iter().enumerate() {
            assert_eq!(column.event, Some(e as u32));
            let want = brute_force_stack(&l, &order, Some(e as u32));
            let got: Vec<(u64, u64, LifetimeId)> = column
                .runs
                .iter()
                .map(|r| match r.band {
                    Band::Lifetime(id) => (r.y0_bytes, r.y1_bytes, id),
                    Band::Merged { .. } => panic!("nothing is thinner than a pixel at this scale"),
                })
                .collect();
            assert_eq!(got, want, "event {e}");
            assert_eq!(
                column.stack_bytes as i64,
                replay.totals_after(Some(e as u32)).active_bytes
            );
        }
    }

    #[test]
    fn thin_bands_merge_and_nothing_is_dropped() {
        let l = loaded(Scenario::Steady, 6000);
        let (device, replay) = (&l.snapshot.devices[0], &l.replays[0]);
        let order = StackOrder::new(replay);
        let columns = even_columns(0.0, 6000.0, 300);
        let request = LayoutRequest {
            columns,
            y_min_bytes: 0.0,
            y_max_bytes: 8e9,
            height_px: 400.0,
        };
        let bytes_per_px = 8e9 / 400.0;
        for column in layout(device, replay, &order, &request) {
            // The runs tile the stack from 0 to the allocated bytes, with no gap.
            let mut y = 0;
            for run in &column.runs {
                assert_eq!(run.y0_bytes, y);
                y = run.y1_bytes;
                if let Band::Lifetime(id) = run.band {
                    assert!(
                        replay.lifetimes[id as usize].requested_size_bytes as f64 >= bytes_per_px
                    );
                }
            }
            assert_eq!(y, column.stack_bytes);
            assert!(
                column
                    .runs
                    .iter()
                    .any(|r| matches!(r.band, Band::Merged { .. }))
            );
        }
    }

    #[test]
    fn a_column_shows_its_peak() {
        let l = loaded(Scenario::Steady, 4000);
        let (device, replay) = (&l.snapshot.devices[0], &l.replays[0]);
        let order = StackOrder::new(replay);
        let request = LayoutRequest {
            columns: std::iter::once(0..4000).collect(),
            y_min_bytes: 0.0,
            y_max_bytes: 1e12,
            height_px: 100.0,
        };
        let column = &layout(device, replay, &order, &request)[0];
        let peak = replay.active_bytes().iter().copied().max().expect("events");
        assert_eq!(column.stack_bytes as i64, peak);
        assert_eq!(
            column.reserved_max_bytes,
            replay
                .reserved_bytes()
                .iter()
                .copied()
                .max()
                .expect("events")
        );
    }

    #[test]
    fn even_columns_cover_the_range_once() {
        let columns = even_columns(10.0, 1010.0, 7);
        assert_eq!(columns.first().map(|c| c.start), Some(10));
        assert_eq!(columns.last().map(|c| c.end), Some(1010));
        assert!(columns.windows(2).all(|w| w[0].end == w[1].start));
        let zoomed_in = even_columns(0.0, 3.0, 10);
        assert_eq!(zoomed_in.iter().filter(|c| !c.is_empty()).count(), 3);
    }
}

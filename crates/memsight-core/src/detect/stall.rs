//! Flags allocator stalls: the allocator freeing its cache *because a request could not be
//! served* — a burst of `segment_free` / `segment_unmap` that sits between a request and the
//! `segment_alloc` / `segment_map` (or `oom`) for that same request. Each cudaFree synchronizes
//! the device, so a stall makes this rank the slow one that holds every collective back. Its
//! cost is the time from the burst's first release to the retry.
//!
//! A burst is a stall when the first event after it is a `segment_alloc` / `segment_map` /
//! `oom` made for the same request: the same call stack as the burst (the allocator records the
//! waiting request's context on both), or, where the file has no stacks, simply the next event.
//! A burst under an `empty_cache()` frame, or with no request waiting, is the program emptying
//! the cache itself: one info finding per device says how often and what it cost, never a
//! warning. One stall finding per device, too, for the worst stall.
//!
//! **The capacity rule.** The allocator frees its cache only when a device allocation fails. When
//! the reserved bytes before the burst plus the new segment are no more than what this trace
//! reserved at some other moment, or than a capacity the file shows (an `oom` entry, msMemScope's
//! measurements), the device could have served the request without a release: the burst was
//! the program's (an `empty_cache()` recorded without frames, often at a fixed period), not a
//! stall. A retry that ends in an `oom` is always a stall; but where the failed request was larger
//! than the cache's free bytes and the device's free memory together (the `oom` entry's
//! `device_free`), the release was the allocator's last attempt and nothing could have served
//! it: an info finding says so and sends the reader to the out-of-memory finding, with no advice
//! on settings or fragmentation (a held-out Lightning run: 384 MiB asked with 22 MiB cached and
//! 252 MiB free).
//!
//! **Periodic releases.** Stackless bursts at a fixed period (three or more, each gap within 30 %
//! of their median gap) come from one hook, unless half or more of them look forced: the
//! capacity rule finds no room for the segment that follows, and no free block cached just
//! before the burst was as large as the request it was made for. Otherwise none of them is a
//! stall (a hook fires whatever the next request; those at the trace's highest reserved bytes
//! are the same hook firing there); where half or more look forced, each is judged on its own.

use rustc_hash::FxHashMap;

use crate::model::{Action, Device, NO_STACK, NO_TIME, Snapshot, StackId, StreamId};
use crate::replay::DeviceReplay;
use crate::units::format_bytes;

use super::{DeviceContext, Finding, FindingKind, Severity};

/// Whether `stack` runs through an `empty_cache` call: the program emptied the cache itself.
pub(super) fn is_explicit_empty_cache(snapshot: &Snapshot, stack: StackId) -> bool {
    snapshot
        .stack_frames(stack)
        .any(|f| snapshot.str(f.name) == "empty_cache")
}

/// One run of segment releases.
struct Burst {
    first: usize,
    last: usize,
    freed_bytes: u64,
    /// The `segment_alloc` / `segment_map` / `oom` for the request that waited, if one did.
    retry: Option<usize>,
    /// A segment followed for the same request, but the device had room for it (the capacity
    /// rule): not a stall.
    servable: bool,
    /// One of stackless bursts at a fixed period: about this many events after the one before.
    period_events: Option<usize>,
}

/// The most the device is known to hold for the pool: an `oom` entry's reserved plus free
/// bytes, or msMemScope's measurements (reserved then plus free; the smallest).
pub(super) fn known_capacity_bytes(device: &Device, replay: &DeviceReplay) -> Option<u64> {
    let reserved = |event: usize| replay.reserved_bytes().get(event).map(|&r| r.max(0) as u64);
    device
        .trace
        .oom_device_free_bytes
        .first()
        .and_then(|&(event, free)| reserved(event as usize).map(|r| r.saturating_add(free)))
        .or_else(|| crate::device_memory::pool_capacity_bytes(device, replay).map(|(b, _)| b))
}

fn bursts(snapshot: &Snapshot, device: &Device, replay: &DeviceReplay) -> Vec<Burst> {
    let trace = &device.trace;
    let reserved = replay.reserved_bytes();
    let reserved_at = |i: usize| reserved.get(i).map_or(0, |&r| r.max(0) as u64);
    // The most reserved up to each event, and from each event on: "elsewhere in the trace".
    let mut most_before = vec![0u64; trace.len() + 1];
    for i in 0..trace.len() {
        most_before[i + 1] = most_before[i].max(reserved_at(i));
    }
    let mut most_after = vec![0u64; trace.len() + 1];
    for i in (0..trace.len()).rev() {
        most_after[i] = most_after[i + 1].max(reserved_at(i));
    }
    let capacity = known_capacity_bytes(device, replay);
    let releases = |i: usize| matches!(trace.action[i], Action::SegmentFree | Action::SegmentUnmap);
    let mut out = Vec::new();
    let mut i = 0;
    while i < trace.len() {
        if !releases(i) {
            i += 1;
            continue;
        }
        let first = i;
        let mut freed_bytes = 0u64;
        while i < trace.len() && releases(i) {
            freed_bytes += trace.size_bytes[i];
            i += 1;
        }
        let last = i - 1;
        let stack = trace.stack[first];
        let explicit = (first..=last).any(|k| is_explicit_empty_cache(snapshot, trace.stack[k]));
        let retry = (i < trace.len()
            && !explicit
            && matches!(
                trace.action[i],
                Action::SegmentAlloc | Action::SegmentMap | Action::Oom
            )
            && (stack == NO_STACK || trace.stack[i] == NO_STACK || trace.stack[i] == stack))
            .then_some(i);
        // The capacity rule: reserved before the burst plus the new segment, against the most
        // reserved elsewhere (before the burst, or after the retry) and a known capacity.
        let servable = retry.is_some_and(|r| {
            if trace.action[r] == Action::Oom {
                return false;
            }
            let needed = first
                .checked_sub(1)
                .map_or(0, reserved_at)
                .saturating_add(trace.size_bytes[r]);
            let elsewhere = most_before[first].max(most_after[r + 1]);
            needed <= elsewhere || capacity.is_some_and(|c| needed <= c)
        });
        out.push(Burst {
            first,
            last,
            freed_bytes,
            retry: retry.filter(|_| !servable),
            servable,
            period_events: None,
        });
    }
    periodic_releases(device, replay, &mut out);
    out
}

/// Stackless bursts whose pool is rebuilt to tell a hook from the allocator.
const VOTERS: usize = 64;

/// Whether a free block cached just before the burst at `first` was as large as the request the
/// segment at `retry` was made for (the first allocation after it, else the segment itself):
/// then no allocation failed for want of a block, and a hook emptied the cache before a request
/// the cache could have served (a generated loop's prefetch after its hook).
fn cached_could_serve(device: &Device, replay: &DeviceReplay, first: usize, retry: usize) -> bool {
    let trace = &device.trace;
    let request = (retry + 1..trace.len().min(retry + 4))
        .find(|&i| trace.action[i] == Action::Alloc)
        .map_or(trace.size_bytes[retry], |i| trace.size_bytes[i]);
    let before = first.checked_sub(1).map(|e| e as u32);
    replay
        .pool_after(device, before)
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .any(|b| b.state == crate::model::BlockState::Inactive && b.size_bytes >= request)
}

/// Stackless bursts at a fixed period, most of which no failed allocation explains: none of
/// them is a stall (their retries, unless an `oom`, are the hook's next request).
fn periodic_releases(device: &Device, replay: &DeviceReplay, bursts: &mut [Burst]) {
    let trace = &device.trace;
    let stackless: Vec<usize> = (0..bursts.len())
        .filter(|&k| (bursts[k].first..=bursts[k].last).all(|i| trace.stack[i] == NO_STACK))
        .collect();
    if stackless.len() < 3 {
        return;
    }
    let gaps: Vec<usize> = stackless
        .windows(2)
        .map(|w| bursts[w[1]].first - bursts[w[0]].first)
        .collect();
    let mut sorted = gaps.clone();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    if gaps
        .iter()
        .any(|&g| (g as f64 - median as f64).abs() > 0.3 * median as f64)
    {
        return;
    }
    // Where most of them came before a request no cached block could serve and a segment no
    // level of the trace had room for, the allocator made them (a held-out decode loop: 9 of 10
    // bursts, each before a KV-cache copy larger than every cached block; the program's one
    // `empty_cache()` was before the loop). A hook fires whatever the next request. Judged on
    // at most `VOTERS` of them, spread over the trace (each rebuilds the pool before it).
    let step = stackless.len().div_ceil(VOTERS);
    let voters: Vec<usize> = stackless.iter().copied().step_by(step).collect();
    let forced = voters
        .iter()
        .filter(|&&k| {
            let b = &bursts[k];
            !b.servable
                && b.retry.is_some_and(|r| {
                    trace.action[r] == Action::Oom
                        || !cached_could_serve(device, replay, b.first, r)
                })
        })
        .count();
    if forced * 2 >= voters.len() {
        return;
    }
    for &k in &stackless {
        let b = &mut bursts[k];
        b.period_events = Some(median);
        if b.retry.is_some_and(|r| trace.action[r] != Action::Oom) {
            b.retry = None;
        }
    }
}

/// One run of recorded segment releases: a stall when a request waited on it, else the program
/// emptying the cache itself. Event indices are the trace's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleaseBurst {
    pub first_event: usize,
    pub last_event: usize,
    pub freed_bytes: u64,
    /// The `segment_alloc` / `segment_map` / `oom` of the request that waited: a stall.
    pub retry_event: Option<usize>,
}

impl ReleaseBurst {
    pub fn is_stall(&self) -> bool {
        self.retry_event.is_some()
    }
}

/// The runs of segment releases in `device`'s trace, told apart as this detector tells them.
pub fn release_bursts(
    snapshot: &Snapshot,
    device: &Device,
    replay: &DeviceReplay,
) -> Vec<ReleaseBurst> {
    bursts(snapshot, device, replay)
        .into_iter()
        .map(|b| ReleaseBurst {
            first_event: b.first,
            last_event: b.last,
            freed_bytes: b.freed_bytes,
            retry_event: b.retry,
        })
        .collect()
}

/// A release whose retry failed for a request larger than the cache's free bytes and the
/// device's free memory together: the allocator's last attempt before an out-of-memory error.
#[expect(
    clippy::struct_field_names,
    reason = "three byte counts, named for their unit as everywhere"
)]
struct InVain {
    request_bytes: u64,
    cached_free_bytes: u64,
    device_free_bytes: u64,
}

/// Whether burst `b` was such a last attempt (the device's free memory known from its `oom`).
fn retried_in_vain(device: &Device, replay: &DeviceReplay, b: &Burst) -> Option<InVain> {
    let trace = &device.trace;
    let retry = b.retry.filter(|&r| trace.action[r] == Action::Oom)?;
    let &(_, device_free_bytes) = trace
        .oom_device_free_bytes
        .iter()
        .find(|&&(i, _)| i as usize == retry)?;
    let after = replay.totals_after(Some(b.last as u32));
    let cached_free_bytes =
        u64::try_from(after.reserved_bytes - after.allocated_bytes).unwrap_or(0);
    let request_bytes = trace.size_bytes[retry];
    (request_bytes > cached_free_bytes.saturating_add(device_free_bytes)).then_some(InVain {
        request_bytes,
        cached_free_bytes,
        device_free_bytes,
    })
}

/// The info finding for a release made in vain: no setting would have served the request, and
/// the out-of-memory finding says what held the memory.
fn in_vain_finding(device: &Device, burst: &Burst, in_vain: &InVain) -> Finding {
    let trace = &device.trace;
    let retry = burst.retry.unwrap_or(burst.last);
    let released = burst.last + 1 - burst.first;
    let mut finding = Finding::new(FindingKind::AllocatorStall, Severity::Info, device.ordinal);
    finding.title =
        "Before the out-of-memory error the allocator released its cache and retried in vain"
            .to_string();
    let after_ms = match (trace.time_us[burst.first], trace.time_us[retry]) {
        (x, y) if x != NO_TIME && y != NO_TIME => {
            format!(", {:.1} ms after the first release", (y - x) as f64 / 1e3)
        }
        _ => String::new(),
    };
    finding.summary = format!(
        "{} released {released} segment{} ({}) for the request of {} that then failed at event \
         {retry}{after_ms}. The request was larger than the cache's free bytes ({}) and the \
         device's free memory ({}) together: no allocator setting would have served it.",
        if released == 1 {
            format!("Event {}", burst.first)
        } else {
            format!("Events {}–{}", burst.first, burst.last)
        },
        if released == 1 { "" } else { "s" },
        format_bytes(burst.freed_bytes as i64),
        format_bytes(in_vain.request_bytes as i64),
        format_bytes(in_vain.cached_free_bytes as i64),
        format_bytes(in_vain.device_free_bytes as i64),
    );
    finding.bytes = burst.freed_bytes;
    finding.events = (burst.first as u32, retry as u32);
    finding.focus_event = Some(burst.last as u32);
    finding.stack = trace.stack[retry];
    finding.suggestion =
        "Part of the out-of-memory error, not a cost of its own: lower what is live at \
                    the failure (the out-of-memory finding)."
            .to_string();
    finding
}

/// Whether the file shows expandable segments in use (mapped pages, expandable segments in the
/// pool, or the setting on).
pub(super) fn uses_expandable_segments(snapshot: &Snapshot, device: &Device) -> bool {
    device
        .trace
        .action
        .iter()
        .any(|a| matches!(a, Action::SegmentMap | Action::SegmentUnmap))
        || device.segments.iter().any(|s| s.is_expandable)
        || snapshot.allocator_settings.iter().any(|(k, v)| {
            k == "expandable_segments" && *v == crate::model::SettingValue::Bool(true)
        })
}

pub fn detect(cx: &DeviceContext) -> Vec<Finding> {
    // A trace that allocates nothing (a state-only recording's one kept event) cannot show
    // whether a release waited for a request: neither a stall nor a choice is claimed.
    if cx.state_only {
        return Vec::new();
    }
    let (snapshot, device, replay) = (cx.snapshot, cx.device, cx.replay);
    let trace = &device.trace;
    let all = bursts(snapshot, device, replay);
    let mut findings = Vec::new();
    let ms = |a: usize, b: usize| match (trace.time_us[a], trace.time_us[b]) {
        (x, y) if x != NO_TIME && y != NO_TIME => Some((y - x) as f64 / 1e3),
        _ => None,
    };

    let stalls: Vec<&Burst> = all
        .iter()
        .filter(|b| b.retry.is_some() && retried_in_vain(device, replay, b).is_none())
        .collect();
    findings.extend(
        all.iter().find_map(|b| {
            retried_in_vain(device, replay, b).map(|v| in_vain_finding(device, b, &v))
        }),
    );
    if let Some(worst) = stalls.iter().max_by_key(|b| {
        let retry = b.retry.unwrap_or(b.last);
        (
            ms(b.first, retry).map_or(0, |t| (t * 1e3) as i64),
            b.freed_bytes,
            std::cmp::Reverse(b.first),
        )
    }) {
        let retry = worst.retry.unwrap_or(worst.last);
        let before = replay.totals_after((worst.first as u32).checked_sub(1));
        let after = replay.totals_after(Some(worst.last as u32));
        let expandable = uses_expandable_segments(snapshot, device);
        let what_retried = match trace.action[retry] {
            Action::Oom => "the request still failed (oom)".to_string(),
            _ => format!(
                "a new {} segment was allocated for the request that waited",
                format_bytes(trace.size_bytes[retry] as i64)
            ),
        };
        let mut f = Finding::new(
            FindingKind::AllocatorStall,
            Severity::Warning,
            device.ordinal,
        );
        f.title = match ms(worst.first, retry) {
            Some(t) => format!(
                "Allocator stall: a device allocation failed, so the allocator released its \
                 cache and tried again ({t:.1} ms)"
            ),
            None => "Allocator stall: a device allocation failed, so the allocator released its \
                     cache and tried again"
                .to_string(),
        };
        f.summary = format!(
            "{} time{} a request could not be served from the cache, so the allocator released cached segments and \
             retried. The worst: events {}–{} released {} segment{} ({}; reserved fell from {} to {}, allocated \
             stayed at {}), then {what_retried} at event {retry}{}.",
            stalls.len(),
            if stalls.len() == 1 { "" } else { "s" },
            worst.first,
            worst.last,
            worst.last + 1 - worst.first,
            if worst.last == worst.first { "" } else { "s" },
            format_bytes(worst.freed_bytes as i64),
            format_bytes(before.reserved_bytes),
            format_bytes(after.reserved_bytes),
            format_bytes(after.allocated_bytes),
            ms(worst.first, retry).map_or_else(String::new, |t| format!(
                ", {t:.1} ms after the first release"
            ))
        );
        // The request waited though the cache held more than it in free blocks: none of them
        // fitted it, so the cache was in pieces (batch 34's held-out audit: an 832 MiB request
        // waited beside 5.5 GiB cached free, and no finding named the fragmentation).
        let cached = (trace.action[retry] != Action::Oom && !expandable)
            .then(|| cached_in_pieces(cx, worst.first, retry));
        if let Some(cached) = &cached {
            f.summary.push_str(&cached.sentence);
        }
        f.bytes = worst.freed_bytes;
        f.events = (worst.first as u32, retry as u32);
        f.focus_event = Some(worst.last as u32);
        f.stack = trace.stack[retry];
        f.suggestion = match &cached {
            Some(cached) => cached.advice(cx, retry),
            None => advice(cx, expandable),
        };
        if let Some(words) = evaluation_requests(cx, &stalls) {
            f.suggestion = format!("{words} {}", f.suggestion);
        }
        findings.push(f);
    }

    findings.extend(empty_cache_note(snapshot, device, &all));
    findings
}

/// What the cache held when a stall began, for its summary.
struct CachedFree {
    /// " When it began, 5.47 GiB of the 21.3 GiB reserved was cached in free blocks …", or empty.
    sentence: String,
    /// Most of those free bytes were whole segments, each smaller than the request and none
    /// made by the request's own line: the request was too large for any segment, not blocked
    /// by pieces.
    larger_than_every_segment: bool,
    /// The file's `max_split_size` (MiB) kept a cached block as large from the request.
    held_back_mb: Option<u64>,
    /// Most of what the release gave back was other streams' segments ([`OTHER_STREAMS_CAUSE`]).
    other_streams: bool,
}

impl CachedFree {
    /// The stall's advice, by what the cache held when it began (`retry`: the segment made for
    /// the request that waited).
    fn advice(&self, cx: &DeviceContext, retry: usize) -> String {
        if let Some(mb) = self.held_back_mb {
            format!(
                "Remove max_split_size_mb:{mb} from {} (the settings finding replays the trace \
                 without it): cached blocks are then split for the requests they can hold.",
                cx.alloc_conf_variable()
            )
        } else if self.other_streams {
            OTHER_STREAMS_ADVICE.to_string()
        } else if self.larger_than_every_segment {
            too_large_advice(cx, retry)
        } else {
            advice(cx, false)
        }
    }
}

/// What a stall's summary says where most of the segments it released were other streams'
/// (the settings finding reads it).
pub(super) const OTHER_STREAMS_CAUSE: &str = "each stream keeps its own cached blocks";

/// The advice for such a stall: fewer streams, or each stream's work bounded.
const OTHER_STREAMS_ADVICE: &str = "Run the work on fewer streams (one stream fed by a queue, or \
     batched work), or bound each stream's largest piece of work (fixed-length chunks), so that \
     no stream caches what another needs; torch.cuda.empty_cache() after an unusually large \
     piece of work is cheaper than a stall at a random moment. Expandable segments keep each \
     stream's cache apart too: they lower the stalls only as far as the settings finding's \
     replay, where there is one, predicts.";

/// Where the segments released from `first` up to the retry at `retry` were, by bytes, mostly
/// other streams' than the waiting request's: the stall's sentence that says so.
fn released_from_other_streams(
    trace: &crate::model::Trace,
    (first, retry): (usize, usize),
) -> Option<CachedFree> {
    let released: Vec<usize> = (first..retry)
        .filter(|&i| matches!(trace.action[i], Action::SegmentFree | Action::SegmentUnmap))
        .collect();
    let others: Vec<usize> = released
        .iter()
        .copied()
        .filter(|&i| trace.stream[i] != trace.stream[retry])
        .collect();
    let bytes = |events: &[usize]| events.iter().map(|&i| trace.size_bytes[i]).sum::<u64>();
    let (other_bytes, released_bytes) = (bytes(&others), bytes(&released));
    if other_bytes * 2 <= released_bytes {
        return None;
    }
    let which = if others.len() == released.len() {
        format!(
            "All {} segments it released ({}) were other streams' cache",
            released.len(),
            format_bytes(released_bytes as i64)
        )
    } else {
        format!(
            "Of the {} segments it released ({}), {} ({}) were other streams' cache",
            released.len(),
            format_bytes(released_bytes as i64),
            others.len(),
            format_bytes(other_bytes as i64),
        )
    };
    Some(CachedFree {
        sentence: format!(
            " {which}: {OTHER_STREAMS_CAUSE}, which a request on another stream may not use, so \
             the free memory other streams held filled the device while this one ran short. The \
             streams' separate caches, not pieces between live blocks, are what the release \
             paid for."
        ),
        larger_than_every_segment: false,
        held_back_mb: None,
        other_streams: true,
    })
}

/// " When it began, 5.47 GiB of the 21.3 GiB reserved was cached in free blocks …": where the
/// free blocks of the large pool, on the waiting request's stream and outside private pools,
/// held more than the segment made for it (`retry`) just before the release at `first`; empty
/// otherwise. None of them fitted it, or it would not have waited. Where most of those bytes
/// were segments with nothing in them, the request was larger than any segment the cache held:
/// no pieces were to blame (batch 35's held-out audit: a diagnostics callback's 4.90 GiB flat
/// copy of every gradient beside 44 GiB of whole activation segments, read as "the cache was in
/// pieces (fragmentation)").
fn cached_in_pieces(cx: &DeviceContext, first: usize, retry: usize) -> CachedFree {
    let trace = &cx.device.trace;
    let segment_bytes = trace.size_bytes[retry];
    // Other streams' cache, which this stream may not use, filled the device (batch 37's
    // held-out audit: four camera threads each on its own stream, a release of 148 segments,
    // all other streams', read as "the cache was in pieces").
    if let Some(cached) = released_from_other_streams(trace, (first, retry)) {
        return cached;
    }
    let pool = cx
        .replay
        .pool_after(cx.device, (first as u32).checked_sub(1));
    let segments: Vec<_> = pool
        .segments
        .iter()
        .filter(|s| {
            s.stream == trace.stream[retry]
                && s.total_size_bytes != 2 << 20
                && !cx.snapshot.is_private_pool(s.pool)
        })
        .collect();
    let free_bytes: u64 = segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == crate::model::BlockState::Inactive)
        .map(|b| b.size_bytes)
        .sum();
    if free_bytes < segment_bytes {
        return CachedFree {
            sentence: String::new(),
            larger_than_every_segment: false,
            held_back_mb: None,
            other_streams: false,
        };
    }
    let empty: Vec<_> = segments
        .iter()
        .filter(|s| {
            s.blocks
                .iter()
                .all(|b| b.state == crate::model::BlockState::Inactive)
        })
        .collect();
    let empty_bytes: u64 = empty.iter().map(|s| s.total_size_bytes).sum();
    let largest = empty.iter().map(|s| s.total_size_bytes).max().unwrap_or(0);
    // The empty segments were made for other code than the request's: a request of a size the
    // program asks for again and again (a KV cache grown by `torch.cat`, validation images
    // that grow) left segments of its own sizes behind, fragmentation proper.
    let site = |stack| crate::frames::headline_frame(cx.snapshot, stack);
    let request_site = site(trace.stack[retry]);
    let mut made_by: FxHashMap<u64, StackId> = FxHashMap::default();
    for i in 0..first {
        if trace.action[i] == Action::SegmentAlloc {
            made_by.insert(trace.addr[i], trace.stack[i]);
        }
    }
    let made_elsewhere = empty.iter().all(|s| {
        made_by
            .get(&s.address)
            .is_none_or(|&stack| site(stack) != request_site)
    });
    let head = format!(
        " When it began, {} of the {} reserved was cached in free blocks of the large pool on \
         its stream, more than the {} segment made for it",
        format_bytes(free_bytes as i64),
        format_bytes(pool.totals.reserved_bytes),
        format_bytes(segment_bytes as i64),
    );
    if empty_bytes * 2 >= free_bytes && largest < segment_bytes && made_elsewhere {
        return CachedFree {
            sentence: format!(
                "{head}, {} of it in {} segments holding nothing, the largest {}: the request \
                 was larger than any segment the cache held, and a segment cannot grow into its \
                 neighbours, so the allocator released them to make room. One request that \
                 large, not pieces between live blocks, is what the release paid for.",
                format_bytes(empty_bytes as i64),
                empty.len(),
                format_bytes(largest as i64),
            ),
            larger_than_every_segment: true,
            held_back_mb: None,
            other_streams: false,
        };
    }
    if let Some(cached) =
        held_whole_by_the_limit(cx, &segments, (free_bytes, &head), (first, retry))
    {
        return cached;
    }
    if let Some(cached) = larger_than_every_segment(&segments, segment_bytes, &head, made_elsewhere)
    {
        return cached;
    }
    CachedFree {
        sentence: format!(
            "{head}, yet none of them could hold it: the cache was in pieces (fragmentation), \
             and the release was the price of that."
        ),
        larger_than_every_segment: false,
        held_back_mb: None,
        other_streams: false,
    }
}

/// The stall's sentence where the segment made for the waiting request (`segment_bytes`, after
/// `head`) is larger than every segment of its pool: a block never outgrows its segment, so no
/// piece of the cache, however it was cut, could hold it (batch 37's re-audit: a full-resolution
/// validation pass's 4.69 GiB kernels, larger than any segment made before, read as "the cache
/// was in pieces"). Where the request's own line made the emptied segments (not
/// `made_elsewhere`), for smaller sizes, it grows (a tensor concatenated onto, larger inputs):
/// the allocator's advice stays (batch 35's held-out audit).
fn larger_than_every_segment(
    segments: &[&crate::replay::PoolSegment],
    segment_bytes: u64,
    head: &str,
    made_elsewhere: bool,
) -> Option<CachedFree> {
    let largest_segment = segments
        .iter()
        .map(|s| s.total_size_bytes)
        .max()
        .unwrap_or(0);
    if largest_segment >= segment_bytes {
        return None;
    }
    let own_line = if made_elsewhere {
        ""
    } else {
        " (its own line made the emptied segments, for smaller sizes)"
    };
    Some(CachedFree {
        sentence: format!(
            "{head}, yet none of them could hold it: the request was larger than every segment \
             of its pool (the largest, {}){own_line}, and a block never outgrows its segment, so \
             the allocator released them to make one this large. A new, larger size, not pieces \
             between live blocks, is what the release paid for.",
            format_bytes(largest_segment as i64),
        ),
        larger_than_every_segment: made_elsewhere,
        held_back_mb: None,
        other_streams: false,
    })
}

/// The stall's sentence where the file's `max_split_size` kept cached blocks whole: most of the
/// free bytes (`free_bytes`, after `head`) in blocks at or above the limit, or one of them as
/// large as the request (see [`cached_in_pieces`]).
fn held_whole_by_the_limit(
    cx: &DeviceContext,
    segments: &[&crate::replay::PoolSegment],
    (free_bytes, head): (u64, &str),
    (first, retry): (usize, usize),
) -> Option<CachedFree> {
    let trace = &cx.device.trace;
    let segment_bytes = trace.size_bytes[retry];
    // A limit the file sets keeps cached blocks at or above it whole (batch 36's held-out audit:
    // `max_split_size_mb:64` filled the cache with blocks that fit few requests, read "the
    // cache was in pieces"): where most of the free bytes are such blocks, or one of them was as
    // large as the request, the setting is named.
    let limit = crate::whatif::recorded_max_split_size_bytes(cx.snapshot)?;
    let oversize_bytes: u64 = segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == crate::model::BlockState::Inactive && b.size_bytes >= limit)
        .map(|b| b.size_bytes)
        .sum();
    let request = (retry + 1..trace.len().min(retry + 8))
        .find(|&j| trace.action[j] == Action::Alloc)
        .map_or(segment_bytes, |j| trace.size_bytes[j]);
    let as_large = super::fragmentation::large_enough_block_cached(
        cx,
        first as u32,
        trace.stream[retry],
        request,
    );
    if !as_large && oversize_bytes * 2 < free_bytes {
        return None;
    }
    let mb = limit >> 20;
    let which = if as_large {
        "and one of them was at least as large as the request"
    } else {
        "none large enough for it"
    };
    Some(CachedFree {
        sentence: format!(
            "{head}, {which}; {} of them in blocks of {mb} MiB or more, which the file's \
             max_split_size_mb:{mb} keeps whole: such a block is never split, and serves only a \
             request of {mb} MiB or more at most 20 MiB smaller than it, so the cache filled \
             with blocks that fit few requests. That setting, not pieces between live blocks, is \
             what the release paid for.",
            format_bytes(oversize_bytes as i64)
        ),
        larger_than_every_segment: false,
        held_back_mb: Some(mb),
        other_streams: false,
    })
}

/// What to do where the request that waited (`retry`'s) was larger than every segment the
/// cache held: that request first, then expandable segments where the platform has them.
fn too_large_advice(cx: &DeviceContext, retry: usize) -> String {
    let trace = &cx.device.trace;
    let site = crate::frames::headline_frame(cx.snapshot, trace.stack[retry])
        .unwrap_or_else(|| "its call site".to_string());
    let expandable_too = if cx.snapshot.recorded_on_windows() {
        String::new()
    } else {
        format!(
            " Or turn on expandable segments ({}=expandable_segments:True): they avoid the \
             free-everything-and-retry path.",
            cx.alloc_conf_variable()
        )
    };
    format!(
        "Make the {} request at {site} smaller or avoid it: compute what it holds in chunks, \
         or, where it joins many tensors into one (a flat copy, a concatenation), over them in \
         turn (torch._foreach_norm and its kind work on lists of tensors).{expandable_too}",
        format_bytes(trace.size_bytes[retry] as i64),
    )
}

/// What to do about stalls: expandable segments where they are off (named for the device's
/// backend), bucketing only where the model is seen to ask for different sizes.
fn advice(cx: &DeviceContext, expandable: bool) -> String {
    let bucketing = if crate::detect::fragmentation::sizes_vary(cx) {
        " (the model asks for different sizes from one iteration to the next: bucket \
         inputs by length)"
    } else {
        ""
    };
    let conf = cx.alloc_conf_variable();
    if cx.snapshot.recorded_on_windows() && !expandable {
        format!(
            "Reduce fragmentation (max_split_size_mb in {conf} keeps large blocks \
             whole){bucketing} or lower the peak: expandable segments, which avoid the \
             free-everything-and-retry path, are not available on Windows, where this file \
             was recorded."
        )
    } else if expandable {
        "Expandable segments are already on: the device is nearly full. Lower the peak (activation \
         checkpointing, a smaller micro-batch) or leave the device more headroom."
            .to_string()
    } else {
        format!(
            "Expandable segments ({conf}=expandable_segments:True) avoid the \
             free-everything-and-retry path; otherwise reduce fragmentation{bucketing} or \
             lower the peak."
        )
    }
}

/// Where every request that waited in a training trace was made in an evaluation pass (a
/// function named for it, or under `torch.no_grad()`'s decorator), the stalls are evaluation's: its requests did not fit
/// what training left cached, and the advice starts there (batch 33's held-out audit: a
/// `ControlNet`'s growing validation images stalled five times, and the advice spoke of bucketing).
fn evaluation_requests(cx: &DeviceContext, stalls: &[&Burst]) -> Option<String> {
    // Only beside training: in a program that only evaluates (the real `cuda_llama_retry_stalls`,
    // all of it under `validate`), nothing else cached the segments.
    if cx.workload != super::Workload::Training {
        return None;
    }
    let frames: Vec<String> = stalls
        .iter()
        .map(|b| super::peak::evaluation_frame(cx, b.retry? as u32))
        .collect::<Option<_>>()?;
    let first = frames.first()?;
    let same = frames.iter().all(|f| f == first);
    // Attention's only where a waiting request's frames show it (batch 38's held-out audit: a
    // convolutional Go network told of memory-efficient attention).
    let trace = &cx.device.trace;
    let in_attention = stalls.iter().filter_map(|b| b.retry).any(|r| {
        cx.snapshot.stack_frames(trace.stack[r]).any(|f| {
            let name = cx.snapshot.str(f.name).to_ascii_lowercase();
            name.contains("attention") || name.contains("attn") || name.contains("softmax")
        })
    });
    let attention = if in_attention {
        ", or a memory-efficient attention where attention makes them,"
    } else {
        ""
    };
    let module = if cx.npu { "torch.npu" } else { "torch.cuda" };
    Some(format!(
        "{} request{} that waited {} made in evaluation ({}{}), which the segments cached before \
         it could not serve. Smaller evaluation inputs{attention} lower those requests; \
         {module}.empty_cache() before and after the evaluation hands the cache back without a \
         failed device allocation.",
        if frames.len() == 1 {
            "The".to_string()
        } else {
            format!("All {}", frames.len())
        },
        if frames.len() == 1 { "" } else { "s" },
        if frames.len() == 1 { "was" } else { "were" },
        first,
        if same { "" } else { ", and others" },
    ))
}

/// The bursts with no request waiting (explicit `empty_cache()` calls) as one note.
/// Segments of this size are the small pool's (a large-pool segment is 20 MiB or at least
/// 10 MiB): the two pools never serve each other.
const SMALL_POOL_SEGMENT_BYTES: u64 = 2 << 20;

/// How many bytes of the `new` segments the `released` ones (of one stream) could have held
/// instead, per pool,
/// packing the largest new segment first into the released one it fits most tightly (first-fit
/// decreasing): an estimate of what keeping the cache would have saved, never more than either
/// total.
fn reusable_bytes(released: Vec<u64>, new: Vec<u64>) -> u64 {
    let small = |s: &u64| *s <= SMALL_POOL_SEGMENT_BYTES;
    let (released_small, released_large): (Vec<u64>, Vec<u64>) =
        released.into_iter().partition(small);
    let (new_small, new_large): (Vec<u64>, Vec<u64>) = new.into_iter().partition(small);
    packed_bytes(released_small, new_small) + packed_bytes(released_large, new_large)
}

/// First-fit decreasing of `new` into the room of `released` (see [`reusable_bytes`]).
fn packed_bytes(released: Vec<u64>, mut new: Vec<u64>) -> u64 {
    // The released segments' free room, as a multiset: room → how many have it.
    let mut rooms: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
    for r in released {
        *rooms.entry(r).or_default() += 1;
    }
    new.sort_unstable_by(|a, b| b.cmp(a));
    let mut reused = 0;
    for n in new {
        // The released segment with the least room that still holds `n`.
        let Some((&room, _)) = rooms.range(n..).next() else {
            continue;
        };
        if let Some(count) = rooms.get_mut(&room) {
            *count -= 1;
            if *count == 0 {
                rooms.remove(&room);
            }
        }
        if room > n {
            *rooms.entry(room - n).or_default() += 1;
        }
        reused += n;
    }
    reused
}

/// What of the segments made after the releases the released ones could have held, and how that
/// is judged. Expandable segments map pages, and any released page could have been one mapped
/// again (`pages`: the smaller of the bytes released and mapped again): the whole-segment fit
/// does not apply (the real check set's audit: `torch_npu`'s expandable pool, "about 242 MiB"
/// where every one of the 372 MiB mapped again could have been kept).
fn reusable_and_how(
    trace: &crate::model::Trace,
    (flushes, all): (&[&Burst], &[Burst]),
    unmaps: bool,
    pages: u64,
) -> (u64, &'static str) {
    if unmaps {
        (
            pages,
            "with expandable segments any page released could have been one mapped again",
        )
    } else {
        (
            reusable_after_releases(trace, flushes, all),
            "each new segment placed whole in the released segment of its stream and pool with \
             the least room that still holds it, largest first, several sharing one where they \
             fit together; the allocator can also split a segment, so it may be more",
        )
    }
}

/// What each of the `flushes` was followed by, up to the next release of either kind (of
/// `all`): the bytes of new segments. A stall's regrowth is its own (batch 35's held-out audit:
/// "afterwards 252 GiB", with 92 GiB of it regrown after three stalls).
fn regrown_until_the_next_release(
    trace: &crate::model::Trace,
    flushes: &[&Burst],
    all: &[Burst],
) -> u64 {
    flushes
        .iter()
        .flat_map(|b| b.last + 1..next_release(trace, all, b.last))
        .filter(|&i| matches!(trace.action[i], Action::SegmentAlloc | Action::SegmentMap))
        .map(|i| trace.size_bytes[i])
        .sum()
}

/// The first event of the next release of either kind (of `all`) after event `after`, or the
/// trace's end.
fn next_release(trace: &crate::model::Trace, all: &[Burst], after: usize) -> usize {
    all.iter()
        .map(|b| b.first)
        .filter(|&f| f > after)
        .min()
        .unwrap_or(trace.len())
}

/// ", 52.9 GiB to 53.8 GiB each time": what each of several releases gave back, not only their
/// sum (batch 35's held-out audit: "159 GiB in all" on an 80 GB card, three releases of about
/// 53 GiB); empty for one.
fn each_release(flushes: &[&Burst]) -> String {
    if flushes.len() < 2 {
        return String::new();
    }
    let (fewest, most) = flushes
        .iter()
        .map(|b| b.freed_bytes)
        .fold((u64::MAX, 0), |(lo, hi), b| (lo.min(b), hi.max(b)));
    if format_bytes(fewest as i64) == format_bytes(most as i64) {
        format!(", {} each time", format_bytes(most as i64))
    } else {
        format!(
            ", {} to {} each time",
            format_bytes(fewest as i64),
            format_bytes(most as i64)
        )
    }
}

fn empty_cache_note(snapshot: &Snapshot, device: &Device, all: &[Burst]) -> Option<Finding> {
    let trace = &device.trace;
    let flushes: Vec<&Burst> = all.iter().filter(|b| b.retry.is_none()).collect();
    let (Some(first), Some(last)) = (flushes.first(), flushes.last()) else {
        return None;
    };
    let released: usize = flushes.iter().map(|b| b.last + 1 - b.first).sum();
    let released_bytes: u64 = flushes.iter().map(|b| b.freed_bytes).sum();
    let regrown = regrown_until_the_next_release(trace, &flushes, all);
    let each = each_release(&flushes);
    let explicit = flushes
        .iter()
        .any(|b| (b.first..=b.last).any(|k| is_explicit_empty_cache(snapshot, trace.stack[k])));
    let callers = library_callers(snapshot, trace, &flushes);
    let servable = flushes.iter().filter(|b| b.servable).count();
    let period = flushes.iter().find_map(|b| b.period_events);
    let times = |n: usize| format!("{n} time{}", if n == 1 { "" } else { "s" });
    let mut f = Finding::new(FindingKind::EmptyCache, Severity::Info, device.ordinal);
    f.title = if explicit {
        format!("empty_cache() called: {}", times(flushes.len()))
    } else {
        format!(
            "Cache released {} (empty_cache() or similar, no call stack recorded)",
            times(flushes.len())
        )
    };
    let no_failure = if servable > 0 {
        format!(
            " {} of these releases came just before a new segment, but the device had room for \
             it: the reserved bytes then, plus that segment, were no more than this trace \
             reserved at another moment. So no device allocation failed there.",
            if servable == flushes.len() {
                "Each".to_string()
            } else {
                servable.to_string()
            }
        )
    } else {
        String::new()
    };
    let no_failure = match period {
        Some(events) => format!(
            "{no_failure} The releases without a call stack come at a fixed period (about every \
             {events} events): one hook in the program (a callback, a scheduler) releases the \
             cache."
        ),
        None => no_failure,
    };
    // Expandable segments release by unmapping pages and grow by mapping them.
    let unmaps = trace.action.contains(&Action::SegmentUnmap);
    let (device_free, device_malloc) =
        match (crate::whatif::device_is_npu(snapshot, device), unmaps) {
            (true, true) => ("aclrtUnmapMem", "aclrtMapMem"),
            (true, false) => ("aclrtFree", "aclrtMalloc"),
            (false, true) => ("cuMemUnmap", "cuMemMap"),
            (false, false) => ("cudaFree", "cudaMalloc"),
        };
    let (reusable, how) =
        reusable_and_how(trace, (&flushes, all), unmaps, released_bytes.min(regrown));
    f.summary = format!(
        "The cache was released {} ({released} segments, {} in all{each}) while no request \
         was waiting for the memory; afterwards, up to the next release, {} of new segments \
         were allocated. The released \
         segments could have held about {} of them ({how}).{no_failure} \
         {} But every segment released and \
         needed again costs a release to the device and a new allocation from it \
         ({device_free}, then {device_malloc}).",
        times(flushes.len()),
        format_bytes(released_bytes as i64),
        format_bytes(regrown as i64),
        format_bytes(reusable as i64),
        LibraryCallers::origin(callers.as_ref()),
    );
    f.bytes = released_bytes;
    f.events = (first.first as u32, last.last as u32);
    f.focus_event = Some(first.last as u32);
    f.stack = trace.stack[first.first];
    f.suggestion = callers.map_or_else(|| empty_cache_advice(flushes.len()), |c| c.advice());
    Some(f)
}

/// What the released cache could have served: after each release, the new segments until the
/// next one that fit in what that release gave back, segment by segment and stream by stream (a
/// released 20 MiB segment serves no 64 MiB request).
fn reusable_after_releases(trace: &crate::model::Trace, flushes: &[&Burst], all: &[Burst]) -> u64 {
    flushes
        .iter()
        .map(|b| {
            // Up to the next release of either kind, as the new segments are counted
            // ([`regrown_until_the_next_release`]; batch 35's re-audit: "could have held about
            // 159 GiB" of new segments counted past three stalls).
            let until = next_release(trace, all, b.last);
            // A stream's segments serve only its own requests.
            let sizes = |range: std::ops::Range<usize>, actions: [Action; 2]| {
                let mut by_stream: FxHashMap<StreamId, Vec<u64>> = FxHashMap::default();
                for i in range.filter(|&i| actions.contains(&trace.action[i])) {
                    by_stream
                        .entry(trace.stream[i])
                        .or_default()
                        .push(trace.size_bytes[i]);
                }
                by_stream
            };
            let mut released = sizes(
                b.first..b.last + 1,
                [Action::SegmentFree, Action::SegmentUnmap],
            );
            sizes(
                b.last + 1..until,
                [Action::SegmentAlloc, Action::SegmentMap],
            )
            .into_iter()
            .map(|(stream, new)| reusable_bytes(released.remove(&stream).unwrap_or_default(), new))
            .sum::<u64>()
        })
        .sum()
}

/// Where every explicit release comes from a library (`torch.cuda.graph`'s `__enter__`, a
/// serving engine measuring free memory): the frames that call `empty_cache`, each as
/// `name (file:line)`, joined; `None` where any release is the program's own call, or has no
/// stack (batch 18's held-out audit: "call `empty_cache()` only when …" advised of the four
/// calls `torch.cuda.graph` makes while capturing).
fn library_callers(
    snapshot: &Snapshot,
    trace: &crate::model::Trace,
    flushes: &[&Burst],
) -> Option<LibraryCallers> {
    let mut callers: Vec<String> = Vec::new();
    let mut program: Vec<String> = Vec::new();
    let words = |frame: &crate::model::Frame| {
        let file = snapshot.str(frame.filename).replace('\\', "/");
        format!(
            "{} ({}:{})",
            snapshot.str(frame.name),
            crate::frames::package_path(&file),
            frame.line
        )
    };
    for b in flushes {
        let frames: Vec<&crate::model::Frame> =
            snapshot.stack_frames(trace.stack[b.first]).collect();
        let at = frames
            .iter()
            .position(|f| snapshot.str(f.name) == "empty_cache")?;
        // The Python frame that called it (C++ glue between is skipped).
        let caller = frames[at + 1..]
            .iter()
            .find(|f| crate::frames::is_python(snapshot, f))?;
        if !crate::frames::is_internal(snapshot, caller) {
            return None;
        }
        let library = words(caller);
        if !callers.contains(&library) {
            callers.push(library);
        }
        // The program's own line that called into the library, where the library function is
        // one for releasing memory (accelerate's `release_memory`), not one that releases it
        // on the way to something else (`torch.cuda.graph`'s `__enter__`).
        let name = snapshot.str(caller.name).to_ascii_lowercase();
        let releases = ["release", "free", "clear", "empty", "collect"]
            .iter()
            .any(|w| name.contains(w));
        if releases
            && let Some(own) = frames[at + 1..].iter().find(|f| {
                crate::frames::is_python(snapshot, f) && !crate::frames::is_internal(snapshot, f)
            })
        {
            let own = words(own);
            if !program.contains(&own) {
                program.push(own);
            }
        }
    }
    (!callers.is_empty()).then(|| LibraryCallers {
        callers: callers.join(" and "),
        program: (!program.is_empty()).then(|| program.join(" and ")),
    })
}

/// The library functions that call `empty_cache`, and the program's own lines that called
/// them, where the stacks show any (batch 26's held-out audit: `accelerator.free_memory()`,
/// called by the program's retry loop, was "nor the program's own call").
struct LibraryCallers {
    callers: String,
    program: Option<String>,
}

impl LibraryCallers {
    /// Where the releases come from, for the note's summary.
    fn origin(callers: Option<&Self>) -> String {
        match callers {
            None => "This is the program's choice, not an allocator stall.".to_string(),
            Some(Self {
                callers,
                program: None,
            }) => format!(
                "This is no allocator stall, nor the program's own call: every one comes from \
                 {callers}, inside a library."
            ),
            Some(Self {
                callers,
                program: Some(program),
            }) => format!(
                "This is no allocator stall: every one comes from {callers}, inside a library, \
                 called by the program's own {program}."
            ),
        }
    }

    fn advice(&self) -> String {
        let callers = &self.callers;
        match &self.program {
            None => format!(
                "Nothing in the program's own code calls empty_cache(): {callers} does. Where \
                 the library does so because of a setting of the program's (a trainer's option \
                 to release the cache every N steps), that setting is what to change; otherwise \
                 nothing is."
            ),
            Some(program) => format!(
                "The program's {program} asks the library to release the cache ({callers} \
                 calls empty_cache()). Where nothing else needs the memory then, that call is \
                 what to drop; where it makes room after an out-of-memory error or for another \
                 process, it does what it is for."
            ),
        }
    }
}

/// What to do about `releases` cache releases the program chose to make.
fn empty_cache_advice(releases: usize) -> String {
    let reuse = "the allocator reuses cached segments far faster than it can release and \
                 allocate them again.";
    if releases == 1 {
        // One release at a chosen moment (before a measurement, say) costs once: not worth a
        // change by itself (an audit found "remove it" advice out of place in a benchmark).
        format!(
            "It ran once, so it cost one release and the allocations after it. Keep it if it is \
             there on purpose (to start a measurement from an empty cache, or to hand memory to \
             another process or library). In a loop, call it only when memory must be handed \
             elsewhere: {reuse}"
        )
    } else {
        format!(
            "Call empty_cache() only when memory must be handed to another process or library: \
             {reuse}"
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_released_segment_serves_only_requests_that_fit_in_it() {
        const MIB: u64 = 1 << 20;
        // A 64 MiB segment fits in no 20 MiB one; two 10 MiB ones share a 20 MiB one.
        assert_eq!(
            super::reusable_bytes(vec![20 * MIB, 20 * MIB], vec![64 * MIB, 10 * MIB, 10 * MIB]),
            20 * MIB
        );
        assert_eq!(
            super::reusable_bytes(vec![50 * MIB], vec![20 * MIB; 3]),
            40 * MIB
        );
        assert_eq!(super::reusable_bytes(Vec::new(), vec![MIB]), 0);
        // A small-pool segment (2 MiB) never goes into a large one's room, nor the reverse
        // (an audit found 2 MiB placed in an 18 MiB leftover on the NPU demo).
        assert_eq!(super::reusable_bytes(vec![20 * MIB], vec![2 * MIB]), 0);
        assert_eq!(
            super::reusable_bytes(vec![2 * MIB; 2], vec![2 * MIB]),
            2 * MIB
        );
    }

    use crate::detect::test_support::generated;
    use crate::detect::{FindingKind, analyze};
    use crate::r#gen::Scenario;

    #[test]
    fn the_worst_injected_stall_is_reported_once_per_device() {
        let mut stalled = 0;
        for seed in 1..=4 {
            let (g, loaded) = generated(Scenario::Stall, 60_000, seed);
            let stalls: Vec<_> = analyze(&loaded)
                .into_iter()
                .filter(|f| f.kind == FindingKind::AllocatorStall)
                .collect();
            if g.truth.stalls.is_empty() {
                assert!(stalls.is_empty(), "seed {seed}: {stalls:?}");
                continue;
            }
            stalled += 1;
            assert_eq!(stalls.len(), 1, "seed {seed}: {stalls:?}");
            let found = &stalls[0];
            let truth = g
                .truth
                .stalls
                .iter()
                .find(|t| u64::from(found.events.0) == t.first_event)
                .unwrap_or_else(|| panic!("seed {seed}: {found:?} is no injected stall"));
            assert_eq!(
                found.bytes,
                truth.reserved_before_bytes - truth.reserved_after_bytes
            );
            assert!(
                found
                    .summary
                    .starts_with(&format!("{} time", g.truth.stalls.len())),
                "{found:?}"
            );
        }
        assert!(stalled >= 3, "the scenario stalls: {stalled}");
    }

    #[test]
    fn clean_runs_have_no_stall() {
        for seed in 1..=3 {
            let (_, loaded) = generated(Scenario::Steady, 20_000, seed);
            assert!(
                analyze(&loaded)
                    .iter()
                    .all(|f| f.kind != FindingKind::AllocatorStall),
                "seed {seed}"
            );
        }
    }

    /// Issue 21: stackless bursts at a fixed period, each right before a new segment, with the
    /// reserved bytes well below the trace's own peak: the device had room, so no allocation
    /// failed. They are cache releases (one note), not stalls, and settings advice does not
    /// rest on them.
    #[test]
    fn periodic_stackless_releases_the_device_had_room_for_are_not_stalls() {
        for seed in 1..=2 {
            let (g, loaded) = generated(Scenario::TransformerReleases, 60_000, seed);
            assert!(
                g.truth.steps >= 4,
                "seed {seed}: {} iterations",
                g.truth.steps
            );
            let findings = analyze(&loaded);
            assert!(
                findings
                    .iter()
                    .all(|f| f.kind != FindingKind::AllocatorStall),
                "seed {seed}: {findings:?}"
            );
            let notes: Vec<_> = findings
                .iter()
                .filter(|f| f.kind == FindingKind::EmptyCache)
                .collect();
            assert_eq!(notes.len(), 1, "seed {seed}: {findings:?}");
            assert!(
                notes[0].title.starts_with("Cache released")
                    && notes[0].summary.contains("the device had room"),
                "seed {seed}: {:?}",
                notes[0]
            );
        }
    }

    #[test]
    fn explicit_empty_cache_is_one_note_not_a_stall() {
        for seed in 1..=3 {
            let (_, loaded) = generated(Scenario::Expandable, 30_000, seed);
            let findings = analyze(&loaded);
            assert!(
                findings
                    .iter()
                    .all(|f| f.kind != FindingKind::AllocatorStall),
                "seed {seed}: {findings:?}"
            );
            let notes: Vec<_> = findings
                .iter()
                .filter(|f| f.kind == FindingKind::EmptyCache)
                .collect();
            assert!(notes.len() <= 1, "seed {seed}: {notes:?}");
        }
    }
}

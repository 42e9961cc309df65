//! What if (issue 13, first part): the trace's requests replayed through the caching-allocator
//! model of `gen::allocator`, under the recorded settings or others, and what the model predicts
//! next to what the file recorded. Fidelity first: with the recorded settings the prediction must
//! match the file before any other setting's prediction can be trusted.
//!
//! Replayed: the pool before the trace (the reverse replay's segments and blocks, seeded as they
//! were, each in the pool its `segment_type` names), every `alloc` and `free_completed` (matched
//! by address), and each burst of recorded `segment_free` / `segment_unmap` as one release of the
//! cached segments (the program's `empty_cache()`, or the allocator's own free-and-retry).
//! `torch_npu`'s 32-byte padding of every request is applied where the file's blocks show it
//! (`request_padding_bytes`). Every fixture replays as recorded (peak reserved and segment
//! counts; `tests/whatif.rs`). Not modelled yet: `max_split_size_mb`,
//! `roundup_power2_divisions`, `garbage_collection_threshold`, the device's capacity (the model
//! grows without bound unless one is given), private pools.

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::r#gen::allocator::{ActionCounts, Allocator, PoolKind};
use crate::model::{Action, BlockState, Device, SegmentType};
use crate::replay::DeviceReplay;

/// `torch_npu`'s padding of every request (`AddPadSize()`, `NPUCachingAllocator.cpp`).
const NPU_PAD_BYTES: u64 = 32;
/// Where the model's address space starts (any value; addresses are mapped).
const MODEL_BASE_ADDRESS: u64 = 0x7f00_0000_0000;

/// The allocator settings a replay runs under.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Settings {
    pub expandable_segments: bool,
    /// Replay the recorded releases of cached segments (`empty_cache()` calls and stalls).
    pub skip_releases: bool,
    /// Device memory the allocator may reserve; `None`: unbounded.
    pub capacity_bytes: Option<u64>,
}

/// What a run did, recorded or predicted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub peak_reserved_bytes: u64,
    /// `segment_alloc`s, or `segment_map`s with expandable segments.
    pub segment_allocs: u64,
    /// `segment_free`s, or `segment_unmap`s.
    pub segment_frees: u64,
    pub ooms: u64,
    /// Reserved minus allocated bytes when reserved peaked: what the cache held unused then.
    pub peak_fragmentation_bytes: u64,
    /// Free-and-retry bursts (a failed device allocation released the cache): the model's own;
    /// `None` for what the file recorded (not counted from the trace here; `analyze` reports
    /// the recorded stalls).
    pub stalls: Option<u64>,
    /// The first `alloc` after which the model's reserved bytes differ from the recorded ones
    /// (`None`: never, or for what the file recorded).
    pub first_divergence_event: Option<u32>,
}

/// The `PYTORCH_CUDA_ALLOC_CONF` / `PYTORCH_NPU_ALLOC_CONF` keys the model follows.
pub const MODELLED_KEYS: [&str; 1] = ["expandable_segments"];
/// Keys the allocators know that the model does not follow yet.
pub const UNMODELLED_KEYS: [&str; 3] = [
    "max_split_size_mb",
    "garbage_collection_threshold",
    "roundup_power2_divisions",
];

impl Settings {
    /// Applies one `KEY:VALUE` (as in `PYTORCH_CUDA_ALLOC_CONF`); the error says what is valid.
    pub fn set(&mut self, key_value: &str) -> Result<(), String> {
        let Some((key, value)) = key_value.split_once(':') else {
            return Err(format!(
                "{key_value:?} is not KEY:VALUE (e.g. expandable_segments:True)"
            ));
        };
        match key.trim() {
            "expandable_segments" => {
                self.expandable_segments = match value.trim() {
                    "True" | "true" | "1" => true,
                    "False" | "false" | "0" => false,
                    other => {
                        return Err(format!(
                            "expandable_segments takes True or False, not {other:?}"
                        ));
                    }
                };
                Ok(())
            }
            key if UNMODELLED_KEYS.contains(&key) => Err(format!(
                "{key} is not modelled yet (keys the replay follows: {})",
                MODELLED_KEYS.join(", ")
            )),
            other => Err(format!(
                "unknown allocator setting {other:?} (keys the replay follows: {}; known but not \
                 modelled yet: {})",
                MODELLED_KEYS.join(", "),
                UNMODELLED_KEYS.join(", ")
            )),
        }
    }
}

/// What the file recorded for `device`.
pub fn recorded(device: &Device, replay: &DeviceReplay) -> Outcome {
    let count = |wanted: &[Action]| {
        device
            .trace
            .action
            .iter()
            .filter(|a| wanted.contains(a))
            .count() as u64
    };
    // As the model measures it: after the `alloc` that the peak's segment was made for (the
    // first one at the peak), not between the `segment_alloc` and it.
    let peak = replay.peak_reserved;
    let after_alloc = peak.event.and_then(|e| {
        (e as usize..device.trace.len())
            .take_while(|&i| replay.reserved_bytes()[i] == peak.bytes)
            .find(|&i| device.trace.action[i] == Action::Alloc)
    });
    let at_peak = replay.totals_after(after_alloc.map(|i| i as u32).or(peak.event));
    Outcome {
        peak_reserved_bytes: replay.peak_reserved.bytes.max(0) as u64,
        segment_allocs: count(&[Action::SegmentAlloc, Action::SegmentMap]),
        segment_frees: count(&[Action::SegmentFree, Action::SegmentUnmap]),
        ooms: count(&[Action::Oom]),
        peak_fragmentation_bytes: (at_peak.reserved_bytes - at_peak.allocated_bytes).max(0) as u64,
        stalls: None,
        first_divergence_event: None,
    }
}

/// Whether the file recorded expandable segments on `device` (a `segment_map`, or a segment
/// marked expandable in the final pool).
pub fn recorded_expandable(device: &Device) -> bool {
    device.trace.action.contains(&Action::SegmentMap)
        || device.segments.iter().any(|s| s.is_expandable)
}

/// The padding the allocator adds to every request, as the file shows it: `torch_npu` adds 32
/// bytes before rounding to 512 (`AddPadSize()` in `NPUCachingAllocator.cpp`), so a live block
/// whose request is a multiple of 512 is 512 bytes larger than it; `CUDA` adds nothing, so such a
/// block is exactly its request. 0 when no block says.
fn request_padding_bytes(device: &Device) -> u64 {
    let (mut padded, mut exact) = (0, 0);
    for b in device.segments.iter().flat_map(|s| &s.blocks) {
        if b.state == BlockState::Inactive
            || b.requested_size_bytes == 0
            || !b.requested_size_bytes.is_multiple_of(512)
        {
            continue;
        }
        if b.size_bytes == b.requested_size_bytes + 512 {
            padded += 1;
        } else if b.size_bytes == b.requested_size_bytes {
            exact += 1;
        }
    }
    if padded > 0 && exact == 0 {
        NPU_PAD_BYTES
    } else {
        0
    }
}

/// The trace of `device` replayed through the allocator model under `settings`.
pub fn predict(device: &Device, replay: &DeviceReplay, settings: &Settings) -> Outcome {
    let capacity = settings.capacity_bytes.unwrap_or(u64::MAX / 4);
    let mut model = Allocator::new(
        MODEL_BASE_ADDRESS,
        capacity,
        settings.expandable_segments,
        0,
        0,
    );
    model.pad_bytes = request_padding_bytes(device);
    // Recorded address → the model's address for the same tensor. The pool before the trace
    // (from the reverse replay) is seeded as it was, at its own addresses, in the pool the file
    // says its segment is in.
    let mut addresses: FxHashMap<u64, u64> = FxHashMap::default();
    for seg in replay.pool_after(device, None).segments {
        let pool = device
            .segments
            .iter()
            .find(|s| (s.address..s.address + s.total_size_bytes).contains(&seg.address))
            .and_then(|s| match s.segment_type {
                SegmentType::Small => Some(PoolKind::Small),
                SegmentType::Large => Some(PoolKind::Large),
                SegmentType::Unknown => None,
            });
        let blocks: Vec<(u64, u64, u64)> = seg
            .blocks
            .iter()
            .map(|b| {
                let requested = if b.state == BlockState::Inactive {
                    0
                } else {
                    addresses.insert(b.address, b.address);
                    b.requested_size_bytes.max(1)
                };
                (b.address, b.size_bytes, requested)
            })
            .collect();
        model.seed_segment(
            seg.address,
            seg.total_size_bytes,
            (i128::from(seg.stream), pool),
            // Without expandable segments, what was mapped before the trace is an ordinary one.
            seg.is_expandable && settings.expandable_segments,
            &blocks,
        );
    }
    // What the model did to hold the blocks from before the trace is not part of the trace.
    let (before, reserved_before) = (model.counts, model.reserved_bytes);
    model.peak_reserved_bytes = reserved_before;
    let trace = &device.trace;
    let mut releasing = false;
    let recorded_reserved = replay.reserved_bytes();
    let mut first_divergence_event = None;
    let mut peak_fragmentation_bytes = reserved_before.saturating_sub(model.allocated_bytes);
    let mut peak_seen = reserved_before;
    for i in 0..trace.len() {
        let (addr, size, stream) = (trace.addr[i], trace.size_bytes[i], trace.stream[i]);
        let release = matches!(trace.action[i], Action::SegmentFree | Action::SegmentUnmap);
        if release && !releasing && !settings.skip_releases {
            model.release_cached(None);
        }
        releasing = release;
        match trace.action[i] {
            Action::Alloc => {
                if let Some(at) = model.malloc(size, i128::from(stream), None) {
                    addresses.insert(addr, at);
                }
                if first_divergence_event.is_none()
                    && recorded_reserved
                        .get(i)
                        .is_some_and(|&r| r != model.reserved_bytes as i64)
                {
                    first_divergence_event = Some(i as u32);
                }
                if model.reserved_bytes > peak_seen {
                    peak_seen = model.reserved_bytes;
                    peak_fragmentation_bytes =
                        model.reserved_bytes.saturating_sub(model.allocated_bytes);
                }
            }
            Action::FreeCompleted => {
                if let Some(at) = addresses.remove(&addr) {
                    model.free(at);
                }
            }
            _ => {}
        }
    }
    Outcome {
        peak_fragmentation_bytes,
        stalls: Some(model.stalls.len() as u64),
        first_divergence_event,
        ..outcome(&model.counts, &before, model.peak_reserved_bytes)
    }
}

/// The settings a sweep tries for a device recorded under `base`: `base` itself, then
/// expandable segments switched, the recorded `empty_cache()` releases left out, and both.
pub fn sweep_settings(base: &Settings) -> Vec<Settings> {
    let mut tried = vec![*base];
    for (flip_expandable, skip_releases) in [(true, false), (false, true), (true, true)] {
        let s = Settings {
            expandable_segments: base.expandable_segments ^ flip_expandable,
            skip_releases: base.skip_releases || skip_releases,
            ..*base
        };
        if !tried.contains(&s) {
            tried.push(s);
        }
    }
    tried
}

/// Every setting of [`sweep_settings`] replayed (on rayon), fewest OOMs and lowest predicted peak
/// reserved first.
pub fn sweep(device: &Device, replay: &DeviceReplay, base: &Settings) -> Vec<(Settings, Outcome)> {
    use rayon::prelude::*;
    let mut results: Vec<(Settings, Outcome)> = sweep_settings(base)
        .into_par_iter()
        .map(|s| (s, predict(device, replay, &s)))
        .collect();
    results.sort_by_key(|(_, o)| (o.ooms, o.peak_reserved_bytes, o.stalls));
    results
}

/// What the model recorded in the trace: `counts` less those it had made `before` it.
fn outcome(counts: &ActionCounts, before: &ActionCounts, peak_reserved_bytes: u64) -> Outcome {
    Outcome {
        peak_reserved_bytes,
        segment_allocs: (counts.segment_alloc + counts.segment_map)
            - (before.segment_alloc + before.segment_map),
        segment_frees: (counts.segment_free + counts.segment_unmap)
            - (before.segment_free + before.segment_unmap),
        ooms: counts.oom - before.oom,
        ..Outcome::default()
    }
}

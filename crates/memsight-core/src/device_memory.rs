//! The whole device's memory, where a recording measured it (msMemScope's SNAPSHOT rows:
//! `mem_get_info`'s total and free), set against what the pool reserved at that moment: the
//! difference is the memory outside the allocator (CANN's runtime, HCCL buffers, other
//! processes), which no block of the trace explains.

use serde::Serialize;

use crate::model::{Device, DeviceMemorySample};
use crate::replay::DeviceReplay;

/// One measurement with the pool's share of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MeasuredMemory {
    pub sample: DeviceMemorySample,
    /// What the pool reserved right after the sample's event (the replay's).
    pub pool_reserved_bytes: u64,
    /// Used on the device and not reserved by the pool (0 where the pool's figure is larger).
    pub outside_pool_bytes: u64,
}

fn measured(sample: &DeviceMemorySample, replay: &DeviceReplay) -> MeasuredMemory {
    let pool_reserved_bytes = sample
        .after_event
        .and_then(|e| replay.reserved_bytes().get(e as usize).copied())
        .unwrap_or(0)
        .max(0) as u64;
    MeasuredMemory {
        sample: *sample,
        pool_reserved_bytes,
        outside_pool_bytes: sample.used_bytes().saturating_sub(pool_reserved_bytes),
    }
}

/// Every measurement of `device`, in time order.
pub fn measured_all(device: &Device, replay: &DeviceReplay) -> Vec<MeasuredMemory> {
    device
        .memory_samples
        .iter()
        .map(|s| measured(s, replay))
        .collect()
}

/// The measurement where the device was fullest (the first of equals).
pub fn fullest(device: &Device, replay: &DeviceReplay) -> Option<MeasuredMemory> {
    device
        .memory_samples
        .iter()
        .reduce(|best, s| {
            if s.used_bytes() > best.used_bytes() {
                s
            } else {
                best
            }
        })
        .map(|s| measured(s, replay))
}

/// The most the pool could have reserved, by the measurements: at each, what it reserved then
/// plus what the device still had free; the smallest of those. `None` without measurements, or
/// where that is below the pool's own peak (other memory was freed meanwhile: no bound holds).
pub fn pool_capacity_bytes(
    device: &Device,
    replay: &DeviceReplay,
) -> Option<(u64, MeasuredMemory)> {
    let peak = replay.peak_reserved.bytes.max(0) as u64;
    measured_all(device, replay)
        .into_iter()
        .map(|m| (m.pool_reserved_bytes.saturating_add(m.sample.free_bytes), m))
        .min_by_key(|&(bytes, _)| bytes)
        .filter(|&(bytes, _)| bytes >= peak)
}

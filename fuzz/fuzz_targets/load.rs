//! Any bytes: load, replay, query the pool, run every detector. Errors are fine; panics, hangs
//! and runaway memory are bugs. Run: `cargo fuzz run load` (see BENCHMARKS.md / README for setup).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use memsight_core::{Loaded, load_bytes};

fuzz_target!(|data: &[u8]| {
    if let Ok(snapshot) = load_bytes(data, Path::new("fuzz.pickle")) {
        let loaded = Loaded::new(snapshot);
        for (device, replay) in loaded.snapshot.devices.iter().zip(&loaded.replays) {
            let last = replay.event_count().checked_sub(1).map(|n| n as u32);
            let _ = replay.pool_after(device, last);
            let _ = replay.pool_after(device, None);
        }
        let _ = memsight_core::detect::analyze(&loaded);
    }
});

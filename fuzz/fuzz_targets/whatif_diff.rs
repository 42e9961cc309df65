//! Any bytes: load, then replay every traced device through the allocator model (recorded
//! settings, expandable segments, no empty_cache, a capacity) and compare the file with itself
//! and with a second file made of the input's tail. Errors are fine; panics, hangs and runaway
//! memory are bugs. Run: `cargo fuzz run whatif_diff` (BENCHMARKS.md, "Fuzzing").
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use memsight_core::whatif::{self, Change, Recording, Settings};
use memsight_core::{Loaded, load_bytes};

fn load(data: &[u8]) -> Option<Loaded> {
    load_bytes(data, Path::new("fuzz.pickle")).ok().map(Loaded::new)
}

fuzz_target!(|data: &[u8]| {
    let Some(loaded) = load(data) else {
        return;
    };
    for (i, device) in loaded.snapshot.devices.iter().enumerate() {
        if device.trace.is_empty() {
            continue;
        }
        let recording = Recording::of(&loaded, i);
        let recorded = Settings::recorded(&recording);
        let _ = whatif::recorded(&recording);
        let _ = whatif::predict_curve(&recording, &recorded);
        let mut changed = recorded;
        for change in Change::parse_all("expandable_segments:True,roundup_power2_divisions:4")
            .unwrap_or_default()
        {
            changed.apply(&change);
        }
        changed.skip_releases = true;
        changed.capacity_bytes = Some(1 << 30);
        if changed.refused_by(&recording).is_none() {
            let _ = whatif::predict(&recording, &changed);
        }
        let last = device.trace.len().checked_sub(1).map(|n| n as u32);
        let _ = whatif::predicted_pool_after(&recording, &recorded, last);
    }
    let a = memsight_core::diff::Recording {
        name: "a",
        loaded: &loaded,
    };
    let _ = memsight_core::diff::diff(a, a, None, None);
    // B: the same bytes less a prefix, when they still load.
    if let Some(other) = load(&data[data.len() / 8..]) {
        let b = memsight_core::diff::Recording {
            name: "b",
            loaded: &other,
        };
        let _ = memsight_core::diff::diff(a, b, None, None);
    }
});

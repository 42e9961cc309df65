//! One digest per file of everything the replay produces: the three totals after every event,
//! the peaks, every lifetime and which lifetime each event belongs to, the pool after 66 events
//! spread over the trace (the first, the last, and 64 between), and all warnings. Build it at two
//! commits and diff the outputs to show that a change to the loader or the replay alters nothing
//! (issue 37's "every figure unchanged").
//!
//! `cargo run --release -p memsight-core --example replay_digest -- FILE...`

use std::hash::{Hash, Hasher};

/// Events whose pool is hashed, besides the state before the first and after the last.
const POOL_SAMPLES: u64 = 64;

fn main() {
    for path in std::env::args_os().skip(1).map(std::path::PathBuf::from) {
        let loaded = match memsight_core::Loaded::open(&path, None) {
            Ok(loaded) => loaded,
            Err(e) => {
                println!("{}: error {e}", path.display());
                continue;
            }
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (device, replay) in loaded.snapshot.devices.iter().zip(&loaded.replays) {
            replay.allocated_bytes().hash(&mut h);
            replay.active_bytes().hash(&mut h);
            replay.reserved_bytes().hash(&mut h);
            let peaks = (
                replay.peak_allocated,
                replay.peak_active,
                replay.peak_reserved,
            );
            format!("{:?} {peaks:?} {:?}", replay.initial, replay.lifetimes).hash(&mut h);
            replay.event_lifetime.hash(&mut h);
            let n = replay.event_count() as u64;
            let mut events = vec![None];
            if n > 0 {
                events.extend((0..POOL_SAMPLES).map(|k| Some((k * n / POOL_SAMPLES) as u32)));
                events.push(Some((n - 1) as u32));
            }
            for event in events {
                format!("{:?}", replay.pool_after(device, event)).hash(&mut h);
            }
        }
        format!("{:?}", loaded.warnings).hash(&mut h);
        println!("{}: {:016x}", path.display(), h.finish());
    }
}

//! The blocks live right after one event, grouped by category and call stack (release build):
//! `cargo run --release -p memsight-core --example categories_at -- FILE DEVICE EVENT`
//!
//! For checking the categories the doctor's findings quote against the blocks themselves.

use std::collections::BTreeMap;
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, device, event] = args.as_slice() else {
        eprintln!("usage: categories_at FILE DEVICE EVENT");
        std::process::exit(2);
    };
    let (Ok(ordinal), Ok(event)) = (device.parse::<u32>(), event.parse::<u32>()) else {
        eprintln!("DEVICE and EVENT are numbers");
        std::process::exit(2);
    };
    let loaded = memsight_core::Loaded::open(&PathBuf::from(path), None).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let (_, categories) = memsight_core::detect::analyze_with_categories(&loaded);
    let Some(index) = loaded
        .snapshot
        .devices
        .iter()
        .position(|d| d.ordinal == ordinal)
    else {
        eprintln!("no device {ordinal}");
        std::process::exit(2);
    };
    let (snapshot, replay) = (&loaded.snapshot, &loaded.replays[index]);
    let device = &snapshot.devices[index];
    // (category, stack's first frames) -> (bytes, blocks)
    let mut groups: BTreeMap<(String, String), (u64, usize)> = BTreeMap::new();
    for (_, id) in replay.live_after(device, Some(event)) {
        let l = &replay.lifetimes[id as usize];
        let frames: Vec<String> = snapshot
            .stack_frames(l.stack)
            .take(4)
            .map(|f| {
                format!(
                    "{}@{}:{}",
                    snapshot.str(f.name),
                    snapshot.str(f.filename),
                    f.line
                )
            })
            .collect();
        let category = format!("{:?}", categories[index].of_lifetime[id as usize]);
        let g = groups.entry((category, frames.join(" | "))).or_default();
        g.0 += l.requested_size_bytes;
        g.1 += 1;
    }
    let mut rows: Vec<_> = groups.into_iter().collect();
    rows.sort_by_key(|(_, (bytes, _))| std::cmp::Reverse(*bytes));
    for ((category, stack), (bytes, blocks)) in rows {
        println!("{category:>14} {bytes:>14} B {blocks:>5}  {stack}");
    }
}

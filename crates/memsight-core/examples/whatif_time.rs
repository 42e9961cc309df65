//! Speed of the what-if replay: for each file given, the busiest traced device replayed under its
//! recorded settings (median of 5) and the sweep (median of 3), after loading. Release build:
//!
//! `cargo run --release -p memsight-core --example whatif_time -- FILE... [--capacity BYTES]`

use std::path::PathBuf;
use std::time::Instant;

use memsight_core::whatif::{self, Recording, Settings};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut files, mut capacity) = (Vec::new(), None);
    while let Some(a) = args.next() {
        if a == "--capacity" {
            capacity = args.next().and_then(|c| c.parse::<u64>().ok());
        } else {
            files.push(PathBuf::from(a));
        }
    }
    for path in &files {
        let loaded = match memsight_core::load_path(path, None) {
            Ok(s) => memsight_core::Loaded::new(s),
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                continue;
            }
        };
        let Some(i) = (0..loaded.snapshot.devices.len())
            .max_by_key(|&i| loaded.snapshot.devices[i].trace.len())
        else {
            continue;
        };
        let recording = Recording::of(&loaded, i);
        let mut settings = Settings::recorded(&recording);
        if capacity.is_some() {
            settings.capacity_bytes = capacity;
        }
        let time = |f: &dyn Fn()| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        };
        let replay = median(
            (0..5)
                .map(|_| {
                    time(&|| {
                        whatif::predict(&recording, &settings);
                    })
                })
                .collect(),
        );
        let tried = whatif::sweep_settings(&recording, &settings).len();
        let sweep = median(
            (0..3)
                .map(|_| {
                    time(&|| {
                        whatif::sweep(&recording, &settings);
                    })
                })
                .collect(),
        );
        println!(
            "{}: {} events; replay {:.0} ms (median of 5); sweep of {tried} settings {:.0} ms (median of 3, {} threads)",
            path.display(),
            recording.device.trace.len(),
            replay * 1e3,
            sweep * 1e3,
            rayon::current_num_threads()
        );
    }
}

//! Time of `memsight diff A B` (release build), in its parts: loading and replaying both files,
//! then the comparison (call sites, categories, iterations):
//! `cargo run --release -p memsight-core --example diff_time -- A B`

use std::path::PathBuf;
use std::time::Instant;

use memsight_core::Loaded;
use memsight_core::diff::{Recording, diff};

/// Runs of each part; the median is quoted.
const RUNS: usize = 5;

fn median(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [a, b] = args.as_slice() else {
        eprintln!("usage: diff_time A B");
        std::process::exit(2);
    };
    let open = |path: &PathBuf| {
        Loaded::open(path, None).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        })
    };
    let (mut load_ms, mut diff_ms, mut total_ms) = (Vec::new(), Vec::new(), Vec::new());
    let mut rows = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        let (la, lb) = (open(a), open(b));
        let loaded = start.elapsed();
        let t = Instant::now();
        let result = diff(
            Recording {
                name: "A",
                loaded: &la,
            },
            Recording {
                name: "B",
                loaded: &lb,
            },
            None,
            None,
        )
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        let compared = t.elapsed();
        rows = result.devices.iter().map(|d| d.call_sites.len()).sum();
        load_ms.push(loaded.as_secs_f64() * 1e3);
        diff_ms.push(compared.as_secs_f64() * 1e3);
        total_ms.push((loaded + compared).as_secs_f64() * 1e3);
    }
    let events: usize = [a, b]
        .iter()
        .map(|p| {
            open(p)
                .snapshot
                .devices
                .iter()
                .map(|d| d.trace.len())
                .sum::<usize>()
        })
        .sum();
    println!(
        "{events} events in both, {rows} call-site rows; median of {RUNS}: load + replay {:.0} ms, diff {:.0} ms, together {:.0} ms",
        median(load_ms),
        median(diff_ms),
        median(total_ms)
    );
}

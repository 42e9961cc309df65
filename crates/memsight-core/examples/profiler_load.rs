//! Load time of a profiler folder (release build), generating one first when asked:
//!
//!     cargo run --release -p memsight-core --example profiler_load -- DIR [--generate ROWS]
//!
//! `--generate ROWS` writes a rank with about ROWS `memory_record.csv` rows into DIR (two rows per
//! sample plus an APP row every 20 ms, a 3 GiB stall in the middle). Prints the median of 3 loads.

use std::path::PathBuf;
use std::time::Instant;

use memsight_core::r#gen::profiler::{ProfilerGenOptions, write_rank};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: profiler_load DIR [--generate ROWS]");
        std::process::exit(2);
    };
    if args.next().as_deref() == Some("--generate") {
        let rows: usize = args
            .next()
            .and_then(|r| r.parse().ok())
            .unwrap_or(10_000_000);
        let samples = rows / 2;
        let t = Instant::now();
        let truth = write_rank(
            &dir,
            &ProfilerGenOptions {
                samples,
                interval_us: 100.0,
                stall: Some((samples / 2, 3 << 30, 20_000)),
                ..ProfilerGenOptions::default()
            },
        )
        .unwrap_or_else(|e| {
            eprintln!("{}: {e}", dir.display());
            std::process::exit(1)
        });
        println!(
            "wrote {} memory_record rows in {:.1} s",
            truth.memory_record_rows,
            t.elapsed().as_secs_f64()
        );
    }
    let size: u64 = std::fs::read_dir(&dir).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    });
    let mut seconds = Vec::new();
    let mut rows = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let run = memsight_core::profiler::open(std::slice::from_ref(&dir)).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        seconds.push(t.elapsed().as_secs_f64());
        rows = run
            .ranks
            .iter()
            .flat_map(|r| &r.curves)
            .map(memsight_core::profiler::Curve::len)
            .sum();
    }
    seconds.sort_by(f64::total_cmp);
    println!(
        "{rows} curve rows, {:.0} MB of CSV: load median {:.2} s (runs {:?})",
        size as f64 / 1e6,
        seconds[1],
        seconds
            .iter()
            .map(|s| format!("{s:.2}"))
            .collect::<Vec<_>>()
    );
}

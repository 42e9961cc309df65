//! Time of each phase of opening a snapshot as `memsight stats` runs them (release build), to
//! compare commits (issue 37): reading the file into memory; unpickling it into the event
//! columns and segments (`load_bytes`, decompression included); the replay and its warnings
//! (`Loaded::new`); the figures `stats` prints (`StatsReport::new`: the allocator's flavour,
//! categories, the final pool); and dropping it all. Median of `RUNS` runs each, with the
//! process's peak memory. It uses only what d134d23 already had public, so the same file builds
//! at that commit: copy it there to measure both side by side.
//!
//! `cargo run --release -p memsight-core --example load_phases -- FILE [RUNS] [--stream]`
//!
//! With `--stream` the file is unpickled while it is read (`load_path`, as `memsight stats` and
//! the app open files): *read* is then 0 and the peak memory holds no copy of the file.

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: load_phases FILE [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args
        .next()
        .and_then(|r| r.to_str().and_then(|r| r.parse().ok()))
        .unwrap_or(5)
        .max(1);
    let stream = args.next().is_some_and(|a| a == "--stream");
    let names = ["read", "unpickle", "replay", "stats", "drop"];
    let mut times: [Vec<f64>; 5] = Default::default();
    let mut events = 0;
    let mut peak_after_replay = None;
    for _ in 0..runs {
        let t = Instant::now();
        let bytes = if stream {
            Vec::new()
        } else {
            std::fs::read(&path).unwrap_or_else(|e| {
                eprintln!("{}: {e}", path.display());
                std::process::exit(1)
            })
        };
        times[0].push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let snapshot = if stream {
            memsight_core::load_path(&path, None)
        } else {
            memsight_core::load_bytes(&bytes, &path)
        }
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        times[1].push(t.elapsed().as_secs_f64());
        drop(bytes);
        events = snapshot
            .devices
            .iter()
            .map(|d| d.trace.len())
            .sum::<usize>();
        let t = Instant::now();
        let loaded = memsight_core::Loaded::new(snapshot);
        times[2].push(t.elapsed().as_secs_f64());
        if peak_after_replay.is_none() {
            peak_after_replay = peak_rss();
        }
        let t = Instant::now();
        let report = memsight_core::report::StatsReport::new(&loaded);
        times[3].push(t.elapsed().as_secs_f64());
        std::hint::black_box(report);
        let t = Instant::now();
        drop(loaded);
        times[4].push(t.elapsed().as_secs_f64());
    }
    println!("{}: {events} events, {runs} runs", path.display());
    let mut total = 0.0;
    for (name, t) in names.iter().zip(&mut times) {
        t.sort_by(f64::total_cmp);
        let median = t[t.len() / 2];
        total += median;
        println!("{name:>10}: {median:.3} s");
    }
    println!("{:>10}: {total:.3} s", "sum");
    // The process's peak resident memory (Linux), for the memory side of the comparison: after
    // the first load and replay, and at the end.
    if let Some(peak) = peak_after_replay {
        println!("{:>10}: {peak}", "peak RSS after replay");
    }
    if let Some(peak) = peak_rss() {
        println!("{:>10}: {peak}", "peak RSS");
    }
}

fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM"))?;
    Some(line.trim_start_matches("VmHWM:").trim().to_string())
}

//! Prints the latency of "the pool after event N" over a whole trace: median, 99th percentile and
//! worst, for a sample of events that includes the worst case (the last event before each
//! checkpoint, which replays a whole interval).
//!
//! `cargo run --release -p memsight-core --example pool_query_latency -- FILE`

use std::path::PathBuf;
use std::time::Instant;

use memsight_core::Loaded;

fn main() {
    let Some(path) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: pool_query_latency FILE");
        std::process::exit(2);
    };
    let start = Instant::now();
    let loaded = match Loaded::open(&path, None) {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("{err}");
            std::process::exit(1);
        }
    };
    println!(
        "loaded and indexed in {:.3} s",
        start.elapsed().as_secs_f64()
    );
    let Some(device) = loaded.snapshot.busiest_device() else {
        return;
    };
    let (device, replay) = loaded
        .replay(device.ordinal)
        .expect("busiest device has a replay");
    let n = replay.event_count();
    // Every 97th event plus the tail of every interval (n-1 and a spread of positions).
    let mut events: Vec<u32> = (0..n as u32).step_by(97).collect();
    events.extend(
        (0..n as u32)
            .step_by(2048)
            .flat_map(|e| [e.saturating_sub(1), e.saturating_sub(2)]),
    );
    events.push(n.saturating_sub(1) as u32);
    let mut micros: Vec<f64> = events
        .iter()
        .map(|&e| {
            let t = Instant::now();
            let pool = replay.pool_after(device, Some(e));
            std::hint::black_box(&pool);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() - 1) as f64 * q) as usize];
    println!(
        "{} queries over {n} events, {} checkpoints: median {:.0} us, p99 {:.0} us, worst {:.0} us",
        micros.len(),
        replay.checkpoint_count(),
        at(0.5),
        at(0.99),
        micros[micros.len() - 1]
    );
}

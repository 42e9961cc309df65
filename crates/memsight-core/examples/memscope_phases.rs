//! Time of each phase of reading an msMemScope recording, as `memsight stats` runs them
//! (release build): reading the rows, mapping them onto the snapshot model, the replay, and
//! the figures `stats` prints. Median of `RUNS` runs each.
//!
//! `cargo run --release -p memsight-core --example memscope_phases -- PATH [RUNS]`

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: memscope_phases PATH [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args
        .next()
        .and_then(|r| r.to_str().and_then(|r| r.parse().ok()))
        .unwrap_or(5)
        .max(1);
    let files = if path.is_dir() {
        memsight_core::memscope::dump_files(&path)
    } else {
        vec![path.clone()]
    };
    let mut times: [Vec<f64>; 5] = Default::default();
    let mut rows_read = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let mut rows = memsight_core::memscope::Rows::default();
        for file in &files {
            memsight_core::memscope::read::read_csv(file, &mut rows).unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(1)
            });
        }
        rows_read = rows.rows.len();
        times[0].push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let snapshot =
            memsight_core::memscope::map::to_snapshot(&rows, &path).unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(1)
            });
        times[1].push(t.elapsed().as_secs_f64());
        drop(rows);
        let t = Instant::now();
        let loaded = memsight_core::Loaded::new(snapshot);
        times[2].push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let report = memsight_core::report::StatsReport::new(&loaded);
        times[3].push(t.elapsed().as_secs_f64());
        std::hint::black_box(report);
        let t = Instant::now();
        drop(loaded);
        times[4].push(t.elapsed().as_secs_f64());
    }
    println!("{rows_read} rows from {} file(s), {runs} runs", files.len());
    let mut total = 0.0;
    for (name, t) in [
        "read rows",
        "map to model",
        "replay",
        "stats figures",
        "drop",
    ]
    .iter()
    .zip(&mut times)
    {
        t.sort_by(f64::total_cmp);
        let median = t[t.len() / 2];
        total += median;
        println!("{name:>14}: {median:.3} s");
    }
    println!("{:>14}: {total:.3} s", "sum of medians");
}

//! Time of all detectors on a snapshot (release build):
//! `cargo run --release -p memsight-core --example analyze_time -- FILE`

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let Some(path) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: analyze_time FILE");
        std::process::exit(2);
    };
    let loaded = memsight_core::Loaded::open(&path, None).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let mut ms = Vec::new();
    let mut findings = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        findings = memsight_core::detect::analyze(&loaded);
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "{} findings; detectors took median {:.1} ms (runs: {:?})",
        findings.len(),
        ms[2],
        ms.iter().map(|m| format!("{m:.1}")).collect::<Vec<_>>()
    );
    for f in &findings {
        println!("  [{:?}] {}", f.kind, f.title);
    }
}

//! Prints the detectors' recall and false alarms against generator truth, as a Markdown table
//! for BENCHMARKS.md:
//!
//!     cargo run --release -p memsight-core --example detector_recall [SEEDS] [EVENTS]
//!
//! Defaults: 10 seeds of every scenario at 50,000 events.

use memsight_core::r#gen::score::score_suite;

fn main() {
    let mut args = std::env::args().skip(1);
    let seeds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let events: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    println!("{seeds} seeds × 7 scenarios × {events} events\n");
    println!("| kind | one unit is | injected | found | missed | false alarms |");
    println!("|---|---|---:|---:|---:|---:|");
    for s in score_suite(1..=seeds, events) {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            s.kind,
            s.unit,
            s.injected,
            s.found,
            s.missed(),
            s.false_alarms
        );
    }
}

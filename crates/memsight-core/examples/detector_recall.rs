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
    println!(
        "{seeds} seeds × {} scenarios × {events} events\n",
        memsight_core::r#gen::Scenario::ALL.len()
    );
    println!("| kind | one unit is | injected | found | missed | false alarms | precision |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for s in score_suite(1..=seeds, events) {
        let flagged = s.found + s.false_alarms;
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            s.kind,
            s.unit,
            s.injected,
            s.found,
            s.missed(),
            s.false_alarms,
            if flagged == 0 {
                "–".to_string()
            } else {
                format!("{:.1} %", s.found as f64 * 100.0 / flagged as f64)
            }
        );
    }
}

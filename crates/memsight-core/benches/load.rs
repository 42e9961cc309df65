//! Load, index and pool-state query benchmarks on generated snapshots.
//!
//! `cargo bench -p memsight-core --bench load`. The side-by-side comparison with Python's
//! `pickle.load` is `scripts/compare_python.sh`; worst-case query latency is the
//! `pool_query_latency` example (see BENCHMARKS.md).

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use memsight_core::r#gen::{self, GenOptions, Scenario};
use memsight_core::{Loaded, load_bytes};

fn snapshot_bytes(events: usize) -> Vec<u8> {
    let g = r#gen::generate(&GenOptions {
        scenario: Scenario::Steady,
        events,
        seed: 1,
        protocol: 4,
        ..GenOptions::default()
    });
    g.write_pickle(Vec::new()).expect("in-memory write")
}

fn load_and_index(c: &mut Criterion) {
    let bytes = snapshot_bytes(100_000);
    let name = Path::new("bench.pickle");
    let mut group = c.benchmark_group("100k events");
    group.sample_size(20);
    group.bench_function("load", |b| {
        b.iter(|| load_bytes(black_box(&bytes), name).expect("loads"));
    });
    let snapshot = load_bytes(&bytes, name).expect("loads");
    group.bench_function("index (replay + checkpoints)", |b| {
        b.iter(|| Loaded::new(black_box(snapshot.clone())));
    });
    group.finish();
}

fn pool_queries(c: &mut Criterion) {
    let bytes = snapshot_bytes(1_000_000);
    let loaded = Loaded::new(load_bytes(&bytes, Path::new("bench.pickle")).expect("loads"));
    let (device, replay) = (&loaded.snapshot.devices[0], &loaded.replays[0]);
    let n = replay.event_count() as u64;
    let mut group = c.benchmark_group("1M events");
    group.bench_function("pool after a random event", |b| {
        let mut state = 1u64;
        b.iter(|| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            replay.pool_after(device, Some(((state >> 33) % n) as u32))
        });
    });
    group.bench_function("totals after a random event", |b| {
        let mut state = 1u64;
        b.iter(|| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            replay.totals_after(Some(((state >> 33) % n) as u32))
        });
    });
    group.finish();
}

criterion_group!(benches, load_and_index, pool_queries);
criterion_main!(benches);

//! Comparing two recordings (issue 14). Expected figures of real files come from
//! `scripts/diff_figures.py` (Python's pickle, independent of memsight):
//! `python3 scripts/diff_figures.py A B`.
//! Generated pairs carry their truth in how they were made (batch size, an injected leak).

mod common;

use memsight_core::category::Category;
use memsight_core::diff::{self, DeviceDiff, DiffError, Matched, Recording, Side};
use memsight_core::r#gen::{self, GenOptions, Scenario};
use memsight_core::{Loaded, load_path};

fn load(name: &str) -> Option<Loaded> {
    let path = common::fixture("snapshots", name)?;
    Some(Loaded::new(
        load_path(&path, None).expect("the fixture loads"),
    ))
}

fn compare(a: &Loaded, b: &Loaded) -> DeviceDiff {
    let result = diff::diff(
        Recording {
            name: "A",
            loaded: a,
        },
        Recording {
            name: "B",
            loaded: b,
        },
        None,
        None,
    )
    .expect("both have traces");
    assert_eq!(result.devices.len(), 1, "one traced device each");
    result.devices.into_iter().next().expect("one device")
}

/// Every block alive at a peak is in exactly one row: the rows' deltas add up to the difference
/// of the peaks, and each side's rows to its peak.
fn assert_sum_rule(d: &DeviceDiff) {
    // These files' traces agree with their segments: every byte of a peak is in some block.
    assert_eq!(
        (
            d.a.unattributed_at_peak_bytes,
            d.b.unattributed_at_peak_bytes
        ),
        (0, 0)
    );
    let sum_a: u64 = d.call_sites.iter().map(|c| c.a.bytes_at_peak).sum();
    let sum_b: u64 = d.call_sites.iter().map(|c| c.b.bytes_at_peak).sum();
    assert_eq!(
        sum_a as i64 + d.a.unattributed_at_peak_bytes,
        d.a.peak_allocated_bytes as i64
    );
    assert_eq!(
        sum_b as i64 + d.b.unattributed_at_peak_bytes,
        d.b.peak_allocated_bytes as i64
    );
    let deltas: i64 = d.call_sites.iter().map(|c| c.delta_at_peak_bytes).sum();
    assert_eq!(
        deltas + d.b.unattributed_at_peak_bytes - d.a.unattributed_at_peak_bytes,
        d.peak_allocated_delta_bytes()
    );
    let categories: i64 = d.categories.iter().map(|c| c.delta_bytes).sum();
    assert_eq!(
        categories + d.b.unattributed_at_peak_bytes - d.a.unattributed_at_peak_bytes,
        d.peak_allocated_delta_bytes()
    );
}

/// `(file, call sites with blocks or allocations, peak allocated, peak reserved, peak event,
/// allocs, bytes requested, segment allocs, segment frees)` per fixture, from the script's
/// self-diffs (its `call_sites_total` less the sites whose blocks were all freed before the peak
/// and that allocate nothing in the trace: one in `cuda_modern_compilectx`).
/// One fixture's figures from the script's self-diff.
struct Expected {
    file: &'static str,
    sites: usize,
    peak_allocated_bytes: u64,
    peak_reserved_bytes: u64,
    peak_event: u32,
    allocs: u64,
    bytes_requested: u64,
    segment_allocs: u64,
    segment_frees: u64,
}

const SELF_FIGURES: [Expected; 6] = [
    Expected {
        file: "cuda_2023_no_time.pickle",
        sites: 33,
        peak_allocated_bytes: 5_876_132_840,
        peak_reserved_bytes: 6_471_811_072,
        peak_event: 3697,
        allocs: 3505,
        bytes_requested: 28_040_399_084,
        segment_allocs: 152,
        segment_frees: 0,
    },
    Expected {
        file: "cuda_cppframes_snapshotevents.pickle",
        sites: 33,
        peak_allocated_bytes: 108_258_676,
        peak_reserved_bytes: 134_217_728,
        peak_event: 759,
        allocs: 1935,
        bytes_requested: 1_516_882_910,
        segment_allocs: 7,
        segment_frees: 0,
    },
    Expected {
        file: "cuda_ctx512_forward_mixed.pickle",
        sites: 51,
        peak_allocated_bytes: 39_860_763_648,
        peak_reserved_bytes: 40_514_879_488,
        peak_event: 6762,
        allocs: 2702,
        bytes_requested: 53_562_176_512,
        segment_allocs: 638,
        segment_frees: 597,
    },
    Expected {
        file: "cuda_modern_compilectx.pickle",
        sites: 43,
        peak_allocated_bytes: 13_923_997_700,
        peak_reserved_bytes: 14_180_941_824,
        peak_event: 1402,
        allocs: 1721,
        bytes_requested: 58_890_300_607,
        segment_allocs: 0,
        segment_frees: 0,
    },
    Expected {
        file: "npu_snapshot_expandable.pkl",
        sites: 7,
        peak_allocated_bytes: 597_327_488,
        peak_reserved_bytes: 643_825_664,
        peak_event: 7430,
        allocs: 2899,
        bytes_requested: 4_747_481_944,
        segment_allocs: 45,
        segment_frees: 0,
    },
    Expected {
        file: "npu_snapshot_with_empty_cache.pkl",
        sites: 7,
        peak_allocated_bytes: 597_327_488,
        peak_reserved_bytes: 662_700_032,
        peak_event: 7498,
        allocs: 2899,
        bytes_requested: 4_747_481_944,
        segment_allocs: 79,
        segment_frees: 54,
    },
];

#[test]
fn a_file_against_itself_differs_nowhere() {
    for e in &SELF_FIGURES {
        let name = e.file;
        let Some(loaded) = load(name) else { return };
        let d = compare(&loaded, &loaded);
        assert_eq!(d.a, d.b, "{name}");
        assert_eq!(d.a.peak_allocated_bytes, e.peak_allocated_bytes, "{name}");
        assert_eq!(
            d.a.peak_active_bytes, e.peak_allocated_bytes,
            "{name}: active peaks with allocated here"
        );
        assert_eq!(d.a.peak_reserved_bytes, e.peak_reserved_bytes, "{name}");
        assert_eq!(d.a.peak_event, Some(e.peak_event), "{name}");
        assert_eq!(d.a.allocs, e.allocs, "{name}");
        assert_eq!(d.a.bytes_requested, e.bytes_requested, "{name}");
        assert_eq!(
            (d.a.segment_allocs, d.a.segment_frees),
            (e.segment_allocs, e.segment_frees),
            "{name}"
        );
        assert_eq!(
            d.a.unattributed_at_peak_bytes, 0,
            "{name}: the blocks explain the peak"
        );
        assert_eq!(d.call_sites.len(), e.sites, "{name}");
        for row in &d.call_sites {
            assert_eq!(row.a, row.b, "{name}: {}", row.top_frame);
            assert_eq!(row.delta_at_peak_bytes, 0);
            assert_eq!(row.only_in, None);
            assert_eq!(row.matched_by, Matched::Exact);
        }
        assert!(d.same_requests, "{name}");
        assert_sum_rule(&d);
    }
}

#[test]
fn the_npu_pair_shows_the_same_requests_and_a_layout_difference() {
    let (Some(a), Some(b)) = (
        load("npu_snapshot_with_empty_cache.pkl"),
        load("npu_snapshot_expandable.pkl"),
    ) else {
        return;
    };
    let d = compare(&a, &b);
    // Peaks from the script: the same allocated, 18 MiB less reserved with expandable segments.
    assert_eq!(d.a.peak_allocated_bytes, 597_327_488);
    assert_eq!(d.b.peak_allocated_bytes, 597_327_488);
    assert_eq!(d.a.peak_reserved_bytes, 662_700_032);
    assert_eq!(d.b.peak_reserved_bytes, 643_825_664);
    assert_eq!((d.a.segment_allocs, d.b.segment_allocs), (79, 45));
    assert!(!d.a.expandable_segments && d.b.expandable_segments);
    // The same 2,899 requests at every call site; nothing only on one side.
    assert!(d.same_requests);
    assert_eq!(d.call_sites.len(), 7);
    for row in &d.call_sites {
        assert_eq!(row.only_in, None, "{}", row.top_frame);
        assert_eq!(row.a, row.b, "{}", row.top_frame);
    }
    // The scripts differ: lines moved by one and another entry point (test_fsdp2.py's <module>
    // runs main); the script's figures per call site, A's line → B's line.
    let row = |a_line: i64| {
        d.call_sites
            .iter()
            .find(|r| {
                r.stack
                    .first()
                    .is_some_and(|f| f.line == a_line && f.name == "train_one_step")
            })
            .unwrap_or_else(|| panic!("train_one_step:{a_line} has a row"))
    };
    for (line, allocs, requested, at_peak) in [
        (17, 916, 470_601_352, 282_342_776),
        (15, 813, 3_061_102_968, 40),
        (11, 3, 125_829_120, 125_829_120),
        (13, 3, 2_143_296, 714_432),
    ] {
        let r = row(line);
        assert_eq!(r.matched_by, Matched::WithoutEntryPoint, "line {line}");
        assert_eq!(
            (r.a.allocs, r.a.bytes_requested, r.a.bytes_at_peak),
            (allocs, requested, at_peak),
            "line {line}"
        );
    }
    // No stack at all: 1,137 allocations and 188,441,080 bytes at the peak on each side.
    let unnamed = d
        .call_sites
        .iter()
        .find(|r| r.stack.is_empty())
        .expect("a row without stack");
    assert_eq!(
        (unnamed.a.allocs, unnamed.a.bytes_at_peak),
        (1137, 188_441_080)
    );
    assert_eq!(unnamed.matched_by, Matched::Exact);
    // The categories at the peak are alike too.
    assert!(d.categories.iter().all(|c| c.delta_bytes == 0));
    assert_sum_rule(&d);
}

#[test]
fn unrelated_files_differ_by_their_call_sites() {
    let (Some(a), Some(b)) = (
        load("cuda_modern_compilectx.pickle"),
        load("cuda_2023_no_time.pickle"),
    ) else {
        return;
    };
    let d = compare(&a, &b);
    assert_eq!(d.peak_allocated_delta_bytes(), -8_047_864_860);
    // The script's largest differences: the notebook cell only B has, then A's model.
    let top = &d.call_sites[0];
    assert_eq!(top.only_in, Some(Side::B));
    assert_eq!(top.delta_at_peak_bytes, 4_524_663_588);
    assert_eq!(top.b.allocs, 1552);
    assert!(
        top.top_frame.contains("3105878423.py:21"),
        "{}",
        top.top_frame
    );
    assert_eq!(d.call_sites[1].delta_at_peak_bytes, -2_415_919_104);
    assert_eq!(d.call_sites[1].only_in, Some(Side::A));
    // Only the stack-less blocks are on both sides: two top levels are not one call site.
    let both: Vec<_> = d
        .call_sites
        .iter()
        .filter(|r| r.only_in.is_none())
        .collect();
    assert_eq!(both.len(), 1);
    assert!(both[0].stack.is_empty());
    // The script's 43 + 32 one-sided sites, less A's one whose blocks were all freed before the
    // peak and that allocates nothing in the trace (nothing to show).
    let only = |side| {
        d.call_sites
            .iter()
            .filter(|r| r.only_in == Some(side))
            .count()
    };
    assert_eq!((only(Side::A), only(Side::B)), (42, 32));
    assert!(!d.same_requests);
    assert_sum_rule(&d);
}

#[test]
fn files_without_a_trace_or_device_are_errors_that_name_them() {
    let (Some(legacy), Some(npu)) = (
        load("cuda_legacy_list.pkl"),
        load("npu_snapshot_expandable.pkl"),
    ) else {
        return;
    };
    let err = diff::diff(
        Recording {
            name: "legacy.pkl",
            loaded: &legacy,
        },
        Recording {
            name: "npu.pkl",
            loaded: &npu,
        },
        None,
        None,
    )
    .expect_err("no trace");
    assert_eq!(
        err,
        DiffError::NoTrace {
            file: "legacy.pkl".into()
        }
    );
    assert!(err.to_string().starts_with("no trace to compare"), "{err}");
    assert!(err.to_string().ends_with(": legacy.pkl"), "{err}");
    let err = diff::diff(
        Recording {
            name: "npu.pkl",
            loaded: &npu,
        },
        Recording {
            name: "npu.pkl",
            loaded: &npu,
        },
        Some(3),
        None,
    )
    .expect_err("no device 3");
    assert_eq!(
        err.to_string(),
        "no device 3 with a trace (devices with one: 0): npu.pkl"
    );
}

fn generated(scenario: Scenario, batch: u64) -> Loaded {
    let g = r#gen::generate(&GenOptions {
        scenario,
        events: 60_000,
        seed: 4,
        batch,
        ..GenOptions::default()
    });
    let bytes = g.write_pickle(Vec::new()).expect("in memory");
    Loaded::new(memsight_core::load_bytes(&bytes, std::path::Path::new("gen")).expect("loads"))
}

/// Bytes at each peak of one category, (A, B).
fn category(d: &DeviceDiff, category: Category) -> (u64, u64) {
    let c = d
        .categories
        .iter()
        .find(|c| c.category == category)
        .expect("every category");
    (c.a_bytes, c.b_bytes)
}

#[test]
fn a_larger_batch_grows_activations_not_parameters() {
    // Batch 2 against batch 6 of one seed: the same program and data, three times the tokens.
    let (small, large) = (
        generated(Scenario::Transformer, 2),
        generated(Scenario::Transformer, 6),
    );
    let d = compare(&small, &large);
    assert_sum_rule(&d);
    assert!(d.peak_allocated_delta_bytes() > 0);
    assert_eq!(d.a.allocs, d.b.allocs, "the same requests, larger");
    // Parameters, gradients and optimizer state are the model's: the same bytes at both peaks.
    for kind in [
        Category::Parameter,
        Category::Gradient,
        Category::OptimizerState,
    ] {
        let (a, b) = category(&d, kind);
        assert!(a > 0, "{kind:?}");
        assert_eq!(a, b, "{kind:?}");
    }
    // Activations scale with the batch: three times at the peak, and so does each forward
    // call site that holds them.
    let ratio = |a: u64, b: u64| b as f64 / a as f64;
    let (aa, ab) = category(&d, Category::Activation);
    assert!(
        (ratio(aa, ab) - 3.0).abs() < 0.03,
        "activations {aa} → {ab}"
    );
    let forward: Vec<_> = d
        .call_sites
        .iter()
        .filter(|r| r.top_frame.starts_with("forward (model.py") && r.a.bytes_at_peak > 0)
        .collect();
    assert!(forward.len() >= 5);
    for r in &forward {
        let grew = ratio(r.a.bytes_at_peak, r.b.bytes_at_peak);
        assert!((grew - 3.0).abs() < 0.03, "{}: ×{grew}", r.top_frame);
    }
    // The rows that grew most are the model's forward; what did not grow is no row of growth.
    assert!(d.call_sites[0].top_frame.starts_with("forward (model.py"));
    let grown: i64 = d
        .call_sites
        .iter()
        .filter(|r| r.delta_at_peak_bytes > 0)
        .map(|r| r.delta_at_peak_bytes)
        .sum();
    assert_eq!(grown, d.peak_allocated_delta_bytes(), "nothing shrank");
    assert!(
        d.call_sites.iter().all(|r| r.only_in.is_none()),
        "the same program on both sides"
    );
}

#[test]
fn a_leak_is_the_largest_growth_against_a_clean_run() {
    let (clean, leaky) = (
        generated(Scenario::Transformer, 4),
        generated(Scenario::TransformerLeak, 4),
    );
    let d = compare(&clean, &leaky);
    assert_sum_rule(&d);
    let top = &d.call_sites[0];
    assert_eq!(top.only_in, Some(Side::B), "{}", top.top_frame);
    assert!(top.top_frame.contains("metrics.py:42"), "{}", top.top_frame);
    // Its blocks: the leaked ones alive at B's peak (some from before the ring buffer's start).
    let leak = r#gen::transformer::LEAK_BYTES;
    assert_eq!(top.b.bytes_at_peak % leak, 0);
    assert!(top.b.bytes_at_peak >= top.b.allocs * leak && top.b.allocs > 0);
    // Nothing else moved by as much as one leaked block.
    for r in &d.call_sites[1..] {
        assert!(
            r.delta_at_peak_bytes.unsigned_abs() < leak,
            "{}: {}",
            r.top_frame,
            r.delta_at_peak_bytes
        );
    }
}

fn profiler_run(name: &str) -> Option<memsight_core::profiler::ProfilerRun> {
    let path = common::fixture("profiler", name)?;
    Some(memsight_core::profiler::open(&[path]).expect("the fixture opens"))
}

/// Figures from `python3 scripts/profiler_figures.py --diff A B` (Python's csv module).
#[test]
fn profiler_runs_compare_by_operator() {
    use memsight_core::diff::profiler;
    let (Some(a), Some(b)) = (
        profiler_run("rank0_level0"),
        profiler_run("static_graph_rank1"),
    ) else {
        return;
    };
    let same = profiler::diff(("a", &a), ("a", &a), None, None).expect("rank 0 of each");
    let r = &same.ranks[0];
    assert_eq!(r.a, r.b);
    assert_eq!(r.operators.len(), 58);
    assert!(
        r.operators
            .iter()
            .all(|o| o.delta_at_peak_bytes == 0 && o.only_in.is_none())
    );

    let d = profiler::diff(("a", &a), ("b", &b), None, None).expect("rank 0 of each");
    let r = &d.ranks[0];
    assert_eq!(r.a.operator_peak_bytes, 510_196_224);
    assert_eq!(r.b.operator_peak_bytes, 3_044_880_384);
    assert_eq!((r.a.operator_rows, r.b.operator_rows), (184, 21));
    // Every operator's bytes at the peak add up to the peak, on both sides.
    let at_peak =
        |side: fn(&profiler::OperatorDiff) -> u64| r.operators.iter().map(side).sum::<u64>();
    assert_eq!(at_peak(|o| o.a.bytes_at_peak), r.a.operator_peak_bytes);
    assert_eq!(at_peak(|o| o.b.bytes_at_peak), r.b.operator_peak_bytes);
    // APP reserved is flat on rank 0: its last sample at the peak, less operator reserved then.
    assert_eq!(r.a.outside_allocator_bytes, Some(611_164_160.0));
    // static_graph_rank1's curve times were rounded (1.69512E+15): no moment to line up.
    assert!(r.b.coarse_times);
    assert_eq!(r.b.outside_allocator_bytes, None);
    assert_eq!(r.operators.len(), 61);
    let only = |side| {
        r.operators
            .iter()
            .filter(|o| o.only_in == Some(side))
            .count()
    };
    assert_eq!((only(Side::A), only(Side::B)), (54, 3));
    let top: Vec<(&str, i64)> = r
        .operators
        .iter()
        .take(8)
        .map(|o| (o.name.as_str(), o.delta_at_peak_bytes))
        .collect();
    assert_eq!(
        top,
        [
            ("aten::_convolution", 1_233_126_912),
            ("aten::native_batch_norm", 1_027_609_088),
            ("aten::max_pool2d_with_indices", 321_718_784),
            ("aten::div", 308_280_832),
            ("aten::_foreach_add", -245_276_160),
            ("aten::mm", -234_489_344),
            ("aten::npu_dtype_cast", 154_141_184),
            ("aten::empty_strided", -19_266_048),
        ]
    );
    let conv = &r.operators[0];
    assert_eq!(
        (conv.a.count, conv.a.total_bytes, conv.a.largest_bytes),
        (5, 63_949_312, 25_609_728)
    );
    assert_eq!(
        (conv.b.count, conv.b.total_bytes, conv.b.largest_bytes),
        (3, 1_233_126_912, 822_084_096)
    );
    // A rank that is not there is an error naming the run's ranks.
    // static_graph_rank1 is rank 1, rank0_level0 has no number after "rank" but 0: chosen, they
    // compare; a rank that is not there is an error naming the run's ranks.
    let chosen = profiler::diff(("a", &a), ("b", &b), Some(0), Some(1)).expect("both ranks");
    assert_eq!(chosen.ranks[0].rank_b, "static_graph_rank1");
    let err = profiler::diff(("a", &a), ("b", &b), Some(0), Some(4)).expect_err("one rank");
    assert!(
        err.to_string()
            .starts_with("no rank 4 (ranks there: 1 (static_graph_rank1)): b"),
        "{err}"
    );
}

#[test]
fn a_cuda_file_against_an_npu_file_compares_by_call_site_and_says_so() {
    // The transformer loop with C++ frames (an even seed) names CUDA's allocator; the `npu`
    // scenario writes torch_npu's workspace entries.
    let (cuda, npu) = (
        generated(Scenario::Transformer, 4),
        generated(Scenario::Npu, 4),
    );
    let d = compare(&cuda, &npu);
    assert_sum_rule(&d);
    assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
    assert!(
        d.notes[0].starts_with("A is from CUDA, B from an Ascend NPU (torch_npu)"),
        "{}",
        d.notes[0]
    );
    // Two CUDA files: nothing to say.
    let other = generated(Scenario::Transformer, 6);
    assert!(compare(&cuda, &other).notes.is_empty());
}

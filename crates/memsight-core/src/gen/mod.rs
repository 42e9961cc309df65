//! The snapshot generator: realistic snapshot files from a model of the caching allocator driven
//! by training-loop workloads, with a ground-truth sidecar describing what was injected.
//!
//! Used for tests (the detectors' ground truth), benchmarks (files of any size) and the bundled
//! demo. Deterministic for a given seed.

use crate::allocator;
pub mod memscope;
pub mod profiler;
pub mod run;
pub mod score;
pub mod transformer;
mod writer;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use allocator::{Allocator, GenEvent, round_size};
use serde::Serialize;
pub use writer::PickleWriter;

use crate::model::Action;

/// A workload to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// A training loop that reaches a steady state.
    Steady,
    /// The steady loop plus one call site that keeps a tensor alive every step.
    Leak,
    /// Widely varying sequence lengths: reserved far above allocated.
    Fragmentation,
    /// Fragmentation on a nearly full device: free-everything-and-retry bursts.
    Stall,
    /// The steady loop, then a request the device cannot hold.
    Oom,
    /// A `torch_npu` file: no times, stream pointers, 8 device traces, the workspace triple.
    Npu,
    /// The steady loop with `expandable_segments:True` and periodic `empty_cache()`.
    Expandable,
    /// A realistic transformer training loop ([`transformer`]): layers sharing call sites,
    /// varying op mix and sequence lengths, gradient accumulation, `AdamW`.
    Transformer,
    /// The transformer loop leaking 256 KiB per iteration at a varying point of the iteration.
    TransformerLeak,
    /// The transformer loop releasing its cache every other iteration from a hook the trace has
    /// no frames for (stackless `segment_free` bursts at a fixed period, each followed by a new
    /// segment for the next request): cache releases the device never needed, not stalls.
    TransformerReleases,
    /// The transformer's forward passes alone under `torch.inference_mode()` (each layer's
    /// tensors freed after the next layer), no backward, no optimizer, no annotations.
    TransformerInference,
    /// The transformer loop without gradient accumulation calling `zero_grad()` after the next
    /// forward pass, not at the end of the step: last step's gradients stay allocated through
    /// every forward pass.
    TransformerLateZeroGrad,
    /// The transformer loop calling `zero_grad(set_to_none=False)`: the gradients made in the
    /// first step (before the trace) are kept for good, and every backward pass in the trace
    /// adds into them.
    TransformerKeptGrads,
    /// The transformer loop under a hand-written Adam that replaces its moments every step with
    /// new per-parameter lists: optimizer state that lives one step, not temporaries.
    TransformerReplacedAdam,
    /// The steady loop as an edited file: every block size in the trace multiplied by
    /// [`INCONSISTENT_SIZE_SCALE`], the segments left as recorded, so the trace allocates far
    /// more than its segments hold.
    Inconsistent,
    /// The fragmentation loop dumped without its trace (`torch.cuda.memory_snapshot()`, or
    /// history never recorded): the pool alone, with completely free segments and holes.
    TracelessIdle,
}

impl Scenario {
    pub const ALL: [Scenario; 16] = [
        Self::Steady,
        Self::Leak,
        Self::Fragmentation,
        Self::Stall,
        Self::Oom,
        Self::Npu,
        Self::Expandable,
        Self::Transformer,
        Self::TransformerLeak,
        Self::TransformerReleases,
        Self::TransformerInference,
        Self::TransformerLateZeroGrad,
        Self::TransformerKeptGrads,
        Self::TransformerReplacedAdam,
        Self::Inconsistent,
        Self::TracelessIdle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Steady => "steady",
            Self::Leak => "leak",
            Self::Fragmentation => "fragmentation",
            Self::Stall => "stall",
            Self::Oom => "oom",
            Self::Npu => "npu",
            Self::Expandable => "expandable",
            Self::Transformer => "transformer",
            Self::TransformerLeak => "transformer-leak",
            Self::TransformerReleases => "transformer-releases",
            Self::TransformerInference => "transformer-inference",
            Self::TransformerLateZeroGrad => "transformer-late-zero-grad",
            Self::TransformerKeptGrads => "transformer-kept-grads",
            Self::TransformerReplacedAdam => "transformer-replaced-adam",
            Self::Inconsistent => "inconsistent",
            Self::TracelessIdle => "traceless-idle",
        }
    }
}

impl FromStr for Scenario {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|sc| sc.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|s| s.name()).collect();
                format!("unknown scenario `{s}` (one of: {})", names.join(", "))
            })
    }
}

/// Peak memory of `memsight gen` per trace event, rounded up: 5 M transformer or NPU events peak
/// at 478 MB (`/usr/bin/time -f %M`, BENCHMARKS.md).
pub const BYTES_PER_EVENT: usize = 100;
/// The most events `memsight gen` writes (about 5 GB of memory and a 4 GB pickle; real traces
/// reach 13 M): the generator holds the whole trace in memory.
pub const MAX_EVENTS: usize = 50_000_000;

#[derive(Clone, Debug)]
pub struct GenOptions {
    pub scenario: Scenario,
    /// Trace entries to keep (the ring buffer size).
    pub events: usize,
    pub seed: u64,
    /// 4 (Python 3.8–3.13) or 5 (Python 3.14).
    pub protocol: u8,
    /// Sequences per micro-batch of the transformer scenarios: activations scale with it,
    /// parameters, gradients and optimizer state do not.
    pub batch: u64,
}

impl Default for GenOptions {
    fn default() -> Self {
        Self {
            scenario: Scenario::Steady,
            events: 100_000,
            seed: 1,
            protocol: 4,
            batch: transformer::BATCH,
        }
    }
}

/// What was injected, for tests to check detectors against (`FILE.truth.json`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Truth {
    pub scenario: String,
    pub seed: u64,
    pub events: usize,
    pub device: u32,
    /// Events the ring buffer dropped before the trace starts.
    pub dropped_events: u64,
    pub steps: u64,
    pub leak: Option<LeakTruth>,
    pub stalls: Vec<StallTruth>,
    pub oom: Option<OomTruth>,
    /// Every `segment_alloc` made although the free bytes cached in the same pool and stream
    /// covered the request (trace indices).
    pub fragmented_segment_allocs: Vec<FragmentationTruth>,
    /// The call site whose requests caused the most of that growth, innermost frame first.
    pub fragmentation_stack: Vec<TruthFrame>,
    /// `alloc` events of activations and gradients in steps with an extreme input length (trace indices).
    pub extreme_requests: Vec<u64>,
    /// The largest reserved-minus-allocated gap over the trace, and where.
    pub max_unused_reserved_bytes: u64,
    pub max_unused_reserved_event: Option<u64>,
    /// The trace's block sizes were multiplied after recording (`inconsistent`).
    pub inconsistent: Option<InconsistentTruth>,
    /// The pool of a file without a trace (`traceless-idle`), from the generator's allocator.
    pub idle: Option<IdleTruth>,
}

/// What the edit of an `inconsistent` file did.
#[derive(Clone, Debug, Serialize)]
pub struct InconsistentTruth {
    pub trace_size_scale: u64,
}

/// The cached memory no block uses, in a file without a trace.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IdleTruth {
    pub reserved_bytes: u64,
    /// Free bytes in every segment: `free_segment_bytes + hole_bytes`.
    pub idle_bytes: u64,
    pub free_segments: u64,
    pub free_segment_bytes: u64,
    /// Segments that hold live blocks and free ones.
    pub holed_segments: u64,
    pub hole_bytes: u64,
}

/// How much an `inconsistent` file's trace overstates its blocks (the file: peak
/// allocated 8× reserved).
pub const INCONSISTENT_SIZE_SCALE: u64 = 8;

#[derive(Clone, Debug, Default, Serialize)]
pub struct LeakTruth {
    /// The leaking call site, innermost frame first.
    pub stack: Vec<TruthFrame>,
    pub bytes_per_step: u64,
    /// Trace indices of the leaked allocations' `alloc` events still in the trace.
    pub alloc_events: Vec<u64>,
    /// Leaked allocations alive at the end (also those allocated before the trace).
    pub live_at_end: u64,
}

impl LeakTruth {
    /// Whether `stack` of `snapshot` is the leaking call site (file and line of every frame).
    pub fn is_stack(&self, snapshot: &crate::Snapshot, stack: crate::model::StackId) -> bool {
        snapshot
            .stack_frames(stack)
            .map(|f| (snapshot.str(f.filename), f.line))
            .eq(self
                .stack
                .iter()
                .map(|f| (f.filename.as_str(), i64::from(f.line))))
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct TruthFrame {
    pub filename: String,
    pub line: u32,
    pub name: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct StallTruth {
    pub first_event: u64,
    pub last_event: u64,
    pub reserved_before_bytes: u64,
    pub reserved_after_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FragmentationTruth {
    pub segment_alloc_event: u64,
    pub requested_bytes: u64,
    pub cached_free_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct OomTruth {
    pub event: u64,
    pub requested_bytes: u64,
    pub device_free_bytes: u64,
}

/// A frame of the generator's stack library.
type LibFrame = (&'static str, u32, &'static str);

/// The stack library: every call site the workload allocates from.
struct Stacks {
    stacks: Vec<Vec<LibFrame>>,
}

impl Stacks {
    /// A context with no frames: code the trace has no stack for (a hook run from C++).
    fn empty(&mut self) -> u32 {
        self.stacks.push(Vec::new());
        (self.stacks.len() - 1) as u32
    }

    fn add(&mut self, inner: &[LibFrame], user: &[LibFrame], cpp: bool) -> u32 {
        let mut frames: Vec<LibFrame> = Vec::new();
        if cpp {
            frames.extend([
                (
                    "??",
                    0,
                    "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
                ),
                ("??", 0, "at::native::empty_cuda"),
                ("??", 0, "at::_ops::empty_memory_format::call"),
            ]);
        }
        frames.extend_from_slice(inner);
        for &u in user {
            frames.extend([
                u,
                ("torch/nn/modules/module.py", 1762, "_call_impl"),
                ("torch/nn/modules/module.py", 1751, "_wrapped_call_impl"),
            ]);
        }
        frames.extend([
            ("train.py", 131, "train_step"),
            ("train.py", 211, "main"),
            ("train.py", 250, "<module>"),
        ]);
        self.stacks.push(frames);
        (self.stacks.len() - 1) as u32
    }
}

/// Deterministic pseudo-random numbers (`SplitMix64`).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

/// A generated snapshot, ready to write.
pub struct Generated {
    pub options: GenOptions,
    pub allocator: Allocator,
    stacks: Vec<Vec<LibFrame>>,
    annotations: Vec<(String, bool, i64)>,
    pub truth: Truth,
    with_times: bool,
    stream_raw: i128,
    device_count: usize,
}

const LAYERS: usize = 12;

/// Runs the scenario's workload until the ring buffer holds `events` entries (plus a warm-up the
/// ring buffer drops, so the trace starts mid-run as real ones do).
#[expect(
    clippy::too_many_lines,
    reason = "the workload reads best as one training loop"
)]
pub fn generate(options: &GenOptions) -> Generated {
    let sc = options.scenario;
    let mut rng = Rng(options.seed ^ 0x6d65_6d73_6967_6874);
    let npu = sc == Scenario::Npu;
    let stream_raw: i128 = if npu { 1_815_786_048 } else { 0 };
    let capacity_bytes: u64 = match sc {
        Scenario::Stall => 8 << 30,
        Scenario::Oom => 40 << 30,
        _ => 80 << 30,
    };
    let base = if npu {
        0x12c0_0000_0000
    } else {
        0x7f00_0000_0000
    };
    let start_us = 1_750_000_000_000_000 + i64::try_from(options.seed % 1_000_000).unwrap_or(0);
    let mut a = Allocator::new(
        base,
        capacity_bytes,
        sc == Scenario::Expandable,
        options.events.max(1),
        start_us,
    );

    let mut lib = Stacks { stacks: Vec::new() };
    let param_stack = lib.add(
        &[("torch/nn/modules/linear.py", 106, "__init__")],
        &[("model.py", 40, "__init__")],
        false,
    );
    let optim_stack = lib.add(
        &[
            ("torch/optim/adamw.py", 171, "_init_group"),
            ("torch/optim/adamw.py", 226, "step"),
        ],
        &[],
        true,
    );
    let optim_tmp_stack = lib.add(
        &[
            ("torch/optim/adamw.py", 532, "_multi_tensor_adamw"),
            ("torch/optim/adamw.py", 226, "step"),
        ],
        &[],
        true,
    );
    let act_stacks: Vec<u32> = (0..5)
        .map(|k| {
            let op = [
                ("torch/nn/functional.py", 2380, "linear"),
                ("torch/nn/functional.py", 1704, "gelu"),
                (
                    "torch/nn/functional.py",
                    5830,
                    "scaled_dot_product_attention",
                ),
                ("torch/nn/functional.py", 2910, "layer_norm"),
                ("torch/nn/functional.py", 1330, "dropout"),
            ][k];
            lib.add(
                &[op],
                &[
                    ("model.py", 54 + 7 * k as u32, "forward"),
                    ("model.py", 120, "forward"),
                ],
                k % 2 == 0,
            )
        })
        .collect();
    let tmp_stack = lib.add(
        &[
            ("torch/_tensor.py", 39, "wrapped"),
            ("torch/nn/functional.py", 3462, "cross_entropy"),
        ],
        &[("model.py", 140, "loss")],
        false,
    );
    let empty_cache_stack = lib.add(&[("torch/cuda/memory.py", 192, "empty_cache")], &[], false);
    let loss_stack = lib.add(
        &[("torch/nn/modules/loss.py", 1295, "forward")],
        &[("model.py", 150, "compute_loss")],
        false,
    );
    let grad_stacks: Vec<u32> = (0..3)
        .map(|k| {
            lib.add(
                &[
                    ("torch/autograd/graph.py", 825, "_engine_run_backward"),
                    ("torch/autograd/__init__.py", 353, "backward"),
                ],
                &[("model.py", 80 + k, "backward_hook")],
                true,
            )
        })
        .collect();
    let leak_frames: [LibFrame; 2] = [
        ("metrics.py", 42, "accumulate"),
        ("train.py", 135, "record_metrics"),
    ];
    let leak_stack = {
        let mut frames = vec![("torch/_tensor.py", 1120, "detach")];
        frames.extend(leak_frames);
        frames.extend([("train.py", 211, "main"), ("train.py", 250, "<module>")]);
        lib.stacks.push(frames);
        (lib.stacks.len() - 1) as u32
    };

    let warmup = (options.events / 5).max(200) as u64;
    let target = options.events as u64 + warmup;
    let with_times = !npu;
    let mut annotations = Vec::new();
    let mut leaked: Vec<(u64, u64)> = Vec::new(); // (recorded index of alloc, addr)
    let mut truth = Truth {
        scenario: sc.name().into(),
        seed: options.seed,
        events: options.events,
        ..Truth::default()
    };
    let mut max_unused = (0u64, None);
    let mut extreme: Vec<u64> = Vec::new(); // recorded indices

    let transformer = matches!(
        sc,
        Scenario::Transformer
            | Scenario::TransformerLeak
            | Scenario::TransformerReleases
            | Scenario::TransformerInference
            | Scenario::TransformerLateZeroGrad
            | Scenario::TransformerKeptGrads
            | Scenario::TransformerReplacedAdam
    );
    let mut leak_truth_stack = leak_stack;
    let mut leak_bytes = 2 << 20;
    let mut step = 0u64;
    if transformer {
        let run = transformer::run(
            &mut a,
            &mut lib,
            &mut rng,
            stream_raw,
            target,
            transformer::Shape {
                leak: sc == Scenario::TransformerLeak,
                release_every: (sc == Scenario::TransformerReleases).then_some(2),
                inference: sc == Scenario::TransformerInference,
                late_zero_grad: sc == Scenario::TransformerLateZeroGrad,
                keep_grads: sc == Scenario::TransformerKeptGrads,
                replace_state: sc == Scenario::TransformerReplacedAdam,
                cpp: options.seed.is_multiple_of(2),
                batch: options.batch.max(1),
            },
        );
        annotations = run.annotations;
        step = run.iterations;
        leaked = run.leaked;
        leak_truth_stack = run.leak_stack;
        leak_bytes = transformer::LEAK_BYTES;
    }

    // Parameters and optimizer state live for the whole run.
    let hidden_bytes: u64 = 4096 * 2;
    let mut params = Vec::new();
    for _ in 0..if transformer { 0 } else { LAYERS } {
        for _ in 0..4 {
            let size = hidden_bytes * rng.range(256, 4096);
            params.extend(
                a.malloc(size, stream_raw, Some(param_stack))
                    .map(|addr| (addr, size)),
            );
            a.tick(5);
        }
        params.extend(
            a.malloc(hidden_bytes, stream_raw, Some(param_stack))
                .map(|addr| (addr, hidden_bytes)),
        );
    }
    let mut optimizer_ready = false;
    let mut oom_done = false;
    while !transformer && a.recorded < target && !oom_done {
        step += 1;
        annotations.push((format!("ProfilerStep#{step}"), true, a.clock_us));
        let mut extreme_step = false;
        let seq: u64 = match sc {
            Scenario::Fragmentation | Scenario::TracelessIdle => {
                if rng.below(10) == 0 {
                    extreme_step = true;
                    rng.range(2048, 8192)
                } else {
                    rng.range(64, 1024)
                }
            }
            Scenario::Stall => {
                if rng.below(10) == 0 {
                    extreme_step = true;
                    rng.range(1024, 3072)
                } else {
                    rng.range(64, 1024)
                }
            }
            _ => 512 + rng.below(4) * 16,
        };
        let batch = 8;
        // Forward: activations kept for backward, temporaries freed at once.
        let mut saved: Vec<u64> = Vec::new();
        for _layer in 0..LAYERS {
            for (k, &stack) in act_stacks.iter().enumerate() {
                let elems = batch * seq * [1024, 4096, 1024, 1024, 1024][k];
                let size = elems * 2 + rng.below(3) * 64;
                a.tick(rng.range(3, 30) as i64);
                match a.malloc(size, stream_raw, Some(stack)) {
                    Some(addr) => {
                        if extreme_step {
                            extreme.push(a.recorded - 1);
                        }
                        saved.push(addr);
                    }
                    None => break,
                }
                if rng.below(3) == 0 {
                    a.tick(rng.range(2, 10) as i64);
                    if let Some(t) = a.malloc(rng.range(4, 2048) * 4, stream_raw, Some(tmp_stack)) {
                        a.tick(2);
                        a.free(t);
                    }
                }
            }
        }
        // The loss: once per step, alive until backward is done.
        a.tick(5);
        let loss = a.malloc(4096, stream_raw, Some(loss_stack));
        if sc == Scenario::Leak {
            let size = 2 << 20;
            a.tick(4);
            if let Some(addr) = a.malloc(size, stream_raw, Some(leak_stack)) {
                leaked.push((a.recorded - 1, addr));
            }
        }
        // Backward: gradients of activations, then activations go.
        for (i, addr) in saved.into_iter().rev().enumerate() {
            let stack = grad_stacks[i % grad_stacks.len()];
            let size = batch * seq * 1024 * 2;
            a.tick(rng.range(3, 40) as i64);
            if let Some(g) = a.malloc(size, stream_raw, Some(stack)) {
                if extreme_step {
                    extreme.push(a.recorded - 1);
                }
                a.tick(rng.range(2, 20) as i64);
                a.free(g);
            }
            a.free(addr);
        }
        if let Some(loss) = loss {
            a.free(loss);
        }
        // Optimizer: state allocated at the first step, temporaries every step.
        if !optimizer_ready {
            for &(_, size) in &params {
                for _ in 0..2 {
                    a.tick(3);
                    a.malloc(size, stream_raw, Some(optim_stack));
                }
            }
            optimizer_ready = true;
        }
        for &(_, size) in params.iter().step_by(4) {
            a.tick(rng.range(2, 12) as i64);
            if let Some(t) = a.malloc(size, stream_raw, Some(optim_tmp_stack)) {
                a.free(t);
            }
        }
        if sc == Scenario::Expandable && step.is_multiple_of(25) {
            a.release_cached(Some(empty_cache_stack));
        }
        annotations.push((format!("ProfilerStep#{step}"), false, a.clock_us));
        a.tick(rng.range(200, 2000) as i64);
        let unused = a.reserved_bytes.saturating_sub(a.allocated_bytes);
        if unused > max_unused.0 {
            max_unused = (unused, Some(a.recorded.saturating_sub(1)));
        }
        if sc == Scenario::Oom && a.recorded + 64 >= target {
            let requested = capacity_bytes + (capacity_bytes >> 3);
            a.tick(10);
            let none = a.malloc(requested, stream_raw, Some(act_stacks[1]));
            debug_assert!(none.is_none());
            oom_done = true;
        }
    }

    let dropped = a.recorded - a.trace.len() as u64;
    let in_trace = |recorded_index: u64| recorded_index.checked_sub(dropped);
    truth.dropped_events = dropped;
    truth.steps = step;
    truth.max_unused_reserved_bytes = max_unused.0;
    truth.max_unused_reserved_event = max_unused.1.and_then(in_trace);
    if matches!(sc, Scenario::Leak | Scenario::TransformerLeak) {
        truth.leak = Some(LeakTruth {
            stack: truth_frames(&lib.stacks[leak_truth_stack as usize]),
            bytes_per_step: leak_bytes,
            alloc_events: leaked.iter().filter_map(|&(r, _)| in_trace(r)).collect(),
            live_at_end: leaked.len() as u64,
        });
    }
    truth.stalls = a
        .stalls
        .iter()
        .filter_map(|s| {
            Some(StallTruth {
                first_event: in_trace(s.first_event)?,
                last_event: in_trace(s.last_event)?,
                reserved_before_bytes: s.reserved_before_bytes,
                reserved_after_bytes: s.reserved_after_bytes,
            })
        })
        .collect();
    truth.extreme_requests = extreme.iter().filter_map(|&r| in_trace(r)).collect();
    truth.fragmented_segment_allocs = a
        .fragmented_growth
        .iter()
        .filter_map(|g| {
            Some(FragmentationTruth {
                segment_alloc_event: in_trace(g.event)?,
                requested_bytes: g.requested_bytes,
                cached_free_bytes: g.cached_free_bytes,
            })
        })
        .collect();
    let mut growth_by_stack: std::collections::BTreeMap<u32, u64> =
        std::collections::BTreeMap::new();
    for g in a
        .fragmented_growth
        .iter()
        .filter(|g| in_trace(g.event).is_some())
    {
        if let Some(stack) = g.stack {
            *growth_by_stack.entry(stack).or_default() += g.requested_bytes;
        }
    }
    if let Some((&stack, _)) = growth_by_stack
        .iter()
        .max_by_key(|&(&stack, &bytes)| (bytes, std::cmp::Reverse(stack)))
    {
        truth.fragmentation_stack = truth_frames(&lib.stacks[stack as usize]);
    }
    if sc == Scenario::Oom
        && let Some((i, e)) = a
            .trace
            .iter()
            .enumerate()
            .rev()
            .find(|(_, e)| e.action == Action::Oom)
    {
        truth.oom = Some(OomTruth {
            event: i as u64,
            requested_bytes: e.size,
            device_free_bytes: e.device_free.unwrap_or(0),
        });
    }

    if npu {
        add_npu_workspace(&mut a, stream_raw);
    }
    if sc == Scenario::Inconsistent {
        for e in &mut a.trace {
            if matches!(
                e.action,
                Action::Alloc | Action::FreeRequested | Action::FreeCompleted
            ) {
                e.size *= INCONSISTENT_SIZE_SCALE;
            }
        }
        truth.inconsistent = Some(InconsistentTruth {
            trace_size_scale: INCONSISTENT_SIZE_SCALE,
        });
    }
    if sc == Scenario::TracelessIdle {
        a.trace.clear();
        truth = Truth {
            scenario: sc.name().into(),
            seed: options.seed,
            idle: Some(idle_truth(&a)),
            ..Truth::default()
        };
        annotations.clear();
    }
    Generated {
        options: options.clone(),
        allocator: a,
        stacks: lib.stacks,
        annotations: if with_times { annotations } else { Vec::new() },
        truth,
        with_times,
        stream_raw,
        device_count: if npu { 8 } else { 1 },
    }
}

/// The allocator's cached memory that no block uses, segment by segment.
fn idle_truth(a: &Allocator) -> IdleTruth {
    let mut idle = IdleTruth::default();
    // As the snapshot lists them: one segment per run of mapped pages.
    let ranges = a
        .segments
        .iter()
        .flat_map(|(&addr, seg)| seg.mapped_ranges(addr).into_iter().map(move |r| (seg, r)));
    for (seg, (start, size)) in ranges {
        idle.reserved_bytes += size;
        let free: u64 = seg
            .blocks
            .range(start..start + size)
            .map(|(_, b)| b)
            .filter(|b| !b.allocated)
            .map(|b| b.size)
            .sum();
        if free == size {
            idle.free_segments += 1;
            idle.free_segment_bytes += free;
        } else if free > 0 {
            idle.holed_segments += 1;
            idle.hole_bytes += free;
        }
    }
    idle.idle_bytes = idle.free_segment_bytes + idle.hole_bytes;
    idle
}

fn truth_frames(frames: &[LibFrame]) -> Vec<TruthFrame> {
    frames
        .iter()
        .map(|&(f, l, n)| TruthFrame {
            filename: f.into(),
            line: l,
            name: n.into(),
        })
        .collect()
}

/// `torch_npu` prepends, per stream, `[workspace_snapshot, segment_alloc, alloc]` for the live
/// workspace, whose segment shows as one full-size block.
fn add_npu_workspace(a: &mut Allocator, stream: i128) {
    let size: u64 = 64 << 20;
    let addr = a
        .segments
        .keys()
        .next_back()
        .map_or(0x12c0_0000_0000, |&last| last + (8 << 30));
    let mut blocks = std::collections::BTreeMap::new();
    blocks.insert(
        addr,
        allocator::GenBlock {
            size,
            requested: size,
            stack: None,
            allocated: true,
        },
    );
    a.segments.insert(
        addr,
        allocator::GenSegment {
            size,
            pool: allocator::PoolKind::Large,
            stream,
            expandable: false,
            stack: None,
            blocks,
            holes: std::collections::BTreeMap::new(),
        },
    );
    for _ in 0..3 {
        a.trace.pop_front();
    }
    for action in [
        Action::Alloc,
        Action::SegmentAlloc,
        Action::WorkspaceSnapshot,
    ] {
        a.trace.push_front(GenEvent {
            action,
            addr,
            size,
            stream,
            time_us: 0,
            stack: None,
            device_free: None,
        });
    }
}

/// Generates a protocol-4 snapshot of `scenario` and loads it back through the real loader, in
/// memory: the generator's model and ground truth beside what the loader made of its pickle.
pub fn generate_loaded(scenario: Scenario, events: usize, seed: u64) -> (Generated, crate::Loaded) {
    let g = generate(&GenOptions {
        scenario,
        events,
        seed,
        protocol: 4,
        ..GenOptions::default()
    });
    let bytes = match g.write_pickle(Vec::new()) {
        Ok(bytes) => bytes,
        Err(err) => unreachable!("writing to memory cannot fail: {err}"),
    };
    let snapshot = crate::load_bytes(&bytes, Path::new(scenario.name()))
        .unwrap_or_else(|err| unreachable!("the generator writes valid snapshots: {err}"));
    (g, crate::Loaded::new(snapshot))
}

impl Generated {
    /// Writes the snapshot pickle to `out`.
    pub fn write_pickle<W: Write>(&self, out: W) -> io::Result<W> {
        let mut w = PickleWriter::new(out, self.options.protocol)?;
        let cuda = self.with_times;
        w.begin_dict();
        w.entry("segments", |w| self.write_segments(w))?;
        w.item()?;
        w.str("device_traces");
        w.begin_list();
        for device in 0..self.device_count {
            w.item()?;
            w.begin_list();
            if device == 0 {
                for e in &self.allocator.trace {
                    w.item()?;
                    self.write_event(&mut w, e)?;
                    w.end_list_item();
                }
            }
            w.end_list();
            w.end_list_item();
        }
        w.end_list();
        w.end_dict_item();
        if cuda {
            w.entry("allocator_settings", |w| {
                let expandable = self.allocator.config.expandable_segments;
                w.begin_dict();
                let conf = if expandable {
                    "expandable_segments:True"
                } else {
                    ""
                };
                let _ = w.entry("PYTORCH_CUDA_ALLOC_CONF", |w| w.str(conf));
                let _ = w.entry("max_split_size", |w| w.int(-1));
                let _ = w.entry("garbage_collection_threshold", |w| w.float(0.0));
                let _ = w.entry("expandable_segments", |w| w.bool(expandable));
                w.end_dict();
            })?;
            w.item()?;
            w.str("external_annotations");
            w.begin_list();
            for (name, start, time_us) in &self.annotations {
                w.item()?;
                w.begin_dict();
                w.entry("name", |w| w.str(name))?;
                w.entry("stage", |w| w.str(if *start { "START" } else { "END" }))?;
                w.entry("device", |w| w.int(0))?;
                w.entry("time_us", |w| w.int(i128::from(*time_us)))?;
                w.end_dict();
                w.end_list_item();
            }
            w.end_list();
            w.end_dict_item();
        }
        w.end_dict();
        w.finish()
    }

    fn write_frames<W: Write>(&self, w: &mut PickleWriter<W>, stack: Option<u32>) {
        let Some(stack) = stack else {
            w.begin_list();
            w.end_list();
            return;
        };
        if w.shared_ref(u64::from(stack)) {
            return;
        }
        w.begin_shared_list(u64::from(stack));
        for &(filename, line, name) in &self.stacks[stack as usize] {
            let _ = w.item();
            w.begin_dict();
            let _ = w.entry("name", |w| w.str(name));
            let _ = w.entry("filename", |w| w.str(filename));
            let _ = w.entry("line", |w| w.int(i128::from(line)));
            w.end_dict();
            w.end_list_item();
        }
        w.end_list();
    }

    fn write_event<W: Write>(&self, w: &mut PickleWriter<W>, e: &GenEvent) -> io::Result<()> {
        w.begin_dict();
        w.entry("action", |w| w.str(e.action.name(&[])))?;
        if e.action == Action::Oom {
            w.entry("device_free", |w| {
                w.int(i128::from(e.device_free.unwrap_or(0)));
            })?;
        } else {
            w.entry("addr", |w| w.int(i128::from(e.addr)))?;
        }
        w.entry("size", |w| w.int(i128::from(e.size)))?;
        w.entry("stream", |w| w.int(e.stream))?;
        if self.with_times {
            w.entry("time_us", |w| w.int(i128::from(e.time_us)))?;
        }
        if e.stack.is_some() {
            w.entry("frames", |w| self.write_frames(w, e.stack))?;
        }
        if self.with_times {
            w.entry("compile_context", |w| w.str("N/A"))?;
            w.entry("user_metadata", |w| w.str(""))?;
        }
        w.end_dict();
        Ok(())
    }

    fn write_segments<W: Write>(&self, w: &mut PickleWriter<W>) {
        w.begin_list();
        // One segment per run of mapped pages, as `PyTorch`'s `snapshot()` lists them.
        let ranges = self.allocator.segments.iter().flat_map(|(&addr, seg)| {
            seg.mapped_ranges(addr)
                .into_iter()
                .map(move |(start, size)| (start, size, seg))
        });
        for (addr, size, seg) in ranges {
            let blocks = || seg.blocks.range(addr..addr + size);
            let allocated: u64 = blocks()
                .filter(|(_, b)| b.allocated)
                .map(|(_, b)| b.size)
                .sum();
            let requested: u64 = blocks()
                .filter(|(_, b)| b.allocated)
                .map(|(_, b)| b.requested)
                .sum();
            let _ = w.item();
            w.begin_dict();
            let _ = w.entry("device", |w| w.int(0));
            let _ = w.entry("address", |w| w.int(i128::from(addr)));
            let _ = w.entry("total_size", |w| w.int(i128::from(size)));
            let _ = w.entry("allocated_size", |w| w.int(i128::from(allocated)));
            let _ = w.entry("active_size", |w| w.int(i128::from(allocated)));
            let _ = w.entry("requested_size", |w| w.int(i128::from(requested)));
            let _ = w.entry("stream", |w| w.int(self.stream_raw));
            let kind = if seg.pool == allocator::PoolKind::Small {
                "small"
            } else {
                "large"
            };
            let _ = w.entry("segment_type", |w| w.str(kind));
            let _ = w.entry("segment_pool_id", |w| w.pair(0, 0));
            let _ = w.entry("is_expandable", |w| w.bool(seg.expandable));
            let _ = w.entry("frames", |w| self.write_frames(w, seg.stack));
            let _ = w.entry("blocks", |w| {
                w.begin_list();
                for (&baddr, b) in blocks() {
                    let _ = w.item();
                    w.begin_dict();
                    let _ = w.entry("address", |w| w.int(i128::from(baddr)));
                    let _ = w.entry("size", |w| w.int(i128::from(b.size)));
                    let _ = w.entry("requested_size", |w| {
                        w.int(i128::from(if b.allocated { b.requested } else { 0 }));
                    });
                    let _ = w.entry("state", |w| {
                        w.str(if b.allocated {
                            "active_allocated"
                        } else {
                            "inactive"
                        });
                    });
                    let _ = w.entry("frames", |w| {
                        self.write_frames(w, if b.allocated { b.stack } else { None });
                    });
                    w.end_dict();
                    w.end_list_item();
                }
                w.end_list();
            });
            w.end_dict();
            w.end_list_item();
        }
        w.end_list();
    }

    /// Writes the snapshot to `path` (gzip-compressed when it ends in `.gz`) and the ground truth
    /// to `path.truth.json`, each whole or not at all (see [`crate::output`]); returns the truth
    /// file's path. Where `path` is not a regular file (`/dev/stdout`, a FIFO), only the
    /// snapshot is written: `/dev/stdout.truth.json` is no place for a file (`None`).
    pub fn write_files(&self, path: &Path) -> Result<Option<PathBuf>, crate::output::OutputError> {
        let stream = std::fs::metadata(path).is_ok_and(|m| !m.is_file());
        let mut truth_path = path.as_os_str().to_owned();
        truth_path.push(".truth.json");
        let truth_path = PathBuf::from(truth_path);
        // Both refused before either is written.
        if !stream {
            crate::output::check_output(&truth_path, &[])?;
        }
        crate::output::write_whole(path, &[], |tmp| {
            let pickle = || -> io::Result<()> {
                let file = BufWriter::with_capacity(1 << 20, File::create(tmp)?);
                if path.extension().is_some_and(|e| e == "gz") {
                    let gz = self.write_pickle(flate2::write::GzEncoder::new(
                        file,
                        flate2::Compression::default(),
                    ))?;
                    gz.finish()?.flush()
                } else {
                    self.write_pickle(file)?.flush()
                }
            };
            pickle().map_err(|e| e.to_string())
        })?;
        if stream {
            return Ok(None);
        }
        let json = serde_json::to_vec_pretty(&self.truth).map_err(|e| e.to_string());
        crate::output::write_whole(&truth_path, &[], |tmp| {
            std::fs::write(tmp, json?).map_err(|e| e.to_string())
        })?;
        Ok(Some(truth_path))
    }
}

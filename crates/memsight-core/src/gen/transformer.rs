//! A realistic training loop, shaped after real snapshots rather than after the detectors: a
//! transformer of [`LAYERS`] layers whose layers all allocate from the same lines of code (the
//! same stacks, [`LAYERS`] times per pass), mixture-of-experts layers that route to a varying
//! number of experts (the op mix changes from iteration to iteration), variable sequence
//! lengths, gradient accumulation over [`MICRO_BATCHES`] micro-batches, weight gradients made by
//! `AccumulateGrad` and kept until `zero_grad(set_to_none=True)`, `AdamW` state made lazily in the
//! first `Optimizer.step` and kept for good, the fp32 upcast of the logits for the loss.
//!
//! The backward pass runs on autograd's engine thread, which has no Python frames: with C++
//! frames its allocations carry engine frames, without them no stack at all — as in real files.
//! `ProfilerStep#N` and `Optimizer.step#AdamW.step` annotations are written; tests drop them to
//! check the detectors without.

use super::{Allocator, LibFrame, Rng, Stacks};

/// Transformer blocks.
pub const LAYERS: usize = 24;
/// Micro-batches per optimizer step (gradient accumulation).
pub const MICRO_BATCHES: usize = 2;
/// What the injected leak keeps per iteration.
pub const LEAK_BYTES: u64 = 256 << 10;

const HIDDEN: u64 = 1024;
const HEADS: u64 = 16;
const VOCAB: u64 = 32_000;
/// Sequences per micro-batch unless `GenOptions::batch` says otherwise.
pub const BATCH: u64 = 4;
/// The largest micro-batch the generator takes: its tensors stay within what a device holds
/// (more, and the largest activation would pass the loader's 1 PiB bound for one request).
pub const MAX_BATCH: u64 = 65_536;
/// The next batch, copied to the device after a cache release (`release_every`).
const PREFETCH_BYTES: u64 = 768 << 20;
/// qkv, proj, three experts' fc, two layer norms.
const PARAMS_PER_LAYER: usize = 7;

/// How the loop is run.
#[derive(Clone, Copy, Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one switch per variant of the loop a scenario runs"
)]
pub(super) struct Shape {
    /// Inject the leak.
    pub leak: bool,
    /// Release the cache (`empty_cache()` from a hook with no frames in the trace) after every
    /// this many iterations.
    pub release_every: Option<u64>,
    /// Forward passes alone under `torch.inference_mode()`: each layer's tensors freed once the
    /// next layer has used them, no backward, no optimizer, no step annotations.
    pub inference: bool,
    /// `optimizer.zero_grad()` called after the next forward pass (before `loss.backward()`), not
    /// at the end of the step: last step's gradients stay allocated through the forward pass.
    pub late_zero_grad: bool,
    /// `optimizer.zero_grad(set_to_none=False)`: the first step's gradients are zeroed in place
    /// and kept for good; every later backward pass adds a new gradient into them and frees it.
    pub keep_grads: bool,
    /// A hand-written Adam (a `torch.optim.Optimizer` subclass) that rebuilds its moments every
    /// step as new per-parameter lists (`[b1 * m + (1 - b1) * g for m, g in …]`) and drops the
    /// old ones: the state lives from one step to the next, never longer.
    pub replace_state: bool,
    /// Stacks carry C++ frames.
    pub cpp: bool,
    /// Sequences per micro-batch.
    pub batch: u64,
}

/// What one run produced, for the generator's truth.
pub(super) struct Run {
    /// `(name, is_start, time_us)`.
    pub annotations: Vec<(String, bool, i64)>,
    pub iterations: u64,
    /// `(recorded index, address)` of every leaked block.
    pub leaked: Vec<(u64, u64)>,
    pub leak_stack: u32,
}

/// The model's call sites.
struct Sites {
    to_device: u32,
    forward: [u32; 7],
    softmax_tmp: u32,
    logits: u32,
    loss_upcast: u32,
    make_grads: u32,
    backward_tmp: Option<u32>,
    accumulate_grad: Option<u32>,
    adamw_state: u32,
    adamw_tmp: u32,
    /// The hand-written Adam's list comprehension.
    replaced_state: u32,
    /// `Optimizer.zero_grad`, on the gradients' frees.
    zero_grad: u32,
    leak: u32,
}

#[expect(clippy::too_many_lines, reason = "one table of the model's call sites")]
fn sites(lib: &mut Stacks, cpp: bool) -> Sites {
    let layer = |op: LibFrame, line: u32| -> [LibFrame; 2] { [op, ("model.py", line, "forward")] };
    let mut forward = [0; 7];
    let ops: [(LibFrame, u32); 7] = [
        (("torch/nn/functional.py", 2910, "layer_norm"), 61),
        (("torch/nn/functional.py", 2380, "linear"), 63),
        (("torch/nn/functional.py", 2100, "softmax"), 67),
        (("torch/nn/functional.py", 2380, "linear"), 70),
        (("torch/nn/functional.py", 2910, "layer_norm"), 72),
        (("torch/nn/functional.py", 2380, "linear"), 90),
        (("torch/nn/functional.py", 1704, "gelu"), 91),
    ];
    for (k, &(op, line)) in ops.iter().enumerate() {
        forward[k] = lib.add(&[], &layer(op, line), cpp);
    }
    let engine = |lib: &mut Stacks, node: &'static str| -> u32 {
        lib.stacks.push(vec![
            (
                "??",
                0,
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
            ),
            ("??", 0, node),
            ("??", 0, "torch::autograd::Engine::evaluate_function"),
            ("??", 0, "torch::autograd::Engine::thread_main"),
        ]);
        (lib.stacks.len() - 1) as u32
    };
    let leak = {
        let mut frames: Vec<LibFrame> = vec![
            ("torch/_tensor.py", 1120, "detach"),
            ("metrics.py", 42, "accumulate"),
        ];
        frames.extend([
            ("train.py", 71, "train_step"),
            ("train.py", 120, "main"),
            ("train.py", 130, "<module>"),
        ]);
        lib.stacks.push(frames);
        (lib.stacks.len() - 1) as u32
    };
    Sites {
        to_device: lib.add(
            &[
                ("torch/nn/modules/module.py", 1340, "convert"),
                ("torch/nn/modules/module.py", 942, "_apply"),
            ],
            &[("torch/nn/modules/module.py", 1355, "to")],
            cpp,
        ),
        forward,
        softmax_tmp: lib.add(
            &[("torch/nn/functional.py", 2100, "softmax")],
            &layer(("model.py", 66, "attention"), 67),
            cpp,
        ),
        logits: lib.add(
            &[("torch/nn/functional.py", 2380, "linear")],
            &[("model.py", 140, "forward")],
            cpp,
        ),
        loss_upcast: lib.add(
            &[("torch/nn/functional.py", 3462, "cross_entropy")],
            &[("model.py", 150, "compute_loss")],
            cpp,
        ),
        make_grads: lib.add(
            &[
                ("torch/autograd/__init__.py", 97, "_make_grads"),
                ("torch/autograd/__init__.py", 340, "backward"),
                ("torch/_tensor.py", 626, "backward"),
            ],
            &[],
            cpp,
        ),
        backward_tmp: cpp.then(|| engine(lib, "torch::autograd::generated::MmBackward0::apply")),
        accumulate_grad: cpp.then(|| engine(lib, "torch::autograd::AccumulateGrad::apply")),
        adamw_state: lib.add(
            &[
                ("torch/_refs/__init__.py", 4930, "zeros_like"),
                ("torch/optim/adamw.py", 171, "_init_group"),
                ("torch/optim/adamw.py", 226, "step"),
                ("torch/optim/optimizer.py", 485, "wrapper"),
            ],
            &[],
            cpp,
        ),
        adamw_tmp: lib.add(
            &[
                ("torch/optim/adamw.py", 532, "_multi_tensor_adamw"),
                ("torch/optim/adamw.py", 226, "step"),
                ("torch/optim/optimizer.py", 485, "wrapper"),
            ],
            &[],
            cpp,
        ),
        replaced_state: lib.add(
            &[
                ("lowmem_adam.py", 58, "<listcomp>"),
                ("lowmem_adam.py", 58, "step"),
                ("torch/optim/optimizer.py", 485, "wrapper"),
            ],
            &[],
            cpp,
        ),
        zero_grad: lib.add(&[("torch/optim/optimizer.py", 950, "zero_grad")], &[], cpp),
        leak,
    }
}

/// Runs the loop until the ring buffer has seen `target` events.
#[expect(
    clippy::too_many_lines,
    reason = "one training loop, read top to bottom"
)]
pub(super) fn run(
    a: &mut Allocator,
    lib: &mut Stacks,
    rng: &mut Rng,
    stream: i128,
    target: u64,
    shape: Shape,
) -> Run {
    let Shape {
        leak,
        release_every,
        inference,
        late_zero_grad,
        keep_grads,
        replace_state,
        cpp,
        batch,
    } = shape;
    let s = sites(lib, cpp);
    let hook = lib.empty();
    let mut out = Run {
        annotations: Vec::new(),
        iterations: 0,
        leaked: Vec::new(),
        leak_stack: s.leak,
    };
    // Parameters (fp32): qkv, proj, fc1, fc2 per expert, two layer norms; then the embedding.
    let expert_bytes = 4 * HIDDEN * HIDDEN * 4;
    let mut params: Vec<u64> = Vec::new();
    for _ in 0..LAYERS {
        for size in [
            3 * HIDDEN * HIDDEN * 4,
            HIDDEN * HIDDEN * 4,
            expert_bytes,
            expert_bytes,
            expert_bytes,
            HIDDEN * 4,
            HIDDEN * 4,
        ] {
            a.tick(3);
            if a.malloc(size, stream, Some(s.to_device)).is_some() {
                params.push(size);
            }
        }
    }
    a.tick(2);
    if a.malloc(VOCAB * HIDDEN * 4, stream, Some(s.to_device))
        .is_some()
    {
        params.push(VOCAB * HIDDEN * 4);
    }
    let mut adamw_ready = false;
    // The hand-written Adam's moments of the last step.
    let mut moments: Vec<u64> = Vec::new();
    let mut prefetched: Option<u64> = None;
    // Last step's gradients, where zero_grad comes late.
    let mut stale: Vec<u64> = Vec::new();
    while inference && a.recorded < target {
        out.iterations += 1;
        let seq = 128 * rng.range(2, 8);
        let tokens = batch * seq;
        let mut previous: Vec<u64> = Vec::new();
        for _ in 0..LAYERS {
            let mut kept = Vec::new();
            for (k, size) in [
                tokens * HIDDEN * 2,
                3 * tokens * HIDDEN * 2,
                batch * HEADS * seq * seq * 2,
                tokens * HIDDEN * 2,
            ]
            .into_iter()
            .enumerate()
            {
                a.tick(rng.range(3, 30) as i64);
                kept.extend(a.malloc(size, stream, Some(s.forward[k])));
            }
            for addr in previous.drain(..) {
                a.tick(2);
                a.free(addr);
            }
            previous = kept;
        }
        a.tick(10);
        let logits = a.malloc(tokens * VOCAB * 2, stream, Some(s.logits));
        for addr in previous.drain(..).chain(logits) {
            a.tick(2);
            a.free(addr);
        }
        a.tick(rng.range(200, 2000) as i64);
    }
    while !inference && a.recorded < target {
        out.iterations += 1;
        let step = out.iterations;
        out.annotations
            .push((format!("ProfilerStep#{step}"), true, a.clock_us));
        // The leak happens at a different point of each iteration.
        let leak_at = rng.below((MICRO_BATCHES * LAYERS) as u64) as usize;
        let mut grads: Vec<u64> = Vec::new();
        // A late zero_grad matters without gradient accumulation (with it, the first
        // micro-batch's gradients are alive in the next forward pass anyway).
        let micro_batches = if late_zero_grad { 1 } else { MICRO_BATCHES };
        for micro in 0..micro_batches {
            let seq = 128 * rng.range(2, 8);
            let tokens = batch * seq;
            // Forward: every layer saves its activations for backward.
            let mut saved: Vec<Vec<(u64, u64)>> = Vec::new();
            for layer in 0..LAYERS {
                let mut kept = Vec::new();
                if leak && micro * LAYERS + layer == leak_at {
                    a.tick(3);
                    if let Some(addr) = a.malloc(LEAK_BYTES, stream, Some(s.leak)) {
                        out.leaked.push((a.recorded - 1, addr));
                    }
                }
                // Routed to 1–3 experts: the op mix varies with the data.
                let experts = rng.range(1, 3);
                let sizes = [
                    tokens * HIDDEN * 2,
                    3 * tokens * HIDDEN * 2,
                    batch * HEADS * seq * seq * 2,
                    tokens * HIDDEN * 2,
                    tokens * HIDDEN * 2,
                    4 * tokens * HIDDEN * 2 / experts,
                    4 * tokens * HIDDEN * 2 / experts,
                ];
                for (k, &size) in sizes.iter().enumerate() {
                    let repeats = if k >= 5 { experts } else { 1 };
                    for _ in 0..repeats {
                        a.tick(rng.range(3, 30) as i64);
                        if k == 2 {
                            // The fp32 scores before the softmax: a temporary.
                            if let Some(t) = a.malloc(size * 2, stream, Some(s.softmax_tmp)) {
                                a.tick(4);
                                a.free(t);
                            }
                        }
                        if let Some(addr) = a.malloc(size, stream, Some(s.forward[k])) {
                            kept.push((addr, size));
                        }
                    }
                }
                saved.push(kept);
            }
            a.tick(10);
            let logits = a.malloc(tokens * VOCAB * 2, stream, Some(s.logits));
            // A late zero_grad: after the forward pass, before backward.
            for g in stale.drain(..) {
                a.tick(2);
                a.free_from(g, Some(s.zero_grad));
            }
            // The loss upcasts the logits to fp32: the largest temporary of the step.
            a.tick(10);
            if let Some(t) = a.malloc(tokens * VOCAB * 4, stream, Some(s.loss_upcast)) {
                a.tick(20);
                a.free(t);
            }
            // Backward on the engine thread.
            a.tick(15);
            if let Some(t) = a.malloc(4, stream, Some(s.make_grads)) {
                a.free(t);
            }
            if let Some(t) = a.malloc(tokens * VOCAB * 4, stream, s.backward_tmp) {
                a.tick(20);
                a.free(t);
            }
            if let Some(l) = logits {
                a.free(l);
            }
            for (layer, kept) in saved.iter().enumerate().rev() {
                for &(addr, size) in kept.iter().rev() {
                    a.tick(rng.range(3, 40) as i64);
                    if let Some(g) = a.malloc(size, stream, s.backward_tmp) {
                        a.tick(rng.range(2, 20) as i64);
                        a.free(g);
                    }
                    a.free(addr);
                }
                // This layer's weight gradients: made by AccumulateGrad in the first
                // micro-batch and kept until zero_grad; later micro-batches add into them (and,
                // kept for good, so does every later step).
                let first = micro == 0 && (!keep_grads || step == 1);
                for &size in params
                    .iter()
                    .skip(layer * PARAMS_PER_LAYER)
                    .take(PARAMS_PER_LAYER)
                {
                    a.tick(rng.range(2, 10) as i64);
                    if first {
                        grads.extend(a.malloc(size, stream, s.accumulate_grad));
                    } else if let Some(t) = a.malloc(size, stream, s.backward_tmp) {
                        a.tick(3);
                        a.free(t);
                    }
                }
            }
        }
        // Optimizer.step: AdamW state the first time (two tensors per parameter), then
        // temporaries of the fused update.
        out.annotations
            .push(("Optimizer.step#AdamW.step".to_string(), true, a.clock_us));
        if replace_state {
            // New lists of both moments, then the old ones dropped (made before the trace, in
            // its first step).
            let mut fresh = Vec::with_capacity(2 * params.len());
            for _ in 0..2 {
                for &size in &params {
                    a.tick(3);
                    fresh.extend(a.malloc(size, stream, Some(s.replaced_state)));
                }
            }
            for old in moments.drain(..) {
                a.tick(1);
                a.free(old);
            }
            moments = fresh;
        } else if !adamw_ready {
            for &size in &params {
                for _ in 0..2 {
                    a.tick(3);
                    a.malloc(size, stream, Some(s.adamw_state));
                }
            }
            adamw_ready = true;
        }
        for &size in params.iter().step_by(7) {
            a.tick(rng.range(2, 12) as i64);
            if let Some(t) = a.malloc(size, stream, Some(s.adamw_tmp)) {
                a.free(t);
            }
        }
        out.annotations
            .push(("Optimizer.step#AdamW.step".to_string(), false, a.clock_us));
        // zero_grad(set_to_none=True) frees the gradients (or, late, after the next forward).
        if late_zero_grad {
            stale = grads;
        } else if keep_grads {
            // Zeroed in place: nothing is freed.
        } else {
            for g in grads {
                a.free_from(g, Some(s.zero_grad));
            }
        }
        out.annotations
            .push((format!("ProfilerStep#{step}"), false, a.clock_us));
        if release_every.is_some_and(|n| step.is_multiple_of(n)) {
            // The hook empties the cache, then the next batch is copied to the device: its
            // request is the first after the release and needs a new segment.
            if let Some(old) = prefetched.take() {
                a.free(old);
            }
            a.tick(50);
            a.release_cached(Some(hook));
            a.tick(20);
            prefetched = a.malloc(PREFETCH_BYTES, stream, Some(s.to_device));
        }
        a.tick(rng.range(200, 2000) as i64);
    }
    out
}

//! A generated run: one simulated training process per rank, dumped every few steps in
//! torchtitan's layout (`iteration_N/rankR_memory_snapshot.pickle`, `iteration_N_exit/` after an
//! out-of-memory error), with what was injected in `memsight-run-truth.json`:
//!
//! - the last rank holds an extra embedding activation (`embed (model.py:30)`) at every peak:
//!   the heavy rank;
//! - rank 1 keeps a block per step (`accumulate (metrics.py:42)`): its floor grows from one
//!   dump to the next;
//! - rank 0 asks for more than the device holds at the last step and dumps on its way out.
//!
//! Every dump of a rank comes from the same simulated process, so a block kept from one dump to
//! the next has the same address, size and stack in both.

use std::io;
use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;

use super::{GenOptions, Generated, LibFrame, Stacks, Truth};
use crate::allocator::Allocator;

/// Steps between two dumps.
pub const STEPS_PER_DUMP: u64 = 10;
const PARAM_BYTES: u64 = 32 << 20;
const PARAMS: usize = 8;
const OPTIMIZER_TENSORS: usize = 16;
const ACTIVATION_BYTES: u64 = 16 << 20;
const ACTIVATIONS: usize = 6;
/// The heavy rank's extra activation.
pub const HEAVY_BYTES: u64 = 512 << 20;
/// What the leaking rank keeps per step.
pub const LEAK_BYTES_PER_STEP: u64 = 4 << 20;
const CAPACITY_BYTES: u64 = 16 << 30;

pub const HEAVY_FRAME: LibFrame = ("model.py", 30, "embed");
pub const LEAK_FRAME: LibFrame = ("metrics.py", 42, "accumulate");

#[derive(Clone, Debug)]
pub struct RunGenOptions {
    /// At least 3: the heavy, leaking and out-of-memory ranks are three different ones.
    pub ranks: u32,
    /// Dumps per rank, [`STEPS_PER_DUMP`] steps apart.
    pub iterations: u32,
    /// Ring-buffer entries per file.
    pub events: usize,
    pub seed: u64,
}

/// What a generated run holds, for tests and users to check the doctor against.
#[derive(Clone, Debug, Serialize)]
pub struct RunTruth {
    pub ranks: u32,
    pub iterations: Vec<u64>,
    pub heavy_rank: u32,
    /// The headline frame of the heavy rank's extra allocation.
    pub heavy_site: String,
    pub heavy_extra_bytes: u64,
    pub leak_rank: u32,
    pub leak_site: String,
    pub leak_bytes_per_step: u64,
    pub oom_rank: u32,
    /// The dump after the out-of-memory error is `iteration_{oom_iteration}_exit`.
    pub oom_iteration: u64,
    pub files: usize,
}

/// Writes the run under `dir` (made if missing) and its truth as `dir/memsight-run-truth.json`.
pub fn write_run(dir: &Path, options: &RunGenOptions) -> io::Result<RunTruth> {
    let iterations: Vec<u64> = (1..=u64::from(options.iterations.max(1)))
        .map(|k| k * STEPS_PER_DUMP)
        .collect();
    let ranks = options.ranks.max(3);
    let truth = RunTruth {
        ranks,
        iterations: iterations.clone(),
        heavy_rank: ranks - 1,
        heavy_site: format!("{} ({}:{})", HEAVY_FRAME.2, HEAVY_FRAME.0, HEAVY_FRAME.1),
        heavy_extra_bytes: HEAVY_BYTES,
        leak_rank: 1,
        leak_site: format!("{} ({}:{})", LEAK_FRAME.2, LEAK_FRAME.0, LEAK_FRAME.1),
        leak_bytes_per_step: LEAK_BYTES_PER_STEP,
        oom_rank: 0,
        oom_iteration: *iterations.last().expect("one iteration at least"),
        files: ranks as usize * iterations.len(),
    };
    std::fs::create_dir_all(dir)?;
    (0..ranks)
        .into_par_iter()
        .try_for_each(|rank| write_rank(dir, options, &truth, rank))?;
    let json = serde_json::to_vec_pretty(&truth).map_err(io::Error::other)?;
    std::fs::write(dir.join("memsight-run-truth.json"), json)?;
    Ok(truth)
}

/// One rank's process: parameters, optimizer state made at the first step, then steps of
/// activations and gradients; dumped every [`STEPS_PER_DUMP`] steps.
fn write_rank(dir: &Path, options: &RunGenOptions, truth: &RunTruth, rank: u32) -> io::Result<()> {
    let mut lib = Stacks { stacks: Vec::new() };
    let param = lib.add(
        &[("torch/nn/modules/linear.py", 106, "__init__")],
        &[("model.py", 40, "__init__")],
        false,
    );
    let optimizer = lib.add(
        &[
            ("torch/optim/adamw.py", 171, "_init_group"),
            ("torch/optim/adamw.py", 226, "step"),
        ],
        &[],
        false,
    );
    let activations: Vec<u32> = (0..ACTIVATIONS as u32)
        .map(|k| {
            lib.add(
                &[("torch/nn/functional.py", 2380, "linear")],
                &[("model.py", 54 + 7 * k, "forward")],
                false,
            )
        })
        .collect();
    let gradient = lib.add(
        &[
            ("torch/autograd/graph.py", 825, "_engine_run_backward"),
            ("torch/autograd/__init__.py", 353, "backward"),
        ],
        &[],
        false,
    );
    let heavy = lib.add(
        &[("torch/nn/functional.py", 2546, "embedding")],
        &[HEAVY_FRAME],
        false,
    );
    let leak = lib.add(
        &[("torch/_tensor.py", 1120, "detach")],
        &[LEAK_FRAME],
        false,
    );
    let start_us = 1_760_000_000_000_000 + i64::from(rank) * 1_000 + (options.seed % 1_000) as i64;
    let mut a = Allocator::new(
        0x7f00_0000_0000,
        CAPACITY_BYTES,
        false,
        options.events.max(1),
        start_us,
    );
    let params: Vec<u64> = (0..PARAMS)
        .filter_map(|_| a.malloc(PARAM_BYTES, 0, Some(param)))
        .collect();
    let mut optimizer_state: Vec<u64> = Vec::new();
    let last = *truth.iterations.last().expect("one iteration at least");
    for step in 1..=last {
        a.tick(1_000);
        let mut live: Vec<u64> = activations
            .iter()
            .filter_map(|&s| a.malloc(ACTIVATION_BYTES, 0, Some(s)))
            .collect();
        if rank == truth.heavy_rank {
            live.extend(a.malloc(HEAVY_BYTES, 0, Some(heavy)));
        }
        let grads: Vec<u64> = params
            .iter()
            .filter_map(|_| a.malloc(PARAM_BYTES, 0, Some(gradient)))
            .collect();
        for addr in live {
            a.tick(50);
            a.free(addr);
        }
        if optimizer_state.is_empty() {
            optimizer_state = (0..OPTIMIZER_TENSORS)
                .filter_map(|_| a.malloc(PARAM_BYTES, 0, Some(optimizer)))
                .collect();
        }
        for addr in grads {
            a.free(addr);
        }
        if rank == truth.leak_rank {
            // Kept for ever: the leak.
            let _ = a.malloc(LEAK_BYTES_PER_STEP, 0, Some(leak));
        }
        if rank == truth.oom_rank && step == last {
            // More than the device holds: an `oom`, then the exit dump.
            let _ = a.malloc(CAPACITY_BYTES * 2, 0, Some(heavy));
            write_dump(dir, options, &a, &lib, rank, step, true)?;
            return Ok(());
        }
        if step % STEPS_PER_DUMP == 0 {
            write_dump(dir, options, &a, &lib, rank, step, false)?;
        }
    }
    Ok(())
}

fn write_dump(
    dir: &Path,
    options: &RunGenOptions,
    a: &Allocator,
    lib: &Stacks,
    rank: u32,
    iteration: u64,
    exit: bool,
) -> io::Result<()> {
    let folder = dir.join(if exit {
        format!("iteration_{iteration}_exit")
    } else {
        format!("iteration_{iteration}")
    });
    std::fs::create_dir_all(&folder)?;
    let generated = Generated {
        options: GenOptions {
            events: options.events,
            seed: options.seed,
            ..GenOptions::default()
        },
        allocator: a.clone(),
        stacks: lib.stacks.clone(),
        annotations: Vec::new(),
        truth: Truth::default(),
        with_times: true,
        stream_raw: 0,
        device_count: 1,
    };
    let file = std::fs::File::create(folder.join(format!("rank{rank}_memory_snapshot.pickle")))?;
    let mut out = generated.write_pickle(io::BufWriter::new(file))?;
    io::Write::flush(&mut out)
}

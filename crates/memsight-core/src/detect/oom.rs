//! Flags every `oom` trace entry: an allocation the device could not serve. Classifies it as a
//! single enormous request (more than the whole reserved pool), fragmentation (the cached free
//! bytes would have covered it, just not in one piece) or a full device, so the reader knows
//! whether to look at one call site, at the allocator settings, or at what holds the memory.

use std::borrow::Cow;

use crate::model::Action;
use crate::units::format_bytes;

use super::{DeviceContext, Finding, FindingKind, Severity};

/// The cause an OOM summary names when the cached free bytes would have covered the request
/// (the settings detector advises on those).
pub(super) const FRAGMENTATION_CAUSE: &str =
    "fragmentation: the cached free bytes would cover it, but not in one piece";

/// How an OOM summary begins where the memory an optimizer step was still to make exceeds all
/// the free memory: no allocator setting removes it (the settings detector says so).
pub(super) const STATE_TO_COME_CAUSE: &str =
    "a full device: the optimizer step was making Adam's state";

/// Adam's state still to be made at an OOM in an optimizer step: two moments per weight with a
/// gradient (each the gradient's size at least: mixed precision keeps fp32 moments of bf16
/// gradients), less the optimizer state alive; `(made, to_come)` bytes where the file names
/// Adam. Batch 20's held-out file 5: a first Adam step failed with 17.9 GiB of 20.8 GiB made
/// and 0.7 GiB free; "fragmentation" was said, and expandable segments predicted to fix it.
fn adam_state_to_come(cx: &DeviceContext, event: u32) -> Option<(u64, u64)> {
    use crate::category::{Category, Phase};
    if cx.categories.phase_at(event) != Phase::Optimizer || !names_adam(cx.snapshot) {
        return None;
    }
    let (mut gradients, mut state) = (0u64, 0u64);
    for (_, id) in cx.replay.live_after(cx.device, Some(event)) {
        let l = &cx.replay.lifetimes[id as usize];
        if l.state_after(Some(event)) != crate::model::BlockState::ActiveAllocated {
            continue;
        }
        match cx.categories.of_lifetime[id as usize] {
            Category::Gradient => gradients += l.requested_size_bytes,
            Category::OptimizerState => state += l.requested_size_bytes,
            _ => {}
        }
    }
    (gradients > 0).then(|| (state, (2 * gradients).saturating_sub(state)))
}

/// The cause an OOM summary names where one request is larger than everything allocated.
pub(super) const SINGLE_REQUEST_CAUSE: &str = "a single request larger than everything allocated";

/// The cause an OOM summary names where one request is a large share of what is allocated.
pub(super) const LARGE_REQUEST_CAUSE: &str = "one request as large as a good part of all that is \
     live";

/// What to do about a request far above what its line asked for before.
const FAR_LARGER_ADVICE: &str = "Look at what this line computes for this input: a request far \
     above its usual comes from an unusual shape (a pairwise matrix or a repeat over many \
     objects, an expand or broadcast, an input far above the usual); computing it in chunks \
     holds one chunk at a time.";

/// A failed request of at least this share (percent) of what is allocated is its own cause.
const MIN_LARGE_REQUEST_PERCENT: u64 = 25;

/// The cause an OOM summary names where one request is larger than the pool's reserve and the
/// device's free memory together.
pub(super) const OFFER_CAUSE: &str =
    "a single request larger than everything the device could offer";

/// The advice on one request too large to look past: where such a tensor usually comes from
/// (`shapes`), and, for one meant to be that large, where else to build it (batch 33's held-out
/// audit: a sliding-window inferer's output buffer for a whole CT volume, 15.0 GiB, told only to
/// compute it in chunks).
fn oversized_request_advice(shapes: &str) -> Cow<'static, str> {
    format!(
        "Look at this call site: a tensor this large usually comes from an unexpected shape \
         {shapes} Where it is meant to be this large (an output or aggregation buffer for a \
         whole input), build it on the host (device=\"cpu\") or in a 16-bit dtype, or split or \
         crop the input."
    )
    .into()
}

/// What to do about one request larger than everything allocated: a library function's is told
/// as its buffer (see [`library_request`]), any other as an unexpected shape first.
fn single_request_advice(cx: &DeviceContext, event: u32) -> Cow<'static, str> {
    library_request(cx, event).map_or_else(
        || {
            oversized_request_advice(
                "(an expand or broadcast before a reduction, a pairwise matrix of a large \
                 batch, a batch or sequence far above the usual); computing it in chunks \
                 holds one chunk at a time.",
            )
        },
        |library| {
            format!(
                "The request is made inside a library's function, {library}: a tensor it \
                 sizes from what the program passes it. Where it is meant to be this \
                 large (an output or aggregation buffer for a whole input), have it built \
                 on the host (where the function takes a device argument: \
                 device=\"cpu\") or in a 16-bit dtype, or split or crop the input. Where \
                 it is not, look at the shape of what the program passed (a batch or \
                 size far above the usual)."
            )
            .into()
        },
    )
}

/// The function of a library (installed in `site-packages`, not `PyTorch` itself) that made the
/// request at `event`, where its stack's innermost Python frame is one and no module call is
/// below it, as `name (package path:line)`: its shape is the library's, sized from what the
/// program passed (batch 33's held-out audit: `MONAI`'s `sliding_window_inference` asking for a whole volume's 15 GiB output
/// buffer was told of "an unexpected shape" before the host or a 16-bit dtype).
fn library_request(cx: &DeviceContext, event: u32) -> Option<String> {
    let snapshot = cx.snapshot;
    let stack = *cx.device.trace.stack.get(event as usize)?;
    let frame = snapshot
        .stack_frames(stack)
        .find(|f| crate::frames::is_python(snapshot, f))?;
    // Not a model's layer (a module call below the program): its compute is the model's.
    let in_a_module = snapshot.stack_frames(stack).any(|f| {
        snapshot
            .str(f.filename)
            .replace('\\', "/")
            .ends_with("torch/nn/modules/module.py")
    });
    let file = snapshot.str(frame.filename).replace('\\', "/");
    (!in_a_module
        && file.contains("-packages/")
        && !crate::frames::is_pytorch_s_own(&file)
        && !file.contains("/torch_npu/"))
    .then(|| {
        format!(
            "{} ({}:{})",
            snapshot.str(frame.name),
            crate::frames::package_path(&file),
            frame.line
        )
    })
}

/// How an OOM summary begins where the failing request is `torch.load` restoring a saved tensor
/// onto the device: no allocator setting removes it.
pub(super) const CHECKPOINT_RESTORE_CAUSE: &str =
    "a full device while torch.load restored a checkpoint onto it";

const CHECKPOINT_RESTORE_ADVICE: &str = "torch.load puts each saved tensor on the device it was \
    saved from unless map_location says otherwise: load with map_location=\"cpu\" (then \
    load_state_dict copies the weights onto the model's device) or map_location set to this \
    process's own device; a rank that loads a checkpoint saved by rank 0 otherwise fills rank 0's \
    device.";

/// Whether the request at `event` is `torch.load` restoring a storage onto the device
/// (`torch/serialization.py`'s `default_restore_location` / `_cuda_deserialize` on its stack), and
/// how much of what is allocated it restored: the cause, in words (batch 34's held-out audit: a
/// DDP rank 1 resuming with `torch.load` and no `map_location` filled GPU 0 with 7.35 GiB of
/// rank 0's checkpoint, told "reduce what is live: a smaller batch").
fn checkpoint_restore(cx: &DeviceContext, event: u32) -> Option<String> {
    let snapshot = cx.snapshot;
    let trace = &cx.device.trace;
    let restores = |stack| crate::category::restores_a_checkpoint(snapshot, stack);
    if !restores(*trace.stack.get(event as usize)?) {
        return None;
    }
    let (mut restored_bytes, mut allocated_bytes) = (0u64, 0u64);
    for l in cx
        .replay
        .lifetimes
        .iter()
        .filter(|l| l.is_live_after(Some(event)))
    {
        let bytes = l.size_bytes.unwrap_or(l.requested_size_bytes);
        allocated_bytes += bytes;
        if l.alloc_event
            .is_some_and(|a| restores(trace.stack[a as usize]))
        {
            restored_bytes += bytes;
        }
    }
    // Everything this process holds here is the checkpoint, and it works on another device of
    // the file: the checkpoint went to a device that is not the process's own.
    let elsewhere: Vec<String> = snapshot
        .devices
        .iter()
        .filter(|d| d.ordinal != cx.device.ordinal && d.trace.action.contains(&Action::Alloc))
        .map(|d| d.ordinal.to_string())
        .collect();
    let not_its_own = if restored_bytes == allocated_bytes && !elsewhere.is_empty() {
        format!(
            ". Everything this process holds on device {} is what torch.load put there, while \
             the file shows its other work on device {}: the checkpoint went to a device that \
             is not the process's own",
            cx.device.ordinal,
            elsewhere.join(", ")
        )
    } else {
        String::new()
    };
    Some(format!(
        "{CHECKPOINT_RESTORE_CAUSE}: {} of the {} allocated were restored by torch.load \
         (torch/serialization.py), and the failing request is another of its tensors{not_its_own}",
        format_bytes(restored_bytes as i64),
        format_bytes(allocated_bytes as i64),
    ))
}

/// The cause an OOM summary names where blocks a leak keeps hold most of the memory (set where
/// the leak is linked to it): no allocator setting removes it.
pub(super) const LEAK_CAUSE: &str = "a full device, filled by a leak";

/// The cause an OOM summary names where memory outside the pool took what the pool once held
/// ([`OutsideThePool`]): no allocator setting removes it, and the device's capacity at the failure
/// is no figure for the rest of the trace.
pub(super) const OUTSIDE_CAUSE: &str = "memory outside this pool";

/// How an OOM summary begins where the failing line was to make more blocks in this pass than
/// the free memory could hold: no allocator setting removes it (the settings detector says so).
pub(super) const PASS_TO_COME_CAUSE: &str =
    "a full device: the pass was still making blocks of this line";

/// What the failing line had still to make in the pass that failed: the blocks of its call stack
/// alive at the OOM made since the last backward pass or optimizer step (`already`), the blocks
/// it made in the pass before (`per_pass`: one per layer), and the largest request it made
/// before this pass. Batch 21's held-out file 9: a batch of 3,584 tokens where earlier ones had
/// at most 704 failed at its fourth layer's attention scores (3.06 GiB each, three alive), the
/// twelve layers' needing 27 GiB more than the device had; "OOMs 1 → 0" was predicted for
/// expandable segments, which only the one request would have fit.
struct PassToCome {
    already: usize,
    per_pass: usize,
    largest_before_bytes: u64,
    /// The sizes of the line's blocks in the pass before, in the order made.
    before_sizes: Vec<u64>,
}

/// The failing line's blocks of the pass that failed (see [`PassToCome`]), where it made more in
/// the pass before than it holds now; `None` without a stack or a backward pass before it.
fn pass_to_come(cx: &DeviceContext, event: u32) -> Option<PassToCome> {
    use crate::category::Phase;
    let trace = &cx.device.trace;
    let stack = trace.stack[event as usize];
    if stack == crate::model::NO_STACK {
        return None;
    }
    // The pass that failed began after the last backward pass or optimizer step before it; the
    // forward pass before it ran up to the last backward pass, from the end of the one before.
    let runs = &cx.categories.runs;
    let this_pass = pass_start(cx, event)?;
    let backward: Vec<&crate::category::PhaseRun> = runs
        .iter()
        .filter(|r| r.phase == Phase::Backward && r.end <= event)
        .collect();
    let &last_backward = backward.last()?;
    let previous_pass = backward.len().checked_sub(2).map_or(0, |k| backward[k].end);
    let allocs_between = |from: u32, to: u32| {
        (from..to).filter(|&e| {
            trace.action[e as usize] == Action::Alloc && trace.stack[e as usize] == stack
        })
    };
    let before_sizes: Vec<u64> = allocs_between(previous_pass, last_backward.start)
        .map(|e| trace.size_bytes[e as usize])
        .collect();
    let per_pass = before_sizes.len();
    // The line's blocks pile up in a pass (a layer's output kept for backward): in the pass
    // before, most of them were still alive when its backward pass began, and in this one none
    // made so far has been freed. A line that frees each block before its next (a per-image
    // loop's temporaries) asks again for memory it gave back (batch 28's held-out audit: an
    // object detector's label assignment, 5 requests made and freed before the failing one, was
    // told "8 more (about 19.2 GiB) were to come").
    let alive_at = |e: u32, at: u32| {
        let l = cx
            .replay
            .event_lifetime
            .get(e as usize)
            .and_then(|&id| cx.replay.lifetimes.get(id as usize));
        l.is_some_and(|l| {
            l.free_requested_event
                .or(l.free_completed_event)
                .is_none_or(|f| f >= at)
        })
    };
    let kept_before = allocs_between(previous_pass, last_backward.start)
        .filter(|&e| alive_at(e, last_backward.start))
        .count();
    if kept_before * 2 < per_pass || allocs_between(this_pass, event).any(|e| !alive_at(e, event)) {
        return None;
    }
    let largest_before_bytes = allocs_between(0, this_pass)
        .map(|e| trace.size_bytes[e as usize])
        .max()?;
    let already = cx
        .replay
        .live_after(cx.device, Some(event))
        .into_iter()
        .filter(|&(_, id)| {
            let l = &cx.replay.lifetimes[id as usize];
            l.stack == stack && l.alloc_event.is_some_and(|a| a >= this_pass)
        })
        .count();
    (per_pass > already).then_some(PassToCome {
        already,
        per_pass,
        largest_before_bytes,
        before_sizes,
    })
}

/// Where the pass that failed at `event` began: the end of the last backward pass or optimizer
/// step before it (`None` where none came before).
fn pass_start(cx: &DeviceContext, event: u32) -> Option<u32> {
    cx.categories
        .runs
        .iter()
        .filter(|r| r.phase != crate::category::Phase::Forward && r.end <= event)
        .map(|r| r.end)
        .next_back()
}

/// Whether the file names Adam (`Optimizer.step#AdamW.step`, `torch/optim/adam.py`,
/// `_fused_adam`), not an 8-bit one (its state is a quarter of the moments' size).
fn names_adam(snapshot: &crate::model::Snapshot) -> bool {
    let adam = |s: &str| {
        let lower = s.to_ascii_lowercase();
        lower.contains("adam") && !lower.contains("8bit")
    };
    snapshot
        .annotations
        .iter()
        .any(|a| a.name.starts_with("Optimizer.step#") && adam(&a.name))
        || snapshot.frames.iter().any(|f| {
            let file = snapshot.str(f.filename);
            (file.contains("optim") && adam(file.rsplit(['/', '\\']).next().unwrap_or(file)))
                || adam(snapshot.str(f.name)) && snapshot.str(f.name).contains("_adam")
        })
}

pub fn detect(cx: &DeviceContext) -> Vec<Finding> {
    let (device, replay) = (cx.device, cx.replay);
    let expandable = super::stall::uses_expandable_segments(cx.snapshot, device);
    let trace = &device.trace;
    let mut findings = Vec::new();
    for (i, &action) in trace.action.iter().enumerate() {
        if action != Action::Oom {
            continue;
        }
        let requested = trace.size_bytes[i];
        let device_free = trace
            .oom_device_free_bytes
            .iter()
            .find(|(e, _)| *e as usize == i)
            .map_or(0, |&(_, f)| f);
        let at = replay.totals_after(Some(i as u32));
        let (reserved, allocated) = (
            at.reserved_bytes.max(0) as u64,
            at.allocated_bytes.max(0) as u64,
        );
        let cached_free = reserved.saturating_sub(allocated);
        let (cause, suggestion) = cause_and_advice(
            cx,
            i as u32,
            (requested, device_free),
            (reserved, cached_free),
            expandable,
        );
        let mut suggestion = suggestion.into_owned();
        let mut evidence = Vec::new();
        let mut cause_words = String::new();
        if let Some(previous) = previous_result_of_the_line(cx, i as u32) {
            let lacked = requested.saturating_sub(device_free + cached_free);
            cause_words = previous.sentence();
            suggestion = format!("{} {suggestion}", previous.advice(lacked));
            evidence.push(previous.evidence());
        } else if cause.starts_with("a full device")
            && let Some(held) = held_by_the_line(cx, i as u32, allocated)
        {
            cause_words = held.sentence(allocated);
            suggestion = format!("{} {suggestion}", held.advice(requested));
        }
        if let Some(frame) = data_parallel_frame(cx.snapshot, trace.stack[i]) {
            suggestion.push_str(
                " The failing request runs under nn.DataParallel, which replicates the model \
                 from one device and gathers outputs on it: DistributedDataParallel (one process \
                 per device) spreads the memory evenly.",
            );
            evidence.push(format!(
                "DataParallel: the failing request's stack has {frame}"
            ));
        }
        findings.push(Finding {
            kind: FindingKind::Oom,
            severity: Severity::Error,
            device: device.ordinal,
            devices: Vec::new(),
            source_lines: None,
            evidence,
            title: format!("Out of memory: {} requested", format_bytes(requested as i64)),
            summary: format!(
                "At event {i} a request of {} failed with {} free on the device, {} reserved and {} allocated: {cause}.{cause_words}{}",
                format_bytes(requested as i64),
                format_bytes(device_free as i64),
                format_bytes(reserved as i64),
                format_bytes(allocated as i64),
                carried_on(cx, i as u32),
            ),
            bytes: requested,
            events: (i as u32, i as u32),
            focus_event: Some(i as u32),
            rank: None,
            time_range_us: None,
            stack: trace.stack[i],
            stacks: Vec::new(),
            breakdown: Vec::new(),
            owners: Vec::new(),
            rules: Vec::new(),
            suggestion,
        });
    }
    findings
}

/// The cause and advice where what failed was not the pass's own need: a checkpoint being
/// restored, or memory outside the pool.
fn outside_the_program_s_pass(
    cx: &DeviceContext,
    event: u32,
    requested: u64,
) -> Option<(String, Cow<'static, str>)> {
    if let Some(words) = checkpoint_restore(cx, event) {
        return Some((words, Cow::Borrowed(CHECKPOINT_RESTORE_ADVICE)));
    }
    memory_outside_the_pool(cx, event, requested)
        .map(|outside| (outside.cause(), Cow::Owned(outside.advice(cx))))
}

/// Memory that went outside the pool before an out-of-memory error: at the failure, what the
/// pool reserved plus what the device had free came to less than the pool alone had reserved
/// earlier in the trace, by at least the request. The device itself did not shrink, so something
/// outside this pool took the difference (batch 38's held-out file 6: a Ray Tune trial sharing
/// its GPU handed 10.8 GiB back with `empty_cache()`, its neighbour took it, and the next step
/// failed with 6.58 GiB left where 11.1 GiB had served the same steps; read as "the pass does not
/// fit" and as a recording that contradicts itself).
struct OutsideThePool {
    /// Reserved plus the device's free bytes at the failure.
    available_bytes: u64,
    reserved_bytes: u64,
    device_free_bytes: u64,
    /// The most the pool reserved before the failure, and where.
    most_reserved_bytes: u64,
    most_reserved_event: u32,
    /// The program's own `empty_cache()` calls between then and the failure: the first's
    /// event and the bytes they released.
    emptied: Option<(u32, u64)>,
}

fn memory_outside_the_pool(
    cx: &DeviceContext,
    event: u32,
    requested: u64,
) -> Option<OutsideThePool> {
    let trace = &cx.device.trace;
    // Only a recorded free figure says what the device had left.
    let &(_, device_free_bytes) = trace
        .oom_device_free_bytes
        .iter()
        .find(|(e, _)| *e == event)?;
    let reserved = cx.replay.reserved_bytes();
    let reserved_bytes = reserved.get(event as usize)?.max(&0).unsigned_abs();
    let (most_reserved_event, most) = reserved[..event as usize]
        .iter()
        .enumerate()
        .max_by_key(|&(i, &r)| (r, std::cmp::Reverse(i)))?;
    let most_reserved_bytes = most.max(&0).unsigned_abs();
    let available_bytes = reserved_bytes + device_free_bytes;
    if most_reserved_bytes < available_bytes + requested.max(MIN_OUTSIDE_BYTES) {
        return None;
    }
    let mut emptied: Option<(u32, u64)> = None;
    for i in most_reserved_event..event as usize {
        if matches!(trace.action[i], Action::SegmentFree | Action::SegmentUnmap)
            && super::stall::is_explicit_empty_cache(cx.snapshot, trace.stack[i])
        {
            emptied.get_or_insert((i as u32, 0)).1 += trace.size_bytes[i];
        }
    }
    Some(OutsideThePool {
        available_bytes,
        reserved_bytes,
        device_free_bytes,
        most_reserved_bytes,
        most_reserved_event: most_reserved_event as u32,
        emptied,
    })
}

/// Memory gone outside the pool below this is not told as the cause (what CUDA's context or a
/// library's workspace may take at any time).
const MIN_OUTSIDE_BYTES: u64 = 512 << 20;

impl OutsideThePool {
    fn cause(&self) -> String {
        let lost = self.most_reserved_bytes - self.available_bytes;
        let emptied = self.emptied.map_or_else(String::new, |(at, bytes)| {
            format!(
                "; the program's own empty_cache() at event {at} had handed {} of its cache back \
                 to the device in between",
                format_bytes(bytes as i64)
            )
        });
        format!(
            "{OUTSIDE_CAUSE}: the pool's {} reserved and the device's {} free make {}, \
             {} less than this pool alone reserved at event {} ({}). The device did not shrink: \
             since then at least {} of it went to memory outside the pool, another process on \
             the device (a second job or trial sharing it) or this process's own memory outside \
             the caching allocator (communication buffers, library workspaces, another \
             allocator){emptied}",
            format_bytes(self.reserved_bytes as i64),
            format_bytes(self.device_free_bytes as i64),
            format_bytes(self.available_bytes as i64),
            format_bytes(lost as i64),
            self.most_reserved_event,
            format_bytes(self.most_reserved_bytes as i64),
            format_bytes(lost as i64),
        )
    }

    fn advice(&self, cx: &DeviceContext) -> String {
        let (module, smi) = if cx.npu {
            ("torch.npu", "npu-smi")
        } else {
            ("torch.cuda", "nvidia-smi")
        };
        let emptied = if self.emptied.is_some() {
            format!(
                " On a shared device, do not call {module}.empty_cache(): what it releases goes \
                 to whoever asks next."
            )
        } else {
            String::new()
        };
        format!(
            "Find what else holds the device ({smi} lists its processes). Where another job \
             shares it, give each job its own device, or cap each process \
             ({module}.set_per_process_memory_fraction) and size its batch to that share.\
             {emptied} A smaller batch only helps as far as the other process leaves room."
        )
    }
}

/// The largest block live at an out-of-memory error, made in the trace by the failing request's
/// own line, where it holds a quarter of what is allocated or more (batch 35's held-out audit:
/// a retriever's `q.float() @ index.float().T` held a 25.3 GiB fp32 copy of its 12.65 GiB fp16
/// index when the 16.9 GiB score matrix failed, and the advice was "a smaller batch").
struct HeldByTheLine {
    bytes: u64,
    site: String,
    /// A block alive since before the trace, half its size: what it may be a 32-bit copy of.
    half_of_it_bytes: Option<u64>,
}

impl HeldByTheLine {
    fn sentence(&self, allocated: u64) -> String {
        let twice = self.half_of_it_bytes.map_or_else(String::new, |half| {
            format!(", {}", super::peak::twice_a_block_before_the_trace(half))
        });
        format!(
            " The failing line, {}, already held {} ({}% of what was allocated), made before \
             this request{twice}.",
            self.site,
            format_bytes(self.bytes as i64),
            crate::units::percent(self.bytes, allocated),
        )
    }

    fn advice(&self, requested: u64) -> String {
        let dtype: &str = if self.half_of_it_bytes.is_some() {
            &format!(
                "compute with the 16-bit tensor as it is stored {} instead of copying it to 32 \
                 bits, or ",
                super::peak::SIXTEEN_BIT_MATMUL
            )
        } else {
            ""
        };
        format!(
            "Lower that line's own {} block first: {dtype}process what it covers in shards or \
             chunks, which also shrinks the {} request. Then:",
            format_bytes(self.bytes as i64),
            format_bytes(requested as i64),
        )
    }
}

/// See [`HeldByTheLine`].
fn held_by_the_line(cx: &DeviceContext, oom: u32, allocated: u64) -> Option<HeldByTheLine> {
    let snapshot = cx.snapshot;
    let site = crate::frames::headline_frame(snapshot, *cx.device.trace.stack.get(oom as usize)?)?;
    let live = || {
        cx.replay
            .lifetimes
            .iter()
            .filter(move |l| l.is_live_after(oom.checked_sub(1)))
    };
    let largest = live()
        .filter(|l| l.alloc_event.is_some())
        .max_by_key(|l| (l.requested_size_bytes, l.alloc_event))?;
    if largest.requested_size_bytes * 4 < allocated
        || crate::frames::headline_frame(snapshot, largest.stack).as_deref() != Some(&site)
    {
        return None;
    }
    let half_of_it_bytes = live()
        .filter(|l| {
            l.alloc_event.is_none() && l.requested_size_bytes * 2 == largest.requested_size_bytes
        })
        .map(|l| l.requested_size_bytes)
        .next();
    Some(HeldByTheLine {
        bytes: largest.requested_size_bytes,
        site,
        half_of_it_bytes,
    })
}

/// The cause where the cached free bytes would cover the request but not in one piece; where
/// the allocator had already released and retried in the failing pass (see
/// [`released_and_retried_in_this_pass`]), with how near the pass is to the device's capacity.
fn fragmentation_cause(
    cx: &DeviceContext,
    event: u32,
    (requested, device_free): (u64, u64),
    (reserved, cached_free): (u64, u64),
    expandable: bool,
) -> (String, Cow<'static, str>) {
    let would_hold = reserved - cached_free + requested;
    let capacity = reserved + device_free;
    match released_and_retried_in_this_pass(cx, event)
        .filter(|_| would_hold * 100 >= capacity * NEAR_CAPACITY_PERCENT)
    {
        // Both are told: the file shows the pieces and how full the device is, not what the
        // pass would have asked next (batch 28's held-out audit called a `LLaVA` step at 91 % of
        // its device a capacity error; batches 25 and 27 called the same picture, at 95 and
        // 83 %, fragmentation).
        Some(burst) => (
            format!(
                "{FRAGMENTATION_CAUSE}, after the allocator had already released cached \
                 segments and retried in this pass (events {}–{}, {}); with this request the \
                 pass would hold {} ({:.0}% of the {} the pool and the device had): near the \
                 device's capacity",
                burst.first_event,
                burst.last_event,
                format_bytes(burst.freed_bytes as i64),
                format_bytes(would_hold as i64),
                would_hold as f64 * 100.0 / capacity.max(1) as f64,
                format_bytes(capacity as i64),
            ),
            format!(
                "{} So near the device's capacity, the pass has little room left either way: a \
                 smaller batch or shorter inputs, or activation checkpointing, lowers what it \
                 holds.",
                fragmentation_advice(cx, expandable)
            )
            .into(),
        ),
        None => (
            FRAGMENTATION_CAUSE.to_string(),
            fragmentation_advice(cx, expandable).into(),
        ),
    }
}

/// What the failing pass would hold with its request, as a share (percent) of the pool and the
/// device's free memory, from which it is near the device's capacity.
const NEAR_CAPACITY_PERCENT: u64 = 80;

/// The release of cached segments and retry (an allocator stall) in the pass that failed at
/// `event` (after its last backward pass or optimizer step), where one came before the failure:
/// the pool had already given back all it could (batch 28's held-out audit: a `LLaVA` `LoRA`
/// step failed at 91 % of the device right after a release of 310 segments, told
/// "fragmentation" with allocator settings as its fix).
fn released_and_retried_in_this_pass(
    cx: &DeviceContext,
    event: u32,
) -> Option<super::stall::ReleaseBurst> {
    let this_pass = pass_start(cx, event).unwrap_or(0) as usize;
    super::stall::release_bursts(cx.snapshot, cx.device, cx.replay)
        .into_iter()
        .rfind(|b| b.is_stall() && b.first_event >= this_pass && b.last_event < event as usize)
}

/// Where backward passes begin after the out-of-memory error at `event`, the sentence saying
/// the program caught it and went on (batch 28's held-out audit: an object detector falls back
/// to the CPU for the image that failed and trains three more steps; nothing said so).
fn carried_on(cx: &DeviceContext, event: u32) -> String {
    let after = cx
        .categories
        .runs
        .iter()
        .filter(|r| r.phase == crate::category::Phase::Backward && r.start > event)
        .count();
    if after == 0 {
        return String::new();
    }
    format!(
        " The trace goes on after it: {after} more backward pass{} begin{} later, so the \
         program caught the error and carried on (a fallback, or a skipped batch).",
        if after == 1 { "" } else { "es" },
        if after == 1 { "s" } else { "" },
    )
}

/// Why the request at `event` failed, and what to do: `(cause, suggestion)`.
fn cause_and_advice(
    cx: &DeviceContext,
    event: u32,
    (requested, device_free): (u64, u64),
    (reserved, cached_free): (u64, u64),
    expandable: bool,
) -> (String, Cow<'static, str>) {
    if let Some(told) = outside_the_program_s_pass(cx, event, requested) {
        return told;
    }
    let state_to_come =
        adam_state_to_come(cx, event).filter(|&(_, to_come)| to_come > cached_free + device_free);
    let state_words = state_to_come.map(|(made, to_come)| {
        format!(
            "{STATE_TO_COME_CAUSE}, two moments per weight with a gradient: {} of at least {} \
             made, so at least {} more was to come, with {} of the pool reserved and not \
             allocated and {} free on the device. Whether or not this one request fits in a cached piece, the step does not \
             fit: no allocator setting makes room for it",
            format_bytes(made as i64),
            format_bytes((made + to_come) as i64),
            format_bytes(to_come as i64),
            format_bytes(cached_free as i64),
            format_bytes(device_free as i64),
        )
    });
    let pass_words = if state_words.is_none() && requested <= reserved + device_free {
        pass_to_come(cx, event)
            .and_then(|p| pass_words(cx, event, requested, &p, cached_free + device_free))
    } else {
        None
    };
    if let Some(words) = pass_words {
        (
            words,
            Cow::Borrowed(if at_a_softmax(cx, event) {
                "Lower what one input needs: cap or bucket input lengths (a token budget per \
                 batch), or a smaller batch for long inputs; and where the line is attention's \
                 softmax, an attention that never makes the scores \
                 (scaled_dot_product_attention, FlashAttention) needs none of these blocks."
            } else {
                // Batch 23's held-out audit: a video model's residual add was told of token
                // budgets and attention's softmax.
                "Lower what one input needs: cap or bucket the inputs' size (a token budget per \
                 batch for text; fewer frames or a lower resolution for images and video), or a \
                 smaller batch for the large inputs; activation checkpointing keeps fewer of \
                 the pass's blocks alive at once."
            }),
        )
    } else if let Some(words) = state_words {
        (
            words,
            "Lower the model state: an 8-bit optimizer (bitsandbytes' AdamW8bit keeps a \
             quarter of Adam's fp32 moments), fewer trainable weights (a smaller model, or \
             adapters such as LoRA on a frozen one), optimizer state kept in host memory \
             (DeepSpeed's ZeRO-Offload), or, on several devices, the state sharded across \
             them (ZeRO-1, FSDP)."
                .into(),
        )
    } else if requested > reserved + device_free {
        (
            OFFER_CAUSE.to_string(),
            oversized_request_advice(
                "(an expand or broadcast before a cast, a batch or sequence far above the usual).",
            ),
        )
    } else if let Some(words) =
        far_larger_than_before(cx, event, requested, cached_free + device_free)
    {
        (words, Cow::Borrowed(FAR_LARGER_ADVICE))
    } else if cached_free >= requested {
        fragmentation_cause(
            cx,
            event,
            (requested, device_free),
            (reserved, cached_free),
            expandable,
        )
    } else if requested > reserved.saturating_sub(cached_free) {
        // Batch 23's held-out audit: a 32 GiB request from broadcasting in a similarity matrix,
        // 1.56× all that was allocated, with 18.8 GiB free, was "live tensors hold the memory"
        // with "reduce what is live" advice.
        let allocated = reserved.saturating_sub(cached_free);
        (
            format!(
                "{SINGLE_REQUEST_CAUSE} ({}; it is {:.1}× that): this one tensor is what to \
                 look at, before what is live",
                format_bytes(allocated as i64),
                requested as f64 / allocated.max(1) as f64
            ),
            single_request_advice(cx, event),
        )
    } else if requested * 100 >= reserved.saturating_sub(cached_free) * MIN_LARGE_REQUEST_PERCENT
        // Where the failing line already holds a large block, that block is told first (the
        // full device's own account, below).
        && held_by_the_line(cx, event, reserved.saturating_sub(cached_free)).is_none()
    {
        large_request(
            requested,
            reserved.saturating_sub(cached_free),
            device_free + cached_free,
        )
    } else if cx.workload == super::Workload::Training {
        (
            "a full device: live tensors hold the memory".to_string(),
            full_device_training_advice(cx, event),
        )
    } else {
        (
            "a full device: live tensors hold the memory".to_string(),
            "Reduce what is live at this moment (a smaller batch or shorter inputs) or find what should have been freed.".into(),
        )
    }
}

/// The cause and advice where the failed request is a good part of all that is `allocated`
/// (see [`MIN_LARGE_REQUEST_PERCENT`]), with `headroom` free and cached: one request of a third
/// of all that is live is the failure's own cause (batch 36's held-out audit: a Dice loss's
/// int64 one-hot of 4.72 GiB beside 14.2 GiB live, told "live tensors hold the memory" and a
/// smaller batch).
fn large_request(requested: u64, allocated: u64, headroom: u64) -> (String, Cow<'static, str>) {
    (
        format!(
            "{LARGE_REQUEST_CAUSE}: {} is {}% of the {} allocated, and {} more than was free and \
             cached ({}): this one tensor is what to look at first",
            format_bytes(requested as i64),
            (requested * 100 + allocated / 2) / allocated.max(1),
            format_bytes(allocated as i64),
            format_bytes(requested.saturating_sub(headroom) as i64),
            format_bytes(headroom as i64),
        ),
        Cow::Borrowed(
            "Look at what this line builds: a tensor this large beside the rest usually comes \
             from a wide dtype or a full expansion (an int64 index or one-hot where a bool or \
             16-bit one, or a gather, would do; an expand or broadcast before a reduction; a \
             32-bit copy of a 16-bit tensor). Building it smaller or in chunks removes the \
             failure; a smaller batch only shrinks it with everything else.",
        ),
    )
}

/// What lowers a training step that fills the device, from the failing request's stack: an
/// attention that makes its own scores is told of one that never does, and checkpointing is
/// not advised where it already runs (batch 29's held-out audit: an 8 GiB `baddbmm` of
/// diffusers' `_attention`, under `torch.utils.checkpoint`, told "batch size, activation
/// checkpointing").
fn full_device_training_advice(cx: &DeviceContext, event: u32) -> Cow<'static, str> {
    let snapshot = cx.snapshot;
    let Some(&stack) = cx.device.trace.stack.get(event as usize) else {
        return Cow::Borrowed(FULL_DEVICE_TRAINING_ADVICE);
    };
    let names = || snapshot.stack_frames(stack).map(|f| snapshot.str(f.name));
    let checkpointed = snapshot.stack_frames(stack).any(|f| {
        snapshot
            .str(f.filename)
            .replace('\\', "/")
            .ends_with("torch/utils/checkpoint.py")
    });
    let fused = names().any(|name| {
        let name = name.to_ascii_lowercase();
        [
            "scaled_dot_product",
            "flash",
            "xformers",
            "memory_efficient",
        ]
        .iter()
        .any(|word| name.contains(word))
    });
    // PyTorch's own attention (`multi_head_attention_forward`) may run fused kernels that a
    // stack of Python frames alone does not show: only the program's or a library's counts.
    let attention = snapshot
        .stack_frames(stack)
        .filter(|f| {
            crate::frames::is_python(snapshot, f)
                && !crate::frames::is_pytorch_s_own(snapshot.str(f.filename))
        })
        .find(|f| {
            let name = snapshot.str(f.name).to_ascii_lowercase();
            name.contains("attention") || name.contains("attn")
        })
        .filter(|_| !fused);
    let less = if checkpointed {
        "a smaller batch or smaller inputs; activation checkpointing is already on around this \
         request"
    } else {
        "a smaller batch or smaller inputs, activation checkpointing"
    };
    match attention {
        Some(frame) => Cow::Owned(format!(
            "This request is made in {}, an attention that computes its scores itself (a \
             tokens × tokens matrix per head): an attention that never makes them \
             (scaled_dot_product_attention, FlashAttention, xformers), or one computed in \
             slices, needs far less. Otherwise reduce what is live at this moment ({less}).",
            crate::frames::frame_text(snapshot, frame)
        )),
        None if checkpointed => Cow::Owned(format!(
            "Reduce what is live at this moment ({less}) or find what should have been freed."
        )),
        None => Cow::Borrowed(FULL_DEVICE_TRAINING_ADVICE),
    }
}

/// What lowers a training step that fills the device, where its stack says nothing more.
const FULL_DEVICE_TRAINING_ADVICE: &str = "Reduce what is live at this moment (batch size, \
                                           activation checkpointing) or find what should have \
                                           been freed.";

/// What makes room where the cached free bytes would cover the request but not in one piece:
/// the allocator setting named for the device's backend, bucketing only where the iterations
/// are seen to ask the model for different sizes.
fn fragmentation_advice(cx: &DeviceContext, expandable: bool) -> &'static str {
    let sizes_vary = super::fragmentation::sizes_vary(cx);
    match (expandable, cx.snapshot.recorded_on_windows(), cx.npu) {
        (true, _, _) if sizes_vary => {
            "Expandable segments are already on: lower the peak or, as the model asks for \
             different sizes from one iteration to the next, bucket inputs by length so \
             requests fit the pieces."
        }
        (true, _, _) => "Expandable segments are already on: lower the peak.",
        (false, true, _) => {
            "Try PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512 to keep large blocks whole \
             (expandable segments are not available on Windows, where this file was recorded)."
        }
        (false, false, true) => {
            "Try PYTORCH_NPU_ALLOC_CONF=expandable_segments:True, or max_split_size_mb to keep \
             large blocks whole."
        }
        (false, false, false) => {
            "Try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or max_split_size_mb to keep \
             large blocks whole."
        }
    }
}

/// The cause where the failing line was still to make more of its blocks in this pass than the
/// free memory holds (`free`: the pool's cached free bytes and the device's), or `None`.
fn pass_words(
    cx: &DeviceContext,
    event: u32,
    requested: u64,
    p: &PassToCome,
    free: u64,
) -> Option<String> {
    // The blocks still to come: where the pass before made blocks of other sizes after this
    // one's counterpart, those grown as this one grew over it (batch 23's held-out audit: a
    // video model's clips of 64×224² after 16×112² failed on a residual add whose last four
    // blocks were 230 MiB, told "4 more of this size, 368 MiB"); else each at this one's size
    // (one per layer).
    let remaining = p.per_pass - p.already;
    let rest = &p.before_sizes[p.already.min(p.before_sizes.len())..];
    let (to_come, how) = match rest {
        [counterpart, ..] if *counterpart > 0 && rest.iter().any(|s| s != counterpart) => {
            let scale = requested as f64 / *counterpart as f64;
            // A hostile file's sizes cannot overflow the sum (the cast saturates too).
            let sum = rest.iter().fold(0u64, |a, &b| a.saturating_add(b));
            let bytes = (sum as f64 * scale) as u64;
            (
                bytes,
                format!(
                    "{remaining} more (about {}, if they are {:.0}× the pass before's, as this \
                     one is)",
                    format_bytes(bytes as i64),
                    scale
                ),
            )
        }
        _ => {
            let bytes = (remaining as u64).saturating_mul(requested);
            (
                bytes,
                format!(
                    "{remaining} more of this size (at least {})",
                    format_bytes(bytes as i64)
                ),
            )
        }
    };
    if to_come <= free {
        return None;
    }
    let softmax = at_a_softmax(cx, event);
    let mut words = format!(
        "{PASS_TO_COME_CAUSE}: its call stack holds {} such block{} made in this pass, and made \
         {} in the pass before, so {how} were to come, with {} free in the pool and on the \
         device. Whether or not this one request fits, the pass does not: no allocator setting \
         makes room for it",
        p.already,
        if p.already == 1 { "" } else { "s" },
        p.per_pass,
        format_bytes(free as i64),
    );
    if requested >= SPIKE_RATIO.saturating_mul(p.largest_before_bytes) {
        let _ = std::fmt::Write::write_fmt(
            &mut words,
            format_args!(
                ". This line's largest request before this pass was {} ({}× smaller): this \
                 request is far larger than the ones before it{}",
                format_bytes(p.largest_before_bytes as i64),
                requested.saturating_add(p.largest_before_bytes / 2)
                    / p.largest_before_bytes.max(1),
                if softmax {
                    ", and a softmax's output (attention scores) grows with the square of the \
                     sequence's length"
                } else {
                    ""
                }
            ),
        );
    }
    Some(words)
}

/// The cause where the failing request alone is more than the pool and the device had free,
/// and [`SPIKE_RATIO`] times this line's largest request before this pass or more: what is
/// unusual is this request, not what is live (batch 28's held-out audit: an object detector's
/// label assignment asked 3.85 GiB, 25× its largest before, with 2.05 GiB free; "live tensors
/// hold the memory" would have it lower the batch).
fn far_larger_than_before(
    cx: &DeviceContext,
    event: u32,
    requested: u64,
    free: u64,
) -> Option<String> {
    let trace = &cx.device.trace;
    let stack = trace.stack[event as usize];
    if stack == crate::model::NO_STACK || requested <= free {
        return None;
    }
    let this_pass = pass_start(cx, event)?;
    let largest_before = (0..this_pass)
        .filter(|&e| trace.action[e as usize] == Action::Alloc && trace.stack[e as usize] == stack)
        .map(|e| trace.size_bytes[e as usize])
        .max()?;
    (requested >= SPIKE_RATIO.saturating_mul(largest_before)).then(|| {
        format!(
            "a request far larger than this line asked before: its largest before this pass was \
             {} ({}× smaller), and this one alone is more than the {} free in the pool and on \
             the device",
            format_bytes(largest_before as i64),
            requested.saturating_add(largest_before / 2) / largest_before.max(1),
            format_bytes(free as i64),
        )
    })
}

/// Whether the request at `event` was made inside a Python `softmax` (attention's scores).
fn at_a_softmax(cx: &DeviceContext, event: u32) -> bool {
    cx.snapshot
        .stack_frames(cx.device.trace.stack[event as usize])
        .any(|f| crate::frames::is_python(cx.snapshot, f) && cx.snapshot.str(f.name) == "softmax")
}

/// A failing request this many times the line's largest before it is an input far larger.
const SPIKE_RATIO: u64 = 4;

/// Blocks alive at an `oom` that the failing line made in an earlier iteration.
struct PreviousResult {
    blocks: usize,
    bytes: u64,
    /// The earliest of them.
    made: u32,
    /// The optimizer step between it and the failure (the last such).
    step: crate::category::PhaseRun,
}

impl PreviousResult {
    fn sentence(&self) -> String {
        format!(
            " {} block{} of the failing request's call stack and size, made at event {} before \
             the optimizer step that starts at event {}, {} still alive: the previous \
             iteration's result of this line, still referenced (Python frees a variable's old \
             value only when the new one is assigned: `logits = model(x)` in a loop holds the \
             last step's logits while the next forward makes new ones).",
            self.blocks,
            if self.blocks == 1 { "" } else { "s" },
            self.made,
            self.step.start,
            if self.blocks == 1 { "is" } else { "are" },
        )
    }

    /// What dropping it frees, against the `lacked` bytes the request needed beyond what the
    /// device and the cache had free.
    fn advice(&self, lacked: u64) -> String {
        format!(
            "Drop that reference once the iteration is done with it (`del` the outputs or logits \
             after backward and logging, or keep only `loss.item()`): that frees {} before this \
             request{}.",
            format_bytes(self.bytes as i64),
            if self.bytes >= lacked {
                format!(", more than it lacked ({})", format_bytes(lacked as i64))
            } else {
                format!(" of the {} it lacked", format_bytes(lacked as i64))
            },
        )
    }

    fn evidence(&self) -> String {
        format!(
            "previous result: {} bytes in {} block{} with the failing request's stack and size, \
             made at event {}, an optimizer step from event {} on between them and the request",
            self.bytes,
            self.blocks,
            if self.blocks == 1 { "" } else { "s" },
            self.made,
            self.step.start,
        )
    }
}

/// The failing line's result from an earlier iteration, still held at the `oom` event: live
/// blocks with the failing request's own call stack and requested size, made in a forward pass
/// with an optimizer step between them and the failure (a held-out OOM in a fine-tune's second
/// forward: the first step's 2.94 GiB logits, kept by the loop's variable, beside the new
/// request of the same 2.94 GiB). The same stack and size is the same line's output again;
/// the optimizer step between them puts them in different iterations.
fn previous_result_of_the_line(cx: &DeviceContext, oom: u32) -> Option<PreviousResult> {
    let trace = &cx.device.trace;
    let (stack, size) = (trace.stack[oom as usize], trace.size_bytes[oom as usize]);
    if stack == crate::model::NO_STACK {
        return None;
    }
    let replay = cx.replay;
    let mut found: Option<PreviousResult> = None;
    for &(_, id) in &replay.live_after(cx.device, Some(oom)) {
        let l = &replay.lifetimes[id as usize];
        let Some(made) = l.alloc_event else {
            continue;
        };
        if l.stack != stack
            || l.requested_size_bytes != size
            || l.state_after(Some(oom)) != crate::model::BlockState::ActiveAllocated
            || cx.categories.phase_at(made) != crate::category::Phase::Forward
        {
            continue;
        }
        let Some(step) = cx
            .categories
            .optimizer_steps()
            .filter(|r| r.start > made && r.end <= oom)
            .last()
            .copied()
        else {
            continue;
        };
        let p = found.get_or_insert(PreviousResult {
            blocks: 0,
            bytes: 0,
            made,
            step,
        });
        p.blocks += 1;
        p.bytes += size;
        if made < p.made {
            p.made = made;
            p.step = step;
        }
    }
    found
}

/// The frame of `stack` that runs it under `nn.DataParallel` (`parallel_apply`, its
/// `data_parallel.py`), as `name (file:line)`.
fn data_parallel_frame(
    snapshot: &crate::model::Snapshot,
    stack: crate::model::StackId,
) -> Option<String> {
    snapshot.stack_frames(stack).find_map(|f| {
        let file = snapshot.str(f.filename).replace('\\', "/");
        (file.ends_with("parallel/data_parallel.py")
            || file.ends_with("parallel/parallel_apply.py"))
        .then(|| {
            format!(
                "{} ({}:{})",
                snapshot.str(f.name),
                file.rsplit("torch/").next().unwrap_or(&file),
                f.line
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use crate::detect::test_support::generated;
    use crate::detect::{FindingKind, analyze};
    use crate::r#gen::Scenario;

    #[test]
    fn every_injected_oom_is_found_at_its_event_with_its_call_site() {
        for seed in 1..=4 {
            let (g, loaded) = generated(Scenario::Oom, 20_000, seed);
            let truth = g.truth.oom.as_ref().expect("the oom scenario injects one");
            let ooms: Vec<_> = analyze(&loaded)
                .into_iter()
                .filter(|f| f.kind == FindingKind::Oom)
                .collect();
            assert_eq!(ooms.len(), 1, "seed {seed}");
            assert_eq!(u64::from(ooms[0].events.0), truth.event, "seed {seed}");
            assert_eq!(ooms[0].bytes, truth.requested_bytes, "seed {seed}");
            assert_eq!(
                ooms[0].stack,
                loaded.snapshot.devices[0].trace.stack[truth.event as usize]
            );
            assert!(
                ooms[0].summary.contains("single request larger"),
                "{}",
                ooms[0].summary
            );
        }
    }

    #[test]
    fn clean_runs_have_no_oom() {
        for seed in 1..=3 {
            let (_, loaded) = generated(Scenario::Steady, 20_000, seed);
            assert!(
                analyze(&loaded).iter().all(|f| f.kind != FindingKind::Oom),
                "seed {seed}"
            );
        }
    }
}

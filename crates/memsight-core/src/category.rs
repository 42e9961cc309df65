//! What each allocation is for: parameters, gradients, optimizer state, activations,
//! temporaries, workspaces — inferred from its call stack and from the phase of the training loop
//! it was allocated and freed in. `Unknown` is an honest answer where the evidence is missing.
//!
//! The rules, in order (the first that applies wins):
//! 1. **workspace**: a frame names a workspace (`torch_npu`'s workspace allocator, cuBLAS / cuDNN
//!    workspaces); or, alive before the trace with no stack and never freed, it has exactly the
//!    size of a workspace the trace made (cuBLAS makes one per stream and thread). Then
//!    **communication**: made below `DistributedDataParallel`'s `_ddp_init_helper` (its reducer's
//!    gradient buckets) or `_pre_forward` (their rebuild in gradient-ready order), not below a
//!    call of the model: kept by design, whatever its lifetime. Then **KV cache**: made below a
//!    Python function whose name (or its file's: `kv_cache.py`) says KV cache (`allocate_kv`,
//!    `_allocate_kv_cache`, `past_key_values`, `cache_k`; not an attention kernel's, such as
//!    `flash_attn_with_kvcache`),
//!    not below a call of the model (a function that runs the model does not make its
//!    activations a cache).
//! 2. **parameter**: made by a module's `.to()` / `.cuda()` / `.npu()` (`Module._apply`) /
//!    `load_state_dict` / a module's `__init__` / `reset_parameters`, outside backward and the
//!    optimizer (a method named `to` elsewhere moves an input: `BatchEncoding.to`); or made and
//!    kept by a function that loads or builds a model (`from_pretrained`, `load_weights`, a shard
//!    loader: `MODEL_LOADING`; `build_model`, `create_model`: `MODEL_BUILDING`); or alive
//!    before the trace and never freed in it with no stack at all (weights and buffers made
//!    before recording began), where the trace trains, or has a parameter or a half-size
//!    autocast copy of its size, or where such copies are twins of two thirds of those blocks'
//!    bytes (what autocast leaves in fp32: embeddings, norms) (else unknown: a serving engine's
//!    KV cache made before recording looks the same). A block from before the trace whose stack names no model loading
//!    is not taken for a weight: a state-only recording's KV cache and a ring-buffered trace's
//!    leaked blocks have stacks too. Blocks alive before the trace are otherwise judged by their
//!    stack as below (`AdamW` state made in a step the trace no longer holds is still optimizer
//!    state).
//! 3. **gradient**: made by autograd's `AccumulateGrad`; or made in a backward pass and still alive
//!    when that pass ends (unless activation checkpointing's recomputation made it: a forward pass
//!    run again, still held after the pass, is **retained**) (weight gradients wait there for the optimizer and `zero_grad`); or
//!    released by `zero_grad` (the free's stack says so), whatever made it — last step's
//!    gradients alive before the trace, or made on a backward thread that records no frames.
//! 4. **optimizer state**: made inside `Optimizer.step` (a frame of `torch/optim/`, or an
//!    `Optimizer.step` annotation window) and still alive when the step ends (`exp_avg`, …); or,
//!    made by the optimizer before the trace, still alive when the trace first allocates outside
//!    an optimizer step (an optimizer that replaces its moments every step frees last step's in
//!    this one: they lived through a forward and a backward pass, so they were state).
//! 5. **activation**: made outside backward and the optimizer, alive when a later backward pass
//!    starts (what the forward pass saves for backward) and freed before that iteration is over
//!    (the end of the next optimizer step or the next backward pass's start, whichever is first): a
//!    block still held then is an input batch, a cache or a leak: **retained**; with no
//!    backward after it (inference, a forward pass alone), kept to the end of the trace —
//!    unless an object's constructor made it and it was kept a quarter of the trace or more:
//!    **long-lived** (a custom `Linear.__init__`'s weights, recorded from the model's build).
//! 6. **temporary**: freed within its own phase (the backward pass, the optimizer step, or before
//!    the next backward pass starts), held for less than a quarter of the trace: held longer, no
//!    phase explains it (a warm-up pass's graph, the previous batch's outputs kept through the
//!    next) and it is **unknown**. In a trace with no backward pass at all, a block an
//!    object's constructor (`__init__`, not a `torch.nn` module's) made and kept for a quarter of
//!    the trace or more is **long-lived** state instead.
//!
//! Before rule 5, a block an object's constructor made outside backward and the optimizer: freed
//! by an optimizer step, it is what that step replaced, a **parameter** (or **optimizer state**
//! where the constructor's file is named for an optimizer: `NIUAdam.__init__` in
//! `optimizer.py`); made before the first backward pass and alive through the last, it is
//! **long-lived** (optimizer state, likewise). Autograd frees what a forward pass saves, never
//! the optimizer; and a block kept through every iteration was not made by one.
//! 7. **unknown**: anything else (alive before the trace, freed in it, with no telling stack).
//!
//! A block from before the trace is a temporary only if the backward pass or optimizer step
//! the trace begins inside frees it; freed later, it outlived its phase: unknown.
//!
//! Then the rules that need the first pass's categories:
//! - **optimizer state, replaced**: where the trace begins inside an optimizer step, a block the
//!   optimizer made before the trace and frees in that step after the step made a block of its
//!   size that outlives the step is the moment that block replaces (`replaced_state`).
//! - **gradient kept from an earlier step**: where the blocks from before the trace taken for
//!   weights, with the gradients among them, come in pairs (sizes holding 90 % of the weights'
//!   bytes an even count each) and the first backward pass makes blocks of each such size only
//!   to free them in the same pass, at least one per pair (a new gradient added into an existing
//!   `.grad`, which a `None` `.grad` would have kept instead), half of each size is last step's
//!   gradients (`zero_grad()` without `set_to_none`, or none at all), taken from its stackless
//!   blocks. Which stackless block of a pair is the gradient the trace cannot tell: the upper
//!   addresses are taken, and the bytes are right. Not where `zero_grad` frees blocks in the
//!   trace: the program sets its gradients to `None`, so none is carried into a step.
//!   Where they come three or four per weight instead (each size's count that many times the
//!   blocks of its size the first backward pass makes and frees), one per weight is last
//!   step's gradient and the rest, beyond the weight, is **unknown** where no optimizer is shown
//!   (`more_than_a_gradient_beside_each_weight`: optimizer state has that shape, but nothing
//!   in the file names it); four per weight where the trace shows Adam are a weight, its
//!   gradient and its two moments (**optimizer state**).
//! - **a gradient needs a weight**: a gradient has its weight's size, and a backward pass makes
//!   at most one per weight. Blocks taken for gradients only by their lifetime (no
//!   `AccumulateGrad`, `zero_grad` or owner says so) beyond the blocks of their size that may
//!   be weights when the pass starts are **unknown** (`gradients_need_a_weight`): a gradient
//!   total above the weights is no finding.
//! - **optimizer state, Adam's from before the trace**: where the trace runs Adam (its frames
//!   say so) and the stackless blocks from before the trace taken for weights come in threes
//!   per size (sizes holding 90 % of their bytes), each size with gradients in the trace, two of
//!   each three are the moments `exp_avg` / `exp_avg_sq` (`adam_moments_before_the_trace`);
//!   not for a size whose state a step in the trace makes (Adam makes it in the first step).
//!   Where no frame shows Adam (a fused step allocates nothing), the annotations naming an Adam
//!   step do, if no optimizer state was found otherwise (`annotates_adam`). Where they do not
//!   come in threes, a half-precision model's fp32 moments are twice its weights' size: where
//!   every size holding 90 % of those blocks' bytes counts its own weights (the gradients of
//!   its size the first backward pass makes) plus two or three per weight of half its size
//!   (moments, and a master copy where kept), those beyond its own weights are **optimizer
//!   state** (`fp32_state_of_half_precision_weights`).
//! - **Adam's state is `_init_group`'s**: where the trace runs Adam and shows `_init_group`
//!   making state, a block Adam's step made elsewhere and kept past the step is **unknown**
//!   (`adam_state_is_made_by_init_group`).
//! - **long-lived, kept through repetitions**: in a trace with no backward pass, an activation
//!   never freed that lived through two or more of the low points the allocated curve keeps
//!   coming back to was made once and kept while what repeats frees what it makes (a cache
//!   filled on first use), not what one forward pass keeps (`kept_through_repetitions`).
//! - **optimizer state, one per weight from before the trace**: where `zero_grad` frees the
//!   gradients, the trace does not run Adam, and the stackless blocks from before the trace
//!   taken for weights hold exactly two or three per gradient of their size the first backward
//!   pass makes (sizes holding 90 % of their bytes; the third is a buffer of the weight's size,
//!   batch norm's running statistics), one per gradient is an optimizer's one state per weight:
//!   SGD's momentum, `RMSprop`'s or `Adagrad`'s sums (`momentum_before_the_trace`).
//! - **weight copy**: made by autocast's `cached_cast` with half the bytes of a parameter (an fp32
//!   weight cast to bf16 / fp16); autocast keeps it until its region ends. Where the file has
//!   Python frames only (Windows), a block freed by autocast's `__exit__` (which clears the cache
//!   of casts) is such a cast. At no moment are more
//!   copies of a size alive than weights of twice that size: casts beyond that are activations.
//! - **`nn.DataParallel`'s own**, by its frames (`torch/nn/parallel/`), before the lifetime rules:
//!   `replicate`'s broadcast of the weights to another device is a **weight copy**, `scatter`'s
//!   share of the batch (outside backward) an **input**; `Broadcast.backward`'s buckets of the
//!   replicas' gradients summed (`reduce_add_coalesced`) are gradients bound by bytes, as a
//!   gradient buffer is, not by a weight's size.
//! - **parameter, trained input**: a retained or long-lived block of a size that has optimizer
//!   state and a gradient but no weight: the input the optimizer trains (`trained_inputs`).
//! - **parameter, replaced by the optimizer**: a block an optimizer step makes and keeps, where
//!   that step freed a parameter of its size: the weight's new tensor, not the optimizer's
//!   state (`replaced_parameters`; which of the step's same-sized blocks is the weight the
//!   trace cannot tell, the earliest made are taken, and the bytes are right).
//! - **activation, every layer's**: a block freed with no backward pass beginning while it
//!   lived (in a trace with no backward pass, every freed block), made inside a module's forward
//!   by a call stack with four or more such blocks alive at once and four or more freed together
//!   with no allocation between (one per layer: autograd keeps the graph, or the previous pass's
//!   graph is held until its output is dropped, and dropping it frees them at once; an
//!   evaluation without `no_grad` inside a training run), not a temporary; a generation loop's
//!   blocks of such a line need not go together (its cache, replaced a layer at a time)
//!   (`layers_kept_without_backward`).
//! - **workspace, the backward thread's**: a block of exactly cuBLAS's default workspace made in
//!   a backward pass with no Python frame and never freed (a few at most) is the workspace of
//!   that thread's cuBLAS handle, not a gradient (`workspaces_of_the_backward_thread`).
//! - **activation, held at a failure**: a temporary made in a forward pass before an `oom` event
//!   and freed only after it was freed by the exception's unwind: it was what the pass held.
//!
//! Last, msMemScope's owners: a block whose owner names a category (`PTA@model@gradient`) is
//! that category; where some owner on the device names model state, a pool block whose owner
//! names none (`PTA`, `PTA@ops@aten`: msMemScope's optimizer-step hook did not find it among the
//! weights, gradients and optimizer state) is no model state: a temporary where its phase freed
//! it, else an activation (`owners_decide`).
//!
//! A *backward pass* is a run of allocations whose stacks are autograd's (the C++ engine thread,
//! a `*Backward*` node, `torch/autograd/__init__.py: backward`, `Tensor.backward`); an
//! *optimizer step* a run of allocations under `torch/optim/`. A run ends at the first allocation
//! of another kind; its frees belong to it until then. Allocations without a call stack take the
//! phase of the run they fall in — except in a file that records Python frames alone and trains,
//! where they are the autograd engine thread's, a backward pass's, as are those whose stack
//! does not begin where the main thread's do (a hook on that thread); `save_on_cpu`'s unpack hook
//! marks a backward pass too (`stackless_allocations_are_the_engine_s`).

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::model::{Action, Device, NO_STACK, Snapshot, StackId, StrId};
use crate::replay::{DeviceReplay, Lifetime};

/// What an allocation is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Parameter,
    Gradient,
    OptimizerState,
    /// A 16-bit copy of a weight that autocast keeps for the whole autocast region; or
    /// `nn.DataParallel`'s replica of a weight on another device, broadcast in each forward pass.
    WeightCopy,
    Activation,
    /// Made by the training loop itself (no frame calls the model, steps an optimizer or
    /// constructs an object; the function that then calls the model) after the previous
    /// backward pass and before this iteration's forward pass calls the model, alive when it
    /// does, and dropped before the backward pass after the next (or before its line makes the
    /// batch after the next, where an iteration runs several): the batch moved to the device
    /// and what the loop made of it (labels, masks, noise, on-device augmentation). `PyTorch`'s
    /// memory timeline calls these `INPUT`.
    Input,
    /// Made in a forward pass and still held when its iteration was over: a cache, a buffer
    /// kept on purpose, or a leak.
    Retained,
    Temporary,
    /// Made by an object's constructor (an `__init__` other than a `torch.nn` module's) and
    /// kept: for a quarter or more of a trace with no backward pass, or through every backward
    /// pass of one that has them. That object's state (a model's own modules' weights, a custom
    /// or zeroth-order optimizer's, an estimator's, a dataset or cache on the device). Not a
    /// temporary (no phase frees it) and not retained (no iteration made it).
    LongLived,
    Workspace,
    /// Made by `DistributedDataParallel`'s reducer for its gradient buckets, the buffers
    /// all-reduce runs on: kept by design, rebuilt once in gradient-ready order.
    Communication,
    /// Made below a function of the program's whose name says KV cache (`allocate_kv`,
    /// `_allocate_kv_cache`, `past_key_values`), not below a call of the model: the keys and
    /// values an attention caches for the tokens already seen.
    KvCache,
    Unknown,
}

impl Category {
    pub const ALL: [Category; 13] = [
        Category::Parameter,
        Category::Gradient,
        Category::OptimizerState,
        Category::WeightCopy,
        Category::Activation,
        Category::Input,
        Category::Retained,
        Category::Temporary,
        Category::LongLived,
        Category::Workspace,
        Category::Communication,
        Category::KvCache,
        Category::Unknown,
    ];

    /// The words used in prose and on screen: the name with spaces, "KV cache" for `kv_cache`.
    pub fn words(self) -> String {
        match self {
            Self::KvCache => "KV cache".to_string(),
            _ => self.name().replace('_', " "),
        }
    }

    /// The word used in reports and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Parameter => "parameter",
            Self::Gradient => "gradient",
            Self::OptimizerState => "optimizer_state",
            Self::WeightCopy => "weight_copy",
            Self::Activation => "activation",
            Self::Input => "input",
            Self::Retained => "retained",
            Self::Temporary => "temporary",
            Self::LongLived => "long_lived",
            Self::Workspace => "workspace",
            Self::Communication => "communication",
            Self::KvCache => "kv_cache",
            Self::Unknown => "unknown",
        }
    }

    /// What the category's rule requires of a block, in one line: the evidence behind a
    /// figure of that category (see the module doc for the full rules).
    pub fn definition(self) -> &'static str {
        match self {
            Self::Parameter => {
                "made by a module's .to() / .cuda() / .npu() (Module._apply), load_state_dict, \
                 a module's __init__ or reset_parameters; made and kept by a function that loads \
                 or builds a model (from_pretrained, load_weights, build_model, get_model, …); \
                 made by a \
                 constructor and replaced by an optimizer step, or by one that replaced such a \
                 block; or alive before the trace and never \
                 freed in it with no call stack, where the trace trains or has a parameter or \
                 half-size autocast copy of its size"
            }
            Self::Gradient => {
                "made by autograd's AccumulateGrad, made in a backward pass and alive when it \
                 ends, or freed by zero_grad, or made and kept by a gradient buffer \
                 (param_and_grad_buffer.py) or by nn.DataParallel's Broadcast.backward (the \
                 replicas' gradients summed in flat buckets); never more of a size than blocks \
                 of that size that may be weights"
            }
            Self::OptimizerState => {
                "made inside an optimizer step (frames of torch/optim or an optimizer's step) and \
                 alive when the step ends, or by the constructor of a file named for an \
                 optimizer or a function that builds one (build_optimizer, …) and kept; or, \
                 from before the trace with no stack, the blocks beyond \
                 one per weight where each weight's size is held two or three times (momentum, \
                 Adam's moments), or four times with last step's gradient where the trace shows \
                 Adam; or, where the trace shows Adam, two or three blocks of twice each \
                 gradient's size per weight (fp32 moments, and a master copy, of 16-bit weights)"
            }
            Self::WeightCopy => {
                "made by autocast's cached_cast (or freed by autocast's __exit__, which clears \
                 its cache of casts) at half a weight's size, at most one alive per weight; in a \
                 file of Python frames alone, a forward pass's blocks of half a weight's size \
                 kept into the backward pass, where they number exactly the weights of that size \
                 and such weights hold two thirds of the trained weights' bytes or more; or made \
                 by nn.DataParallel's replicate: the weights broadcast to another device for one \
                 forward and backward pass"
            }
            Self::Activation => {
                "made outside backward and the optimizer, alive when the next backward pass \
                 starts (or, with no backward pass at all, kept to the end of the trace or the \
                 failure, or made by a line with many blocks alive at once and freed together: \
                 every layer's, as autograd keeps them and drops them with its graph; or \
                 kept so by a generation loop); or made in a backward pass, kept past it and \
                 freed by a later one with no checkpoint's recomputation between: saved by a \
                 backward pass run with create_graph"
            }
            Self::Input => {
                "made in a trace with backward passes (or one that ends in an out-of-memory \
                 error) by a stack with Python frames none of which calls the model, steps an \
                 optimizer, builds an object or loads weights, in the function that then calls the \
                 model (or a helper it calls whose name says it moves data: cast_data, \
                 to_device, …, and the program frees it), after the previous backward pass and \
                 before this iteration's first allocation that calls the model, alive when that allocation is made, and freed \
                 before the backward pass after the next or before its line makes the batch \
                 after the next (or, made for the trace's last iteration, kept), no block of its \
                 line kept longer: the batch on the device and what the loop made of it; or \
                 made by nn.DataParallel's scatter outside a backward pass: a device's share of \
                 the batch"
            }
            Self::Retained => {
                "made outside backward and the optimizer step (or by a checkpoint's recomputation \
                 of a forward pass) and still alive when its iteration is over"
            }
            Self::Temporary => {
                "freed within the phase (forward, backward, optimizer) that made it, and held for \
                 less than a quarter of the trace"
            }
            Self::LongLived => {
                "made by an object's constructor (__init__) and kept: for a quarter of a trace \
                 with no backward pass, or through every backward pass of one with them; or, in a \
                 trace with no backward pass, made once and kept through the low points its \
                 allocated curve keeps coming back to (a cache filled on first use)"
            }
            Self::Workspace => "a frame names a workspace, or cuBLAS's default workspace size",
            Self::Communication => {
                "made where DistributedDataParallel builds its reducer's gradient buckets \
                 (_ddp_init_helper) or rebuilds them (_pre_forward): the buffers the gradients' \
                 all-reduce runs on, kept by design"
            }
            Self::KvCache => {
                "made below a Python function whose name says KV cache (kv_cache, past_key_value, \
                 key_cache / value_cache, cache_k / cache_v, allocate_kv; not an attention \
                 kernel's), not below a call of the model: the keys and values kept for the \
                 tokens already seen"
            }
            Self::Unknown => {
                "what the file shows does not say: alive before the trace with a stack that says \
                 nothing of its use, or with none, in a trace that does not train, and nothing of its \
                 size in it that a weight has (weights or a cache: the file cannot tell); held over a quarter of the trace and freed where no phase \
                 explains it; made before the trace's last backward pass and not freed by it (held \
                 by the program: an input, a weight made as a plain tensor, an output); or made in \
                 a backward pass and kept, beyond one per weight of its size; or, from before \
                 the trace with no stack, what is kept beside each weight and its gradient where \
                 each weight's size is held three or four times and no optimizer is shown; or \
                 restored by torch.load (a checkpoint's weights, or optimizer state saved with \
                 them: its frames cannot tell which)"
            }
        }
    }

    /// Kept by design (weights, their gradients, optimizer state, autocast's copies of the
    /// weights, data parallelism's gradient buckets): never a leak, never an outlier.
    pub fn is_model_state(self) -> bool {
        matches!(
            self,
            Self::Parameter
                | Self::Gradient
                | Self::OptimizerState
                | Self::WeightCopy
                | Self::Communication
        )
    }
}

/// Which part of a training iteration an event falls in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Outside backward and the optimizer: the forward pass, data loading, evaluation.
    Forward,
    Backward,
    Optimizer,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Self::Forward => "forward pass",
            Self::Backward => "backward pass",
            Self::Optimizer => "optimizer step",
        }
    }
}

/// A run of allocations of one phase: events `start..end`, where `end` is the first allocation
/// of another phase (or the trace's end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseRun {
    pub phase: Phase,
    pub start: u32,
    /// The next phase's first allocation, or the trace's end.
    pub end: u32,
    /// Where the run's own events end, for telling it: in the run the trace ends in, the first
    /// free after its last allocation whose freeing stack shows another phase (the last
    /// optimizer step's and `zero_grad`'s frees are not the backward pass's: batch 19's
    /// re-audit read "backward passes at events 5871–38668", the trace's end); else `end`.
    pub own_end: u32,
}

/// Every lifetime's category on one device, and the backward / optimizer runs they came from.
#[derive(Clone, Debug, Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one flag per thing the trace shows of how the run trains"
)]
pub struct Categories {
    /// By lifetime id (the order of [`DeviceReplay::lifetimes`]).
    pub of_lifetime: Vec<Category>,
    /// Backward passes and optimizer steps, in trace order (forward is everything between).
    pub runs: Vec<PhaseRun>,
    /// Some allocation was made by an autocast cast: the run uses mixed precision.
    pub autocast: bool,
    /// Blocks from before the trace were found to be Adam's fp32 state of 16-bit weights (twice
    /// each gradient's size), or a backward pass made fp32 gradients of 16-bit weights (twice
    /// each weight's size): the weights are bf16 / fp16.
    pub half_precision_weights: bool,
    /// Blocks from before the trace found to be gradients kept from an earlier step (paired
    /// with the weights, added into by backward), not weights.
    pub kept_gradient_blocks: usize,
    /// Those gradients were told by their missing stack: each weight's own block has one, its
    /// twin none (the backward thread records no Python frames).
    pub kept_gradients_stackless: bool,
    /// Some allocation ran inside an optimizer's step through a closure (the model's forward
    /// and backward run by `optimizer.step(closure)`): optimizer frames the stacks hold that are
    /// no step of the optimizer's own.
    pub optimizer_runs_closure: bool,
    /// Some event's stack has an optimizer's frame (a step, one running a closure) or a
    /// `zero_grad`: an optimizer may be at work even where none of its steps made a block.
    pub optimizer_frames: bool,
    /// The backward passes were told only by the thread that made their allocations (in a file
    /// that records Python frames alone, those without a stack): no frame shows autograd.
    pub backward_by_thread: bool,
    /// Autocast's copies of the weights were told by their count alone
    /// (`weight_copies_by_count`): the file records Python frames only, so no `cached_cast`.
    pub casts_by_count: bool,
}

impl Categories {
    /// The phase of event `e`.
    pub fn phase_at(&self, e: u32) -> Phase {
        run_at(&self.runs, e).map_or(Phase::Forward, |r| r.phase)
    }

    /// Whether the trace trains: a backward pass or an optimizer step, or blocks that are
    /// gradients or optimizer state (made before the trace).
    pub fn trains(&self) -> bool {
        self.runs
            .iter()
            .any(|r| matches!(r.phase, Phase::Backward | Phase::Optimizer))
            || self
                .of_lifetime
                .iter()
                .any(|c| matches!(c, Category::Gradient | Category::OptimizerState))
    }

    /// Whether the trace has a backward pass.
    pub fn has_backward(&self) -> bool {
        self.runs.iter().any(|r| r.phase == Phase::Backward)
    }

    /// The optimizer steps, in trace order.
    pub fn optimizer_steps(&self) -> impl Iterator<Item = &PhaseRun> {
        self.runs.iter().filter(|r| r.phase == Phase::Optimizer)
    }
}

/// What a call stack says about the allocation it made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one flag per kind of frame a stack may hold"
)]
struct StackMarks {
    workspace: bool,
    /// `torch.load` restoring a storage onto the device (`torch/serialization.py`): a
    /// checkpoint's tensor, a weight or an optimizer's state saved with it.
    checkpoint_restore: bool,
    /// `DistributedDataParallel` building its reducer's gradient buckets (`_ddp_init_helper`)
    /// or rebuilding them (`_pre_forward`), not below a call of the model.
    communication: bool,
    /// A Python function whose name says KV cache, not below a call of the model.
    kv_cache: bool,
    accumulate_grad: bool,
    backward: bool,
    optimizer: bool,
    parameter_init: bool,
    /// `Optimizer.zero_grad` / `Module.zero_grad`: on a free's stack, the block was a gradient.
    zero_grad: bool,
    /// Activation checkpointing's recomputation (`torch/utils/checkpoint.py`, `recompute_fn`):
    /// in a backward pass, a forward pass run again, not a gradient.
    recompute: bool,
    /// Adam or `AdamW` (`torch/optim/adam.py`, `adamw.py`, `_fused_adamw`): an optimizer that keeps
    /// two moments of each parameter's size.
    adam: bool,
    /// `at::autocast::cached_cast`: a cast that autocast made (and may keep).
    autocast_cast: bool,
    /// Autocast's `__exit__` (`torch/amp/autocast_mode.py`): on a free's stack, the block was in
    /// autocast's cache of casts, which leaving the region clears (the only evidence of a cast
    /// where the file records Python frames alone, as on Windows).
    autocast_exit: bool,
    /// A constructor (`__init__`) other than a `torch.nn` module's: an object made the block.
    constructor: bool,
    /// A model's weights being loaded (`from_pretrained`, `load_weights`, a shard loader): a
    /// block such a stack makes and keeps is a weight.
    model_load: bool,
    /// A gradient buffer's frame (Megatron's `param_and_grad_buffer.py`): a block it makes and
    /// keeps holds the weights' gradients; or `nn.DataParallel`'s `Broadcast.backward` summing
    /// the replicas' gradients in flat buckets (`reduce_add_coalesced`).
    grad_buffer: bool,
    /// A constructor in a file that names an optimizer (`optimizer.py`, `adam.py`, …): a
    /// hand-written optimizer making its state up front; or a function that builds the
    /// optimizer (`build_optimizer`, `create_optimizer`, `configure_optimizers`): what it makes
    /// and keeps is the optimizer's (mixed precision's fp32 master weights, state made up front).
    optimizer_constructor: bool,
    /// An optimizer's frames above a call of the model or a closure: the step runs the forward
    /// and backward (`optimizer.step(closure)`); those frames made nothing of the optimizer's.
    closure_in_optimizer: bool,
    /// `torch.optim`'s `_init_group`, where Adam and `AdamW` make their state (`exp_avg`,
    /// `exp_avg_sq`) the first time a parameter is stepped.
    state_init: bool,
    /// Some frame calls the model (`Module._call_impl`), a closure, a `training_step` or
    /// `backward()`: the block was made by the model's passes, not by the loop around them.
    runs_the_model: bool,
    /// A frame of native code (C++, a shared object): the file records more than Python lines,
    /// so autocast's casts would show their `cached_cast` frame.
    native: bool,
    /// `nn.DataParallel`'s `replicate` (`torch/nn/parallel/replicate.py`), not below a call of
    /// the model: each forward pass broadcasts the weights to every other device, a copy of
    /// them there that lives until the backward pass is done with it.
    replica: bool,
    /// `nn.DataParallel`'s `scatter` (`torch/nn/parallel/scatter_gather.py`), not below a call
    /// of the model nor in a backward pass: the device's share of the batch.
    scattered_input: bool,
    /// A Python function of the program's whose name says it rewrites the optimizer's tensors
    /// (3D Gaussian Splatting's `cat_tensors_to_optimizer`, `_prune_optimizer`,
    /// `replace_tensor_to_optimizer`), not an optimizer's own frame, not one that builds the
    /// optimizer or steps it, not below a call of the model: what it makes and keeps is the
    /// optimizer's tensors made anew, its state and the parameters it holds.
    rewrites_optimizer_tensors: bool,
}

/// Whether `stack` is activation checkpointing's recomputation of a forward pass
/// (`torch/utils/checkpoint.py`, a `recompute` function).
pub fn is_recomputation(snapshot: &Snapshot, stack: StackId) -> bool {
    stack_marks(snapshot, stack).recompute
}

/// Whether `stack` is `nn.DataParallel` broadcasting the weights to another device (`replicate`).
pub fn is_replica(snapshot: &Snapshot, stack: StackId) -> bool {
    stack_marks(snapshot, stack).replica
}

/// Whether `stack` is a gradient buffer's (Megatron's `param_and_grad_buffer.py`: gradients
/// kept by design, zeroed in place each step, never freed) or `nn.DataParallel`'s buckets of
/// the replicas' gradients summed (`Broadcast.backward`).
pub fn is_gradient_buffer(snapshot: &Snapshot, stack: StackId) -> bool {
    stack_marks(snapshot, stack).grad_buffer
}

/// Whether `stack` is `torch.load` restoring a storage onto the device
/// (`torch/serialization.py`'s `default_restore_location`, `_cuda_deserialize`): a checkpoint's
/// tensor, a weight or an optimizer's state saved with it, the frames cannot tell which (batch
/// 34's held-out audit: a resumed run's 7.35 GiB of weights and `AdamW` moments, "100%
/// parameter").
pub(crate) fn restores_a_checkpoint(snapshot: &Snapshot, stack: StackId) -> bool {
    snapshot.stack_frames(stack).any(|f| {
        snapshot
            .str(f.filename)
            .replace('\\', "/")
            .ends_with("torch/serialization.py")
            && matches!(
                snapshot.str(f.name),
                "default_restore_location" | "_cuda_deserialize" | "restore_location"
            )
    })
}

/// Whether `stack` made a weight or an optimizer's state by its frames (a model being loaded or
/// built, a module's initialisation, an optimizer's step or constructor), or ran the model (a
/// module call, where autograd may keep every layer's tensors).
pub fn makes_model_state_or_runs_the_model(snapshot: &Snapshot, stack: StackId) -> bool {
    let m = stack_marks(snapshot, stack);
    m.model_load
        || m.parameter_init
        || m.optimizer
        || m.optimizer_constructor
        || m.state_init
        || m.runs_the_model
}

/// Whether `stack` calls the model (a module's `_call_impl`, a `forward`), outside an
/// optimizer's closure.
pub fn runs_the_model(snapshot: &Snapshot, stack: StackId) -> bool {
    stack_marks(snapshot, stack).runs_the_model
}

/// Whether `stack` runs in an optimizer's step (by its frames).
pub fn is_optimizer_step(snapshot: &Snapshot, stack: StackId) -> bool {
    stack_marks(snapshot, stack).optimizer
}

/// Whether `stack` (a free's) is autocast's `__exit__` clearing its cache of casts.
pub fn is_autocast_exit(snapshot: &Snapshot, stack: StackId) -> bool {
    stack_marks(snapshot, stack).autocast_exit
}

fn stack_marks(snapshot: &Snapshot, stack: StackId) -> StackMarks {
    let mut marks = StackMarks::default();
    if stack == NO_STACK {
        return marks;
    }
    // Frames run innermost first. An optimizer that takes a closure (`optimizer.step(closure)`:
    // PyTorch Lightning's automatic optimization, LBFGS) runs the model's forward and backward
    // inside its `step`: below a frame that calls the model or a closure, the optimizer's frames
    // are only where the call came from, not what made the block.
    let mut runs_the_model = false;
    // A Python function inside this one whose name says it moves a batch: Hugging Face's
    // `training_step` puts the batch on the device itself (`_prepare_inputs`) before it runs the
    // model (batch 27's wav2vec2 rank: 30 MiB of inputs "activation").
    let mut moving_data_inside = false;
    let (mut reduce_add_coalesced, mut broadcast_backward) = (false, false);
    for frame in snapshot.stack_frames(stack) {
        let name = snapshot.str(frame.name);
        let file = snapshot.str(frame.filename);
        let lower_name = name.to_ascii_lowercase();
        runs_the_model |= lower_name.contains("closure")
            || (name == "training_step" && !moving_data_inside)
            || (matches!(name, "_call_impl" | "_wrapped_call_impl")
                && (file.ends_with("/nn/modules/module.py")
                    || file.ends_with("\\nn\\modules\\module.py")))
            || (name == "backward"
                && (file.ends_with("autograd/__init__.py") || file.ends_with("_tensor.py")));
        marks.workspace |= lower_name.contains("workspace");
        // DDP's forward runs the model below `_pre_forward`'s caller, never inside it; the
        // reducer's buckets are made in C++ below these two Python frames.
        marks.communication |= !runs_the_model
            && matches!(name, "_ddp_init_helper" | "_pre_forward")
            && (file.ends_with("nn/parallel/distributed.py")
                || file.ends_with("nn\\parallel\\distributed.py"));
        // A function that runs the model (`generate_with_kv_cache(model, …)`) does not make
        // every block below it a cache: only a frame below every call of the model counts.
        marks.kv_cache |= !runs_the_model && names_a_kv_cache(snapshot, frame);
        marks.accumulate_grad |=
            name.contains("AccumulateGrad") || file.ends_with("accumulate_grad.cpp");
        // A saved-tensor hook unpacking on the engine's thread (`save_on_cpu`'s
        // `unpack_from_cpu`): the backward pass asking for what the forward pass saved.
        let unpack_hook = name.starts_with("unpack") && file.ends_with("autograd/graph.py");
        marks.backward |= unpack_hook
            || name.contains("autograd::Engine")
            || name.contains("Backward")
            // A schedule that runs both passes (Megatron's `forward_backward_no_pipelining`)
            // is no backward pass: batch 20's held-out file 1 read its every allocation as
            // backward ("backward passes at events 1–25061"), its loss's peak among them.
            || name.contains("_backward") && !name.contains("forward_backward")
            // `backward` itself, wherever it is written: autograd's, or a wrapper that runs it
            // (DeepSpeed's `engine.backward`, Accelerate's, Lightning's; batch 24's held-out
            // audit: a ZeRO-Offload run's every gradient read as "outside backward", 99 %
            // unknown); not one that also steps the optimizer inside it.
            || (name == "backward" && !marks.optimizer);
        let optimizer_frame = is_optimizer_frame(file, name);
        marks.rewrites_optimizer_tensors |= !runs_the_model
            && !optimizer_frame
            && rewrites_optimizer_tensors(&lower_name)
            && crate::frames::is_python(snapshot, frame)
            && !crate::frames::is_pytorch_s_own(file);
        marks.optimizer |= !runs_the_model && optimizer_frame;
        marks.closure_in_optimizer |= runs_the_model && optimizer_frame;
        marks.state_init |= !runs_the_model && name == "_init_group" && optimizer_frame;
        marks.zero_grad |= name == "zero_grad";
        marks.recompute |= name.contains("recompute")
            || file.ends_with("/utils/checkpoint.py")
            || file.ends_with("\\utils\\checkpoint.py");
        marks.adam |= !runs_the_model
            && (lower_name.contains("adam")
                || file.ends_with("/adam.py")
                || file.ends_with("/adamw.py"));
        marks.autocast_cast |= name.contains("autocast::cached_cast");
        marks.autocast_exit |= name == "__exit__" && file.ends_with("autocast_mode.py");
        marks.native |= crate::frames::is_native(file);
        // A constructor that runs the model (a warm-up forward in a trainer's `__init__`) made
        // that forward's blocks, not its own state.
        marks.constructor |=
            name == "__init__" && !file.contains("/nn/modules/") && !runs_the_model;
        // Megatron's `get_model` builds the model (by name alone: `get_model_parallel_rank`
        // and its kin make nothing).
        marks.model_load |= name == "get_model"
            || MODEL_LOADING
                .iter()
                .chain(&MODEL_BUILDING)
                .any(|w| lower_name.contains(w));

        // Megatron's contiguous gradient buffer (`ParamAndGradBuffer`, the fp32 `main_grad` of
        // every weight, one block made when the model is wrapped for data parallelism).
        marks.grad_buffer |= file.ends_with("param_and_grad_buffer.py")
            || file.ends_with("grad_buffer.py")
            || lower_name.contains("grad_buffer");
        marks.optimizer_constructor |=
            (name == "__init__" && names_an_optimizer(file)) || builds_an_optimizer(&lower_name);
        // A module's `.to()` / `.cuda()` / `.npu()` runs `Module._apply`; a method of that
        // name elsewhere moves inputs (`BatchEncoding.to`, a graph's `Data.to()`), not weights.
        let module_file = file.contains("/nn/modules/") || file.contains("\\nn\\modules\\");
        // FSDP2's `fully_shard` makes each rank's shard of a weight (`FSDPParam`); FSDP1's
        // `FlatParamHandle` flattens a unit's weights into its flat parameter.
        let zero_partition = zero_partition(file, name);
        let fsdp_shard = matches!(
            name,
            "_init_sharded_param" | "_init_flat_param_and_metadata"
        ) && file.contains("fsdp");
        // `convert` is the function `Module.to()` applies to every weight (a held-out file's
        // stacks keep it and not `_apply`: 219 weights "unknown").
        // PEFT's adapters (`peft/tuners/`: a LoRA layer's `update_layer`) make the adapter's
        // weights (batch 31's held-out audit: a LoRA's 32 MiB, "long lived").
        let adapter = file.replace('\\', "/").contains("/peft/tuners/")
            && matches!(name, "__init__" | "update_layer" | "reset_lora_parameters");
        marks.parameter_init |= matches!(
            name,
            "_apply" | "load_state_dict" | "_load_from_state_dict" | "reset_parameters"
        ) || (module_file
            && matches!(name, "__init__" | "to" | "cuda" | "npu" | "convert"))
            || adapter
            || fsdp_shard
            || zero_partition == Some(ZeroPartition::Weights);
        marks.optimizer_constructor |= zero_partition == Some(ZeroPartition::Master);
        moving_data_inside |=
            !runs_the_model && crate::frames::is_python(snapshot, frame) && moves_data(name);
        let parallel = |module: &str| {
            let file = file.replace('\\', "/");
            file.ends_with(&format!("nn/parallel/{module}"))
        };
        marks.replica |= !runs_the_model && name == "replicate" && parallel("replicate.py");
        marks.scattered_input |= !runs_the_model
            && matches!(name, "scatter" | "scatter_kwargs")
            && parallel("scatter_gather.py");
        // `Broadcast.backward` sums the replicas' gradients onto the device that holds the
        // module, bucket by bucket (`reduce_add_coalesced`): the weights' gradients in flat
        // buffers, of no weight's size (batch 29's held-out audit: 109 MiB of them, 79.1 MiB
        // "unknown").
        reduce_add_coalesced |= name == "reduce_add_coalesced" && parallel("comm.py");
        broadcast_backward |=
            reduce_add_coalesced && name == "backward" && parallel("_functions.py");
    }
    marks.grad_buffer |= broadcast_backward;
    marks.scattered_input &= !marks.backward;
    marks.runs_the_model = runs_the_model;
    // Told before `model_load` (a loader's name around it): see `told_by_the_stack_alone`.
    marks.checkpoint_restore = restores_a_checkpoint(snapshot, stack);
    marks
}

/// Whether a frame is an optimizer's: a file of `torch/optim/` (or any `optim/` folder), or
/// the `step` of a file named for an optimizer.
fn is_optimizer_frame(file: &str, name: &str) -> bool {
    // The `step` of a file named for an optimizer (DeepSpeed's `ops/adam/fused_adam.py`:
    // batch 26's held-out audit, 7.82 GiB of Adam moments made in its step called
    // "retained"), or of DeepSpeed's `ZeRO` optimizers (`runtime/zero/stage3.py`), whose
    // step runs the inner one once per parameter sub-group: the whole step is one.
    // Not a `backward` written there: fairseq's `FP16Optimizer.backward` (in
    // `fairseq/optim/`) scales the loss and runs `loss.backward()`, the backward pass (batch
    // 32's held-out audit: 30 of them read as optimizer steps, "31 iterations" of 15).
    ((file.contains("/optim/") || file.starts_with("optim/") || file.contains("\\optim\\"))
        && name != "backward")
        || (name == "step"
            && (file.contains("optimizer")
                || names_an_optimizer(file)
                || file.replace('\\', "/").contains("deepspeed/runtime/zero/")))
}

/// What a `DeepSpeed` `ZeRO` optimizer's own function makes, by its name: the rank's flat 16-bit
/// weights, or their fp32 master copy (optimizer state, as Megatron's master copy is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ZeroPartition {
    Weights,
    Master,
}

/// The partition a frame of `DeepSpeed`'s `runtime/zero/` makes, where its function says
/// (`stage3.py`'s `_create_fp16_partitions_with_defragmentation` and `_create_fp32_partitions`,
/// `stage_1_and_2.py`'s `flatten_dense_tensors_aligned`). Batch 26's held-out audit: a `ZeRO-3`
/// rank's 1.81 GiB of bf16 partitions and 3.61 GiB of fp32 master weights "long lived" (batch
/// 24's: a `ZeRO-Offload` rank's flat fp16 weights "unknown").
fn zero_partition(file: &str, name: &str) -> Option<ZeroPartition> {
    let file = file.replace('\\', "/");
    if !(file.contains("deepspeed/runtime/zero/")
        || file.contains("deepspeed/runtime/bf16_optimizer"))
    {
        return None;
    }
    if name.contains("fp32_partition") || name.contains("fp32_groups") {
        Some(ZeroPartition::Master)
    } else if name.contains("fp16_partitions")
        || name.contains("bit16_partitions")
        || name == "flatten_dense_tensors_aligned"
    {
        Some(ZeroPartition::Weights)
    } else {
        None
    }
}

/// Function names that say KV cache (lower case).
pub(crate) const KV_CACHE: [&str; 11] = [
    "kv_cache",
    // A Chinese team's names: `KV缓存`, `键值缓存` (key-value cache).
    "kv缓存",
    "键值缓存",
    // Beam search's `_reorder_cache(past_key_values, beam_idx)` (Hugging Face's models), whose
    // copies are the next step's cache (batch 25's held-out Marian beam search: 381 MiB of
    // reordered keys and values called temporary).
    "reorder_cache",
    "kvcache",
    "past_key_value",
    "key_cache",
    "value_cache",
    "cache_k",
    "cache_v",
    "allocate_kv",
];

/// Whether `frame` is a Python function whose name (or its file's: `kv_cache.py`) says KV cache
/// and not attention: an attention kernel named for a KV cache (flash-attn's `mha_fwd_kvcache`, its
/// `flash_attn_with_kvcache` wrapper) works on one; what it allocates is its output.
pub(crate) fn names_a_kv_cache(snapshot: &Snapshot, frame: &crate::model::Frame) -> bool {
    if !crate::frames::is_python(snapshot, frame) {
        return false;
    }
    let lower = snapshot.str(frame.name).to_ascii_lowercase();
    // Or its file's name: `allocate` in `kv_cache.py` (batch 21's held-out server).
    let file = snapshot.str(frame.filename);
    let base = file
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(file)
        .to_ascii_lowercase();
    let attention = |s: &str| s.contains("attn") || s.contains("attention");
    // Hugging Face's cache classes (`DynamicCache.update` in `transformers/cache_utils.py`)
    // hold the keys and values of the tokens seen (batch 33's held-out audit: a Llama's
    // 1.03 GiB of `DynamicCache` called activation).
    let transformers_cache = base == "cache_utils.py" && file.contains("transformers");
    !attention(&lower)
        && (KV_CACHE.iter().any(|m| lower.contains(m))
            || transformers_cache
            || !attention(&base) && (base.contains("kv_cache") || base.contains("kvcache")))
}

/// Function names that load a model's weights (`PreTrainedModel.from_pretrained`, vLLM's
/// `load_weights`, a sharded loader's `load_shard`, safetensors' `safe_open`).
pub(crate) const MODEL_LOADING: [&str; 7] = [
    "from_pretrained",
    "load_checkpoint",
    "load_model",
    "load_weights",
    "load_shard",
    "safe_open",
    "load_state_dict",
];

/// Function names that build a model (`_build_model`, timm's `create_model`): what they make and
/// keep is its weights and buffers, as a loader's is (a held-out 2.7B benchmark recorded from
/// `_build_model` on: 12.6 GiB its modules' constructors made, "long lived").
/// PEFT's `prepare_model_for_kbit_training` (and the older `prepare_model_for_int8_training`)
/// casts a quantised model's other weights to fp32: new weight tensors (batch 31's held-out
/// audit: an 8-bit Llama's fp32 embedding and head, 1001 MiB "unknown"). diffusers'
/// `cast_training_params` casts the trainable (adapter) weights to fp32 the same way (batch
/// 36's held-out audit: an image model's 44 MiB of low-rank adapter weights "unknown").
const MODEL_BUILDING: [&str; 4] = [
    "build_model",
    "create_model",
    "prepare_model_for_",
    "cast_training_params",
];

/// Whether a function's name (lower case) says it builds an optimizer: `build_optimizer`,
/// `create_optimizer`, `configure_optimizers`, `setup_optimizer`, `make_optimizer`,
/// `init_optimizer` (a held-out pipeline stage: 6.52 GiB of fp32 master weights made by
/// `build_optimizer`, "unknown"); not one that builds the model too
/// (`setup_model_and_optimizer`: batch 25's held-out audit read a Megatron rank's bf16 weights
/// and gradient buffer, made below it, as 9.09 GiB of optimizer state).
fn builds_an_optimizer(lower_name: &str) -> bool {
    [
        "build_",
        "create_",
        "configure_",
        "setup_",
        "make_",
        "init_",
    ]
    .iter()
    .any(|verb| lower_name.starts_with(verb))
        && lower_name.contains("optim")
        && !lower_name.contains("model")
}

/// Whether a function's name (lower case) says it rewrites an optimizer's tensors: it names the
/// optimizer and a change of its tensors' shape (`cat_tensors_to_optimizer`, `_prune_optimizer`,
/// `replace_tensor_to_optimizer`), not the model (Megatron's `setup_model_and_optimizer` makes
/// the weights); an optimizer built, stepped or loaded is no such change. Batch 32's held-out
/// audit: 3D Gaussian Splatting's densification, which replaces every parameter and both Adam
/// moments with larger tensors each hundred iterations, was read as a backlog leak with queue
/// advice.
fn rewrites_optimizer_tensors(lower_name: &str) -> bool {
    lower_name.contains("optimizer")
        && !lower_name.contains("model")
        && [
            "cat_", "concat", "prune", "replace", "extend", "append", "resize", "grow", "expand",
        ]
        .iter()
        .any(|verb| lower_name.contains(verb))
}

/// Whether a source file's name says it holds an optimizer (`optimizer.py`, `adamw.py`,
/// `my_sgd.py`): its file name, not its folder, so that a project's `optim/` folder of data
/// code is not taken for one.
fn names_an_optimizer(file: &str) -> bool {
    let base = file
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(file)
        .to_ascii_lowercase();
    ["optim", "adam", "sgd", "lamb", "lion", "adafactor", "muon"]
        .iter()
        .any(|word| base.contains(word))
}

/// In a trace with no backward pass, an activation (made in the trace, never freed) that lived
/// through two or more of the low points the allocated curve keeps coming back to
/// ([`crate::detect::steps::recurring_lows`]: requests served, decode steps) was made once and
/// kept while what repeats frees what it makes: long-lived (a cache filled on first use, weights
/// or inputs made in the trace, or a leak), not what one forward pass keeps (batch 21's
/// held-out audit: a server's 23.6 GiB of dequantized weights, cached in its first request and
/// kept through six, were "activations" with autograd advice).
fn kept_through_repetitions(
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) {
    if runs.iter().any(|r| r.phase == Phase::Backward) {
        return;
    }
    let lows = crate::detect::steps::recurring_lows(replay.allocated_bytes()).points;
    for (l, c) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        let Some(alloc) = l.alloc_event else {
            continue;
        };
        if *c == Category::Activation
            && l.free_requested_event.or(l.free_completed_event).is_none()
            && lows.len() - lows.partition_point(|&(e, _)| e <= alloc) >= 2
        {
            *c = Category::LongLived;
        }
    }
}

/// Classifies every lifetime of `device` (see the module doc for the rules).
pub fn classify(snapshot: &Snapshot, device: &Device, replay: &DeviceReplay) -> Categories {
    let mut marks_of: FxHashMap<StackId, StackMarks> = FxHashMap::default();
    let mut marks = |stack: StackId| {
        *marks_of
            .entry(stack)
            .or_insert_with(|| stack_marks(snapshot, stack))
    };
    let engine_thread = stackless_allocations_are_the_engine_s(snapshot, device, &mut marks);
    let mut categories = Categories {
        of_lifetime: Vec::with_capacity(replay.lifetimes.len()),
        runs: phase_runs(snapshot, device, engine_thread, &mut marks),
        backward_by_thread: engine_thread && !frames_show_backward(device, &mut marks),
        autocast: false,
        half_precision_weights: false,
        kept_gradient_blocks: 0,
        kept_gradients_stackless: false,
        optimizer_runs_closure: runs_a_closure(device, &mut marks),
        optimizer_frames: has_optimizer_frames(device, &mut marks),
        casts_by_count: false,
    };
    let (backward_starts, backward_ends) = backward_bounds(&categories.runs);
    let recomputations = recomputations(device, &mut marks);
    let passes = Passes {
        backward_starts: &backward_starts,
        backward_ends: &backward_ends,
        trace_len: device.trace.len() as u32,
        failed: device.trace.action.contains(&Action::Oom),
        recomputations: &recomputations,
    };
    let iteration_ends = iteration_ends(&categories.runs);
    let start = trace_start(device, &categories.runs);
    // Autocast's casts, judged once the parameters are known.
    let mut casts: Vec<usize> = Vec::new();
    // Some block freed by `zero_grad` in the trace: the program sets its gradients to `None`.
    let mut zero_grad_frees = false;
    // Gradients only by their lifetime (made in a backward pass and kept after it): no
    // `AccumulateGrad`, `zero_grad` or owner says so.
    let mut by_lifetime_gradients: Vec<usize> = Vec::new();
    for l in &replay.lifetimes {
        // msMemScope names what each block is for (`owner`): its word beats our guess.
        let named = l
            .alloc_event
            .and_then(|e| snapshot.owner(&device.trace, e as usize))
            .and_then(from_owner);
        // What the stack of the block's free says. A block released by `zero_grad` was a
        // gradient, whatever made it (the backward thread often records no frames; last step's
        // gradients are alive before the trace); one released by autocast's `__exit__` a cast.
        let freed = l
            .free_requested_event
            .or(l.free_completed_event)
            .and_then(|f| device.trace.stack.get(f as usize))
            .map_or_else(StackMarks::default, |&s| marks(s));
        let freed_by_zero_grad = freed.zero_grad;
        zero_grad_frees |= freed_by_zero_grad;
        let m = marks(l.stack);
        let cast = m.autocast_cast || freed.autocast_exit;
        categories.autocast |= cast;
        if cast && named.is_none() && l.alloc_event.is_some() {
            casts.push(categories.of_lifetime.len());
        }
        let told_by_stack =
            named.is_some() || freed_by_zero_grad || m.accumulate_grad || m.grad_buffer;
        let category = named.unwrap_or_else(|| {
            if freed_by_zero_grad && !m.workspace {
                Category::Gradient
            } else {
                lifetime_category(l, m, &categories.runs, passes, &iteration_ends, start)
            }
        });
        if category == Category::Gradient && !told_by_stack {
            by_lifetime_gradients.push(categories.of_lifetime.len());
        }
        categories.of_lifetime.push(category);
    }
    kept_through_repetitions(replay, &categories.runs, &mut categories.of_lifetime);
    workspaces_made_before_the_trace(snapshot, replay, &mut categories.of_lifetime);
    replaced_state(
        replay,
        &categories.runs,
        |stack| marks(stack).optimizer,
        &mut categories.of_lifetime,
    );
    state_from_before_the_trace(
        snapshot,
        device,
        replay,
        &mut marks,
        zero_grad_frees,
        &mut categories,
    );
    autocast_weight_copies(replay, &casts, &mut categories.of_lifetime);
    categories.casts_by_count = casts.is_empty()
        && !some_stack(device, &mut marks, |m| m.native)
        && weight_copies_by_count(replay, &categories.runs, &mut categories.of_lifetime);
    categories.autocast |= categories.casts_by_count;
    replaced_parameters(replay, &categories.runs, &mut categories.of_lifetime);
    trained_inputs(replay, &mut categories.of_lifetime);
    categories.half_precision_weights |= gradients_need_a_weight(
        replay,
        &categories.runs,
        &by_lifetime_gradients,
        &mut categories.of_lifetime,
    );
    last_rules(snapshot, device, replay, &mut categories);
    categories
}

/// The rules that need every other category, in order: every layer's blocks of a forward pass
/// alone, the backward thread's workspace, what a failure's unwind freed, msMemScope's owners.
fn last_rules(
    snapshot: &Snapshot,
    device: &Device,
    replay: &DeviceReplay,
    categories: &mut Categories,
) {
    let (runs, of_lifetime) = (&categories.runs, &mut categories.of_lifetime);
    inputs_of_each_iteration(snapshot, device, replay, runs, of_lifetime);
    layers_kept_without_backward(snapshot, replay, runs, of_lifetime);
    workspaces_of_the_backward_thread(snapshot, replay, runs, of_lifetime);
    held_at_the_failure(device, replay, runs, of_lifetime);
    // Where the trace trains, what it holds from before it without a stack is the model's. An
    // `Optimizer.*` annotation shows an optimizer as the workload line says (a held-out forward
    // in train mode, annotated `Optimizer.zero_grad#AdamW.zero_grad`, was "training" there and
    // its 3.61 GiB of weights "unknown" here).
    let trains = runs.iter().any(|r| r.phase != Phase::Forward)
        || of_lifetime
            .iter()
            .any(|&c| matches!(c, Category::Gradient | Category::OptimizerState))
        || snapshot
            .annotations
            .iter()
            .any(|a| a.name.starts_with("Optimizer."));
    if !trains {
        untraced_weights_need_a_twin(replay, of_lifetime);
    }
    kept_before_the_trace_as_in_it(device, replay, runs, of_lifetime);
    constructed_before_the_trace(snapshot, replay, of_lifetime);
    owners_decide(snapshot, device, replay, runs, of_lifetime);
}

/// A block alive before the trace and never freed in it, of unknown category, whose call stack
/// made blocks in the trace that are retained and never freed, is retained too: the same line
/// kept it earlier, before the recording began (batch 28's held-out audit: three graphs kept
/// with stored exceptions before a ring buffer, 26.4 GiB "unknown" beside the window's two,
/// "retained", from the same 54 stacks). So is one from before the trace that the trace frees
/// where it frees retained blocks made in it, by the same stack (the only one such a block
/// shows): the line that drops each iteration's kept blocks dropped it (batch 30's held-out
/// audit: a Transformer-XL's previous recurrence memory, 572 MiB "unknown" beside the window's,
/// "retained"). And so is one made after the trace's last backward pass and never freed, from a
/// stack whose blocks of earlier iterations are retained: the last iteration's, kept the same
/// way (batch 30's held-out audit: a pruner's last 72 masks, 81.0 MiB "activation" beside the
/// 891 MiB of earlier ones, "retained").
fn kept_before_the_trace_as_in_it(
    device: &Device,
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) {
    let mut kept: FxHashSet<StackId> = FxHashSet::default();
    let mut dropped_by: FxHashSet<StackId> = FxHashSet::default();
    for (l, &c) in replay.lifetimes.iter().zip(of_lifetime.iter()) {
        if c != Category::Retained || l.alloc_event.is_none() || l.stack == NO_STACK {
            continue;
        }
        match l.free_requested_event.or(l.free_completed_event) {
            None => {
                kept.insert(l.stack);
            }
            Some(f) => {
                let by = device.trace.stack[f as usize];
                if by != NO_STACK {
                    dropped_by.insert(by);
                }
            }
        }
    }
    if kept.is_empty() && dropped_by.is_empty() {
        return;
    }
    // The last backward pass's start: a block made after it and never freed met no backward
    // pass, so its lifetime alone does not tell an activation from a kept one.
    let last_backward = backward_starts(runs).last().copied();
    for (l, c) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        let after_the_last_backward = *c == Category::Activation
            && l.free_requested_event.or(l.free_completed_event).is_none()
            && l.alloc_event.zip(last_backward).is_some_and(|(a, b)| a > b);
        if after_the_last_backward && kept.contains(&l.stack) {
            *c = Category::Retained;
            continue;
        }
        let kept_alike = l.spans_the_trace() && kept.contains(&l.stack);
        let dropped_alike = l.alloc_event.is_none()
            && l.free_requested_event.or(l.free_completed_event).is_some()
            && dropped_by.contains(&l.stack);
        if *c == Category::Unknown && (kept_alike || dropped_alike) {
            *c = Category::Retained;
        }
    }
}

/// A block alive before the trace and never freed in it, still unknown when every other rule has
/// spoken, that an object's constructor made (an `__init__` other than a `torch.nn` module's):
/// that object's state, **long-lived**, as one made in the trace and kept through it is (batch
/// 30's held-out audit: a language-model iterator's 687 MiB of training data on the device,
/// "unknown").
fn constructed_before_the_trace(
    snapshot: &Snapshot,
    replay: &DeviceReplay,
    of_lifetime: &mut [Category],
) {
    let mut marks_of: FxHashMap<StackId, bool> = FxHashMap::default();
    for (l, c) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        if *c != Category::Unknown || !l.spans_the_trace() || l.stack == NO_STACK {
            continue;
        }
        let constructed = *marks_of
            .entry(l.stack)
            .or_insert_with(|| stack_marks(snapshot, l.stack).constructor);
        if constructed {
            *c = Category::LongLived;
        }
    }
}

/// In a trace that shows no training, a block alive before the trace, never freed and without a
/// stack is a weight only where the trace shows something of its size that a weight has: an
/// autocast copy of half its size, or a parameter made in the trace (or a gradient or optimizer
/// state of its size). Else it is unknown: a serving engine's KV cache (a held-out vLLM trace:
/// 32 blocks of 236 MiB, one per layer, made before recording began) looks the same.
fn untraced_weights_need_a_twin(replay: &DeviceReplay, of_lifetime: &mut [Category]) {
    let mut twins: FxHashSet<u64> = FxHashSet::default();
    for (l, &c) in replay.lifetimes.iter().zip(of_lifetime.iter()) {
        match c {
            Category::Gradient | Category::OptimizerState => {
                twins.insert(l.requested_size_bytes);
            }
            Category::WeightCopy => {
                twins.insert(l.requested_size_bytes.saturating_mul(2));
            }
            Category::Parameter if !untraced_weight(l, c) => {
                twins.insert(l.requested_size_bytes);
            }
            _ => {}
        }
    }
    // Where autocast's copies are twins of most of them (two thirds of their bytes or more), the
    // program casts its weights, and what autocast leaves in fp32 (embeddings, norms) is weights
    // too (batch 30's held-out audit: a ColBERT encoder's word and position embeddings, 91 MiB
    // "unknown" beside 327 MiB of weights).
    let copies = of_lifetime.contains(&Category::WeightCopy);
    let (mut twinned_bytes, mut untraced_bytes) = (0u64, 0u64);
    for (l, &c) in replay.lifetimes.iter().zip(of_lifetime.iter()) {
        if untraced_weight(l, c) {
            untraced_bytes += l.requested_size_bytes;
            if twins.contains(&l.requested_size_bytes) {
                twinned_bytes += l.requested_size_bytes;
            }
        }
    }
    if copies && twinned_bytes * 3 >= untraced_bytes * 2 {
        return;
    }
    for (l, c) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        if untraced_weight(l, *c) && !twins.contains(&l.requested_size_bytes) {
            *c = Category::Unknown;
        }
    }
}

/// Whether some event's stack has an optimizer's frame (a step, one running a closure) or a
/// `zero_grad`.
fn has_optimizer_frames(device: &Device, marks: &mut impl FnMut(StackId) -> StackMarks) -> bool {
    device.trace.stack.iter().any(|&stack| {
        let m = marks(stack);
        m.optimizer || m.closure_in_optimizer || m.zero_grad
    })
}

/// Whether some allocation of the trace ran inside an optimizer's step through a closure.
fn runs_a_closure(device: &Device, marks: &mut impl FnMut(StackId) -> StackMarks) -> bool {
    let trace = &device.trace;
    (0..trace.len())
        .any(|i| trace.action[i] == Action::Alloc && marks(trace.stack[i]).closure_in_optimizer)
}

/// Whether some event's stack has the mark `marked` picks.
fn some_stack(
    device: &Device,
    marks: &mut impl FnMut(StackId) -> StackMarks,
    marked: impl Fn(StackMarks) -> bool,
) -> bool {
    device.trace.stack.iter().any(|&stack| marked(marks(stack)))
}

/// Whether some allocation of the trace is Adam's or `AdamW`'s (its frames say so).
fn runs_adam(device: &Device, marks: &mut impl FnMut(StackId) -> StackMarks) -> bool {
    let trace = &device.trace;
    (0..trace.len()).any(|i| trace.action[i] == Action::Alloc && marks(trace.stack[i]).adam)
}

/// Gradients and optimizer state among the stackless blocks from before the trace taken for
/// weights: last step's gradients where `zero_grad` does not free them; Adam's two moments per
/// weight where the trace runs Adam, else one state per weight where `zero_grad` frees the
/// gradients.
fn state_from_before_the_trace(
    snapshot: &Snapshot,
    device: &Device,
    replay: &DeviceReplay,
    marks: &mut impl FnMut(StackId) -> StackMarks,
    zero_grad_frees: bool,
    categories: &mut Categories,
) {
    // `zero_grad(set_to_none=True)` frees every gradient, so none is carried into the next
    // step: the pairs of weight-sized blocks from before the trace are something else.
    // An Adam step the annotations name but no frame shows (fused or foreach) made no state
    // the trace can see: its moments can only be among the blocks from before it.
    let adam = runs_adam(device, marks)
        || annotates_adam(snapshot) && !categories.of_lifetime.contains(&Category::OptimizerState);
    if !zero_grad_frees {
        // A backward pass the trace begins inside is only part of one (a ring buffer's).
        let first_alloc = (0..device.trace.len())
            .find(|&i| device.trace.action[i] == Action::Alloc)
            .unwrap_or(0) as u32;
        let whole_passes: Vec<PhaseRun> = categories
            .runs
            .iter()
            .copied()
            .filter(|r| r.start > first_alloc)
            .collect();
        let (gradients, beside, stackless) = gradients_kept_from_an_earlier_step(
            replay,
            &whole_passes,
            adam,
            &mut categories.of_lifetime,
        );
        categories.kept_gradient_blocks = gradients;
        categories.kept_gradients_stackless = stackless;
        // What is kept beside each weight and its gradient has been judged.
        if beside {
            return;
        }
    }
    if adam {
        categories.half_precision_weights |=
            adam_moments_before_the_trace(replay, &categories.runs, &mut categories.of_lifetime);
        adam_state_is_made_by_init_group(replay, marks, &mut categories.of_lifetime);
    } else if zero_grad_frees {
        momentum_before_the_trace(replay, &categories.runs, &mut categories.of_lifetime);
    }
}

/// Whether the profiler's annotations name an Adam step (`Optimizer.step#AdamW.step`): a fused
/// or foreach step that allocates nothing shows its class only there (batch 18's held-out audit:
/// a mixture of experts under fused `AdamW`, whose weights from before the trace come in threes
/// per size, was read as weights and SGD-like momentum, the two swapped).
fn annotates_adam(snapshot: &Snapshot) -> bool {
    snapshot.annotations.iter().any(|a| {
        a.name
            .strip_prefix("Optimizer.step#")
            .and_then(|rest| rest.split('.').next())
            .is_some_and(|class| ADAM_CLASSES.contains(&class))
    })
}

/// Optimizers that keep two moments of each weight's size, as `torch.optim` names them.
const ADAM_CLASSES: [&str; 5] = ["Adam", "AdamW", "NAdam", "RAdam", "Adamax"];

/// msMemScope's owners have the last word where the recording's owners name model state:
/// msMemScope tags every weight, gradient and optimizer state tensor it finds at an optimizer
/// step (`PTA@model@weight`, `PTA@model@gradient`, `PTA@model@optimizer_state`), so a pool
/// block it left as `PTA` or an operator's (`PTA@ops@aten`) is none of them, whatever the stack
/// that made it suggests (a backward operator's activation gradient is not a weight's
/// gradient). Such a block is a temporary where the phase that made it also freed it, else an
/// activation. A recording whose owners name no model state at all says nothing either way.
fn owners_decide(
    snapshot: &Snapshot,
    device: &Device,
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) {
    let owner_of = |l: &Lifetime| {
        l.alloc_event
            .and_then(|e| snapshot.owner(&device.trace, e as usize))
    };
    let names_model_state = replay
        .lifetimes
        .iter()
        .filter_map(owner_of)
        .filter_map(from_owner)
        .any(Category::is_model_state);
    if !names_model_state {
        return;
    }
    for (l, category) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        let Some(owner) = owner_of(l) else {
            continue;
        };
        if let Some(named) = from_owner(owner) {
            *category = named;
        } else if is_pool_owner(owner) {
            let alloc = l.alloc_event.unwrap_or(0);
            let freed = l.free_requested_event.or(l.free_completed_event);
            let run = run_at(runs, alloc);
            // Kept from a backward pass beyond the weights' count, unknown by its lifetime:
            // the owner says it is no gradient either.
            let kept_from_backward =
                *category == Category::Unknown && run.is_some_and(|r| r.phase == Phase::Backward);
            if !category.is_model_state() && !kept_from_backward {
                continue;
            }
            *category = match (run, freed) {
                (Some(run), Some(f)) if f < run.end => Category::Temporary,
                _ => Category::Activation,
            };
        }
    }
}

/// Whether `owner` is a caching pool's (`PTA`, `ATB`, `MINDSPORE`), whose blocks
/// msMemScope's optimizer-step hook tags; `CANN@…` memory is the runtime's, never tagged.
fn is_pool_owner(owner: &str) -> bool {
    matches!(
        crate::owner::at_depth(owner, 1),
        "PTA" | "ATB" | "MINDSPORE"
    )
}

/// Blocks a forward pass made and still held when an allocation failed (`oom`), freed only after
/// it: the exception's unwind freed them, not their own phase, so they are what the pass held
/// (activations), not temporaries (`cuda_4gpu_expandable_oom`: device 1's `update_nodes`
/// tensors, activations on device 2 where no failure freed them).
fn held_at_the_failure(
    device: &Device,
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) {
    let Some(oom) = device.trace.action.iter().position(|&a| a == Action::Oom) else {
        return;
    };
    let oom = oom as u32;
    let in_forward = |e: u32| {
        runs.iter()
            .all(|r| !(r.start <= e && e < r.end) || r.phase == Phase::Forward)
    };
    for (l, c) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        let freed = l.free_requested_event.or(l.free_completed_event);
        // A block held long enough to be unknown, made in that pass, was what it held too.
        if matches!(*c, Category::Temporary | Category::Unknown)
            && l.alloc_event.is_some_and(|a| a < oom && in_forward(a))
            && freed.is_some_and(|f| f > oom)
        {
            *c = Category::Activation;
        }
    }
}

/// Optimizer state from before the trace that a trace beginning inside an optimizer step sees
/// freed in that step, where the step has already made a block of the same size that it keeps:
/// the new moment replacing the old (`state["exp_avg"] = beta1 * exp_avg + …`, or a new
/// per-parameter list), not a temporary. A temporary of the step is freed without a kept block
/// of its size before it. (Freed once the trace has left that step, it is state by
/// `before_the_trace` already.)
fn replaced_state(
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    mut is_optimizer: impl FnMut(StackId) -> bool,
    of_lifetime: &mut [Category],
) {
    let Some(first) = runs.first().filter(|r| r.phase == Phase::Optimizer) else {
        return;
    };
    // Kept blocks the first step made: size → its first such allocation.
    let mut kept: FxHashMap<u64, u32> = FxHashMap::default();
    for (l, &c) in replay.lifetimes.iter().zip(of_lifetime.iter()) {
        if c == Category::OptimizerState
            && let Some(alloc) = l.alloc_event.filter(|&e| e >= first.start && e < first.end)
        {
            let at = kept.entry(l.requested_size_bytes).or_insert(alloc);
            *at = (*at).min(alloc);
        }
    }
    if kept.is_empty() {
        return;
    }
    for (l, c) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        let freed = l.free_requested_event.or(l.free_completed_event);
        // Taken for the step's temporary, or unknown where the trace does not begin inside
        // that step (`before_the_trace`).
        if matches!(*c, Category::Temporary | Category::Unknown)
            && l.alloc_event.is_none()
            && freed.is_some_and(|f| {
                f < first.end
                    && kept
                        .get(&l.requested_size_bytes)
                        .is_some_and(|&made| made < f)
            })
            && is_optimizer(l.stack)
        {
            *c = Category::OptimizerState;
        }
    }
}

/// Tensors the optimizer trains that no weight accounts for: where optimizer state and a
/// gradient of some size exist but no parameter of that size, the blocks of that size made in a
/// forward pass and held past their iteration (`retained`) are what it trains: an input being
/// optimised (counterfactuals, adversarial examples, style transfer). `cuda_cppframes_snapshotevents`
/// trains one 7.5 MiB image with `Adam` (two 7.5 MiB state blocks, a 7.5 MiB gradient) while its
/// model's weights are frozen. One per two state blocks (Adam's `exp_avg`, `exp_avg_sq`), at
/// least one, the earliest made first; which of several same-size blocks is trained the trace
/// cannot tell.
fn trained_inputs(replay: &DeviceReplay, of_lifetime: &mut [Category]) {
    let mut state: FxHashMap<u64, usize> = FxHashMap::default();
    let mut weights: rustc_hash::FxHashSet<u64> = rustc_hash::FxHashSet::default();
    let mut gradients: rustc_hash::FxHashSet<u64> = rustc_hash::FxHashSet::default();
    for (l, &c) in replay.lifetimes.iter().zip(of_lifetime.iter()) {
        match c {
            Category::OptimizerState => *state.entry(l.requested_size_bytes).or_default() += 1,
            Category::Parameter => {
                weights.insert(l.requested_size_bytes);
            }
            Category::Gradient => {
                gradients.insert(l.requested_size_bytes);
            }
            _ => {}
        }
    }
    state.retain(|size, _| !weights.contains(size) && gradients.contains(size));
    if state.is_empty() {
        return;
    }
    let mut retained: Vec<(u32, usize)> = replay
        .lifetimes
        .iter()
        .zip(of_lifetime.iter())
        .enumerate()
        .filter(|(_, (l, c))| {
            matches!(**c, Category::Retained | Category::LongLived)
                && state.contains_key(&l.requested_size_bytes)
        })
        .filter_map(|(id, (l, _))| Some((l.alloc_event?, id)))
        .collect();
    retained.sort_unstable();
    for (_, id) in retained {
        let size = replay.lifetimes[id].requested_size_bytes;
        let Some(left) = state.get_mut(&size).filter(|n| **n > 0) else {
            continue;
        };
        // Two state blocks per trained tensor (Adam); one (SGD's momentum) still trains one.
        *left = left.saturating_sub(2);
        of_lifetime[id] = Category::Parameter;
    }
}

/// What the training loop puts on the device for an iteration before the model runs: made by a
/// stack with Python frames that neither calls the model nor steps an optimizer, builds an
/// object, loads weights or names a cache or workspace, made in the function that then calls the
/// model (the loop) or a helper it calls (`cast_data`, `to_devices`: batch 25's held-out audit);
/// after the previous backward pass ended and before
/// the iteration's first allocation that calls the model; still alive when that allocation is
/// made; freed before the backward pass after the next (a batch is dropped when the next one
/// replaces it) or before its line makes the batch after the next (a GAN's iteration runs two
/// backward passes), or kept where no later backward pass is recorded or its line makes no later
/// batch, and only where no other block
/// of its line is kept longer (a line whose blocks pile up is a buffer or a leak, not the loop's
/// inputs). Batch 23's held-out audit: a video clip's 551 MiB on the device (fp32 and its fp16
/// copy, made in `train_one_epoch`) counted as activations; a DQN's 832 KiB of states as
/// "retained". An iteration whose forward pass failed (an out-of-memory error) ends at the
/// failure.
fn inputs_of_each_iteration(
    snapshot: &Snapshot,
    device: &Device,
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) {
    let (backward_starts, backward_ends) = backward_bounds(runs);
    let failure = device
        .trace
        .action
        .iter()
        .position(|&a| a == Action::Oom)
        .map(|e| e as u32);
    if backward_starts.is_empty() && failure.is_none() {
        return;
    }
    let mut marks_of: FxHashMap<StackId, StackMarks> = FxHashMap::default();
    let mut marks = |stack: StackId| {
        *marks_of
            .entry(stack)
            .or_insert_with(|| stack_marks(snapshot, stack))
    };
    let model_allocs = model_allocations(replay, &mut marks);
    let mut callers: FxHashMap<StackId, bool> = FxHashMap::default();
    let mut has_caller = |stack: StackId| {
        *callers
            .entry(stack)
            .or_insert_with(|| shows_the_model_s_caller(snapshot, stack))
    };
    // By stack: the candidates; the stacks of which one was kept past its time; and the
    // candidates freed after the backward pass after the next (or never), each with its free.
    let mut by_stack: FxHashMap<StackId, Vec<usize>> = FxHashMap::default();
    let mut kept_too_long: FxHashSet<StackId> = FxHashSet::default();
    let mut replaced_late: Vec<(usize, u32)> = Vec::new();
    for (id, (l, c)) in replay.lifetimes.iter().zip(of_lifetime.iter()).enumerate() {
        if !matches!(
            c,
            Category::Activation | Category::Retained | Category::Unknown | Category::Temporary
        ) || l.stack == NO_STACK
        {
            continue;
        }
        let Some(alloc) = l.alloc_event else {
            continue;
        };
        if !made_by_the_loop_alone(marks(l.stack)) {
            continue;
        }
        // The iteration's backward pass: the first to start after the block was made; or the
        // allocation that failed in its forward pass, which ended the trace before it.
        let k = backward_starts.partition_point(|&s| s <= alloc);
        let Some(next_backward) = backward_starts
            .get(k)
            .copied()
            .or(failure.filter(|&f| f > alloc))
        else {
            continue;
        };
        let previous_end = k.checked_sub(1).map_or(0, |j| backward_ends[j]);
        let next_model = model_allocs.partition_point(|&(e, _, _)| e <= alloc);
        let Some(&(forward, _, _)) = model_allocs.get(next_model) else {
            continue;
        };
        // The first of the forward pass's allocations whose stack shows what called the model:
        // `nn.DataParallel` runs each replica on a thread of its own, whose stacks begin at
        // `parallel_apply`'s worker (batch 29's held-out audit: a 73.5 MiB batch,
        // "activation").
        let Some(forward_stack) = model_allocs[next_model..]
            .iter()
            .take_while(|&&(e, _, _)| e < next_backward)
            .find(|&&(_, s, _)| has_caller(s))
            .map(|&(_, s, _)| s)
        else {
            continue;
        };
        // Made while something the model made since the last backward pass is alive: inside
        // the forward pass, not before it. A pass of the model that freed all it made (a
        // validation run between two training steps) is not this iteration's (batch 29's
        // held-out audit: the batch of the step after a sliding-window validation,
        // "activation").
        let forward_already_began = model_allocs[..next_model]
            .iter()
            .rev()
            .take_while(|&&(e, _, _)| e >= previous_end)
            .any(|&(_, _, freed)| freed > alloc);
        if alloc < previous_end || forward >= next_backward || forward_already_began {
            continue;
        }
        let freed = l.free_requested_event.or(l.free_completed_event);
        // Made by a helper the loop calls: only where the program itself drops it (a free with
        // Python frames, none of a backward pass). Autograd frees what it saved in the backward
        // pass that uses it, on a thread without Python (a public benchmark's hand-written
        // attention, called by the loop's `measure` without a module: its 8 GiB softmax output
        // and 64 MiB result, freed by autograd's engine, are no input).
        let by_helper = match the_loop_calls_the_model(snapshot, l.stack, forward_stack) {
            Some(LoopFrame::Innermost) => false,
            Some(LoopFrame::Helper) => true,
            None => continue,
        };
        if by_helper && !dropped_by_the_program(snapshot, device, freed, &mut marks) {
            continue;
        }
        let dropped_in_time = match (freed, backward_starts.get(k + 1)) {
            (Some(f), _) if f <= forward => continue,
            (Some(f), Some(&after_next)) => f < after_next,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        if !dropped_in_time {
            // Never freed: kept to the trace's end.
            replaced_late.push((id, freed.unwrap_or(u32::MAX)));
        }
        by_stack.entry(l.stack).or_default().push(id);
    }
    kept_too_long.extend(replaced_too_late(replay, &backward_starts, &replaced_late));
    for (stack, ids) in by_stack {
        if !kept_too_long.contains(&stack) {
            for id in ids {
                of_lifetime[id] = Category::Input;
            }
        }
    }
}

/// The model's allocations in trace order: when, by what stack, and when freed (`u32::MAX`:
/// never).
fn model_allocations(
    replay: &DeviceReplay,
    marks: &mut impl FnMut(StackId) -> StackMarks,
) -> Vec<(u32, StackId, u32)> {
    let mut allocs: Vec<(u32, StackId, u32)> = replay
        .lifetimes
        .iter()
        .filter(|l| l.stack != NO_STACK && marks(l.stack).runs_the_model)
        .filter_map(|l| {
            let freed = l.free_requested_event.or(l.free_completed_event);
            Some((l.alloc_event?, l.stack, freed.unwrap_or(u32::MAX)))
        })
        .collect();
    allocs.sort_unstable();
    allocs
}

/// Whether `stack` shows what called the model: a Python frame outside its outermost module call
/// (`_call_impl`) other than a thread's (a replica run on `parallel_apply`'s worker thread).
fn shows_the_model_s_caller(snapshot: &Snapshot, stack: StackId) -> bool {
    let frames: Vec<&crate::model::Frame> = snapshot.stack_frames(stack).collect();
    let Some(outermost_call) = frames
        .iter()
        .rposition(|f| matches!(snapshot.str(f.name), "_call_impl" | "_wrapped_call_impl"))
    else {
        return false;
    };
    frames[outermost_call + 1..]
        .iter()
        .find(|f| crate::frames::is_python(snapshot, f))
        .is_some_and(|f| {
            let file = snapshot.str(f.filename);
            !(file.ends_with("threading.py") || file.ends_with("parallel_apply.py"))
        })
}

/// Whether `frame` is a comprehension's (`<listcomp>`, `<genexpr>`, …): part of the function it
/// is written in.
fn is_comprehension(snapshot: &Snapshot, frame: &crate::model::Frame) -> bool {
    matches!(
        snapshot.str(frame.name),
        "<listcomp>" | "<genexpr>" | "<dictcomp>" | "<setcomp>"
    )
}

/// Of the candidate inputs freed after the backward pass after the next (or never: `u32::MAX`),
/// the stacks of those that were not replaced in time either.
fn replaced_too_late(
    replay: &DeviceReplay,
    backward_starts: &[u32],
    replaced_late: &[(usize, u32)],
) -> FxHashSet<StackId> {
    // Freed after the backward pass after the next (or never), but before its line made the
    // batch after the next one: replaced by the next iteration's batch all the same (or the
    // trace's last), where an iteration runs more than one backward pass (batch 26's pix2pix:
    // `set_input` keeps the pair of images as attributes until the next pair replaces them,
    // across the discriminator's and the generator's backward passes; they were "retained").
    let late_stacks: FxHashSet<StackId> = replaced_late
        .iter()
        .map(|&(id, _)| replay.lifetimes[id].stack)
        .collect();
    let mut allocs_of: FxHashMap<StackId, Vec<u32>> = FxHashMap::default();
    for l in replay
        .lifetimes
        .iter()
        .filter(|l| late_stacks.contains(&l.stack))
    {
        if let Some(alloc) = l.alloc_event {
            allocs_of.entry(l.stack).or_default().push(alloc);
        }
    }
    let mut too_late: FxHashSet<StackId> = FxHashSet::default();
    for allocs in allocs_of.values_mut() {
        allocs.sort_unstable();
    }
    for &(id, freed) in replaced_late {
        let l = &replay.lifetimes[id];
        let replaced_in_time =
            l.alloc_event
                .zip(allocs_of.get(&l.stack))
                .is_some_and(|(alloc, allocs)| {
                    replaced_before_the_batch_after_next(allocs, backward_starts, alloc, freed)
                    // Kept to the end: the last of a line that makes a batch each iteration,
                    // not a block the loop made once and keeps.
                    && (freed != u32::MAX || made_more_than_one_batch(allocs, backward_starts))
                });
        if !replaced_in_time {
            too_late.insert(l.stack);
        }
    }
    too_late
}

/// Whether a block its line made at `alloc` was freed (at `freed`) before the line made the
/// batch after the next: of the line's allocations (`allocs`, sorted), those with no backward pass
/// starting between them are one batch (an image and its label, made by one helper).
fn replaced_before_the_batch_after_next(
    allocs: &[u32],
    backward_starts: &[u32],
    alloc: u32,
    freed: u32,
) -> bool {
    let backward_passes_before = |e: u32| backward_starts.partition_point(|&s| s <= e);
    let mut batches_after = 0;
    let mut previous = alloc;
    for &a in &allocs[allocs.partition_point(|&a| a <= alloc)..] {
        if a > freed {
            break;
        }
        if backward_passes_before(a) != backward_passes_before(previous) {
            batches_after += 1;
            if batches_after == 2 {
                return false;
            }
        }
        previous = a;
    }
    true
}

/// Whether a line's allocations (`allocs`, sorted) have a backward pass starting between them.
fn made_more_than_one_batch(allocs: &[u32], backward_starts: &[u32]) -> bool {
    let backward_passes_before = |e: u32| backward_starts.partition_point(|&s| s <= e);
    match (allocs.first(), allocs.last()) {
        (Some(&first), Some(&last)) => {
            backward_passes_before(first) != backward_passes_before(last)
        }
        _ => false,
    }
}

/// Whether a stack's marks leave it to the loop around the model: nothing calls the model, runs
/// a backward pass or an optimizer, builds an object, loads weights, names a cache or a
/// workspace, or casts for autocast.
fn made_by_the_loop_alone(m: StackMarks) -> bool {
    !(m.runs_the_model
        || m.backward
        || m.optimizer
        || m.closure_in_optimizer
        || m.constructor
        || m.optimizer_constructor
        || m.model_load
        || m.parameter_init
        || m.kv_cache
        || m.workspace
        || m.communication
        || m.accumulate_grad
        || m.autocast_cast
        || m.recompute)
}

/// Whether `stack`'s innermost Python function, or, where that function's name says it moves
/// data, one further out, is one of the callers of the model in `model_stack` (file and name):
/// a frame outside its outermost module call (`_call_impl`). The loop, or a helper it calls to
/// move the batch.
fn the_loop_calls_the_model(
    snapshot: &Snapshot,
    stack: StackId,
    model_stack: StackId,
) -> Option<LoopFrame> {
    let frames: Vec<&crate::model::Frame> = snapshot.stack_frames(model_stack).collect();
    let outermost_call = frames
        .iter()
        .rposition(|f| matches!(snapshot.str(f.name), "_call_impl" | "_wrapped_call_impl"))?;
    let callers = &frames[outermost_call + 1..];
    let calls = |made_in: &crate::model::Frame| {
        callers
            .iter()
            .any(|f| f.filename == made_in.filename && f.name == made_in.name)
    };
    // The innermost Python function (a script's `<module>` too, where the loop is written at
    // the top level), or, for a helper named for moving data, any function further out (the
    // script's top level too: pix2pix's `set_input`, called from `train.py`'s loop).
    // A comprehension is part of the function it is written in (batch 29's held-out audit: a
    // U-Net's deep-supervision targets, `[t.npu() for t in targets]`, "activation").
    let mut python = snapshot
        .stack_frames(stack)
        .filter(|f| crate::frames::is_python(snapshot, f) && !is_comprehension(snapshot, f));
    let innermost = python.next()?;
    if calls(innermost) {
        Some(LoopFrame::Innermost)
    } else if moves_data(snapshot.str(innermost.name)) && python.any(calls) {
        Some(LoopFrame::Helper)
    } else {
        None
    }
}

/// Whether a function's name says it moves or prepares a batch (`cast_data`, `to_devices`,
/// `send_to_device`, `to_tensor`, `collate`, `搬到设备`): a helper the loop calls for its
/// inputs, not a computation of its own (a public benchmark's `scaled_dot_product_attention`,
/// called by the loop without a module, makes the attention's result).
fn moves_data(name: &str) -> bool {
    const WORDS: [&str; 14] = [
        "to", "cuda", "npu", "device", "devices", "cast", "data", "batch", "input", "inputs",
        "tensor", "collate", "prepare", "transfer",
    ];
    const CJK: [&str; 4] = ["设备", "数据", "输入", "批"];
    let lower = name.to_lowercase();
    // `batch_norm`, `layer_norm`: computations, whatever else their names say.
    if lower.contains("norm") {
        return false;
    }
    lower
        .split(|c: char| !c.is_alphanumeric())
        .flat_map(|w| w.split('_'))
        .any(|w| WORDS.contains(&w))
        || CJK.iter().any(|c| name.contains(c))
}

/// Where a block the loop may have made was made: in the loop's own function, or in a helper
/// the loop calls.
enum LoopFrame {
    Innermost,
    Helper,
}

/// Whether the free at `freed` is the program's own: a stack with Python frames, none of a
/// backward pass (or the block is never freed).
fn dropped_by_the_program(
    snapshot: &Snapshot,
    device: &Device,
    freed: Option<u32>,
    marks: &mut impl FnMut(StackId) -> StackMarks,
) -> bool {
    let Some(f) = freed else {
        return true;
    };
    let stack = device.trace.stack[f as usize];
    stack != NO_STACK
        && !marks(stack).backward
        && snapshot
            .stack_frames(stack)
            .any(|frame| crate::frames::is_python(snapshot, frame))
}

/// Blocks an optimizer step made and kept where that step freed parameters of their size: the
/// weights' new tensors (a hand-written optimizer's `p.data = p.data - lr * …`), not state. Steps
/// are taken in order, so a weight replaced again in the next step stays a weight; per size, as
/// many blocks as the step freed parameters, the earliest made first.
fn replaced_parameters(replay: &DeviceReplay, runs: &[PhaseRun], of_lifetime: &mut [Category]) {
    let steps: Vec<PhaseRun> = runs
        .iter()
        .copied()
        .filter(|r| r.phase == Phase::Optimizer)
        .collect();
    let step_of = |e: u32| run_index_at(&steps, e);
    // Per step: the lifetimes it freed, and those it made and kept (in order made).
    let mut freed_in: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    let mut kept_from: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (id, l) in replay.lifetimes.iter().enumerate() {
        let freed = l.free_requested_event.or(l.free_completed_event);
        let freed_step = freed.and_then(step_of);
        if let Some(k) = freed_step {
            freed_in[k].push(id);
        }
        if let Some(k) = l.alloc_event.and_then(step_of)
            && freed_step != Some(k)
        {
            kept_from[k].push(id);
        }
    }
    for (freed, kept) in freed_in.iter().zip(&mut kept_from) {
        let mut weights: FxHashMap<u64, usize> = FxHashMap::default();
        for &id in freed {
            if of_lifetime[id] == Category::Parameter {
                *weights
                    .entry(replay.lifetimes[id].requested_size_bytes)
                    .or_default() += 1;
            }
        }
        if weights.is_empty() {
            continue;
        }
        kept.sort_unstable_by_key(|&id| replay.lifetimes[id].alloc_event);
        for &id in kept.iter() {
            let size = replay.lifetimes[id].requested_size_bytes;
            if of_lifetime[id] == Category::OptimizerState
                && let Some(left) = weights.get_mut(&size).filter(|n| **n > 0)
            {
                *left -= 1;
                of_lifetime[id] = Category::Parameter;
            }
        }
    }
}

/// What a weight may be where the stack does not say: the blocks a gradient can belong to.
pub(crate) fn may_be_a_weight(c: Category) -> bool {
    matches!(
        c,
        Category::Parameter | Category::LongLived | Category::Unknown | Category::Retained
    )
}

/// A gradient has its weight's size, and a backward pass makes at most one per weight: of the
/// blocks taken for gradients only by their lifetime (made in a backward pass, kept after it),
/// those beyond the blocks of their size that may be weights (alive when the pass starts) are
/// not known to be gradients — outputs a backward hook keeps, an input's gradient, a
/// communication bucket — and are unknown. A gradient total above the weights is no finding.
/// Gradients may also be fp32 ones of 16-bit weights, at twice a weight's size
/// ([`gradients_allowed`]): true where some are (the weights are then 16-bit).
fn gradients_need_a_weight(
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    by_lifetime: &[usize],
    of_lifetime: &mut [Category],
) -> bool {
    let backward: Vec<PhaseRun> = runs
        .iter()
        .copied()
        .filter(|r| r.phase == Phase::Backward)
        .collect();
    let run_of = |e: u32| run_index_at(&backward, e);
    // Per (pass, size): the gradients by lifetime, in the order made.
    let mut made: FxHashMap<(usize, u64), Vec<usize>> = FxHashMap::default();
    for &id in by_lifetime {
        let l = &replay.lifetimes[id];
        if of_lifetime[id] != Category::Gradient {
            continue;
        }
        if let Some(k) = l.alloc_event.and_then(run_of) {
            made.entry((k, l.requested_size_bytes))
                .or_default()
                .push(id);
        }
    }
    if made.is_empty() {
        return false;
    }
    // Per size, the passes that made such gradients of it.
    let mut passes_of: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
    for &(k, size) in made.keys() {
        passes_of.entry(size).or_default().push(k);
    }
    // Per (pass, size): the blocks that may be weights alive as the pass starts, of a size its
    // gradients have or half of one (a 16-bit weight's fp32 gradient).
    let mut weights: FxHashMap<(usize, u64), usize> = FxHashMap::default();
    for (l, &c) in replay.lifetimes.iter().zip(of_lifetime.iter()) {
        let size = l.requested_size_bytes;
        if !may_be_a_weight(c) {
            continue;
        }
        let mut passes: Vec<usize> = [size, size.saturating_mul(2)]
            .iter()
            .filter_map(|s| passes_of.get(s))
            .flatten()
            .copied()
            .collect();
        if passes.is_empty() {
            continue;
        }
        passes.sort_unstable();
        passes.dedup();
        let freed = l.free_requested_event.or(l.free_completed_event);
        for k in passes {
            let start = backward[k].start;
            if l.alloc_event.is_none_or(|a| a < start) && freed.is_none_or(|f| f > start) {
                *weights.entry((k, size)).or_default() += 1;
            }
        }
    }
    let allowed = fp32_gradients_of_sixteen_bit_weights(&made, &weights);
    let doubled = made.iter().any(|(key, ids)| {
        allowed.get(key).copied().unwrap_or(0)
            > ids.len().min(weights.get(key).copied().unwrap_or(0))
    });
    for (key, mut ids) in made {
        let allowed = allowed.get(&key).copied().unwrap_or(0);
        ids.sort_by_key(|&id| replay.lifetimes[id].alloc_event);
        for &id in ids.iter().skip(allowed) {
            of_lifetime[id] = Category::Unknown;
        }
    }
    doubled
}

/// How many blocks there are of each size.
type CountBySize = FxHashMap<u64, usize>;

/// How many of the gradients each backward pass made of each size (`made`, per (pass, size))
/// are gradients, given the blocks that may be weights alive as each pass starts (`weights`):
/// [`gradients_allowed`] pass by pass.
fn fp32_gradients_of_sixteen_bit_weights(
    made: &FxHashMap<(usize, u64), Vec<usize>>,
    weights: &FxHashMap<(usize, u64), usize>,
) -> FxHashMap<(usize, u64), usize> {
    // Per pass: its gradients' and its weights' counts by size.
    let mut passes: FxHashMap<usize, (CountBySize, CountBySize)> = FxHashMap::default();
    for (&(k, size), ids) in made {
        passes.entry(k).or_default().0.insert(size, ids.len());
    }
    for (&(k, size), &n) in weights {
        if let Some(pass) = passes.get_mut(&k) {
            pass.1.insert(size, n);
        }
    }
    passes
        .into_iter()
        .flat_map(|(k, (gradients, weights))| {
            gradients_allowed(&gradients, &weights)
                .into_iter()
                .map(move |(size, n)| ((k, size), n))
        })
        .collect()
}

/// How many of the `gradients` of each size can be gradients, given the blocks of each size
/// that may be weights: one per weight of the same size; and, where the gradients beyond those
/// are fp32 gradients of 16-bit weights (twice the size of weights left without one, for 90 %
/// of their bytes or more, and for half those weights' bytes or more), one per such weight too. Batch 23's held-out audit: a bf16 T5
/// accumulating fp32 gradients (257 blocks, 850 MiB, one per weight at twice its size, kept
/// through the optimizer step) had them "unknown" and 3 KiB of gradients.
pub(crate) fn gradients_allowed(
    gradients: &FxHashMap<u64, usize>,
    weights: &FxHashMap<u64, usize>,
) -> FxHashMap<u64, usize> {
    let mut allowed: FxHashMap<u64, usize> = FxHashMap::default();
    // Weights left without a gradient of their own size, and gradients beyond the weights.
    let mut unmatched: FxHashMap<u64, usize> = weights.clone();
    let mut beyond: Vec<(u64, usize)> = Vec::new();
    for (&size, &n) in gradients {
        let same = n.min(weights.get(&size).copied().unwrap_or(0));
        allowed.insert(size, same);
        if let Some(left) = unmatched.get_mut(&size) {
            *left -= same;
        }
        if n > same {
            beyond.push((size, n - same));
        }
    }
    let beyond_bytes: u64 = beyond
        .iter()
        .map(|&(size, n)| size.saturating_mul(n as u64))
        .fold(0, u64::saturating_add);
    let doubles: Vec<(u64, usize)> = beyond
        .iter()
        .filter(|&&(size, _)| size.is_multiple_of(2))
        .map(|&(size, n)| {
            (
                size,
                n.min(unmatched.get(&(size / 2)).copied().unwrap_or(0)),
            )
        })
        .filter(|&(_, n)| n > 0)
        .collect();
    let double_bytes: u64 = doubles
        .iter()
        .map(|&(size, n)| size.saturating_mul(n as u64))
        .fold(0, u64::saturating_add);
    // Half the weights left without a gradient, by bytes, or more have one at twice their
    // size: one stray backward block of twice some weight's size is no fp32 gradient scheme (a
    // real Lightning trace's one 6.75 MiB block beside 124 MiB of weights).
    let unmatched_bytes: u64 = unmatched
        .iter()
        .map(|(&size, &n)| size.saturating_mul(n as u64))
        .fold(0, u64::saturating_add);
    if beyond_bytes == 0
        || double_bytes.saturating_mul(100) < beyond_bytes.saturating_mul(MIN_PAIRED_WEIGHT_PERCENT)
        || double_bytes < unmatched_bytes
    {
        return allowed;
    }
    for (size, n) in doubles {
        *allowed.entry(size).or_default() += n;
    }
    allowed
}

/// Weights from before the trace with no stack, never freed: what rule 2 takes for weights.
fn untraced_weight(l: &Lifetime, c: Category) -> bool {
    c == Category::Parameter
        && l.alloc_event.is_none()
        && l.free_requested_event.or(l.free_completed_event).is_none()
        && l.stack == NO_STACK
}

/// The weights from before the trace come in pairs when sizes holding this share (percent) of
/// their bytes do.
const MIN_PAIRED_WEIGHT_PERCENT: u64 = 90;

/// Blocks of one size alive before the trace and never freed: weights (by rule 2) and
/// gradients.
#[derive(Default)]
struct SizeHeld {
    /// Taken for weights, and of those the ones with no stack.
    weights: usize,
    stackless: Vec<usize>,
    gradients: usize,
}

/// Last step's gradients among the weights from before the trace (see the module doc).
/// `cuda_modern_compilectx` holds every weight twice with no stack, and its backward pass makes
/// one weight-sized block per pair and frees it in the pass: 490.7 MiB of gradients, not
/// weights. Where the weights carry their `.to()` stacks, the stackless blocks of their sizes
/// are the gradients (the backward thread records no Python frames).
///
/// Returns the gradients found, whether they came three or four per weight
/// ([`more_than_a_gradient_beside_each_weight`]), with what is kept beside them judged, and
/// whether they were told by their missing stack alone.
fn gradients_kept_from_an_earlier_step(
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    adam: bool,
    of_lifetime: &mut [Category],
) -> (usize, bool, bool) {
    let Some(backward) = runs.iter().find(|r| r.phase == Phase::Backward) else {
        return (0, false, false);
    };
    let mut held: FxHashMap<u64, SizeHeld> = FxHashMap::default();
    for (id, (l, &c)) in replay.lifetimes.iter().zip(of_lifetime.iter()).enumerate() {
        if l.alloc_event.is_some() || l.free_requested_event.or(l.free_completed_event).is_some() {
            continue;
        }
        let size = held.entry(l.requested_size_bytes).or_default();
        match c {
            Category::Parameter => {
                size.weights += 1;
                if l.stack == NO_STACK {
                    size.stackless.push(id);
                }
            }
            Category::Gradient => size.gradients += 1,
            _ => {}
        }
    }
    held.retain(|_, h| h.weights > 0);
    let weight_bytes: u64 = held.iter().map(|(size, h)| size * h.weights as u64).sum();
    if weight_bytes == 0 {
        return (0, false, false);
    }
    // Per size: blocks the backward pass made and freed in it, and whether it kept any (a new
    // gradient where `.grad` was `None`).
    let mut made_and_freed: FxHashMap<u64, usize> = FxHashMap::default();
    let mut kept: rustc_hash::FxHashSet<u64> = rustc_hash::FxHashSet::default();
    for l in &replay.lifetimes {
        let size = l.requested_size_bytes;
        if !l
            .alloc_event
            .is_some_and(|a| (backward.start..backward.end).contains(&a))
            || !held.contains_key(&size)
        {
            continue;
        }
        if l.free_requested_event
            .or(l.free_completed_event)
            .is_some_and(|f| f < backward.end)
        {
            *made_and_freed.entry(size).or_default() += 1;
        } else {
            kept.insert(size);
        }
    }
    // Every weight's own block carries its stack and has one twin of its size without: the
    // twins are the backward thread's (which records no Python frames), where the pass makes
    // weight-sized blocks at all (batch 33's held-out audit: an xLSTM's 781 MiB of gradients,
    // kept by `zero_grad(set_to_none=False)`, counted as weights, its backward passes making
    // temporaries for its large weights only).
    let twinned = held.values().all(|h| h.stackless.len() * 2 == h.weights)
        && held.keys().any(|size| made_and_freed.contains_key(size));
    // Per size: how many of its stackless weights are gradients (weights and gradients pair up).
    let missing: Vec<(u64, usize)> = held
        .iter()
        .filter_map(|(&size, h)| {
            let all = h.weights + h.gradients;
            let pairs = all / 2;
            let missing = pairs.checked_sub(h.gradients)?;
            let made_and_freed = made_and_freed.get(&size).copied().unwrap_or(0);
            (all % 2 == 0
                && missing > 0
                && h.stackless.len() >= missing
                && !kept.contains(&size)
                && (made_and_freed >= pairs || twinned))
                .then_some((size, missing))
        })
        .collect();
    // The pattern must be the weights', not one size's: a quantised model that dequantises
    // one kind of weight in backward (`cuda_2023_no_time`: 44 blocks of 2 MiB, 9 % of its
    // weights) has no gradients from before the trace.
    let paired_bytes: u64 = missing
        .iter()
        .map(|(size, _)| size * held[size].weights as u64)
        .sum();
    if paired_bytes * 100 < weight_bytes * MIN_PAIRED_WEIGHT_PERCENT {
        return more_than_a_gradient_beside_each_weight(
            replay,
            WeightsHeld {
                held: &held,
                made_and_freed: &made_and_freed,
                kept: &kept,
                weight_bytes,
            },
            adam,
            of_lifetime,
        )
        .map_or((0, false, false), |found| (found, true, false));
    }
    // Told by the missing stack where the backward pass does not make a block of every size.
    let by_stack_alone = twinned
        && missing.iter().any(|(size, _)| {
            made_and_freed.get(size).copied().unwrap_or(0) < held[size].weights / 2
        });
    let mut found = 0;
    for (size, missing) in missing {
        let mut ids = held.remove(&size).map(|h| h.stackless).unwrap_or_default();
        ids.sort_by_key(|&id| std::cmp::Reverse(replay.lifetimes[id].addr));
        for &id in ids.iter().take(missing) {
            of_lifetime[id] = Category::Gradient;
            found += 1;
        }
    }
    (found, false, by_stack_alone)
}

/// The blocks from before the trace taken for weights, by size, and what the first backward
/// pass did at each size: blocks made and freed in it, sizes of which it kept some.
#[derive(Clone, Copy)]
struct WeightsHeld<'a> {
    held: &'a FxHashMap<u64, SizeHeld>,
    made_and_freed: &'a FxHashMap<u64, usize>,
    kept: &'a rustc_hash::FxHashSet<u64>,
    weight_bytes: u64,
}

/// Where the blocks from before the trace taken for weights come three or four per weight (for
/// sizes holding 90 % of their bytes, each size's count exactly that many times the blocks of
/// that size the first backward pass makes and frees: one per weight, a new gradient added into
/// its `.grad`, none kept): one of each is last step's gradient, one the weight, and the rest
/// is something else kept beside each weight. Optimizer state has that shape (momentum; Adam's
/// two moments): where the trace shows Adam (`adam`), four per weight are a weight, its
/// gradient and its two moments; otherwise nothing in the file names the rest, and it is
/// unknown (batch 18's audit, file 2: a fused `AdamW` step that allocates nothing and no
/// annotation, its 800 MiB of weights, gradients and moments were all "parameter"). Returns the
/// gradients found, or `None` where the blocks do not come so.
fn more_than_a_gradient_beside_each_weight(
    replay: &DeviceReplay,
    weights_held: WeightsHeld<'_>,
    adam: bool,
    of_lifetime: &mut [Category],
) -> Option<usize> {
    let WeightsHeld {
        held,
        made_and_freed,
        kept,
        weight_bytes,
    } = weights_held;
    for per_weight in [3, 4] {
        // Per fitting size: the weights' count (the backward pass's blocks of that size).
        let fitting: Vec<(u64, usize)> = held
            .iter()
            .filter_map(|(&size, h)| {
                let weights = made_and_freed.get(&size).copied().unwrap_or(0);
                (weights > 0
                    && h.gradients == 0
                    && h.weights == per_weight * weights
                    && h.stackless.len() >= (per_weight - 1) * weights
                    && !kept.contains(&size))
                .then_some((size, weights))
            })
            .collect();
        let fitting_bytes: u64 = fitting
            .iter()
            .map(|&(size, weights)| size * (per_weight * weights) as u64)
            .sum();
        if fitting_bytes * 100 < weight_bytes * MIN_PAIRED_WEIGHT_PERCENT {
            continue;
        }
        let beside = if adam && per_weight == ADAM_BLOCKS_PER_WEIGHT + 1 {
            Category::OptimizerState
        } else {
            Category::Unknown
        };
        let mut found = 0;
        for (size, weights) in fitting {
            let mut ids = held[&size].stackless.clone();
            ids.sort_by_key(|&id| std::cmp::Reverse(replay.lifetimes[id].addr));
            for (k, &id) in ids.iter().take((per_weight - 1) * weights).enumerate() {
                of_lifetime[id] = if k < weights {
                    found += 1;
                    Category::Gradient
                } else {
                    beside
                };
            }
        }
        return Some(found);
    }
    None
}

/// The sizes of the blocks of `category`, those made in the trace only where `made_in_trace`.
fn sizes_of(
    replay: &DeviceReplay,
    of_lifetime: &[Category],
    category: Category,
    made_in_trace: bool,
) -> FxHashSet<u64> {
    replay
        .lifetimes
        .iter()
        .zip(of_lifetime)
        .filter(|&(l, &c)| c == category && (!made_in_trace || l.alloc_event.is_some()))
        .map(|(l, _)| l.requested_size_bytes)
        .collect()
}

/// Per size, the gradient blocks the first backward pass makes (one per weight: their count is
/// the weights'); `None` where the trace has no backward pass.
fn first_backward_gradients(
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &[Category],
) -> Option<FxHashMap<u64, usize>> {
    let backward = runs.iter().find(|r| r.phase == Phase::Backward)?;
    let mut gradients: FxHashMap<u64, usize> = FxHashMap::default();
    for (l, &c) in replay.lifetimes.iter().zip(of_lifetime) {
        if c == Category::Gradient
            && l.alloc_event
                .is_some_and(|a| (backward.start..=backward.end).contains(&a))
        {
            *gradients.entry(l.requested_size_bytes).or_default() += 1;
        }
    }
    Some(gradients)
}

/// A weight's size and its Adam moments: three blocks of each size for each weight.
const ADAM_BLOCKS_PER_WEIGHT: usize = 3;

/// Adam's two moments among the blocks from before the trace taken for weights (stackless, never
/// freed), where the trace runs Adam: then, for sizes holding 90 % of those blocks' bytes, each
/// size's count is a multiple of three and the trace has gradients of that size — a weight,
/// its `exp_avg` and its `exp_avg_sq` (made in a step before the trace, so with no stack).
/// Two thirds of each such size are optimizer state (the upper addresses: which of the three is
/// the weight the trace cannot tell, and the bytes are right). `efficientpytorch`'s minGPT step:
/// 7.99 GiB "weights" were 2.64 GiB of weights and 5.28 GiB of `AdamW` state. Not for a size
/// whose state a step in the trace makes: Adam makes a weight's moments in its first step, so
/// they did not exist before (a held-out first training step of a 36-layer model, whose weight
/// sizes all come in multiples of three: 2.34 GiB of its weights were "optimizer state" at a
/// backward-pass peak before the step). Where none fits so, the fp32 state of 16-bit weights is
/// looked for: true where found (the weights are then bf16 / fp16).
fn adam_moments_before_the_trace(
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) -> bool {
    let gradient_sizes = sizes_of(replay, of_lifetime, Category::Gradient, false);
    let state_made_in_trace = sizes_of(replay, of_lifetime, Category::OptimizerState, true);
    let found = state_among_untraced_weights(replay, of_lifetime, |size, held| {
        (held.is_multiple_of(ADAM_BLOCKS_PER_WEIGHT)
            && gradient_sizes.contains(&size)
            && !state_made_in_trace.contains(&size))
        .then(|| held / ADAM_BLOCKS_PER_WEIGHT * (ADAM_BLOCKS_PER_WEIGHT - 1))
    });
    found == 0
        && fp32_state_of_half_precision_weights(replay, runs, &state_made_in_trace, of_lifetime)
}

/// Adam's fp32 state of bf16 / fp16 weights among the blocks from before the trace taken for
/// weights (stackless, never freed), where the trace runs Adam: a half-precision weight's
/// moments are fp32, twice its size, and a master copy where one is kept is too. Where the first
/// backward pass makes `n` gradients of a size (one per weight: their count is the weights'),
/// the blocks twice that size are the `n`-ish weights of their own size plus two (moments) or
/// three (moments and master weight) per weight of half their size; where every size holding
/// 90 % of those blocks' bytes counts so, the blocks beyond that size's own weights are
/// optimizer state (the upper addresses; the bytes are right). Batch 21's held-out audit: a
/// bf16 decoder and a bf16 conformer, `AdamW` loaded before recording, their 9.9 and 3.9 GiB of
/// moments "parameter". Not for a size whose state a step in the trace makes. True where some
/// block became state so (the weights are 16-bit).
fn fp32_state_of_half_precision_weights(
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    state_made_in_trace: &FxHashSet<u64>,
    of_lifetime: &mut [Category],
) -> bool {
    let Some(weights_of_size) = first_backward_gradients(replay, runs, of_lifetime) else {
        return false;
    };
    let weights = |size: u64| weights_of_size.get(&size).copied().unwrap_or(0);
    state_among_untraced_weights(replay, of_lifetime, |size, held| {
        if state_made_in_trace.contains(&size) {
            return None;
        }
        let own = weights(size);
        let halves = if size.is_multiple_of(2) {
            weights(size / 2)
        } else {
            0
        };
        if halves == 0 {
            // A size of weights alone fits too (it has no state of its own here).
            return (own > 0 && held == own).then_some(0);
        }
        [2, 3]
            .into_iter()
            .find(|&per_weight| held == own + per_weight * halves)
            .map(|per_weight| per_weight * halves)
    }) > 0
}

/// Marks optimizer state among the blocks from before the trace taken for weights (stackless,
/// never freed): `states(size, held)` says how many of the `held` blocks of a size are state,
/// if the size fits the pattern; where sizes that fit hold [`MIN_PAIRED_WEIGHT_PERCENT`] of
/// those blocks' bytes, that many of each such size become state (the upper addresses: which
/// block is the weight the trace cannot tell, and the bytes are right).
fn state_among_untraced_weights(
    replay: &DeviceReplay,
    of_lifetime: &mut [Category],
    states: impl Fn(u64, usize) -> Option<usize>,
) -> usize {
    let mut held: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
    for (id, (l, &c)) in replay.lifetimes.iter().zip(of_lifetime.iter()).enumerate() {
        if untraced_weight(l, c) {
            held.entry(l.requested_size_bytes).or_default().push(id);
        }
    }
    let bytes = |(size, ids): (&u64, &Vec<usize>)| size * ids.len() as u64;
    let weight_bytes: u64 = held.iter().map(bytes).sum();
    let fitting_bytes: u64 = held
        .iter()
        .filter(|(size, ids)| states(**size, ids.len()).is_some())
        .map(bytes)
        .sum();
    if weight_bytes == 0 || fitting_bytes * 100 < weight_bytes * MIN_PAIRED_WEIGHT_PERCENT {
        return 0;
    }
    let mut marked = 0;
    for (size, mut ids) in held {
        let Some(count) = states(size, ids.len()) else {
            continue;
        };
        ids.sort_by_key(|&id| std::cmp::Reverse(replay.lifetimes[id].addr));
        for &id in &ids[..count] {
            of_lifetime[id] = Category::OptimizerState;
        }
        marked += count;
    }
    marked
}

/// Adam's and `AdamW`'s state is made in `_init_group` (the first step of each parameter) and
/// updated in place after: where the trace shows that, a block its step made elsewhere and kept
/// past the step (an intermediate such as `_foreach_sqrt`'s output that something held on to: a
/// held-out FSDP run under a debugger kept step one's until step two, 5.88 MiB beyond what Adam
/// holds) is no state: unknown. Steps of `torch` before 2.0 make their state in `step` itself,
/// with no `_init_group`: there nothing changes.
fn adam_state_is_made_by_init_group(
    replay: &DeviceReplay,
    marks: &mut impl FnMut(StackId) -> StackMarks,
    of_lifetime: &mut [Category],
) {
    let made_in_trace = |l: &Lifetime, c: Category| {
        c == Category::OptimizerState && l.alloc_event.is_some() && l.stack != NO_STACK
    };
    let shown = replay
        .lifetimes
        .iter()
        .zip(of_lifetime.iter())
        .any(|(l, &c)| made_in_trace(l, c) && marks(l.stack).state_init);
    if !shown {
        return;
    }
    for (l, c) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        if made_in_trace(l, *c) {
            let m = marks(l.stack);
            if m.adam && !m.state_init {
                *c = Category::Unknown;
            }
        }
    }
}

/// One optimizer state per weight from before the trace (SGD's momentum, `RMSprop`'s or
/// `Adagrad`'s running sums), where `zero_grad` frees the gradients (so none is carried into a
/// step) and the trace does not run Adam: for sizes holding 90 % of the bytes of the stackless
/// blocks from before the trace taken for weights, each size holds exactly two per gradient of
/// that size the first backward pass makes (one per weight), or three (batch norm's running
/// statistics have its weight's size). One block per gradient of each such size is optimizer
/// state (the upper addresses; which is the weight the trace cannot tell, and the bytes are
/// right). The `PyTorch` blog's ResNet-50 with momentum SGD: 196 MiB "weights"
/// were 97.5 MiB of weights and 97.5 MiB of momentum.
fn momentum_before_the_trace(
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) {
    let Some(gradients) = first_backward_gradients(replay, runs, of_lifetime) else {
        return;
    };
    // Not for a size whose state a step in the trace makes: SGD makes a weight's momentum in its
    // first step, so it did not exist before (batch 22's held-out audit: a momentum key
    // encoder's copy of the weights, 175 MiB, taken for the momentum the trace's first step
    // made, "349 MiB optimizer state").
    let state_made_in_trace = sizes_of(replay, of_lifetime, Category::OptimizerState, true);
    // One state per gradient, where the size is held twice per gradient (a weight and its
    // state) or three times (with a buffer of the weight's size: batch norm's running mean and
    // variance beside its weight and bias).
    state_among_untraced_weights(replay, of_lifetime, |size, held| {
        gradients
            .get(&size)
            .copied()
            .filter(|&g| g > 0 && (held == 2 * g || held == 3 * g))
            .filter(|_| !state_made_in_trace.contains(&size))
    });
}

/// How many blocks taken for weights each requested size has.
fn weights_by_size(replay: &DeviceReplay, of_lifetime: &[Category]) -> FxHashMap<u64, usize> {
    let mut weights: FxHashMap<u64, usize> = FxHashMap::default();
    for (l, _) in replay
        .lifetimes
        .iter()
        .zip(of_lifetime)
        .filter(|&(_, &c)| c == Category::Parameter)
    {
        *weights.entry(l.requested_size_bytes).or_default() += 1;
    }
    weights
}

/// Autocast's `casts` with half the bytes of a parameter are copies of the weights (fp32 → bf16 /
/// fp16, kept for the autocast region: `cuda_ctx512_forward_mixed` holds 6.30 GiB of them at its
/// peak); its other casts (of activations) keep the category their lifetime gave them.
///
/// Autocast caches one copy per weight, so at no moment are more copies of a size alive than
/// weights of twice that size: casts beyond that bound, in allocation order, are activations cast
/// to the same size (`cuda_medium_1024_training`: 163 saved (4, 1024, 1024) bf16 activations are
/// 8 MiB like a 1024 × 4096 weight's copy; counted as copies, 2.02 GiB of "copies" exceeded the
/// 0.79 GiB a copy of every weight can hold).
fn autocast_weight_copies(replay: &DeviceReplay, casts: &[usize], of_lifetime: &mut [Category]) {
    if casts.is_empty() {
        return;
    }
    let weights_of_size = weights_by_size(replay, of_lifetime);
    let mut casts: Vec<usize> = casts.to_vec();
    casts.sort_by_key(|&id| replay.lifetimes[id].alloc_event);
    // Per copy size, the free events of the copies alive so far (`u32::MAX`: never freed).
    let mut alive: FxHashMap<u64, std::collections::BinaryHeap<std::cmp::Reverse<u32>>> =
        FxHashMap::default();
    for id in casts {
        let l = &replay.lifetimes[id];
        let size = l.requested_size_bytes;
        let Some(&weights) = weights_of_size.get(&size.saturating_mul(2)) else {
            continue;
        };
        let alloc = l.alloc_event.unwrap_or(0);
        let copies = alive.entry(size).or_default();
        while copies
            .peek()
            .is_some_and(|&std::cmp::Reverse(f)| f <= alloc)
        {
            copies.pop();
        }
        if copies.len() < weights {
            of_lifetime[id] = Category::WeightCopy;
            let freed = l.free_requested_event.or(l.free_completed_event);
            copies.push(std::cmp::Reverse(freed.unwrap_or(u32::MAX)));
        }
    }
}

/// Autocast's copies of the weights in a file that records Python frames alone, where no
/// `cached_cast` frame shows them (batch 24's held-out audit: four bf16 / fp16 runs' copies,
/// 324–682 MiB, counted as activations). Autocast casts each fp32 weight once per forward pass
/// to a block of half its size, and the backward pass uses it: in one forward pass (a backward
/// pass's start back to the one before's end), the activations of size `s` alive when the
/// backward pass starts are the copies where they number exactly the weights of size `2 s`
/// (two or more), all of them or all from one call stack, and the weights so copied hold two
/// thirds of the trained weights' bytes or more. Any other count is left as it was.
/// Returns whether any copy was found.
fn weight_copies_by_count(
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) -> bool {
    let mut weights_of_size = weights_by_size(replay, of_lifetime);
    // The weights the backward pass makes gradients for (a frozen teacher's are never cast
    // for a matrix product with a gradient), or all where no gradient is known.
    let gradient_sizes: FxHashSet<u64> = replay
        .lifetimes
        .iter()
        .zip(of_lifetime.iter())
        .filter(|&(_, &c)| c == Category::Gradient)
        .map(|(l, _)| l.requested_size_bytes)
        .collect();
    let weight_bytes = |trained: bool| -> u64 {
        weights_of_size
            .iter()
            .filter(|&(size, _)| !trained || gradient_sizes.contains(size))
            .map(|(size, &n)| size.saturating_mul(n as u64))
            .sum()
    };
    let trained_weight_bytes = match weight_bytes(true) {
        0 => weight_bytes(false),
        trained => trained,
    };
    weights_of_size.retain(|_, &mut n| n >= 2);
    if weights_of_size.is_empty() {
        return false;
    }
    // The activations of a copy's size, in allocation order.
    let mut candidates: Vec<(u32, usize)> = replay
        .lifetimes
        .iter()
        .enumerate()
        .filter(|&(id, l)| {
            of_lifetime[id] == Category::Activation
                && weights_of_size.contains_key(&l.requested_size_bytes.saturating_mul(2))
        })
        .filter_map(|(id, l)| Some((l.alloc_event?, id)))
        .collect();
    candidates.sort_unstable();
    let (starts, ends) = backward_bounds(runs);
    let mut found = false;
    let mut previous_end = 0u32;
    for (&start, &end) in starts.iter().zip(&ends) {
        let first = candidates.partition_point(|&(alloc, _)| alloc < previous_end);
        let last = candidates.partition_point(|&(alloc, _)| alloc < start);
        previous_end = end;
        // Per copy size, the forward pass's blocks kept into the backward pass.
        let mut by_size: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
        // Kept into the backward pass and freed by it (autograd saved the cast for it; one
        // freed at autocast's exit is found by its stack), or never: a block the loop frees
        // after the backward pass is no cast (batch 31's re-audit: a Llama's `logits.float()`,
        // freed by the trainer at the iteration's end, of half the size of its embedding and
        // head, read with the head's output as their two copies).
        for &(_, id) in candidates.get(first..last).unwrap_or_default() {
            let l = &replay.lifetimes[id];
            let freed_by_backward =
                |f: u32| f >= start && run_at(runs, f).is_some_and(|r| r.phase == Phase::Backward);
            if l.free_requested_event
                .or(l.free_completed_event)
                .is_none_or(freed_by_backward)
            {
                by_size.entry(l.requested_size_bytes).or_default().push(id);
            }
        }
        // Autocast casts every weight a matrix product uses: the copies found must stand for
        // two thirds of the trained weights' bytes or more (an embedding table, a norm's
        // weights and biases are not cast), not sizes that a layer's activations happen to
        // share (batch 21's fp32 language model: six per-layer 512 KiB blocks beside six 1 MiB
        // weights of its 72 MiB; batch 26's fp32 pix2pix: 9 activations standing for 54 % of
        // its weights called 58.5 MiB of weight copies, where autocast's held-out runs stood
        // for 70–95 %).
        let mut copies: Vec<usize> = Vec::new();
        let mut weight_bytes_copied = 0u64;
        for (size, ids) in by_size {
            let weights = weights_of_size[&size.saturating_mul(2)];
            let of_size: Vec<usize> = if ids.len() == weights {
                ids
            } else {
                let mut by_stack: FxHashMap<StackId, Vec<usize>> = FxHashMap::default();
                for id in ids {
                    by_stack
                        .entry(replay.lifetimes[id].stack)
                        .or_default()
                        .push(id);
                }
                let mut matching = by_stack.into_values().filter(|v| v.len() == weights);
                match (matching.next(), matching.next()) {
                    (Some(one), None) => one,
                    _ => continue,
                }
            };
            weight_bytes_copied = weight_bytes_copied
                .saturating_add(size.saturating_mul(2).saturating_mul(weights as u64));
            copies.extend(of_size);
        }
        if weight_bytes_copied.saturating_mul(3) >= trained_weight_bytes.saturating_mul(2)
            && !copies.is_empty()
        {
            for id in copies {
                of_lifetime[id] = Category::WeightCopy;
            }
            found = true;
        }
    }
    found
}

/// Blocks from one call stack alive at once from this many on are many layers' (one per layer).
const LAYER_BLOCKS: usize = 4;

/// Where each backward pass starts and ends, in trace order.
fn backward_bounds(runs: &[PhaseRun]) -> (Vec<u32>, Vec<u32>) {
    runs.iter()
        .filter(|r| r.phase == Phase::Backward)
        .map(|r| (r.start, r.end))
        .unzip()
}

/// Where each backward pass of `runs` begins, in trace order.
pub(crate) fn backward_starts(runs: &[PhaseRun]) -> Vec<u32> {
    runs.iter()
        .filter(|r| r.phase == Phase::Backward)
        .map(|r| r.start)
        .collect()
}

/// The event that freed `l`, where it was freed and no backward pass (of `backward_starts`) began
/// between its allocation and that free: what a forward pass made and let go of with no
/// backward pass using it.
pub(crate) fn freed_without_backward(backward_starts: &[u32], l: &Lifetime) -> Option<u32> {
    let (alloc, freed) = (
        l.alloc_event?,
        l.free_requested_event.or(l.free_completed_event)?,
    );
    let next = backward_starts.partition_point(|&b| b <= alloc);
    backward_starts
        .get(next)
        .is_none_or(|&b| b > freed)
        .then_some(freed)
}

/// A block freed with no backward pass beginning while it lived (in a trace with no backward
/// pass, any freed block), made inside a module's forward by a call stack that had many such
/// blocks alive at once, is one layer's output among every layer's, kept while later layers ran
/// (autograd records the graph: a forward pass without `no_grad`, or the previous pass's graph
/// held until its output is dropped): an activation, not a temporary. Under `no_grad` a layer's
/// tensors go once the next layer has used them, so a stack has one or two alive. Counting only
/// such blocks keeps a training run's layers (alive until their backward) from making its
/// `no_grad` evaluation's blocks look kept (batch 17's held-out audit: an evaluation without
/// `no_grad` inside training, 29.4 GiB of two batches' graphs, was "temporary").
fn layers_kept_without_backward(
    snapshot: &Snapshot,
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) {
    let backward_starts = backward_starts(runs);
    let without_backward = |l: &Lifetime| freed_without_backward(&backward_starts, l).is_some();
    // Made inside a module's forward (a per-parameter loop of an optimizer or an estimator
    // keeps many blocks of one line too, and they are no layers').
    let mut in_forward: FxHashMap<StackId, bool> = FxHashMap::default();
    let mut in_a_forward = |stack: StackId| {
        *in_forward.entry(stack).or_insert_with(|| {
            snapshot.stack_frames(stack).any(|f| {
                matches!(
                    snapshot.str(f.name),
                    "forward" | "_call_impl" | "_wrapped_call_impl"
                )
            })
        })
    };
    // Per stack, the most blocks alive at once: +1 at each allocation, -1 at each free, in
    // event order (an event allocates or frees one block at most: no sort needed).
    let events = replay
        .lifetimes
        .iter()
        .filter_map(|l| {
            l.free_requested_event
                .or(l.free_completed_event)
                .max(l.alloc_event)
        })
        .max()
        .map_or(0, |e| e as usize + 1);
    let mut changes: Vec<(i8, StackId)> = vec![(0, NO_STACK); events];
    for l in replay.lifetimes.iter().filter(|l| without_backward(l)) {
        let (Some(alloc), false) = (l.alloc_event, l.stack == NO_STACK) else {
            continue;
        };
        changes[alloc as usize] = (1, l.stack);
        if let Some(f) = l.free_requested_event.or(l.free_completed_event) {
            changes[f as usize] = (-1, l.stack);
        }
    }
    let mut alive: FxHashMap<StackId, (usize, usize)> = FxHashMap::default();
    for (delta, stack) in changes.into_iter().filter(|&(delta, _)| delta != 0) {
        let (now, most) = alive.entry(stack).or_default();
        if delta > 0 {
            *now += 1;
            *most = (*most).max(*now);
        } else {
            *now = now.saturating_sub(1);
        }
    }
    // Blocks let go together, as a dropped graph's are; or a generation loop's, which keeps its
    // cache of every layer's keys and values from step to step and replaces them one at a time
    // (batch 22's T5 and batch 25's Marian beam searches).
    // Only the stacks with many blocks alive at once need it.
    let many_alive = |l: &Lifetime| {
        alive
            .get(&l.stack)
            .is_some_and(|&(_, most)| most >= LAYER_BLOCKS)
    };
    let released_together =
        released_together(replay, &|l: &Lifetime| many_alive(l) && without_backward(l));
    let mut in_generation: FxHashMap<StackId, bool> = FxHashMap::default();
    for (l, c) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        if matches!(*c, Category::Temporary | Category::Unknown)
            && without_backward(l)
            && many_alive(l)
            && (released_together.contains(&l.stack)
                || *in_generation
                    .entry(l.stack)
                    .or_insert_with(|| generation_loop(snapshot, l.stack).is_some()))
            && in_a_forward(l.stack)
        {
            *c = Category::Activation;
        }
    }
}

/// Functions of a library's generation loop (`transformers/generation/utils.py`: `generate` and
/// the searches it runs), which runs under `no_grad`.
const GENERATION_LOOP: [&str; 7] = [
    "generate",
    "_beam_search",
    "beam_search",
    "_sample",
    "sample",
    "_greedy_search",
    "greedy_search",
];

/// The generation loop's function (of `GENERATION_LOOP`, in a file of a `generation` folder)
/// that `stack` runs below, if any: what such a loop keeps from step to step is its cache.
pub(crate) fn generation_loop(snapshot: &Snapshot, stack: StackId) -> Option<StrId> {
    snapshot
        .stack_frames(stack)
        .find(|f| {
            let file = snapshot.str(f.filename);
            (file.contains("/generation/") || file.contains("\\generation\\"))
                && GENERATION_LOOP.contains(&snapshot.str(f.name))
        })
        .map(|f| f.name)
}

/// The call stacks whose blocks (of those `eligible`) were mostly freed together, `LAYER_BLOCKS`
/// or more at a time with no allocation between their frees: what dropping a graph does, which
/// frees every layer's saved tensors at once. A program that keeps some of a line's outputs
/// itself (a U-Net's skip connections under `no_grad`) lets each go as it is used, between the
/// next layers' allocations, and only the last few together (batch 26's held-out audit: a
/// diffusion pipeline's skip connections and attention buffers under `no_grad`, 14 % of them
/// freed in such runs, were "activation").
fn released_together(
    replay: &DeviceReplay,
    eligible: &dyn Fn(&Lifetime) -> bool,
) -> FxHashSet<StackId> {
    let frees: Vec<(StackId, u32)> = replay
        .lifetimes
        .iter()
        .filter(|l| l.stack != NO_STACK && eligible(l))
        .filter_map(|l| Some((l.stack, l.free_requested_event.or(l.free_completed_event)?)))
        .collect();
    if frees.is_empty() {
        return FxHashSet::default();
    }
    let mut allocs: Vec<u32> = replay
        .lifetimes
        .iter()
        .filter_map(|l| l.alloc_event)
        .collect();
    allocs.sort_unstable();
    // Per stack and stretch between two allocations, the blocks freed there.
    let mut freed_in_stretch: FxHashMap<(StackId, usize), usize> = FxHashMap::default();
    for (stack, free_event) in frees {
        let stretch = allocs.partition_point(|&a| a < free_event);
        *freed_in_stretch.entry((stack, stretch)).or_default() += 1;
    }
    // Per stack: blocks freed, and those freed with `LAYER_BLOCKS` or more of its own.
    let mut freed_by_stack: FxHashMap<StackId, (usize, usize)> = FxHashMap::default();
    for ((stack, _), n) in freed_in_stretch {
        let (all, together) = freed_by_stack.entry(stack).or_default();
        *all += n;
        if n >= LAYER_BLOCKS {
            *together += n;
        }
    }
    freed_by_stack
        .into_iter()
        .filter(|&(_, (all, together))| together.saturating_mul(2) >= all)
        .map(|(stack, _)| stack)
        .collect()
}

/// A block of exactly cuBLAS's default workspace made in the trace and never freed (a few at
/// most, one per thread and stream) is the workspace cuBLAS makes for a handle: made in a
/// backward pass with no frame of the program (autograd's thread records none, or only C++
/// frames), not a gradient (a GNN with 7,752 B of weights showed an 8.13 MiB "gradient"); made
/// elsewhere and kept past its iteration, not a retained tensor.
fn workspaces_of_the_backward_thread(
    snapshot: &Snapshot,
    replay: &DeviceReplay,
    runs: &[PhaseRun],
    of_lifetime: &mut [Category],
) {
    if snapshot.is_npu() {
        return;
    }
    let in_backward = |e: u32| run_at(runs, e).is_some_and(|r| r.phase == Phase::Backward);
    // No Python frame, and not `AccumulateGrad`'s (a weight of 2080 × 1024 fp32 has that size).
    let no_python = |stack: StackId| {
        !snapshot.stack_frames(stack).any(|f| {
            std::path::Path::new(snapshot.str(f.filename))
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("py"))
                || snapshot.str(f.name).contains("AccumulateGrad")
        })
    };
    // Every block of that size made in the trace and never freed: a few at most, or they are
    // tensors of that size.
    let kept: Vec<usize> = replay
        .lifetimes
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.requested_size_bytes == CUBLAS_DEFAULT_WORKSPACE_BYTES
                && l.alloc_event.is_some()
                && l.free_requested_event.or(l.free_completed_event).is_none()
        })
        .map(|(id, _)| id)
        .collect();
    if kept.len() > MAX_CUBLAS_WORKSPACES {
        return;
    }
    for id in kept {
        let l = &replay.lifetimes[id];
        let workspace = match of_lifetime[id] {
            // The backward thread's handle: no frame of the program.
            Category::Gradient | Category::Unknown if l.alloc_event.is_some_and(in_backward) => {
                no_python(l.stack)
            }
            // The main thread's handle, made by the first matmul and kept: "retained" or an
            // activation never freed by its lifetime (a GNN's 8.12 MiB), or long-lived where a
            // trace without backward keeps coming back to one low point.
            Category::Retained | Category::Unknown | Category::Activation | Category::LongLived => {
                true
            }
            _ => false,
        };
        if workspace {
            of_lifetime[id] = Category::Workspace;
        }
    }
}

/// cuBLAS's default workspace (`CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8`: 2 × 4 MiB + 8 × 16 KiB),
/// which the caching allocator serves once per stream and thread.
const CUBLAS_DEFAULT_WORKSPACE_BYTES: u64 = 8_519_680;
/// cuBLAS's default workspace on Hopper and later GPUs (`:4096:8`).
const CUBLAS_HOPPER_WORKSPACE_BYTES: u64 = 32 << 20;
/// More blocks of that size (or of a workspace the trace made) from before the trace than this
/// are taken for weights.
const MAX_CUBLAS_WORKSPACES: usize = 4;

/// A block alive before the trace with no stack, never freed, and exactly the size of a
/// workspace the trace made, or of cuBLAS's default workspace in a CUDA file (a few such blocks
/// at most; Hopper's 32 MiB only in a training trace with no gradient of that size), is such a
/// workspace, not a weight (`cuda_cppframes_snapshotevents`: one beside a traced one;
/// `cuda_2023_no_time`: two, none traced).
fn workspaces_made_before_the_trace(
    snapshot: &Snapshot,
    replay: &DeviceReplay,
    of_lifetime: &mut [Category],
) {
    let mut workspace_sizes: rustc_hash::FxHashSet<u64> = replay
        .lifetimes
        .iter()
        .zip(of_lifetime.iter())
        .filter(|(l, c)| **c == Category::Workspace && l.alloc_event.is_some())
        .map(|(l, _)| l.requested_size_bytes)
        .collect();
    // One per stream and thread: a few at most. Many blocks of that size are weights of that
    // size (a 2080 × 1024 fp32 matrix is one too).
    let untraced_of_size = |size: u64| {
        replay
            .lifetimes
            .iter()
            .zip(of_lifetime.iter())
            .filter(|&(l, &c)| untraced_weight(l, c) && l.requested_size_bytes == size)
            .count()
    };
    let cublas_sized = untraced_of_size(CUBLAS_DEFAULT_WORKSPACE_BYTES);
    if !snapshot.is_npu() && (1..=MAX_CUBLAS_WORKSPACES).contains(&cublas_sized) {
        workspace_sizes.insert(CUBLAS_DEFAULT_WORKSPACE_BYTES);
    }
    // cuBLAS's default on Hopper and later (`:4096:8`) is a common weight size too: taken for a
    // workspace only where the trace trains and no gradient or optimizer state has its size (a
    // held-out minGPT step: two such blocks beside 437 weights that each had a gradient).
    let twinned = |size: u64| {
        replay
            .lifetimes
            .iter()
            .zip(of_lifetime.iter())
            .any(|(l, &c)| {
                matches!(c, Category::Gradient | Category::OptimizerState)
                    && l.requested_size_bytes == size
            })
    };
    let trains = of_lifetime.contains(&Category::Gradient);
    let hopper_sized = untraced_of_size(CUBLAS_HOPPER_WORKSPACE_BYTES);
    if !snapshot.is_npu()
        && trains
        && (1..=MAX_CUBLAS_WORKSPACES).contains(&hopper_sized)
        && !twinned(CUBLAS_HOPPER_WORKSPACE_BYTES)
    {
        workspace_sizes.insert(CUBLAS_HOPPER_WORKSPACE_BYTES);
    }
    // Of a traced workspace's size too, many such blocks are weights (batch 35's held-out
    // audit: 25 weights of 16 MiB from before the trace read as workspace, beside Transformer
    // Engine's 16 MiB FP8 weight copies from `get_weight_workspace`).
    workspace_sizes.retain(|&size| untraced_of_size(size) <= MAX_CUBLAS_WORKSPACES);
    for (l, c) in replay.lifetimes.iter().zip(of_lifetime.iter_mut()) {
        if untraced_weight(l, *c) && workspace_sizes.contains(&l.requested_size_bytes) {
            *c = Category::Workspace;
        }
    }
}

/// The backward passes and optimizer steps of `device`, from its allocations in one pass.
fn phase_runs(
    snapshot: &Snapshot,
    device: &Device,
    engine_thread: bool,
    marks: &mut impl FnMut(StackId) -> StackMarks,
) -> Vec<PhaseRun> {
    let trace = &device.trace;
    let mut runs: Vec<PhaseRun> = Vec::new();
    let mut open: Option<PhaseRun> = None;
    // The function the main thread's stacks begin with (a script's `<module>`): a stack that
    // begins elsewhere ran on a thread of its own, in this mode a hook on the engine's thread
    // (ZeRO's `reduce_partition_and_remove_grads`): the backward pass's.
    let main_base = engine_thread
        .then(|| main_thread_base(snapshot, device))
        .flatten();
    // A stack whose outermost frame is a module call's own machinery was cut short (no thread
    // begins inside `torch/nn/modules/module.py`): the main thread's (batch 34's held-out audit:
    // a VQGAN's LPIPS forward, its stack six frames deep, was "in the backward pass").
    let on_another_thread = |stack: StackId| {
        main_base.is_some_and(|base| {
            snapshot.stack_frames(stack).last().is_some_and(|f| {
                (f.filename != base.0 || f.name != base.1)
                    && !snapshot
                        .str(f.filename)
                        .replace('\\', "/")
                        .ends_with("torch/nn/modules/module.py")
            })
        })
    };
    // The phase a stack shows; none for a missing stack where the file gives no reason to
    // read it (`torch_npu` records none for the backward thread, whose pass `_make_grads`
    // opens).
    let mut phase_of = |stack: StackId| {
        if stack == NO_STACK && !engine_thread {
            return None;
        }
        let m = marks(stack);
        // The engine's thread runs backward hooks, never an optimizer's step (a stack cut
        // short in an optimizer is still the optimizer's: batch 19's re-audit, file 6, read 560
        // steps where 3 ran).
        Some(
            if stack == NO_STACK || !m.optimizer && on_another_thread(stack) {
                Phase::Backward
            } else if m.optimizer {
                Phase::Optimizer
            } else if m.backward || m.accumulate_grad {
                Phase::Backward
            } else {
                Phase::Forward
            },
        )
    };
    let mut last_alloc = 0;
    // The stack each address was last allocated with: a free carrying it may be the block's
    // own stack (`_record_memory_history(context="alloc")`), not the freeing call's.
    let mut allocated_with: FxHashMap<u64, StackId> = FxHashMap::default();
    for i in 0..trace.len() {
        if trace.action[i] != Action::Alloc {
            continue;
        }
        last_alloc = i;
        allocated_with.insert(trace.addr[i], trace.stack[i]);
        // An allocation whose stack shows no phase neither opens nor closes a run.
        let Some(phase) = phase_of(trace.stack[i]) else {
            continue;
        };
        match open {
            Some(run) if run.phase == phase => {}
            _ => {
                if let Some(mut run) = open.take() {
                    run.end = i as u32;
                    run.own_end = run.end;
                    runs.push(run);
                }
                if phase != Phase::Forward {
                    open = Some(PhaseRun {
                        phase,
                        start: i as u32,
                        end: i as u32,
                        own_end: i as u32,
                    });
                }
            }
        }
    }
    if let Some(mut run) = open {
        run.end = trace.len() as u32;
        run.own_end = run.end;
        for j in last_alloc.max(run.start as usize) + 1..trace.len() {
            if matches!(
                trace.action[j],
                Action::FreeRequested | Action::FreeCompleted
            ) && allocated_with.get(&trace.addr[j]) != Some(&trace.stack[j])
                && phase_of(trace.stack[j]).is_some_and(|p| p != run.phase)
            {
                run.own_end = j as u32;
                break;
            }
        }
        runs.push(run);
    }
    runs
}

/// Whether the allocations without a stack are the autograd engine's: in a file that records
/// Python frames alone (no allocation's stack holds a native frame; a fifth of the allocations or more have a
/// stack) and trains (a backward pass or an optimizer step in its frames, or a step in its
/// annotations). The engine runs a device's backward pass on a thread of its own, where no
/// Python code runs but hooks, so with Python frames alone that thread's allocations are the
/// ones without a stack (`torch_npu`'s backward passes, `cuda_modern_compilectx`'s). Real
/// recordings show the pass's start on the main thread (`_make_grads` under
/// `Tensor.backward`); a backward pass given its gradients
/// (`torch.autograd.backward(outputs, grad_tensors)`, a pipeline stage's) makes nothing there,
/// and batch 19's held-out audit found six Python-only files whose backward passes were all
/// "outside backward and the optimizer step".
fn stackless_allocations_are_the_engine_s(
    snapshot: &Snapshot,
    device: &Device,
    marks: &mut impl FnMut(StackId) -> StackMarks,
) -> bool {
    let trace = &device.trace;
    let annotated_step = snapshot
        .annotations
        .iter()
        .any(|a| a.name.starts_with("Optimizer.step"));
    let mut native: FxHashMap<StackId, bool> = FxHashMap::default();
    let (mut with_stack, mut without, mut trains) = (0usize, 0usize, annotated_step);
    for i in 0..trace.len() {
        if trace.action[i] != Action::Alloc {
            continue;
        }
        let stack = trace.stack[i];
        if stack == NO_STACK {
            without += 1;
            continue;
        }
        with_stack += 1;
        let has_native = *native.entry(stack).or_insert_with(|| {
            snapshot
                .stack_frames(stack)
                .any(|f| !crate::frames::is_python(snapshot, f))
        });
        if has_native {
            return false;
        }
        let m = marks(stack);
        trains |= m.backward || m.accumulate_grad || m.optimizer;
    }
    without > 0 && with_stack * 4 >= without && trains
}

/// The outermost frame `(file, function)` of most of `device`'s allocations with a stack, where
/// it is a module's top level (`<module>`): where the main thread's stacks begin.
fn main_thread_base(snapshot: &Snapshot, device: &Device) -> Option<(StrId, StrId)> {
    let mut counts: FxHashMap<(StrId, StrId), usize> = FxHashMap::default();
    for i in 0..device.trace.len() {
        if device.trace.action[i] != Action::Alloc {
            continue;
        }
        if let Some(f) = snapshot.stack_frames(device.trace.stack[i]).last() {
            *counts.entry((f.filename, f.name)).or_default() += 1;
        }
    }
    let (base, _) = counts.into_iter().max_by_key(|&(k, n)| (n, k))?;
    (snapshot.str(base.1) == "<module>").then_some(base)
}

/// A block alive for at least 1 / this of a trace with no backward pass is long-lived.
const LONG_LIVED_SHARE: u64 = 4;

/// The backward passes of a trace, as [`lifetime_category`] reads them.
#[derive(Clone, Copy)]
struct Passes<'a> {
    backward_starts: &'a [u32],
    /// Where each backward pass ends (the first allocation of another phase, or the trace's end).
    backward_ends: &'a [u32],
    trace_len: u32,
    /// An allocation failed in the trace: what a pass held when it did was not freed by the pass.
    failed: bool,
    /// The allocations of a checkpoint's recomputed forward pass, in trace order: a backward
    /// pass that recomputes is one pass however its runs are cut.
    recomputations: &'a [u32],
}

/// Whether some allocation's frames show a backward pass (`torch_npu`'s files show `_make_grads`
/// under `Tensor.backward`): where none does, the passes were told by their thread alone.
fn frames_show_backward(device: &Device, marks: &mut impl FnMut(StackId) -> StackMarks) -> bool {
    (0..device.trace.len()).any(|i| {
        device.trace.action[i] == Action::Alloc
            && device.trace.stack[i] != NO_STACK
            && marks(device.trace.stack[i]).backward
    })
}

/// Workspace and communication buffers and KV caches are what their frames say, whatever their
/// lifetime.
fn told_by_the_stack_alone(m: StackMarks) -> Option<Category> {
    // A checkpoint's tensor: weights, or optimizer state saved with them.
    if m.checkpoint_restore {
        Some(Category::Unknown)
    } else if m.workspace {
        Some(Category::Workspace)
    } else if m.communication {
        Some(Category::Communication)
    } else if m.kv_cache {
        Some(Category::KvCache)
    } else {
        None
    }
}

/// The category of one lifetime whose stack says `m` (see the module doc for the rules).
fn lifetime_category(
    l: &Lifetime,
    m: StackMarks,
    runs: &[PhaseRun],
    passes: Passes<'_>,
    iteration_ends: &[Option<u32>],
    start: TraceStart,
) -> Category {
    let Passes {
        backward_starts,
        backward_ends,
        trace_len,
        failed,
        recomputations,
    } = passes;
    let freed = l.free_requested_event.or(l.free_completed_event);
    if let Some(by_stack) = told_by_the_stack_alone(m) {
        by_stack
    } else if let Some(alloc) = l.alloc_event {
        let run = run_at(runs, alloc);
        let freed_in_run = |run: &PhaseRun| freed.is_some_and(|f| f < run.end);
        match run {
            _ if m.accumulate_grad => Category::Gradient,
            _ if m.replica => Category::WeightCopy,
            _ if m.scattered_input => Category::Input,
            Some(run) if run.phase == Phase::Backward => {
                made_in_backward(freed, m, run, runs, recomputations)
            }
            Some(run) if run.phase == Phase::Optimizer => {
                if freed_in_run(run) {
                    Category::Temporary
                } else {
                    Category::OptimizerState
                }
            }
            _ if m.grad_buffer && freed.is_none() => Category::Gradient,
            // The optimizer's tensors made anew by the program and kept through an optimizer
            // step: its state, and the parameters it holds with it (the file does not say which
            // is which); not a leak, however they grow.
            _ if m.rewrites_optimizer_tensors && kept_through_a_step(runs, alloc, freed) => {
                Category::OptimizerState
            }
            _ if m.parameter_init => Category::Parameter,
            // Loaded and kept: a weight (a temporary of the load is freed).
            _ if m.model_load && freed.is_none() => Category::Parameter,
            // Made by an object's constructor and freed by an optimizer step: state that step
            // replaced with new tensors (a hand-written optimizer's `p.data = …`, its moments
            // remade each step), not what a forward pass saves for backward: autograd frees
            // those, never the optimizer (a CS336 model's `Linear.__init__` weights and its
            // `NIUAdam.__init__` moments, freed in the first step).
            _ if m.constructor && freed.is_some_and(|f| in_an_optimizer_step(runs, f)) => {
                if m.optimizer_constructor {
                    Category::OptimizerState
                } else {
                    Category::Parameter
                }
            }
            // Made by a constructor before the first backward pass and alive through the last
            // one: that object's state, held across every iteration (a model's own modules'
            // weights, a dataset on the device); the optimizer's where its file says so.
            _ if m.constructor
                && backward_starts.first().is_some_and(|&first| alloc < first)
                && backward_starts
                    .last()
                    .is_some_and(|&last| freed.is_none_or(|f| f > last)) =>
            {
                if m.optimizer_constructor {
                    Category::OptimizerState
                } else {
                    Category::LongLived
                }
            }
            _ => {
                let k = backward_starts.partition_point(|&s| s <= alloc);
                let next_backward = backward_starts.get(k);
                // Held over a quarter of the trace, a block no phase explains is no temporary:
                // a warm-up pass's graph, the previous batch's outputs kept through the next.
                let long = |f: u32| {
                    u64::from(f.saturating_sub(alloc)) * LONG_LIVED_SHARE >= u64::from(trace_len)
                };
                match (next_backward, freed) {
                    (Some(&start), Some(f)) if f < start && long(f) && !m.constructor => {
                        Category::Unknown
                    }
                    (Some(&start), Some(f)) if f < start => Category::Temporary,
                    // No backward pass anywhere: no phase frees it. Made by an object's
                    // constructor and alive over a quarter of the trace, it is that object's
                    // state, not a temporary (`cuda_decomfl_adam`: a zeroth-order estimator's
                    // 196 blocks, made in its `__init__`, alive 11–15 k of 23 k events).
                    (None, Some(f))
                        if backward_starts.is_empty()
                            && m.constructor
                            && u64::from(f.saturating_sub(alloc)) * LONG_LIVED_SHARE
                                >= u64::from(trace_len) =>
                    {
                        Category::LongLived
                    }
                    (None, Some(f)) if long(f) => Category::Unknown,
                    (None, Some(_)) => Category::Temporary,
                    // No backward pass anywhere, and kept to the end by what a constructor made
                    // over a quarter of the trace: that object's state, not what autograd keeps
                    // (a held-out trace from a custom `Linear.__init__` on: 12.6 GiB of weights
                    // called activations, with autograd advice, in a `no_grad` forward).
                    (None, None)
                        if backward_starts.is_empty() && m.constructor && long(trace_len) =>
                    {
                        Category::LongLived
                    }
                    // Still held when its iteration is over: an input batch, a cache, a leak;
                    // not what the forward pass keeps for backward (that is freed in it). One a
                    // later backward pass frees is that pass's saved tensor: a pipeline's
                    // micro-batch, whose forward runs before the backward passes of earlier
                    // ones (batch 17's held-out audit: 1F1B's 20.9 GiB in flight, "retained").
                    (Some(_), _)
                        if iteration_ends[k].is_some_and(|end| freed.is_none_or(|f| f >= end))
                            && !freed.is_some_and(|f| {
                                run_at(runs, f).is_some_and(|r| r.phase == Phase::Backward)
                            }) =>
                    {
                        Category::Retained
                    }
                    // Alive into the trace's last backward pass (no optimizer step or backward
                    // after it ends an iteration) and not freed by it: autograd frees what it
                    // saved for backward in the pass that uses it, so the program holds this
                    // itself (an input, a weight made as a plain tensor, an output, a gradient
                    // a fused kernel made in the forward pass), and the file does not say which
                    // (a held-out Liger loss benchmark: a 1000 MiB weight and 1.1 GiB of
                    // gradients were "activations"). Not where an allocation failed: the pass
                    // did not get to free what it held.
                    (Some(_), _)
                        if iteration_ends[k].is_none()
                            && !failed
                            && freed.is_none_or(|f| f >= backward_ends[k]) =>
                    {
                        Category::Unknown
                    }
                    // Alive into backward; or, with no backward after it (inference, a
                    // forward pass alone), kept to the end: what a forward pass keeps.
                    _ => Category::Activation,
                }
            }
        }
    } else {
        before_the_trace(m, l.stack != NO_STACK, freed, runs, start)
    }
}

/// Whether a block made at `alloc` and freed at `freed` (or never) is alive when an optimizer
/// step begins.
fn kept_through_a_step(runs: &[PhaseRun], alloc: u32, freed: Option<u32>) -> bool {
    runs.iter().any(|r| {
        r.phase == Phase::Optimizer && r.start > alloc && freed.is_none_or(|f| r.start < f)
    })
}

/// The allocations of a checkpoint's recomputed forward pass, in trace order.
fn recomputations(device: &Device, marks: &mut impl FnMut(StackId) -> StackMarks) -> Vec<u32> {
    (0..device.trace.len())
        .filter(|&i| {
            device.trace.action[i] == Action::Alloc && marks(device.trace.stack[i]).recompute
        })
        .map(|i| i as u32)
        .collect()
}

/// Whether a checkpoint recomputed a forward pass (an allocation of `recomputations`) from event
/// `from` up to `to`.
fn recomputed_between(recomputations: &[u32], from: u32, to: u32) -> bool {
    let next = recomputations.partition_point(|&e| e < from);
    recomputations.get(next).is_some_and(|&e| e < to)
}

/// What a block made in the backward pass `run` is, by when it is freed (`freed`).
fn made_in_backward(
    freed: Option<u32>,
    m: StackMarks,
    run: &PhaseRun,
    runs: &[PhaseRun],
    recomputations: &[u32],
) -> Category {
    if freed.is_some_and(|f| f < run.end) {
        Category::Temporary
    } else if freed.is_some_and(|f| {
        run_at(runs, f).is_some_and(|later| {
            later.phase == Phase::Backward
                && later.start > run.start
                && !recomputed_between(recomputations, run.end, later.start)
        })
    }) {
        // Kept past its backward pass and freed by a later one: a tensor the graph that backward
        // pass built (`create_graph=True`) saved, and the backward pass through that graph let
        // go: a gradient penalty's, second-order meta-learning's (batch 27's StyleGAN2 R1 and
        // MAML: 4.62 and 1.05 GiB "unknown"). Not where a checkpoint's recomputation cut one
        // pass in two (batch 25's CLIP: its backward temporaries).
        Category::Activation
    } else if m.recompute {
        // A checkpoint's recomputed forward, still held after the backward pass that needed it:
        // no gradient (`ckpttry`'s modified checkpoint).
        Category::Retained
    } else {
        Category::Gradient
    }
}

/// Which of `runs` (in trace order, not overlapping) holds event `e`.
fn run_index_at(runs: &[PhaseRun], e: u32) -> Option<usize> {
    let k = runs.partition_point(|r| r.start <= e).checked_sub(1)?;
    (e < runs[k].end).then_some(k)
}

/// The run of `runs` that holds event `e`.
fn run_at(runs: &[PhaseRun], e: u32) -> Option<&PhaseRun> {
    run_index_at(runs, e).map(|k| &runs[k])
}

/// Whether event `e` falls in an optimizer step.
fn in_an_optimizer_step(runs: &[PhaseRun], e: u32) -> bool {
    run_at(runs, e).is_some_and(|r| r.phase == Phase::Optimizer)
}

/// Where the trace begins, as the blocks from before it need it.
#[derive(Clone, Copy)]
struct TraceStart {
    /// The first allocation with a stack made outside an optimizer step: where a trace that
    /// begins inside a step leaves it (or its first allocation when it begins elsewhere). The
    /// optimizer's temporaries from before the trace are freed by then; its state is not.
    outside_the_optimizer: Option<u32>,
    /// The backward pass or optimizer step the trace begins inside (its first allocation with a
    /// stack is that run's): only there can a block from before the trace be a temporary.
    began_in: Option<PhaseRun>,
}

fn trace_start(device: &Device, runs: &[PhaseRun]) -> TraceStart {
    let trace = &device.trace;
    let Some(first) = (0..trace.len())
        .find(|&i| trace.action[i] == Action::Alloc && trace.stack[i] != NO_STACK)
        .map(|i| i as u32)
    else {
        return TraceStart {
            outside_the_optimizer: None,
            began_in: None,
        };
    };
    let began_in = runs.first().copied().filter(|r| r.start == first);
    let outside_the_optimizer = match began_in {
        Some(r) if r.phase == Phase::Optimizer => (r.end < trace.len() as u32).then_some(r.end),
        _ => Some(first),
    };
    TraceStart {
        outside_the_optimizer,
        began_in,
    }
}

/// Per backward pass (in order), where its iteration is over: the end of the next optimizer
/// step or the start of the next backward pass, whichever comes first; `None` when the trace
/// ends first.
fn iteration_ends(runs: &[PhaseRun]) -> Vec<Option<u32>> {
    let mut ends = Vec::new();
    let mut upcoming: Option<u32> = None;
    // From the last run back: the next optimizer step's end, or the next backward's start.
    for r in runs.iter().rev() {
        match r.phase {
            Phase::Optimizer => upcoming = Some(r.end),
            Phase::Backward => {
                ends.push(upcoming);
                upcoming = Some(r.start);
            }
            Phase::Forward => {}
        }
    }
    ends.reverse();
    ends
}

/// The category of a block alive before the trace began, from its stack (the final segments and
/// free events carry the allocation's) and its free, if any. Never freed and with no stack, it
/// is taken for a weight (made before history was recorded, as a model is); with a stack that
/// names no model loading, it is not: a state-only recording's KV cache or a ring-buffered
/// trace's leaked blocks have stacks too, and say nothing of weights.
fn before_the_trace(
    m: StackMarks,
    has_stack: bool,
    freed: Option<u32>,
    runs: &[PhaseRun],
    start: TraceStart,
) -> Category {
    let first_optimizer_step = runs
        .iter()
        .find(|r| r.phase == Phase::Optimizer)
        .map(|r| r.start);
    match freed {
        _ if m.workspace => Category::Workspace,
        _ if m.accumulate_grad => Category::Gradient,
        None if m.optimizer => Category::OptimizerState,
        None if m.backward => Category::Gradient,
        // Freed at or after the optimizer step: a gradient that `zero_grad` released.
        Some(f) if m.backward && first_optimizer_step.is_some_and(|s| f >= s) => Category::Gradient,
        // Made by the optimizer, alive past the step the trace may begin in: replaced state.
        Some(f)
            if m.optimizer && !m.backward && start.outside_the_optimizer.is_some_and(|o| f > o) =>
        {
            Category::OptimizerState
        }
        // Freed by the trace's first backward pass, where the trace began before it (in the
        // forward pass): held into that pass and freed by it, what the forward pass saved for
        // it; that pass's own temporaries were made in the trace (batch 30's held-out audit: a
        // ring buffer begun at the end of a forward pass, its 11.0 GiB of saved tensors
        // "unknown", told as weights or a cache loaded before recording).
        Some(f)
            if !m.optimizer
                && start.began_in.is_none()
                && runs
                    .first()
                    .is_some_and(|r| r.phase == Phase::Backward && r.start <= f && f < r.end) =>
        {
            Category::Activation
        }
        // Freed in the pass or step the trace began inside: that phase's temporary. Freed
        // later, it outlived its phase, and what it was the trace does not show.
        Some(f)
            if start
                .began_in
                .is_some_and(|r| f < r.end && (r.phase == Phase::Backward) == m.backward)
                && (m.backward || m.optimizer) =>
        {
            Category::Temporary
        }
        None if m.grad_buffer => Category::Gradient,
        // Never freed, made where the optimizer is built: its master weights or state.
        None if m.optimizer_constructor => Category::OptimizerState,
        // Never freed: weights and buffers, unless the stack says it was made for something else.
        None if m.parameter_init || m.model_load || (!has_stack && m == StackMarks::default()) => {
            Category::Parameter
        }
        _ => Category::Unknown,
    }
}

/// The category msMemScope's owner names, where it names one (`PTA@gradient` → gradient).
pub fn from_owner(owner: &str) -> Option<Category> {
    owner
        .split('@')
        .skip(1)
        .find_map(|level| {
            Some(match level.to_ascii_lowercase().as_str() {
                "weight" | "weights" | "parameter" | "parameters" => Category::Parameter,
                "gradient" | "gradients" | "grad" => Category::Gradient,
                "optimizer_state" | "optimizer" | "optimizer_states" => Category::OptimizerState,
                "activation" | "activations" => Category::Activation,
                "workspace" => Category::Workspace,
                _ => return None,
            })
        })
        .or_else(|| {
            owner
                .starts_with("PTA_WORKSPACE")
                .then_some(Category::Workspace)
        })
}

#[cfg(test)]
mod tests {
    use super::{Category, Phase, classify, from_owner, gradients_allowed};
    use crate::r#gen::{Scenario, generate_loaded};
    use rustc_hash::FxHashMap;

    /// fp32 gradients of 16-bit weights count where they are most of what the weights left
    /// without a gradient would have; one stray block of twice some weight's size does not.
    #[test]
    fn gradients_of_twice_a_weight_s_size_need_most_of_the_weights() {
        let map = |pairs: &[(u64, usize)]| pairs.iter().copied().collect::<FxHashMap<_, _>>();
        // Ten 8-byte weights, ten 16-byte gradients: all fp32 gradients.
        let all = gradients_allowed(&map(&[(16, 10)]), &map(&[(8, 10)]));
        assert_eq!(all.get(&16), Some(&10));
        // One 16-byte block beside ten 8-byte weights and a 1000-byte one: a stray block.
        let stray = gradients_allowed(&map(&[(16, 1)]), &map(&[(8, 10), (1000, 1)]));
        assert_eq!(stray.get(&16), Some(&0));
        // Same-size gradients are one per weight, first.
        let same = gradients_allowed(&map(&[(8, 12)]), &map(&[(8, 10)]));
        assert_eq!(same.get(&8), Some(&10));
    }

    #[test]
    fn msmemscope_owners_name_categories() {
        assert_eq!(from_owner("PTA@gradient@ops"), Some(Category::Gradient));
        assert_eq!(
            from_owner("PTA@optimizer_state"),
            Some(Category::OptimizerState)
        );
        assert_eq!(from_owner("PTA_WORKSPACE"), Some(Category::Workspace));
        assert_eq!(from_owner("PTA"), None);
        assert_eq!(from_owner("CANN@HCCL"), None);
    }

    #[test]
    fn a_generated_training_loop_has_every_training_category() {
        let (_, loaded) = generate_loaded(Scenario::Steady, 20_000, 1);
        let device = &loaded.snapshot.devices[0];
        let c = classify(&loaded.snapshot, device, &loaded.replays[0]);
        assert_eq!(c.of_lifetime.len(), loaded.replays[0].lifetimes.len());
        for want in [
            Category::Parameter,
            Category::Activation,
            Category::Temporary,
        ] {
            assert!(c.of_lifetime.contains(&want), "no {want:?}");
        }
        assert!(c.runs.iter().any(|r| r.phase == Phase::Optimizer));
    }

    /// Issue 21: an optimizer that replaces its moments every step (new per-parameter lists from
    /// a list comprehension, last step's dropped) keeps optimizer state, not temporaries: every
    /// block its list comprehension makes is state, those made before the trace (freed in its
    /// first step) too; at the peak, in a forward or backward pass, that is both moments of
    /// every parameter. The parameters, from the generator's model: 24 layers of 64 MiB of
    /// weights and two 4 KiB layer norms, and a 32,000 × 1,024 fp32 embedding.
    #[test]
    fn moments_replaced_every_step_are_optimizer_state() {
        const PARAMETER_BYTES: u64 = 24 * (64 << 20) + 24 * 2 * 4096 + 32_000 * 1024 * 4;
        for seed in 1..=2 {
            let (_, loaded) = generate_loaded(Scenario::TransformerReplacedAdam, 60_000, seed);
            let s = &loaded.snapshot;
            let replay = &loaded.replays[0];
            let c = classify(s, &s.devices[0], replay);
            let listcomp = |stack| s.stack_frames(stack).any(|f| s.str(f.name) == "<listcomp>");
            let (mut before, mut within) = (0, 0);
            for (l, &category) in replay.lifetimes.iter().zip(&c.of_lifetime) {
                if listcomp(l.stack) {
                    assert_eq!(category, Category::OptimizerState, "seed {seed}: {l:?}");
                    if l.alloc_event.is_none() {
                        before += 1;
                    } else {
                        within += 1;
                    }
                }
            }
            assert!(before > 0 && within > 0, "seed {seed}: {before} {within}");
            let peak = crate::detect::analyze(&loaded)
                .into_iter()
                .find(|f| f.kind == crate::detect::FindingKind::Peak)
                .expect("a peak");
            let state = peak
                .breakdown
                .iter()
                .find(|b| b.category == Category::OptimizerState)
                .map_or(0, |b| b.bytes);
            assert_eq!(
                state,
                2 * PARAMETER_BYTES,
                "seed {seed}: {:?}",
                peak.breakdown
            );
        }
    }
}

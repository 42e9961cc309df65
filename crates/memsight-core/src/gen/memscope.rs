//! Realistic msMemScope recordings (`memsight gen --format memscope`): training steps on several
//! NPUs, written as msMemScope's writer writes them (rows of a block grouped at its FREE, never-
//! freed blocks and SYSTEM rows at the end, `fprintf`-style quoting), as CSV or as the `.db`.
//!
//! Each device runs the same loop, with its own addresses:
//! - weights (`PTA@model@weight`) at the start, optimizer state (`PTA@model@optimizer_state`)
//!   at the first optimizer step, both kept: the owners msMemScope's optimizer-step hook gives
//!   them (`python/msmemscope/optimizer_step_hook.py`);
//! - per step (an MSTX `step start` range): a forward pass whose layers allocate activations
//!   and a temporary workspace (`PTA@ops@aten`: an operator's, as msMemScope names a block an
//!   `ATen` operator touched), a backward pass that reads and frees them and allocates gradients
//!   (`PTA@model@gradient`), an optimizer step reading the gradients, then
//!   `zero_grad` freeing them; many operators that allocate nothing (views, detach), as real
//!   traces have;
//! - injected: a leak (one 256 KiB block a step from `train.py(88): cache_append`, never freed),
//!   an early allocation (allocated at the step's start, first used in the optimizer step), a late
//!   deallocation (last used in the second layer, freed at the step's end) and a temporarily idle
//!   block (used, then untouched for six steps).
//!
//! The truth (`Truth`) is written beside: the injected call sites and allocation ids, and each
//! device's peak allocated bytes as recorded and as it would be with the early block allocated at
//! its first use and the late one freed at its last.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::allocator::Allocator;
use crate::model::Action;

const MIB: u64 = 1 << 20;
/// Device memory the allocator may reserve (no OOM in these runs).
const CAPACITY_BYTES: u64 = 60 << 30;
/// The whole device (an Atlas 800T A2's 64 GiB), and what CANN's runtime and HCCL hold of it
/// outside the pool, as msMemScope's SNAPSHOT rows measure it.
const DEVICE_TOTAL_BYTES: u64 = 64 << 30;
const OUTSIDE_POOL_BYTES: u64 = 2560 * MIB;
/// Layers of the model.
const LAYERS: usize = 24;
/// Operators that allocate nothing, after each layer's own.
const QUIET_OPS: usize = 4;
/// Steps a block stays untouched to be temporarily idle (6 steps of ~250 operators: > 3,000).
const IDLE_STEPS: usize = 14;

pub struct MemscopeOptions {
    /// Rows to write in all, over every device (at least one step a device).
    pub events: usize,
    pub devices: u32,
    pub seed: u64,
    /// Write the `.db` instead of CSV.
    pub db: bool,
}

/// What the generator injected, per device.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceTruth {
    pub device: u32,
    pub steps: usize,
    pub rows: usize,
    pub peak_allocated_bytes: u64,
    /// The peak with the early block allocated at its first use and the late one freed after its
    /// last.
    pub peak_allocated_if_used_tightly_bytes: u64,
    pub leak_blocks: usize,
    pub leak_bytes: u64,
    pub early_allocation_ids: Vec<u64>,
    pub late_deallocation_ids: Vec<u64>,
    pub temporary_idleness_ids: Vec<u64>,
    /// Used on the device and not the pool's, at every SNAPSHOT row (one per step).
    pub outside_pool_bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Truth {
    pub leak_call_site: String,
    pub leak_owner: String,
    pub devices: Vec<DeviceTruth>,
    /// The files written, one per device.
    pub files: Vec<PathBuf>,
}

/// One row, before writing.
struct Out {
    id: u64,
    event: &'static str,
    event_type: &'static str,
    name: String,
    time_ns: i64,
    tid: u64,
    ptr: Option<u64>,
    attr: String,
    stack: String,
}

/// One device's run.
struct Run {
    device: u32,
    pid: u64,
    next_id: u64,
    next_allocation: u64,
    alloc: Allocator,
    /// Rows written so far, in the writer's order.
    written: Vec<Out>,
    /// A live block's rows, written at its FREE: by address.
    pending: rustc_hash::FxHashMap<u64, (u64, Vec<Out>)>,
    /// HAL rows of live segments, written when freed or at the end.
    hal_pending: rustc_hash::FxHashMap<u64, Vec<Out>>,
    reserved_bytes: u64,
    used_bytes: u64,
    /// Allocated bytes were the early block allocated at first use, the late one freed at last.
    tight_bytes: u64,
    truth: DeviceTruth,
    rng: u64,
}

impl Run {
    fn now_ns(&self) -> i64 {
        1_764_753_083_000_000_000 + self.alloc.clock_us * 1000 + i64::from(self.device)
    }

    fn row(&mut self, event: &'static str, event_type: &'static str, name: &str) -> Out {
        let us = 3 + (self.next_rand() % 20) as i64;
        self.alloc.tick(us);
        self.next_id += 1;
        Out {
            id: self.next_id,
            event,
            event_type,
            name: name.to_string(),
            time_ns: self.now_ns(),
            tid: self.pid,
            ptr: None,
            attr: String::new(),
            stack: String::new(),
        }
    }

    fn next_rand(&mut self) -> u64 {
        // xorshift: reproducible from the seed, no dependency.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// An operator that allocates nothing.
    fn quiet_op(&mut self, name: &str) {
        let start = self.row("OP_LAUNCH", "ATEN_START", name);
        self.written.push(start);
        let end = self.row("OP_LAUNCH", "ATEN_END", name);
        self.written.push(end);
    }

    fn op_start(&mut self, name: &str) {
        let row = self.row("OP_LAUNCH", "ATEN_START", name);
        self.written.push(row);
    }

    fn op_end(&mut self, name: &str) {
        let row = self.row("OP_LAUNCH", "ATEN_END", name);
        self.written.push(row);
    }

    /// Turns what the allocator recorded into HAL rows.
    fn drain_segments(&mut self) {
        let events: Vec<_> = self.alloc.trace.drain(..).collect();
        for e in events {
            match e.action {
                Action::SegmentAlloc => {
                    let mut row = self.row("MALLOC", "HAL", "N/A");
                    self.next_allocation += 1;
                    row.ptr = Some(e.addr);
                    row.attr = format!(
                        "{{allocation_id:{},addr:0x{:016x},size:{}}}",
                        self.next_allocation, e.addr, e.size
                    );
                    self.reserved_bytes += e.size;
                    self.hal_pending.insert(e.addr, vec![row]);
                }
                Action::SegmentFree => {
                    let mut row = self.row("FREE", "HAL", "N/A");
                    row.ptr = Some(e.addr);
                    let rows = self.hal_pending.remove(&e.addr).unwrap_or_default();
                    let id = rows.first().map_or(0, |r| {
                        r.attr
                            .split("allocation_id:")
                            .nth(1)
                            .and_then(|t| t.split(',').next())
                            .and_then(|t| t.parse().ok())
                            .unwrap_or(0)
                    });
                    row.attr = format!(
                        "{{allocation_id:{id},addr:0x{:016x},size:{}}}",
                        e.addr, e.size
                    );
                    self.reserved_bytes -= e.size;
                    self.written.extend(rows);
                    self.written.push(row);
                }
                _ => {}
            }
        }
    }

    /// A PTA block of `requested` bytes; its allocation id and address.
    fn malloc(&mut self, requested: u64, owner: &str, stack: &str, tight: bool) -> (u64, u64) {
        let addr = self
            .alloc
            .malloc(requested, 0, None)
            .expect("the capacity holds every generated run");
        self.drain_segments();
        let size = self.alloc.config.round(requested);
        self.used_bytes += size;
        if tight {
            self.tight_bytes += size;
        }
        self.truth.peak_allocated_bytes = self.truth.peak_allocated_bytes.max(self.used_bytes);
        self.truth.peak_allocated_if_used_tightly_bytes = self
            .truth
            .peak_allocated_if_used_tightly_bytes
            .max(self.tight_bytes);
        self.next_allocation += 1;
        let id = self.next_allocation;
        let mut row = self.row("MALLOC", "PTA", "N/A");
        row.ptr = Some(addr);
        row.attr = format!(
            "{{allocation_id:{id},addr:0x{addr:016x},size:{size},total:{},used:{},owner:{owner}}}",
            self.reserved_bytes, self.used_bytes
        );
        row.stack = stack.to_string();
        self.pending.insert(addr, (id, vec![row]));
        (id, addr)
    }

    /// An ACCESS of the block at `addr` by the operator `op`.
    fn access(&mut self, addr: u64, op: &str, write: bool) {
        let Some(id) = self.pending.get(&addr).map(|(id, _)| *id) else {
            return;
        };
        let mut row = self.row("ACCESS", if write { "WRITE" } else { "READ" }, op);
        row.ptr = Some(addr);
        row.attr = format!(
            "{{allocation_id:{id},addr:0x{addr:016x},size:16384,type:PTA,dtype:torch.float16,shape:torch.Size([8,1024])}}"
        );
        if let Some((_, rows)) = self.pending.get_mut(&addr) {
            rows.push(row);
        }
    }

    fn free(&mut self, addr: u64, tight: bool) {
        let Some((id, rows)) = self.pending.remove(&addr) else {
            return;
        };
        let size = rows
            .first()
            .and_then(|r| r.attr.split("size:").nth(1))
            .and_then(|t| t.split(',').next())
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(0);
        self.alloc.free(addr);
        self.used_bytes -= size;
        if tight {
            self.tight_bytes -= size;
        }
        let mut row = self.row("FREE", "PTA", "N/A");
        row.ptr = Some(addr);
        row.attr = format!(
            "{{allocation_id:{id},addr:0x{addr:016x},size:{size},total:{},used:{}}}",
            self.reserved_bytes, self.used_bytes
        );
        self.written.extend(rows);
        self.written.push(row);
        self.drain_segments();
    }

    /// msMemScope's `take_snapshot()`: the pool's figures and the whole device's.
    fn snapshot(&mut self) {
        let mut row = self.row("SNAPSHOT", "SNAPSHOT", "Memory Snapshot");
        let used = self.reserved_bytes + OUTSIDE_POOL_BYTES;
        row.attr = format!(
            "{{reserved:{},max_reserved:{},allocated:{},max_allocated:{},total:{DEVICE_TOTAL_BYTES},free:{},device_rate:{:.2},reserved_rate:{:.2}}}",
            self.reserved_bytes,
            self.reserved_bytes,
            self.used_bytes,
            self.truth.peak_allocated_bytes,
            DEVICE_TOTAL_BYTES - used,
            used as f64 / DEVICE_TOTAL_BYTES as f64 * 100.0,
            self.used_bytes as f64 / (self.reserved_bytes.max(1)) as f64 * 100.0
        );
        self.written.push(row);
    }

    fn mstx(&mut self, event_type: &'static str) {
        let row = self.row("MSTX", event_type, "\"step start\"");
        self.written.push(row);
    }

    /// The tight figure of a block allocated or freed at another moment than in the recording.
    fn tight_add(&mut self, bytes: u64) {
        self.tight_bytes += bytes;
        self.truth.peak_allocated_if_used_tightly_bytes = self
            .truth
            .peak_allocated_if_used_tightly_bytes
            .max(self.tight_bytes);
    }
}

const STACK_LAYER: &str = "\"model.py(41): forward\ntrain.py(60): train_step\n\"";
const STACK_GRAD: &str =
    "\"torch/autograd/graph.py(825): _engine_run_backward\ntrain.py(63): train_step\n\"";
const STACK_LEAK: &str = "\"train.py(88): cache_append\ntrain.py(61): train_step\n\"";
const STACK_EARLY: &str = "\"train.py(55): prepare_buffers\ntrain.py(59): train_step\n\"";
const STACK_LATE: &str =
    "\"model.py(30): embed\nmodel.py(40): forward\ntrain.py(60): train_step\n\"";
const STACK_IDLE: &str = "\"train.py(52): make_lookup\ntrain.py(59): train_step\n\"";
const STACK_WEIGHT: &str = "\"model.py(12): __init__\ntrain.py(20): main\n\"";
const STACK_OPT: &str = "\"torch/optim/adam.py(94): _init_group\ntrain.py(66): train_step\n\"";

/// One device's rows for about `budget` rows.
#[expect(
    clippy::too_many_lines,
    reason = "one training step, in the order a real one runs: forward, leak, backward, optimizer"
)]
fn run_device(device: u32, budget: usize, seed: u64) -> Run {
    let mut run = Run {
        device,
        pid: 3_100_000 + u64::from(device),
        next_id: 0,
        next_allocation: 0,
        alloc: Allocator::with_config(
            0x12c0_0000_0000 + (u64::from(device) << 36),
            CAPACITY_BYTES,
            crate::allocator::Config {
                pad_bytes: 32,
                ..crate::allocator::Config::default()
            },
            usize::MAX,
            0,
        ),
        written: Vec::new(),
        pending: rustc_hash::FxHashMap::default(),
        hal_pending: rustc_hash::FxHashMap::default(),
        reserved_bytes: 0,
        used_bytes: 0,
        tight_bytes: 0,
        truth: DeviceTruth {
            device,
            outside_pool_bytes: OUTSIDE_POOL_BYTES,
            ..DeviceTruth::default()
        },
        rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(device + 1),
    };
    let start = run.row("SYSTEM", "START_TRACE", "N/A");
    run.written.push(start);
    // Weights: one per layer, kept.
    let weights: Vec<u64> = (0..LAYERS)
        .map(|_| {
            run.malloc(8 * MIB, "PTA@model@weight", STACK_WEIGHT, true)
                .1
        })
        .collect();
    let mut optimizer_state: Vec<u64> = Vec::new();
    let mut idle: Option<(u64, u64, usize)> = None;
    let mut step = 0;
    while run.written.len() + run.pending.values().map(|(_, r)| r.len()).sum::<usize>() < budget
        || step == 0
    {
        run.mstx("Range_start");
        run.snapshot();
        // Early: allocated now, first used in the optimizer step (tight: allocated there).
        let (early_id, early) = run.malloc(48 * MIB, "PTA@ops@aten", STACK_EARLY, false);
        run.truth.early_allocation_ids.push(early_id);
        // Temporarily idle: used now, again IDLE_STEPS steps later, then freed.
        if idle.is_none() {
            let (id, addr) = run.malloc(MIB, "PTA@ops@aten", STACK_IDLE, true);
            run.op_start("aten.index_select.default");
            run.access(addr, "aten.index_select.default", true);
            run.op_end("aten.index_select.default");
            idle = Some((id, addr, step));
        }
        let mut activations = Vec::with_capacity(LAYERS);
        let mut late = None;
        for (layer, &weight) in weights.iter().enumerate() {
            let op = "aten.addmm.default";
            run.op_start(op);
            let workspace = run
                .malloc(4 * MIB + 512, "PTA@ops@aten", STACK_LAYER, true)
                .1;
            let activation = run.malloc(16 * MIB, "PTA@ops@aten", STACK_LAYER, true).1;
            run.access(weight, op, false);
            // Each layer reads the one before it, as a real forward pass does.
            if let Some(&input) = activations.last() {
                run.access(input, op, false);
            }
            run.access(activation, op, true);
            run.free(workspace, true);
            run.op_end(op);
            activations.push(activation);
            if layer == 0 {
                // Late: written by the first layer, read by the second, freed at the step's end.
                let (id, addr) = run.malloc(40 * MIB, "PTA@ops@aten", STACK_LATE, true);
                run.op_start("aten.embedding.default");
                run.access(addr, "aten.embedding.default", true);
                run.op_end("aten.embedding.default");
                run.truth.late_deallocation_ids.push(id);
                late = Some(addr);
            }
            if layer == 1
                && let Some(addr) = late
            {
                run.op_start("aten.add.Tensor");
                run.access(addr, "aten.add.Tensor", false);
                run.op_end("aten.add.Tensor");
                // Tight: freed right after this last use.
                run.tight_bytes -= 40 * MIB + 512;
            }
            for q in 0..QUIET_OPS {
                run.quiet_op(if q % 2 == 0 {
                    "aten.view.default"
                } else {
                    "aten.detach.default"
                });
            }
        }
        // The leak: one block a step, kept.
        run.op_start("aten.cat.default");
        let leaked = run.malloc(256 * 1024, "PTA@ops@aten", STACK_LEAK, true).1;
        run.access(leaked, "aten.cat.default", true);
        run.op_end("aten.cat.default");
        run.truth.leak_blocks += 1;
        run.truth.leak_bytes += run.alloc.config.round(256 * 1024);
        // Backward: gradients allocated, activations read and freed.
        let mut grads = Vec::with_capacity(LAYERS);
        for activation in activations.into_iter().rev() {
            let op = "aten.mm.default";
            run.op_start(op);
            let grad = run
                .malloc(8 * MIB, "PTA@model@gradient", STACK_GRAD, true)
                .1;
            run.access(activation, op, false);
            run.access(grad, op, true);
            run.free(activation, true);
            run.op_end(op);
            grads.push(grad);
            for _ in 0..QUIET_OPS {
                run.quiet_op("aten.detach.default");
            }
        }
        // The optimizer step: state at the first, gradients read, the early block first used.
        run.op_start("aten._foreach_add_.List");
        if optimizer_state.is_empty() {
            for _ in 0..2 * LAYERS {
                optimizer_state.push(
                    run.malloc(8 * MIB, "PTA@model@optimizer_state", STACK_OPT, true)
                        .1,
                );
            }
        }
        for &grad in &grads {
            run.access(grad, "aten._foreach_add_.List", false);
        }
        run.tight_add(48 * MIB + 512);
        run.access(early, "aten._foreach_add_.List", true);
        run.op_end("aten._foreach_add_.List");
        run.op_start("aten.zero_.default");
        for grad in grads {
            run.free(grad, true);
        }
        run.free(early, true);
        if let Some(addr) = late {
            run.free(addr, false);
        }
        run.op_end("aten.zero_.default");
        if let Some((id, addr, since)) = idle
            && step >= since + IDLE_STEPS
        {
            run.truth.temporary_idleness_ids.push(id);
            run.op_start("aten.index_select.default");
            run.access(addr, "aten.index_select.default", false);
            run.op_end("aten.index_select.default");
            run.free(addr, true);
            idle = None;
        }
        run.mstx("Range_end");
        step += 1;
    }
    run.truth.steps = step;
    // Blocks never freed and segments never released: at the end, as the writer does.
    let mut live: Vec<(u64, Vec<Out>)> = run.pending.drain().map(|(_, v)| v).collect();
    live.sort_by_key(|(id, _)| *id);
    for (_, rows) in live {
        run.written.extend(rows);
    }
    let mut hal: Vec<Vec<Out>> = run.hal_pending.drain().map(|(_, v)| v).collect();
    hal.sort_by_key(|rows| rows.first().map_or(0, |r| r.id));
    for rows in hal {
        run.written.extend(rows);
    }
    let stop_trace = run.row("SYSTEM", "STOP_TRACE", "N/A");
    run.written.push(stop_trace);
    run.truth.rows = run.written.len();
    run
}

const HEADER: &str = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

fn csv_line(run: &Run, r: &Out, line: &mut String) {
    line.clear();
    let attr = if r.attr.is_empty() {
        String::new()
    } else {
        format!("\"{}\"", r.attr)
    };
    let device = if r.event == "SYSTEM" {
        "N/A".to_string()
    } else {
        run.device.to_string()
    };
    let ptr = r
        .ptr
        .map_or_else(|| "N/A".to_string(), |p| format!("0x{p:016x}"));
    let _ = writeln!(
        line,
        "{},{},{},{},{},{},{},{device},{ptr},{attr},{},",
        r.id, r.event, r.event_type, r.name, r.time_ns, run.pid, r.tid, r.stack
    );
}

/// Writes the recording under `output`: a folder laid out as msMemScope lays it out (one
/// `msmemscope_{PID}_{ts}_ascend/device_N/dump/memscope_dump_{ts}.csv` or `.db` per device), and
/// `memsight-truth.json` in it. Returns the truth.
pub fn write(
    output: &Path,
    options: &MemscopeOptions,
) -> Result<Truth, crate::output::OutputError> {
    let io = |path: &Path, e: String| crate::output::OutputError::Io {
        path: path.to_path_buf(),
        message: e,
    };
    let devices = options.devices.max(1);
    let budget = options.events / devices as usize;
    let runs: Vec<Run> = {
        use rayon::prelude::*;
        (0..devices)
            .into_par_iter()
            .map(|d| run_device(d, budget, options.seed))
            .collect()
    };
    let mut truth = Truth {
        leak_call_site: "train.py(88): cache_append".into(),
        leak_owner: "PTA@ops@aten".into(),
        ..Truth::default()
    };
    for run in &runs {
        let dir = output
            .join(format!("msmemscope_{}_20251203120000_ascend", 3_100_000))
            .join(format!("device_{}", run.device))
            .join("dump");
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e.to_string()))?;
        let name = if options.db {
            "memscope_dump_20251203120000.db"
        } else {
            "memscope_dump_20251203120000.csv"
        };
        let path = dir.join(name);
        crate::output::write_whole(&path, &[], |tmp| {
            if options.db {
                write_db(tmp, run).map_err(|e| e.to_string())
            } else {
                write_csv(tmp, run).map_err(|e| e.to_string())
            }
        })?;
        truth.devices.push(run.truth.clone());
        truth.files.push(path);
    }
    let json = serde_json::to_vec_pretty(&truth).map_err(|e| io(output, e.to_string()))?;
    crate::output::write_whole(&output.join("memsight-truth.json"), &[], |tmp| {
        std::fs::write(tmp, &json).map_err(|e| e.to_string())
    })?;
    Ok(truth)
}

fn write_csv(path: &Path, run: &Run) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    writeln!(out, "{HEADER}")?;
    let mut line = String::new();
    for r in &run.written {
        csv_line(run, r, &mut line);
        out.write_all(line.as_bytes())?;
    }
    out.flush()
}

fn write_db(path: &Path, run: &Run) -> rusqlite::Result<()> {
    let mut conn = rusqlite::Connection::open(path)?;
    let columns: Vec<String> = HEADER.split(',').map(|c| format!("\"{c}\"")).collect();
    conn.execute_batch(
        "CREATE TABLE memscope_dump (\"ID\" INTEGER, \"Event\" TEXT, \"Event Type\" TEXT, \"Name\" TEXT, \
         \"Timestamp(ns)\" INTEGER, \"Process Id\" INTEGER, \"Thread Id\" INTEGER, \"Device Id\" TEXT, \
         \"Ptr\" TEXT, \"Attr\" TEXT, \"Call Stack(Python)\" TEXT, \"Call Stack(C)\" TEXT);",
    )?;
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare(&format!(
            "INSERT INTO memscope_dump ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, '')",
            columns.join(", ")
        ))?;
        for r in &run.written {
            // The database holds the attr as a JSON object of strings.
            let attr = if r.attr.is_empty() {
                String::new()
            } else {
                let pairs = crate::memscope::read::parse_attr(&r.attr).unwrap_or_default();
                let map: serde_json::Map<String, serde_json::Value> = pairs
                    .0
                    .into_iter()
                    .map(|(k, v)| (k.into_owned(), serde_json::Value::String(v.into_owned())))
                    .collect();
                serde_json::Value::Object(map).to_string()
            };
            insert.execute(rusqlite::params![
                r.id as i64,
                r.event,
                r.event_type,
                r.name,
                r.time_ns,
                run.pid as i64,
                r.tid as i64,
                if r.event == "SYSTEM" {
                    "N/A".to_string()
                } else {
                    run.device.to_string()
                },
                r.ptr
                    .map_or_else(|| "N/A".to_string(), |p| format!("0x{p:016x}")),
                attr,
                r.stack,
            ])?;
        }
    }
    tx.commit()
}

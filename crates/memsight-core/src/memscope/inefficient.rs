//! Inefficient memory, by msMemScope's own definitions (`csrc/analysis/inefficient_analyzer.cpp`
//! in `Ascend/msmemscope` at f069acfa; the line numbers are in ARCHITECTURE.md), computed from the
//! recording's ACCESS and `OP_LAUNCH` rows so that files recorded without msMemScope's analysis get
//! the flags too.
//!
//! Distance is counted in "APIs", not time: each operator start (`ATEN_START` for the PTA pool,
//! `ATB_START` for ATB) is one, and so is each MALLOC / FREE / ACCESS outside an operator. When an
//! API closes, the last API that allocated and the last that freed are remembered. Per process
//! and pool:
//! - early allocation: on an ACCESS, the block's first access in another API than its MALLOC's
//!   comes after an API that freed memory, which itself came after the MALLOC;
//! - late deallocation: on a FREE, the block's last event was an ACCESS in an earlier API, and an
//!   API that allocated memory came between the two;
//! - temporary idleness: two consecutive ACCESSes of the block more than 3,000 APIs apart.
//!
//! Only blocks whose first event is their MALLOC, in the PTA and ATB pools, are judged: not the
//! workspace (owner `PTA_WORKSPACE`, which msMemScope's CSV also writes as `PTA`), and not blocks
//! with a shadow event (`shadow:true`, made up while tracing was off; skipped at `:38-45`, which
//! leaves the block failing the check at `:192`).

use rustc_hash::FxHashMap;

use super::{EARLY_ALLOCATION, Kind, LATE_DEALLOCATION, Pool, Row, Subtype, TEMPORARY_IDLENESS};

/// APIs between two accesses beyond which a block is temporarily idle (`THREHOLD`).
pub const IDLE_APIS: u64 = 3000;

/// One process's API counter, per pool (`PidState`).
#[derive(Default)]
struct ApiState {
    api: u64,
    malloc_api: Option<u64>,
    free_api: Option<u64>,
    in_op: bool,
    /// The open API holds a MALLOC / a FREE.
    open_malloc: bool,
    open_free: bool,
}

impl ApiState {
    /// `ClassifyEventsTmp`: the API that closes remembers whether it allocated or freed.
    fn close(&mut self) {
        if self.open_malloc {
            self.malloc_api = Some(self.api);
        }
        if self.open_free {
            self.free_api = Some(self.api);
        }
        self.open_malloc = false;
        self.open_free = false;
    }
}

/// What is known of one block as its events arrive.
#[derive(Clone, Copy, Debug)]
struct BlockState {
    malloc_api: u64,
    first_other_access_api: Option<u64>,
    /// The last event's kind (ACCESS or not) and API.
    last_was_access: bool,
    last_api: u64,
    flags: u8,
}

/// The analysis running over a recording's rows in time order.
#[derive(Default)]
pub struct Analyzer {
    apis: FxHashMap<(bool, u64), ApiState>,
    blocks: FxHashMap<(u64, u64), BlockState>,
    /// Blocks left out (workspace), by process and allocation id.
    left_out: rustc_hash::FxHashSet<(u64, u64)>,
}

impl Analyzer {
    /// An operator starts (one more API) or ends (the API closes).
    fn op_launch(&mut self, row: &Row) {
        let state = self
            .apis
            .entry((row.pool == Pool::Atb, row.pid))
            .or_default();
        match row.subtype {
            Subtype::OpStart => {
                state.in_op = true;
                state.api += 1;
            }
            Subtype::OpEnd => {
                state.in_op = false;
                state.close();
            }
            _ => {}
        }
    }

    /// Feeds one row; returns the block's flags after it when the row is a judged block's
    /// MALLOC / ACCESS / FREE (key: process and allocation id).
    pub fn feed(&mut self, row: &Row) -> Option<((u64, u64), u8)> {
        if row.kind == Kind::OpLaunch {
            self.op_launch(row);
            return None;
        }
        if !matches!(row.kind, Kind::Malloc | Kind::Free | Kind::Access)
            || !matches!(row.pool, Pool::Pta | Pool::Atb)
        {
            return None;
        }
        let key = row.allocation_id().map(|id| (row.pid, id));
        if row.shadow {
            // Not counted; its block is never judged.
            if let Some(key) = key {
                self.blocks.remove(&key);
            }
            return None;
        }
        if let Some(key) = key {
            if row.kind == Kind::Malloc && row.owner_is_workspace {
                self.left_out.insert(key);
            }
            if self.left_out.contains(&key) {
                if row.kind == Kind::Free {
                    self.left_out.remove(&key);
                }
                return None;
            }
        }
        let state = self
            .apis
            .entry((row.pool == Pool::Atb, row.pid))
            .or_default();
        let standalone = !state.in_op;
        if standalone {
            state.api += 1;
        }
        match row.kind {
            Kind::Malloc => state.open_malloc = true,
            Kind::Free => state.open_free = true,
            _ => {}
        }
        let api = state.api;
        if standalone {
            state.close();
        }
        let (malloc_api, free_api) = (state.malloc_api, state.free_api);
        // Counted above; judged only with an allocation id to follow the block by.
        let key = key?;
        if row.kind == Kind::Malloc {
            self.blocks.insert(
                key,
                BlockState {
                    malloc_api: api,
                    first_other_access_api: None,
                    last_was_access: false,
                    last_api: api,
                    flags: 0,
                },
            );
            return Some((key, 0));
        }
        // A block whose MALLOC the recording does not hold is not judged.
        let block = self.blocks.get_mut(&key)?;
        if row.kind == Kind::Access {
            if block.last_was_access && api > block.last_api && api - block.last_api > IDLE_APIS {
                block.flags |= TEMPORARY_IDLENESS;
            }
            if block.first_other_access_api.is_none() && api != block.malloc_api {
                block.first_other_access_api = Some(api);
            }
            if let (Some(free), Some(first)) = (free_api, block.first_other_access_api)
                && block.malloc_api != free
                && first > free
                && block.malloc_api < free
            {
                block.flags |= EARLY_ALLOCATION;
            }
        } else if let Some(malloc) = malloc_api
            && block.last_was_access
            && block.last_api != api
            && block.last_api < malloc
            && api > malloc
        {
            block.flags |= LATE_DEALLOCATION;
        }
        block.last_was_access = row.kind == Kind::Access;
        block.last_api = api;
        let flags = block.flags;
        if row.kind == Kind::Free {
            self.blocks.remove(&key);
        }
        Some((key, flags))
    }
}

/// One flag counted both ways.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlagCounts {
    /// Flagged by msMemScope and by memsight.
    pub both: u64,
    /// Flagged by msMemScope only.
    pub recorded_only: u64,
    /// Flagged by memsight only.
    pub computed_only: u64,
}

/// How far memsight's flags (computed from the ACCESS rows) agree with the ones msMemScope wrote
/// (`inefficient_type`), on a device whose file carries both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlagAgreement {
    /// Blocks judged (each with an `allocation_id`).
    pub blocks: u64,
    /// Blocks whose three flags are the same both ways (flagged or not).
    pub same: u64,
    pub early_allocation: FlagCounts,
    pub late_deallocation: FlagCounts,
    pub temporary_idleness: FlagCounts,
}

/// The agreement on `device`; `None` unless its file carries both: flags msMemScope wrote and
/// ACCESS rows to compute them from.
pub fn agreement(device: &crate::model::Device) -> Option<FlagAgreement> {
    let uses = &device.block_use;
    let recorded = uses.iter().any(|u| u.recorded_flags != 0);
    let accessed = uses.iter().any(|u| u.first_access_event.is_some());
    if !(recorded && accessed) {
        return None;
    }
    let mut a = FlagAgreement::default();
    for u in uses {
        a.blocks += 1;
        a.same += u64::from(u.flags == u.recorded_flags);
        for (flag, counts) in [
            (EARLY_ALLOCATION, &mut a.early_allocation),
            (LATE_DEALLOCATION, &mut a.late_deallocation),
            (TEMPORARY_IDLENESS, &mut a.temporary_idleness),
        ] {
            match (u.recorded_flags & flag != 0, u.flags & flag != 0) {
                (true, true) => counts.both += 1,
                (true, false) => counts.recorded_only += 1,
                (false, true) => counts.computed_only += 1,
                (false, false) => {}
            }
        }
    }
    Some(a)
}

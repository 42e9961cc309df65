//! Detectors: each module looks for one kind of memory problem and returns plain-data
//! [`Finding`]s with the evidence behind the verdict, for every front end to render.
//!
//! One module per kind: `leak`, `fragmentation`, `stall`, `oom`, `outlier` and `settings` (which
//! reads the others' findings); `steps` finds the training steps the leak and outlier detectors
//! reason in.

pub mod fragmentation;
mod leak;
mod oom;
mod outlier;
mod settings;
mod stall;
pub mod steps;

use serde::Serialize;

use crate::Loaded;
use crate::model::{NO_STACK, StackId};

/// What a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    Leak,
    Fragmentation,
    AllocatorStall,
    Oom,
    OutlierAllocation,
    Settings,
    /// Profiler data: process memory the framework's allocator does not account for.
    UnaccountedMemory,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One diagnosis with its evidence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    pub device: u32,
    pub title: String,
    /// One sentence: what happened and why it matters.
    pub summary: String,
    /// The bytes the verdict is about (requested, freed, leaked …).
    pub bytes: u64,
    /// First and last event of the evidence (device trace indices).
    pub events: (u32, u32),
    /// The one event to show first (its pool state is the evidence), when there is one.
    pub focus_event: Option<u32>,
    /// The profiler rank the finding is about (profiler data only).
    pub rank: Option<String>,
    /// Epoch microseconds of the evidence, for data whose evidence is a time span rather than
    /// events (profiler data).
    pub time_range_us: Option<(f64, f64)>,
    /// The call stack behind it, when there is one.
    #[serde(skip)]
    pub stack: StackId,
    pub suggestion: String,
}

impl Finding {
    pub fn has_stack(&self) -> bool {
        self.stack != NO_STACK
    }
}

/// Runs every detector on every device; most severe first, then by device and first event.
pub fn analyze(loaded: &Loaded) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (device, replay) in loaded.snapshot.devices.iter().zip(&loaded.replays) {
        findings.extend(leak::detect(&loaded.snapshot, device, replay));
        findings.extend(fragmentation::detect(&loaded.snapshot, device, replay));
        findings.extend(oom::detect(&loaded.snapshot, device, replay));
        findings.extend(outlier::detect(&loaded.snapshot, device, replay));
        findings.extend(stall::detect(&loaded.snapshot, device, replay));
    }
    let advice = settings::detect(&loaded.snapshot, &findings);
    findings.extend(advice);
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.device.cmp(&b.device))
            .then(a.events.cmp(&b.events))
    });
    findings
}

#[cfg(test)]
pub(crate) mod test_support {
    pub use crate::r#gen::generate_loaded as generated;
}

//! memsight-core: the snapshot model, its loader and replay, and the snapshot generator.
//!
//! Nothing here draws: the UI crate and the command line build on these types.

pub mod allocator;
pub mod budget;
pub mod capped;
pub mod category;
pub mod detect;
pub mod device_memory;
pub mod diff;
pub mod frames;
pub mod r#gen;
pub mod lifecycle;
pub mod load;
pub mod memscope;
pub mod model;
pub mod output;
pub mod owner;
pub mod pickle;
pub mod prefault;
pub mod profiler;
mod quote;
pub mod range;
pub mod replay;
pub mod run;
pub mod segments;

pub use load::{LoadError, LoadPhase, LoadProgress, load_bytes, load_path, load_reader};
pub use model::Snapshot;
pub mod report;
pub mod testing;
pub mod units;
pub mod whatif;

pub use replay::{DeviceReplay, replay_all};

/// A loaded snapshot with its replay: what the command line and the UI work on.
#[derive(Debug)]
pub struct Loaded {
    pub snapshot: Snapshot,
    /// One per device, in the order of `snapshot.devices`.
    pub replays: Vec<DeviceReplay>,
    /// Loader and replay warnings together.
    pub warnings: Vec<model::Warning>,
}

impl Loaded {
    /// Replays every device of `snapshot` and gathers all warnings.
    pub fn new(snapshot: Snapshot) -> Self {
        let (replays, replay_warnings) = replay_all(&snapshot);
        let warnings = snapshot
            .warnings
            .iter()
            .cloned()
            .chain(replay_warnings)
            .collect();
        Self {
            snapshot,
            replays,
            warnings,
        }
    }

    /// Loads and replays the file at `path`.
    pub fn open(
        path: &std::path::Path,
        progress: Option<&LoadProgress>,
    ) -> Result<Self, LoadError> {
        let snapshot = load_path(path, progress)?;
        if let Some(p) = progress {
            p.set_phase(LoadPhase::Replaying);
        }
        Ok(Self::new(snapshot))
    }

    /// The replay of device `ordinal`.
    pub fn replay(&self, ordinal: u32) -> Option<(&model::Device, &DeviceReplay)> {
        let i = self
            .snapshot
            .devices
            .iter()
            .position(|d| d.ordinal == ordinal)?;
        Some((&self.snapshot.devices[i], &self.replays[i]))
    }
}

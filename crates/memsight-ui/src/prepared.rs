//! A loaded snapshot with what the views precompute once (off the UI thread): replays, stacking
//! orders, categories, findings, times and steps on the x axes. The views read it; it knows no
//! view, so the views and `document` (which holds the views' states) form no circle.

use egui::Color32;
use memsight_core::Loaded;
use memsight_core::category::Category;
use memsight_core::lifecycle::StackOrder;
use memsight_core::model::AnnotationStage;
use memsight_core::replay::LifetimeId;

use crate::palette::{self, ColorBy};

/// A loaded snapshot with what the views precompute once.
pub struct Prepared {
    pub loaded: Loaded,
    /// Per device, in `loaded.snapshot.devices` order: the stacking order of the lifecycle chart.
    pub orders: Vec<StackOrder>,
    /// Per device: µs since the first event, made non-decreasing (clocks can step back), when the
    /// trace has times.
    pub times: Vec<Option<Vec<f64>>>,
    /// Per device: `time_us` of the first event, when the trace has times.
    pub first_time_us: Vec<Option<i64>>,
    /// Per device: `ProfilerStep#N` spans, in order.
    pub steps: Vec<Vec<Step>>,
    /// What the detectors found, most severe first.
    pub findings: Vec<memsight_core::detect::Finding>,
    /// Per device: each lifetime's category ([`memsight_core::category`]), by lifetime id.
    pub categories: Vec<Vec<Category>>,
    /// The owners of the file (msMemScope's `owner` at its second level, `PTA@gradient`), and per
    /// device each lifetime's index into them (`u32::MAX`: none); empty for snapshots.
    pub owner_names: Vec<String>,
    pub owners: Vec<Vec<u32>>,
    /// Per device: whether its trace has an `oom` (looked up once: traces run to millions).
    pub ooms: Vec<bool>,
    /// Per device: the call sites that fill most of the chart over the whole trace (bytes ×
    /// events held), each with its own hue ([`palette::site_color`]).
    pub site_slots: Vec<rustc_hash::FxHashMap<memsight_core::model::StackId, u8>>,
}

/// The call sites of `replay` holding the most bytes × events (blocks live at the end held to
/// the last event), most first, numbered: the sites given hues of their own.
fn site_slots(
    replay: &memsight_core::replay::DeviceReplay,
) -> rustc_hash::FxHashMap<memsight_core::model::StackId, u8> {
    let end = replay.event_count() as u64;
    let mut area: rustc_hash::FxHashMap<memsight_core::model::StackId, u128> =
        rustc_hash::FxHashMap::default();
    for l in &replay.lifetimes {
        let born = l.alloc_event.map_or(0, u64::from);
        let gone = l.free_completed_event.map_or(end, u64::from);
        *area.entry(l.stack).or_default() +=
            u128::from(l.requested_size_bytes) * u128::from(gone.saturating_sub(born).max(1));
    }
    let mut sites: Vec<_> = area.into_iter().collect();
    sites.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    sites
        .into_iter()
        .take(palette::SITE_SLOTS)
        .enumerate()
        .map(|(k, (stack, _))| (stack, k as u8))
        .collect()
}

/// A `ProfilerStep#N` range on both x axes.
pub struct Step {
    pub name: String,
    /// µs since the first event.
    pub start_us: f64,
    pub end_us: f64,
    /// Event index.
    pub start_event: f64,
    pub end_event: f64,
}

/// Pairs START / END annotations of `ProfilerStep#N` (msMemScope: the device's MSTX `step start`
/// ranges) and places them on the device's axes.
fn steps(
    snapshot: &memsight_core::Snapshot,
    ordinal: u32,
    first_time_us: Option<i64>,
    times: Option<&[f64]>,
) -> Vec<Step> {
    let (Some(t0), Some(times)) = (first_time_us, times) else {
        return Vec::new();
    };
    let mut open: Vec<(&str, i64)> = Vec::new();
    let mut out = Vec::new();
    let memscope = snapshot.format.memscope;
    let mut number = 0;
    for a in snapshot
        .annotations
        .iter()
        .filter(|a| !memscope || a.device < 0 || a.device == i64::from(ordinal))
    {
        match a.stage {
            AnnotationStage::Start => open.push((&a.name, a.time_us)),
            AnnotationStage::End => {
                let Some(i) = open.iter().rposition(|(n, _)| *n == a.name) else {
                    continue;
                };
                let (name, start) = open.remove(i);
                let name = if name.starts_with("ProfilerStep") {
                    name.to_string()
                } else if memscope && name == "step start" {
                    number += 1;
                    format!("step {number}")
                } else {
                    continue;
                };
                let (start_us, end_us) = ((start - t0) as f64, (a.time_us - t0) as f64);
                let event = |us: f64| times.partition_point(|&t| t < us) as f64;
                out.push(Step {
                    name,
                    start_us,
                    end_us,
                    start_event: event(start_us),
                    end_event: event(end_us),
                });
            }
        }
    }
    out.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    out
}

impl Prepared {
    pub fn new(loaded: Loaded) -> Self {
        let orders = loaded.replays.iter().map(StackOrder::new).collect();
        let first_time_us: Vec<Option<i64>> = loaded
            .snapshot
            .devices
            .iter()
            .map(|d| d.trace.has_time().then(|| d.trace.time_us[0]))
            .collect();
        let times = loaded
            .snapshot
            .devices
            .iter()
            .zip(&first_time_us)
            .map(|(d, first)| {
                first.map(|t0| {
                    let mut latest = 0.0f64;
                    d.trace
                        .time_us
                        .iter()
                        .map(|&t| {
                            latest = latest.max((t - t0) as f64);
                            latest
                        })
                        .collect()
                })
            })
            .collect();
        let steps = first_time_us
            .iter()
            .zip(&times)
            .zip(&loaded.snapshot.devices)
            .map(
                |((&first, times), device): ((&Option<i64>, &Option<Vec<f64>>), _)| {
                    steps(&loaded.snapshot, device.ordinal, first, times.as_deref())
                },
            )
            .collect();
        let (findings, categories) = memsight_core::detect::analyze_with_categories(&loaded);
        let categories = categories.into_iter().map(|c| c.of_lifetime).collect();
        let (owner_names, owners) = lifetime_owners(&loaded);
        let ooms = loaded
            .snapshot
            .devices
            .iter()
            .map(|d| d.trace.action.contains(&memsight_core::model::Action::Oom))
            .collect();
        let site_slots = loaded.replays.iter().map(site_slots).collect();
        Self {
            loaded,
            orders,
            times,
            first_time_us,
            steps,
            findings,
            categories,
            owner_names,
            owners,
            ooms,
            site_slots,
        }
    }

    /// The colour of call site `stack`'s bands on device index `device` (the shade of its
    /// `allocation`-th block).
    pub fn site_color(
        &self,
        device: usize,
        stack: memsight_core::model::StackId,
        allocation: u32,
    ) -> Color32 {
        let slot = self
            .site_slots
            .get(device)
            .and_then(|s| s.get(&stack))
            .copied();
        palette::site_color(slot, stack, allocation)
    }

    /// Whether the file names owners (msMemScope recordings with decomposition).
    pub fn has_owners(&self) -> bool {
        !self.owner_names.is_empty()
    }

    /// Lifetime `id`'s owner on device `device` (at [`memsight_core::owner::NAMING_DEPTH`]), as an index into `owner_names`.
    pub fn owner_index(&self, device: usize, id: LifetimeId) -> Option<usize> {
        let i = *self.owners.get(device)?.get(id as usize)?;
        (i != u32::MAX).then_some(i as usize)
    }

    /// Whether device index `device` ran out of memory in its trace.
    pub fn has_oom(&self, device: usize) -> bool {
        self.ooms.get(device).copied().unwrap_or(false)
    }

    /// The category of lifetime `id` on device index `device`.
    pub fn category(&self, device: usize, id: LifetimeId) -> Category {
        self.categories
            .get(device)
            .and_then(|c| c.get(id as usize))
            .copied()
            .unwrap_or(Category::Unknown)
    }

    /// The colour of lifetime `id`'s band and block.
    pub fn band_color(&self, device: usize, id: LifetimeId, color_by: ColorBy) -> Color32 {
        match color_by {
            ColorBy::CallSite => self.site_color(
                device,
                self.loaded.replays[device].lifetimes[id as usize].stack,
                id,
            ),
            ColorBy::Category => palette::category_color(self.category(device, id), id),
            ColorBy::Owner => palette::owner_color(self.owner_index(device, id), id),
        }
    }

    /// The colour of a merged run of thin bands whose largest is `id`.
    pub fn merged_band_color(&self, device: usize, id: LifetimeId, color_by: ColorBy) -> Color32 {
        match color_by {
            ColorBy::CallSite => palette::merged(self.site_color(
                device,
                self.loaded.replays[device].lifetimes[id as usize].stack,
                0,
            )),
            ColorBy::Category => {
                palette::merged(palette::category_color(self.category(device, id), 0))
            }
            ColorBy::Owner => {
                palette::merged(palette::owner_color(self.owner_index(device, id), 0))
            }
        }
    }
}

/// The file's owners at [`memsight_core::owner::NAMING_DEPTH`] (sorted) and each device's lifetimes' indexes into them.
fn lifetime_owners(loaded: &Loaded) -> (Vec<String>, Vec<Vec<u32>>) {
    let snapshot = &loaded.snapshot;
    if !snapshot
        .devices
        .iter()
        .any(memsight_core::owner::has_owners)
    {
        return (Vec::new(), Vec::new());
    }
    let owner_of = |device: &memsight_core::model::Device, event: Option<u32>| {
        event
            .and_then(|e| snapshot.owner(&device.trace, e as usize))
            .map(|o| memsight_core::owner::at_depth(o, memsight_core::owner::NAMING_DEPTH))
    };
    let mut names: Vec<String> = snapshot
        .devices
        .iter()
        .zip(&loaded.replays)
        .flat_map(|(d, r)| {
            r.lifetimes
                .iter()
                .filter_map(move |l| owner_of(d, l.alloc_event))
        })
        .map(str::to_string)
        .collect();
    names.sort_unstable();
    names.dedup();
    let per_device = snapshot
        .devices
        .iter()
        .zip(&loaded.replays)
        .map(|(d, r)| {
            r.lifetimes
                .iter()
                .map(|l| {
                    owner_of(d, l.alloc_event).map_or(u32::MAX, |o| {
                        names
                            .binary_search_by(|n| n.as_str().cmp(o))
                            .map_or(u32::MAX, |i| i as u32)
                    })
                })
                .collect()
        })
        .collect();
    (names, per_device)
}

//! Flags leaks: blocks allocated during one training iteration that are still alive two
//! iterations later, from one call stack, in at least [`MIN_LEAKING_ITERATIONS`] iterations,
//! while the allocated low point of the iterations rises.
//!
//! Iterations come from [`super::steps`]; with fewer than [`MIN_LEAKING_ITERATIONS`] of them
//! there is no verdict, only an info finding that says so and how to record more. Parameters,
//! gradients and optimizer state ([`Category::is_model_state`]) are kept on purpose — `AdamW`'s state
//! made in the first step, gradients waiting for `zero_grad` — and are never a leak. A block
//! left behind is one still alive [`ITERATIONS_ALIVE`] iterations after its own; near the end of
//! the trace, where fewer follow, one never freed. At least one of a site's iterations must have
//! the full [`ITERATIONS_ALIVE`] after it, so the blocks of the last, unfinished iteration alone
//! never make a leak.

use rustc_hash::FxHashMap;

use crate::category::Category;
use crate::model::StackId;
use crate::units::format_bytes;

use super::steps::Steps;
use super::{DeviceContext, Finding, FindingKind, Severity, breakdown};

/// A block counts as left behind when it outlives its iteration by this many iterations.
const ITERATIONS_ALIVE: usize = 2;
/// Iterations that must each leave blocks behind from one call site (and fewest iterations for
/// any verdict).
pub const MIN_LEAKING_ITERATIONS: usize = 3;
/// The allocated low point must rise by at least this share (percent) of what the site left
/// behind between its first and its last leaking iteration.
const MIN_LOW_POINT_RISE_PERCENT: u64 = 50;

/// What one call stack left behind.
struct Site {
    iterations: Vec<usize>,
    /// Whether one of those iterations was followed by `ITERATIONS_ALIVE` whole ones.
    fully_seen: bool,
    bytes: u64,
    first: u32,
    last: u32,
    count: u64,
    by_category: Vec<(Category, u64)>,
}

pub fn detect(cx: &DeviceContext) -> Vec<Finding> {
    match &cx.steps {
        Some(steps) if steps.count() >= MIN_LEAKING_ITERATIONS => leaks(cx, steps),
        Some(steps) => vec![not_judged(cx, steps)],
        None => Vec::new(),
    }
}

/// The lowest allocated bytes within each iteration.
fn low_points(cx: &DeviceContext, steps: &Steps) -> Vec<i64> {
    let allocated = cx.replay.allocated_bytes();
    steps
        .bounds
        .windows(2)
        .map(|w| {
            allocated[w[0] as usize..(w[1] as usize).min(allocated.len())]
                .iter()
                .copied()
                .min()
                .unwrap_or(0)
        })
        .collect()
}

fn leaks(cx: &DeviceContext, steps: &Steps) -> Vec<Finding> {
    let bounds = &steps.bounds;
    let n = steps.count();
    let mut sites: FxHashMap<StackId, Site> = FxHashMap::default();
    for (l, &category) in cx.replay.lifetimes.iter().zip(&cx.categories.of_lifetime) {
        if category.is_model_state() {
            continue;
        }
        let Some(alloc) = l.alloc_event else { continue };
        let Some(k) = steps.step_of(alloc) else {
            continue;
        };
        // Alive through ITERATIONS_ALIVE later iterations, or, where the trace ends sooner,
        // never freed.
        let fully_seen = k + ITERATIONS_ALIVE < n;
        let left_behind = if fully_seen {
            l.free_completed_event
                .is_none_or(|f| f >= bounds[k + ITERATIONS_ALIVE + 1])
        } else {
            l.free_requested_event.is_none()
        };
        if !left_behind {
            continue;
        }
        let site = sites.entry(l.stack).or_insert(Site {
            iterations: Vec::new(),
            fully_seen: false,
            bytes: 0,
            first: alloc,
            last: alloc,
            count: 0,
            by_category: Vec::new(),
        });
        // Lifetimes with an alloc event come in allocation order: a site's iterations arrive sorted.
        site.fully_seen |= fully_seen;
        if site.iterations.last() != Some(&k) {
            site.iterations.push(k);
        }
        site.bytes += l.requested_size_bytes;
        site.first = site.first.min(alloc);
        site.last = site.last.max(alloc);
        site.count += 1;
        site.by_category.push((category, l.requested_size_bytes));
    }
    let lows = low_points(cx, steps);
    let mut findings: Vec<Finding> = sites
        .into_iter()
        .filter(|(_, site)| site.fully_seen && site.iterations.len() >= MIN_LEAKING_ITERATIONS)
        .filter_map(|(stack, site)| {
            let per_iteration = site.bytes / site.iterations.len() as u64;
            let (first_k, last_k) = (site.iterations[0], *site.iterations.last()?);
            // What the site left behind before its last leaking iteration must show in the low
            // points: from the first leaking iteration to the last one.
            // Measured from the iteration after the first leaking one: state made once in the
            // first iteration (optimizer state) would raise the low point once and pass for a leak.
            let from_k = first_k + 1;
            let rise = lows[last_k] - lows[from_k];
            let needed = per_iteration * (last_k - from_k) as u64 * MIN_LOW_POINT_RISE_PERCENT / 100;
            if rise <= 0 || (rise as u64) < needed {
                return None;
            }
            // However small, memory that grows every iteration runs out in the end: a warning.
            let mut f = Finding::new(FindingKind::Leak, Severity::Warning, cx.device.ordinal);
            f.title = format!(
                "Leak: {} per iteration from one call site",
                format_bytes(per_iteration as i64)
            );
            f.summary = format!(
                "{} blocks ({}) allocated in {} of the trace's {} were still alive {ITERATIONS_ALIVE} iterations \
                 later or never freed, all from the same call stack; the allocated low point rose by {} from \
                 iteration {} to iteration {} ({} to {}): memory grows by about {} every iteration.",
                site.count,
                format_bytes(site.bytes as i64),
                site.iterations.len(),
                steps.describe(),
                format_bytes(rise),
                from_k + 1,
                last_k + 1,
                format_bytes(lows[from_k]),
                format_bytes(lows[last_k]),
                format_bytes(per_iteration as i64)
            );
            f.bytes = site.bytes;
            f.events = (site.first, site.last);
            f.stack = stack;
            f.breakdown = breakdown(site.by_category);
            f.suggestion = "Something keeps a reference to these tensors (a list, a cache, a metrics accumulator): \
                            drop it, or keep scalars / CPU copies (`.item()`, `.cpu()`) instead of device tensors."
                .to_string();
            Some(f)
        })
        .collect();
    findings.sort_by_key(|f| (std::cmp::Reverse(f.bytes), f.stack));
    findings
}

/// Too few iterations for a verdict: say so, and how to record enough.
fn not_judged(cx: &DeviceContext, steps: &Steps) -> Finding {
    let mut f = Finding::new(FindingKind::Iterations, Severity::Info, cx.device.ordinal);
    let n = steps.count();
    f.title = format!(
        "A leak cannot be judged from {n} iteration{}",
        if n == 1 { "" } else { "s" }
    );
    f.summary = format!(
        "The trace holds {}. A leak shows as blocks of one iteration still alive two iterations later while the \
         allocated low point rises, which takes at least {MIN_LEAKING_ITERATIONS} iterations to see.",
        steps.describe()
    );
    f.events = (0, cx.device.trace.len().saturating_sub(1) as u32);
    f.suggestion = format!(
        "Record over at least {MIN_LEAKING_ITERATIONS} training steps: call \
         torch.cuda.memory._record_memory_history() (torch_npu: torch.npu.memory._record_memory_history()) before \
         the loop and dump the snapshot after step {MIN_LEAKING_ITERATIONS} or later."
    );
    f
}

#[cfg(test)]
mod tests {
    use crate::detect::test_support::generated;
    use crate::detect::{FindingKind, analyze};
    use crate::r#gen::Scenario;

    #[test]
    fn the_injected_leak_is_found_with_its_call_site() {
        for seed in 1..=4 {
            let (g, loaded) = generated(Scenario::Leak, 30_000, seed);
            let truth = g
                .truth
                .leak
                .as_ref()
                .expect("the leak scenario injects one");
            let leaks: Vec<_> = analyze(&loaded)
                .into_iter()
                .filter(|f| f.kind == FindingKind::Leak)
                .collect();
            assert_eq!(leaks.len(), 1, "seed {seed}: {leaks:?}");
            let s = &loaded.snapshot;
            let frames: Vec<(String, u32, String)> = s
                .stack_frames(leaks[0].stack)
                .map(|f| {
                    (
                        s.str(f.filename).to_string(),
                        f.line as u32,
                        s.str(f.name).to_string(),
                    )
                })
                .collect();
            let want: Vec<(String, u32, String)> = truth
                .stack
                .iter()
                .map(|f| (f.filename.clone(), f.line, f.name.clone()))
                .collect();
            assert_eq!(frames, want, "seed {seed}");
        }
    }

    /// A loop with no annotations and no optimizer frames to mark its iterations (the op mix
    /// varies from one to the next): the recurring low points of the allocated curve still
    /// give iterations, the leak is found at its call site, and the clean loop has none.
    #[test]
    fn without_any_marks_the_curve_still_finds_the_leak() {
        use crate::category::Phase;
        use crate::detect::DeviceContext;
        use crate::detect::steps::{self, StepSource};
        for (scenario, seed) in [1, 2, 3]
            .map(|s| (Scenario::TransformerLeak, s))
            .into_iter()
            .chain([1, 2, 3].map(|s| (Scenario::Transformer, s)))
        {
            let (g, loaded) = generated(scenario, 40_000, seed);
            let mut snapshot = loaded.snapshot.clone();
            snapshot.annotations.clear();
            let (device, replay) = (&snapshot.devices[0], &loaded.replays[0]);
            let mut cx = DeviceContext::new(&snapshot, device, replay);
            cx.categories.runs.retain(|r| r.phase != Phase::Optimizer);
            cx.steps = steps::find(&snapshot, device, replay, &cx.categories);
            let source = cx.steps.as_ref().map(|s| s.source);
            assert_eq!(source, Some(StepSource::CurveLows), "seed {seed}");
            let leaks = super::detect(&cx);
            let Some(truth) = g.truth.leak.as_ref() else {
                assert!(leaks.is_empty(), "clean seed {seed}: {leaks:#?}");
                continue;
            };
            assert_eq!(leaks.len(), 1, "seed {seed}: {leaks:#?}");
            assert!(
                truth.is_stack(&snapshot, leaks[0].stack),
                "seed {seed}: {leaks:#?}"
            );
        }
    }

    #[test]
    fn state_allocated_once_and_clean_loops_are_no_leak() {
        for scenario in [
            Scenario::Steady,
            Scenario::Fragmentation,
            Scenario::Expandable,
        ] {
            for seed in 1..=3 {
                let (_, loaded) = generated(scenario, 30_000, seed);
                let leaks: Vec<_> = analyze(&loaded)
                    .into_iter()
                    .filter(|f| f.kind == FindingKind::Leak)
                    .collect();
                assert!(
                    leaks.is_empty(),
                    "{} seed {seed}: {leaks:?}",
                    scenario.name()
                );
            }
        }
    }
}

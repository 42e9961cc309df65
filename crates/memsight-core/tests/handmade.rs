//! Small hand-written snapshots for the format variants and oddities the corpus lacks: early-2023
//! block `history`, several devices, empty traces, and each kind of warning.

use memsight_core::model::{Action, BlockState, WarningKind};

mod written;

use written::{Py, load};

fn event(action: &'static str, addr: i128, size: i128) -> Py {
    Py::Dict(vec![
        ("action", Py::Str(action)),
        ("addr", Py::Int(addr)),
        ("size", Py::Int(size)),
        ("stream", Py::Int(0)),
    ])
}

fn frames(name: &'static str) -> Py {
    Py::List(vec![Py::Dict(vec![
        ("name", Py::Str(name)),
        ("filename", Py::Str("train.py")),
        ("line", Py::Int(7)),
    ])])
}

fn segment(device: i128, address: i128, blocks: Vec<Py>) -> Py {
    Py::Dict(vec![
        ("device", Py::Int(device)),
        ("address", Py::Int(address)),
        ("total_size", Py::Int(2 << 20)),
        ("stream", Py::Int(0)),
        ("segment_type", Py::Str("small")),
        ("segment_pool_id", Py::Pair(0, 0)),
        ("blocks", Py::List(blocks)),
    ])
}

fn block(address: i128, size: i128, requested: i128, state: &'static str) -> Py {
    Py::Dict(vec![
        ("address", Py::Int(address)),
        ("size", Py::Int(size)),
        ("requested_size", Py::Int(requested)),
        ("state", Py::Str(state)),
    ])
}

fn top(segments: Vec<Py>, traces: Vec<Vec<Py>>) -> Py {
    Py::Dict(vec![
        ("segments", Py::List(segments)),
        (
            "device_traces",
            Py::List(traces.into_iter().map(Py::List).collect()),
        ),
    ])
}

const BASE: i128 = 0x7f00_0000_0000;

#[test]
fn early_2023_blocks_take_requested_size_and_frames_from_history() {
    // A legacy list of segments whose blocks have no address and no requested_size.
    let legacy_block = |size: i128, state: &'static str, real_size: i128| {
        Py::Dict(vec![
            ("size", Py::Int(size)),
            ("state", Py::Str(state)),
            (
                "history",
                Py::List(vec![Py::Dict(vec![
                    ("addr", Py::Int(0)),
                    ("real_size", Py::Int(real_size)),
                    ("frames", frames("legacy")),
                ])]),
            ),
        ])
    };
    let seg = Py::Dict(vec![
        ("device", Py::Int(0)),
        ("address", Py::Int(BASE)),
        ("total_size", Py::Int(2 << 20)),
        ("stream", Py::Int(0)),
        (
            "blocks",
            Py::List(vec![
                legacy_block(1024, "active_allocated", 1000),
                legacy_block((2 << 20) - 1024, "inactive", 0),
            ]),
        ),
    ]);
    let loaded = load(&Py::List(vec![seg]));
    let s = &loaded.snapshot;
    assert!(s.format.legacy_list);
    let blocks = &s.devices[0].segments[0].blocks;
    assert_eq!(
        (blocks[0].address, blocks[0].requested_size_bytes),
        (BASE as u64, 1000)
    );
    assert_eq!(
        blocks[1].address,
        BASE as u64 + 1024,
        "addresses computed from the sizes before"
    );
    let frame = s
        .stack_frames(blocks[0].stack)
        .next()
        .expect("frames from history");
    assert_eq!(s.str(frame.name), "legacy");
    assert_eq!(loaded.replays[0].final_totals().allocated_bytes, 1000);
}

#[test]
fn several_devices_are_kept_apart() {
    let snapshot = top(
        vec![
            segment(0, BASE, vec![block(BASE, 2 << 20, 0, "inactive")]),
            segment(
                1,
                BASE,
                vec![
                    block(BASE, 1024, 1000, "active_allocated"),
                    block(BASE + 1024, (2 << 20) - 1024, 0, "inactive"),
                ],
            ),
        ],
        vec![
            vec![
                event("segment_alloc", BASE, 2 << 20),
                event("alloc", BASE, 512),
                event("free_requested", BASE, 512),
                event("free_completed", BASE, 512),
            ],
            vec![event("alloc", BASE, 1000)],
            vec![],
        ],
    );
    let loaded = load(&snapshot);
    let devices: Vec<(u32, usize)> = loaded
        .snapshot
        .devices
        .iter()
        .map(|d| (d.ordinal, d.trace.len()))
        .collect();
    assert_eq!(
        devices,
        vec![(0, 4), (1, 1)],
        "the empty third trace is no device"
    );
    assert_eq!(loaded.snapshot.busiest_device().map(|d| d.ordinal), Some(0));
    let (_, one) = loaded.replay(1).expect("device 1");
    assert_eq!(
        (
            one.initial.allocated_bytes,
            one.final_totals().allocated_bytes
        ),
        (0, 1000)
    );
    let (_, zero) = loaded.replay(0).expect("device 0");
    assert_eq!(
        (
            zero.initial.reserved_bytes,
            zero.peak_allocated.bytes,
            zero.peak_allocated.event
        ),
        (0, 512, Some(1))
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn empty_traces_and_no_segments_load_as_no_device() {
    let loaded = load(&top(vec![], vec![vec![], vec![]]));
    assert!(loaded.snapshot.devices.is_empty());
    assert!(loaded.warnings.is_empty());
}

#[test]
fn oddities_become_warnings_and_loading_goes_on() {
    let snapshot = top(
        vec![segment(
            0,
            BASE,
            vec![
                block(BASE, 1024, 1000, "active_allocated"),
                block(BASE + 1024, (2 << 20) - 1024, 0, "inactive"),
            ],
        )],
        vec![vec![
            // Freed before anything allocated it in the trace: the ring buffer dropped its alloc.
            event("free_requested", BASE + 4096, 2048),
            event("free_completed", BASE + 4096, 2048),
            event("teleport", BASE, 1),
            event("alloc", BASE, 1000),
            // Allocated again at a live address.
            event("alloc", BASE, 1000),
        ]],
    );
    let loaded = load(&snapshot);
    let kinds: Vec<(WarningKind, u64)> =
        loaded.warnings.iter().map(|w| (w.kind, w.count)).collect();
    assert!(
        kinds.contains(&(WarningKind::FreeWithoutAlloc, 1)),
        "one block: {kinds:?}"
    );
    assert!(
        kinds.contains(&(WarningKind::UnknownAction, 1)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&(WarningKind::AllocAtLiveAddress, 1)),
        "{kinds:?}"
    );
    let t = &loaded.snapshot.devices[0].trace;
    assert_eq!(
        t.action[2].name(&loaded.snapshot.strings),
        "teleport",
        "unknown actions are kept"
    );
    assert!(matches!(t.action[2], Action::Other(_)));
    let text: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|w| w == "device 0: unknown action `teleport` kept as is (event 2)"),
        "{text:?}"
    );
}

#[test]
fn a_trace_that_allocates_more_than_its_segments_hold_is_flagged() {
    // A hand-edited file: 8 MiB allocated in a pool that never had more than 2 MiB.
    let snapshot = top(
        vec![segment(0, BASE, vec![block(BASE, 2 << 20, 0, "inactive")])],
        vec![vec![
            event("alloc", BASE, 8 << 20),
            event("free_requested", BASE, 8 << 20),
            event("free_completed", BASE, 8 << 20),
        ]],
    );
    let loaded = load(&snapshot);
    let over = loaded
        .warnings
        .iter()
        .find(|w| w.message == "allocated bytes above reserved bytes")
        .expect("flagged");
    assert_eq!(
        (over.kind, over.event, over.count),
        (WarningKind::TraceDisagreesWithSegments, Some(0), 1)
    );
    // The pool is still there to look at.
    let (device, replay) = loaded.replay(0).expect("device 0");
    let pool = replay.pool_after(device, Some(0));
    assert_eq!(
        pool.segments[0].blocks[0].state,
        BlockState::ActiveAllocated
    );
    // The doctor says so first, and the peak finding does not read as sound.
    let findings = memsight_core::detect::analyze(&loaded);
    let integrity = findings
        .iter()
        .find(|f| f.kind == memsight_core::detect::FindingKind::Integrity)
        .unwrap_or_else(|| panic!("{findings:#?}"));
    assert_eq!(integrity.severity, memsight_core::detect::Severity::Warning);
    assert!(
        integrity.summary.contains(
            "At event 0, 8.00 MiB was allocated while the segments held only 2.00 MiB (4.0×)"
        ),
        "{}",
        integrity.summary
    );
    let peak = findings
        .iter()
        .find(|f| f.kind == memsight_core::detect::FindingKind::Peak)
        .expect("a peak");
    assert!(
        peak.summary.contains("these figures may be wrong"),
        "{}",
        peak.summary
    );
}

/// XPU pointers are ≥ 2^63: LONG1 with 9 bytes.
#[test]
fn addresses_of_64_bits_load() {
    let addr: i128 = (1 << 63) + (1 << 40);
    let snapshot = top(
        vec![segment(
            0,
            addr,
            vec![
                block(addr, 1024, 1000, "active_allocated"),
                block(addr + 1024, (2 << 20) - 1024, 0, "inactive"),
            ],
        )],
        vec![vec![
            event("segment_alloc", addr, 2 << 20),
            event("alloc", addr, 1000),
        ]],
    );
    let loaded = load(&snapshot);
    let device = &loaded.snapshot.devices[0];
    assert_eq!(device.trace.addr, vec![addr as u64, addr as u64]);
    assert_eq!(device.segments[0].address, addr as u64);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let replay = &loaded.replays[0];
    assert_eq!(replay.initial.reserved_bytes, 0);
    assert_eq!(replay.final_totals().allocated_bytes, 1000);
}

/// Two devices running the same code: one call site (`moe.py:30 route`) asks 8 MiB ten times on
/// device 0 and 80 MiB ten times on device 1 (uneven routing); another asks the same on both.
/// An info finding names the imbalance; the even site is not named.
#[test]
fn one_call_site_allocating_far_more_on_one_device_is_an_imbalance() {
    use memsight_core::detect::{FindingKind, Severity, analyze};
    let with_frames =
        |action: &'static str, addr: i128, size: i128, name: &'static str, line: i128| {
            Py::Dict(vec![
                ("action", Py::Str(action)),
                ("addr", Py::Int(addr)),
                ("size", Py::Int(size)),
                ("stream", Py::Int(0)),
                (
                    "frames",
                    Py::List(vec![Py::Dict(vec![
                        ("name", Py::Str(name)),
                        ("filename", Py::Str("moe.py")),
                        ("line", Py::Int(line)),
                    ])]),
                ),
            ])
        };
    let trace = |routed: i128| {
        let mut events = Vec::new();
        for k in 0..10 {
            let addr = BASE + k * (1 << 30);
            for (action, size, name, line) in [
                ("alloc", routed, "route", 30),
                ("alloc", 4 << 20, "embed", 12),
                ("free_requested", routed, "route", 30),
                ("free_completed", routed, "route", 30),
            ] {
                let at = if name == "embed" {
                    addr + (512 << 20)
                } else {
                    addr
                };
                events.push(with_frames(action, at, size, name, line));
            }
            for action in ["free_requested", "free_completed"] {
                events.push(with_frames(
                    action,
                    addr + (512 << 20),
                    4 << 20,
                    "embed",
                    12,
                ));
            }
        }
        events
    };
    let snapshot = top(Vec::new(), vec![trace(8 << 20), trace(80 << 20)]);
    let loaded = load(&snapshot);
    assert_eq!(loaded.snapshot.devices.len(), 2);
    let findings = analyze(&loaded);
    let imbalance: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::Imbalance)
        .collect();
    assert_eq!(imbalance.len(), 1, "{findings:#?}");
    let f = imbalance[0];
    assert_eq!((f.severity, f.device), (Severity::Info, 1));
    assert_eq!(f.bytes, 10 * (72 << 20));
    assert!(
        f.title
            .contains("device 1 allocates 10× what device 0 does"),
        "{}",
        f.title
    );
    assert!(f.summary.starts_with("route (moe.py:30)"), "{}", f.summary);

    // The heavier device then runs out of memory: the two findings name each other, and the
    // imbalance is a warning.
    let mut heavy = trace(80 << 20);
    heavy.push(with_frames("oom", 0, 2 << 30, "route", 30));
    let loaded = load(&top(Vec::new(), vec![trace(8 << 20), heavy]));
    let findings = analyze(&loaded);
    let of = |kind| {
        findings
            .iter()
            .find(|f| f.kind == kind)
            .unwrap_or_else(|| panic!("{kind:?} in {findings:#?}"))
    };
    let (imbalance, oom) = (of(FindingKind::Imbalance), of(FindingKind::Oom));
    assert_eq!((imbalance.severity, oom.device), (Severity::Warning, 1));
    assert!(
        imbalance
            .summary
            .contains("Device 1 ran out of memory at event 60"),
        "{}",
        imbalance.summary
    );
    assert!(
        oom.summary
            .contains("A likely cause: the devices do not allocate alike"),
        "{}",
        oom.summary
    );
}

/// Issue 21: a snapshot of the pool alone, much of it idle, gets a finding that splits the idle
/// bytes into completely free segments (what `empty_cache()` returns) and gaps inside used ones.
#[test]
fn an_idle_pool_without_a_trace_is_reported() {
    use memsight_core::detect::{FindingKind, analyze};
    const SEGMENT: i128 = 256 << 20;
    let large = |address: i128, blocks: Vec<Py>| {
        Py::Dict(vec![
            ("device", Py::Int(0)),
            ("address", Py::Int(address)),
            ("total_size", Py::Int(SEGMENT)),
            ("stream", Py::Int(0)),
            ("segment_type", Py::Str("large")),
            ("segment_pool_id", Py::Pair(0, 0)),
            ("blocks", Py::List(blocks)),
        ])
    };
    // Four 256 MiB segments: two free, one with a 128 MiB gap, one full: 640 MiB of 1 GiB idle.
    let at = |k: i128| BASE + k * SEGMENT;
    let segments = vec![
        large(at(0), vec![block(at(0), SEGMENT, 0, "inactive")]),
        large(at(1), vec![block(at(1), SEGMENT, 0, "inactive")]),
        large(
            at(2),
            vec![
                block(at(2), 128 << 20, 128 << 20, "active_allocated"),
                block(at(2) + (128 << 20), 128 << 20, 0, "inactive"),
            ],
        ),
        large(
            at(3),
            vec![block(at(3), SEGMENT, SEGMENT, "active_allocated")],
        ),
    ];
    let loaded = load(&top(segments, Vec::new()));
    let findings = analyze(&loaded);
    let idle: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::IdleCache)
        .collect();
    assert_eq!(idle.len(), 1, "{findings:#?}");
    assert_eq!(
        idle[0].title,
        "Idle cache: 640 MiB of the 1.00 GiB reserved is in no block"
    );
    assert!(
        idle[0].summary.contains(
            "512 MiB in 2 completely free segments, and 128 MiB in free gaps inside 1 segment"
        ),
        "{}",
        idle[0].summary
    );
}

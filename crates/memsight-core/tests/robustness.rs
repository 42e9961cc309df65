//! Bad input is normal input: truncated, corrupted, hostile and odd files give errors or
//! warnings that name the file and the byte offset, never a panic or a hang.

mod common;

use std::path::Path;

use memsight_core::r#gen::{self, GenOptions, PickleWriter, Scenario};
use memsight_core::{LoadError, Loaded, load_bytes};
use rayon::prelude::*;

fn generated(scenario: Scenario, events: usize, protocol: u8) -> Vec<u8> {
    let g = r#gen::generate(&GenOptions {
        scenario,
        events,
        seed: 7,
        protocol,
        ..GenOptions::default()
    });
    g.write_pickle(Vec::new()).expect("in-memory write")
}

/// Loads and, when that works, replays and queries the pool: none of it may panic.
fn exercise(bytes: &[u8], name: &Path) -> Result<(), LoadError> {
    let loaded = Loaded::new(load_bytes(bytes, name)?);
    for (device, replay) in loaded.snapshot.devices.iter().zip(&loaded.replays) {
        let last = replay.event_count().checked_sub(1).map(|n| n as u32);
        for n in [None, Some(0), last] {
            let _ = replay.pool_after(device, n);
        }
    }
    let _ = memsight_core::report::StatsReport::new(&loaded);
    Ok(())
}

fn truncate_everywhere(bytes: &[u8], name: &Path) {
    let limit = bytes.len().min(64 * 1024);
    (0..limit).into_par_iter().for_each(|cut| {
        let err = exercise(&bytes[..cut], name).expect_err("a truncated file cannot load");
        let message = err.to_string();
        assert!(
            message.contains(&name.display().to_string()),
            "cut {cut}: {message}"
        );
        assert!(cut == 0 || message.contains("byte"), "cut {cut}: {message}");
    });
}

#[test]
fn truncating_a_generated_snapshot_at_every_offset_of_its_first_64_kib_is_an_error() {
    let bytes = generated(Scenario::Npu, 3000, 4);
    assert!(bytes.len() > 64 * 1024);
    truncate_everywhere(&bytes, Path::new("generated-npu.pickle"));
}

#[test]
fn truncating_a_real_snapshot_at_every_offset_of_its_first_64_kib_is_an_error() {
    let Some(path) = common::fixture("snapshots", "cuda_modern_compilectx.pickle") else {
        return;
    };
    let bytes = std::fs::read(&path).expect("fixture readable");
    truncate_everywhere(&bytes, &path);
}

/// A tiny deterministic generator for the flips.
fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

fn flip_bytes(bytes: &[u8], name: &Path, flips: usize, seed: u64) {
    (0..flips).into_par_iter().for_each(|k| {
        let mut state = seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut corrupted = bytes.to_vec();
        for _ in 0..=lcg(&mut state) % 4 {
            let at = (lcg(&mut state) as usize) % corrupted.len();
            corrupted[at] ^= 1 << (lcg(&mut state) % 8);
        }
        if let Err(err) = exercise(&corrupted, name) {
            assert!(
                err.to_string().contains(&name.display().to_string()),
                "{err}"
            );
        }
    });
}

#[test]
fn random_byte_flips_give_errors_or_warnings_never_a_panic() {
    flip_bytes(
        &generated(Scenario::Stall, 2000, 4),
        Path::new("generated-stall.pickle"),
        300,
        1,
    );
    let Some(path) = common::fixture("snapshots", "npu_snapshot_with_empty_cache.pkl") else {
        return;
    };
    flip_bytes(
        &std::fs::read(&path).expect("fixture readable"),
        &path,
        300,
        2,
    );
}

#[test]
fn code_is_refused_and_never_run() {
    // pickle.dumps(os.system) at protocols 2 and 4: GLOBAL and STACK_GLOBAL + REDUCE.
    let global = b"\x80\x02cposix\nsystem\nq\x00.";
    let err = load_bytes(global, Path::new("evil.pkl")).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "not a memory snapshot: it contains code (the GLOBAL opcode at byte 2); nothing was executed, in evil.pkl"
    );
    let stack_global = b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94\x8c\x02id\x94\x85\x94R\x94.";
    let err = load_bytes(stack_global, Path::new("evil4.pkl")).expect_err("refused");
    assert!(
        matches!(
            err,
            LoadError::Code {
                opcode: "STACK_GLOBAL",
                offset: 28,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn odd_top_levels_and_types_are_clear_errors() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "not a memory snapshot: the file is empty"),
        (
            b"hello, this is a text file\nnot a snapshot\n",
            "not a pickle: it starts with text (\"hello, this is a text file\")",
        ),
        (
            b"Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB)\r\nAPP,1,2,3\r\n",
            "a profiler CSV given where a snapshot is expected",
        ),
        (
            b"\x80\x04K\x05.",
            "neither a snapshot dict nor a list of segments",
        ),
        (b"\x80\x01.", "unsupported pickle protocol 1"),
        (
            b"\x80\x04}\x8c\x05model\x8c\x01x\x73.",
            "a pickle, but not a memory snapshot: it has no \"segments\" or \"device_traces\" (top-level keys found: \"model\")",
        ),
        (
            b"\x80\x04}\x8c\x0ddevice_traces\x8c\x01x\x73.",
            "`device_traces` is not a list",
        ),
        (b"\x80\x04h\x07.", "memo reference 7 to nothing"),
        (
            b"\x80\x04(.",
            "a value is taken from an empty mark at byte 3",
        ),
        (b"\x80\x04I1\n.", "unsupported opcode 0x49"),
    ];
    for (bytes, expected) in cases {
        let err = load_bytes(bytes, Path::new("odd.pkl"))
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains(expected) && err.ends_with("odd.pkl"),
            "{err:?} should mention {expected:?}"
        );
    }
}

/// A trace entry whose `addr` is a string, written the way Python would.
#[test]
fn wrong_field_types_name_the_offset() {
    let mut w = PickleWriter::new(Vec::new(), 4).expect("write");
    w.begin_dict();
    w.entry("segments", |w| {
        w.begin_list();
        w.end_list();
    })
    .expect("write");
    w.entry("device_traces", |w| {
        w.begin_list();
        let _ = w.item();
        w.begin_list();
        let _ = w.item();
        w.begin_dict();
        let _ = w.entry("action", |w| w.str("alloc"));
        let _ = w.entry("addr", |w| w.str("0x7f00"));
        let _ = w.entry("size", |w| w.int(512));
        w.end_dict();
        w.end_list_item();
        w.end_list();
        w.end_list_item();
        w.end_list();
    })
    .expect("write");
    w.end_dict();
    let bytes = w.finish().expect("write");
    let err = load_bytes(&bytes, Path::new("typed.pkl"))
        .expect_err("refused")
        .to_string();
    assert!(
        err.starts_with("trace entry `addr` is not an unsigned 64-bit integer at byte "),
        "{err}"
    );
}

/// Shared containers where real files never share them would multiply work by the references.
#[test]
fn shared_trace_lists_are_refused() {
    // {"segments": [], "device_traces": [t, t]} with t = [] shared through the memo.
    let bytes =
        b"\x80\x04}\x94(\x8c\x08segments\x94]\x94\x8c\x0ddevice_traces\x94]\x94(]\x94h\x05eu.";
    let err = load_bytes(bytes, Path::new("shared.pkl"))
        .expect_err("refused")
        .to_string();
    assert!(err.contains("a device trace appears twice"), "{err}");
}

#[test]
fn a_huge_declared_length_does_not_allocate_it() {
    // BINUNICODE8 claiming 2^60 bytes in a 20-byte file.
    let bytes = b"\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x10abcdef";
    let err = load_bytes(bytes, Path::new("long.pkl")).expect_err("refused");
    assert!(matches!(err, LoadError::Truncated { .. }), "{err}");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let mut bytes = vec![0x80, 4];
    bytes.extend(std::iter::repeat_n(b']', 1_000_000));
    bytes.extend(std::iter::repeat_n(b'a', 999_999));
    bytes.push(b'.');
    // A top-level list is a legacy list of segments; its first item is no segment.
    let err = load_bytes(&bytes, Path::new("deep.pkl"))
        .expect_err("a list of lists is no snapshot")
        .to_string();
    assert_eq!(
        err,
        "a segment that is not a dict at byte 2000001, in deep.pkl"
    );
}

/// A 4 MiB action string (and a Chinese frame name of 1 MiB, cut inside a character) is cut to
/// `MAX_STRING_BYTES` with one warning that counts them: memory follows the events, not the
/// strings' lengths.
#[test]
fn huge_strings_are_cut_with_a_warning() {
    use memsight_core::pickle::MAX_STRING_BYTES;
    let action = "a".repeat(4 << 20);
    let frame_name = "内存".repeat((1 << 20) / 6);
    let mut w = PickleWriter::new(Vec::new(), 4).expect("in memory");
    w.begin_dict();
    w.entry("segments", |w| {
        w.begin_list();
        w.end_list();
    })
    .expect("in memory");
    w.entry("device_traces", |w| {
        w.begin_list();
        w.item().expect("in memory");
        w.begin_list();
        w.item().expect("in memory");
        w.begin_dict();
        w.entry("action", |w| w.str(&action)).expect("in memory");
        w.entry("addr", |w| w.int(4096)).expect("in memory");
        w.entry("size", |w| w.int(512)).expect("in memory");
        w.entry("stream", |w| w.int(0)).expect("in memory");
        w.entry("frames", |w| {
            w.begin_list();
            w.item().expect("in memory");
            w.begin_dict();
            w.entry("filename", |w| w.str("train.py"))
                .expect("in memory");
            w.entry("line", |w| w.int(1)).expect("in memory");
            w.entry("name", |w| w.str(&frame_name)).expect("in memory");
            w.end_dict();
            w.end_list_item();
            w.end_list();
        })
        .expect("in memory");
        w.end_dict();
        w.end_list_item();
        w.end_list();
        w.end_list_item();
        w.end_list();
    })
    .expect("in memory");
    w.end_dict();
    let bytes = w.finish().expect("in memory");
    let snapshot = load_bytes(&bytes, Path::new("long.pickle")).expect("loads");
    assert!(snapshot.strings.iter().all(|s| s.len() <= MAX_STRING_BYTES));
    assert!(
        snapshot
            .strings
            .iter()
            .any(|s| s.starts_with("内存内存") && s.len() > MAX_STRING_BYTES - 6)
    );
    let cut: Vec<_> = snapshot
        .warnings
        .iter()
        .filter(|w| w.message.contains("strings longer than"))
        .collect();
    assert_eq!(cut.len(), 1, "{:?}", snapshot.warnings);
    assert_eq!(cut[0].count, 2);
    assert!(
        cut[0]
            .message
            .contains(&format!("the longest: {} bytes", 4 << 20)),
        "{}",
        cut[0].message
    );
}

//! msMemScope's CSV reader on arbitrary bytes: its record splitter against the csv crate's
//! (the same fields, read in one go and in reads of 3 bytes), then the bytes written as
//! `memscope_dump_1.csv` and read as one stream and in pieces (which must agree), the model
//! built from it, its replay and every detector. Errors are fine; panics, hangs and runaway
//! memory are bugs. Run: `cargo fuzz run memscope_csv` (BENCHMARKS.md, "Fuzzing").
#![no_main]

use libfuzzer_sys::fuzz_target;
use memsight_core::Loaded;
use memsight_core::memscope::{Rows, read};

fuzz_target!(|data: &[u8]| {
    // The splitter splits as the csv crate does (flexible, no header; lines aside: the csv
    // crate numbers a record before the line ends ahead of it).
    let mut theirs = Vec::new();
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(false)
        .from_reader(data);
    let mut record = csv::ByteRecord::new();
    while reader
        .read_byte_record(&mut record)
        .expect("the csv crate reads bytes")
    {
        theirs.push(record.iter().map(<[u8]>::to_vec).collect::<Vec<_>>());
    }
    for read_bytes in [3, 1 << 20] {
        let ours: Vec<Vec<Vec<u8>>> = memsight_core::memscope::split::records(data, read_bytes)
            .into_iter()
            .map(|(_, f)| f)
            .collect();
        assert_eq!(theirs, ours, "in reads of {read_bytes}");
    }
    let dir = std::env::temp_dir().join(format!("memsight-fuzz-memscope-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let path = dir.join("memscope_dump_1.csv");
    // msMemScope's header first, so the fuzzer spends its time on rows.
    let mut file = b"ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n".to_vec();
    file.extend_from_slice(data);
    if std::fs::write(&path, file).is_err() {
        return;
    }
    // Read in pieces on threads, the file reads as one stream does: same rows, lines and error.
    let (mut stream, mut pieces) = (Rows::default(), Rows::default());
    let one = read::read_csv(&path, &mut stream).map_err(|e| e.to_string());
    let split = read::read_csv_in_pieces(&path, &mut pieces).map_err(|e| e.to_string());
    assert_eq!(one, split);
    if one.is_err() {
        // Rows read before the error are thrown away by every caller.
        return;
    }
    assert_eq!(stream.origin, pieces.origin);
    assert_eq!(stream.left_out, pieces.left_out);
    assert_eq!(stream.rows.len(), pieces.rows.len());
    for (a, b) in stream.rows.iter().zip(&pieces.rows) {
        assert_eq!(
            (a.id, a.time_raw, a.addr, a.size_bytes),
            (b.id, b.time_raw, b.addr, b.size_bytes)
        );
        let text = |rows: &Rows, id: Option<u32>| id.map(|i| rows.text(i).to_string());
        assert_eq!(text(&stream, a.stack), text(&pieces, b.stack));
    }
    if let Ok(loaded) = Loaded::open(&path, None) {
        let _ = memsight_core::detect::analyze(&loaded);
        for (device, replay) in loaded.snapshot.devices.iter().zip(&loaded.replays) {
            let _ = memsight_core::owner::bytes_by_owner(&loaded.snapshot, device, replay, None, 2);
        }
    }
});

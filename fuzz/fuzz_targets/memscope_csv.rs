//! msMemScope's CSV reader on arbitrary bytes (written as `memscope_dump_1.csv`), then the model
//! built from it, its replay and every detector. Errors are fine; panics, hangs and runaway memory
//! are bugs. Run: `cargo fuzz run memscope_csv` (BENCHMARKS.md, "Fuzzing").
#![no_main]

use libfuzzer_sys::fuzz_target;
use memsight_core::Loaded;

fuzz_target!(|data: &[u8]| {
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
    if let Ok(loaded) = Loaded::open(&path, None) {
        let _ = memsight_core::detect::analyze(&loaded);
        for (device, replay) in loaded.snapshot.devices.iter().zip(&loaded.replays) {
            let _ = memsight_core::owner::bytes_by_owner(&loaded.snapshot, device, replay, None, 2);
        }
    }
});

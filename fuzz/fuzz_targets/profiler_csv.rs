//! The profiler CSV reader on arbitrary bytes: the first byte picks the table, the rest is the
//! file. Reading and then analysing must never panic, hang or run out of memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

const TABLES: [&str; 4] = [
    "memory_record.csv",
    "operator_memory.csv",
    "npu_module_mem.csv",
    "static_op_mem.csv",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, content)) = data.split_first() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("memsight-fuzz-csv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    // Two tables when the content holds a form feed: a rank with both files.
    let mut parts = content.splitn(2, |&b| b == 0x0c);
    for (k, part) in parts.by_ref().enumerate() {
        let name = TABLES[(usize::from(pick) + k) % TABLES.len()];
        let _ = std::fs::write(dir.join(name), part);
    }
    if let Ok(run) = memsight_core::profiler::open(std::slice::from_ref(&dir)) {
        let _ = memsight_core::profiler::detect::analyze(&run);
    }
});

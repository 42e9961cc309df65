//! Generated `torch_npu` profiler folders: `memory_record.csv` (APP, PTA, GE and PTA+GE rows, as
//! the profiler writes them: MB, three decimals and a trailing tab on timestamps, CRLF) and
//! `operator_memory.csv`, with an optional allocator stall — reserved falling by gigabytes over a
//! few seconds while allocated and active stay flat — whose truth the tests check findings against.

use std::io::{self, BufWriter, Write};
use std::path::Path;

/// What to write for one rank.
#[derive(Clone, Debug)]
pub struct ProfilerGenOptions {
    /// `PTA+GE` samples (each also writes a `PTA` row; an `APP` row every 20 ms).
    pub samples: usize,
    /// Microseconds between samples.
    pub interval_us: f64,
    /// A stall: (sample where reserved starts falling, bytes it falls by, samples it takes).
    pub stall: Option<(usize, u64, usize)>,
    /// Memory the process holds beyond the allocator (APP − PTA+GE reserved).
    pub unaccounted_bytes: u64,
    pub device: u32,
    pub seed: u64,
}

impl Default for ProfilerGenOptions {
    fn default() -> Self {
        Self {
            samples: 20_000,
            interval_us: 500.0,
            stall: None,
            unaccounted_bytes: 512 << 20,
            device: 0,
            seed: 1,
        }
    }
}

/// What the generator put in: times are epoch microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfilerTruth {
    pub stall_start_us: Option<f64>,
    pub stall_end_us: Option<f64>,
    pub stall_bytes: u64,
    /// Rows written to `memory_record.csv`, header excluded.
    pub memory_record_rows: usize,
}

const MB: f64 = 1024.0 * 1024.0;
const START_US: f64 = 1_736_405_443_756_384.1;

/// Writes `memory_record.csv` and `operator_memory.csv` for one rank into `dir`.
#[expect(
    clippy::too_many_lines,
    reason = "one pass writing both files, sample by sample"
)]
pub fn write_rank(dir: &Path, options: &ProfilerGenOptions) -> io::Result<ProfilerTruth> {
    std::fs::create_dir_all(dir)?;
    let mut record = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(dir.join("memory_record.csv"))?,
    );
    let mut operators = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(dir.join("operator_memory.csv"))?,
    );
    write!(
        record,
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\r\n"
    )?;
    write!(
        operators,
        "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),Active Duration(us),\
         Allocation Total Allocated(MB),Allocation Total Reserved(MB),Allocation Total Active(MB),\
         Release Total Allocated(MB),Release Total Reserved(MB),Release Total Active(MB),Stream Ptr,Device Type\r\n"
    )?;
    let device = format!("NPU:{}", options.device);
    let stream = 1_431_569_360u64 + u64::from(options.device);
    let ge_bytes = 64.0 * MB;
    let base = 6.0 * 1024.0 * MB;
    let activations = 2.0 * 1024.0 * MB;
    let mut reserved = base + activations + 2048.0 * MB;
    let mut rows = 0;
    let mut truth = ProfilerTruth {
        stall_start_us: None,
        stall_end_us: None,
        stall_bytes: 0,
        memory_record_rows: 0,
    };
    let mut next_app_us = START_US;
    let mut rng = options.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut noise = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % 1000) as f64 / 1000.0
    };
    let steps_per_cycle = 200usize;
    let mut held = base;
    for i in 0..options.samples {
        let t = START_US + i as f64 * options.interval_us;
        let stalling = options
            .stall
            .filter(|&(at, _, len)| i >= at && i < at + len);
        let allocated = if let Some((at, _, _)) = stalling {
            // Flat through the stall: the allocator frees cached segments, nothing else moves.
            let _ = at;
            held
        } else {
            let phase = (i % steps_per_cycle) as f64 / steps_per_cycle as f64;
            let rising = if phase < 0.6 {
                phase / 0.6
            } else {
                (1.0 - phase) / 0.4
            };
            (base + activations * rising + noise() * MB).round()
        };
        held = allocated;
        if let Some((at, bytes, len)) = stalling {
            let per_sample = bytes as f64 / len as f64;
            if i == at {
                truth.stall_start_us = Some(t);
                truth.stall_bytes = bytes;
            }
            reserved -= per_sample;
            if i + 1 == at + len {
                truth.stall_end_us = Some(t);
            }
        }
        reserved = reserved.max(allocated);
        let pta = (allocated, reserved, allocated);
        for (component, (a, r, act)) in [
            ("PTA", pta),
            (
                "PTA+GE",
                (pta.0 + ge_bytes, pta.1 + ge_bytes, pta.2 + ge_bytes),
            ),
        ] {
            write!(
                record,
                "{component},{t:.3}\t,{:.10},{:.10},{:.10},{stream},{device}\r\n",
                a / MB,
                r / MB,
                act / MB
            )?;
            rows += 1;
        }
        if t >= next_app_us {
            write!(
                record,
                "APP,{t:.3}\t,,{:.10},,,{device}\r\n",
                (reserved + ge_bytes + options.unaccounted_bytes as f64) / MB
            )?;
            rows += 1;
            next_app_us += 20_000.0;
        }
        // One operator row every 10 samples, freed 5 samples later.
        if i % 10 == 0 {
            let size_kb = 1024.0 * (1.0 + (i / 10 % 16) as f64);
            write!(
                operators,
                "aten::empty_strided,{size_kb:.1},{t:.3}\t,{:.3}\t,{:.3}\t,{d:.3}\t,{d:.3}\t,{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{stream},{device}\r\n",
                t + 5.0 * options.interval_us,
                t + 5.0 * options.interval_us,
                allocated / MB,
                reserved / MB,
                allocated / MB,
                allocated / MB,
                reserved / MB,
                allocated / MB,
                d = 5.0 * options.interval_us,
            )?;
        }
    }
    record.flush()?;
    operators.flush()?;
    truth.memory_record_rows = rows;
    Ok(truth)
}

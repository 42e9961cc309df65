//! memsight: the command line. Parses arguments and calls into `memsight-core`.

mod commands;
mod diff;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    about = "Visualizer and doctor for PyTorch / torch_npu device-memory snapshots and profiler data",
    after_help = EXIT_STATUS
)]
#[command(version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("MEMSIGHT_GIT_HASH"), ")"))]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    /// Snapshots to open in the window (the bundled demo when none is given).
    files: Vec<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Per device: events by action, final and peak bytes, warnings. On a run (a folder of
    /// snapshots, one per rank and dump): one row per file.
    Stats {
        /// Snapshot pickle (optionally .gz), or a run folder; the bundled demo when omitted.
        file: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The memory pool right after one event: segments, live blocks, free gaps.
    State {
        /// Snapshot pickle (optionally .gz); the bundled demo when omitted.
        file: Option<PathBuf>,
        /// Device ordinal (default: the busiest device).
        #[arg(long)]
        device: Option<u32>,
        /// Event index (default: the final state; -1: before the first event).
        #[arg(long, allow_hyphen_values = true)]
        event: Option<i64>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Render the app (or one chart) to a PNG or JPEG without a display, then exit.
    #[command(after_help = EXIT_STATUS)]
    Screenshot {
        /// Snapshot pickle (optionally .gz) or profiler data (a rank folder, a parent of rank
        /// folders, a profiler CSV); the bundled demo when omitted.
        file: Option<PathBuf>,
        /// With --view diff: the snapshot to compare FILE with (B).
        other: Option<PathBuf>,
        /// The image to write: a name ending in .png, .jpg or .jpeg (written whole or not at all).
        #[arg(short, long)]
        output: PathBuf,
        #[arg(
            long,
            default_value = "app",
            value_parser = ["app", "timeline", "pool", "diff"],
            help = "app: the whole window; timeline or pool: that chart alone (profiler data: timeline is the memory curves); diff: the compare view of FILE and OTHER"
        )]
        view: String,
        /// Device ordinal to show (default: the busiest device).
        #[arg(long)]
        device: Option<u32>,
        /// Image width in pixels (64 to 8192).
        #[arg(long, default_value_t = 1400)]
        width: u32,
        /// Image height in pixels (64 to 8192).
        #[arg(long, default_value_t = 860)]
        height: u32,
        /// Pin the allocation that event N allocates or frees (and show the pool after it).
        #[arg(long)]
        select_event: Option<u32>,
        /// Show the pool right after event N.
        #[arg(long)]
        event: Option<u32>,
    },
    /// Run the detectors and report what they find.
    #[command(after_help = EXIT_STATUS)]
    Analyze {
        /// Snapshot pickles (optionally .gz) and profiler data (rank folders or CSVs, analysed
        /// together as one run), or one run folder of snapshots (one per rank and dump: the OOM,
        /// the heaviest rank, growth between dumps, findings alike on several ranks said once);
        /// the bundled demo when none is given.
        files: Vec<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print Markdown instead of text.
        #[arg(long)]
        markdown: bool,
        /// Exit with status 1 when a finding is at least this severe.
        #[arg(long, value_parser = ["warning", "error"])]
        fail_on: Option<String>,
    },
    /// What if: replay the trace's requests through a model of the caching allocator, under the
    /// recorded settings (how faithful the model is to this file) or changed ones.
    #[command(after_help = EXIT_STATUS)]
    Whatif {
        /// Snapshot pickle (optionally .gz); the bundled demo when omitted.
        file: Option<PathBuf>,
        /// Device ordinal (default: every device with a trace).
        #[arg(long)]
        device: Option<u32>,
        #[arg(
            long = "set",
            value_name = "KEY:VALUE",
            help = "An allocator setting to change, KEY:VALUE as in PYTORCH_CUDA_ALLOC_CONF (expandable_segments:True, max_split_size_mb:128, roundup_power2_divisions:4, garbage_collection_threshold:0.8; several with commas); repeatable. The rest stays as the file recorded it"
        )]
        set: Vec<String>,
        #[arg(
            long,
            help = "Replay without the recorded releases of cached segments (the program's empty_cache() calls)"
        )]
        no_empty_cache: bool,
        /// Device memory in bytes the allocator may reserve (default: what the file shows, from an
        /// `oom` entry or a stall; else unknown: then OOMs and stalls are not predicted).
        #[arg(long)]
        capacity: Option<u64>,
        #[arg(
            long,
            help = "Try the common settings one by one and in two common pairs (expandable segments, max_split_size_mb 128 / 512, roundup_power2_divisions 4, the recorded empty_cache() calls left out, and garbage_collection_threshold where the capacity is known), on every core, ranked by OOMs, predicted peak reserved and stalls"
        )]
        sweep: bool,
        /// Also write, per event, the recorded and predicted reserved bytes as CSV (device, event,
        /// action, recorded, predicted; one setting, not with --sweep). The model grows at the
        /// alloc that needs it, where the file shows a `segment_alloc` one event before.
        #[arg(long, value_name = "OUT.csv")]
        curve: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compare two recordings: what grew, where, and by how much (two snapshots: per call site
    /// and category at each peak; two profiler runs or ranks: per operator).
    #[command(after_help = EXIT_STATUS)]
    Diff {
        /// The first recording (A): a snapshot pickle, or profiler data (a rank folder, a parent
        /// of rank folders).
        a: PathBuf,
        /// The second recording (B), of the same kind; A again to compare two of its devices or
        /// ranks. Omitted when A is a run folder: then --device-a and --device-b are ranks.
        b: Option<PathBuf>,
        /// A's device ordinal (profiler data: rank index); default: devices paired by index.
        #[arg(long)]
        device_a: Option<u32>,
        /// B's device ordinal (profiler data: rank index).
        #[arg(long)]
        device_b: Option<u32>,
        /// A run folder: the iteration whose dumps to compare (default: the latest both ranks
        /// have).
        #[arg(long)]
        iteration: Option<u64>,
        /// Call sites (operators) to list per device (text default 20; JSON default all).
        #[arg(long)]
        top: Option<usize>,
        /// Print JSON instead of text.
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print Markdown instead of text.
        #[arg(long)]
        markdown: bool,
    },
    /// Write a realistic generated snapshot (and its FILE.truth.json ground truth), or an
    /// msMemScope recording (--format memscope: a folder as msMemScope writes it, with
    /// memsight-truth.json in it).
    Gen {
        #[arg(
            long,
            help = "Workload of a snapshot: steady, leak, fragmentation, stall, oom, npu, expandable, transformer, transformer-leak"
        )]
        scenario: Option<String>,
        #[arg(
            long,
            default_value = "snapshot",
            value_parser = ["snapshot", "memscope", "memscope-db"],
            help = "snapshot: a pickle; memscope / memscope-db: an msMemScope recording of training steps on --devices NPUs (owners, accesses, an injected leak, early, late and idle blocks), as CSV or SQLite"
        )]
        format: String,
        #[arg(
            long,
            help = "Write a run instead: a folder in torchtitan's layout (iteration_N/rankR_memory_snapshot.pickle, iteration_N_exit/ after an OOM) with memsight-run-truth.json: the last rank heavier by a known call site, rank 1 leaking across dumps, rank 0 out of memory at the last dump"
        )]
        run: bool,
        /// Ranks of a run (at least 3).
        #[arg(long, default_value_t = 8)]
        ranks: u32,
        /// Dumps per rank of a run, 10 steps apart.
        #[arg(long, default_value_t = 3)]
        iterations: u32,
        /// NPUs of an msMemScope recording.
        #[arg(long, default_value_t = 8)]
        devices: u32,
        /// Trace events to record (at least 1; default 100000, 2000 per file of a run).
        #[arg(long)]
        events: Option<usize>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Pickle protocol (4 as Python 3.8-3.13 writes, 5 as Python 3.14 does).
        #[arg(long, default_value_t = 4)]
        protocol: u8,
        /// Sequences per micro-batch (transformer scenarios: activations scale with it).
        #[arg(long, default_value_t = memsight_core::r#gen::transformer::BATCH)]
        batch: u64,
        /// Output file; a name ending in .gz is compressed.
        #[arg(short, long)]
        output: PathBuf,
    },
}

/// `gen`: a snapshot, or an msMemScope recording (`--format memscope`).
fn generate(command: Command) -> anyhow::Result<()> {
    let Command::Gen {
        scenario,
        format,
        run,
        ranks,
        iterations,
        devices,
        events,
        seed,
        protocol,
        batch,
        output,
    } = command
    else {
        unreachable!("called with `gen` only")
    };
    if run {
        return commands::generate_run((ranks, iterations, events.unwrap_or(2_000), seed), &output);
    }
    let events = events.unwrap_or(100_000);
    if format == "snapshot" {
        commands::generate(
            scenario.as_deref(),
            (events, seed, protocol, batch),
            &output,
        )
    } else {
        commands::generate_memscope(
            scenario.as_deref(),
            &format,
            (events, devices, seed),
            &output,
        )
    }
}

/// The exit status, for every command's help.
const EXIT_STATUS: &str = "Exit status: 0 success; 1 findings at or above --fail-on, or a failure while working \
                           (rendering, writing); 2 a usage or input error (a bad option, a file that cannot be \
                           read or is not a snapshot or profiler data).";

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => commands::app(cli.files),
        Some(Command::Stats { file, json }) => commands::stats(file.as_deref(), json),
        Some(Command::State {
            file,
            device,
            event,
            json,
        }) => commands::state(file.as_deref(), device, event, json),
        Some(Command::Screenshot {
            file,
            other,
            output,
            view,
            device,
            width,
            height,
            select_event,
            event,
        }) => commands::screenshot(
            (file.as_deref(), other.as_deref()),
            &output,
            &view,
            device,
            (width, height),
            (select_event, event),
        ),
        Some(Command::Analyze {
            files,
            json,
            markdown,
            fail_on,
        }) => commands::analyze(&files, json, markdown, fail_on.as_deref()),
        Some(Command::Whatif {
            file,
            device,
            set,
            no_empty_cache,
            capacity,
            sweep,
            curve,
            json,
        }) => commands::whatif(
            file.as_deref(),
            device,
            &set,
            (no_empty_cache, capacity, sweep),
            (curve.as_deref(), json),
        ),
        Some(Command::Diff {
            a,
            b,
            device_a,
            device_b,
            iteration,
            top,
            json,
            markdown,
        }) => diff::diff(
            &a,
            b.as_deref(),
            (device_a, device_b, iteration),
            top,
            (json, markdown),
        ),
        Some(command @ Command::Gen { .. }) => generate(command),
    };
    exit_code(result)
}

/// The exit status of a command's result, its error on stderr.
fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`memsight stats | head`) is the reader's choice, not a failure.
        Err(err)
            if err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(err) => {
            let status = if err
                .chain()
                .any(<dyn std::error::Error>::is::<commands::InputError>)
            {
                2
            } else {
                1
            };
            // The chain of causes, each once: errors that already quote their source (an I/O
            // error inside "cannot read FILE: …") do not repeat it.
            let mut text = err.to_string();
            for cause in err.chain().skip(1) {
                let cause = cause.to_string();
                if !text.contains(&cause) {
                    text.push_str(": ");
                    text.push_str(&cause);
                }
            }
            eprintln!("memsight: {text}");
            ExitCode::from(status)
        }
    }
}

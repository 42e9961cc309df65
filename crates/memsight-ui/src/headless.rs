//! The app prepared without a display, as `memsight screenshot` asks (a file, a device, a pinned
//! event, a view), then rendered by [`render`] (`app::screenshot`).

pub use crate::app::screenshot::{ScreenshotOptions, render};
use crate::app::{MemsightApp, View};
use crate::document::{Document, Opened, Source};
use crate::views::profiler::ProfilerDoc;

/// Loads `source` and prepares the app as `options` say (an error for a device or event that is
/// not in the file).
pub fn prepared_app(source: &Source, options: &ScreenshotOptions) -> Result<MemsightApp, String> {
    let prepared = match source.load(None)? {
        Opened::Snapshot(prepared) => *prepared,
        Opened::Profiler(prepared) => {
            if options.device.is_some() || options.select_event.is_some() || options.event.is_some()
            {
                return Err(
                    "--device, --select-event and --event apply to snapshots, not profiler data"
                        .into(),
                );
            }
            if options.view == View::Pool {
                return Err(
                    "--view pool shows a snapshot's pool; profiler data has `app` and `timeline`"
                        .into(),
                );
            }
            let mut app = MemsightApp::with_profiler(ProfilerDoc::new(source.name(), *prepared));
            app.view = options.view;
            return Ok(app);
        }
        Opened::MemscopeCompare(rows) => {
            if options.device.is_some()
                || options.select_event.is_some()
                || options.event.is_some()
                || options.view != View::App
            {
                return Err(
                    "msMemScope's comparison (memory_compare_*.csv) is a table: only --view app \
                     shows it, without --device or events"
                        .into(),
                );
            }
            let mut app = MemsightApp::with_documents(Vec::new());
            app.memscope_compares
                .push(crate::views::memscope_compare::CompareTable::new(
                    source.name(),
                    rows,
                ));
            return Ok(app);
        }
    };
    let path = match source {
        Source::Path(p) => Some(p.clone()),
        Source::Bytes { .. } | Source::Profiler(_) => None,
    };
    let mut doc = Document::new(source.name(), path, prepared);
    if let Some(d) = options.device {
        show_device(&mut doc, d)?;
    }
    if let Some(e) = options.select_event {
        let i = doc
            .device_index()
            .ok_or("the file has no device with events")?;
        let replay = &doc.data.loaded.replays[i];
        let lifetime = replay
            .event_lifetime
            .get(e as usize)
            .copied()
            .ok_or_else(|| {
                format!(
                    "event {e} is out of range: the device has {} events",
                    replay.event_count()
                )
            })?;
        if lifetime == memsight_core::replay::NO_LIFETIME {
            return Err(format!(
                "event {e} is not an alloc or free, so it selects no allocation"
            ));
        }
        doc.selection.event = Some(e);
        doc.selection.lifetime = Some(lifetime);
    }
    if let Some(e) = options.event {
        let i = doc
            .device_index()
            .ok_or("the file has no device with events")?;
        let count = doc.data.loaded.replays[i].event_count();
        if e as usize >= count {
            return Err(format!(
                "event {e} is out of range: the device has {count} events"
            ));
        }
        doc.selection.event = Some(e);
    }
    let mut app = MemsightApp::with_documents(vec![doc]);
    app.view = options.view;
    Ok(app)
}

/// Shows device `d` of `doc`; `Err` lists the devices there are.
fn show_device(doc: &mut Document, d: u32) -> Result<(), String> {
    let devices = &doc.data.loaded.snapshot.devices;
    if !devices.iter().any(|dev| dev.ordinal == d) {
        let known: Vec<String> = devices.iter().map(|dev| dev.ordinal.to_string()).collect();
        return Err(format!(
            "device {d} has no events or segments (devices: {})",
            known.join(", ")
        ));
    }
    doc.device = d;
    Ok(())
}

/// An app showing the compare view of two snapshots (`memsight screenshot --view diff A B`):
/// `options.device` on both sides, else each file's busiest device.
pub fn prepared_compare(
    a: &Source,
    b: &Source,
    options: &ScreenshotOptions,
) -> Result<MemsightApp, String> {
    let mut docs = Vec::new();
    for source in [a, b] {
        let prepared = match source.load(None)? {
            Opened::Snapshot(prepared) => *prepared,
            Opened::Profiler(_) => {
                return Err(format!(
                    "{} is profiler data: --view diff compares two snapshots (memsight diff \
                     compares profiler runs)",
                    source.name()
                ));
            }
            Opened::MemscopeCompare(_) => {
                return Err(format!(
                    "{} is msMemScope's comparison of two runs: --view diff compares two \
                     snapshots",
                    source.name()
                ));
            }
        };
        let path = source.path().map(std::path::Path::to_path_buf);
        let mut doc = Document::new(source.name(), path, prepared);
        if let Some(d) = options.device {
            show_device(&mut doc, d).map_err(|e| format!("{}: {e}", source.name()))?;
        }
        docs.push(doc);
    }
    let mut app = MemsightApp::with_documents(docs);
    app.compare(&egui::Context::default(), 0, 1);
    if let Some(error) = app.errors().pop() {
        return Err(error);
    }
    app.view = options.view;
    Ok(app)
}

//! File dialogs that always appear. The desktop's own dialog (xdg-desktop-portal through rfd,
//! which falls back to zenity) where one can answer; otherwise memsight's browser (`egui_file`),
//! drawn inside the window. Without a portal rfd returns "nothing picked" at once, exactly as if the
//! user had cancelled, so the desktop is asked only where a portal or zenity is installed, and an
//! answer of "nothing" faster than a person can click counts as a failure: the browser opens.
//! `MEMSIGHT_FILE_DIALOG=builtin` or `=desktop` overrides the choice.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use crate::app::ExportTarget;

/// "Nothing picked" sooner than this is a dialog that never showed, not a user who cancelled.
const FASTER_THAN_A_PERSON: Duration = Duration::from_millis(700);
/// "Nothing picked" sooner than this may be either: the user is told where the browser is.
const QUICK_CANCEL: Duration = Duration::from_secs(3);

/// Files the open dialog lists: snapshot pickles (plain or gzipped, `torch.save`d), profiler CSVs
/// and msMemScope recordings (`memscope_dump_*.csv` or `.db`).
pub const SNAPSHOT_EXTENSIONS: [&str; 6] = ["pickle", "pkl", "gz", "pt", "csv", "db"];

/// What a dialog is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Purpose {
    OpenSnapshots,
    OpenProfilerFolder,
    /// Save an image; `name` is the suggested file name.
    Export {
        target: ExportTarget,
        name: String,
    },
}

/// What the user picked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Picked {
    Open(Vec<PathBuf>),
    Export {
        target: ExportTarget,
        path: PathBuf,
        /// Whether the dialog itself asked before replacing the file (the desktop's does; a
        /// name memsight completed with `.png` was never asked about).
        replace_asked: bool,
    },
}

/// Which dialog to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The desktop's where it can answer, else the browser.
    Auto,
    Desktop,
    Builtin,
}

impl Backend {
    /// `MEMSIGHT_FILE_DIALOG` (`builtin`, `desktop`), else `Auto`.
    pub fn from_env() -> Self {
        match std::env::var("MEMSIGHT_FILE_DIALOG").as_deref() {
            Ok("builtin") => Self::Builtin,
            Ok("desktop") => Self::Desktop,
            _ => Self::Auto,
        }
    }
}

/// What happened this frame.
#[derive(Debug, Default)]
pub struct Outcome {
    pub picked: Option<Picked>,
    /// Why the desktop's dialog was not used, to tell the user once.
    pub note: Option<String>,
}

struct DesktopDialog {
    purpose: Purpose,
    answer: Receiver<Vec<PathBuf>>,
    started: Instant,
}

struct BuiltinDialog {
    purpose: Purpose,
    dialog: egui_file::FileDialog,
    /// The File field still to be given the keyboard (once, when the browser has been drawn):
    /// Ctrl+O then typing a name needs no click.
    focus_file_field: bool,
}

/// The browser's window (its `egui_file` id).
const BROWSER_ID: &str = "memsight-file-browser";

/// Gives the keyboard to the File field of the browser drawn last frame: its lowest text field
/// (`egui_file` sets no id on it). Whether it found one.
fn focus_file_field(ctx: &egui::Context) -> bool {
    let layer = egui::LayerId::new(egui::Order::Middle, egui::Id::unique(BROWSER_ID));
    let field = ctx.viewport(|vp| {
        vp.prev_pass
            .widgets
            .get_layer(layer)
            .filter(|w| w.enabled && w.sense.is_focusable() && w.sense.senses_drag())
            .max_by(|a, b| a.rect.top().total_cmp(&b.rect.top()))
            .map(|w| w.id)
    });
    if let Some(id) = field {
        ctx.memory_mut(|m| m.request_focus(id));
    }
    field.is_some()
}

pub struct Dialogs {
    pub backend: Backend,
    desktop: Option<DesktopDialog>,
    builtin: Option<BuiltinDialog>,
    /// The folder of the last file opened; open dialogs start there.
    pub last_dir: Option<PathBuf>,
    /// The folder of the last picture exported; export dialogs start there (else in the
    /// user's Pictures folder, not among the data).
    pub last_export_dir: Option<PathBuf>,
    /// Why the desktop's dialog is not used has been said (once a session is enough).
    told_why: bool,
}

impl Dialogs {
    /// Dialogs of `backend`, the first starting in `last_dir` (else the current folder).
    pub fn new(backend: Backend, last_dir: Option<PathBuf>) -> Self {
        Self {
            backend,
            desktop: None,
            builtin: None,
            last_dir,
            last_export_dir: None,
            told_why: false,
        }
    }

    /// True while a dialog is up (the desktop's or the browser).
    pub fn is_open(&self) -> bool {
        self.desktop.is_some() || self.builtin.is_some()
    }

    /// True while memsight's own browser is on screen.
    pub fn builtin_is_open(&self) -> bool {
        self.builtin.is_some()
    }

    /// Opens a dialog for `purpose`, unless one is already up. Returns a note when the desktop's
    /// dialog cannot be used and the browser opens instead.
    pub fn start(&mut self, purpose: Purpose) -> Option<String> {
        if self.is_open() {
            return None;
        }
        let missing = match self.backend {
            Backend::Builtin => return self.open_builtin(purpose, None),
            Backend::Desktop => None,
            Backend::Auto => desktop_dialog_missing(),
        };
        if let Some(why) = missing {
            return self.open_builtin(purpose, Some(why));
        }
        self.open_desktop(purpose);
        None
    }

    /// Opens memsight's browser whatever the desktop offers (File → Open with memsight's browser).
    pub fn start_builtin(&mut self, purpose: Purpose) {
        // A desktop dialog still waiting may answer later; its answer is then dropped.
        self.desktop = None;
        if self.builtin.is_none() {
            self.open_builtin(purpose, None);
        }
    }

    /// Polls the desktop's dialog and draws the browser; call once a frame.
    pub fn show(&mut self, ctx: &egui::Context) -> Outcome {
        let mut outcome = Outcome::default();
        if let Some(desktop) = &self.desktop {
            match desktop.answer.try_recv() {
                Ok(paths) if !paths.is_empty() => {
                    let purpose = desktop.purpose.clone();
                    self.desktop = None;
                    outcome.picked = self.picked(&purpose, paths, true);
                }
                Ok(_) | Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    let desktop = self.desktop.take().expect("checked above");
                    let took = desktop.started.elapsed();
                    if took < FASTER_THAN_A_PERSON {
                        outcome.note = self.open_builtin(
                            desktop.purpose,
                            Some("the desktop's file dialog did not open".into()),
                        );
                    } else if took < QUICK_CANCEL {
                        outcome.note = Some(
                            "the desktop's file dialog closed without a file; if it never \
                             appeared, File → Open with memsight's browser…"
                                .into(),
                        );
                    }
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    self.waiting_ui(ctx);
                    ctx.request_repaint_after(Duration::from_millis(100));
                }
            }
        }
        if let Some(builtin) = &mut self.builtin {
            if builtin.focus_file_field && focus_file_field(ctx) {
                builtin.focus_file_field = false;
            }
            builtin.dialog.show(ctx);
            match builtin.dialog.state() {
                egui_file::State::Open => {}
                egui_file::State::Selected => {
                    // The file double-clicked or typed in, when it is not one of those ticked in
                    // the list (a path typed after ticking wins); else the ticked ones.
                    let ticked: Vec<PathBuf> = builtin
                        .dialog
                        .selection()
                        .into_iter()
                        .map(Path::to_path_buf)
                        .collect();
                    let paths = match builtin.dialog.path().map(Path::to_path_buf) {
                        Some(one) if !ticked.contains(&one) => vec![one],
                        _ => ticked,
                    };
                    let purpose = builtin.purpose.clone();
                    self.builtin = None;
                    outcome.picked = self.picked(&purpose, paths, false);
                }
                egui_file::State::Closed | egui_file::State::Cancelled => self.builtin = None,
            }
        }
        outcome
    }

    /// Closes memsight's browser (Escape); the desktop's dialog closes itself.
    pub fn close_builtin(&mut self) {
        self.builtin = None;
    }

    /// What was picked; `desktop`: the desktop's dialog answered (it asks before a file is
    /// replaced).
    fn picked(&mut self, purpose: &Purpose, paths: Vec<PathBuf>, desktop: bool) -> Option<Picked> {
        let first = paths.first()?;
        let folder = if first.is_dir() {
            first.parent().unwrap_or(first)
        } else {
            first.parent()?
        };
        if matches!(purpose, Purpose::Export { .. }) {
            self.last_export_dir = Some(folder.to_path_buf());
        } else {
            self.last_dir = Some(folder.to_path_buf());
        }
        Some(match purpose {
            Purpose::OpenSnapshots | Purpose::OpenProfilerFolder => Picked::Open(paths),
            Purpose::Export { target, .. } => {
                let path = with_image_extension(first.clone());
                Picked::Export {
                    target: *target,
                    replace_asked: desktop && path == *first,
                    path,
                }
            }
        })
    }

    /// "Waiting for the desktop's file dialog", with a way out if it never shows.
    fn waiting_ui(&mut self, ctx: &egui::Context) {
        let mut switch = false;
        egui::Area::new(egui::Id::unique("memsight-waiting-for-dialog"))
            .order(egui::Order::Foreground)
            .anchor(egui::Align2::CENTER_TOP, egui::vec2(0.0, 40.0))
            .show(ctx, |ui| {
                egui::Frame::popup(ui.style()).show(ui, |ui| {
                    ui.horizontal(|ui| {
                        ui.spinner();
                        ui.label("waiting for the desktop's file dialog…");
                        switch = ui.button("use memsight's browser instead").clicked();
                    });
                });
            });
        if switch && let Some(desktop) = self.desktop.take() {
            // The desktop's dialog may still answer; its answer is then dropped.
            self.open_builtin(desktop.purpose, None);
        }
    }

    fn open_desktop(&mut self, purpose: Purpose) {
        let (send, answer) = channel();
        let mut dialog = rfd::FileDialog::new();
        if let Some(dir) = self.start_dir(&purpose) {
            dialog = dialog.set_directory(dir);
        }
        let what = purpose.clone();
        std::thread::spawn(move || {
            let picked = match what {
                Purpose::OpenSnapshots => dialog
                    .set_title("Open memory snapshots")
                    .add_filter("memory snapshot", &SNAPSHOT_EXTENSIONS[..4])
                    .add_filter("profiler CSV", &["csv"])
                    .add_filter("msMemScope recording", &["csv", "db"])
                    .add_filter("all files", &["*"])
                    .pick_files()
                    .unwrap_or_default(),
                Purpose::OpenProfilerFolder => dialog
                    .set_title("Open a run, torch_npu profiler or msMemScope folders")
                    .pick_folders()
                    .unwrap_or_default(),
                Purpose::Export { name, target } => dialog
                    .set_title(export_title(target))
                    .set_file_name(name)
                    .add_filter("PNG", &["png"])
                    .save_file()
                    .into_iter()
                    .collect(),
            };
            let _ = send.send(picked);
        });
        self.desktop = Some(DesktopDialog {
            purpose,
            answer,
            started: Instant::now(),
        });
    }

    /// Opens the browser; `why` (the desktop's dialog could not be used) comes back as a note.
    fn open_builtin(&mut self, purpose: Purpose, why: Option<String>) -> Option<String> {
        let start = self
            .start_dir(&purpose)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        let mut dialog = match &purpose {
            // One file at a time: a click puts its name in the File field (several files:
            // drop them on the window, or the desktop's dialog).
            Purpose::OpenSnapshots => egui_file::FileDialog::open_file()
                .title("Open a memory snapshot, profiler CSV or msMemScope recording")
                .show_files_filter(Box::new(|p: &Path| is_openable(p))),
            // Folders only, and the field says so.
            Purpose::OpenProfilerFolder => egui_file::FileDialog::select_folder()
                .title("Open a run, a torch_npu profiler or an msMemScope folder")
                .file_label_text("Folder:".into())
                .show_files_filter(Box::new(|p: &Path| p.is_dir())),
            // Folders and pictures: never the data files an export could be mistaken for.
            Purpose::Export { name, target } => egui_file::FileDialog::save_file()
                .title(export_title(*target))
                .default_filename(name.clone())
                .show_files_filter(Box::new(|p: &Path| {
                    p.is_dir() || crate::image_kind(p).is_ok()
                })),
        }
        .id(egui::Id::unique(BROWSER_ID))
        .initial_path(start)
        .default_size(egui::vec2(640.0, 420.0))
        .anchor(egui::Align2::CENTER_CENTER, egui::Vec2::ZERO)
        .show_rename(false)
        .show_new_folder(matches!(purpose, Purpose::Export { .. }));
        dialog.open();
        self.builtin = Some(BuiltinDialog {
            purpose,
            dialog,
            focus_file_field: true,
        });
        let why = why.filter(|_| !std::mem::replace(&mut self.told_why, true))?;
        Some(format!("{why}: using memsight's file browser"))
    }
}

/// "Export the chart as PNG", "Export the window as PNG".
fn export_title(target: ExportTarget) -> &'static str {
    match target {
        ExportTarget::Chart => "Export the chart as PNG",
        ExportTarget::Window => "Export the window as PNG",
    }
}

impl Dialogs {
    /// Where a dialog for `purpose` starts: an export where the last one went, else in the
    /// user's Pictures folder; an open where the last file came from.
    fn start_dir(&self, purpose: &Purpose) -> Option<PathBuf> {
        match purpose {
            Purpose::Export { .. } => self.last_export_dir.clone().or_else(|| {
                std::env::var_os("HOME")
                    .map(|home| PathBuf::from(home).join("Pictures"))
                    .filter(|p| p.is_dir())
            }),
            _ => self.last_dir.clone(),
        }
    }
}

/// Shown in the open dialog: snapshot pickles, profiler CSVs and msMemScope recordings (any
/// case).
pub fn is_openable(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| SNAPSHOT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// `path`, ending in `.png` unless it already names an image format memsight writes.
fn with_image_extension(path: PathBuf) -> PathBuf {
    if crate::image_kind(&path).is_ok() {
        path
    } else {
        let mut name = path.into_os_string();
        name.push(".png");
        PathBuf::from(name)
    }
}

/// Why the desktop's file dialog cannot appear, where that can be told before asking; `None`
/// when it may (rfd then either shows it or answers at once, which `show` notices).
pub fn desktop_dialog_missing() -> Option<String> {
    let on_path = |program: &str| {
        std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
    };
    if on_path("zenity") {
        return None;
    }
    let runtime_bus =
        std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| Path::new(&d).join("bus").exists());
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none() && !runtime_bus {
        return Some("no desktop file dialog (no D-Bus session bus)".into());
    }
    let data_dirs: Vec<PathBuf> = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .into_iter()
        .chain(std::env::split_paths(
            &std::env::var_os("XDG_DATA_DIRS")
                .unwrap_or_else(|| "/usr/local/share:/usr/share".into()),
        ))
        .collect();
    let portal = data_dirs.iter().any(|d| {
        d.join("dbus-1/services/org.freedesktop.portal.Desktop.service")
            .exists()
    });
    if !portal {
        return Some("no desktop file dialog (xdg-desktop-portal is not installed)".into());
    }
    let chooser = data_dirs.iter().any(|d| {
        std::fs::read_dir(d.join("xdg-desktop-portal/portals")).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|text| text.contains("FileChooser"))
            })
        })
    });
    if !chooser {
        return Some(
            "no desktop file dialog (no portal backend offers one: xdg-desktop-portal-gtk, -gnome \
             or -kde)"
                .into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_dialog_lists_snapshots_and_csvs_in_any_case() {
        for name in [
            "a.pickle",
            "中文/内存快照.PKL",
            "x.pkl.gz",
            "m.pt",
            "memory_record.csv",
        ] {
            assert!(is_openable(Path::new(name)), "{name}");
        }
        for name in ["notes.txt", "pickle", "a.png"] {
            assert!(!is_openable(Path::new(name)), "{name}");
        }
    }

    #[test]
    fn an_export_name_without_an_image_extension_gets_png() {
        assert_eq!(
            with_image_extension(PathBuf::from("/tmp/图表")),
            PathBuf::from("/tmp/图表.png")
        );
        assert_eq!(
            with_image_extension(PathBuf::from("/tmp/a.JPG")),
            PathBuf::from("/tmp/a.JPG")
        );
    }
}

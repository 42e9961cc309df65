//! Writing a file the user named, as careful command-line tools do: never over one of the files
//! being read, never by renaming over something that is not a regular file, never into a file the
//! user made read-only, and whole or not at all.
//!
//! Every file memsight writes (images, CSVs, generated snapshots and their truth) goes through
//! [`write_whole`].

use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};

/// Why an output was refused or could not be written. The first four are the user's to fix
/// (the command line exits 2 on them); `Io` is a failure while writing.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{output} is the same file as the input {input}: refusing to overwrite it")]
    SameAsInput { output: PathBuf, input: PathBuf },
    #[error(
        "{output} is inside the input folder {input}, whose files are read: refusing to replace it \
         (pick another name)"
    )]
    InsideInput { output: PathBuf, input: PathBuf },
    #[error("{0} is read-only: refusing to replace it (make it writable, or pick another name)")]
    ReadOnly(PathBuf),
    #[error("{path} is {kind}, not a file to write")]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error(
        "{0} is a link to nothing: refusing to write through it (remove the link, or pick another name)"
    )]
    DanglingLink(PathBuf),
    #[error("cannot write {path}: {message}")]
    Io { path: PathBuf, message: String },
}

impl OutputError {
    /// True when the user named an output that must not be written (exit status 2), false when
    /// writing it failed.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, Self::Io { .. })
    }
}

/// Where the bytes go.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A regular file (or none yet): a temporary file beside it, renamed over it at the end.
    Replace(PathBuf),
    /// A character device or a FIFO (`/dev/null`, `/dev/stdout`, a pipe): written as it is.
    Direct(PathBuf),
}

/// Checks `path` against `inputs` and what is there, then runs `write` on a temporary file
/// beside it (or on the device or pipe itself) and renames it into place. A symbolic link is
/// followed: the file it points to is replaced and the link stays. An existing file keeps its
/// permissions. On failure the temporary file is removed and `path` is left as it was.
pub fn write_whole(
    path: &Path,
    inputs: &[&Path],
    write: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<(), OutputError> {
    let io_error = |message: String| OutputError::Io {
        path: path.to_path_buf(),
        message,
    };
    match target(path, inputs)? {
        Target::Direct(device) => write(&device).map_err(io_error),
        Target::Replace(file) => {
            let name = file
                .file_name()
                .ok_or_else(|| io_error("not a file name".into()))?;
            let tmp = file.with_file_name(format!(
                ".{}.partial-{}",
                name.to_string_lossy(),
                std::process::id()
            ));
            let result = write(&tmp).and_then(|()| {
                if let Ok(existing) = std::fs::metadata(&file) {
                    std::fs::set_permissions(&tmp, existing.permissions())
                        .map_err(|e| e.to_string())?;
                }
                std::fs::rename(&tmp, &file).map_err(|e| e.to_string())
            });
            if result.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            result.map_err(io_error)
        }
    }
}

/// Refuses what must not be written, without writing anything (the command line checks its
/// outputs before the work that fills them).
pub fn check_output(path: &Path, inputs: &[&Path]) -> Result<(), OutputError> {
    target(path, inputs).map(|_| ())
}

fn target(path: &Path, inputs: &[&Path]) -> Result<Target, OutputError> {
    // A folder given as input (an msMemScope or profiler recording) is read whole: none of its
    // data files (CSV, SQLite) below it is replaced. Other files there (a picture beside the
    // data) are the user's to replace.
    let data_file = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv") || e.eq_ignore_ascii_case("db"));
    for input in inputs
        .iter()
        .filter(|i| i.is_dir() && data_file && path.exists())
    {
        if let (Some(folder), Some(at)) = (std::fs::canonicalize(input).ok(), resolved_parent(path))
            && at.starts_with(&folder)
        {
            return Err(OutputError::InsideInput {
                output: path.to_path_buf(),
                input: input.to_path_buf(),
            });
        }
    }
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return if std::fs::symlink_metadata(path).is_ok() {
                Err(OutputError::DanglingLink(path.to_path_buf()))
            } else {
                Ok(Target::Replace(path.to_path_buf()))
            };
        }
        Err(e) => {
            return Err(OutputError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            });
        }
    };
    for input in inputs {
        if std::fs::metadata(input).is_ok_and(|m| same_file(&meta, &m, path, input)) {
            return Err(OutputError::SameAsInput {
                output: path.to_path_buf(),
                input: input.to_path_buf(),
            });
        }
    }
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err(OutputError::NotAFile {
            path: path.to_path_buf(),
            kind: "a folder",
        });
    }
    if !kind.is_file() {
        return special_target(path, kind);
    }
    if meta.permissions().readonly() || !writable(path) {
        return Err(OutputError::ReadOnly(path.to_path_buf()));
    }
    // Through a symbolic link: the file it points to is replaced, the link stays.
    let resolved = std::fs::canonicalize(path).map_err(|e| OutputError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(Target::Replace(resolved))
}

/// Where `path` would be written, links resolved: the file itself where it exists, else its
/// folder (`.` for a bare name).
fn resolved_parent(path: &Path) -> Option<std::path::PathBuf> {
    if let Ok(file) = std::fs::canonicalize(path) {
        return Some(file);
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    std::fs::canonicalize(parent.unwrap_or(Path::new("."))).ok()
}

/// A character device or a FIFO is written into; anything else that is not a file is refused.
#[cfg(unix)]
fn special_target(path: &Path, kind: std::fs::FileType) -> Result<Target, OutputError> {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_char_device() || kind.is_fifo() {
        return Ok(Target::Direct(path.to_path_buf()));
    }
    let kind = if kind.is_block_device() {
        "a block device (a disk)"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(OutputError::NotAFile {
        path: path.to_path_buf(),
        kind,
    })
}

#[cfg(not(unix))]
fn special_target(path: &Path, _kind: std::fs::FileType) -> Result<Target, OutputError> {
    Err(OutputError::NotAFile {
        path: path.to_path_buf(),
        kind: "not a regular file",
    })
}

/// Whether this process may write `path` (root may write a file without write bits; the
/// permission bits are checked separately).
fn writable(path: &Path) -> bool {
    std::fs::OpenOptions::new().write(true).open(path).is_ok()
}

#[cfg(unix)]
fn same_file(a: &Metadata, b: &Metadata, _: &Path, _: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(_: &Metadata, _: &Metadata, a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

//! Embeds build metadata and the files of `resources/` (the bundled demo snapshot) into the binary.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=resources");
    println!("cargo:rerun-if-changed=.git/HEAD");
    // A commit moves the branch's ref, not HEAD: watch the ref HEAD names too.
    if let Ok(head) = std::fs::read_to_string(".git/HEAD")
        && let Some(reference) = head.trim().strip_prefix("ref: ")
    {
        println!("cargo:rerun-if-changed=.git/{reference}");
    }
    let git_hash = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".to_string(), |s| s.trim().to_string());
    println!("cargo:rustc-env=MEMSIGHT_GIT_HASH={git_hash}");
    println!(
        "cargo:rustc-env=MEMSIGHT_PROFILE={}",
        std::env::var("PROFILE").unwrap_or_default()
    );

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("resources");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().is_file() && e.path().extension().is_none_or(|x| x != "md"))
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut code = String::from(
        "/// Files of `resources/`, by name.\npub const RESOURCES: &[(&str, &[u8])] = &[\n",
    );
    for name in &names {
        let path = dir.join(name);
        let _ = writeln!(
            code,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("resources.rs");
    if let Err(err) = std::fs::write(&out, code) {
        panic!("cannot write {}: {err}", out.display());
    }
}

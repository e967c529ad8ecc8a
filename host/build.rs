//! Embeds the Python helpers of `python/` (mounted for task scripts at
//! `/mlrb/lib`) into the binary, so an installed `mlrb` needs no source tree,
//! and hands the code the versions it records from their sources: the WIT
//! package (`wit/mlrb-agent.wit`) and the wasmtime release (`Cargo.lock`).

use std::fmt::Write;

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "py"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut code = String::from("pub const FILES: &[(&str, &str)] = &[\n");
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path.file_name().unwrap().to_string_lossy();
        // Relative to the crate being compiled, not to this script's run: a
        // target folder reused by another checkout (CI keeps one outside
        // the clone) must embed that checkout's files, and does not rerun
        // this script when only the path changed.
        writeln!(
            code,
            "    ({name:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/python/{name}\"))),"
        )
        .unwrap();
    }
    code.push_str("];\n");
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("pylib.rs");
    std::fs::write(out, code).unwrap();
    versions();
}

/// The Rust SDK's `Cargo.toml` made standalone (for projects outside this
/// workspace): each `key.workspace = true` replaced by the workspace's value.
fn standalone_sdk_manifest(root: &std::path::Path) {
    let workspace_path = root.join("Cargo.toml");
    let sdk_path = root.join("sdk/rust/Cargo.toml");
    println!("cargo:rerun-if-changed={}", workspace_path.display());
    println!("cargo:rerun-if-changed={}", sdk_path.display());
    let workspace = std::fs::read_to_string(&workspace_path).unwrap();
    // `key = value` lines of the workspace's [workspace.package] and
    // [workspace.dependencies] tables.
    let mut inherited = std::collections::HashMap::new();
    let mut table = "";
    for line in workspace.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            table = line;
        } else if let Some((key, value)) = line.split_once(" = ")
            && (table == "[workspace.package]" || table == "[workspace.dependencies]")
        {
            inherited.insert(key.trim().to_string(), value.trim().to_string());
        }
    }
    let mut manifest = String::new();
    for line in std::fs::read_to_string(&sdk_path).unwrap().lines() {
        let key = line
            .strip_suffix(".workspace = true")
            .or_else(|| line.strip_suffix(" = { workspace = true }"));
        match key.and_then(|k| inherited.get(k.trim()).map(|v| (k, v))) {
            Some((key, value)) => writeln!(manifest, "{key} = {value}").unwrap(),
            None if key.is_some() => panic!("{}: `{line}` has no value in the workspace", sdk_path.display()),
            None => writeln!(manifest, "{line}").unwrap(),
        }
    }
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("sdk-Cargo.toml");
    std::fs::write(out, manifest).unwrap();
}

/// `MLRB_WIT_PACKAGE` and `MLRB_WASMTIME_VERSION` for `env!`, and the SDK's
/// standalone manifest.
fn versions() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let wit = root.join("wit/mlrb-agent.wit");
    let lock = root.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", wit.display());
    println!("cargo:rerun-if-changed={}", lock.display());
    let wit_text = std::fs::read_to_string(&wit).unwrap();
    let package = wit_text
        .lines()
        .find_map(|l| l.trim().strip_prefix("package "))
        .map(|p| p.trim_end_matches(';').trim().to_string())
        .expect("the WIT file names its package");
    println!("cargo:rustc-env=MLRB_WIT_PACKAGE={package}");
    let lock_text = std::fs::read_to_string(&lock).unwrap();
    let version = locked_version(&lock_text, "wasmtime").expect("wasmtime in Cargo.lock");
    println!("cargo:rustc-env=MLRB_WASMTIME_VERSION={version}");
    standalone_sdk_manifest(&root);
}

/// The version Cargo.lock holds of `name`.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let mut lines = lock.lines();
    let header = format!("name = \"{name}\"");
    lines.find(|line| *line == header)?;
    lines
        .next()
        .and_then(|v| v.strip_prefix("version = "))
        .map(|v| v.trim_matches('"').to_string())
}

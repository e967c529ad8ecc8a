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
        writeln!(code, "    ({name:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    code.push_str("];\n");
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("pylib.rs");
    std::fs::write(out, code).unwrap();
    versions();
}

/// `MLRB_WIT_PACKAGE` and `MLRB_WASMTIME_VERSION` for `env!`.
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
    let mut lines = lock_text.lines();
    let mut wasmtime = None;
    while let Some(line) = lines.next() {
        if line == "name = \"wasmtime\"" {
            wasmtime = lines
                .next()
                .and_then(|v| v.strip_prefix("version = "))
                .map(|v| v.trim_matches('"').to_string());
            break;
        }
    }
    println!(
        "cargo:rustc-env=MLRB_WASMTIME_VERSION={}",
        wasmtime.expect("wasmtime in Cargo.lock")
    );
}

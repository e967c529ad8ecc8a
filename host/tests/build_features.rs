//! The host's build compiles each dependency once: `cargo build` and `cargo
//! test` build the crates they share with the same features (a
//! dev-dependency that turns on another feature of a shared crate would make
//! the test build compile that crate, and all above it, the host included, a
//! second time), and the wasm-tools family comes in one version, wasmtime's.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each package of the host's tree with the feature sets it is built with
/// (one for its use at run time, another where a proc-macro or build script
/// uses it), following the dependency kinds `edges` (`cargo tree -e`).
fn features(edges: &str) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--locked", "-p", "mlrb-host", "--prefix", "none", "--no-dedupe"])
        .args(["-e", edges, "-f", "{p}|{f}"])
        .output()
        .expect("running cargo tree");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // `(*)` marks a package listed before; `(proc-macro)` one built for the host.
    for (package, features) in stdout.lines().filter_map(|line| line.split_once('|')) {
        let features = features.trim_end_matches(" (*)").to_string();
        packages.entry(package.trim().to_string()).or_default().insert(features);
    }
    packages
}

#[test]
fn the_tests_build_no_shared_dependency_with_other_features() {
    let built = features("normal,build");
    let tested = features("normal,build,dev");
    assert!(built.len() > 100, "the host's tree: {} packages", built.len());
    let differ: Vec<String> = built
        .iter()
        .filter_map(|(package, features)| {
            let in_tests = tested.get(package)?;
            (in_tests != features).then(|| format!("{package}: {features:?} built, {in_tests:?} tested"))
        })
        .collect();
    assert!(
        differ.is_empty(),
        "ask for these features in host/Cargo.toml's [dependencies] too:\n{}",
        differ.join("\n")
    );
}

/// The crates of the wasm-tools family: wasmtime, the agent builds and the
/// C bindings' generator each use them, and a second version of one is a
/// second compile of it and of the family above it.
const WASM_TOOLS: [&str; 6] = [
    "wasmparser",
    "wasm-encoder",
    "wasm-metadata",
    "wit-parser",
    "wit-component",
    "wast",
];

#[test]
fn the_host_builds_one_version_of_the_wasm_tools_family() {
    let built = features("normal,build");
    let mut versions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for package in built.keys() {
        let (name, version) = package.split_once(' ').unwrap_or((package, ""));
        if WASM_TOOLS.contains(&name) {
            versions.entry(name).or_default().push(version);
        }
    }
    assert!(
        versions.contains_key("wasmparser") && versions.contains_key("wit-parser"),
        "the family is in the host's tree: {versions:?}"
    );
    let twice: Vec<String> = versions
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(name, v)| format!("{name}: {}", v.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "align host/Cargo.toml's wasm-tools crates with wasmtime's version:\n{}",
        twice.join("\n")
    );
}

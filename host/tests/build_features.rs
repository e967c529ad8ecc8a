//! `cargo build` and `cargo test` build each dependency the host shares with
//! its tests once: a dev-dependency that turns on another feature of a
//! shared crate would make the test build compile that crate, and all above
//! it (the host included), a second time.

use std::collections::BTreeMap;
use std::process::Command;

/// Each package of the host's tree with the features it is built with,
/// following the dependency kinds `edges` (`cargo tree -e`).
fn features(edges: &str) -> BTreeMap<String, String> {
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
    stdout
        .lines()
        .filter_map(|line| line.split_once('|'))
        // `(*)` marks a package listed before; `(proc-macro)` one built for the host.
        .map(|(package, features)| {
            (
                package.trim().to_string(),
                features.trim_end_matches(" (*)").to_string(),
            )
        })
        .collect()
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
            (in_tests != features).then(|| format!("{package}: [{features}] built, [{in_tests}] tested"))
        })
        .collect();
    assert!(
        differ.is_empty(),
        "ask for these features in host/Cargo.toml's [dependencies] too:\n{}",
        differ.join("\n")
    );
}

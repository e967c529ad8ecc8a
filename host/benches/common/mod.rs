//! What the benchmarks share: where the repository and the built probe
//! agents are, the fixture task, and medians.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// cargo's target directory, from this benchmark's own path.
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .unwrap()
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf()
}

/// The built probe agents (`scripts/bench.sh` builds them).
pub fn probes() -> PathBuf {
    target_dir().join("wasm32-wasip2/release/examples")
}

/// The hostile fixture task, small and quick to prepare.
pub fn fixture_task() -> mlrb::task::Task {
    mlrb::task::Task::load(&root().join("tests/fixtures/tasks/hostile")).unwrap()
}

/// The median of `values` (sorted in place).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

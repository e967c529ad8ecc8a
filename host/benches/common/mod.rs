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

/// Writes `mib` MiB of real (non-sparse, incompressible) data to `path`.
pub fn write_random_file(path: &Path, mib: u32) {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut block = vec![0u8; 1 << 20];
    for i in 0..mib {
        let seed = blake3::hash(&i.to_le_bytes());
        let mut reader = blake3::Hasher::new().update(seed.as_bytes()).finalize_xof();
        reader.fill(&mut block);
        file.write_all(&block).unwrap();
    }
}

/// The workspace files and the recorder of an episode, as the host's
/// calls use them (no agent, no sandbox), in `dir` (its `ws/` is the
/// workspace); its first snapshot is taken.
pub struct Session {
    pub files: mlrb::capability::files::WorkspaceFiles,
    pub recorder: mlrb::capability::recorder::Recorder,
}

pub fn session(dir: &Path, read_only: &[String]) -> Session {
    use std::time::{Duration, Instant};
    let limits = mlrb::limits::Limits {
        max_steps: u32::MAX,
        ..mlrb::limits::Limits::default()
    };
    let files =
        mlrb::capability::files::WorkspaceFiles::open(&dir.join("ws"), &dir.join("history"), read_only, limits.clone())
            .unwrap();
    let started = Instant::now();
    let trace = mlrb::record::trace::Trace::create(&dir.join("events.jsonl"), started, u64::MAX).unwrap();
    let snapshots = mlrb::record::snapshot::SnapshotStore::create(&dir.join("snapshots"), &limits).unwrap();
    let mut recorder = mlrb::capability::recorder::Recorder::new(
        trace,
        snapshots,
        limits.max_steps,
        started,
        started + Duration::from_secs(3600),
    );
    recorder.snapshot_now(files.handle(), "start").unwrap();
    Session { files, recorder }
}

/// The host process's peak resident memory so far (`VmHWM`), in MiB.
pub fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// A session over a workspace of ten small files (in `dir`).
pub fn small_session(dir: &Path) -> Session {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    for i in 0..10 {
        std::fs::write(dir.join(format!("ws/file{i}.py")), "print('hello')\n").unwrap();
    }
    session(dir, &[])
}

/// One `list-files` tool call through the recorder, trace write included.
pub fn list_files_call(session: &mut Session) -> Vec<mlrb::capability::files::DirEntry> {
    let files = &session.files;
    session
        .recorder
        .tool_call(
            ("workspace", "list-files"),
            serde_json::json!({ "dir": "" }),
            None,
            || files.list_files(""),
        )
        .unwrap()
        .unwrap()
}

//! `mlrb serve --submissions DIR`: the submission service. Strangers upload
//! agent components with their tokens (`api`, `upload`); the runner runs
//! each accepted one on its benchmark's plan, scans, signs and verifies
//! its records (`runner`); the leaderboard ranks them. A service folder:
//!
//! ```text
//! DIR/benchmarks/*.toml     the published benchmarks (`Benchmark`)
//! DIR/service.sqlite        submitters, tokens, submissions, audit log
//! DIR/service.key[.pub]     the key every ranked result is signed with
//! DIR/agents/<sha256>.wasm  the components taken
//! DIR/runs/<id>/            each submission's bench run and records
//! DIR/references/<name>/<version>/<person>/
//!                           a person's run added as a reference
//! DIR/staging/              uploads still streaming in
//! ```

pub mod answer;
pub mod api;
pub mod board;
pub mod limiter;
pub mod records;
pub mod reference;
pub mod runner;
pub mod serving;
pub mod upload;
pub mod uploading;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Benchmark, Store};
use crate::engine::AgentEngine;

/// The files of a service folder.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The folder.
    pub dir: PathBuf,
}

impl Layout {
    /// The published benchmarks' folder.
    pub fn benchmarks(&self) -> PathBuf {
        self.dir.join("benchmarks")
    }
    /// The database.
    pub fn database(&self) -> PathBuf {
        self.dir.join("service.sqlite")
    }
    /// The signing key (its public half beside it, `.pub`).
    pub fn key(&self) -> PathBuf {
        self.dir.join("service.key")
    }
    /// Where component `sha256` is kept.
    pub fn agent(&self, sha256: &str) -> PathBuf {
        self.dir.join("agents").join(format!("{sha256}.wasm"))
    }
    /// Submission `id`'s bench run.
    pub fn run(&self, id: i64) -> PathBuf {
        self.dir.join("runs").join(id.to_string())
    }
    /// Where `person`'s reference run on benchmark `name`/`version` lies.
    pub fn reference(&self, (name, version): (&str, &str), person: &str) -> PathBuf {
        self.dir.join("references").join(name).join(version).join(person)
    }
    /// Uploads in flight.
    pub fn staging(&self) -> PathBuf {
        self.dir.join("staging")
    }
}

/// A service folder, opened.
pub struct Service {
    /// Its files.
    pub layout: Layout,
    /// Its database.
    pub store: Store,
    /// The benchmarks it takes submissions for, by `name/version`.
    pub benchmarks: BTreeMap<String, Benchmark>,
    /// Compiles uploads to check them (`mlrb agent check`).
    pub engine: AgentEngine,
    /// Woken when a submission is queued.
    pub queued: tokio::sync::Notify,
}

impl Service {
    /// Makes a service folder: its folders, database and signing key.
    /// Benchmarks are added as TOML files under `benchmarks/`.
    pub fn init(dir: &Path) -> Result<Layout> {
        let layout = Layout { dir: dir.to_path_buf() };
        for sub in [
            layout.benchmarks(),
            dir.join("agents"),
            dir.join("runs"),
            layout.staging(),
        ] {
            std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
        }
        Store::open(&layout.database())?;
        if !layout.key().exists() {
            crate::record::signature::keygen(&layout.key())?;
        }
        Ok(layout)
    }

    /// Opens the service folder at `dir` (made by `mlrb submissions init`).
    pub fn open(dir: &Path, cache_dir: &Path) -> Result<Self> {
        let layout = Layout { dir: dir.to_path_buf() };
        if !layout.database().is_file() || !layout.key().is_file() {
            bail!(
                "{}: not a submission service folder (no service.sqlite or service.key): make one with `mlrb submissions init {}`",
                dir.display(),
                dir.display()
            );
        }
        let benchmarks = load_benchmarks(&layout.benchmarks())?;
        // Uploads cut off by a restart are never taken: start clean.
        let _ = std::fs::remove_dir_all(layout.staging());
        std::fs::create_dir_all(layout.staging())?;
        Ok(Self {
            store: Store::open(&layout.database())?,
            benchmarks,
            engine: AgentEngine::new(cache_dir)?,
            queued: tokio::sync::Notify::new(),
            layout,
        })
    }

    /// The benchmark `name/version`.
    pub fn benchmark(&self, id: &str) -> Option<&Benchmark> {
        self.benchmarks.get(id)
    }
}

/// Every `*.toml` under `dir`, each checked; two files publishing one
/// name and version are refused.
fn load_benchmarks(dir: &Path) -> Result<BTreeMap<String, Benchmark>> {
    let mut found = BTreeMap::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("{}: cannot list the benchmarks", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    for path in paths {
        let benchmark = Benchmark::load(&path)?;
        if found.insert(benchmark.id(), benchmark).is_some() {
            bail!(
                "{}: publishes a benchmark version another file already does",
                path.display()
            );
        }
    }
    Ok(found)
}

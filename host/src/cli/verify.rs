//! `mlrb verify`: check that a run or episode directory is what it was when
//! it was recorded: one line per episode (verified, or what failed), the
//! run's results and summary against its episodes, and its signature.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use serde::Serialize;

use super::{SandboxArgs, say};
use crate::bench;
use crate::episode::{EpisodeRecord, HostSetup, Runner, ScoreRecord, verify};
use crate::record::signature;
use crate::{paths, task};

/// Options of `mlrb verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// A run directory (every episode under it) or one episode directory.
    dir: PathBuf,
    /// The signer's public key (`mlrb keygen`'s `.pub`): the directory must
    /// carry a signature by this key [default: a signature present is
    /// checked against the key it names, and an unsigned run passes].
    #[arg(long, value_name = "FILE.pub")]
    key: Option<PathBuf>,
    /// Also replay each episode (hermetically) and require it identical.
    #[arg(long)]
    replay: bool,
    /// Do not re-run the evaluators (the records are still checked).
    #[arg(long)]
    no_eval: bool,
    /// How far (relative) a re-computed score may be from the recorded one;
    /// a task whose metric is not deterministic (a timing) is also allowed
    /// its own `metric.tolerance`.
    #[arg(long, default_value_t = 1e-9, value_name = "REL")]
    tolerance: f64,
    #[command(flatten)]
    sandbox: SandboxArgs,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

/// What was found of one thing checked.
#[derive(Debug, Serialize)]
struct Finding {
    /// The episode (relative to the directory given), or `run`, `signature`.
    what: String,
    /// Empty when verified.
    failures: Vec<String>,
}

impl VerifyArgs {
    /// Checks everything; exits 1 when anything fails.
    pub async fn run(self) -> Result<ExitCode> {
        let episodes = find_episodes(&self.dir)?;
        if episodes.is_empty() {
            bail!(
                "{}: no episode here (no episode.json at or under it)",
                self.dir.display()
            );
        }
        let mut findings = vec![self.signature()];
        let tasks = self.tasks(&episodes);
        let runner = self.runner(&tasks).await?;
        let bar = indicatif::ProgressBar::new(episodes.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} episodes verified [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        for dir in &episodes {
            let failures = self.episode(dir, &runner, &tasks).await;
            findings.push(Finding {
                what: relative(dir, &self.dir),
                failures,
            });
            bar.inc(1);
        }
        bar.finish_and_clear();
        if self.dir.join("results.jsonl").is_file() {
            findings.push(Finding {
                what: "run (results.jsonl, summary.json)".into(),
                failures: bench::verify::check_results(&self.dir),
            });
        }
        let failed = findings.iter().any(|f| !f.failures.is_empty());
        if self.json {
            say!("{}", serde_json::to_string_pretty(&findings)?);
        } else {
            for finding in &findings {
                match finding.failures.as_slice() {
                    [] => say!("verified  {}", finding.what),
                    failures => say!("FAILED    {}: {}", finding.what, failures.join("; ")),
                }
            }
        }
        Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
    }

    /// The signature of the directory (or the run it lies in).
    fn signature(&self) -> Finding {
        let signed = self.dir.ancestors().find(|d| d.join(signature::FILE).is_file());
        let what = |text: String| Finding {
            what: text,
            failures: Vec::new(),
        };
        let trusted = match self.key.as_deref().map(signature::read_public).transpose() {
            Ok(trusted) => trusted,
            Err(error) => {
                return Finding {
                    what: "signature".into(),
                    failures: vec![format!("{error:#}")],
                };
            }
        };
        match (signed, &trusted) {
            (None, None) => what("signature: none (unsigned; --key requires one)".into()),
            (None, Some(_)) => Finding {
                what: "signature".into(),
                failures: vec![format!(
                    "{}: not signed, and --key asks for a signature",
                    self.dir.display()
                )],
            },
            (Some(dir), trusted) => match signature::check(dir, trusted.as_ref()) {
                Ok(key) if trusted.is_some() => what(format!("signature by the key given ({})", &key[..16])),
                Ok(key) => what(format!(
                    "signature by key {} (self-consistent; pass --key to trust it)",
                    &key[..16]
                )),
                Err(error) => Finding {
                    what: "signature".into(),
                    failures: vec![format!("{error:#}")],
                },
            },
        }
    }

    /// Each task an episode ran, loaded from where it was (by root).
    fn tasks(&self, episodes: &[PathBuf]) -> BTreeMap<String, Result<task::Task, String>> {
        let mut tasks = BTreeMap::new();
        if self.no_eval {
            return tasks;
        }
        for dir in episodes {
            let Ok(record) = EpisodeRecord::read(dir) else { continue };
            tasks.entry(record.task.root.clone()).or_insert_with(|| {
                task::Task::load(Path::new(&record.task.root))
                    .or_else(|_| task::resolve(&record.task.name))
                    .map_err(|e| format!("task `{}` cannot be loaded to re-score: {e:#}", record.task.name))
            });
        }
        tasks
    }

    async fn runner(&self, tasks: &BTreeMap<String, Result<task::Task, String>>) -> Result<Runner> {
        if self.no_eval {
            return Runner::hermetic(&paths::cache_dir());
        }
        let loaded: Vec<task::Task> = tasks.values().filter_map(|t| t.as_ref().ok().cloned()).collect();
        let setup = HostSetup {
            sandbox: Some(self.sandbox.sandbox),
            image: self.sandbox.image.clone(),
            gpus: self.sandbox.gpus.clone(),
            python: self.sandbox.python.clone(),
            llm: Some("none".into()),
            config: None,
        };
        setup.runner(&paths::cache_dir(), &loaded).await
    }

    /// Every failure of one episode: its records, its score re-computed,
    /// its replay.
    async fn episode(
        &self,
        dir: &Path,
        runner: &Runner,
        tasks: &BTreeMap<String, Result<task::Task, String>>,
    ) -> Vec<String> {
        let mut failures = verify::check_records(dir);
        let Ok(record) = EpisodeRecord::read(dir) else {
            return failures;
        };
        if !self.no_eval && record.end.is_some() {
            match tasks.get(&record.task.root) {
                Some(Ok(task)) => failures.extend(rescore(runner, task, dir, &record, self.tolerance).await),
                Some(Err(why)) => failures.push(why.clone()),
                None => {}
            }
        }
        if self.replay && record.end.is_some() {
            let replayed = async {
                let agent = runner.load_agent(Path::new(&record.agent.path)).await?;
                runner.replay(dir, &agent).await
            };
            match replayed.await {
                Ok(report) => failures.extend(report.differences.into_iter().map(|d| format!("replay: {d}"))),
                Err(error) => failures.push(format!("replay: {error:#}")),
            }
        }
        failures
    }
}

/// The score re-computed from the final snapshot, by the same task.
async fn rescore(
    runner: &Runner,
    task: &task::Task,
    dir: &Path,
    record: &EpisodeRecord,
    tolerance: f64,
) -> Vec<String> {
    match task.content_hash() {
        Ok(hash) if hash != record.task.content_hash => {
            return vec![format!(
                "the task folder {} changed since the episode ran (content {}, recorded {}): its score cannot be re-computed",
                task.root.display(),
                &hash[..16],
                record.task.content_hash.chars().take(16).collect::<String>()
            )];
        }
        Err(error) => return vec![format!("{error:#}")],
        Ok(_) => {}
    }
    let Ok(recorded) = ScoreRecord::read(dir) else {
        return Vec::new();
    };
    let work = match tempfile::Builder::new().prefix("mlrb-verify-").tempdir() {
        Ok(work) => work,
        Err(error) => return vec![format!("a scratch folder: {error}")],
    };
    match runner.rescore(task, dir, record, work.path()).await {
        Ok(again) => verify::compare_scores(&recorded, &again, (tolerance, metric_tolerance(task)))
            .into_iter()
            .collect(),
        Err(error) => vec![format!("re-scoring: {error:#}")],
    }
}

/// What a task allows between two scorings of one workspace.
fn metric_tolerance(task: &task::Task) -> f64 {
    let metric = &task.spec.metric;
    if metric.deterministic { 0.0 } else { metric.tolerance }
}

/// The episode directories at or under `dir`, in order.
fn find_episodes(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        bail!("{}: no such directory", dir.display());
    }
    Ok(crate::episode::episode_dirs(dir))
}

fn relative(path: &Path, base: &Path) -> String {
    match path.strip_prefix(base) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

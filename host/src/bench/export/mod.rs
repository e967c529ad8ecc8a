//! `mlrb export`: a run's results in the formats other tools read: an
//! Inspect AI evaluation log, or the Every Eval Ever (EEE) aggregate and
//! instance-level records. A run whose records do not verify is refused.

pub mod eee;
pub mod inspect;
mod inspect_events;
pub mod transcript;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::across::AcrossTasks;
use super::epochs::EpochStats;
use super::result_line::ResultLine;
use super::summary::summarize;
use transcript::Transcript;

/// What `mlrb export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An Inspect AI evaluation log per agent (`.json`, log format 2).
    Inspect,
    /// Every Eval Ever: an aggregate record and its instance-level JSONL per agent.
    Eee,
}

/// Who published the results, for EEE's source metadata.
#[derive(Debug, Clone)]
pub struct Source {
    /// The organisation that ran the evaluation.
    pub organization: String,
    /// `first_party`, `third_party`, `collaborative` or `other`.
    pub relationship: String,
}

/// One episode: its result line and, where it ran, its transcript.
pub struct Episode {
    /// The line of `results.jsonl`.
    pub result: ResultLine,
    /// Its records read as a conversation; none for an infrastructure failure.
    pub transcript: Option<Transcript>,
}

/// One agent's episodes of a run, with the run's figures for it.
pub struct AgentRun {
    /// The run's directory name.
    pub run_name: String,
    /// The run's directory.
    pub run_dir: String,
    /// The agent's name in the run.
    pub agent: String,
    /// Its episodes, by task then seed.
    pub episodes: Vec<Episode>,
    /// Its figures across tasks.
    pub across: AcrossTasks,
    /// Its seeds reduced, per task.
    pub epochs: Vec<EpochStats>,
}

impl AgentRun {
    /// The tasks, in order.
    pub fn tasks(&self) -> Vec<&str> {
        let mut tasks: Vec<&str> = self.episodes.iter().map(|e| e.result.task.as_str()).collect();
        tasks.dedup();
        tasks
    }

    /// The seeds of `task`, ascending.
    fn seeds(&self, task: &str) -> Vec<u64> {
        self.episodes
            .iter()
            .filter(|e| e.result.task == task)
            .map(|e| e.result.seed)
            .collect()
    }

    /// A result's epoch: its seed's place among its task's seeds, from 1.
    pub fn epoch(&self, r: &ResultLine) -> usize {
        self.seeds(&r.task).iter().position(|s| *s == r.seed).unwrap_or(0) + 1
    }

    /// The most seeds any task has.
    pub fn most_seeds(&self) -> usize {
        self.tasks().iter().map(|t| self.seeds(t).len()).max().unwrap_or(0)
    }

    /// A stable id for `what` of this agent's run (22 hex digits of blake3).
    pub fn id(&self, what: &str) -> String {
        let hash = blake3::hash(format!("{}\n{}\n{what}", self.run_dir, self.agent).as_bytes());
        hash.to_hex()[..22].to_string()
    }

    /// The person's name where these are a person's episodes (`mlrb
    /// human`, in a bench as `human:NAME`), from the episodes' records.
    pub fn person(&self) -> Option<String> {
        self.episodes
            .iter()
            .find_map(|e| e.transcript.as_ref().and_then(|t| t.record.person.as_ref()))
            .map(|p| p.name.clone())
    }

    /// The agent component's SHA-256, from its first episode's record.
    pub fn agent_sha256(&self) -> String {
        self.episodes
            .iter()
            .find_map(|e| e.transcript.as_ref().map(|t| t.record.agent.sha256.clone()))
            .unwrap_or_default()
    }
}

/// Checks `run`, then writes its results as `format` into `out`; returns
/// the files written.
pub fn export(run: &Path, format: Format, out: &Path, source: &Source) -> Result<Vec<PathBuf>> {
    let failures = super::verify::check_run_records(run);
    if let Some(first) = failures.first() {
        bail!(
            "{}: its records do not verify ({} problem(s); the first: {first}); `mlrb verify {}` lists them, and nothing was exported",
            run.display(),
            failures.len(),
            run.display()
        );
    }
    let results = super::read_results(run)?;
    if super::smoke_of(&results, &run.display().to_string())? {
        bail!(
            "{}: its episodes ran in the smoke profile (stand-in data), whose scores measure nothing: nothing was exported",
            run.display()
        );
    }
    let summary = summarize(&results);
    std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create the folder", out.display()))?;
    let mut written = Vec::new();
    for agent in summary.across_tasks.iter().map(|a| &a.agent) {
        let run = agent_run(run, agent, &results, &summary)?;
        written.extend(match format {
            Format::Inspect => write_inspect(&run, out)?,
            Format::Eee => eee::write(&run, out, source)?,
        });
    }
    Ok(written)
}

fn agent_run(dir: &Path, agent: &str, results: &[ResultLine], summary: &super::summary::Summary) -> Result<AgentRun> {
    let mut own: Vec<&ResultLine> = results.iter().filter(|r| r.agent == agent).collect();
    own.sort_by(|a, b| (&a.task, a.seed).cmp(&(&b.task, b.seed)));
    let episodes = own
        .into_iter()
        .map(|r| {
            let transcript = match r.infra_error {
                Some(_) => None,
                None => Some(transcript::read(&dir.join(&r.dir))?),
            };
            Ok(Episode {
                result: r.clone(),
                transcript,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let across = summary.across_tasks.iter().find(|a| a.agent == agent).cloned();
    Ok(AgentRun {
        run_name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        run_dir: dir.display().to_string(),
        agent: agent.to_string(),
        episodes,
        across: across.context("the summary has no figures for the agent")?,
        epochs: summary.epochs.iter().filter(|e| e.agent == agent).cloned().collect(),
    })
}

/// `<created>_mlrb-<run>-<agent>_<id>.json`, as Inspect names its logs.
fn write_inspect(run: &AgentRun, out: &Path) -> Result<Vec<PathBuf>> {
    let log = inspect::log(run);
    let created = log.eval["created"].as_str().unwrap_or("").replace(':', "-");
    let name = crate::paths::safe_component(&format!(
        "{created}_mlrb-{}-{}_{}.json",
        run.run_name,
        run.agent,
        run.id("file")
    ));
    let path = out.join(name);
    std::fs::write(&path, serde_json::to_vec(&log)?).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(vec![path])
}

/// Values as strings, as EEE's `additional_details` and metadata want.
pub fn strings(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

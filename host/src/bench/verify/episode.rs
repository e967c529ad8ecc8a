//! One episode verified: its records, its score's metric and baseline
//! against the task it names, its score re-computed from the final
//! snapshot by the same task, and its hermetic replay.

use std::path::Path;

use super::{Options, Tasks};
use crate::episode::{EpisodeRecord, Runner, ScoreRecord, basis, verify};
use crate::task;

/// Every failure of one episode.
pub(super) async fn failures(options: &Options, dir: &Path, runner: &Runner, tasks: &Tasks) -> Vec<String> {
    let mut failures = verify::check_records(dir);
    let Ok(record) = EpisodeRecord::read(dir) else {
        return failures;
    };
    match tasks.get(&record.task.root) {
        Some(Ok(task)) => failures.extend(against_task(options, runner, task, dir, &record).await),
        Some(Err(why)) => failures.push(why.clone()),
        None => {}
    }
    // A person's episode has no agent to replay: its records and score are checked.
    if options.replay && record.end.is_some() && record.person.is_none() {
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

/// The episode's score against the task it names: the same folder, the
/// metric and baseline `score.json` judged by, and (unless told not to)
/// the score re-computed from the final snapshot.
async fn against_task(
    options: &Options,
    runner: &Runner,
    task: &task::Task,
    dir: &Path,
    record: &EpisodeRecord,
) -> Vec<String> {
    match task.content_hash() {
        Ok(hash) if hash != record.task.content_hash => {
            return vec![format!(
                "the task folder {} changed since the episode ran (content {}, recorded {}): its score cannot be checked",
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
    let mut failures = basis::differences(task, &recorded);
    if !options.no_eval && record.end.is_some() {
        failures.extend(rescore(runner, task, dir, record, &recorded, options.tolerance).await);
    }
    failures
}

/// The score re-computed from the final snapshot, by the same task.
async fn rescore(
    runner: &Runner,
    task: &task::Task,
    dir: &Path,
    record: &EpisodeRecord,
    recorded: &ScoreRecord,
    tolerance: f64,
) -> Vec<String> {
    let work = match tempfile::Builder::new().prefix("mlrb-verify-").tempdir() {
        Ok(work) => work,
        Err(error) => return vec![format!("a scratch folder: {error}")],
    };
    // A smoke episode is scored again in its profile, as it was scored.
    let task = match runner.profile(task.clone(), record.smoke).await {
        Ok(task) => task,
        Err(error) => return vec![format!("re-scoring: {error:#}")],
    };
    match runner.rescore(&task, dir, record, work.path()).await {
        Ok(again) => verify::compare_scores(recorded, &again, (tolerance, metric_tolerance(&task)))
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

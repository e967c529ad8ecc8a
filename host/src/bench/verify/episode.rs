//! One episode verified: its records, its score re-computed from the final
//! snapshot by the same task, and its hermetic replay.

use std::path::Path;

use super::{Options, Tasks};
use crate::episode::{EpisodeRecord, Runner, ScoreRecord, verify};
use crate::task;

/// Every failure of one episode.
pub(super) async fn failures(options: &Options, dir: &Path, runner: &Runner, tasks: &Tasks) -> Vec<String> {
    let mut failures = verify::check_records(dir);
    let Ok(record) = EpisodeRecord::read(dir) else {
        return failures;
    };
    if !options.no_eval && record.end.is_some() {
        match tasks.get(&record.task.root) {
            Some(Ok(task)) => failures.extend(rescore(runner, task, dir, &record, options.tolerance).await),
            Some(Err(why)) => failures.push(why.clone()),
            None => {}
        }
    }
    if options.replay && record.end.is_some() {
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

//! The checks of `mlrb tasks check` that run things in the sandbox the
//! task will use: every Python import of the starter, the evaluator and the
//! preparation probed there, the preparation itself, and the evaluator on
//! what the unchanged starter produces. A task is "ready" only when that
//! dry run scored.

use std::path::Path;

use super::item::{Item, Status, item};
use super::starter::{StarterScored, run_and_score, scratch};
use super::{Layout, Task, populate, prepare};
use crate::sandbox::Sandbox;

/// The Python imports of the task's scripts, probed in `sandbox`.
pub async fn imports(task: &Task, sandbox: &dyn Sandbox, cache_dir: &Path) -> Vec<Item> {
    let report = match super::imports::probe(task, sandbox, cache_dir).await {
        Ok(report) => report,
        Err(error) => return vec![item("python imports", Status::Fail, format!("{error:#}"))],
    };
    let mut items = Vec::new();
    for (label, found) in report {
        let check = match label.as_str() {
            "starter" => "imports of the starter",
            "evaluator" => "imports of the evaluator",
            _ => "imports of the preparation",
        };
        items.push(match (&found.syntax, found.missing.is_empty()) {
            (Some(error), _) => item(check, Status::Fail, format!("does not parse: {error}")),
            (None, true) => item(check, Status::Ok, format!("all found: {}", found.imports.join(", "))),
            (None, false) => item(
                check,
                Status::Fail,
                format!(
                    "missing in the sandbox: {} (add them to the image, or to resources.python_packages so hosts without them are refused)",
                    found.missing.join(", ")
                ),
            ),
        });
    }
    items
}

/// Markers of an evaluator that fetches data when it scores.
const FETCHES: &[&str] = &[
    "download=True",
    "load_dataset(",
    "urlretrieve",
    "urlopen(",
    "requests.get",
    "wget",
    "PygNodePropPredDataset(",
    "hf_hub_download",
];

/// Whether the evaluator seems to need the network when it scores.
pub fn scoring_network(task: &Task) -> Option<Item> {
    let source = std::fs::read_to_string(task.eval_script()).unwrap_or_default();
    let found: Vec<&str> = FETCHES.iter().copied().filter(|m| source.contains(m)).collect();
    if found.is_empty() {
        return None;
    }
    let fetched = super::mlagentbench::known(&task.root).is_some_and(|k| k.fetch.is_some());
    let how = match task.layout {
        Layout::MlAgentBench if fetched => {
            "scoring runs without network: `mlrb tasks prepare FOLDER --network` fetches what it reads \
             into the prepared data, which scoring then reads offline"
        }
        Layout::MlAgentBench => {
            "scoring runs without network: prepare with --network, and mlrb runs the evaluator once during \
             preparation so that what it fetches lands beside the hidden answers"
        }
        Layout::Native => "scoring runs without network: have prepare.py fetch the data into the hidden folder",
    };
    Some(item(
        "scoring-time network",
        Status::Warn,
        format!("the evaluator seems to fetch data ({}); {how}", found.join(", ")),
    ))
}

/// Prepares the task, runs the unchanged starter and scores what it left:
/// the items for the preparation and the dry run.
pub async fn dry_run(task: &Task, sandbox: &dyn Sandbox, cache_dir: &Path) -> Vec<Item> {
    let prepared = match prepare(task, sandbox, cache_dir).await {
        Ok(prepared) => prepared,
        Err(error) => return vec![item("preparation", Status::Fail, format!("{error:#}"))],
    };
    let mut items = vec![item(
        "preparation",
        Status::Ok,
        format!("prepared: {}", prepared.dir.display()),
    )];
    match starter_and_score(task, sandbox, cache_dir, &prepared).await {
        Ok(found) => items.extend(found),
        Err(error) => items.push(item("dry run", Status::Fail, format!("{error:#}"))),
    }
    items
}

async fn starter_and_score(
    task: &Task,
    sandbox: &dyn Sandbox,
    cache_dir: &Path,
    prepared: &super::Prepared,
) -> anyhow::Result<Vec<Item>> {
    let work = scratch(task, cache_dir, "check-")?;
    let dir = work.path().join("starter");
    populate(task, prepared, &dir)?;
    let evaluation = match run_and_score(task, sandbox, &dir, (prepared, cache_dir), &|_| {}).await? {
        StarterScored::Failed(why) => return Ok(vec![item("dry run", Status::Fail, why)]),
        StarterScored::Scored(evaluation) => evaluation,
    };
    let metric = &task.spec.metric.name;
    let self_reported = match evaluation.score.filter(|_| !evaluation.evaluator_failed) {
        Some(score) => super::self_report::probe(task, sandbox, cache_dir, prepared, &dir, score)
            .await?
            .map(|why| item("self-reported score", Status::Fail, why)),
        None => None,
    };
    let scored = match (evaluation.evaluator_failed, evaluation.score) {
        (true, _) => item(
            "dry run",
            Status::Fail,
            evaluation.error.unwrap_or_else(|| "the evaluator failed".into()),
        ),
        (false, Some(score)) => item(
            "dry run",
            Status::Ok,
            format!("the evaluator scored the starter's output: {score} {metric}"),
        ),
        (false, None) => item(
            "dry run",
            Status::Warn,
            format!(
                "the evaluator ran, and found the starter's output invalid: {}",
                evaluation.error.unwrap_or_default()
            ),
        ),
    };
    Ok([scored].into_iter().chain(self_reported).collect())
}

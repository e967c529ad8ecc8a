//! What `mlrb verify` and `mlrb export` check of a run without running
//! anything (no sandbox, no evaluator): `results.jsonl` against the episodes' records, `summary.json`
//! against the results, and every episode's records (hash chain, snapshot
//! store, bindings).

use std::path::Path;

use crate::bench::{read_results, result_line, summary};
use crate::episode::{EpisodeRecord, ScoreRecord, verify};

/// Sections of `summary.json` that runs recorded before them lack.
const LATER_SECTIONS: &[&str] = &["epochs", "across_tasks", "profiles", "headline"];

/// What version 2 of the statistics computes otherwise (intervals of
/// values with no spread, the bootstrap below 20 tasks, a rate's interval,
/// directions, the best score of an unknown direction, the profiles of
/// unknown directions): a `summary.json` of version 1 is not held to them,
/// nor to the keys it did not write.
const CHANGED_IN_2: &[&str] = &[
    "interval",
    "bootstrap",
    "higher_is_better",
    "best_of_k",
    "best_score",
    "profiles",
];

/// `results.jsonl` says what the episodes' records say, and `summary.json`
/// is the summary of those results.
pub fn check_results(dir: &Path) -> Vec<String> {
    let results = match read_results(dir) {
        Ok(results) => results,
        Err(error) => return vec![format!("{error:#}")],
    };
    let mut failures = Vec::new();
    for line in &results {
        let episode = dir.join(&line.dir);
        let (Ok(record), Ok(score)) = (EpisodeRecord::read(&episode), ScoreRecord::read(&episode)) else {
            if line.infra_error.is_none() {
                failures.push(format!(
                    "results.jsonl: {} has no episode records at {}",
                    line.id, line.dir
                ));
            }
            continue;
        };
        let mut expected = result_line::ResultLine::from_records(&line.id, &line.agent, &line.dir, &record, &score);
        // What the journal alone knows: attempts, failures, invalidation.
        expected.attempts = line.attempts;
        expected.infra_error = line.infra_error.clone();
        expected.stale = line.stale.clone();
        // Fields a line of an earlier mlrb lacks (shown, not scored): not required.
        if line.cpus.is_none() && line.baseline_source.is_none() {
            expected.cpus = None;
            expected.baseline_source = None;
        }
        // An earlier mlrb wrote `true` for a direction nobody knew.
        if expected.higher_is_better.is_none() && line.higher_is_better == Some(true) && !score.direction_known {
            expected.higher_is_better = line.higher_is_better;
        }
        let (recorded, expected) = (serde_json::to_value(line), serde_json::to_value(&expected));
        if let (Ok(recorded), Ok(expected)) = (recorded, expected)
            && let Some(why) = verify::json_differs(&recorded, &expected, &format!("results.jsonl {}", line.id))
        {
            failures.push(why);
        }
    }
    let mut summary = std::fs::read(dir.join("summary.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
    let mut expected = serde_json::to_value(summary::summarize(&results)).unwrap_or_default();
    let version = summary
        .as_ref()
        .and_then(|s| s.get("statistics"))
        .and_then(|v| v.as_u64());
    if let (Some(recorded), None | Some(1)) = (summary.as_mut(), version) {
        legacy_view(recorded, &mut expected);
    }
    // The sections an earlier mlrb did not write: required only where present.
    if let (Some(recorded), Some(expected)) = (summary.as_ref().and_then(|s| s.as_object()), expected.as_object_mut()) {
        for section in LATER_SECTIONS {
            if !recorded.contains_key(*section) {
                expected.remove(*section);
            }
        }
    }
    match summary {
        None => failures.push("summary.json: missing or not JSON".into()),
        Some(summary) => failures.extend(verify::json_differs(&summary, &expected, "summary.json")),
    }
    failures
}

/// Holds a `summary.json` of version 1 of the statistics to what that
/// version computed alike: drops from `expected` the keys `recorded` lacks,
/// and from both the keys version 2 computes otherwise.
fn legacy_view(recorded: &mut serde_json::Value, expected: &mut serde_json::Value) {
    use serde_json::Value;
    match (recorded, expected) {
        (Value::Object(r), Value::Object(e)) => {
            e.retain(|k, _| r.contains_key(k) && !CHANGED_IN_2.contains(&k.as_str()));
            r.retain(|k, _| !CHANGED_IN_2.contains(&k.as_str()));
            for (k, v) in r.iter_mut() {
                if let Some(w) = e.get_mut(k) {
                    legacy_view(v, w);
                }
            }
        }
        (Value::Array(r), Value::Array(e)) => {
            for (v, w) in r.iter_mut().zip(e.iter_mut()) {
                legacy_view(v, w);
            }
        }
        // Version 2 rounds a standard error within rounding of zero to 0.
        (r @ Value::Number(_), e @ Value::Number(_)) => {
            if let (Some(x), Some(y)) = (r.as_f64(), e.as_f64())
                && (x - y).abs() <= 1e-12
            {
                *r = e.clone();
            }
        }
        _ => {}
    }
}

/// Every way the run in `dir` fails the checks made without running
/// anything (as `mlrb verify --no-eval` does, less the signature): each
/// episode's records, then the results and summary; empty when it holds.
pub fn check_run_records(dir: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for episode in crate::episode::episode_dirs(dir) {
        let name = episode.strip_prefix(dir).unwrap_or(&episode).display().to_string();
        failures.extend(
            verify::check_records(&episode)
                .into_iter()
                .map(|f| format!("{name}: {f}")),
        );
    }
    failures.extend(check_results(dir));
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_summary_of_the_first_statistics_is_held_to_what_it_computed_alike() {
        let mut recorded = json!({"episodes": 3, "across_tasks": [{"agent": "a", "mean": 0.5,
            "interval": {"lower": -0.7, "upper": 1.7}, "bootstrap": {"lower": 0.1, "upper": 0.9}}]});
        let mut expected = json!({"statistics": 2, "episodes": 3, "across_tasks": [{"agent": "a", "mean": 0.5,
            "interval": null, "bootstrap": null, "rate": {"rate": 0.5}}]});
        legacy_view(&mut recorded, &mut expected);
        assert_eq!(verify::json_differs(&recorded, &expected, "summary.json"), None);
        // What version 1 computed alike is still checked.
        let mut edited = json!({"episodes": 3, "across_tasks": [{"agent": "a", "mean": 0.9}]});
        let mut expected = json!({"statistics": 2, "episodes": 3, "across_tasks": [{"agent": "a", "mean": 0.5}]});
        legacy_view(&mut edited, &mut expected);
        let why = verify::json_differs(&edited, &expected, "summary.json").unwrap();
        assert!(why.contains("across_tasks[0].mean"), "{why}");
        // An error version 1 left at rounding noise is version 2's zero.
        let mut noise = json!({"by_task_and_agent": [{"score": {"se": 7.85e-17}}]});
        let mut zero = json!({"by_task_and_agent": [{"score": {"se": 0.0}}]});
        legacy_view(&mut noise, &mut zero);
        assert_eq!(verify::json_differs(&noise, &zero, "summary.json"), None);
    }
}

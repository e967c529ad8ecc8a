//! What `score.json` says of its task's metric, checked against the task
//! itself: the metric, its direction, the reference, the range and the
//! baseline with its source. The derived fields (improvement, normalised
//! score, success) follow from these, so none of them may be read back from
//! the record they justify.

use super::ScoreRecord;
use crate::task::Task;

/// Every way `score` departs from the metric of `task` (the version the
/// episode names, its content already checked); empty when it does not.
pub fn differences(task: &Task, score: &ScoreRecord) -> Vec<String> {
    let metric = &task.spec.metric;
    let mut failures = Vec::new();
    let mut differ = |field: &str, recorded: String, task_says: String| {
        if recorded != task_says {
            failures.push(format!(
                "score.json: {field} is {recorded}, task {} {} says {task_says}",
                task.spec.name, task.spec.version
            ));
        }
    };
    differ("metric", score.metric.clone(), metric.name.clone());
    differ(
        "higher_is_better",
        score.higher_is_better.to_string(),
        metric.higher_is_better.to_string(),
    );
    differ(
        "direction_known",
        score.direction_known.to_string(),
        metric.direction_known.to_string(),
    );
    differ("reference", shown(score.reference), shown(metric.reference));
    failures.extend(baseline_differs(task, score));
    if let (true, Some(value)) = (score.valid, score.score)
        && let Some(why) = metric.out_of_range(value)
    {
        failures.push(format!("score.json: a valid score, but {why}"));
    }
    if let (Some(spread), Some(value)) = (score.spread, score.score)
        && let Some(why) = spread.fault(value)
    {
        failures.push(format!("score.json: {why}"));
    }
    failures
}

/// The recorded baseline and its source are one the task declares, or the
/// one measured on this host that replaced it.
fn baseline_differs(task: &Task, score: &ScoreRecord) -> Option<String> {
    let metric = &task.spec.metric;
    let recorded = (score.baseline, score.baseline_source.clone());
    let current = (metric.baseline, metric.baseline_source());
    let known = [Some(current.clone()), metric.declared_baseline.clone()];
    if known.iter().flatten().any(|k| same_baseline(k, &recorded)) {
        return None;
    }
    let measured_elsewhere = recorded.1.as_deref().is_some_and(|s| s.starts_with("measured"));
    let hint = match measured_elsewhere {
        true => "; a baseline measured on another host is checked where it was measured (`mlrb tasks baseline`)",
        false => "",
    };
    Some(format!(
        "score.json: baseline {} ({}) is not task {} {}'s: it has {} ({}){hint}",
        shown(recorded.0),
        recorded.1.as_deref().unwrap_or("no source"),
        task.spec.name,
        task.spec.version,
        shown(current.0),
        current.1.as_deref().unwrap_or("no source"),
    ))
}

/// Two baselines with their sources are the same; a record written before
/// mlrb kept sources matches on the value alone.
fn same_baseline(known: &(Option<f64>, Option<String>), recorded: &(Option<f64>, Option<String>)) -> bool {
    shown(known.0) == shown(recorded.0) && (recorded.1.is_none() || known.1 == recorded.1)
}

/// A number as compared: equal to 12 significant digits.
fn shown(value: Option<f64>) -> String {
    value.map_or("none".into(), |v| format!("{v:.12e}"))
}

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
    // An unknown direction is unknown whatever an older record wrote
    // beside it (`true`); a known one must be the task's.
    let direction = |known: bool, higher: Option<bool>| match (known, higher) {
        (false, _) => "unknown".to_string(),
        (true, Some(higher)) => higher.to_string(),
        (true, None) => "null".to_string(),
    };
    differ(
        "higher_is_better",
        direction(score.direction_known, score.higher_is_better),
        direction(metric.direction_known, Some(metric.higher_is_better)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An MLAgentBench folder mlrb does not know: its metric's direction is unknown.
    fn unknown_task() -> (tempfile::TempDir, Task) {
        let tmp = tempfile::Builder::new().prefix("toy-task").tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("env")).unwrap();
        std::fs::create_dir_all(tmp.path().join("scripts")).unwrap();
        std::fs::write(tmp.path().join("env/train.py"), "print(1)\n").unwrap();
        std::fs::write(tmp.path().join("scripts/research_problem.txt"), "Do better.\n").unwrap();
        std::fs::write(tmp.path().join("scripts/eval.py"), "def get_score(f):\n    return 1\n").unwrap();
        let task = Task::load(tmp.path()).unwrap();
        assert!(!task.spec.metric.direction_known);
        (tmp, task)
    }

    fn record(task: &Task, higher_is_better: serde_json::Value, direction_known: bool) -> ScoreRecord {
        serde_json::from_value(json!({
            "task": task.spec.name, "metric": task.spec.metric.name,
            "higher_is_better": higher_is_better, "direction_known": direction_known,
            "score": 0.5, "valid": true, "baseline": null, "improvement": null, "success": null,
            "end_reason": null, "error": null, "evaluator_failed": false,
            "snapshot": 1, "evaluated_at": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn an_unknown_direction_verifies_as_written_now_and_as_written_before() {
        let (_tmp, task) = unknown_task();
        // Now: null. Before: `true` beside `direction_known: false`.
        for written in [json!(null), json!(true)] {
            let score = record(&task, written.clone(), false);
            assert_eq!(score.direction(), None, "{written}");
            assert!(
                differences(&task, &score).is_empty(),
                "{written}: {:?}",
                differences(&task, &score)
            );
        }
        // Claiming a direction the task does not know is caught.
        let claimed = record(&task, json!(true), true);
        assert_eq!(claimed.direction(), Some(true));
        let found = differences(&task, &claimed);
        assert!(
            found
                .iter()
                .any(|d| d.contains("higher_is_better is true") && d.contains("says unknown")),
            "{found:?}"
        );
        // A record written now says null, never true.
        let mut now = record(&task, json!(null), false);
        now.higher_is_better = task
            .spec
            .metric
            .direction_known
            .then_some(task.spec.metric.higher_is_better);
        assert_eq!(serde_json::to_value(&now).unwrap()["higher_is_better"], json!(null));
    }
}

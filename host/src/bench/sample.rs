//! Made-up results for the unit tests of the statistics over results.

use super::result_line::ResultLine;

/// A result of `agent` on `task` (accuracy; baseline 0.5, reference 0.9):
/// a valid score, or an agent failure (None).
pub fn line(task: &str, agent: &str, seed: u64, score: Option<f64>) -> ResultLine {
    let mut r = ResultLine::infra_failed(&format!("{task}/{agent}/{seed}"), task, agent, seed, "", 1, "");
    r.infra_error = None;
    r.metric = "accuracy".into();
    r.higher_is_better = Some(true);
    r.valid = score.is_some();
    r.score = score;
    r.baseline = Some(0.5);
    r.reference = Some(0.9);
    r.improvement = score.map(|s| (s - 0.5) / 0.5);
    r.normalized = score.map(|s| (s - 0.5) / 0.4);
    r.success = Some(r.improvement.is_some_and(|i| i > 0.1));
    r
}

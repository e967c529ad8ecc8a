//! What a score means against its task: improvement over the baseline,
//! the normalised score, success and the best score. Always computed from
//! the score, the baseline, the reference and the metric's direction, and
//! never read back from a file: an edited `score.json` can claim anything,
//! so `mlrb verify` and every table derive these again.

use serde::Serialize;

use super::ScoreRecord;
use super::feedback::Feedback;
use crate::capability::episode::ValidationRecord;
use crate::task;

/// The fields of a score record that follow from the others.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Judgement {
    /// Relative improvement over the baseline in the metric's direction.
    pub improvement: Option<f64>,
    /// The score on a scale where the baseline is 0 and the reference 1.
    pub normalized: Option<f64>,
    /// More than 10 % better than the baseline; none where that cannot be
    /// judged (no baseline, an unknown direction, a failed evaluator).
    pub success: Option<bool>,
    /// The best of the intermediate scores and the final one, where they
    /// score the same answers; else the final one.
    pub best_score: Option<f64>,
    /// Relative improvement of the best public score over the public baseline.
    pub public_improvement: Option<f64>,
    /// A public gain that did not carry over: the private improvement is
    /// under half the public one (a drop included); none without a gain.
    pub public_gain_lost: Option<bool>,
}

/// What a metric's inputs to a judgement are.
#[derive(Debug, Clone, Copy)]
pub struct Basis {
    /// Whether a higher score is better.
    pub higher_is_better: bool,
    /// Whether that direction is known at all.
    pub direction_known: bool,
    /// The baseline score, if any.
    pub baseline: Option<f64>,
    /// The reference solution's score, if any.
    pub reference: Option<f64>,
}

impl Basis {
    /// The basis a score record states.
    pub fn of(score: &ScoreRecord) -> Self {
        Self {
            // An unknown direction judges no improvement or success; its
            // best score stays the largest, as records have always said.
            higher_is_better: score.direction().unwrap_or(true),
            direction_known: score.direction().is_some(),
            baseline: score.baseline,
            reference: score.reference,
        }
    }

    /// Relative improvement of `score` over the baseline, where there is
    /// one in a known direction.
    pub fn improvement(&self, score: f64) -> Option<f64> {
        let baseline = self.baseline.filter(|_| self.direction_known)?;
        task::improvement(score, baseline, self.higher_is_better)
    }

    /// `score` on the scale baseline 0, reference 1.
    pub fn normalized(&self, score: f64) -> Option<f64> {
        let baseline = self.baseline.filter(|_| self.direction_known)?;
        let reference = self.reference.filter(|r| *r != baseline)?;
        Some((score - baseline) / (reference - baseline))
    }

    /// The better of two scores in the metric's direction.
    pub fn better(&self, a: f64, b: f64) -> f64 {
        if (b > a) == self.higher_is_better { b } else { a }
    }
}

/// The judgement of `score` (the final evaluation), with the episode's
/// intermediate scorings `validations`.
pub fn judge(score: &ScoreRecord, validations: &[ValidationRecord]) -> Judgement {
    let basis = Basis::of(score);
    let improvement = score.score.and_then(|s| basis.improvement(s));
    // An evaluator that failed judged nothing: no success either way.
    let success = basis
        .baseline
        .filter(|_| basis.direction_known && !score.evaluator_failed)
        .map(|_| improvement.is_some_and(|i| i > task::SUCCESS_THRESHOLD));
    // Intermediate scores of other answers (the public part) are not
    // better or worse than the final one: they measure something else.
    let same_answers = Feedback::recorded(score.feedback, validations).same_answers();
    let best_score = validations
        .iter()
        .filter(|_| same_answers)
        .filter_map(|v| v.score)
        .chain(score.score)
        .reduce(|a, b| basis.better(a, b));
    let public_improvement = score.public.and_then(|public| {
        let baseline = public.baseline.filter(|_| basis.direction_known)?;
        task::improvement(public.best?, baseline, basis.higher_is_better)
    });
    let public_gain_lost = public_improvement
        .filter(|gain| *gain > 0.0)
        .map(|gain| improvement.unwrap_or(f64::NEG_INFINITY) < gain / 2.0);
    Judgement {
        improvement,
        normalized: score.score.and_then(|s| basis.normalized(s)),
        success,
        best_score,
        public_improvement,
        public_gain_lost,
    }
}

/// What the recorded judgement fields of `score` say that `expected`
/// does not, one line each.
pub fn differences(score: &ScoreRecord, expected: &Judgement) -> Vec<String> {
    let fields: [(&str, String, String); 6] = [
        ("improvement", shown(score.improvement), shown(expected.improvement)),
        ("normalized", shown(score.normalized), shown(expected.normalized)),
        (
            "success",
            format!("{:?}", score.success),
            format!("{:?}", expected.success),
        ),
        ("best_score", shown(score.best_score), shown(expected.best_score)),
        (
            "public_improvement",
            shown(score.public_improvement),
            shown(expected.public_improvement),
        ),
        (
            "public_gain_lost",
            format!("{:?}", score.public_gain_lost),
            format!("{:?}", expected.public_gain_lost),
        ),
    ];
    fields
        .into_iter()
        .filter(|(_, recorded, expected)| recorded != expected)
        .map(|(field, recorded, expected)| {
            format!("score.json: {field} is {recorded}, but its score, baseline and metric make it {expected}")
        })
        .collect()
}

/// A number as the comparison sees it: equal to 12 significant digits.
fn shown(value: Option<f64>) -> String {
    value.map_or("none".into(), |v| format!("{v:.12e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(score: Option<f64>, higher_is_better: bool, baseline: Option<f64>) -> ScoreRecord {
        serde_json::from_value(json!({
            "task": "t", "metric": "m", "higher_is_better": higher_is_better,
            "score": score, "valid": score.is_some(), "baseline": baseline, "reference": 0.98,
            // What an edited file claims: none of it is read.
            "improvement": 0.5, "normalized": 0.9, "success": true, "best_score": 0.99,
            "end_reason": null, "error": null, "evaluator_failed": false,
            "snapshot": 1, "evaluated_at": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn a_judgement_follows_the_score_never_what_the_file_claims() {
        let worse = record(Some(0.80), true, Some(0.82));
        let judged = judge(&worse, &[]);
        assert_eq!(judged.success, Some(false));
        assert!(judged.improvement.unwrap() < 0.0 && judged.normalized.unwrap() < 0.0);
        assert_eq!(judged.best_score, Some(0.80));
        let found = differences(&worse, &judged);
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(
            found.iter().any(|d| d.starts_with("score.json: success is Some(true)")),
            "{found:?}"
        );
        // Lower is better: 10 % under the baseline is not more than 10 % better.
        let lower = judge(&record(Some(90.0), false, Some(100.0)), &[]);
        assert_eq!(lower.success, Some(false));
        assert!((lower.improvement.unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(judge(&record(Some(89.0), false, Some(100.0)), &[]).success, Some(true));
        // No baseline, an unknown direction, a failed evaluator: no success either way.
        assert_eq!(judge(&record(Some(0.99), true, None), &[]).success, None);
        let mut unknown = record(Some(0.99), true, Some(0.5));
        unknown.direction_known = false;
        assert_eq!(
            (judge(&unknown, &[]).success, judge(&unknown, &[]).improvement),
            (None, None)
        );
        let mut failed = record(None, true, Some(0.5));
        failed.evaluator_failed = true;
        assert_eq!(judge(&failed, &[]).success, None);
        // No score: a failure, not a success.
        assert_eq!(judge(&record(None, true, Some(0.5)), &[]).success, Some(false));
    }

    #[test]
    fn the_best_score_is_the_best_of_the_validations_and_the_final_one() {
        let validation = |score: Option<f64>| ValidationRecord {
            step: 1,
            t_ms: 0,
            snapshot: 1,
            score,
            valid: score.is_some(),
            error: None,
        };
        let final_score = record(Some(0.85), true, Some(0.82));
        let found = judge(
            &final_score,
            &[validation(Some(0.9)), validation(None), validation(Some(0.7))],
        );
        assert_eq!(found.best_score, Some(0.9));
        let lower = record(Some(12.0), false, Some(20.0));
        assert_eq!(judge(&lower, &[validation(Some(15.0))]).best_score, Some(12.0));
    }
}

//! What the statistics read of an episode's result: which score is ranked,
//! what an agent's failure counts as, and which results are left out. One
//! place, so that every table, comparison and export reads the same.

use super::result_line::ResultLine;

/// Whether a result counts: not an infrastructure failure (no result of the
/// agent's; shown apart) and not stale (invalidated).
pub fn counted(r: &ResultLine) -> bool {
    r.infra_error.is_none() && r.stale.is_none()
}

/// The agent failed: the episode ran, but its submission is invalid.
pub fn agent_failure(r: &ResultLine) -> bool {
    counted(r) && !r.valid
}

/// The score an episode is ranked by, when its submission is valid.
pub fn score(r: &ResultLine) -> Option<f64> {
    r.score.filter(|_| r.valid)
}

/// The ranked score oriented so that higher is better; none where the
/// metric's direction is unknown (nothing can be oriented).
pub fn oriented_score(r: &ResultLine) -> Option<f64> {
    let higher = r.higher_is_better?;
    score(r).map(|s| if higher { s } else { -s })
}

/// Whether the task has a normalised scale: a starter (baseline) and a
/// reference that differ.
pub fn has_scale(r: &ResultLine) -> bool {
    matches!((r.baseline, r.reference), (Some(b), Some(f)) if b != f)
}

/// The score on the starter-0, reference-1 scale; an agent failure counts
/// as the starter's (0), as RE-Bench and MLGym count it.
pub fn normalized(r: &ResultLine) -> Option<f64> {
    match agent_failure(r) {
        true if has_scale(r) => Some(0.0),
        _ => r.normalized.filter(|_| r.valid),
    }
}

/// Relative improvement over the baseline; an agent failure counts as none (0).
pub fn improvement(r: &ResultLine) -> Option<f64> {
    match agent_failure(r) {
        true if r.baseline.is_some() => Some(0.0),
        _ => r.improvement.filter(|_| r.valid),
    }
}

/// More than 10 % better than the baseline; an agent failure is a failure.
/// None where it cannot be judged.
pub fn success(r: &ResultLine) -> Option<bool> {
    match agent_failure(r) {
        true if r.baseline.is_some() => Some(false),
        _ => r.success,
    }
}

/// Tokens the agent's model calls used.
pub fn tokens(r: &ResultLine) -> u64 {
    r.input_tokens + r.output_tokens
}

/// CPU-hours the episode held: its wall time × the CPUs its scripts were
/// given (where the result records them).
pub fn cpu_hours(r: &ResultLine) -> Option<f64> {
    r.cpus.map(|cpus| cpus * r.wall_ms as f64 / 3_600_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(valid: bool, infra: bool) -> ResultLine {
        let mut r = ResultLine::infra_failed("t/a/1", "t", "a", 1, "t/a/1", 1, "down");
        if !infra {
            r.infra_error = None;
        }
        r.valid = valid;
        r.score = valid.then_some(0.5);
        r.baseline = Some(0.4);
        r.reference = Some(0.6);
        r.normalized = valid.then_some(0.5);
        r.improvement = valid.then_some(0.25);
        r.success = Some(valid);
        r
    }

    #[test]
    fn an_agent_failure_counts_as_the_starter_and_a_failure() {
        let failed = result(false, false);
        assert!(counted(&failed) && agent_failure(&failed));
        assert_eq!(
            (normalized(&failed), improvement(&failed), success(&failed)),
            (Some(0.0), Some(0.0), Some(false))
        );
        assert_eq!(score(&failed), None);
        let ok = result(true, false);
        assert_eq!(
            (normalized(&ok), improvement(&ok), score(&ok)),
            (Some(0.5), Some(0.25), Some(0.5))
        );
        let infra = result(false, true);
        assert!(!counted(&infra) && !agent_failure(&infra));
        let mut lower = ok.clone();
        lower.higher_is_better = Some(false);
        assert_eq!(oriented_score(&lower), Some(-0.5));
        lower.higher_is_better = None;
        assert_eq!(oriented_score(&lower), None, "an unknown direction orients nothing");
    }
}

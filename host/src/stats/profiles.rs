//! Performance profiles (Dolan and Moré, 2002) and the area under them
//! (AUP, as MLGym ranks agents): how often an agent is within a factor τ
//! of the best agent on a task, for every τ.

use serde::{Deserialize, Serialize};

/// Each method's performance ratio on one task, 1 for the best and larger
/// for worse: best / score where higher is better, score / best where
/// lower is. A method with no score, or a score that cannot form a ratio
/// (zero or negative), gets infinity: it reaches no τ.
pub fn ratios(scores: &[Option<f64>], higher_is_better: bool) -> Vec<f64> {
    let usable = |s: &Option<f64>| s.filter(|s| s.is_finite() && *s > 0.0);
    let best = scores
        .iter()
        .filter_map(usable)
        .reduce(|a, b| if (b > a) == higher_is_better { b } else { a });
    scores
        .iter()
        .map(|s| match (usable(s), best) {
            (Some(s), Some(best)) if higher_is_better => best / s,
            (Some(s), Some(best)) => s / best,
            _ => f64::INFINITY,
        })
        .collect()
}

/// One method's profile: ρ(τ), the share of tasks whose ratio is at most τ.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    /// The method's ratios, one per task, ascending (infinite ones last).
    pub ratios: Vec<f64>,
    /// ∫ from 1 to τ_max of ρ(τ) dτ.
    pub aup: f64,
}

/// ρ(τ) for `ratios` (one per task).
pub fn rho(ratios: &[f64], tau: f64) -> f64 {
    if ratios.is_empty() {
        return 0.0;
    }
    ratios.iter().filter(|r| **r <= tau).count() as f64 / ratios.len() as f64
}

/// The profile of one method over `ratios` (one per task), integrated up
/// to `tau_max`: each task adds (τ_max − ratio) / tasks when its ratio is
/// at most τ_max, as ρ is a step function.
pub fn profile(ratios: &[f64], tau_max: f64) -> Profile {
    let tasks = ratios.len().max(1) as f64;
    let aup = ratios
        .iter()
        .filter(|r| **r <= tau_max)
        .map(|r| tau_max - r.max(1.0))
        .sum::<f64>()
        / tasks;
    Profile {
        ratios: super::sorted(ratios),
        aup,
    }
}

/// A τ_max that shows every finite ratio: 5 % past the largest, and at
/// least 1.05.
pub fn tau_max(all_ratios: &[f64]) -> f64 {
    all_ratios.iter().copied().filter(|r| r.is_finite()).fold(1.0, f64::max) * 1.05
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_put_the_best_at_one() {
        // Accuracy (higher is better): best 0.9.
        let r = ratios(&[Some(0.9), Some(0.6), None, Some(0.0)], true);
        assert_eq!(r[0], 1.0);
        assert!((r[1] - 1.5).abs() < 1e-12);
        assert!(r[2].is_infinite() && r[3].is_infinite());
        // An error (lower is better): best 2.
        let r = ratios(&[Some(4.0), Some(2.0)], false);
        assert_eq!(r, vec![2.0, 1.0]);
        assert!(ratios(&[None, None], true).iter().all(|r| r.is_infinite()));
    }

    #[test]
    fn aup_is_the_area_under_the_step_function() {
        // Three tasks; method X has ratios 1, 1.5, ∞; Y has 1.2, 1, 1.
        // τ_max = 2: X's ρ is 1/3 on [1, 1.5) and 2/3 on [1.5, 2]:
        // 0.5/3 + 0.5 × 2/3 = 0.5. Y's is 2/3 on [1, 1.2), 1 on [1.2, 2]:
        // 0.2 × 2/3 + 0.8 = 0.9333.
        let x = profile(&[1.0, 1.5, f64::INFINITY], 2.0);
        let y = profile(&[1.2, 1.0, 1.0], 2.0);
        assert!((x.aup - 0.5).abs() < 1e-12, "{x:?}");
        assert!((y.aup - (0.2 * 2.0 / 3.0 + 0.8)).abs() < 1e-12, "{y:?}");
        // The same by integrating ρ numerically.
        let steps = 100_000;
        let numeric: f64 = (0..steps)
            .map(|i| rho(&[1.0, 1.5, f64::INFINITY], 1.0 + (i as f64 + 0.5) / steps as f64) / steps as f64)
            .sum();
        assert!((numeric - x.aup).abs() < 1e-4);
        assert_eq!(y.ratios, vec![1.0, 1.0, 1.2]);
        assert_eq!(rho(&[1.0, 1.5, f64::INFINITY], 1.0), 1.0 / 3.0);
        // A ratio past τ_max adds nothing.
        assert_eq!(profile(&[3.0], 2.0).aup, 0.0);
    }

    #[test]
    fn tau_max_shows_every_finite_ratio() {
        assert!((tau_max(&[1.0, 1.5, f64::INFINITY]) - 1.575).abs() < 1e-12);
        assert!((tau_max(&[1.0]) - 1.05).abs() < 1e-12);
        assert!((tau_max(&[]) - 1.05).abs() < 1e-12);
    }
}

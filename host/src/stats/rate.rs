//! Intervals for a rate (a share of successes) that stay inside [0, 1]
//! and keep their coverage at the sizes a bench has (a few tasks, a few
//! seeds each): Wilson's score interval over independent seeds, and over
//! episodes clustered by task, Wilson's on the effective sample size (the
//! sample size over the design effect) shrunk for the tasks' degrees of
//! freedom, as Korn and Graubard (1998) do for survey proportions. The
//! normal approximation (rate ± t × SE) runs outside [0, 1] and, at zero or
//! all successes, has no width at all: it covers far less than it claims
//! (Bowyer et al., ICML 2025; `host/tests/coverage.rs` measures it).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use super::interval::{Interval, LEVEL, t_quantile};

/// A rate with its interval and what the interval was made from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Rate {
    /// Successes over trials.
    pub rate: f64,
    /// Trials (episodes judged).
    pub n: usize,
    /// Tasks they fall in.
    pub clusters: usize,
    /// The sample size the interval is computed at: n over the design
    /// effect (at least 1), times (z / t(tasks − 1))² for few tasks; n
    /// itself for one task (its seeds are independent draws).
    pub effective_n: f64,
    /// Wilson's 95 % score interval at the effective sample size: always
    /// inside [0, 1].
    pub interval: Interval,
}

/// The standard normal's `p` quantile.
fn z_quantile(p: f64) -> f64 {
    Normal::standard().inverse_cdf(p)
}

/// Wilson's score interval for `successes` of `n` trials (either may be
/// fractional: an effective count) at `level`; none for no trials.
pub fn wilson(successes: f64, n: f64, level: f64) -> Option<Interval> {
    if n.is_nan() || n <= 0.0 || !(0.0..=n).contains(&successes) {
        return None;
    }
    let z = z_quantile(1.0 - (1.0 - level) / 2.0);
    let (p, z2) = (successes / n, z * z);
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    Some(Interval {
        lower: (centre - half).max(0.0),
        upper: (centre + half).min(1.0),
        level,
    })
}

/// The rate of independent trials (`successes` of `n`, the seeds of one
/// task) with Wilson's interval; none for no trials.
pub fn rate(successes: usize, n: usize) -> Option<Rate> {
    Some(Rate {
        rate: successes as f64 / n.max(1) as f64,
        n,
        clusters: 1,
        effective_n: n as f64,
        interval: wilson(successes as f64, n as f64, LEVEL)?,
    })
}

/// The rate of 0/1 outcomes that come in clusters (tasks; empty ones left
/// out), with the design-effect-adjusted Wilson interval; none without
/// outcomes. One cluster is independent seeds: plain Wilson.
pub fn clustered_rate(clusters: &[Vec<f64>]) -> Option<Rate> {
    let c = super::clustered_mean(clusters)?;
    let successes = clusters.iter().flatten().filter(|x| **x > 0.5).count();
    let Some(se) = c.se else {
        return rate(successes, c.n);
    };
    let (p, n) = (c.mean, c.n as f64);
    // The design effect: the clustered variance over the binomial one; a
    // rate of 0 or 1 (or no spread) has none to estimate, so it is 1.
    let binomial = p * (1.0 - p) / n;
    let design_effect = match se > 0.0 && binomial > 0.0 {
        true => (se * se / binomial).max(1.0),
        false => 1.0,
    };
    let tail = 1.0 - (1.0 - LEVEL) / 2.0;
    let shrink = (z_quantile(tail) / t_quantile(tail, (c.clusters - 1) as f64)?).powi(2);
    let effective_n = n / design_effect * shrink;
    Some(Rate {
        rate: p,
        n: c.n,
        clusters: c.clusters,
        effective_n,
        interval: wilson(p * effective_n, effective_n, LEVEL)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_statsmodels_and_stays_inside_zero_one() {
        // statsmodels.stats.proportion.proportion_confint(k, n, method="wilson").
        for (k, n, lower, upper) in [
            (3.0, 10.0, 0.107_791_267_406_301_04, 0.603_221_852_538_854_6),
            (0.0, 3.0, 0.0, 0.561_497_031_755_045_5),
            (3.0, 3.0, 0.438_502_968_244_954_44, 1.0),
        ] {
            let i = wilson(k, n, LEVEL).unwrap();
            assert!(
                (i.lower - lower).abs() < 1e-9 && (i.upper - upper).abs() < 1e-9,
                "{k}/{n}: {i:?}"
            );
        }
        assert_eq!(wilson(1.0, 0.0, LEVEL), None);
        assert_eq!(wilson(4.0, 3.0, LEVEL), None);
    }

    #[test]
    fn clustered_rates_widen_with_the_design_effect_and_few_tasks() {
        // Every task all-or-nothing: the seeds say nothing the task did not.
        let all_or_nothing = clustered_rate(&[vec![1.0; 3], vec![0.0; 3], vec![1.0; 3], vec![1.0; 3]]).unwrap();
        let mixed = clustered_rate(&[
            vec![1.0, 1.0, 0.0],
            vec![1.0, 0.0, 1.0],
            vec![1.0, 1.0, 0.0],
            vec![1.0, 1.0, 1.0],
        ])
        .unwrap();
        assert_eq!((all_or_nothing.rate, mixed.rate), (0.75, 0.75));
        assert!(
            all_or_nothing.effective_n < mixed.effective_n,
            "{all_or_nothing:?} {mixed:?}"
        );
        let width = |r: &Rate| r.interval.upper - r.interval.lower;
        assert!(width(&all_or_nothing) > width(&mixed));
        // Three tasks of nothing but successes: no zero-width [1, 1].
        let perfect = clustered_rate(&[vec![1.0; 3], vec![1.0; 3], vec![1.0; 3]]).unwrap();
        assert_eq!(perfect.rate, 1.0);
        assert!(
            perfect.interval.lower < 0.6 && perfect.interval.upper == 1.0,
            "{perfect:?}"
        );
        // (z(0.975) / t(0.975, 2))² × 9 = 1.867524 (scipy).
        assert!(
            (perfect.effective_n - 1.867_523_609_506_425_6).abs() < 1e-6,
            "{perfect:?}"
        );
        // One task: its seeds are independent, plain Wilson.
        let one = clustered_rate(&[vec![1.0, 0.0, 1.0]]).unwrap();
        assert_eq!(Some(one.interval), wilson(2.0, 3.0, LEVEL));
        assert_eq!(clustered_rate(&[vec![]]), None);
    }
}

//! The two-level (stratified) bootstrap: tasks resampled with replacement,
//! then the seeds of each drawn task resampled with replacement, with a
//! fixed seed so that a report is the same every time it is made.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::interval::{Interval, LEVEL};

/// How a bootstrap is drawn.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Bootstrap {
    /// Resamples drawn.
    pub resamples: usize,
    /// The random generator's seed (rand's StdRng).
    pub seed: u64,
}

/// The fewest resampled units (tasks, or the seeds of a single task) a
/// percentile bootstrap is shown for: below it the interval covers far
/// less than 95 % (about 76 % at 3 tasks, 84 % at 5, 91 % at 10, 94 % at
/// 20 by simulation of clustered normal scores: `host/tests/coverage.rs`
/// and docs/statistics.md), so it is left out rather
/// than shown beside the t interval as its equal.
pub const MIN_UNITS: usize = 20;

/// Why a bootstrap interval is left out.
pub const TOO_FEW_UNITS: &str = "bootstrap left out below 20 tasks (it undercovers)";

impl Default for Bootstrap {
    fn default() -> Self {
        Self {
            resamples: 2000,
            seed: 0x6d6c_7262,
        }
    }
}

impl Bootstrap {
    /// The statistic of `resamples` two-level resamples of `clusters`
    /// (empty clusters left out); empty without observations. A resample
    /// whose statistic is none is skipped.
    pub fn replicates(&self, clusters: &[Vec<f64>], statistic: impl Fn(&[f64]) -> Option<f64>) -> Vec<f64> {
        let clusters: Vec<&Vec<f64>> = clusters.iter().filter(|c| !c.is_empty()).collect();
        if clusters.is_empty() {
            return Vec::new();
        }
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut drawn = Vec::new();
        let mut replicates = Vec::with_capacity(self.resamples);
        for _ in 0..self.resamples {
            drawn.clear();
            for _ in 0..clusters.len() {
                let cluster = clusters[rng.random_range(0..clusters.len())];
                drawn.extend((0..cluster.len()).map(|_| cluster[rng.random_range(0..cluster.len())]));
            }
            replicates.extend(statistic(&drawn));
        }
        replicates
    }

    /// [`Bootstrap::interval`] where there are enough units to trust it
    /// ([`MIN_UNITS`] clusters, or as many observations in one cluster);
    /// none below.
    pub fn trusted_interval(
        &self,
        clusters: &[Vec<f64>],
        statistic: impl Fn(&[f64]) -> Option<f64>,
    ) -> Option<Interval> {
        let filled: Vec<&Vec<f64>> = clusters.iter().filter(|c| !c.is_empty()).collect();
        let units = match filled.as_slice() {
            [one] => one.len(),
            many => many.len(),
        };
        (units >= MIN_UNITS)
            .then(|| self.interval(clusters, statistic))
            .flatten()
    }

    /// The percentile interval (2.5 % and 97.5 % of the replicates) of
    /// `statistic` over `clusters`; none without observations.
    pub fn interval(&self, clusters: &[Vec<f64>], statistic: impl Fn(&[f64]) -> Option<f64>) -> Option<Interval> {
        let sorted = super::sorted(&self.replicates(clusters, statistic));
        let tail = (1.0 - LEVEL) / 2.0;
        Some(Interval {
            lower: super::quantile_of_sorted(&sorted, tail)?,
            upper: super::quantile_of_sorted(&sorted, 1.0 - tail)?,
            level: LEVEL,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::mean;

    /// Every two-level resample of two clusters of two values, each equally
    /// likely: 4 choices of clusters × 4 × 4 draws within = 64.
    fn exact_means(clusters: &[Vec<f64>; 2]) -> Vec<f64> {
        let mut means = Vec::new();
        for first in clusters {
            for second in clusters {
                for draw in 0..16 {
                    let picks = [
                        first[draw & 1],
                        first[(draw >> 1) & 1],
                        second[(draw >> 2) & 1],
                        second[(draw >> 3) & 1],
                    ];
                    means.push(picks.iter().sum::<f64>() / 4.0);
                }
            }
        }
        means
    }

    #[test]
    fn the_bootstrap_draws_from_the_two_level_distribution() {
        let clusters = [vec![0.0, 1.0], vec![2.0, 4.0]];
        let exact = exact_means(&clusters);
        let (exact_mean, exact_var) = (mean(&exact).unwrap(), super::super::sample_variance(&exact).unwrap());
        let bootstrap = Bootstrap {
            resamples: 40_000,
            seed: 7,
        };
        let replicates = bootstrap.replicates(&clusters, mean);
        assert_eq!(replicates.len(), 40_000);
        let (got_mean, got_var) = (
            mean(&replicates).unwrap(),
            super::super::sample_variance(&replicates).unwrap(),
        );
        // Within five Monte Carlo standard errors of the exact moments.
        assert!(
            (got_mean - exact_mean).abs() < 5.0 * (exact_var / 40_000.0).sqrt(),
            "{got_mean} vs {exact_mean}"
        );
        assert!((got_var / exact_var - 1.0).abs() < 0.05, "{got_var} vs {exact_var}");
        // The exact distribution's 2.5 % and 97.5 % points are 0.25 and
        // 3.5 (P(mean = 0) = 1/64 < 2.5 % < P(mean <= 0.25) = 5/64;
        // P(mean <= 3) = 59/64 < 97.5 % < 63/64): the percentile
        // interval lands on them.
        let exact = super::super::sorted(&exact);
        assert_eq!(
            (exact[0], exact[1], exact[4], exact[58], exact[59], exact[62]),
            (0.0, 0.25, 0.25, 3.0, 3.5, 3.5)
        );
        let interval = bootstrap.interval(&clusters, mean).unwrap();
        assert_eq!((interval.lower, interval.upper), (0.25, 3.5), "{interval:?}");
    }

    #[test]
    fn a_fixed_seed_gives_the_same_interval_and_constant_data_a_point() {
        let clusters = vec![vec![0.1, 0.5, 0.2], vec![0.9, 0.7], vec![0.3]];
        let bootstrap = Bootstrap::default();
        let first = bootstrap.interval(&clusters, mean).unwrap();
        assert_eq!(Some(first), bootstrap.interval(&clusters, mean));
        let other = Bootstrap { seed: 1, ..bootstrap }.interval(&clusters, mean).unwrap();
        assert_ne!(first, other, "another seed draws other resamples");
        assert!(first.lower < 0.45 && 0.45 < first.upper, "{first:?}");
        let constant = bootstrap.interval(&[vec![2.0, 2.0], vec![2.0]], mean).unwrap();
        assert_eq!((constant.lower, constant.upper), (2.0, 2.0));
        assert_eq!(bootstrap.interval(&[vec![]], mean), None);
    }

    #[test]
    fn a_bootstrap_of_few_tasks_is_left_out() {
        let bootstrap = Bootstrap::default();
        let few: Vec<Vec<f64>> = (0..MIN_UNITS - 1).map(|i| vec![i as f64, 1.0]).collect();
        assert!(bootstrap.interval(&few, mean).is_some());
        assert_eq!(bootstrap.trusted_interval(&few, mean), None);
        let enough: Vec<Vec<f64>> = (0..MIN_UNITS).map(|i| vec![i as f64, 1.0]).collect();
        assert!(bootstrap.trusted_interval(&enough, mean).is_some());
        // One task: its seeds are the units.
        assert_eq!(bootstrap.trusted_interval(&[vec![1.0, 2.0, 3.0]], mean), None);
        let seeds: Vec<f64> = (0..MIN_UNITS).map(|i| i as f64).collect();
        assert!(bootstrap.trusted_interval(&[seeds], mean).is_some());
    }
}

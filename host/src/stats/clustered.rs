//! The mean of observations that come in clusters (the seeds of one task
//! share its difficulty), with the standard error clustered by cluster.

use serde::{Deserialize, Serialize};

use super::interval::{Interval, LEVEL, t_interval};

/// A mean over every observation with its cluster-robust standard error.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Clustered {
    /// The mean over all observations.
    pub mean: f64,
    /// The standard error clustered by cluster (CR1: the sum over clusters
    /// of each cluster's summed residuals squared, times G / (G − 1), over
    /// N²); none for fewer than two clusters.
    pub se: Option<f64>,
    /// The standard error as if every observation were independent, for
    /// comparison.
    pub naive_se: Option<f64>,
    /// mean ± t(0.975, G − 1) × se.
    pub interval: Option<Interval>,
    /// Observations.
    pub n: usize,
    /// Clusters with at least one observation (G).
    pub clusters: usize,
}

/// The clustered mean of `clusters` (empty ones are left out); none
/// without observations.
pub fn clustered_mean(clusters: &[Vec<f64>]) -> Option<Clustered> {
    let clusters: Vec<&Vec<f64>> = clusters.iter().filter(|c| !c.is_empty()).collect();
    let all: Vec<f64> = clusters.iter().flat_map(|c| c.iter().copied()).collect();
    let n = all.len();
    let mean = super::mean(&all)?;
    let g = clusters.len();
    let se = (g > 1).then(|| {
        let sum: f64 = clusters
            .iter()
            .map(|c| c.iter().map(|x| x - mean).sum::<f64>().powi(2))
            .sum();
        super::descriptive::without_rounding((g as f64 / (g - 1) as f64 * sum).sqrt() / n as f64, &all)
    });
    Some(Clustered {
        mean,
        se,
        naive_se: super::mean_se(&all).and_then(|m| m.se),
        interval: t_interval(mean, se, g.saturating_sub(1), LEVEL),
        n,
        clusters: g,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clustered_standard_error_matches_the_hand_computation() {
        // N = 9, mean 24 / 9; cluster residual sums -2, 14/3, -8/3;
        // se = sqrt(3/2 × (4 + 196/9 + 64/9)) / 9 = 0.780419; t(0.975, 2).
        // The same by numpy: scipy.stats.t.interval(0.95, 2, loc, se).
        let clusters = vec![vec![1.0, 2.0, 3.0], vec![4.0, 6.0], vec![0.0, 1.0, 2.0, 5.0], vec![]];
        let c = clustered_mean(&clusters).unwrap();
        assert_eq!((c.n, c.clusters), (9, 3));
        assert!((c.mean - 8.0 / 3.0).abs() < 1e-12);
        assert!((c.se.unwrap() - 0.780_418_796_507_610_3).abs() < 1e-12, "{c:?}");
        assert!((c.naive_se.unwrap() - 2.0 / 3.0).abs() < 1e-12, "{c:?}");
        let interval = c.interval.unwrap();
        assert!((interval.lower + 0.691_204_398_600_874_5).abs() < 1e-9, "{interval:?}");
        assert!((interval.upper - 6.024_537_731_934_208).abs() < 1e-9, "{interval:?}");
    }

    #[test]
    fn seeds_that_share_their_task_widen_the_error() {
        // Two tasks, each with identical seeds: the naive error sees six
        // independent points, the clustered one two.
        let c = clustered_mean(&[vec![0.0; 3], vec![1.0; 3]]).unwrap();
        assert!(c.se.unwrap() > 2.0 * c.naive_se.unwrap(), "{c:?}");
        // Balanced clusters: CR1 equals the standard error of the cluster means.
        let means = super::super::mean_se(&[0.0, 1.0]).unwrap();
        assert!((c.se.unwrap() - means.se.unwrap()).abs() < 1e-12);
    }

    #[test]
    fn tasks_that_agree_have_no_spread_and_no_interval() {
        let c = clustered_mean(&[vec![0.1; 3], vec![0.1; 3], vec![0.1; 3]]).unwrap();
        assert_eq!((c.se, c.interval), (Some(0.0), None));
        // Seeds differ, but every task's mean is the same: nothing between tasks.
        let c = clustered_mean(&[vec![0.1, 0.3], vec![0.2, 0.2]]).unwrap();
        assert_eq!((c.se, c.interval), (Some(0.0), None));
    }

    #[test]
    fn one_cluster_has_no_clustered_error() {
        let c = clustered_mean(&[vec![1.0, 2.0]]).unwrap();
        assert_eq!((c.se, c.interval, c.clusters), (None, None, 1));
        assert!(c.naive_se.is_some());
        assert_eq!(clustered_mean(&[vec![]]), None);
    }
}

//! Paired comparison: the differences of two agents on the same (task,
//! seed) pairs, clustered by task, with a sign test, the probability of
//! improvement and the smallest difference the pairs could detect.

use serde::{Deserialize, Serialize};
use statrs::function::factorial::binomial;

use super::bootstrap::Bootstrap;
use super::interval::{Interval, LEVEL, t_interval, t_quantile};

/// The power the minimum detectable difference is computed for.
pub const POWER: f64 = 0.8;

/// What the paired differences (B − A, positive = B better) say.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Paired {
    /// Pairs compared.
    pub pairs: usize,
    /// Tasks they fall in.
    pub clusters: usize,
    /// The mean difference over the pairs.
    pub mean: f64,
    /// Its standard error: clustered by task over two or more tasks,
    /// else over the pairs of the one task.
    pub se: Option<f64>,
    /// The t interval's degrees of freedom: tasks − 1, or pairs − 1 for one task.
    pub df: usize,
    /// mean ± t(0.975, df) × se; none where the design cannot tell.
    pub interval: Option<Interval>,
    /// The two-level bootstrap's percentile interval of the mean
    /// difference; none below 20 tasks (or 20 pairs of one task), where it
    /// covers far less than 95 %.
    pub bootstrap: Option<Interval>,
    /// Pairs where B did better; over two or more tasks, tasks whose mean
    /// difference favours B (the seeds of a task are not independent
    /// draws, so they are not counted as such).
    pub wins: usize,
    /// Pairs (or tasks) where B did worse.
    pub losses: usize,
    /// Pairs (or tasks) with no difference.
    pub ties: usize,
    /// True when wins, losses and ties count tasks rather than pairs.
    pub signs_by_task: bool,
    /// The exact two-sided sign test's p-value over those (ties left out).
    pub sign_test_p: f64,
    /// The smallest true difference these pairs would detect with 80 %
    /// power at a 5 % two-sided level, at the observed spread:
    /// (t(0.975, df) + t(0.8, df)) × se; none where the design cannot tell.
    pub min_detectable: Option<f64>,
    /// Why these pairs cannot tell a difference (no interval, no smallest
    /// detectable difference): one pair, or differences with no spread
    /// (identical seeds); none where they can.
    #[serde(default)]
    pub cannot_tell: Option<CannotTell>,
}

/// Why paired differences cannot tell a difference.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CannotTell {
    /// A single pair: no spread to judge a difference by.
    OnePair,
    /// Every pair differs by the same amount (identical seeds): a standard
    /// error of zero is not certainty, it is seeds that did not exercise
    /// randomness.
    NoSpread,
}

impl CannotTell {
    /// How tables say it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::OnePair => "one pair: no spread to judge by",
            Self::NoSpread => "no spread (identical seeds?)",
        }
    }
}

/// The paired summary of `differences`, one list per task (empty tasks
/// left out); none without a pair.
pub fn paired(differences: &[Vec<f64>], bootstrap: &Bootstrap) -> Option<Paired> {
    let clusters: Vec<Vec<f64>> = differences.iter().filter(|c| !c.is_empty()).cloned().collect();
    let all: Vec<f64> = clusters.iter().flatten().copied().collect();
    let (mean, se, df) = match clusters.len() {
        0 => return None,
        1 => {
            let m = super::mean_se(&all)?;
            (m.mean, m.se, all.len() - 1)
        }
        g => {
            let c = super::clustered_mean(&clusters)?;
            (c.mean, c.se, g - 1)
        }
    };
    let signs_by_task = clusters.len() > 1;
    let signed: Vec<f64> = match signs_by_task {
        true => clusters.iter().filter_map(|c| super::mean(c)).collect(),
        false => all.clone(),
    };
    let (wins, losses) = (
        signed.iter().filter(|d| **d > 0.0).count(),
        signed.iter().filter(|d| **d < 0.0).count(),
    );
    let cannot_tell = match se {
        _ if all.len() < 2 => Some(CannotTell::OnePair),
        Some(0.0) => Some(CannotTell::NoSpread),
        _ => None,
    };
    let min_detectable = se.filter(|_| cannot_tell.is_none()).and_then(|se| {
        let alpha = t_quantile(1.0 - (1.0 - LEVEL) / 2.0, df as f64)?;
        Some((alpha + t_quantile(POWER, df as f64)?) * se)
    });
    Some(Paired {
        pairs: all.len(),
        clusters: clusters.len(),
        mean,
        se,
        df,
        interval: t_interval(mean, se, df, LEVEL),
        bootstrap: bootstrap.trusted_interval(&clusters, super::mean),
        wins,
        losses,
        ties: signed.len() - wins - losses,
        signs_by_task,
        sign_test_p: sign_test(wins, losses),
        min_detectable,
        cannot_tell,
    })
}

/// The exact two-sided sign test: twice the binomial(n, 1/2) tail at the
/// smaller count, at most 1 (scipy's binomtest for p = 1/2).
pub fn sign_test(wins: usize, losses: usize) -> f64 {
    let n = (wins + losses) as u64;
    let low = wins.min(losses) as u64;
    let tail: f64 = (0..=low).map(|k| binomial(n, k)).sum::<f64>() / 2f64.powi(n as i32);
    (2.0 * tail).min(1.0)
}

/// rliable's probability of improvement: per task, the chance that a run
/// of B beats a run of A (ties count half; every run of one against every
/// run of the other), averaged over the tasks that can tell: runs of both,
/// and runs that vary on at least one side. Where every run of A is the
/// same and every run of B too (one seed each, or identical seeds), the
/// answer is 0, ½ or 1 by construction: the design cannot tell.
pub fn probability_of_improvement(tasks: &[(Vec<f64>, Vec<f64>)]) -> Option<f64> {
    let varies = |runs: &[f64]| runs.iter().any(|r| *r != runs[0]);
    let per_task: Vec<f64> = tasks
        .iter()
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
        .filter(|(a, b)| varies(a) || varies(b))
        .map(|(a, b)| {
            let wins: f64 = a
                .iter()
                .flat_map(|x| {
                    b.iter().map(move |y| {
                        if y > x {
                            1.0
                        } else if y == x {
                            0.5
                        } else {
                            0.0
                        }
                    })
                })
                .sum();
            wins / (a.len() * b.len()) as f64
        })
        .collect();
    super::mean(&per_task)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [f64; 5] = [0.50, 0.62, 0.41, 0.70, 0.55];
    const GAIN: [f64; 5] = [0.03, 0.05, 0.02, 0.04, 0.03];

    #[test]
    fn pairing_finds_a_difference_the_separate_intervals_hide() {
        let b: Vec<f64> = A.iter().zip(GAIN).map(|(a, g)| a + g).collect();
        // Each agent alone (scipy.stats.t.interval over its five seeds):
        // A (0.4181, 0.6939), B (0.4402, 0.7398): they overlap.
        let alone = |v: &[f64]| {
            let m = crate::stats::mean_se(v).unwrap();
            t_interval(m.mean, m.se, v.len() - 1, LEVEL).unwrap()
        };
        let (ia, ib) = (alone(&A), alone(&b));
        assert!((ia.lower - 0.418_124_967_658_796).abs() < 1e-9 && (ib.upper - 0.739_773_709_303_517_5).abs() < 1e-9);
        assert!(ib.lower < ia.upper, "the unpaired intervals overlap");
        // Paired: mean 0.034, sem 0.0050990, t(0.975, 4) interval
        // (0.019843, 0.048157) excludes 0 (scipy: ttest_rel p = 0.0026).
        let differences: Vec<f64> = b.iter().zip(A).map(|(b, a)| b - a).collect();
        let p = paired(&[differences], &Bootstrap::default()).unwrap();
        assert_eq!(
            (p.pairs, p.clusters, p.df, p.wins, p.losses, p.ties),
            (5, 1, 4, 5, 0, 0)
        );
        assert!((p.mean - 0.034).abs() < 1e-12);
        assert!((p.se.unwrap() - 0.005_099_019_513_592_79).abs() < 1e-12);
        let interval = p.interval.unwrap();
        assert!(
            (interval.lower - 0.019_842_852_230_177_267).abs() < 1e-9,
            "{interval:?}"
        );
        assert!((interval.upper - 0.048_157_147_769_822_79).abs() < 1e-9, "{interval:?}");
        assert!(!interval.contains(0.0), "{p:?}");
        assert_eq!((p.bootstrap, p.cannot_tell), (None, None), "five pairs: no bootstrap");
        // Five wins of five: 2 × 1/32 (scipy.stats.binomtest(5, 5)).
        assert!((p.sign_test_p - 0.0625).abs() < 1e-12);
        // (t(0.975, 4) + t(0.8, 4)) × se = 0.018955.
        assert!((p.min_detectable.unwrap() - 0.018_955_144_510_552_555).abs() < 1e-9);
        // B beats A in 15 of the 25 run-against-run matches.
        let poi = probability_of_improvement(&[(A.to_vec(), b)]).unwrap();
        assert!((poi - 0.6).abs() < 1e-12);
    }

    #[test]
    fn over_tasks_the_error_is_clustered_and_a_missing_pair_shrinks_its_task() {
        // Task one lost its third pair (not a zero): it has two.
        let p = paired(&[vec![0.1, 0.3], vec![0.2, 0.2, 0.5], vec![]], &Bootstrap::default()).unwrap();
        assert_eq!((p.pairs, p.clusters, p.df), (5, 2, 1));
        // Signs count the two tasks, not the five pairs.
        assert!(p.signs_by_task);
        assert_eq!((p.wins, p.losses, p.ties), (2, 0, 0));
        assert!((p.sign_test_p - 0.5).abs() < 1e-12);
        let c = crate::stats::clustered_mean(&[vec![0.1, 0.3], vec![0.2, 0.2, 0.5]]).unwrap();
        assert_eq!((p.mean, p.se), (c.mean, c.se));
        assert!((p.mean - 0.26).abs() < 1e-12);
        assert_eq!(paired(&[vec![], vec![]], &Bootstrap::default()), None);
    }

    #[test]
    fn identical_seeds_cannot_tell() {
        // Two seeds each, the same score every time: B − A is 0.1 twice.
        let p = paired(&[vec![0.1, 0.1]], &Bootstrap::default()).unwrap();
        assert_eq!(p.se, Some(0.0));
        assert_eq!(
            (p.interval, p.min_detectable, p.cannot_tell),
            (None, None, Some(CannotTell::NoSpread))
        );
        // Over tasks too: every task's seeds alike and the tasks alike.
        let p = paired(&[vec![0.1, 0.1], vec![0.1, 0.1], vec![0.1]], &Bootstrap::default()).unwrap();
        assert_eq!((p.interval, p.cannot_tell), (None, Some(CannotTell::NoSpread)));
        let one = paired(&[vec![0.3]], &Bootstrap::default()).unwrap();
        assert_eq!((one.interval, one.cannot_tell), (None, Some(CannotTell::OnePair)));
        // P(B > A) of runs that never vary is 1 by construction: left out.
        assert_eq!(probability_of_improvement(&[(vec![0.5, 0.5], vec![0.6, 0.6])]), None);
        assert_eq!(probability_of_improvement(&[(vec![0.5], vec![0.6])]), None);
        let mixed = [(vec![0.5, 0.5], vec![0.6, 0.6]), (vec![0.5, 0.7], vec![0.6, 0.6])];
        assert_eq!(probability_of_improvement(&mixed), Some(0.5));
    }

    #[test]
    fn the_sign_test_matches_scipy() {
        // scipy.stats.binomtest(k, n, 0.5).pvalue
        assert!((sign_test(1, 6) - 0.125).abs() < 1e-12);
        assert!((sign_test(0, 3) - 0.25).abs() < 1e-12);
        assert!((sign_test(3, 5) - 0.726_562_5).abs() < 1e-12);
        assert_eq!(sign_test(0, 0), 1.0);
        assert_eq!(sign_test(4, 4), 1.0);
    }
}

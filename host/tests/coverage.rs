//! The intervals mlrb reports keep their 95 % coverage at the sizes a
//! bench has (3, 5 and 10 tasks of 3 seeds), measured by simulation with a
//! seeded generator; the normal-approximation intervals they replace do not
//! (small-sample normal intervals are too narrow: Bowyer et al., ICML 2025).

use mlrb::stats::{Bootstrap, LEVEL, clustered_mean, clustered_rate, mean, t_quantile};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const TASKS: [usize; 3] = [3, 5, 10];
const SEEDS: usize = 3;
const REPLICATIONS: usize = 2000;
/// Monte Carlo error at 2000 replications is about 0.005 at 95 %: the band
/// allows four of them below nominal.
const LOWEST: f64 = 0.93;

/// Every task's success chance: `rate` ± `spread`, each half of the tasks
/// (so the true rate is `rate`), and 0/1 outcomes of `SEEDS` seeds each.
fn successes(rng: &mut StdRng, tasks: usize, rate: f64, spread: f64) -> Vec<Vec<f64>> {
    (0..tasks)
        .map(|_| {
            let p = if rng.random::<f64>() < 0.5 {
                rate - spread
            } else {
                rate + spread
            };
            (0..SEEDS)
                .map(|_| f64::from(u8::from(rng.random::<f64>() < p)))
                .collect()
        })
        .collect()
}

/// What mlrb printed before: the clustered mean ± t(tasks − 1) × clustered SE
/// (zero width where every outcome agreed).
fn normal_approximation(clusters: &[Vec<f64>]) -> Option<(f64, f64)> {
    let c = clustered_mean(clusters)?;
    let t = t_quantile(1.0 - (1.0 - LEVEL) / 2.0, (c.clusters - 1) as f64)?;
    let se = c.se?;
    Some((c.mean - t * se, c.mean + t * se))
}

/// An interval from per-task outcomes: (lower, upper), or none.
type Method<'a> = &'a dyn Fn(&[Vec<f64>]) -> Option<(f64, f64)>;

/// The share of replications whose interval holds `truth`; a missing
/// interval holds nothing.
fn coverage(draw: &mut dyn FnMut() -> Vec<Vec<f64>>, interval: Method, truth: f64) -> f64 {
    let held = (0..REPLICATIONS)
        .filter(|_| interval(&draw()).is_some_and(|(lo, hi)| lo <= truth && truth <= hi))
        .count();
    held as f64 / REPLICATIONS as f64
}

#[test]
fn success_rate_intervals_keep_their_coverage_at_three_five_and_ten_tasks() {
    let mut rng = StdRng::seed_from_u64(53);
    let wilson = |c: &[Vec<f64>]| clustered_rate(c).map(|r| (r.interval.lower, r.interval.upper));
    let mut old_failed = 0;
    for tasks in TASKS {
        let failed_before = old_failed;
        for (rate, spread) in [
            (0.5, 0.0),
            (0.5, 0.1),
            (0.8, 0.0),
            (0.8, 0.15),
            (0.95, 0.0),
            (0.95, 0.05),
        ] {
            let mut seeded = StdRng::seed_from_u64(rng.random());
            let mut draw = || successes(&mut seeded, tasks, rate, spread);
            let new = coverage(&mut draw, &wilson, rate);
            let mut seeded = StdRng::seed_from_u64(rng.random());
            let mut draw = || successes(&mut seeded, tasks, rate, spread);
            let old = coverage(&mut draw, &normal_approximation, rate);
            eprintln!(
                "{tasks} tasks, rate {rate} ± {spread}: Wilson (clustered) {new:.3}, normal approximation {old:.3}"
            );
            assert!(new >= LOWEST, "{tasks} tasks, rate {rate} ± {spread}: coverage {new}");
            if tasks == 10 {
                assert!(
                    new <= 0.995,
                    "{tasks} tasks, rate {rate}: {new} is no longer a 95 % interval"
                );
            }
            old_failed += usize::from(old < LOWEST);
        }
        // The interval this replaces undercovers at every size measured.
        assert!(
            old_failed > failed_before,
            "{tasks} tasks: the normal approximation held"
        );
        // Every interval stays inside [0, 1], even all successes of 3 tasks.
        let all = vec![vec![1.0; SEEDS]; tasks];
        let r = clustered_rate(&all).unwrap();
        assert!(
            r.interval.upper <= 1.0 && r.interval.lower < 1.0 && r.interval.lower >= 0.0,
            "{r:?}"
        );
    }
    // ... and in most cases: 12 of the 18 at this seed.
    assert!(
        old_failed >= 9,
        "the normal approximation failed in only {old_failed} of 18"
    );
}

#[test]
fn mean_intervals_over_tasks_keep_their_coverage_and_the_small_bootstrap_does_not() {
    let mut rng = StdRng::seed_from_u64(2025);
    let normal = |rng: &mut StdRng| {
        // Box–Muller.
        let (u, v): (f64, f64) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    };
    // Tasks differ (sd 1), seeds within a task less (sd 0.5); the truth is 0.
    let draw = |rng: &mut StdRng, tasks: usize| -> Vec<Vec<f64>> {
        (0..tasks)
            .map(|_| {
                let task = normal(rng);
                (0..SEEDS).map(|_| task + 0.5 * normal(rng)).collect()
            })
            .collect()
    };
    let bootstrap = Bootstrap {
        resamples: 400,
        ..Bootstrap::default()
    };
    for tasks in TASKS {
        let mut seeded = StdRng::seed_from_u64(rng.random());
        let mut sample = || draw(&mut seeded, tasks);
        let t = |c: &[Vec<f64>]| clustered_mean(c)?.interval.map(|i| (i.lower, i.upper));
        let held = coverage(&mut sample, &t, 0.0);
        eprintln!("{tasks} tasks: clustered t interval {held:.3}");
        assert!((LOWEST..=0.97).contains(&held), "{tasks} tasks: t coverage {held}");
        let mut seeded = StdRng::seed_from_u64(rng.random());
        let (mut boot_held, replications) = (0, 500);
        for _ in 0..replications {
            let clusters = draw(&mut seeded, tasks);
            let i = bootstrap.interval(&clusters, mean).unwrap();
            boot_held += usize::from(i.contains(0.0));
            // What mlrb shows: nothing, below 20 tasks.
            assert_eq!(bootstrap.trusted_interval(&clusters, mean), None);
        }
        let boot = boot_held as f64 / replications as f64;
        eprintln!("{tasks} tasks: percentile bootstrap {boot:.3} (left out)");
        if tasks < 10 {
            assert!(boot < LOWEST, "{tasks} tasks: the bootstrap covers {boot}");
        }
    }
}

//! Two agents compared on the (task, seed) pairs both ran: per task and
//! overall, the mean paired difference (B − A, positive when B is better)
//! with its t and bootstrap intervals, a sign test, the probability of
//! improvement and the smallest difference the pairs could detect. Pairs
//! missing on one side are named, never dropped in silence.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::ranked;
use super::result_line::ResultLine;
use super::text_table::TextTable;
use crate::stats::{Bootstrap, CannotTell, Paired, mean, paired, probability_of_improvement};

/// What is compared per episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Measure {
    /// The normalised score (starter 0, reference 1); an agent failure counts 0.
    Normalized,
    /// Relative improvement over the baseline; an agent failure counts 0.
    Improvement,
    /// Success (1) or not (0); an agent failure is a failure.
    Success,
    /// The task's own score, higher is better (lower-is-better metrics turned
    /// around); an agent failure counts as the baseline's score. Per task only.
    Score,
}

impl Measure {
    /// The episode's value; none where it has none.
    fn value(self, r: &ResultLine) -> Option<f64> {
        match self {
            Self::Normalized => ranked::normalized(r),
            Self::Improvement => ranked::improvement(r),
            Self::Success => ranked::success(r).map(|s| f64::from(u8::from(s))),
            Self::Score if ranked::agent_failure(r) => {
                let higher = r.higher_is_better?;
                r.baseline.map(|b| if higher { b } else { -b })
            }
            Self::Score => ranked::oriented_score(r),
        }
    }

    /// How it reads, for tables.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Normalized => "normalised score (starter 0, reference 1; an agent failure counts 0)",
            Self::Improvement => "relative improvement over the baseline (an agent failure counts 0)",
            Self::Success => "success, more than 10 % better than the baseline (an agent failure fails)",
            Self::Score => {
                "the task's score, turned so that higher is better (an agent failure counts as the baseline)"
            }
        }
    }

    /// A short name, for headlines.
    pub fn short(self) -> &'static str {
        match self {
            Self::Normalized => "normalised score: starter 0, reference 1",
            Self::Improvement => "relative improvement over the baseline",
            Self::Success => "success, more than 10 % better than the baseline",
            Self::Score => "the task's score, higher is better",
        }
    }

    /// The first measure every one of `results` has: normalised, else
    /// improvement, else the score.
    fn auto(results: &[&ResultLine]) -> Self {
        let counted = || results.iter().filter(|r| ranked::counted(r));
        if counted().all(|r| ranked::has_scale(r)) {
            Self::Normalized
        } else if counted().all(|r| r.baseline.is_some() && (!r.valid || r.improvement.is_some())) {
            Self::Improvement
        } else {
            Self::Score
        }
    }
}

/// One side of a comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Side {
    /// The run directory.
    pub run: String,
    /// The agent's name in that run.
    pub agent: String,
}

/// A (task, seed) left out of the pairs, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Unpaired {
    /// The task.
    pub task: String,
    /// The seed.
    pub seed: u64,
    /// Why it has no pair.
    pub why: String,
}

/// One task's comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskComparison {
    /// The task.
    pub task: String,
    /// Its metric.
    pub metric: String,
    /// A's mean over its paired seeds.
    pub a_mean: Option<f64>,
    /// B's mean over its paired seeds.
    pub b_mean: Option<f64>,
    /// The paired differences; none without a pair.
    pub paired: Option<Paired>,
    /// The chance a run of B beats a run of A (every paired seed of one
    /// against every paired seed of the other; ties half).
    pub probability_of_improvement: Option<f64>,
}

/// What a comparison concludes at its margin, with 95 % confidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The interval lies below −margin: B is worse.
    Worse,
    /// The interval lies above +margin: B is better.
    Better,
    /// The interval reaches within the margin: no difference shown.
    NoDifferenceShown,
    /// Too few pairs for an interval.
    Undetermined,
}

/// The comparison of B against A.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// The first side (the reference).
    pub a: Side,
    /// The second side (the candidate).
    pub b: Side,
    /// What is compared.
    pub measure: Measure,
    /// The margin the verdict allows, in the measure's units.
    pub margin: f64,
    /// Per task.
    pub tasks: Vec<TaskComparison>,
    /// Over every pair, clustered by task; none for the score of several
    /// tasks (different metrics are not averaged).
    pub overall: Option<Paired>,
    /// rliable's probability of improvement, averaged over tasks.
    pub probability_of_improvement: Option<f64>,
    /// The (task, seed)s without a pair, each with why.
    pub unpaired: Vec<Unpaired>,
    /// What the t interval (of the overall, or of the one task) says.
    pub verdict: Verdict,
    /// Why the pairs the verdict rests on cannot tell a difference, if they cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cannot_tell: Option<CannotTell>,
    /// Set when both sides ran in the smoke profile: the difference measures nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub smoke: bool,
}

type Key = (String, u64);

/// Each side's results by (task, seed); stale ones named as unpaired.
fn keyed<'a>(results: &'a [&'a ResultLine]) -> BTreeMap<Key, &'a ResultLine> {
    let mut map = BTreeMap::new();
    for r in results {
        // A stale result's rerun, when there is one, takes its place.
        let key = (r.task.clone(), r.seed);
        if r.stale.is_none() || !map.contains_key(&key) {
            map.insert(key, *r);
        }
    }
    map
}

/// Why a pair cannot be made of `a` and `b`, if it cannot.
fn unpairable(measure: Measure, a: Option<&ResultLine>, b: Option<&ResultLine>) -> Option<String> {
    let side = |r: Option<&ResultLine>, name: &str| -> Option<String> {
        let Some(r) = r else {
            return Some(format!("no result in {name}"));
        };
        if let Some(error) = &r.infra_error {
            return Some(format!("infrastructure failure in {name} (left out): {error}"));
        }
        if let Some(why) = &r.stale {
            return Some(format!("stale in {name}: {why}"));
        }
        measure
            .value(r)
            .is_none()
            .then(|| format!("no {measure:?} value in {name}").to_lowercase())
    };
    side(a, "A").or_else(|| side(b, "B"))
}

/// Compares `b` with `a` (each one agent's results) on `measure`
/// (default: the first one both have); the verdict is at `margin`.
pub fn compare(
    (a, b): (&[&ResultLine], &[&ResultLine]),
    sides: (Side, Side),
    measure: Option<Measure>,
    margin: f64,
    bootstrap: &Bootstrap,
) -> Result<Comparison> {
    check_same_tasks(a, b)?;
    let smoke = same_profile((a, b), (&sides.0, &sides.1))?;
    let measure = measure.unwrap_or_else(|| Measure::auto(&[a, b].concat()));
    let (ka, kb) = (keyed(a), keyed(b));
    let keys: BTreeSet<&Key> = ka.keys().chain(kb.keys()).collect();
    let mut unpaired = Vec::new();
    let mut per_task: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for key in keys {
        let (ra, rb) = (ka.get(key).copied(), kb.get(key).copied());
        let pairs = per_task.entry(key.0.as_str()).or_default();
        match unpairable(measure, ra, rb) {
            Some(why) => unpaired.push(Unpaired {
                task: key.0.clone(),
                seed: key.1,
                why,
            }),
            None => pairs.extend(ra.and_then(|x| measure.value(x)).zip(rb.and_then(|y| measure.value(y)))),
        }
    }
    if per_task.values().all(|p| p.is_empty()) {
        bail!(
            "A ({}) and B ({}) have no (task, seed) pair in common to compare",
            sides.0.agent,
            sides.1.agent
        );
    }
    let metric = |task: &str| a.iter().chain(b).find(|r| r.task == task && !r.metric.is_empty());
    let tasks: Vec<TaskComparison> = per_task
        .iter()
        .map(|(task, pairs)| task_comparison(task, metric(task).map(|r| r.metric.clone()), pairs, bootstrap))
        .collect();
    let several_metrics = measure == Measure::Score && per_task.values().filter(|p| !p.is_empty()).count() > 1;
    let differences: Vec<Vec<f64>> = per_task
        .values()
        .map(|p| p.iter().map(|(x, y)| y - x).collect())
        .collect();
    let overall = (!several_metrics).then(|| paired(&differences, bootstrap)).flatten();
    let poi: Vec<(Vec<f64>, Vec<f64>)> = per_task.values().map(|p| p.iter().copied().unzip()).collect();
    let judged = overall.or_else(|| tasks.iter().find_map(|t| t.paired).filter(|_| tasks.len() == 1));
    Ok(Comparison {
        a: sides.0,
        b: sides.1,
        measure,
        margin,
        probability_of_improvement: probability_of_improvement(&poi).filter(|_| !several_metrics),
        tasks,
        overall,
        unpaired,
        verdict: verdict(judged.as_ref(), margin),
        cannot_tell: judged.and_then(|p| p.cannot_tell),
        smoke,
    })
}

/// Whether both sides ran in the smoke profile; refused where only one
/// did: a smoke score measures nothing, so it is no side of a comparison
/// with a real one.
fn same_profile((a, b): (&[&ResultLine], &[&ResultLine]), (sa, sb): (&Side, &Side)) -> Result<bool> {
    let profile =
        |results: &[&ResultLine], side: &Side| super::result_line::smoke_of(results.iter().copied(), &side.run);
    match (profile(a, sa)?, profile(b, sb)?) {
        (x, y) if x == y => Ok(x),
        (x, _) => {
            let (smoke, real) = if x { (sa, sb) } else { (sb, sa) };
            bail!(
                "{} ran in the smoke profile (stand-in data) and {} on real data: a smoke score measures nothing, so they are not compared",
                smoke.run,
                real.run
            )
        }
    }
}

fn task_comparison(task: &str, metric: Option<String>, pairs: &[(f64, f64)], bootstrap: &Bootstrap) -> TaskComparison {
    let (xs, ys): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let differences: Vec<f64> = pairs.iter().map(|(x, y)| y - x).collect();
    TaskComparison {
        task: task.to_string(),
        metric: metric.unwrap_or_default(),
        a_mean: mean(&xs),
        b_mean: mean(&ys),
        paired: paired(&[differences], bootstrap),
        probability_of_improvement: probability_of_improvement(&[(xs, ys)]),
    }
}

/// A task's metric must be the same on both sides.
fn check_same_tasks(a: &[&ResultLine], b: &[&ResultLine]) -> Result<()> {
    for x in a.iter().filter(|r| r.infra_error.is_none()) {
        if let Some(y) = b.iter().find(|y| y.task == x.task && y.infra_error.is_none())
            && (x.metric != y.metric || x.higher_is_better != y.higher_is_better)
        {
            bail!(
                "task {}: A scores it by {} and B by {}: not the same task, not comparable",
                x.task,
                x.metric,
                y.metric
            );
        }
    }
    Ok(())
}

/// What the t interval says at `margin`.
pub fn verdict(paired: Option<&Paired>, margin: f64) -> Verdict {
    match paired.and_then(|p| p.interval) {
        None => Verdict::Undetermined,
        Some(i) if i.upper < -margin => Verdict::Worse,
        Some(i) if i.lower > margin => Verdict::Better,
        Some(_) => Verdict::NoDifferenceShown,
    }
}

impl Comparison {
    /// The pairs the verdict rests on: the overall, or the one task's.
    pub fn judged(&self) -> Option<&Paired> {
        match self.tasks.as_slice() {
            [one] if self.overall.is_none() => one.paired.as_ref(),
            _ => self.overall.as_ref(),
        }
    }

    /// Whether `--fail-if-worse` stops: B is worse beyond the margin with
    /// 95 % confidence, or, where the seeds did not vary (so no interval
    /// can say how sure), B lost every pair (or task) beyond the margin: a
    /// gate errs on the side of stopping.
    pub fn fails_gate(&self) -> bool {
        let lost_throughout = |p: &Paired| p.wins == 0 && p.ties == 0 && p.mean < -self.margin;
        match self.verdict {
            Verdict::Worse => true,
            _ => self.cannot_tell == Some(CannotTell::NoSpread) && self.judged().is_some_and(lost_throughout),
        }
    }

    /// Per task and overall, as text cells; without `wide`, only the
    /// pairs, means, difference, its t interval and the wins.
    pub fn table(&self, wide: bool) -> TextTable {
        let header = vec![
            "task",
            "pairs",
            "A: mean",
            "B: mean",
            "B − A: mean ± SE",
            "95 % t interval",
            "95 % bootstrap (from 20 tasks)",
            "B better / worse / tied",
            "sign test p",
            "P(B > A)",
            "smallest detectable (80 % power)",
        ];
        let mut rows: Vec<Vec<String>> = self
            .tasks
            .iter()
            .map(|t| {
                row(
                    &t.task,
                    t.a_mean,
                    t.b_mean,
                    t.paired.as_ref(),
                    t.probability_of_improvement,
                )
            })
            .collect();
        if let Some(overall) = &self.overall {
            let label = match wide {
                true => format!("all {} tasks (clustered by task)", overall.clusters),
                false => format!("all {} tasks", overall.clusters),
            };
            rows.push(row(&label, None, None, Some(overall), self.probability_of_improvement));
        }
        let table = TextTable { header, rows };
        match wide {
            true => table,
            false => table.columns(&[0, 1, 2, 3, 4, 5, 7]).shortened(),
        }
    }
}

fn row(label: &str, a: Option<f64>, b: Option<f64>, p: Option<&Paired>, poi: Option<f64>) -> Vec<String> {
    use crate::format::number;
    let interval = |i: Option<crate::stats::Interval>| {
        i.map_or("n/a".to_string(), |i| {
            format!("[{}, {}]", number(Some(i.lower)), number(Some(i.upper)))
        })
    };
    let Some(p) = p else {
        return vec![label.to_string(), "0".into(), number(a), number(b)]
            .into_iter()
            .chain(std::iter::repeat_n("n/a".to_string(), 7))
            .collect();
    };
    // Where the pairs cannot tell, every cell that would claim so says why.
    let why = p.cannot_tell.map(|c| format!("cannot tell: {}", c.describe()));
    let interval = |i| match &why {
        Some(why) => why.clone(),
        None => interval(i),
    };
    let bootstrap = match p.bootstrap {
        Some(b) => interval(Some(b)),
        None if why.is_none() => "left out (too few to trust)".into(),
        None => "n/a".into(),
    };
    let poi = match poi {
        Some(v) => format!("{v:.2}"),
        None => "cannot tell (runs do not vary)".into(),
    };
    vec![
        label.to_string(),
        p.pairs.to_string(),
        number(a),
        number(b),
        format!(
            "{}{}",
            number(Some(p.mean)),
            p.se.filter(|_| why.is_none())
                .map_or(String::new(), |se| format!(" ± {}", number(Some(se))))
        ),
        interval(p.interval),
        bootstrap,
        format!(
            "{} / {} / {}{}",
            p.wins,
            p.losses,
            p.ties,
            if p.signs_by_task { " tasks" } else { "" }
        ),
        format!("{:.3}", p.sign_test_p),
        poi,
        why.unwrap_or_else(|| number(p.min_detectable)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::line;

    fn sides() -> (Side, Side) {
        let side = |agent: &str| Side {
            run: "r".into(),
            agent: agent.into(),
        };
        (side("a"), side("b"))
    }

    fn refs(results: &[ResultLine]) -> Vec<&ResultLine> {
        results.iter().collect()
    }

    #[test]
    fn a_missing_pair_is_named_and_the_rest_compared() {
        let a = vec![
            line("t", "a", 1, Some(0.70)),
            line("t", "a", 2, Some(0.60)),
            line("t", "a", 3, Some(0.66)),
        ];
        let mut infra = line("t", "b", 2, None);
        infra.infra_error = Some("the sandbox did not start".into());
        let b = vec![line("t", "b", 1, Some(0.74)), infra, line("t", "b", 4, Some(0.9))];
        let c = compare((&refs(&a), &refs(&b)), sides(), None, 0.0, &Bootstrap::default()).unwrap();
        assert_eq!(c.measure, Measure::Normalized);
        let why: Vec<(u64, &str)> = c.unpaired.iter().map(|u| (u.seed, u.why.as_str())).collect();
        assert_eq!(why.len(), 3, "{why:?}");
        assert!(
            why[0].0 == 2 && why[0].1.contains("infrastructure failure in B"),
            "{why:?}"
        );
        assert!(why[1].0 == 3 && why[1].1 == "no result in B", "{why:?}");
        assert!(why[2].0 == 4 && why[2].1 == "no result in A", "{why:?}");
        let p = c.tasks[0].paired.unwrap();
        assert_eq!(p.pairs, 1);
        assert!((p.mean - 0.1).abs() < 1e-12, "0.04 / 0.4 normalised: {p:?}");
        assert_eq!(c.verdict, Verdict::Undetermined, "one pair has no interval");
        assert_eq!(c.cannot_tell, Some(CannotTell::OnePair));
        assert!(!c.fails_gate());
    }

    #[test]
    fn a_worse_agent_is_worse_beyond_a_small_margin_only() {
        let a: Vec<ResultLine> = (1..=3)
            .map(|s| line("t", "a", s, Some(0.8 + 0.01 * s as f64)))
            .collect();
        let b: Vec<ResultLine> = (1..=3)
            .map(|s| line("t", "b", s, Some(0.6 + 0.012 * s as f64)))
            .collect();
        let run = |a: &[ResultLine], b: &[ResultLine], margin| {
            compare((&refs(a), &refs(b)), sides(), None, margin, &Bootstrap::default()).unwrap()
        };
        assert_eq!(run(&a, &b, 0.0).verdict, Verdict::Worse);
        assert_eq!(run(&b, &a, 0.0).verdict, Verdict::Better);
        // The difference is about −0.5 normalised: a margin of 1 covers it.
        assert_eq!(run(&a, &b, 1.0).verdict, Verdict::NoDifferenceShown);
        let scored = compare(
            (&refs(&a), &refs(&b)),
            sides(),
            Some(Measure::Score),
            0.0,
            &Bootstrap::default(),
        )
        .unwrap();
        assert!((scored.tasks[0].paired.unwrap().mean + 0.196).abs() < 1e-12);
        assert_eq!(scored.table(true).rows.len(), 2, "one task and the overall row");
    }

    #[test]
    fn identical_seeds_cannot_tell_and_say_so() {
        // Two seeds each, the same score every time: B − A is always +0.1.
        let a = vec![line("t", "a", 1, Some(0.7)), line("t", "a", 2, Some(0.7))];
        let b = vec![line("t", "b", 1, Some(0.74)), line("t", "b", 2, Some(0.74))];
        let c = compare((&refs(&a), &refs(&b)), sides(), None, 0.0, &Bootstrap::default()).unwrap();
        assert_eq!(c.verdict, Verdict::Undetermined);
        assert_eq!(c.cannot_tell, Some(CannotTell::NoSpread));
        assert_eq!(c.probability_of_improvement, None, "not 1.00");
        // B won every pair: a gate on a worse B does not stop; turned round, it does.
        assert!(!c.fails_gate());
        let turned = compare((&refs(&b), &refs(&a)), sides(), None, 0.0, &Bootstrap::default()).unwrap();
        assert!(turned.fails_gate() && turned.verdict == Verdict::Undetermined);
        let within = compare((&refs(&b), &refs(&a)), sides(), None, 0.5, &Bootstrap::default()).unwrap();
        assert!(!within.fails_gate(), "a margin larger than the difference lets it pass");
        let rows = c.table(true).rows;
        let cells = rows[0].join(" | ");
        assert!(!cells.contains("0.0000") && !cells.contains("1.00"), "{cells}");
        assert!(cells.contains("cannot tell"), "{cells}");
    }

    #[test]
    fn an_agent_failure_is_a_pair_at_the_starter() {
        let a = vec![line("t", "a", 1, Some(0.7)), line("t", "a", 2, Some(0.7))];
        let b = vec![line("t", "b", 1, None), line("t", "b", 2, Some(0.9))];
        let c = compare((&refs(&a), &refs(&b)), sides(), None, 0.0, &Bootstrap::default()).unwrap();
        assert!(c.unpaired.is_empty());
        let p = c.tasks[0].paired.unwrap();
        // Normalised: A 0.5, 0.5; B 0 (failure), 1.0.
        assert_eq!((p.pairs, p.wins, p.losses), (2, 1, 1));
        assert!(p.mean.abs() < 1e-12);
    }

    #[test]
    fn different_metrics_of_one_task_are_refused() {
        let a = vec![line("t", "a", 1, Some(0.7))];
        let mut b = vec![line("t", "b", 1, Some(0.7))];
        b[0].metric = "rmse".into();
        let error = compare((&refs(&a), &refs(&b)), sides(), None, 0.0, &Bootstrap::default()).unwrap_err();
        assert!(error.to_string().contains("not comparable"), "{error}");
        let none = compare((&refs(&a), &[]), sides(), None, 0.0, &Bootstrap::default()).unwrap_err();
        assert!(none.to_string().contains("no (task, seed) pair"), "{none}");
    }
}

//! Seeds as epochs: per task and agent, the seeds reduced by each reducer
//! (mean with its t interval, median, best-of-k, pass@k, at-least-k), with
//! the episodes each counts and those left out named.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ranked;
use super::result_line::ResultLine;
use super::text_table::TextTable;
use crate::stats::passk::{at_least_k, best_of_k, pass_at_k};
use crate::stats::{Estimate, Rate, estimate, median, rate};

/// One agent's seeds of one task, reduced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpochStats {
    /// The task's name.
    pub task: String,
    /// The agent's name in this run.
    pub agent: String,
    /// The task's metric.
    pub metric: String,
    /// Whether a higher score is better; null where the direction is not known.
    pub higher_is_better: Option<bool>,
    /// The starter's score (the task's baseline), when known.
    pub baseline: Option<f64>,
    /// Where the baseline comes from.
    pub baseline_source: Option<String>,
    /// The reference solution's score (task.toml's `metric.reference`).
    pub reference: Option<f64>,
    /// Seeds counted: every episode but infrastructure failures and stale ones.
    pub n: usize,
    /// Seeds with a valid submission.
    pub valid: usize,
    /// Seeds whose submission was invalid: counted, as failures.
    pub agent_failures: usize,
    /// Episodes the infrastructure failed: left out, shown apart.
    pub infra_failures: usize,
    /// Results invalidated (`mlrb runs invalidate`): left out.
    pub stale: usize,
    /// Reducer `mean` of the valid scores, with its t interval (n − 1 df).
    pub score: Option<Estimate>,
    /// Reducer `median` of the valid scores.
    pub median: Option<f64>,
    /// Reducer `best-of-k` of the valid scores, k = 1 .. valid: the
    /// expected best of k seeds drawn from those run; empty where the
    /// metric's direction is unknown (no seed is the best).
    pub best_of_k: Vec<f64>,
    /// Seeds judged for success (a baseline is known).
    pub judged: usize,
    /// Of them, more than 10 % better than the baseline (an agent failure is not).
    pub successes: usize,
    /// The success rate over the judged seeds with Wilson's 95 % interval
    /// (inside [0, 1] at any n).
    #[serde(default)]
    pub success: Option<Rate>,
    /// Reducer `pass@k`, k = 1 .. judged: the unbiased estimate.
    pub pass_at_k: Vec<f64>,
    /// Reducer `at-least-k`, k = 1 .. judged: 1 when k seeds succeeded.
    pub at_least_k: Vec<f64>,
    /// Reducer `mean` of the normalised scores (an agent failure counts 0).
    pub normalized: Option<Estimate>,
    /// Reducer `mean` of the improvements (an agent failure counts 0).
    pub improvement: Option<Estimate>,
}

/// The results grouped by (task, agent), in order.
pub fn by_task_and_agent(results: &[ResultLine]) -> BTreeMap<(&str, &str), Vec<&ResultLine>> {
    let mut groups: BTreeMap<(&str, &str), Vec<&ResultLine>> = BTreeMap::new();
    for r in results {
        groups.entry((r.task.as_str(), r.agent.as_str())).or_default().push(r);
    }
    groups
}

/// Every (task, agent)'s seeds reduced.
pub fn epochs(results: &[ResultLine]) -> Vec<EpochStats> {
    by_task_and_agent(results)
        .into_iter()
        .map(|((task, agent), group)| EpochStats::of(task, agent, &group))
        .collect()
}

impl EpochStats {
    fn of(task: &str, agent: &str, group: &[&ResultLine]) -> Self {
        let counted: Vec<&ResultLine> = group.iter().copied().filter(|r| ranked::counted(r)).collect();
        let known = counted.first().or(group.iter().find(|r| r.infra_error.is_none()));
        let higher = known.and_then(|r| r.higher_is_better);
        let valid: Vec<f64> = counted.iter().filter_map(|r| ranked::score(r)).collect();
        let oriented: Vec<f64> = counted.iter().filter_map(|r| ranked::oriented_score(r)).collect();
        let sign = if higher == Some(false) { -1.0 } else { 1.0 };
        let judged: Vec<bool> = counted.iter().filter_map(|r| ranked::success(r)).collect();
        let (n, c) = (judged.len(), judged.iter().filter(|s| **s).count());
        let of = |f: fn(&ResultLine) -> Option<f64>| estimate(&counted.iter().filter_map(|r| f(r)).collect::<Vec<_>>());
        Self {
            task: task.to_string(),
            agent: agent.to_string(),
            metric: known.map(|r| r.metric.clone()).unwrap_or_default(),
            higher_is_better: higher,
            baseline: known.and_then(|r| r.baseline),
            baseline_source: known.and_then(|r| r.baseline_source.clone()),
            reference: known.and_then(|r| r.reference),
            n: counted.len(),
            valid: valid.len(),
            agent_failures: counted.iter().filter(|r| ranked::agent_failure(r)).count(),
            infra_failures: group
                .iter()
                .filter(|r| r.infra_error.is_some() && r.stale.is_none())
                .count(),
            stale: group.iter().filter(|r| r.stale.is_some()).count(),
            score: estimate(&valid),
            median: median(&valid),
            best_of_k: (1..=oriented.len())
                .filter_map(|k| best_of_k(&oriented, k).map(|b| b * sign))
                .collect(),
            judged: n,
            successes: c,
            success: rate(c, n),
            pass_at_k: (1..=n).filter_map(|k| pass_at_k(n, c, k)).collect(),
            at_least_k: (1..=n).filter_map(|k| at_least_k(n, c, k)).collect(),
            normalized: of(ranked::normalized),
            improvement: of(ranked::improvement),
        }
    }
}

/// "0.40 / 0.70 / 0.90": a value per k.
fn per_k(values: &[f64], show: fn(f64) -> String) -> String {
    match values {
        [] => "n/a".into(),
        _ => values.iter().map(|v| show(*v)).collect::<Vec<_>>().join(" / "),
    }
}

/// "0.8289 ± 0.0012 [0.8238, 0.8341]": mean ± SE and the t interval; a
/// mean of values that do not vary says so instead of a zero width.
pub fn estimate_cell(e: Option<&Estimate>) -> String {
    use crate::format::number;
    match e {
        None => "n/a".into(),
        Some(e) if e.se == Some(0.0) => format!("{} ({})", number(Some(e.mean)), crate::stats::NO_SPREAD),
        Some(e) => {
            let se = e.se.map_or(String::new(), |se| format!(" ± {}", number(Some(se))));
            let ci = e.interval.map_or(String::new(), |i| {
                format!(" [{}, {}]", number(Some(i.lower)), number(Some(i.upper)))
            });
            format!("{}{se}{ci}", number(Some(e.mean)))
        }
    }
}

/// "0.67 [0.21, 0.94]": a rate with its interval.
pub fn rate_cell(r: Option<&Rate>) -> String {
    r.map_or("n/a".into(), |r| {
        format!("{:.2} [{:.2}, {:.2}]", r.rate, r.interval.lower, r.interval.upper)
    })
}

/// The table of reducers: every column names its reducer.
pub fn epochs_table(epochs: &[EpochStats]) -> TextTable {
    use crate::format::number;
    let header = vec![
        "task",
        "agent",
        "seeds (n)",
        "valid",
        "agent failures (counted)",
        "infra failures (left out)",
        "score: mean ± SE [95 % t, valid seeds]",
        "score: median",
        "score: best-of-k, k = 1..",
        "success: rate [95 % Wilson, seeds]",
        "success: pass@k, k = 1..",
        "success: at-least-k, k = 1..",
        "normalised: mean ± SE [95 % t, failures = 0]",
    ];
    let rows = epochs
        .iter()
        .map(|e| {
            vec![
                format!("{} ({})", e.task, crate::format::arrow(e.higher_is_better)),
                e.agent.clone(),
                e.n.to_string(),
                e.valid.to_string(),
                e.agent_failures.to_string(),
                e.infra_failures.to_string(),
                estimate_cell(e.score.as_ref()),
                number(e.median),
                per_k(&e.best_of_k, |v| number(Some(v)).to_string()),
                rate_cell(e.success.as_ref()),
                per_k(&e.pass_at_k, |v| format!("{v:.2}")),
                per_k(&e.at_least_k, |v| format!("{v:.0}")),
                estimate_cell(e.normalized.as_ref()),
            ]
        })
        .collect();
    TextTable { header, rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::line;

    #[test]
    fn seeds_are_reduced_with_failures_counted_and_infrastructure_left_out() {
        let mut infra = line("t", "a", 4, None);
        infra.infra_error = Some("sandbox".into());
        let results = vec![
            line("t", "a", 1, Some(0.7)),
            line("t", "a", 2, Some(0.5)),
            line("t", "a", 3, None),
            infra,
        ];
        let e = &epochs(&results)[0];
        assert_eq!((e.n, e.valid, e.agent_failures, e.infra_failures), (3, 2, 1, 1));
        assert!((e.score.unwrap().mean - 0.6).abs() < 1e-12);
        assert_eq!(e.median, Some(0.6));
        // Best of one valid seed: 0.6 on average; of two: 0.7.
        assert!((e.best_of_k[0] - 0.6).abs() < 1e-12 && (e.best_of_k[1] - 0.7).abs() < 1e-12);
        // One success (0.7) of three judged: pass@1 1/3, pass@2 2/3, pass@3 1.
        assert_eq!((e.judged, e.successes), (3, 1));
        assert!((e.pass_at_k[0] - 1.0 / 3.0).abs() < 1e-12 && (e.pass_at_k[1] - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(e.at_least_k, vec![1.0, 0.0, 0.0]);
        // Normalised: 0.5, 0, and the failure's 0.
        assert!((e.normalized.unwrap().mean - 0.5 / 3.0).abs() < 1e-12);
        assert_eq!(e.normalized.unwrap().n, 3);
        let table = epochs_table(&epochs(&results));
        assert!(table.header.iter().any(|h| h.contains("pass@k")));
        assert!(
            table.rows[0].iter().any(|c| c == "0.33 / 0.67 / 1.00"),
            "{:?}",
            table.rows
        );
    }

    #[test]
    fn best_of_k_follows_the_metric_direction() {
        let mut results = vec![line("t", "a", 1, Some(3.0)), line("t", "a", 2, Some(1.0))];
        for r in &mut results {
            r.higher_is_better = Some(false);
        }
        let e = &epochs(&results)[0];
        assert_eq!(e.best_of_k, vec![2.0, 1.0]);
        // Unknown: no seed is the best, and no arrow is shown.
        for r in &mut results {
            r.higher_is_better = None;
        }
        let e = &epochs(&results)[0];
        assert!(e.best_of_k.is_empty() && e.higher_is_better.is_none());
        assert_eq!(epochs_table(std::slice::from_ref(e)).rows[0][0], "t (?)");
    }

    #[test]
    fn identical_seeds_show_no_spread_and_rates_stay_in_zero_one() {
        let results: Vec<ResultLine> = (1..=3).map(|s| line("t", "a", s, Some(0.8))).collect();
        let e = &epochs(&results)[0];
        assert_eq!(e.score.unwrap().interval, None);
        let row = &epochs_table(std::slice::from_ref(e)).rows[0];
        assert!(
            row[6].contains("the design cannot tell") && !row[6].contains("[0.8000, 0.8000]"),
            "{row:?}"
        );
        // Three successes of three: Wilson's [0.44, 1], not [1, 1].
        assert_eq!(row[9], "1.00 [0.44, 1.00]", "{row:?}");
    }
}

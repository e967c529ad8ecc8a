//! Per agent, across tasks of different metrics: the normalised score
//! (starter 0, reference 1), its interquartile mean, the success rate and
//! the improvement, each over every counted episode with the standard
//! error clustered by task, a t interval with (tasks − 1) degrees of
//! freedom (for the success rate, Wilson's interval adjusted for the
//! clustering, inside [0, 1]) and, from 20 tasks, a two-level bootstrap;
//! pass@k and at-least-k over tasks; and the cost of an episode.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::epochs::EpochStats;
use super::ranked;
use super::result_line::ResultLine;
use super::text_table::TextTable;
use crate::stats::bootstrap::{MIN_UNITS, TOO_FEW_UNITS};
use crate::stats::{Bootstrap, Clustered, Interval, Rate, clustered_mean, clustered_rate, interquartile_mean, mean};

/// A mean over episodes, clustered by task, with its bootstrap interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Aggregate {
    /// The mean over every counted episode, its clustered standard error
    /// and t interval (none for a rate: see `rate`), n and the number of
    /// tasks (clusters).
    #[serde(flatten)]
    pub clustered: Clustered,
    /// The two-level bootstrap's percentile interval (tasks, then seeds);
    /// none below 20 tasks, where it covers far less than 95 %.
    pub bootstrap: Option<Interval>,
    /// For a rate (0/1 per episode): Wilson's interval at the sample size
    /// the clustering leaves, in place of the t interval, which runs
    /// outside [0, 1] and undercovers at a few tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}

/// The interquartile mean of the normalised scores with its bootstrap interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Iqm {
    /// The mean of the middle half of every counted episode's normalised score.
    pub value: f64,
    /// The two-level bootstrap's percentile interval; none below 20 tasks.
    pub bootstrap: Option<Interval>,
}

/// What an episode cost, on average over the counted episodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cost {
    /// Model tokens, input and output.
    pub tokens: f64,
    /// Dollars of model calls.
    pub usd: f64,
    /// Wall-clock hours.
    pub wall_hours: f64,
    /// CPU-hours held (wall time × the CPUs given), where recorded.
    pub cpu_hours: Option<f64>,
}

/// One agent across its tasks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AcrossTasks {
    /// The agent's name in this run.
    pub agent: String,
    /// Tasks it ran.
    pub tasks: usize,
    /// Episodes counted (infrastructure failures and stale results left out).
    pub episodes: usize,
    /// Of them, invalid submissions (counted as failures and as the starter's score).
    pub agent_failures: usize,
    /// Episodes the infrastructure failed: left out, shown apart.
    pub infra_failures: usize,
    /// Normalised score; an agent failure counts 0.
    pub normalized: Option<Aggregate>,
    /// Tasks left out of the normalised score: no reference (or no starter) score.
    pub unscaled_tasks: Vec<String>,
    /// Interquartile mean of the normalised scores (rliable).
    pub iqm: Option<Iqm>,
    /// Success rate (0 or 1 per episode; an agent failure is a failure).
    pub success: Option<Aggregate>,
    /// Relative improvement over the baseline (an agent failure counts 0).
    pub improvement: Option<Aggregate>,
    /// pass@k averaged over tasks, k = 1 .. the fewest seeds of a task.
    pub pass_at_k: Vec<f64>,
    /// at-least-k averaged over tasks (the share of tasks with k successes).
    pub at_least_k: Vec<f64>,
    /// What an episode cost.
    pub cost: Cost,
}

/// Each agent across its tasks.
pub fn across_tasks(results: &[ResultLine], epochs: &[EpochStats], bootstrap: &Bootstrap) -> Vec<AcrossTasks> {
    let mut agents: BTreeMap<&str, Vec<&ResultLine>> = BTreeMap::new();
    for r in results {
        agents.entry(r.agent.as_str()).or_default().push(r);
    }
    agents
        .into_iter()
        .map(|(agent, group)| {
            let own: Vec<&EpochStats> = epochs.iter().filter(|e| e.agent == agent).collect();
            AcrossTasks::of(agent, &group, &own, bootstrap)
        })
        .collect()
}

/// Per task (in order), the values `f` gives of its counted episodes.
fn clusters(group: &[&ResultLine], f: impl Fn(&ResultLine) -> Option<f64>) -> Vec<Vec<f64>> {
    let mut by_task: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in group.iter().filter(|r| ranked::counted(r)) {
        let values = by_task.entry(r.task.as_str()).or_default();
        values.extend(f(r));
    }
    by_task.into_values().collect()
}

fn aggregate(clusters: &[Vec<f64>], bootstrap: &Bootstrap) -> Option<Aggregate> {
    Some(Aggregate {
        clustered: clustered_mean(clusters)?,
        bootstrap: bootstrap.trusted_interval(clusters, mean),
        rate: None,
    })
}

/// The aggregate of a rate: its interval is Wilson's, clustered.
fn rate_aggregate(clusters: &[Vec<f64>], bootstrap: &Bootstrap) -> Option<Aggregate> {
    let mut a = aggregate(clusters, bootstrap)?;
    a.clustered.interval = None;
    a.rate = clustered_rate(clusters);
    Some(a)
}

/// The mean over tasks of each task's value at k, k up to the shortest list.
fn mean_per_k(lists: &[&Vec<f64>]) -> Vec<f64> {
    let shortest = lists.iter().map(|l| l.len()).min().unwrap_or(0);
    (0..shortest)
        .filter_map(|k| mean(&lists.iter().map(|l| l[k]).collect::<Vec<_>>()))
        .collect()
}

impl AcrossTasks {
    fn of(agent: &str, group: &[&ResultLine], epochs: &[&EpochStats], bootstrap: &Bootstrap) -> Self {
        let counted: Vec<&ResultLine> = group.iter().copied().filter(|r| ranked::counted(r)).collect();
        let normalized = clusters(group, ranked::normalized);
        let all_normalized: Vec<f64> = normalized.iter().flatten().copied().collect();
        let per_episode = |f: &dyn Fn(&ResultLine) -> f64| mean(&counted.iter().map(|r| f(r)).collect::<Vec<_>>());
        let judged: Vec<&Vec<f64>> = epochs.iter().filter(|e| e.judged > 0).map(|e| &e.pass_at_k).collect();
        let at_least: Vec<&Vec<f64>> = epochs.iter().filter(|e| e.judged > 0).map(|e| &e.at_least_k).collect();
        Self {
            agent: agent.to_string(),
            tasks: epochs.len(),
            episodes: counted.len(),
            agent_failures: counted.iter().filter(|r| ranked::agent_failure(r)).count(),
            infra_failures: group
                .iter()
                .filter(|r| r.infra_error.is_some() && r.stale.is_none())
                .count(),
            normalized: aggregate(&normalized, bootstrap),
            unscaled_tasks: epochs
                .iter()
                .filter(|e| e.n > 0 && e.normalized.is_none())
                .map(|e| e.task.clone())
                .collect(),
            iqm: interquartile_mean(&all_normalized).map(|value| Iqm {
                value,
                bootstrap: bootstrap.trusted_interval(&normalized, interquartile_mean),
            }),
            success: rate_aggregate(
                &clusters(group, |r| ranked::success(r).map(|s| f64::from(u8::from(s)))),
                bootstrap,
            ),
            improvement: aggregate(&clusters(group, ranked::improvement), bootstrap),
            pass_at_k: mean_per_k(&judged),
            at_least_k: mean_per_k(&at_least),
            cost: Cost {
                tokens: per_episode(&|r| ranked::tokens(r) as f64).unwrap_or(0.0),
                usd: per_episode(&|r| r.cost_usd).unwrap_or(0.0) + 0.0,
                wall_hours: per_episode(&|r| r.wall_ms as f64 / 3_600_000.0).unwrap_or(0.0),
                cpu_hours: mean(&counted.iter().filter_map(|r| ranked::cpu_hours(r)).collect::<Vec<_>>()),
            },
        }
    }
}

/// "0.41 ± 0.05 [t 0.20, 0.62; boot 0.30, 0.55] (n 9, 30 tasks)"; a rate
/// shows Wilson's interval; values that do not vary say so.
pub fn aggregate_cell(a: Option<&Aggregate>) -> String {
    use crate::format::number;
    let Some(a) = a else { return "n/a".into() };
    let c = &a.clustered;
    let se = match c.se {
        None => " (one task: no clustered SE)".to_string(),
        Some(se) if se == 0.0 && a.rate.is_none() => format!(" ({})", crate::stats::NO_SPREAD),
        // A rate of all or nothing: Wilson's interval says what it can.
        Some(0.0) => String::new(),
        Some(se) => format!(" ± {}", number(Some(se))),
    };
    let interval = |name: &str, i: Option<Interval>| {
        i.map(|i| format!("{name} {}, {}", number(Some(i.lower)), number(Some(i.upper))))
    };
    // Whichever intervals there are (one task has no t interval; a rate
    // has Wilson's; the bootstrap only from 20 tasks).
    let intervals: Vec<String> = [
        interval("t", c.interval),
        interval("Wilson", a.rate.map(|r| r.interval)),
        interval("boot", a.bootstrap),
    ]
    .into_iter()
    .flatten()
    .collect();
    let intervals = match intervals.is_empty() {
        true => String::new(),
        false => format!(" [{}]", intervals.join("; ")),
    };
    format!(
        "{}{se}{intervals} (n {}, {} tasks)",
        number(Some(c.mean)),
        c.n,
        c.clusters
    )
}

/// The table across tasks: every column names its reducer and uncertainty.
pub fn across_table(rows: &[AcrossTasks]) -> TextTable {
    use crate::format::number;
    let header = vec![
        "agent",
        "tasks",
        "episodes (n)",
        "agent failures (counted)",
        "infra failures (left out)",
        "normalised: mean ± clustered SE [95 % t, tasks − 1 df; bootstrap from 20 tasks]",
        "normalised: IQM [bootstrap from 20 tasks]",
        "success: rate ± clustered SE [95 % Wilson, clustered by task]",
        "success: pass@k over tasks, k = 1..",
        "cost / episode: tokens, $, CPU-h",
    ];
    let rows = rows
        .iter()
        .map(|a| {
            let iqm = a.iqm.as_ref().map_or("n/a".to_string(), |i| {
                let boot = match (i.bootstrap, a.tasks < MIN_UNITS) {
                    (Some(b), _) => format!(" [{}, {}]", number(Some(b.lower)), number(Some(b.upper))),
                    (None, true) => format!(" ({TOO_FEW_UNITS})"),
                    (None, false) => String::new(),
                };
                format!("{}{boot}", number(Some(i.value)))
            });
            let pass = a
                .pass_at_k
                .iter()
                .map(|p| format!("{p:.2}"))
                .collect::<Vec<_>>()
                .join(" / ");
            vec![
                a.agent.clone(),
                a.tasks.to_string(),
                a.episodes.to_string(),
                a.agent_failures.to_string(),
                a.infra_failures.to_string(),
                aggregate_cell(a.normalized.as_ref()),
                iqm,
                aggregate_cell(a.success.as_ref()),
                if pass.is_empty() { "n/a".into() } else { pass },
                format!(
                    "{:.0}, ${:.2}, {}",
                    a.cost.tokens,
                    a.cost.usd,
                    a.cost.cpu_hours.map_or("n/a".into(), |h| format!("{h:.3}"))
                ),
            ]
        })
        .collect();
    TextTable { header, rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::epochs::epochs;
    use crate::bench::sample::line;

    #[test]
    fn across_tasks_the_error_is_clustered_and_failures_count() {
        // Task one: normalised 0.5, 0.25, failure (0); task two: 1.0, 0.75.
        let results = vec![
            line("one", "a", 1, Some(0.7)),
            line("one", "a", 2, Some(0.6)),
            line("one", "a", 3, None),
            line("two", "a", 1, Some(0.9)),
            line("two", "a", 2, Some(0.8)),
        ];
        let epochs = epochs(&results);
        let a = &across_tasks(&results, &epochs, &Bootstrap::default())[0];
        assert_eq!((a.tasks, a.episodes, a.agent_failures), (2, 5, 1));
        let n = &a.normalized.as_ref().unwrap().clustered;
        assert_eq!((n.n, n.clusters), (5, 2));
        assert!((n.mean - 2.5 / 5.0).abs() < 1e-12, "{n:?}");
        // Residual sums: task one 0.75 − 1.5 = −0.75, task two +0.75:
        // se = sqrt(2 × 1.125) / 5 = 0.3.
        assert!((n.se.unwrap() - 0.3).abs() < 1e-12, "{n:?}");
        // IQM of [0, 0.25, 0.5, 0.75, 1]: cut one each end → 0.5.
        assert!((a.iqm.as_ref().unwrap().value - 0.5).abs() < 1e-12);
        // Successes: 0.7 (+40 %) yes, 0.6 (+20 %) yes, failure no; 0.9, 0.8 yes.
        assert!((a.success.as_ref().unwrap().clustered.mean - 0.8).abs() < 1e-12);
        // pass@1 per task 2/3 and 1 → 5/6; pass@2: 1 and 1.
        assert!((a.pass_at_k[0] - 5.0 / 6.0).abs() < 1e-12 && a.pass_at_k.len() == 2);
        assert!(a.unscaled_tasks.is_empty());
        let table = across_table(std::slice::from_ref(a));
        assert!(table.rows[0][5].contains("(n 5, 2 tasks)"), "{:?}", table.rows[0]);
    }
}

//! The metrics of a run (`summary.json`): per task and agent, and per
//! agent across tasks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::result_line::ResultLine;
use super::text_table::TextTable;
use crate::episode::feedback::Feedback;
use crate::stats::{Clustered, Interval, MeanSe, Rate, clustered_mean, clustered_rate, mean_se};

/// The version of the statistics `summary.json` holds. 2: rates with
/// Wilson intervals (clustered by task across tasks), no interval for
/// values that do not vary, no bootstrap below 20 tasks, clustered errors
/// across tasks, unknown directions as null, scores labelled by part.
/// A summary without it is of version 1.
pub const STATISTICS: u32 = 2;

fn first_statistics() -> u32 {
    1
}

/// The metrics of a group of episodes (one task and agent, or one agent).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stats {
    /// Episodes in the group.
    pub runs: usize,
    /// Episodes the infrastructure failed (sandbox, preparation, the
    /// evaluator): no result of the agent's.
    pub infra_failures: usize,
    /// Episodes where the agent failed: an invalid submission (a crash, a
    /// timeout or a bad file); apart from the infrastructure's.
    #[serde(default)]
    pub agent_failures: usize,
    /// Runs the evaluator accepted.
    pub valid: usize,
    /// Share of runs more than 10 % better than the baseline, over the runs
    /// where that can be judged (the infrastructure let them run, the task
    /// has a baseline and a known direction); null where none can.
    pub success_rate: Option<f64>,
    /// The success rate's 95 % interval, inside [0, 1]: Wilson's over the
    /// seeds of one task; across tasks, adjusted for the clustering by task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_interval: Option<Interval>,
    /// Over valid runs with a baseline; its standard error treats the runs
    /// as independent (right for the seeds of one task; across tasks see
    /// `AgentStats::improvement_clustered`).
    pub improvement: Option<MeanSe>,
    /// The score's mean and standard error, over valid runs.
    pub score: Option<MeanSe>,
    /// Over valid runs of tasks that declare a reference.
    pub normalized: Option<MeanSe>,
    /// The best score of any run, in the metric's direction: the final
    /// scores, with the validations' where they score the same answers
    /// (never a public-part score beside a private one; see `told_best`);
    /// none where the direction is unknown.
    pub best_score: Option<f64>,
    /// The best score `validate()` told the agent in any run, of the part
    /// `feedback` names; none without scored validations or a direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub told_best: Option<f64>,
    /// What `validate()` told the agents of this group (the first run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Feedback>,
    /// Mean steps per run.
    pub mean_steps: f64,
    /// Mean wall-clock time per run, in seconds.
    pub mean_wall_seconds: f64,
    /// Total input tokens of the runs' LLM calls.
    pub input_tokens: u64,
    /// Total output tokens of the runs' LLM calls.
    pub output_tokens: u64,
    /// Total cost of the runs' LLM calls, in USD.
    pub cost_usd: f64,
    /// Results left out of every figure above: something they depended on
    /// was invalidated (`mlrb runs invalidate`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stale: usize,
    /// The best public-part score per run (mean ± SE), where the task
    /// splits its answers: beside `score`, the private part's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_score: Option<MeanSe>,
    /// The public improvement over the public baseline (mean ± SE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_improvement: Option<MeanSe>,
    /// Runs whose public gain did not carry over to the private part.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub public_gain_lost: usize,
    /// Runs recorded before mlrb split test sets, whose validations told
    /// the agent its score on the test set itself.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub test_set_feedback: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The headings of [`Stats::count_cells`], in the same order.
const COUNT_HEADER: [&str; 5] = [
    "runs",
    "valid",
    "agent failures",
    "infra failures",
    "success: rate [95 % Wilson; across tasks clustered]",
];

/// "+12.0 ± 6.1 % (3 tasks)": a relative change with its clustered error.
pub(super) fn clustered_cell(c: Option<&Clustered>) -> String {
    let Some(c) = c else { return "—".into() };
    let mean = c.mean * 100.0;
    match c.se {
        None => format!("{mean:+.1} % (one task: no clustered SE)"),
        Some(0.0) => format!("{mean:+.1} % ({})", crate::stats::NO_SPREAD),
        Some(se) => format!("{mean:+.1} ± {:.1} % ({} tasks)", se * 100.0, c.clusters),
    }
}

impl Stats {
    /// How many runs, valid ones and failures (the agent's, the
    /// infrastructure's) and the success rate: both tables' first cells.
    pub(super) fn count_cells(&self) -> [String; 5] {
        [
            self.runs.to_string(),
            self.valid.to_string(),
            self.agent_failures.to_string(),
            self.infra_failures.to_string(),
            match (self.success_rate, self.success_interval) {
                (None, _) => "n/a".into(),
                (Some(r), None) => format!("{:.0} %", r * 100.0),
                (Some(r), Some(i)) => format!("{:.0} % [{:.0}, {:.0}]", r * 100.0, i.lower * 100.0, i.upper * 100.0),
            },
        ]
    }

    /// What a reader must know of the group's numbers before trusting them.
    pub fn marks(&self) -> String {
        let mut marks = Vec::new();
        if self.public_gain_lost > 0 {
            marks.push(format!(
                "public gain lost in {}/{} (private improvement < half the public one)",
                self.public_gain_lost, self.runs
            ));
        }
        if self.test_set_feedback > 0 {
            marks.push(format!(
                "TEST-SET feedback in {}/{} (recorded before public/private splits)",
                self.test_set_feedback, self.runs
            ));
        }
        marks.join("; ")
    }
}

impl Stats {
    fn of(all: &[&ResultLine]) -> Self {
        let results: Vec<&ResultLine> = all.iter().filter(|r| r.stale.is_none()).copied().collect();
        let results = results.as_slice();
        let runs = results.len();
        let valid: Vec<&&ResultLine> = results.iter().filter(|r| r.valid).collect();
        let collect =
            |f: &dyn Fn(&ResultLine) -> Option<f64>| -> Vec<f64> { valid.iter().filter_map(|r| f(r)).collect() };
        let higher = results
            .iter()
            .find(|r| r.infra_error.is_none())
            .and_then(|r| r.higher_is_better);
        let best = |a: f64, b: f64| if (b > a) == higher.unwrap_or(true) { b } else { a };
        let best_score = results
            .iter()
            .filter_map(|r| r.best_score.or(r.score))
            .reduce(best)
            .filter(|_| higher.is_some());
        let told_best = results
            .iter()
            .flat_map(|r| r.score_over_steps.iter().map(|(_, s)| *s))
            .reduce(best)
            .filter(|_| higher.is_some());
        let judged: Vec<bool> = results.iter().filter_map(|r| r.success).collect();
        let successes = judged.iter().filter(|s| **s).count();
        let denominator = runs.max(1) as f64;
        Self {
            runs,
            infra_failures: results.iter().filter(|r| r.infra_error.is_some()).count(),
            agent_failures: results.iter().filter(|r| r.infra_error.is_none() && !r.valid).count(),
            valid: valid.len(),
            success_rate: (!judged.is_empty()).then(|| successes as f64 / judged.len() as f64),
            success_interval: crate::stats::rate(successes, judged.len()).map(|r| r.interval),
            improvement: mean_se(&collect(&|r| r.improvement)),
            score: mean_se(&collect(&|r| r.score)),
            normalized: mean_se(&collect(&|r| r.normalized)),
            best_score,
            told_best,
            feedback: results
                .iter()
                .find(|r| r.infra_error.is_none())
                .and_then(|r| r.feedback),
            mean_steps: results.iter().map(|r| f64::from(r.steps)).sum::<f64>() / denominator,
            mean_wall_seconds: results.iter().map(|r| r.wall_ms as f64 / 1000.0).sum::<f64>() / denominator,
            input_tokens: results.iter().map(|r| r.input_tokens).sum(),
            output_tokens: results.iter().map(|r| r.output_tokens).sum(),
            // + 0.0: an empty sum is -0.0, shown as "$-0.00".
            cost_usd: results.iter().map(|r| r.cost_usd).sum::<f64>() + 0.0,
            stale: all.len() - runs,
            public_score: mean_se(&collect(&|r| r.public_score)),
            public_improvement: mean_se(&collect(&|r| r.public_improvement)),
            public_gain_lost: results.iter().filter(|r| r.public_gain_lost == Some(true)).count(),
            test_set_feedback: results.iter().filter(|r| r.feedback == Some(Feedback::TestSet)).count(),
        }
    }
}

/// The metrics of one agent on one task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskAgentStats {
    /// The task's name.
    pub task: String,
    /// The agent's name in this run.
    pub agent: String,
    /// The name of the task's metric.
    pub metric: String,
    /// Whether a higher score is better; null where the direction is not known.
    pub higher_is_better: Option<bool>,
    /// The metric's baseline score, when the task declares one.
    pub baseline: Option<f64>,
    /// The score of the task's reference solution, when declared.
    pub reference: Option<f64>,
    /// The group's metrics.
    #[serde(flatten)]
    pub stats: Stats,
}

/// The metrics of one agent across its tasks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentStats {
    /// The agent's name in this run.
    pub agent: String,
    /// How many different tasks the agent ran.
    pub tasks: usize,
    /// The improvement over valid runs (as `improvement`) with the standard
    /// error clustered by task: the seeds of a task share its difficulty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub improvement_clustered: Option<Clustered>,
    /// The public improvement, its error clustered by task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_improvement_clustered: Option<Clustered>,
    /// The success rate with its interval adjusted for the clustering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<Rate>,
    /// The agent's metrics; without score and best score, which do not compare across tasks.
    #[serde(flatten)]
    pub stats: Stats,
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// The version of its statistics ([`STATISTICS`]); 1 where absent.
    #[serde(default = "first_statistics")]
    pub statistics: u32,
    /// Set when the episodes ran in their tasks' smoke profile (stand-in
    /// data and toy models): these scores measure nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub smoke: bool,
    /// Episodes in the run.
    pub episodes: usize,
    /// Metrics per task and agent, ordered by task, then agent.
    pub by_task_and_agent: Vec<TaskAgentStats>,
    /// Across tasks: improvement and normalised score are means over all
    /// valid runs of the agent.
    pub by_agent: Vec<AgentStats>,
    /// Per task and agent, the seeds as epochs: each reducer (mean with its
    /// t interval, median, best-of-k, pass@k, at-least-k).
    #[serde(default)]
    pub epochs: Vec<super::epochs::EpochStats>,
    /// Per agent across tasks: normalised score, IQM, success and
    /// improvement with clustered and bootstrap uncertainty; cost.
    #[serde(default)]
    pub across_tasks: Vec<super::across::AcrossTasks>,
    /// Performance profiles and AUP, for two agents or more.
    #[serde(default)]
    pub profiles: Option<super::profiles::Profiles>,
    /// What the bench says first: each agent against the reference one,
    /// per task and overall.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headline: Vec<super::headline::Headline>,
}

/// Per task, the values `f` gives of the results that count for `Stats`
/// (stale ones left out).
fn per_task(group: &[&ResultLine], f: fn(&ResultLine) -> Option<f64>) -> Vec<Vec<f64>> {
    let mut by_task: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in group.iter().filter(|r| r.stale.is_none()) {
        by_task.entry(r.task.as_str()).or_default().extend(f(r));
    }
    by_task.into_values().collect()
}

/// Which part of the hidden answers a final score is of: the private part
/// where the task splits them, else all of them.
pub fn final_part(feedback: Option<Feedback>) -> &'static str {
    match feedback {
        Some(Feedback::PublicScore) => "private",
        _ => "all",
    }
}

/// What `validate()` told the agent, as a cell: the best score with its
/// part, or what it told instead of a score.
fn told_cell(s: &Stats) -> String {
    let part = match s.feedback {
        Some(Feedback::PublicScore) => "public",
        Some(Feedback::Score) => "all",
        Some(Feedback::TestSet) => "all: TEST SET",
        Some(Feedback::Validity) => return "validity only".into(),
        Some(Feedback::Off) | None => return "no validate()".into(),
    };
    match s.told_best {
        Some(best) => format!("{} [{part}]", crate::format::number(Some(best))),
        None => format!("— [{part}]"),
    }
}

/// The best score of the runs with its part: the validations' scores are
/// in it only where they score the same answers as the final one.
fn best_cell(s: &Stats, direction: Option<bool>) -> String {
    if direction.is_none() {
        return "n/a (direction unknown)".into();
    }
    let with = match s.feedback {
        Some(Feedback::Score | Feedback::TestSet) => ", incl. validate()",
        _ => "",
    };
    match s.best_score {
        Some(best) => format!(
            "{} [{}{with}]",
            crate::format::number(Some(best)),
            final_part(s.feedback)
        ),
        None => "—".into(),
    }
}

/// The metrics of a run's results: per task and agent, and per agent.
pub fn summarize(results: &[ResultLine]) -> Summary {
    let mut groups: BTreeMap<(String, String), Vec<&ResultLine>> = BTreeMap::new();
    let mut agents: BTreeMap<String, Vec<&ResultLine>> = BTreeMap::new();
    for result in results {
        groups
            .entry((result.task.clone(), result.agent.clone()))
            .or_default()
            .push(result);
        agents.entry(result.agent.clone()).or_default().push(result);
    }
    let by_task_and_agent = groups
        .into_iter()
        .map(|((task, agent), group)| {
            // Infrastructure-failed lines carry no task metadata.
            let known = group.iter().find(|r| r.infra_error.is_none()).copied();
            TaskAgentStats {
                metric: known.map(|r| r.metric.clone()).unwrap_or_default(),
                higher_is_better: known.and_then(|r| r.higher_is_better),
                baseline: known.and_then(|r| r.baseline),
                reference: known.and_then(|r| r.reference),
                stats: Stats::of(&group),
                task,
                agent,
            }
        })
        .collect();
    let by_agent = agents
        .into_iter()
        .map(|(agent, group)| {
            let mut stats = Stats::of(&group);
            // Scores of different tasks are not comparable.
            stats.score = None;
            stats.best_score = None;
            stats.told_best = None;
            let by_task = |f: fn(&ResultLine) -> Option<f64>| per_task(&group, f);
            let success = clustered_rate(&by_task(|r| r.success.map(|s| f64::from(u8::from(s)))));
            stats.success_interval = success.map(|r| r.interval);
            AgentStats {
                improvement_clustered: clustered_mean(&by_task(|r| r.improvement.filter(|_| r.valid))),
                public_improvement_clustered: clustered_mean(&by_task(|r| r.public_improvement.filter(|_| r.valid))),
                success,
                tasks: group
                    .iter()
                    .map(|r| r.task.as_str())
                    .collect::<std::collections::BTreeSet<_>>()
                    .len(),
                agent,
                stats,
            }
        })
        .collect();
    let epochs = super::epochs::epochs(results);
    Summary {
        statistics: STATISTICS,
        episodes: results.len(),
        smoke: results.iter().any(|r| r.smoke),
        by_task_and_agent,
        by_agent,
        across_tasks: super::across::across_tasks(results, &epochs, &crate::stats::Bootstrap::default()),
        profiles: super::profiles::profiles(&epochs),
        epochs,
        headline: super::headline::headlines(results),
    }
}

impl Summary {
    /// Per task and agent: runs, validity, success, improvement, scores, steps, time.
    pub fn by_task_table(&self) -> TextTable {
        use crate::format::{mean_se, number};
        let mut header = vec!["task", "agent"];
        header.extend(COUNT_HEADER);
        header.extend([
            "improvement: mean ± SE over seeds (valid)",
            "score: mean (valid) [part]",
            "public: mean of best (valid)",
            "score: best run [part]",
            "validate(): best told to the agent [part]",
            "normalised: mean (valid)",
            "steps: mean",
            "wall: mean",
            "marks",
        ]);
        let rows = self
            .by_task_and_agent
            .iter()
            .map(|group| {
                let s = &group.stats;
                let task = format!("{} ({})", group.task, crate::format::arrow(group.higher_is_better));
                let mut row = vec![task, group.agent.clone()];
                row.extend(s.count_cells());
                row.extend([
                    mean_se(s.improvement, true),
                    s.score.map_or("—".into(), |m| {
                        format!("{} [{}]", number(Some(m.mean)), final_part(s.feedback))
                    }),
                    s.public_score.map_or("-".into(), |m| number(Some(m.mean))),
                    best_cell(s, group.higher_is_better),
                    told_cell(s),
                    number(s.normalized.map(|m| m.mean)),
                    format!("{:.1}", s.mean_steps),
                    format!("{:.1} s", s.mean_wall_seconds),
                    s.marks(),
                ]);
                row
            })
            .collect();
        TextTable { header, rows }
    }

    /// Per agent across tasks: runs, validity, success, improvement, tokens, cost.
    pub fn by_agent_table(&self) -> TextTable {
        use crate::format::number;
        let mut header = vec!["agent", "tasks"];
        header.extend(COUNT_HEADER);
        header.extend([
            "improvement: mean ± clustered SE (valid)",
            "public gain: mean ± clustered SE",
            "normalised: mean (valid)",
            "tokens: total",
            "cost: total",
            "marks",
        ]);
        let rows = self
            .by_agent
            .iter()
            .map(|agent| {
                let s = &agent.stats;
                let mut row = vec![agent.agent.clone(), agent.tasks.to_string()];
                row.extend(s.count_cells());
                row.extend([
                    clustered_cell(agent.improvement_clustered.as_ref()),
                    agent
                        .public_improvement_clustered
                        .as_ref()
                        .map_or("-".into(), |c| clustered_cell(Some(c))),
                    number(s.normalized.map(|m| m.mean)),
                    (s.input_tokens + s.output_tokens).to_string(),
                    format!("${:.2}", s.cost_usd),
                    s.marks(),
                ]);
                row
            })
            .collect();
        TextTable { header, rows }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_standard_error() {
        let m = mean_se(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((m.mean - 2.5).abs() < 1e-12);
        // sample sd = sqrt(5/3); se = sd / 2
        assert!((m.se.unwrap() - (5.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-12);
        assert_eq!(mean_se(&[7.0]).unwrap().se, None);
        assert!(mean_se(&[]).is_none());
    }

    use crate::bench::sample::line;

    #[test]
    fn across_tasks_the_improvement_error_is_clustered_and_the_rate_interval_stays_in_zero_one() {
        // Task one: every seed +40 %; task two: every seed 0 %.
        let results: Vec<ResultLine> = (1..=3)
            .flat_map(|s| [line("one", "a", s, Some(0.7)), line("two", "a", s, Some(0.5))])
            .collect();
        let summary = summarize(&results);
        let agent = &summary.by_agent[0];
        let clustered = agent.improvement_clustered.unwrap();
        // Two task means 0.4 and 0: the clustered SE is 0.2; the naive one
        // sees six independent values (sd 0.219 / √6 = 0.089).
        assert!((clustered.se.unwrap() - 0.2).abs() < 1e-12, "{clustered:?}");
        assert!(agent.stats.improvement.unwrap().se.unwrap() < 0.1);
        let row = &summary.by_agent_table().rows[0];
        assert!(row.iter().any(|c| c == "+20.0 ± 20.0 % (2 tasks)"), "{row:?}");
        // Three successes of six, clustered: inside [0, 1], wider than plain Wilson.
        let i = agent.stats.success_interval.unwrap();
        let plain = crate::stats::wilson(3.0, 6.0, crate::stats::LEVEL).unwrap();
        assert!(i.lower >= 0.0 && i.upper <= 1.0 && i.lower < plain.lower, "{i:?}");
        assert_eq!(summary.statistics, STATISTICS);
    }

    #[test]
    fn every_score_cell_names_its_part_and_an_unknown_direction_shows_none() {
        // A task that splits its answers: the final score is the private
        // part's; validate() told the agent the public part's 0.99.
        let mut split = line("digits", "a", 1, Some(0.97));
        split.feedback = Some(Feedback::PublicScore);
        split.score_over_steps = vec![(3, 0.95), (7, 0.99)];
        let mut same = line("timing", "a", 1, Some(0.8));
        same.feedback = Some(Feedback::Score);
        same.score_over_steps = vec![(2, 0.85)];
        same.best_score = Some(0.85);
        let mut unknown = line("mae", "a", 1, Some(3.2));
        unknown.higher_is_better = None;
        let table = summarize(&[split, same, unknown]).by_task_table();
        let column = |name: &str| table.header.iter().position(|h| h.starts_with(name)).unwrap();
        let (best, told, mean) = (column("score: best"), column("validate()"), column("score: mean"));
        let digits = &table.rows[0];
        assert_eq!(
            (digits[best].as_str(), digits[told].as_str()),
            ("0.9700 [private]", "0.9900 [public]")
        );
        assert_eq!(digits[mean], "0.9700 [private]");
        let mae = &table.rows[1];
        assert_eq!(
            (mae[0].as_str(), mae[best].as_str()),
            ("mae (?)", "n/a (direction unknown)")
        );
        let timing = &table.rows[2];
        assert_eq!(timing[best], "0.8500 [all, incl. validate()]");
        assert_eq!(timing[told], "0.8500 [all]");
    }
}

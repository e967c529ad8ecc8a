//! The metrics of a run (`summary.json`): per task and agent, and per
//! agent across tasks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::result_line::ResultLine;
use super::text_table::TextTable;
use crate::episode::feedback::Feedback;
use crate::stats::{MeanSe, mean_se};

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
    /// Over valid runs with a baseline.
    pub improvement: Option<MeanSe>,
    /// The score's mean and standard error, over valid runs.
    pub score: Option<MeanSe>,
    /// Over valid runs of tasks that declare a reference.
    pub normalized: Option<MeanSe>,
    /// The best final or intermediate score of any run.
    pub best_score: Option<f64>,
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
const COUNT_HEADER: [&str; 5] = ["runs", "valid", "agent failures", "infra failures", "success: rate"];

impl Stats {
    /// How many runs, valid ones and failures (the agent's, the
    /// infrastructure's) and the success rate: both tables' first cells.
    fn count_cells(&self) -> [String; 5] {
        [
            self.runs.to_string(),
            self.valid.to_string(),
            self.agent_failures.to_string(),
            self.infra_failures.to_string(),
            self.success_rate
                .map_or("n/a".into(), |r| format!("{:.0} %", r * 100.0)),
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
        let higher = results.first().is_none_or(|r| r.higher_is_better);
        let best_score = results
            .iter()
            .filter_map(|r| r.best_score.or(r.score))
            .reduce(|a, b| if (b > a) == higher { b } else { a });
        let denominator = runs.max(1) as f64;
        Self {
            runs,
            infra_failures: results.iter().filter(|r| r.infra_error.is_some()).count(),
            agent_failures: results.iter().filter(|r| r.infra_error.is_none() && !r.valid).count(),
            valid: valid.len(),
            success_rate: {
                let judged: Vec<bool> = results.iter().filter_map(|r| r.success).collect();
                (!judged.is_empty()).then(|| judged.iter().filter(|s| **s).count() as f64 / judged.len() as f64)
            },
            improvement: mean_se(&collect(&|r| r.improvement)),
            score: mean_se(&collect(&|r| r.score)),
            normalized: mean_se(&collect(&|r| r.normalized)),
            best_score,
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
    /// Whether a higher score is better.
    pub higher_is_better: bool,
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
    /// The agent's metrics; without score and best score, which do not compare across tasks.
    #[serde(flatten)]
    pub stats: Stats,
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
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
                higher_is_better: known.is_none_or(|r| r.higher_is_better),
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
            AgentStats {
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
        episodes: results.len(),
        by_task_and_agent,
        by_agent,
        across_tasks: super::across::across_tasks(results, &epochs, &crate::stats::Bootstrap::default()),
        profiles: super::profiles::profiles(&epochs),
        epochs,
    }
}

impl Summary {
    /// Per task and agent: runs, validity, success, improvement, scores, steps, time.
    pub fn by_task_table(&self) -> TextTable {
        use crate::format::{mean_se, number};
        let mut header = vec!["task", "agent"];
        header.extend(COUNT_HEADER);
        header.extend([
            "improvement: mean ± SE (valid)",
            "score: mean (valid; the private part where split)",
            "public: mean of best (valid)",
            "score: max (incl. intermediate)",
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
                let task = format!("{} ({})", group.task, if group.higher_is_better { "↑" } else { "↓" });
                let mut row = vec![task, group.agent.clone()];
                row.extend(s.count_cells());
                row.extend([
                    mean_se(s.improvement, true),
                    number(s.score.map(|m| m.mean)),
                    s.public_score.map_or("-".into(), |m| number(Some(m.mean))),
                    number(s.best_score),
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
        use crate::format::{mean_se, number};
        let mut header = vec!["agent", "tasks"];
        header.extend(COUNT_HEADER);
        header.extend([
            "improvement: mean ± SE (valid, naive)",
            "public gain: mean ± SE",
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
                    mean_se(s.improvement, true),
                    s.public_improvement.map_or("-".into(), |m| mean_se(Some(m), true)),
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
}

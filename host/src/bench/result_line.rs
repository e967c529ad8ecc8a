//! One line per episode (`results.jsonl`): what a bench's tables are made of.

use serde::{Deserialize, Serialize};

use crate::episode::EndReason;
use crate::episode::feedback::Feedback;
use crate::episode::{EpisodeRecord, ScoreRecord};

/// An episode's result, as `results.jsonl` holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultLine {
    /// The episode id, `<task>/<agent>/<seed>`.
    pub id: String,
    /// The task's name.
    pub task: String,
    /// The agent's name in this run.
    pub agent: String,
    /// The episode's seed.
    pub seed: u64,
    /// The episode directory, relative to the run directory.
    pub dir: String,
    /// The name of the task's metric; empty after an infrastructure failure.
    pub metric: String,
    /// Whether a higher score is better; null where the metric's direction
    /// is not known (lines of an earlier mlrb say `true` there).
    pub higher_is_better: Option<bool>,
    /// Why the episode ended; null when it has no end record.
    pub end_reason: Option<EndReason>,
    /// The evaluator's score of the final snapshot; null when there is none.
    pub score: Option<f64>,
    /// Whether the evaluator accepted the submission.
    pub valid: bool,
    /// The metric's baseline score, when the task declares one.
    pub baseline: Option<f64>,
    /// The score of the task's reference solution, when declared.
    pub reference: Option<f64>,
    /// Relative improvement over the baseline in the metric's direction.
    pub improvement: Option<f64>,
    /// The score on a scale where the baseline is 0 and the reference 1.
    pub normalized: Option<f64>,
    /// More than 10 % better than the baseline; null where that cannot be judged.
    pub success: Option<bool>,
    /// The best of the intermediate scores and the final one.
    pub best_score: Option<f64>,
    /// (step, score) of each valid intermediate scoring.
    pub score_over_steps: Vec<(u32, f64)>,
    /// Steps the agent took.
    pub steps: u32,
    /// Wall-clock time of the episode, in milliseconds.
    pub wall_ms: u64,
    /// Input tokens of the agent's LLM calls.
    pub input_tokens: u64,
    /// Output tokens of the agent's LLM calls.
    pub output_tokens: u64,
    /// What the agent's LLM calls cost, in USD.
    pub cost_usd: f64,
    /// Attempts the episode took, the last one included.
    pub attempts: u32,
    /// Set when the infrastructure failed on every attempt: no agent result.
    pub infra_error: Option<String>,
    /// Set when something this result depended on (its task, image or
    /// agent) was invalidated (`mlrb runs invalidate`): why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<String>,
    /// Where the episode's scripts connected, when its task grants a network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::network::NetworkUse>,
    /// What `validate()` told the agent (`test-set` for records made before
    /// mlrb split test sets: never mixed into a table unmarked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Feedback>,
    /// The best public-part score of its validations, where the task
    /// splits its hidden answers (`score` is then the private part's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_score: Option<f64>,
    /// Relative improvement of that public score over the public baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_improvement: Option<f64>,
    /// A public gain that did not carry over to the private part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_gain_lost: Option<bool>,
    /// Where the baseline comes from (task.toml, `mlrb tasks baseline`, an overlay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_source: Option<String>,
    /// The CPUs the episode's scripts were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Set for an episode of its task's smoke profile (stand-in data and
    /// toy models): its score measures nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub smoke: bool,
}

impl ResultLine {
    /// The result of a finished episode, from its `episode.json` and `score.json`.
    pub fn from_records(id: &str, agent: &str, dir: &str, record: &EpisodeRecord, score: &ScoreRecord) -> Self {
        let end = record.end.as_ref();
        // Derived again, never read: score.json's own claims are not trusted.
        let validations = end.map_or(&[][..], |e| &e.validations[..]);
        let judged = crate::episode::judgement::judge(score, validations);
        Self {
            id: id.to_string(),
            task: score.task.clone(),
            agent: agent.to_string(),
            seed: record.seed,
            dir: dir.to_string(),
            metric: score.metric.clone(),
            higher_is_better: score.direction(),
            end_reason: score.end_reason,
            score: score.score,
            valid: score.valid,
            baseline: score.baseline,
            reference: score.reference,
            improvement: judged.improvement,
            normalized: judged.normalized,
            success: judged.success,
            best_score: judged.best_score,
            score_over_steps: end
                .map(|e| {
                    e.validations
                        .iter()
                        .filter_map(|v| v.score.map(|s| (v.step, s)))
                        .collect()
                })
                .unwrap_or_default(),
            steps: end.map_or(0, |e| e.steps),
            wall_ms: end.map_or(0, |e| e.wall_ms),
            input_tokens: end.map_or(0, |e| e.llm.input_tokens),
            output_tokens: end.map_or(0, |e| e.llm.output_tokens),
            cost_usd: end.map_or(0.0, |e| e.llm.cost_usd),
            attempts: 1,
            infra_error: None,
            stale: None,
            network: end.and_then(|e| e.network.clone()),
            feedback: Some(Feedback::recorded(score.feedback, validations)).filter(|f| *f != Feedback::Off),
            public_score: score.public.and_then(|p| p.best),
            public_improvement: judged.public_improvement,
            public_gain_lost: judged.public_gain_lost,
            baseline_source: score.baseline_source.clone(),
            cpus: Some(record.limits.script_cpus),
            smoke: record.smoke || score.smoke,
        }
    }

    /// The result of an episode the infrastructure never let run.
    pub fn infra_failed(id: &str, task: &str, agent: &str, seed: u64, dir: &str, attempts: u32, error: &str) -> Self {
        Self {
            id: id.to_string(),
            task: task.to_string(),
            agent: agent.to_string(),
            seed,
            dir: dir.to_string(),
            metric: String::new(),
            higher_is_better: None,
            end_reason: None,
            score: None,
            valid: false,
            baseline: None,
            reference: None,
            improvement: None,
            normalized: None,
            success: None,
            best_score: None,
            score_over_steps: Vec::new(),
            steps: 0,
            wall_ms: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            attempts,
            infra_error: Some(error.to_string()),
            stale: None,
            network: None,
            feedback: None,
            public_score: None,
            public_improvement: None,
            public_gain_lost: None,
            baseline_source: None,
            cpus: None,
            smoke: false,
        }
    }
}

/// Whether `results` are the smoke profile's: all of them or none (an
/// infrastructure failure, which scored nothing, says neither); a mixture
/// is refused, naming one of each, as `what` (a run's folder) holds it:
/// smoke scores never share a table with real ones.
pub fn smoke_of<'a>(results: impl IntoIterator<Item = &'a ResultLine>, what: &str) -> anyhow::Result<bool> {
    let (mut smoke, mut real) = (None, None);
    for result in results.into_iter().filter(|r| r.infra_error.is_none()) {
        match result.smoke {
            true => smoke.get_or_insert(result),
            false => real.get_or_insert(result),
        };
    }
    match (smoke, real) {
        (Some(smoke), Some(real)) => anyhow::bail!(
            "{what}: mixes episodes of the smoke profile ({}) with real ones ({}): keep them in separate runs",
            smoke.id,
            real.id
        ),
        (smoke, _) => Ok(smoke.is_some()),
    }
}

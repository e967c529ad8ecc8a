//! The run's performance profiles: per task, each agent's mean valid score
//! against the best agent's, and per agent the area under its profile (AUP).

use serde::{Deserialize, Serialize};

use super::epochs::EpochStats;
use crate::stats::profiles::{profile, ratios, tau_max};

/// One agent's profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentProfile {
    /// The agent's name in this run.
    pub agent: String,
    /// Its performance ratio per task (in the order of `Profiles::tasks`):
    /// 1 for the best agent, larger for worse; null where it has no valid
    /// score (it reaches no τ).
    pub ratios: Vec<Option<f64>>,
    /// The area under its profile from τ = 1 to τ_max.
    pub aup: f64,
}

/// Performance profiles of every agent of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Profiles {
    /// What each agent's score on a task is: the reducer.
    pub reducer: String,
    /// The largest τ shown and integrated to.
    pub tau_max: f64,
    /// The tasks, in order.
    pub tasks: Vec<String>,
    /// Tasks left out: their metric's direction is unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_direction: Vec<String>,
    /// One profile per agent.
    pub agents: Vec<AgentProfile>,
}

/// The profiles of the agents in `epochs`; none with fewer than two agents
/// (a profile compares agents). Tasks whose metric's direction is unknown
/// are left out: no agent is the best of them.
pub fn profiles(epochs: &[EpochStats]) -> Option<Profiles> {
    let known = |e: &&EpochStats| e.n == 0 || e.higher_is_better.is_some();
    let unknown: std::collections::BTreeSet<&str> =
        epochs.iter().filter(|e| !known(e)).map(|e| e.task.as_str()).collect();
    let mut tasks: Vec<&str> = epochs
        .iter()
        .map(|e| e.task.as_str())
        .filter(|t| !unknown.contains(t))
        .collect();
    let mut agents: Vec<&str> = epochs.iter().map(|e| e.agent.as_str()).collect();
    tasks.dedup();
    agents.sort();
    agents.dedup();
    if agents.len() < 2 {
        return None;
    }
    // ratios[agent][task]
    let mut by_agent = vec![Vec::new(); agents.len()];
    for task in &tasks {
        let rows: Vec<Option<&EpochStats>> = agents
            .iter()
            .map(|a| epochs.iter().find(|e| e.task == *task && e.agent == *a))
            .collect();
        let higher = rows.iter().flatten().find_map(|e| e.higher_is_better).unwrap_or(true);
        let scores: Vec<Option<f64>> = rows.iter().map(|e| e.and_then(|e| e.score.map(|s| s.mean))).collect();
        for (i, r) in ratios(&scores, higher).into_iter().enumerate() {
            by_agent[i].push(r);
        }
    }
    let tau_max = tau_max(&by_agent.concat());
    Some(Profiles {
        reducer: "mean of the valid seeds' scores".into(),
        unknown_direction: unknown.iter().map(|t| t.to_string()).collect(),
        tau_max,
        tasks: tasks.iter().map(|t| t.to_string()).collect(),
        agents: agents
            .iter()
            .zip(by_agent)
            .map(|(agent, r)| AgentProfile {
                agent: agent.to_string(),
                aup: profile(&r, tau_max).aup,
                ratios: r.into_iter().map(|r| r.is_finite().then_some(r)).collect(),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::epochs::epochs;
    use crate::bench::sample::line;

    #[test]
    fn the_best_agent_of_each_task_has_ratio_one() {
        let results = vec![
            line("one", "a", 1, Some(0.8)),
            line("one", "b", 1, Some(0.4)),
            line("two", "a", 1, None),
            line("two", "b", 1, Some(0.6)),
        ];
        let p = profiles(&epochs(&results)).unwrap();
        assert_eq!(p.tasks, vec!["one", "two"]);
        let (a, b) = (&p.agents[0], &p.agents[1]);
        assert_eq!(a.ratios, vec![Some(1.0), None]);
        assert_eq!(b.ratios, vec![Some(2.0), Some(1.0)]);
        // τ_max = 2.1: a reaches 1/2 from 1 on (0.55); b 1/2 from 1 and 1 from 2 (0.55 + 0.05).
        assert!((p.tau_max - 2.1).abs() < 1e-12);
        assert!((a.aup - 0.55).abs() < 1e-12 && (b.aup - 0.6).abs() < 1e-12, "{p:?}");
        assert!(profiles(&epochs(&results[..1])).is_none());
    }
}

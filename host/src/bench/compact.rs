//! The compact tables `mlrb bench` and `mlrb report` print by default,
//! within 100 columns: per task and agent, then per agent across tasks
//! (the full ones are `Summary::by_task_table` and `by_agent_table`).

use super::summary::{Summary, clustered_cell, final_part};
use super::text_table::TextTable;
use crate::format::number;
use crate::stats::MeanSe;

impl Summary {
    /// Per task and agent: runs, success, score and improvement over the seeds.
    pub fn by_task_compact(&self) -> TextTable {
        let header = vec![
            "task",
            "agent",
            "valid",
            "success [95 % Wilson]",
            "score: mean ± SE over seeds [part]",
            "improvement ± SE over seeds",
        ];
        let rows = self
            .by_task_and_agent
            .iter()
            .map(|group| {
                let s = &group.stats;
                let [_, _, _, _, success] = s.count_cells();
                vec![
                    format!("{} {}", group.task, crate::format::arrow(group.higher_is_better)),
                    group.agent.clone(),
                    format!("{}/{}", s.valid, s.runs),
                    success,
                    s.score
                        .map_or("—".into(), |m| format!("{} [{}]", score(m), final_part(s.feedback))),
                    s.improvement.map_or("—".into(), improvement),
                ]
            })
            .collect();
        TextTable { header, rows }
    }

    /// Per agent across its tasks: runs, success and improvement, clustered by task.
    pub fn by_agent_compact(&self) -> TextTable {
        let header = vec![
            "agent",
            "tasks",
            "valid",
            "success [95 % Wilson, clustered]",
            "improvement ± clustered SE",
        ];
        let rows = self
            .by_agent
            .iter()
            .map(|agent| {
                let s = &agent.stats;
                let [_, _, _, _, success] = s.count_cells();
                vec![
                    agent.agent.clone(),
                    agent.tasks.to_string(),
                    format!("{}/{}", s.valid, s.runs),
                    success,
                    clustered_cell(agent.improvement_clustered.as_ref()),
                ]
            })
            .collect();
        TextTable { header, rows }
    }
}

/// A score's mean with its standard error over the seeds.
fn score(m: MeanSe) -> String {
    match m.se {
        Some(0.0) => format!("{} (no spread)", number(Some(m.mean))),
        Some(se) => format!("{} ± {}", number(Some(m.mean)), number(Some(se))),
        None => number(Some(m.mean)),
    }
}

/// An improvement's mean with its standard error over the seeds, in percent.
fn improvement(m: MeanSe) -> String {
    match m.se {
        Some(0.0) => format!("{:+.1} % (no spread)", m.mean * 100.0),
        Some(se) => format!("{:+.1} ± {:.1} %", m.mean * 100.0, se * 100.0),
        None => format!("{:+.1} %", m.mean * 100.0),
    }
}

//! What a bench says first: per task and overall, which agent is better
//! and by how much (B − A with its 95 % t interval, from the paired
//! comparison of `compare`), and whether the design can tell at all.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::compare::{Comparison, Measure, Side, Verdict, compare};
use super::result_line::ResultLine;
use crate::format::number;
use crate::stats::{Bootstrap, CannotTell, Interval, Paired};

/// The agent the others are compared with: `baseline` where the run has
/// it, else the first by name.
const REFERENCE: &str = "baseline";

/// One agent (B) against the reference agent (A).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Headline {
    /// The reference agent.
    pub a: String,
    /// The agent compared with it.
    pub b: String,
    /// What is compared per episode.
    pub measure: Measure,
    /// Per task, then over every task (clustered by task) where there are several.
    pub findings: Vec<Finding>,
    /// Why the agents could not be compared, where they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// What the pairs of one task, or of every task, say.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// The task, or "all N tasks".
    pub scope: String,
    /// Whether this is over every task (its interval clustered by task).
    pub overall: bool,
    /// The (task, seed) pairs.
    pub pairs: usize,
    /// The mean of B − A.
    pub difference: f64,
    /// Its 95 % t interval; none where the design cannot give one.
    pub interval: Option<Interval>,
    /// The agent the interval shows better; none where it shows neither.
    pub better: Option<String>,
    /// Why the pairs cannot tell a difference, if they cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cannot_tell: Option<CannotTell>,
}

/// The headlines of `results`: every other agent against the reference.
pub fn headlines(results: &[ResultLine]) -> Vec<Headline> {
    let agents: BTreeSet<&str> = results.iter().map(|r| r.agent.as_str()).collect();
    let Some(reference) = agents.get(REFERENCE).or_else(|| agents.first()).copied() else {
        return Vec::new();
    };
    let of = |agent: &str| -> Vec<&ResultLine> { results.iter().filter(|r| r.agent == agent).collect() };
    let a = of(reference);
    agents
        .iter()
        .filter(|b| **b != reference)
        .map(|b| {
            let sides = (side(reference), side(b));
            match compare((&a, &of(b)), sides, None, 0.0, &Bootstrap::default()) {
                Ok(c) => of_comparison(&c),
                Err(why) => Headline {
                    a: reference.to_string(),
                    b: b.to_string(),
                    measure: Measure::Normalized,
                    findings: Vec::new(),
                    unavailable: Some(format!("{why:#}")),
                },
            }
        })
        .collect()
}

fn side(agent: &str) -> Side {
    Side {
        run: String::new(),
        agent: agent.to_string(),
    }
}

/// The headline of one comparison: per task, then overall.
pub fn of_comparison(c: &Comparison) -> Headline {
    let names = (c.a.agent.as_str(), c.b.agent.as_str());
    let mut findings: Vec<Finding> = c
        .tasks
        .iter()
        .filter_map(|t| t.paired.as_ref().map(|p| finding(&t.task, false, p, names)))
        .collect();
    if let Some(overall) = c.overall.as_ref().filter(|_| c.tasks.len() > 1) {
        findings.push(finding(
            &format!("all {} tasks", overall.clusters),
            true,
            overall,
            names,
        ));
    }
    Headline {
        a: c.a.agent.clone(),
        b: c.b.agent.clone(),
        measure: c.measure,
        findings,
        unavailable: None,
    }
}

fn finding(scope: &str, overall: bool, p: &Paired, (a, b): (&str, &str)) -> Finding {
    Finding {
        scope: scope.to_string(),
        overall,
        pairs: p.pairs,
        difference: p.mean,
        interval: p.interval.filter(|_| p.cannot_tell.is_none()),
        better: match super::compare::verdict(Some(p), 0.0) {
            Verdict::Better => Some(b.to_string()),
            Verdict::Worse => Some(a.to_string()),
            Verdict::NoDifferenceShown | Verdict::Undetermined => None,
        },
        cannot_tell: p.cannot_tell,
    }
}

impl Headline {
    /// The headline as lines of text: what is compared, then one line per finding.
    pub fn lines(&self) -> Vec<String> {
        let title = format!(
            "{} against {} ({}; B − A, 95 % t interval):",
            self.b,
            self.a,
            self.measure.short()
        );
        let Some(why) = &self.unavailable else {
            let width = self.findings.iter().map(|f| f.scope.chars().count()).max().unwrap_or(0);
            let lines = self
                .findings
                .iter()
                .map(|f| format!("  {:width$}  {}", f.scope, self.says(f)));
            return std::iter::once(title).chain(lines).collect();
        };
        vec![title, format!("  not compared: {why}")]
    }

    /// What one finding says, in words.
    pub fn says(&self, f: &Finding) -> String {
        let over = match f.overall {
            true => "clustered by task".to_string(),
            false => format!("over {} seed pairs", f.pairs),
        };
        let difference = signed(f.difference);
        let ahead = match f.difference {
            d if d > 0.0 => format!("{} ahead", self.b),
            d if d < 0.0 => format!("{} ahead", self.a),
            _ => "tied".to_string(),
        };
        match (&f.better, f.interval, f.cannot_tell) {
            (Some(better), Some(i), _) => format!("{better} better: {difference} {} ({over})", bracket(i)),
            (None, Some(i), _) => format!("no difference shown: {difference} {} ({over})", bracket(i)),
            (_, _, Some(why)) => format!("{ahead} {difference}; the design cannot tell: {}", why.describe()),
            _ => format!("{ahead} {difference}; the design cannot tell: too few tasks for an interval"),
        }
    }
}

/// A difference with its sign.
fn signed(value: f64) -> String {
    let text = number(Some(value));
    match value >= 0.0 {
        true => format!("+{text}"),
        false => text,
    }
}

fn bracket(i: Interval) -> String {
    format!("[{}, {}]", number(Some(i.lower)), number(Some(i.upper)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::line;

    #[test]
    fn the_better_agent_is_named_with_its_interval_or_the_design_cannot_tell() {
        let results: Vec<ResultLine> = (1..=3)
            .flat_map(|s| {
                let s64 = s as f64;
                [
                    line("t", "baseline", s, Some(0.6 + 0.01 * s64)),
                    line("t", "other", s, Some(0.8 + 0.012 * s64)),
                ]
            })
            .collect();
        let found = headlines(&results);
        assert_eq!((found.len(), found[0].a.as_str()), (1, "baseline"));
        let lines = found[0].lines();
        assert!(
            lines[1].contains("other better: +") && lines[1].contains('['),
            "{lines:?}"
        );
        let same: Vec<ResultLine> = (1..=2)
            .flat_map(|s| [line("t", "baseline", s, Some(0.6)), line("t", "other", s, Some(0.9))])
            .collect();
        let lines = headlines(&same)[0].lines();
        assert!(lines[1].contains("cannot tell"), "{lines:?}");
    }
}

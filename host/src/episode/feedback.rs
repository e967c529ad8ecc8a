//! What `episode.validate()` told the agent during an episode, as its score
//! record keeps it: the kind of feedback, and, where the task splits its
//! hidden answers, the public part's scores beside the private final one.

use serde::{Deserialize, Serialize};

use crate::capability::episode::ValidationRecord;
use crate::task::Task;

/// What the agent could learn from `validate()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Feedback {
    /// The task offers no intermediate scoring.
    Off,
    /// Whether a submission is valid, and nothing else.
    Validity,
    /// The score on the public part of the test set; ranking uses the private part.
    PublicScore,
    /// The score of a task with no hidden answers to select on (a timing).
    Score,
    /// The score on the whole test set: records made before mlrb split
    /// test sets, which no new table mixes with the others unmarked.
    TestSet,
}

impl Feedback {
    /// The feedback a task gives under its `[validation]`.
    pub fn of(task: &Task) -> Self {
        let validation = &task.spec.validation;
        match (&validation.split, validation.reveals()) {
            _ if !validation.enabled => Feedback::Off,
            (_, false) => Feedback::Validity,
            (Some(split), true) if split.splits() => Feedback::PublicScore,
            _ => Feedback::Score,
        }
    }

    /// The feedback a score record says, or what one made before mlrb said
    /// it was (the test-set score, where the episode validated at all).
    pub fn recorded(said: Option<Feedback>, validations: &[ValidationRecord]) -> Self {
        match said {
            Some(feedback) => feedback,
            None if validations.iter().any(|v| v.score.is_some()) => Feedback::TestSet,
            None => Feedback::Off,
        }
    }

    /// Whether intermediate scores are of the same answers as the final one.
    pub fn same_answers(self) -> bool {
        matches!(self, Feedback::Score | Feedback::TestSet)
    }

    /// How reports name it.
    pub fn describe(self) -> &'static str {
        match self {
            Feedback::Off => "no intermediate scoring",
            Feedback::Validity => "validity only",
            Feedback::PublicScore => "public-part score (private part ranked)",
            Feedback::Score => "score (no hidden answers to select on)",
            Feedback::TestSet => "TEST-SET score (recorded before public/private splits)",
        }
    }
}

/// The public part's scores of an episode's validations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PublicScores {
    /// The last valid public score.
    pub last: Option<f64>,
    /// The best valid public score (what the agent could select on).
    pub best: Option<f64>,
    /// The starter's score on the public part, when the task states it.
    pub baseline: Option<f64>,
}

impl PublicScores {
    /// The public scores of `validations` (each a public-part score) on
    /// `task`, or none where the task does not split its answers.
    pub fn of(task: &Task, validations: &[ValidationRecord]) -> Option<Self> {
        let split = task.spec.validation.split.as_ref().filter(|s| s.splits())?;
        let higher = task.spec.metric.higher_is_better;
        let scores: Vec<f64> = validations.iter().filter_map(|v| v.score).collect();
        Some(Self {
            last: scores.last().copied(),
            best: scores
                .iter()
                .copied()
                .reduce(|a, b| if (b > a) == higher { b } else { a }),
            baseline: split.public_baseline,
        })
    }
}

//! A task's hidden answers in two parts, like a public and a private
//! leaderboard: `episode.validate()` scores the public part, the final score
//! the private one, and the host tells them apart, never the agent (which
//! predicts every row and cannot tell which part a row is in).
//!
//! `[validation.split]` names the hidden CSV file whose rows are split, its
//! id column, the public share and, where the metric needs it, a column to
//! stratify by. Preparation writes each part as a folder holding every
//! hidden file, the split file cut to the part's rows (with the ids of all
//! rows beside it, `<file>.ids`, so a submission is still checked against
//! every id): the evaluator scoring one part is mounted that part only.
//! A task whose score has no hidden answers to select on (a timing of
//! fresh inputs) says so instead, with `none = "why"`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `[validation.split]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Split {
    /// The hidden file (a CSV with a header) whose rows are split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its id column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A column whose values keep their shares in both parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stratify: Option<String>,
    /// The public part's share of the rows.
    #[serde(default = "default_public")]
    pub public: f64,
    /// Why the task has no hidden answers to split (instead of `file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none: Option<String>,
    /// Measured (`mlrb tasks test`): rows in the public part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_rows: Option<u64>,
    /// Measured: rows in the private part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_rows: Option<u64>,
    /// Measured: the starter's score on the public part (the private
    /// part's is `metric.baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_baseline: Option<f64>,
    /// Measured: the metric's standard error at the baseline, public part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_se: Option<f64>,
    /// Measured: the metric's standard error at the baseline, private part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_se: Option<f64>,
}

fn default_public() -> f64 {
    0.3
}

/// Which of a task's hidden answers an evaluation reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// All of them (a task without a split).
    Whole,
    /// The public part: what `validate()` scores.
    Public,
    /// The private part: what the final score uses.
    Private,
}

impl Part {
    /// The folder name of a part's answers under the prepared data.
    pub fn dir_name(self) -> Option<&'static str> {
        match self {
            Part::Whole => None,
            Part::Public => Some("hidden-public"),
            Part::Private => Some("hidden-private"),
        }
    }
}

impl Split {
    /// Whether the hidden answers are split at all (not `none`).
    pub fn splits(&self) -> bool {
        self.file.is_some()
    }

    /// What is wrong with this table, as (field, what), if anything.
    pub fn fault(&self) -> Option<(&'static str, &'static str)> {
        match (&self.file, &self.none) {
            (Some(_), Some(_)) => {
                return Some((
                    "validation.split.none",
                    "excludes `file`: a task splits its answers or has none",
                ));
            }
            (None, None) => {
                return Some((
                    "validation.split.file",
                    "must name the hidden CSV file to split (or say why there is none with `none`)",
                ));
            }
            (None, Some(why)) if why.trim().is_empty() => {
                return Some((
                    "validation.split.none",
                    "must say why the task has no hidden answers to split",
                ));
            }
            _ => {}
        }
        if self
            .file
            .as_deref()
            .is_some_and(|f| f.starts_with('/') || f.split('/').any(|p| p == ".." || p.is_empty()))
        {
            return Some(("validation.split.file", "must be a path relative to the hidden folder"));
        }
        if self.file.is_some() && self.id.as_deref().is_none_or(|id| id.trim().is_empty()) {
            return Some(("validation.split.id", "must name the file's id column"));
        }
        if !(self.public > 0.0 && self.public < 1.0) {
            return Some(("validation.split.public", "must be a share between 0 and 1 (e.g. 0.3)"));
        }
        None
    }

    /// The splitter's arguments (a JSON object for `mlrb_eval.split_answers`).
    pub fn splitter_spec(&self, seed: &str) -> serde_json::Value {
        serde_json::json!({
            "file": self.file,
            "id": self.id,
            "stratify": self.stratify,
            "public": self.public,
            "seed": seed,
        })
    }
}

/// Intermediate scoring through `episode.validate()`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Validation {
    /// Whether the agent may score intermediate submissions.
    pub enabled: bool,
    /// Tell the agent only whether its submission is valid, not the number
    /// (the default); `false` reveals the public part's score.
    pub hide_score: bool,
    /// Validations allowed per episode.
    pub max_calls: u32,
    /// How the hidden answers split into a public and a private part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
}

impl Default for Validation {
    fn default() -> Self {
        Self {
            enabled: false,
            hide_score: true,
            max_calls: 20,
            split: None,
        }
    }
}

impl Validation {
    /// Which part of the hidden answers `validate()` scores: the public
    /// one, or all of them where there is no split (then only validity is
    /// told, or the score of a task with no hidden answers).
    pub fn part(&self) -> Part {
        match &self.split {
            Some(split) if split.splits() => Part::Public,
            _ => Part::Whole,
        }
    }

    /// Whether `validate()` may tell the agent a number.
    pub fn reveals(&self) -> bool {
        !self.hide_score && self.split.is_some()
    }

    /// What `validate()` does on a task, in one line: what it tells, of which
    /// answers, and each part's size and the metric's standard error at the
    /// baseline where they were measured.
    pub fn describe(&self, private_baseline: Option<f64>) -> String {
        if !self.enabled {
            return "off".into();
        }
        let calls = format!("up to {} calls", self.max_calls);
        let Some(split) = &self.split else {
            return format!("{calls}; validity only (no public part declared: no score is told)");
        };
        if let Some(why) = &split.none {
            let told = if self.hide_score {
                "validity only"
            } else {
                "the score is told"
            };
            return format!("{calls}; {told}: no hidden answers to split ({why})");
        }
        let part = |rows: Option<u64>, baseline: Option<f64>, se: Option<f64>| match (rows, se) {
            (Some(rows), Some(se)) => format!("{rows} rows, SE {se:.4} at the baseline {}", shown(baseline)),
            (Some(rows), None) => format!("{rows} rows"),
            _ => "size not measured yet: `mlrb tasks test`".into(),
        };
        let public = part(split.public_rows, split.public_baseline, split.public_se);
        let private = part(split.private_rows, private_baseline, split.private_se);
        let file = split.file.as_deref().unwrap_or_default();
        let told = if self.hide_score {
            "validity only"
        } else {
            "tells the score"
        };
        format!(
            "{calls}; {told} of the public part ({:.0} % of {file}'s rows{}: {public}); the final score uses the private part ({private})",
            split.public * 100.0,
            split
                .stratify
                .as_ref()
                .map(|c| format!(", stratified by {c}"))
                .unwrap_or_default()
        )
    }
}

fn shown(value: Option<f64>) -> String {
    value.map_or("unknown".into(), |v| format!("{v}"))
}

/// Folds of a part the metric's standard error is measured on.
pub const MEASURE_FOLDS: usize = 50;

/// What `mlrb tasks test` measured of one part with the starter's submission.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The part.
    pub part: Part,
    /// Its rows.
    pub rows: u64,
    /// The starter's score on it.
    pub score: Option<f64>,
    /// The metric's standard error at that score, from the folds' spread.
    pub se: Option<f64>,
}

impl Measured {
    /// A part's measure from its evaluation (`folds`: the score of each fold).
    pub fn of(part: Part, rows: u64, score: &Option<f64>, folds: Option<&[f64]>) -> Self {
        // A fold's score varies k times as much as the whole part's, whose
        // standard error is then the folds' sd over sqrt(k): their mean's.
        let se = folds.and_then(crate::stats::mean_se).and_then(|m| m.se);
        Self {
            part,
            rows,
            score: *score,
            se,
        }
    }
}

/// The rows of the split file in a part's folder.
pub fn part_rows(dir: &Path, split: &Split) -> anyhow::Result<u64> {
    let path = dir.join(split.file.as_deref().unwrap_or_default());
    let text = std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(text.lines().skip(1).filter(|l| !l.trim().is_empty()).count() as u64)
}

/// Each part's measure against what `declared` states: (holds, in words).
/// The rows must be exact, the public baseline within the metric's
/// tolerance, the standard errors within a fifth.
pub fn findings(declared: &Split, baseline: Option<f64>, tolerance: f64, parts: &[Measured]) -> Vec<(bool, String)> {
    parts
        .iter()
        .map(|m| {
            let (rows, baseline, se) = match m.part {
                Part::Public => (declared.public_rows, declared.public_baseline, declared.public_se),
                _ => (declared.private_rows, baseline, declared.private_se),
            };
            let close = |a: Option<f64>, b: Option<f64>, within: f64| match (a, b) {
                (Some(a), Some(b)) => (a - b).abs() <= within,
                _ => false,
            };
            let holds = rows == Some(m.rows)
                && close(m.score, baseline, tolerance + 1e-9)
                && close(m.se, se, 0.2 * se.unwrap_or(0.0) + 1e-9);
            let name = if m.part == Part::Public { "public" } else { "private" };
            let detail = format!(
                "{name} part: {} rows, the starter scores {}, SE {} (declared: {} rows, {}, SE {}){}",
                m.rows,
                shown(m.score),
                shown(m.se),
                rows.map_or("?".into(), |r| r.to_string()),
                shown(baseline),
                shown(se),
                if holds {
                    ""
                } else {
                    ": state the measured values in [validation.split] (and metric.baseline for the private part)"
                }
            );
            (holds, detail)
        })
        .collect()
}

/// The folder of `part`'s answers under a prepared task's folder `dir`, or
/// the whole hidden folder `hidden`.
pub fn part_dir(dir: &Path, hidden: &Path, part: Part) -> PathBuf {
    match part.dir_name() {
        Some(name) => dir.join(name),
        None => hidden.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(toml_text: &str) -> Split {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn a_split_names_its_file_and_id_or_says_why_there_is_none() {
        assert_eq!(split("file = \"answers.csv\"\nid = \"id\"").fault(), None);
        assert_eq!(split("none = \"a timing of fresh inputs\"").fault(), None);
        assert!(
            split("file = \"answers.csv\"")
                .fault()
                .is_some_and(|(f, _)| f == "validation.split.id")
        );
        assert!(split("public = 0.5").fault().is_some());
        assert!(split("file = \"a.csv\"\nid = \"id\"\nnone = \"x\"").fault().is_some());
        assert!(split("file = \"../a.csv\"\nid = \"id\"").fault().is_some());
        assert!(split("file = \"a.csv\"\nid = \"id\"\npublic = 1.0").fault().is_some());
        assert!(!split("none = \"x\"").splits());
    }
}

//! A task's invalid submissions, for `mlrb tasks test`: each
//! `scripts/invalid/<case>.py` turns a copy of the starter's finished
//! workspace into a submission the evaluator must refuse (pickled weights,
//! custom code, too many parameters, ...), and its docstring's `expect:`
//! line says what the refusal must say. An upstream MLAgentBench folder,
//! which has none, gets in the smoke profile the cases mlrb's stand-in makes
//! for it (`mlrb_standin_mlab.py invalid <case>`, with what each refusal
//! must say from the overlay).

use std::path::PathBuf;

use anyhow::{Context, Result};

use super::Task;
use super::evaluate::Evaluation;
use super::item::{Item, Status};

/// Where a task's invalid-submission scripts are mounted in the sandbox.
pub const GUEST_DIR: &str = "/task/invalid";

/// One invalid submission: its name, its script, and what its refusal says.
pub struct Case {
    /// The script's name without `.py`.
    pub name: String,
    /// The script on the host.
    pub script: PathBuf,
    /// Text the evaluator's error must contain; none when the script has no `expect:` line.
    pub expect: Option<String>,
    /// What runs in the workspace to make the submission.
    pub argv: Vec<String>,
}

/// The stand-in's maker of invalid submissions, as the sandbox sees it.
const STAND_IN: &str = "/mlrb/lib/mlrb_standin_mlab.py";

/// The folder of the task's invalid-submission scripts.
pub fn dir(task: &Task) -> PathBuf {
    task.scripts_dir().join("invalid")
}

/// The task's cases, by name; none when it has no `scripts/invalid/`.
pub fn cases(task: &Task) -> Result<Vec<Case>> {
    if task.layout == super::Layout::MlAgentBench && task.smoke() {
        return Ok(stand_in_cases(task));
    }
    let dir = dir(task);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("{}: cannot list", dir.display()))? {
        let script = entry?.path();
        let Some(name) = script
            .file_stem()
            .filter(|_| script.extension().is_some_and(|e| e == "py"))
        else {
            continue;
        };
        let text = std::fs::read_to_string(&script).with_context(|| format!("{}: cannot read", script.display()))?;
        let expect = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("expect:"))
            .map(|e| e.trim().to_string())
            .filter(|e| !e.is_empty());
        let name = name.to_string_lossy().into_owned();
        let argv = vec!["python3".into(), format!("{GUEST_DIR}/{name}.py")];
        cases.push(Case {
            name,
            script,
            expect,
            argv,
        });
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(cases)
}

/// The smoke profile's cases of an upstream MLAgentBench folder.
fn stand_in_cases(task: &Task) -> Vec<Case> {
    let known = super::mlagentbench::known(&task.root).and_then(|k| k.smoke);
    let invalid = known.map(|smoke| smoke.invalid).unwrap_or_default();
    invalid
        .into_iter()
        .map(|(name, expect)| Case {
            script: PathBuf::from(format!("mlrb_standin_mlab.py invalid {name}")),
            argv: vec!["python3".into(), STAND_IN.into(), "invalid".into(), name.clone()],
            expect: Some(expect),
            name,
        })
        .collect()
}

/// Whether the evaluator refused the case's submission with its reason.
pub fn finding(case: &Case, evaluation: &Evaluation) -> Item {
    let (status, detail) = match (&case.expect, evaluation.score, evaluation.error.as_deref()) {
        (None, _, _) => (
            Status::Fail,
            format!(
                "{}: the script has no `expect: <what the refusal says>` line",
                case.script.display()
            ),
        ),
        (_, _, _) if evaluation.evaluator_failed => (
            Status::Fail,
            format!(
                "{}: the evaluator failed instead of refusing: {}",
                case.name,
                evaluation.error.as_deref().unwrap_or("")
            ),
        ),
        (Some(_), Some(score), _) => (
            Status::Fail,
            format!("{}: accepted with the score {score}; it must be refused", case.name),
        ),
        (Some(expect), None, Some(error)) if error.contains(expect.as_str()) => {
            (Status::Ok, format!("{}: refused: {error}", case.name))
        }
        (Some(expect), None, error) => (
            Status::Fail,
            format!(
                "{}: refused, but not with `{expect}`: {}",
                case.name,
                error.unwrap_or("no reason")
            ),
        ),
    };
    Item {
        check: "invalid submission",
        status,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evaluation(score: Option<f64>, error: Option<&str>, evaluator_failed: bool) -> Evaluation {
        Evaluation {
            score,
            valid: score.is_some(),
            error: error.map(String::from),
            evaluator_failed,
            duration_ms: 0,
            told: String::new(),
            kind: None,
            folds: None,
            spread: None,
            measures: Default::default(),
        }
    }

    #[test]
    fn a_refusal_counts_only_with_its_reason() {
        let case = Case {
            name: "pickled".into(),
            script: "invalid/pickled.py".into(),
            expect: Some("pickled weights".into()),
            argv: Vec::new(),
        };
        let status = |e: &Evaluation| finding(&case, e).status;
        assert_eq!(
            status(&evaluation(None, Some("model/ holds pickled weights (x.bin)"), false)),
            Status::Ok
        );
        assert_eq!(status(&evaluation(Some(0.5), None, false)), Status::Fail, "accepted");
        assert_eq!(
            status(&evaluation(None, Some("model/ is too big"), false)),
            Status::Fail,
            "another reason"
        );
        assert_eq!(
            status(&evaluation(None, Some("pickled weights"), true)),
            Status::Fail,
            "the evaluator crashed"
        );
        let unstated = Case { expect: None, ..case };
        assert_eq!(
            finding(&unstated, &evaluation(None, Some("x"), false)).status,
            Status::Fail
        );
    }
}

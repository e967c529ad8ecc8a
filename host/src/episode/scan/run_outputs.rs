//! Runs of submitted code whose output folder grew past its bounds, as the
//! submission runner recorded them beside each evaluation's logs
//! (`validate/<step>-runs.jsonl` for a validation, `eval-runs.jsonl` for
//! the final scoring): a flood of the host's disk through the evaluator.

use std::path::Path;

use serde_json::Value;

use super::evidence::Evidence;
use super::flag::{Flag, Kind, ScanOptions, Severity};
use crate::task::submission::OUTPUTS_TOO_LARGE;

/// The most of a runs record read.
const MAX_RECORD: u64 = 4 << 20;

pub fn check(evidence: &Evidence, _: &ScanOptions) -> Vec<Flag> {
    let mut flags = Vec::new();
    for (index, event) in evidence.calls() {
        if event["interface"] != "episode" || event["function"] != "validate" {
            continue;
        }
        let Some(step) = event["step"].as_u64() else { continue };
        let record = evidence.dir.join(format!("validate/{step:04}-runs.jsonl"));
        if let Some(detail) = refused_runs(&record) {
            let detail = format!("the validation at step {step}: {detail}");
            flags.push(evidence.flag(Kind::RunOutputsPastLimit, Severity::Review, Some(index), detail));
        }
    }
    if let Some(detail) = refused_runs(&evidence.dir.join("eval-runs.jsonl")) {
        let detail = format!("the final scoring: {detail}");
        flags.push(evidence.flag(Kind::RunOutputsPastLimit, Severity::Review, None, detail));
    }
    flags
}

/// How many runs of the record at `path` were refused for their outputs,
/// and why the first was; none where none was (or there is no record).
fn refused_runs(path: &Path) -> Option<String> {
    let text = crate::record::read_record_file(path, MAX_RECORD).ok()?;
    let runs: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let refused: Vec<&Value> = runs
        .iter()
        .filter(|run| run["termination"] == OUTPUTS_TOO_LARGE)
        .collect();
    let first = refused.first()?;
    let why = first["outputs"]["refused"].as_str().unwrap_or("past a bound");
    Some(format!(
        "{} of {} run(s) of submitted code refused for their outputs (run {}: {why})",
        refused.len(),
        runs.len(),
        first["run"]
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::Synthetic;
    use super::*;

    /// A validation whose runs flooded their output folder is flagged at
    /// its step, the final scoring's as the episode's; runs within the
    /// bounds are not.
    #[test]
    fn runs_refused_for_their_outputs_are_flagged_at_their_validation() {
        let mut episode = Synthetic::new();
        episode.validate(true);
        episode.exec("train.py", &[], json!({}), |_| {});
        episode.validate(true);
        let evidence = episode.evidence();
        let within = json!({"run": 1, "termination": "exited", "outputs": {"entries": 1, "bytes": 10, "left_out": 0}});
        let over = json!({"run": 2, "termination": "outputs-too-large",
                          "outputs": {"entries": 1, "bytes": 300 << 20, "left_out": 0, "over": "bytes",
                                      "refused": "the run's outputs grew past 256 MiB"}});
        std::fs::create_dir_all(evidence.dir.join("validate")).unwrap();
        std::fs::write(evidence.dir.join("validate/0001-runs.jsonl"), format!("{within}\n")).unwrap();
        std::fs::write(
            evidence.dir.join("validate/0003-runs.jsonl"),
            format!("{within}\n{over}\n"),
        )
        .unwrap();
        std::fs::write(evidence.dir.join("eval-runs.jsonl"), format!("{over}\n{over}\n")).unwrap();
        let flags = check(&evidence, &ScanOptions::default());
        let found: Vec<(Severity, Option<u32>)> = flags.iter().map(|f| (f.severity, f.step)).collect();
        assert_eq!(
            found,
            [(Severity::Review, Some(3)), (Severity::Review, None)],
            "{flags:?}"
        );
        assert!(
            flags[0].detail.contains("1 of 2") && flags[0].detail.contains("256 MiB"),
            "{}",
            flags[0].detail
        );
        assert!(
            flags[1].detail.starts_with("the final scoring: 2 of 2"),
            "{}",
            flags[1].detail
        );
    }
}

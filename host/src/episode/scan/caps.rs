//! The caps an agent ran into: the run record's budget filled (a flood of
//! notes or snapshots), calls kept up after the step budget was spent, its
//! log, answer or error message past what the host keeps, its memory limit,
//! and calls refused for arguments or writes past the host's caps.

use super::evidence::{Evidence, call_error, call_subject};
use super::flag::{Flag, Kind, ScanOptions, Severity, one_line};
use crate::episode::EndReason;

/// Calls whose too-large refusal is of what the agent sent (not of a file it read).
const SENDING: [&str; 3] = ["execute-script", "write-file", "append-file"];

/// How the episode ended, where the ending is a flood or an exhausted limit.
pub fn check(evidence: &Evidence, _: &ScanOptions) -> Vec<Flag> {
    let Some(end) = &evidence.record.end else {
        return Vec::new();
    };
    let last = evidence.events.len().checked_sub(1);
    let mut flags = Vec::new();
    let ending = match end.reason {
        EndReason::TraceLimit => Some((Kind::TraceFlood, Severity::Review, last)),
        EndReason::StepBudget => Some((Kind::StepFlood, Severity::Review, first_past_budget(evidence).or(last))),
        EndReason::MemoryLimit => Some((Kind::AgentMemoryLimit, Severity::Info, last)),
        _ => None,
    };
    if let Some((kind, severity, at)) = ending {
        let detail = format!("ended {}: {}", end.reason.name(), one_line(&end.detail, 160));
        flags.push(evidence.flag(kind, severity, at, detail));
    }
    let mut cut = Vec::new();
    if end.agent_log_dropped_bytes > 0 {
        cut.push(format!(
            "{} bytes of its output past the log's cap",
            end.agent_log_dropped_bytes
        ));
    }
    if let Some(answer) = &end.answer_cut {
        cut.push(format!("an answer of {} bytes", answer.bytes));
    }
    if let Some(detail) = &end.detail_cut {
        cut.push(format!("an error message of {} bytes", detail.bytes));
    }
    if !cut.is_empty() {
        let detail = format!("the host kept only the head of {}", cut.join(", "));
        flags.push(evidence.flag(Kind::OutputFlood, Severity::Info, last, detail));
    }
    flags
}

/// Calls refused for sending more than the host takes.
pub fn check_calls(evidence: &Evidence, _: &ScanOptions) -> Vec<Flag> {
    let mut flags = Vec::new();
    for (index, event) in evidence.calls() {
        let sending = SENDING.iter().any(|f| event["function"] == *f);
        if let Some(("too-large", message)) = call_error(event).filter(|_| sending) {
            let detail = format!("{}: {}", call_subject(event), one_line(message, 160));
            flags.push(evidence.flag(Kind::OversizedCalls, Severity::Info, Some(index), detail));
        }
    }
    flags
}

/// The first call refused because the step budget was spent.
fn first_past_budget(evidence: &Evidence) -> Option<usize> {
    evidence
        .calls()
        .find(|(_, e)| {
            e["step"].is_null() && matches!(call_error(e), Some(("budget-exhausted", m)) if m.contains("steps"))
        })
        .map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::Synthetic;
    use super::*;

    #[test]
    fn a_step_flood_is_flagged_at_the_first_call_past_the_budget() {
        let mut episode = Synthetic::new();
        episode.call("workspace", "list-files", json!({"dir": ""}), Ok(()));
        let refused =
            json!({"error": {"kind": "budget-exhausted", "message": "all 1 steps of this episode are spent"}});
        let index = episode.events.len();
        for _ in 0..5 {
            episode
                .events
                .push(json!({"interface": "workspace", "function": "list-files", "args": {}, "result": refused}));
        }
        episode.record["end"]["reason"] = json!("step-budget");
        episode.record["end"]["agent_log_dropped_bytes"] = json!(100);
        let flags = check(&episode.evidence(), &ScanOptions::default());
        let found: Vec<(Kind, Severity, Option<usize>)> = flags.iter().map(|f| (f.kind, f.severity, f.line)).collect();
        assert_eq!(
            found,
            [
                (Kind::StepFlood, Severity::Review, Some(index + 1)),
                (Kind::OutputFlood, Severity::Info, Some(index + 5))
            ]
        );
        assert_eq!(flags[0].step, Some(1));
    }

    #[test]
    fn an_episode_that_completed_within_its_caps_has_nothing() {
        let mut episode = Synthetic::new();
        episode.call(
            "workspace",
            "read-file",
            json!({"path": "big.csv"}),
            Err(("too-large", "big.csv is 300 MiB")),
        );
        let evidence = episode.evidence();
        assert!(check(&evidence, &ScanOptions::default()).is_empty());
        assert!(check_calls(&evidence, &ScanOptions::default()).is_empty());
        episode.call(
            "exec",
            "execute-script",
            json!({"script": "train.py"}),
            Err(("too-large", "an argument of 1048576 bytes")),
        );
        let flags = check_calls(&episode.evidence(), &ScanOptions::default());
        assert_eq!(flags.len(), 1);
        assert_eq!((flags[0].kind, flags[0].step), (Kind::OversizedCalls, Some(2)));
    }
}

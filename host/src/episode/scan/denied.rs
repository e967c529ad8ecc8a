//! Tool calls the host refused as not permitted: a path that leaves the
//! workspace (`..`, absolute, a link leading out) and any other denial.
//! Read-only files have a check of their own.

use super::evidence::{Evidence, call_error, call_subject};
use super::flag::{Flag, Kind, ScanOptions, Severity, one_line};

/// What the host says of a path that leaves the workspace (the last: a link
/// leading out, as the filesystem layer words it).
const ESCAPES: [&str; 3] = [
    "leads outside of the workspace",
    "absolute paths are not allowed",
    "led outside of the filesystem",
];

pub fn check(evidence: &Evidence, _: &ScanOptions) -> Vec<Flag> {
    let mut flags = Vec::new();
    for (index, event) in evidence.calls() {
        let Some(("permission-denied", message)) = call_error(event) else {
            continue;
        };
        if super::read_only::is_read_only_refusal(message) {
            continue;
        }
        let kind = match ESCAPES.iter().any(|e| message.contains(e)) {
            true => Kind::PathEscape,
            false => Kind::DeniedCall,
        };
        let detail = format!("{}: {}", call_subject(event), one_line(message, 160));
        flags.push(evidence.flag(kind, Severity::Review, Some(index), detail));
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::super::tests::Synthetic;
    use super::*;

    #[test]
    fn escapes_and_other_denials_are_flagged_at_their_step_and_nothing_else() {
        let mut episode = Synthetic::new();
        episode.call(
            "workspace",
            "read-file",
            serde_json::json!({"path": "train.py"}),
            Ok(()),
        );
        let outside = "../episode.json: leads outside of the workspace";
        episode.call(
            "workspace",
            "read-file",
            serde_json::json!({"path": "../episode.json"}),
            Err(("permission-denied", outside)),
        );
        let absolute = "/etc/passwd: absolute paths are not allowed; use a path relative to the workspace root";
        episode.call(
            "workspace",
            "read-file",
            serde_json::json!({"path": "/etc/passwd"}),
            Err(("permission-denied", absolute)),
        );
        episode.call(
            "workspace",
            "read-file",
            serde_json::json!({"path": "x"}),
            Err(("not-found", "x: no such file")),
        );
        episode.call(
            "workspace",
            "read-file",
            serde_json::json!({"path": "locked"}),
            Err(("permission-denied", "locked: Permission denied")),
        );
        let read_only = "data/a.csv is read-only for this task (read-only patterns: data/**)";
        episode.call(
            "workspace",
            "write-file",
            serde_json::json!({"path": "data/a.csv"}),
            Err(("permission-denied", read_only)),
        );
        let flags = check(&episode.evidence(), &ScanOptions::default());
        let found: Vec<(Kind, Option<u32>)> = flags.iter().map(|f| (f.kind, f.step)).collect();
        assert_eq!(
            found,
            [
                (Kind::PathEscape, Some(2)),
                (Kind::PathEscape, Some(3)),
                (Kind::DeniedCall, Some(5))
            ]
        );
        assert!(flags[0].detail.contains("../episode.json"), "{}", flags[0].detail);
        assert!(flags.iter().all(|f| f.severity == Severity::Review));
    }
}

//! Writes to the task's read-only files: tool calls the host refused for
//! it, and changes a script made that the host put back afterwards (its
//! `restore-read-only` record).

use super::evidence::{Evidence, call_subject};
use super::flag::{Flag, Kind, ScanOptions, Severity, one_line};

/// Whether a permission error is the host's refusal of a read-only file.
pub fn is_read_only_refusal(message: &str) -> bool {
    message.contains("is read-only for this task")
}

pub fn check(evidence: &Evidence, _: &ScanOptions) -> Vec<Flag> {
    let mut flags = Vec::new();
    for (index, event) in evidence.calls() {
        let error = &event["result"]["error"];
        if error["kind"] == "permission-denied" && is_read_only_refusal(error["message"].as_str().unwrap_or("")) {
            let detail = format!("{}: refused, the file is read-only", call_subject(event));
            flags.push(evidence.flag(Kind::ReadOnlyWrite, Severity::Review, Some(index), detail));
        }
    }
    for (index, event) in evidence.host_records("restore-read-only") {
        let paths: Vec<&str> = event["args"]["paths"]
            .as_array()
            .map(|p| p.iter().filter_map(|p| p.as_str()).collect())
            .unwrap_or_default();
        let detail = format!(
            "a script changed read-only {}; the host put it back",
            one_line(&paths.join(", "), 160)
        );
        flags.push(evidence.flag(Kind::ReadOnlyWrite, Severity::Review, Some(index), detail));
    }
    flags
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::Synthetic;
    use super::*;

    #[test]
    fn refused_writes_and_restored_files_are_flagged_at_their_steps() {
        let mut episode = Synthetic::new();
        episode.write("notes.txt", "fine");
        let refusal = "./data/a.csv is read-only for this task (read-only patterns: data/**)";
        episode.call(
            "workspace",
            "append-file",
            json!({"path": "./data/a.csv"}),
            Err(("permission-denied", refusal)),
        );
        episode.host("restore-read-only", json!({"paths": ["data/a.csv"]}));
        episode.exec("tamper.py", &[], json!({}), |_| {});
        let flags = check(&episode.evidence(), &ScanOptions::default());
        let found: Vec<(Option<u32>, bool)> = flags
            .iter()
            .map(|f| (f.step, f.detail.contains("data/a.csv")))
            .collect();
        assert_eq!(found, [(Some(2), true), (Some(3), true)]);
        assert!(flags[1].detail.contains("put it back"), "{}", flags[1].detail);
    }
}

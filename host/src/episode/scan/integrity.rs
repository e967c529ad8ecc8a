//! Whether the records hold together, as `mlrb verify` checks them without
//! running anything (hash chain, snapshot store, bindings): the other
//! checks read records that may have been changed where they do not.

use super::evidence::Evidence;
use super::flag::{Flag, Kind, ScanOptions, Severity, one_line};

/// Failures named in the flag's detail.
const NAMED: usize = 3;

pub fn check(evidence: &Evidence, _: &ScanOptions) -> Vec<Flag> {
    if evidence.record.end.is_none() {
        let detail = format!("the episode never ended ({})", evidence.record.status());
        return vec![evidence.flag(Kind::EpisodeUnfinished, Severity::Info, None, detail)];
    }
    let failures = crate::episode::verify::check_records(&evidence.dir);
    if failures.is_empty() {
        return Vec::new();
    }
    let at = failures.iter().find_map(|f| line_named(f)).map(|line| line - 1);
    let more = failures.len().saturating_sub(NAMED);
    let detail = format!(
        "the records fail verification: {}{}",
        failures[..failures.len().min(NAMED)].join("; "),
        if more > 0 {
            format!("; {more} more")
        } else {
            String::new()
        }
    );
    vec![evidence.flag(Kind::RecordsBroken, Severity::Review, at, one_line(&detail, 300))]
}

/// The events' line a failure names (`events.jsonl: line 5 ...`).
fn line_named(failure: &str) -> Option<usize> {
    let rest = &failure[failure.find("events.jsonl: line ")? + "events.jsonl: line ".len()..];
    rest.split_whitespace().next()?.parse().ok().filter(|line| *line > 0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::Synthetic;
    use super::*;

    #[test]
    fn records_that_do_not_verify_are_for_review_an_unfinished_episode_is_information() {
        let mut episode = Synthetic::new();
        let evidence = episode.evidence();
        std::fs::write(
            evidence.dir.join("events.jsonl"),
            "{\"prev\": \"genesis\"}\n{\"prev\": \"x\"}\n",
        )
        .unwrap();
        let flags = check(&evidence, &ScanOptions::default());
        assert_eq!(flags.len(), 1);
        assert_eq!(
            (flags[0].kind, flags[0].severity, flags[0].line),
            (Kind::RecordsBroken, Severity::Review, Some(2))
        );
        assert!(flags[0].detail.contains("does not chain"), "{}", flags[0].detail);
        episode.record["end"] = json!(null);
        let flags = check(&episode.evidence(), &ScanOptions::default());
        assert_eq!(
            (flags[0].kind, flags[0].severity, flags[0].line),
            (Kind::EpisodeUnfinished, Severity::Info, None)
        );
    }
}

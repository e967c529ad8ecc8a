//! What the task's network grant refused: connections the episode's egress
//! proxy refused to its scripts (the host's `egress` records after each
//! script), and the agent's own HTTP requests refused (its `http exchange`
//! lines). A destination outside the grant, a method it does not allow or
//! an address no episode may reach is for review; a cap or budget reached
//! is information; a connection that failed (no answer, a name that does
//! not resolve) and one allowed and ended early at a cap are neither.

use serde_json::Value;

use super::evidence::Evidence;
use super::flag::{Flag, Kind, ScanOptions, Severity, one_line};

/// Destinations named in one flag's detail.
const NAMED: usize = 3;

/// How the host words a refusal by the grant itself.
const DENIED: [&str; 4] = [
    "is not in the task's network grant",
    "is not among the granted methods",
    "no episode may reach",
    "the task grants no network",
];

/// How it words a cap or budget reached.
const CAPPED: [&str; 2] = ["cap of", "budget of"];

pub fn check(evidence: &Evidence, _: &ScanOptions) -> Vec<Flag> {
    let mut flags = Vec::new();
    for (index, event) in evidence.host_records("egress") {
        let connections = event["args"]["connections"].as_array().cloned().unwrap_or_default();
        for severity in [Severity::Review, Severity::Info] {
            let refused: Vec<&Value> = connections
                .iter()
                .filter(|c| c["allowed"] == false && refusal(c["reason"].as_str()) == Some(severity))
                .collect();
            if refused.is_empty() {
                continue;
            }
            let named: Vec<String> = refused
                .iter()
                .take(NAMED)
                .map(|c| why(c["method"].as_str(), c["destination"].as_str(), c["reason"].as_str()))
                .collect();
            let more = refused.len().saturating_sub(NAMED);
            let detail = format!(
                "a script's {} connection(s) refused: {}{}",
                refused.len(),
                named.join("; "),
                if more > 0 {
                    format!("; {more} more")
                } else {
                    String::new()
                }
            );
            flags.push(evidence.flag(Kind::NetworkRefused, severity, Some(index), one_line(&detail, 240)));
        }
    }
    let exchanges = evidence
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["interface"] == "http" && e["function"] == "exchange");
    for (index, event) in exchanges {
        let exchange = &event["result"];
        let reason = exchange["reason"].as_str();
        if let Some(severity) = refusal(reason).filter(|_| exchange["allowed"] == false) {
            let said = why(exchange["method"].as_str(), exchange["url"].as_str(), reason);
            let detail = format!("the agent's HTTP request refused: {said}");
            flags.push(evidence.flag(Kind::NetworkRefused, severity, Some(index), one_line(&detail, 240)));
        }
    }
    flags
}

/// What a refusal's reason asks of a reviewer; `None` for a failure.
fn refusal(reason: Option<&str>) -> Option<Severity> {
    let reason = reason?;
    if DENIED.iter().any(|d| reason.contains(d)) {
        Some(Severity::Review)
    } else if CAPPED.iter().any(|c| reason.contains(c)) {
        Some(Severity::Info)
    } else {
        None
    }
}

fn why(method: Option<&str>, destination: Option<&str>, reason: Option<&str>) -> String {
    format!(
        "{} {} ({})",
        method.unwrap_or("?"),
        destination.unwrap_or("?"),
        reason.unwrap_or("no reason recorded")
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::Synthetic;
    use super::*;

    #[test]
    fn refused_connections_and_requests_are_flagged_allowed_ones_are_not() {
        let mut episode = Synthetic::new();
        episode.exec("fetch.py", &[], json!({}), |_| {});
        let refused = |to: &str| json!({"destination": to, "method": "CONNECT", "allowed": false, "reason": format!("{to} is not in the task's network grant")});
        let failed = json!({"destination": "hf.co:443", "method": "CONNECT", "allowed": false, "reason": "1.2.3.4:443: no answer"});
        let capped = json!({"destination": "hf.co:443", "method": "CONNECT", "allowed": false, "reason": "the episode's cap of 2 connections was reached"});
        let allowed = json!({"destination": "hf.co:443", "method": "CONNECT", "allowed": true, "reason": "the episode's ingress cap of 1 MiB was reached"});
        let connections = [
            allowed.clone(),
            refused("evil.example:443"),
            failed,
            refused("10.0.0.1:80"),
            capped,
        ];
        episode.host("egress", json!({ "connections": connections }));
        episode.exec("fetch.py", &[], json!({}), |_| {});
        episode.host("egress", json!({"connections": [allowed]}));
        episode.call("episode", "note", json!({"text": "x"}), Ok(()));
        let exchange = json!({"n": 1, "method": "GET", "url": "http://denied.test/secret", "allowed": false, "reason": "denied.test:80 is not in the task's network grant"});
        episode
            .events
            .push(json!({"interface": "http", "function": "exchange", "args": null, "result": exchange}));
        let flags = check(&episode.evidence(), &ScanOptions::default());
        let found: Vec<(Severity, Option<u32>, Option<usize>)> =
            flags.iter().map(|f| (f.severity, f.step, f.line)).collect();
        assert_eq!(
            found,
            [
                (Severity::Review, Some(1), Some(4)),
                (Severity::Info, Some(1), Some(4)),
                (Severity::Review, Some(3), Some(8))
            ],
            "{flags:?}"
        );
        assert!(flags[0].detail.contains("2 connection(s)") && flags[0].detail.contains("evil.example:443"));
        assert!(
            !flags[0].detail.contains("no answer"),
            "a failure is not a refusal: {}",
            flags[0].detail
        );
        assert!(flags[1].detail.contains("cap of 2 connections"), "{}", flags[1].detail);
        assert!(
            flags[2].detail.contains("http://denied.test/secret"),
            "{}",
            flags[2].detail
        );
    }
}

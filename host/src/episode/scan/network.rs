//! What the task's network grant refused: connections the episode's egress
//! proxy refused to its scripts (the host's `egress` records after each
//! script), and the agent's own HTTP requests refused (its `http exchange`
//! lines). Connections allowed and ended early at a cap are not refusals.

use serde_json::Value;

use super::{Evidence, Flag, Kind, ScanOptions, Severity, one_line};

/// Destinations named in one flag's detail.
const NAMED: usize = 3;

pub fn check(evidence: &Evidence, _: &ScanOptions) -> Vec<Flag> {
    let mut flags = Vec::new();
    for (index, event) in evidence.host_records("egress") {
        let refused: Vec<&Value> = event["args"]["connections"]
            .as_array()
            .map(|c| c.iter().filter(|c| c["allowed"] == false).collect())
            .unwrap_or_default();
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
        flags.push(evidence.flag(
            Kind::NetworkRefused,
            Severity::Review,
            Some(index),
            one_line(&detail, 240),
        ));
    }
    let exchanges = evidence
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["interface"] == "http" && e["function"] == "exchange");
    for (index, event) in exchanges {
        let exchange = &event["result"];
        if exchange["allowed"] == false {
            let said = why(
                exchange["method"].as_str(),
                exchange["url"].as_str(),
                exchange["reason"].as_str(),
            );
            let detail = format!("the agent's HTTP request refused: {said}");
            flags.push(evidence.flag(
                Kind::NetworkRefused,
                Severity::Review,
                Some(index),
                one_line(&detail, 240),
            ));
        }
    }
    flags
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
        let refused = |to: &str| json!({"destination": to, "method": "CONNECT", "allowed": false, "reason": "not in the task's network grant"});
        let allowed = json!({"destination": "hf.co:443", "method": "CONNECT", "allowed": true, "reason": "the episode's ingress cap of 1 MiB was reached"});
        episode.host(
            "egress",
            json!({"connections": [allowed.clone(), refused("evil.example:443"), refused("10.0.0.1:80")]}),
        );
        episode.exec("fetch.py", &[], json!({}), |_| {});
        episode.host("egress", json!({"connections": [allowed]}));
        episode.call("episode", "note", json!({"text": "x"}), Ok(()));
        let exchange = json!({"n": 1, "method": "GET", "url": "http://denied.test/secret", "allowed": false, "reason": "denied.test: not in the task's network grant"});
        episode
            .events
            .push(json!({"interface": "http", "function": "exchange", "args": null, "result": exchange}));
        let flags = check(&episode.evidence(), &ScanOptions::default());
        let found: Vec<(Option<u32>, Option<usize>)> = flags.iter().map(|f| (f.step, f.line)).collect();
        assert_eq!(found, [(Some(1), Some(4)), (Some(3), Some(8))], "{flags:?}");
        assert!(flags[0].detail.contains("2 connection(s)") && flags[0].detail.contains("evil.example:443"));
        assert!(
            flags[1].detail.contains("http://denied.test/secret"),
            "{}",
            flags[1].detail
        );
    }
}

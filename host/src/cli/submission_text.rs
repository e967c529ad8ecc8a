//! A submission service's answers (JSON) as a person reads them: one line
//! per submission, its results as a table fitted to the terminal. The
//! commands print these by default and the answer itself with `--json`.

use comfy_table::Table;
use serde_json::Value;

use crate::columns;

/// A field of `value` as text; `-` when it is missing or null.
fn text(value: &Value, key: &str) -> String {
    match &value[key] {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// When a submission was uploaded, in UTC to the minute.
fn uploaded(submission: &Value) -> String {
    submission["created_ms"]
        .as_i64()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(|| "-".into(), |t| t.format("%Y-%m-%d %H:%M").to_string())
}

/// `submission 3: baseline to cpu-mini/1, queued (why)`.
pub fn line(submission: &Value) -> String {
    let reason = match submission["reason"].as_str() {
        Some(why) if !why.is_empty() => format!(" ({why})"),
        _ => String::new(),
    };
    columns::wrap(&format!(
        "submission {}: {} to {}/{}, {}{reason}",
        text(submission, "id"),
        text(submission, "agent"),
        text(submission, "benchmark"),
        text(submission, "version"),
        text(submission, "state"),
    ))
}

/// What `mlrb submit` prints of the submission it made.
pub fn submitted(submission: &Value) -> String {
    let id = text(submission, "id");
    format!("{}\nfollow it with `mlrb submissions status {id}`", line(submission))
}

/// A submitter's submissions, one row each.
pub fn list(submissions: &Value) -> String {
    let rows = submissions.as_array().map(Vec::as_slice).unwrap_or_default();
    if rows.is_empty() {
        return "no submissions yet: upload one with `mlrb submit`".into();
    }
    let mut table = Table::new();
    table.set_header(["id", "agent", "benchmark", "state", "uploaded (UTC)", "why"]);
    for s in rows {
        let benchmark = format!("{}/{}", text(s, "benchmark"), text(s, "version"));
        let why = s["reason"].as_str().unwrap_or_default().to_string();
        table.add_row([
            text(s, "id"),
            text(s, "agent"),
            benchmark,
            text(s, "state"),
            uploaded(s),
            why,
        ]);
    }
    columns::fit(&mut table);
    table.to_string()
}

/// One submission's state, the checks of its records and each episode's
/// result on the part the submitter may see.
pub fn status(answer: &Value) -> String {
    let mut out = vec![line(&answer["submission"])];
    let verdict = &answer["verdict"];
    if verdict.is_object() {
        out.push(columns::wrap(&format!(
            "records: verification {}; {} flag(s) for review, {} for information",
            text(verdict, "verify"),
            text(verdict, "review_flags"),
            text(verdict, "info_flags"),
        )));
    }
    let results = answer["results"].as_array().map(Vec::as_slice).unwrap_or_default();
    if results.is_empty() {
        out.push("no results yet".into());
        return out.join("\n");
    }
    let private = answer["part"] == "private";
    out.push(columns::wrap(if private {
        "scores on the private part of the hidden answers (the one ranked)"
    } else {
        "scores on the public part (what validate() told the agent); the ranked private part \
         is shown once the benchmark version closes"
    }));
    out.push(results_table(results, private));
    out.join("\n")
}

/// Each episode's task, seed, end, steps and score.
fn results_table(results: &[Value], private: bool) -> String {
    let score_key = if private { "score" } else { "public_score" };
    let mut table = Table::new();
    table.set_header(["task", "seed", "ended", "steps", "score"]);
    for r in results {
        let infra = r["infra_failed"] == true || r["infra_error"].is_string();
        let score = match &r[score_key] {
            _ if infra => "not scored (infrastructure)".into(),
            Value::Number(n) => format!("{:.4}", n.as_f64().unwrap_or(f64::NAN)),
            _ => "invalid".into(),
        };
        table.add_row([
            text(r, "task"),
            text(r, "seed"),
            text(r, "end_reason"),
            text(r, "steps"),
            score,
        ]);
    }
    columns::fit(&mut table);
    table.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_public_status_shows_the_public_score_and_never_a_private_one() {
        let answer = json!({
            "submission": {"id": 3, "agent": "baseline", "benchmark": "cpu-mini", "version": "1",
                           "state": "ranked", "reason": null, "created_ms": 0},
            "verdict": {"review_flags": 0, "info_flags": 2, "verify": "verified"},
            "part": "public",
            "results": [{"task": "digits", "seed": 0, "end_reason": "submitted", "steps": 4,
                         "public_score": 0.81234, "score": 0.9, "infra_failed": false}],
        });
        let shown = status(&answer);
        assert!(
            shown.starts_with("submission 3: baseline to cpu-mini/1, ranked\n"),
            "{shown}"
        );
        assert!(shown.contains("0.8123") && !shown.contains("0.9000"), "{shown}");
        assert!(shown.contains("public part"), "{shown}");
        let private = json!({"part": "private", "results": answer["results"], "submission": answer["submission"]});
        assert!(status(&private).contains("0.9000"), "{}", status(&private));
    }

    #[test]
    fn an_empty_list_says_how_to_submit() {
        assert!(list(&json!([])).contains("mlrb submit"));
        let one = list(&json!([{"id": 1, "agent": "a", "benchmark": "b", "version": "1",
                                "state": "refused", "reason": "asks for wasi:sockets", "created_ms": 0}]));
        assert!(
            one.contains("asks for wasi:sockets") && one.contains("1970-01-01 00:00"),
            "{one}"
        );
    }
}

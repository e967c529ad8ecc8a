//! An episode's score as the viewer tells it: the final score and which
//! part of the test set it was computed on, and what `validate()` told the
//! agent along the way (the public part, where the task splits its answers).

use std::fmt::Write;

use serde_json::Value;

use crate::format::esc;

/// The final score, saying plainly which answers it scored: the private
/// part (never shown to the agent) where the task splits its hidden
/// answers, else the whole test set.
pub fn final_score(score: &Value) -> String {
    if score.is_null() {
        return "<div id=\"final\" class=\"final\"><p>Not scored (no score.json).</p></div>".into();
    }
    let value = match &score["score"] {
        Value::Null => "no score".to_string(),
        number => number.to_string(),
    };
    let valid = if score["valid"] == true { "valid" } else { "not valid" };
    let part = if private_part(score) {
        "<span class=\"part private\">private part</span> of the test set: answers the agent never got a score on"
    } else if score["feedback"] == "score" || score["feedback"] == "test-set" {
        "<span class=\"part whole\">whole test set</span>: the same answers validate() scored"
    } else {
        "<span class=\"part whole\">whole test set</span>"
    };
    let mut html = format!(
        "<div id=\"final\" class=\"final\"><p><b>Final score: <span id=\"score\">{} ({valid})</span></b> {} — computed on the {part}.</p>",
        esc(&value),
        esc(score["metric"].as_str().unwrap_or("")),
    );
    if let Some(error) = score["error"].as_str() {
        let _ = write!(html, "<p class=\"error\">{}</p>", esc(error));
    }
    let _ = write!(
        html,
        "<p>baseline {}, improvement {}, success {}</p>",
        esc(&score["baseline"].to_string()),
        esc(&score["improvement"].to_string()),
        esc(&score["success"].to_string())
    );
    html.push_str(&feedback(score));
    html.push_str("</div>");
    html
}

/// Whether the final score is of the private part of a split test set.
pub fn private_part(score: &Value) -> bool {
    score["public"].is_object() || score["feedback"] == "public-score"
}

/// What validate() told the agent and, where the task splits its answers,
/// the public part's scores beside the private one.
fn feedback(score: &Value) -> String {
    let feedback = score["feedback"].as_str().unwrap_or("test-set");
    let told = match feedback {
        "off" => "no intermediate scoring",
        "validity" => "validity only",
        "public-score" => "the score of the public part of the test set; the final score above is the private part's",
        "score" => "the score (the task has no hidden answers to select on)",
        _ => "the score on the test set itself (recorded before public/private splits)",
    };
    let mut html = format!("<p id=\"feedback\">validate() told the agent: {}</p>", esc(told));
    let public = &score["public"];
    if public.is_object() && public["best"].is_null() {
        let _ = write!(
            html,
            "<p id=\"public\">public part: never validated (its baseline {})</p>",
            esc(&public["baseline"].to_string())
        );
    } else if public.is_object() {
        let lost = if score["public_gain_lost"] == true {
            " <strong class=\"flag\">public gain lost: the private improvement is under half the public one</strong>"
        } else {
            ""
        };
        let _ = write!(
            html,
            "<p id=\"public\">public part: best {}, last {}, baseline {}; improvement {} (private: {}){lost}</p>",
            esc(&public["best"].to_string()),
            esc(&public["last"].to_string()),
            esc(&public["baseline"].to_string()),
            esc(&score["public_improvement"].to_string()),
            esc(&score["improvement"].to_string()),
        );
    }
    html
}

/// An index cell: the best public-part score, marked when its gain did
/// not carry over to the private part.
pub fn public_cell(score: &Value) -> String {
    let best = &score["public"]["best"];
    match (best.is_number(), score["public_gain_lost"] == true) {
        (false, _) => String::new(),
        (true, false) => best.to_string(),
        (true, true) => format!("{best} (gain lost on the private part)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_part_scored_is_said_plainly() {
        let split = serde_json::json!({"score": 0.9, "valid": true, "feedback": "public-score",
            "public": {"best": 0.95, "last": 0.9, "baseline": 0.8}});
        let html = final_score(&split);
        assert!(html.contains("private part") && html.contains("best 0.95"), "{html}");
        let whole = serde_json::json!({"score": 0.9, "valid": true, "feedback": "score"});
        assert!(final_score(&whole).contains("whole test set"));
        let hostile = serde_json::json!({"score": "<script>", "valid": true, "error": "<b>x</b>"});
        let html = final_score(&hostile);
        assert!(!html.contains("<script>") && !html.contains("<b>x"), "{html}");
    }
}

//! What an agent may be told of a submission its evaluator refused: one
//! sentence of a fixed vocabulary, chosen by the kind of fault the
//! evaluator names. Never the evaluator's own message, an exception's name
//! or a number: those may quote the hidden answers, or carry what code
//! that ran beside them chose to say. The full message stays in the
//! records, for the user.

/// The kinds of fault an evaluator may name (`{"kind": ...}` in its result;
/// `mlrb_eval.Invalid(..., kind=...)`), each with what the agent is told.
const VOCABULARY: &[(&str, &str)] = &[
    ("missing", "a file the task asks for is missing"),
    (
        "not-a-file",
        "a file the task asks for is not a regular file (a link, a folder or a device)",
    ),
    ("too-large", "a file is larger than the task allows"),
    ("empty", "a file the task asks for is empty"),
    ("encoding", "a file is not text in the expected encoding"),
    ("format", "a file is not in the format the task describes"),
    ("header", "the columns are not the ones the task describes"),
    ("rows", "the number of rows is not the one the task describes"),
    ("value", "a value is not of the type or in the set the task describes"),
    ("duplicate-id", "an id appears more than once"),
    ("missing-id", "an id the task asks for has no row"),
    ("unknown-id", "a row has an id the task does not ask for"),
    (
        "code-failed",
        "the submitted code raised an error or crashed when the evaluator ran it",
    ),
    (
        "code-timeout",
        "the submitted code did not finish within the time the task allows",
    ),
    (
        "wrong-result",
        "the submitted code returned a result that is not the one asked for",
    ),
    ("model", "the submitted model cannot be loaded as the task describes"),
    ("rules", "the submission breaks one of the task's rules"),
    (
        "out-of-range",
        "the evaluator's score is outside the metric's valid range (a mark of a missing or broken submission)",
    ),
];

/// The sentence for a fault whose kind is not in the vocabulary.
const ANY: &str = "the evaluator refused it; check it against the task's description";

/// The kinds an evaluator may name.
pub fn kinds() -> impl Iterator<Item = &'static str> {
    VOCABULARY.iter().map(|(kind, _)| *kind)
}

/// `kind` if it is one of the vocabulary's, else none.
pub fn known(kind: Option<&str>) -> Option<&'static str> {
    let kind = kind?;
    VOCABULARY.iter().find(|(k, _)| *k == kind).map(|(k, _)| *k)
}

/// What the agent is told of an invalid submission whose fault is `kind`.
pub fn invalid(kind: Option<&str>) -> String {
    let sentence = kind
        .and_then(|kind| VOCABULARY.iter().find(|(k, _)| *k == kind))
        .map_or(ANY, |(_, sentence)| *sentence);
    format!("invalid submission: {sentence}")
}

/// What the agent is told when the evaluator itself failed.
pub const EVALUATOR_FAILED: &str = "the task's evaluator failed, which is not your submission's fault";

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever an evaluator writes as its kind, the agent is told one of
    /// the fixed sentences, never a byte of it.
    #[test]
    fn the_agent_is_told_only_fixed_sentences() {
        let sentences: Vec<String> = VOCABULARY
            .iter()
            .map(|(_, s)| format!("invalid submission: {s}"))
            .chain([format!("invalid submission: {ANY}")])
            .collect();
        for chosen in ["rows", "secret-42", "AnswerIs7", "", "rows\nleak", "ROWS"] {
            let told = invalid(Some(chosen));
            assert!(sentences.contains(&told), "{told}");
            if chosen != "rows" {
                assert_eq!(told, format!("invalid submission: {ANY}"));
            }
        }
        assert_eq!(invalid(None), format!("invalid submission: {ANY}"));
        assert_eq!(known(Some("rows")), Some("rows"));
        assert_eq!(known(Some("rows ")), None);
        let no_digits = sentences.iter().all(|s| !s.chars().any(|c| c.is_ascii_digit()));
        assert!(no_digits, "a fixed sentence carries no number");
    }
}

//! Whether a task's score is a number the agent's own code writes: the
//! check `mlrb tasks check` makes after its dry run. Each small text file
//! the starter left that holds the score it got is changed to say another
//! number, and scored again; when the score follows the file, the task
//! ranks what its agents say of themselves (MLAgentBench's `vectorization`
//! reads the time its own train.py writes), and any number can be written.

use std::path::Path;

use super::{EvalRequest, Prepared, Task, evaluate, populate};
use crate::sandbox::Sandbox;

/// The number written in place of the score.
const PLANTED: f64 = 0.123457;
/// The largest file looked into.
const MAX_BYTES: u64 = 64 << 10;

/// Why `workspace` (the starter's, scored `score`) is scored by what a file
/// of it says, naming the file; none when the score comes from no file.
pub async fn probe(
    task: &Task,
    sandbox: &dyn Sandbox,
    cache_dir: &Path,
    prepared: &Prepared,
    workspace: &Path,
    score: f64,
) -> anyhow::Result<Option<String>> {
    for (name, text) in candidates(workspace, score) {
        let copy = workspace.with_extension(format!("planted-{}", sanitized(&name)));
        std::fs::create_dir_all(&copy)?;
        populate::copy_tree(workspace, &copy)?;
        std::fs::write(copy.join(&name), plant(&text, score))?;
        let again = evaluate(task, sandbox, EvalRequest::final_of(task, &copy, prepared, cache_dir)).await?;
        if again.score.is_some_and(|s| close(s, PLANTED)) {
            return Ok(Some(format!(
                "the score comes from {name}, which the workspace writes (changed to say {PLANTED}, it scored \
                 {PLANTED}): an agent's code can report any score; score with an evaluator that measures \
                 (for an MLAgentBench folder, declare [scoring] evaluator in a task.toml beside it)"
            )));
        }
    }
    Ok(None)
}

/// Small text files at the workspace's top that hold a number equal to `score`.
fn candidates(workspace: &Path, score: f64) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir(workspace) else {
        return Vec::new();
    };
    let mut found: Vec<(String, String)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.metadata().is_ok_and(|m| m.is_file() && m.len() <= MAX_BYTES))
        .filter_map(|e| {
            Some((
                e.file_name().into_string().ok()?,
                std::fs::read_to_string(e.path()).ok()?,
            ))
        })
        .filter(|(_, text)| numbers(text).any(|(_, n)| close(n, score)))
        .collect();
    found.sort();
    found
}

/// `text` with every number equal to `score` replaced by [`PLANTED`].
fn plant(text: &str, score: f64) -> String {
    let mut out = String::new();
    let mut last = 0;
    for (span, n) in numbers(text) {
        if close(n, score) {
            out.push_str(&text[last..span.0]);
            out.push_str(&PLANTED.to_string());
            last = span.1;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// The numbers written in `text`, with their byte spans.
fn numbers(text: &str) -> impl Iterator<Item = ((usize, usize), f64)> + '_ {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() {
            let start = at;
            let numeric = |b: u8| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+');
            if bytes[at].is_ascii_digit() || (bytes[at] == b'.' && bytes.get(at + 1).is_some_and(u8::is_ascii_digit)) {
                while at < bytes.len() && numeric(bytes[at]) {
                    at += 1;
                }
                if let Ok(n) = text[start..at].parse::<f64>() {
                    return Some(((start, at), n));
                }
            } else {
                at += 1;
            }
        }
        None
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-12)
}

fn sanitized(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_equal_to_the_score_are_found_and_replaced_and_no_other() {
        let text = "1.234567;\n7\n1.234567e0 x12";
        let found: Vec<f64> = numbers(text).map(|(_, n)| n).collect();
        assert_eq!(found, vec![1.234567, 7.0, 1.234567, 12.0]);
        assert_eq!(plant(text, 1.234567), format!("{PLANTED};\n7\n{PLANTED} x12"));
        assert_eq!(plant("no numbers", 1.0), "no numbers");
    }
}

//! Why a task's script failed, in one line, from what it printed.

use std::path::Path;

/// The cause of an evaluator's failure in one line: the exception and the
/// last frame of its traceback (`ModuleNotFoundError: No module named 'x'
/// (eval.py, line 3)`), or the last line it printed.
pub fn failure_cause(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    // The exception: the last unindented line that is not mlrb's own note.
    let exception = lines
        .iter()
        .rev()
        .find(|l| !l.starts_with(char::is_whitespace) && !l.starts_with("mlrb:") && !l.starts_with("Traceback"));
    let Some(last) = exception.or(lines.last()) else {
        return "it printed nothing on stderr".into();
    };
    let frame = lines.iter().rev().find_map(|l| {
        let rest = l.trim_start().strip_prefix("File \"")?;
        let (file, rest) = rest.split_once('"')?;
        let line = rest.split(',').nth(1)?.trim();
        let name = Path::new(file).file_name()?.to_string_lossy().into_owned();
        Some(format!("{name}, {line}"))
    });
    let last: String = last.trim().chars().take(300).collect();
    match frame {
        Some(frame) => format!("{last} ({frame})"),
        None => last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_named_by_its_exception_and_last_frame() {
        let stderr = "Traceback (most recent call last):\n  File \"/mlrb/lib/mlrb_mlagentbench.py\", line 40, in main\n    spec.loader.exec_module(module)\n  File \"/task/scripts/eval.py\", line 3, in <module>\n    import torch\nModuleNotFoundError: No module named 'torch'\nmlrb: cannot import /task/scripts/eval.py\n";
        let cause = failure_cause(stderr);
        assert_eq!(cause, "ModuleNotFoundError: No module named 'torch' (eval.py, line 3)");
        let plain = failure_cause(
            "Traceback (most recent call last):\n  File \"/task/scripts/eval.py\", line 9, in <module>\nKeyError: 'id'\n",
        );
        assert_eq!(plain, "KeyError: 'id' (eval.py, line 9)");
        assert_eq!(failure_cause(""), "it printed nothing on stderr");
    }
}

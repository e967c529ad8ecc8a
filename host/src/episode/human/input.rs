//! What a person typed: whether a command line is whole yet (a trailing
//! backslash, an open here-document ask for more lines), and whether it is
//! one of the session's own commands (`task ...`, `cd`, `exit`) or a line
//! for the sandbox's shell.

use std::collections::VecDeque;

/// The session's own `task` commands.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskCommand {
    /// Time, steps and validations left.
    Status,
    /// Scores the workspace as an agent's `validate()` does.
    Validate,
    /// Ends the episode; the workspace is scored.
    Submit,
    /// Stops for now; `mlrb human --resume` goes on.
    Pause,
    /// The task's description again.
    Info,
    /// What the commands are.
    Help,
    /// Not a command: the word typed.
    Unknown(String),
}

/// One whole command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed {
    /// Nothing (or only a comment).
    Empty,
    /// `task <command>`.
    Task(TaskCommand),
    /// `cd`: run in the sandbox, the folder it ends in kept for what follows.
    Cd(String),
    /// `exit` or `logout`: the session says how to submit or pause.
    Exit,
    /// A line for the sandbox's shell.
    Shell(String),
}

/// What `text` (one whole command line, maybe of several lines) is.
pub fn parse(text: &str) -> Typed {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Typed::Empty;
    }
    let words: Vec<&str> = trimmed.split_whitespace().collect();
    match words.as_slice() {
        ["task", rest @ ..] => Typed::Task(match rest {
            ["status"] => TaskCommand::Status,
            ["validate"] => TaskCommand::Validate,
            ["submit"] => TaskCommand::Submit,
            ["pause"] => TaskCommand::Pause,
            ["info"] => TaskCommand::Info,
            [] | ["help"] => TaskCommand::Help,
            other => TaskCommand::Unknown(other.join(" ")),
        }),
        ["exit" | "logout"] | ["exit", _] => Typed::Exit,
        ["cd", ..] => Typed::Cd(trimmed.to_string()),
        _ => Typed::Shell(text.to_string()),
    }
}

/// Whether `text`, the lines typed so far, is a whole command line: it does
/// not end in a backslash and every here-document it opened is closed.
pub fn is_complete(text: &str) -> bool {
    if text.ends_with('\\') {
        return false;
    }
    let mut open: VecDeque<String> = VecDeque::new();
    for line in text.split('\n') {
        match open.front() {
            Some(word) => {
                if line.trim_start_matches('\t') == word {
                    open.pop_front();
                }
            }
            None => open.extend(here_documents(line)),
        }
    }
    open.is_empty()
}

/// The delimiters of the here-documents `line` opens (`<<WORD`, `<<-WORD`,
/// `<<'WORD'`), outside quotes; `<<<` is a here-string, not one.
fn here_documents(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let (mut words, mut quote, mut i) = (Vec::new(), None::<char>, 0);
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '<' && chars.get(i + 1) == Some(&'<') && chars.get(i + 2) != Some(&'<') => {
                i += 2;
                if chars.get(i) == Some(&'-') {
                    i += 1;
                }
                while chars.get(i).is_some_and(|c| c.is_whitespace()) {
                    i += 1;
                }
                let (word, next) = delimiter(&chars, i);
                if !word.is_empty() {
                    words.push(word);
                }
                i = next;
                continue;
            }
            None if c == '<' && chars.get(i + 1) == Some(&'<') => i += 2,
            None => {}
        }
        i += 1;
    }
    words
}

/// The here-document delimiter starting at `start` (its quotes removed),
/// and where it ends.
fn delimiter(chars: &[char], start: usize) -> (String, usize) {
    let (mut word, mut quote, mut i) = (String::new(), None::<char>, start);
    while let Some(&c) = chars.get(i) {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c.is_whitespace() || ";|&<>()".contains(c) => break,
            None => word.push(c),
        }
        i += 1;
    }
    (word, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_commands_are_told_from_shell_lines() {
        assert_eq!(parse("  task   submit "), Typed::Task(TaskCommand::Submit));
        assert_eq!(parse("task"), Typed::Task(TaskCommand::Help));
        assert_eq!(
            parse("task submitt"),
            Typed::Task(TaskCommand::Unknown("submitt".into()))
        );
        assert_eq!(parse("cd data"), Typed::Cd("cd data".into()));
        assert_eq!(parse("exit"), Typed::Exit);
        assert_eq!(parse("# a comment"), Typed::Empty);
        assert_eq!(parse("taskset -c 0 ls"), Typed::Shell("taskset -c 0 ls".into()));
        assert_eq!(parse("python3 train.py"), Typed::Shell("python3 train.py".into()));
    }

    #[test]
    fn here_documents_and_backslashes_ask_for_more_lines() {
        assert!(is_complete("ls -l"));
        assert!(!is_complete("ls \\"));
        assert!(!is_complete("cat > a.py <<'EOF'\nprint(1)"));
        assert!(is_complete("cat > a.py <<'EOF'\nprint(1)\nEOF"));
        assert!(!is_complete("cat <<-END\n\tx"));
        assert!(is_complete("cat <<-END\n\tx\n\tEND"));
        // Two here-documents close in order.
        assert!(!is_complete("cat <<A <<B\na\nA\nb"));
        assert!(is_complete("cat <<A <<B\na\nA\nb\nB"));
        // A here-string, and `<<` inside quotes, open none.
        assert!(is_complete("cat <<< word"));
        assert!(is_complete("python3 -c 'print(1<<2)'"));
    }
}

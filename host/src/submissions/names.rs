//! Names that strangers and organisers choose and that become folders and
//! URL segments (an agent's, a benchmark's name and version): each must be
//! one plain path component, never `.` or `..`, never empty, no `/`, NUL
//! or control character; letters, digits, `-`, `_` and `.` only.

/// Why `value`, given as `field`, cannot be a name (None: it can); at most
/// `max` characters.
pub fn refused(field: &str, value: &str, max: usize) -> Option<String> {
    let why = if value.is_empty() {
        "is empty"
    } else if value == "." || value == ".." {
        "is `.` or `..`, which name folders already there"
    } else if value.chars().count() > max {
        "is too long"
    } else if value.chars().any(|c| c == '/' || c == '\0' || c.is_control()) {
        "holds a `/`, a NUL or a control character"
    } else if !value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        "holds a character other than a letter, a digit, `-`, `_` or `.`"
    } else if value.starts_with('.') {
        "starts with `.` (a hidden folder)"
    } else {
        return None;
    };
    let shown: String = value.escape_debug().take(60).collect();
    Some(format!(
        "`{field}` \"{shown}\" {why}: use 1 to {max} letters, digits, `-`, `_` or `.`, not starting with `.`"
    ))
}

#[cfg(test)]
mod tests {
    use super::refused;

    #[test]
    fn names_that_would_be_other_folders_or_no_folder_are_refused_by_field() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\0b",
            "a\nb",
            "a\u{7f}",
            ".hidden",
            "é",
            &"x".repeat(41),
        ] {
            let why = refused("agent", bad, 40).unwrap_or_else(|| panic!("{bad:?} was taken"));
            assert!(why.starts_with("`agent`"), "{why}");
        }
        for good in ["baseline", "my-agent_2", "v1.2"] {
            assert_eq!(refused("agent", good, 40), None);
        }
    }
}

//! The width the terminal output is fitted to: `COLUMNS` where set, else
//! the terminal's, else 100 (piped output has no terminal to ask); tables
//! and prose both keep to it.

use comfy_table::{ContentArrangement, Table};

/// The width when neither `COLUMNS` nor a terminal says otherwise.
pub const DEFAULT: usize = 100;

/// The narrowest width anything is fitted to.
const NARROWEST: usize = 40;

/// The width output is fitted to, in characters.
pub fn width() -> usize {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok());
    let terminal = || {
        use std::io::IsTerminal as _;
        std::io::stdout()
            .is_terminal()
            .then(|| Table::new().width().map(usize::from))
            .flatten()
    };
    from_env
        .filter(|w| *w > 0)
        .or_else(terminal)
        .unwrap_or(DEFAULT)
        .clamp(NARROWEST, usize::from(u16::MAX))
}

/// A table fitted to [`width`]: its cells wrapped at spaces where it would
/// not fit otherwise.
pub fn fit(table: &mut Table) {
    table
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(u16::try_from(width()).unwrap_or(u16::MAX));
}

/// `text` with every line longer than [`width`] wrapped at spaces; a
/// continued line keeps its indent plus two spaces. A word longer than a
/// line is cut.
pub fn wrap(text: &str) -> String {
    wrap_to(text, width())
}

/// [`wrap`] at `width` characters.
pub fn wrap_to(text: &str, width: usize) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.chars().count() <= width {
            out.push(line.to_string());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let next_indent = " ".repeat((indent + 2).min(width / 2));
        let mut current = line[..indent].to_string();
        let mut empty = true;
        for word in line.split_whitespace() {
            let room = width.saturating_sub(current.chars().count() + usize::from(!empty));
            if !empty && word.chars().count() > room {
                out.push(std::mem::replace(&mut current, next_indent.clone()));
                empty = true;
            }
            if !empty {
                current.push(' ');
            }
            current.push_str(word);
            empty = false;
            while current.chars().count() > width {
                let cut: String = current.chars().take(width).collect();
                let rest: String = current.chars().skip(width).collect();
                out.push(cut);
                current = format!("{next_indent}{rest}");
            }
        }
        out.push(current);
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_wraps_at_spaces_and_keeps_its_indent() {
        let text = format!("  {}", "word ".repeat(30));
        let wrapped = wrap_to(&text, 40);
        assert!(wrapped.lines().count() > 3, "{wrapped}");
        for line in wrapped.lines() {
            assert!(line.chars().count() <= 40, "{line:?}");
            assert!(line.starts_with("  "), "{line:?}");
        }
        let long = wrap_to(&"x".repeat(95), 40);
        assert!(long.lines().all(|l| l.chars().count() <= 40), "{long}");
        assert_eq!(wrap_to("a\n\nb   c", 40), "a\n\nb   c", "short lines stay as they are");
    }
}

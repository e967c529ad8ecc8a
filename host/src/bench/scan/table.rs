//! A run's scan as a terminal table: one row per flag, review first.

use comfy_table::{Cell, Table, presets::UTF8_FULL_CONDENSED};

use super::RunScan;

/// The flags of `scan`, one row each (review before information, then by
/// episode and line), fitted to the terminal.
pub fn flags_table(scan: &RunScan) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_header(["severity", "kind", "episode", "step", "line", "detail"]);
    crate::columns::fit(&mut table);
    let mut flags: Vec<_> = scan.flags.iter().collect();
    flags.sort_by_key(|f| (f.severity, f.episode.clone(), f.line.unwrap_or(usize::MAX)));
    let shown = |n: Option<String>| n.unwrap_or_else(|| "-".into());
    for flag in flags {
        table.add_row([
            Cell::new(flag.severity.name()),
            Cell::new(flag.kind.id()),
            Cell::new(&flag.episode),
            Cell::new(shown(flag.step.map(|s| s.to_string()))),
            Cell::new(shown(flag.line.map(|l| l.to_string()))),
            Cell::new(&flag.detail),
        ]);
    }
    table
}

/// The line under the table: what was scanned and found.
pub fn verdict(scan: &RunScan) -> String {
    format!(
        "{} episode(s) scanned: {} flag(s) for review, {} for information",
        scan.episodes, scan.review, scan.info
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::scan::{Flag, Kind, Severity};

    #[test]
    fn review_rows_come_first_with_their_step_and_line() {
        let flag = |severity, kind, line: Option<usize>| Flag {
            kind,
            severity,
            episode: "digits/a/1".into(),
            step: line.map(|l| l as u32 - 1),
            line,
            detail: "why".into(),
        };
        let scan = RunScan {
            episodes: 2,
            review: 1,
            info: 1,
            flags: vec![
                flag(Severity::Info, Kind::ScriptLimit, Some(3)),
                flag(Severity::Review, Kind::PathEscape, Some(9)),
            ],
        };
        let text = flags_table(&scan).to_string();
        let review = text.find("path_escape").unwrap();
        assert!(review < text.find("script_limit").unwrap(), "{text}");
        assert!(text.contains("┆ 8    ┆ 9    ┆"), "{text}");
        assert_eq!(
            verdict(&scan),
            "2 episode(s) scanned: 1 flag(s) for review, 1 for information"
        );
    }
}

//! The workspace between two snapshots: the form choosing them, the page
//! of their whole diff, and the short diff the transcript shows inline
//! after a step that changed the workspace.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

use anyhow::Result;

use super::{layout, param};
use crate::format::esc;
use crate::record::snapshot::{self, Manifest, ManifestEntry};

/// Files larger than this are compared by hash only.
const DIFF_BYTES: u64 = 1 << 20;
/// Lines of diff shown inline per step (the diff page has them all).
const INLINE_LINES: usize = 120;
/// Lines of a file's diff shown open inline; a longer one is folded.
const FOLD_LINES: usize = 24;

/// The form choosing two snapshots to compare.
pub fn form(dir: &Path, link: &str) -> Result<String> {
    let manifests = snapshot::list_manifests(&dir.join("snapshots"))?;
    let options = |selected: Option<u64>| -> String {
        manifests
            .iter()
            .map(|m| {
                format!(
                    "<option value=\"{}\"{}>{} — {}</option>",
                    m.id,
                    if Some(m.id) == selected { " selected" } else { "" },
                    m.id,
                    esc(&m.label)
                )
            })
            .collect()
    };
    let first = manifests.first().map(|m| m.id);
    let last = manifests.last().map(|m| m.id);
    Ok(format!(
        "<form id=\"diff\" action=\"{link}/diff\">compare snapshot <select name=\"a\">{}</select> with <select name=\"b\">{}</select> <button>diff</button></form>",
        options(first),
        options(last)
    ))
}

/// The page of the whole diff between the snapshots `?a=` and `?b=`.
pub fn page(dir: &Path, link: &str, id: &str, query: &str) -> Result<String> {
    let snapshots = dir.join("snapshots");
    let (Some(a), Some(b)) = (param(query, "a"), param(query, "b")) else {
        anyhow::bail!("choose two snapshots: ?a=<id>&b=<id>");
    };
    let before = snapshot::read_manifest(&snapshots, a)?;
    let after = snapshot::read_manifest(&snapshots, b)?;
    let mut body = format!(
        "<p><a href=\"{}\">back to the episode</a></p><h2>Snapshot {a} ({}) → {b} ({})</h2>",
        if link.is_empty() { "/" } else { link },
        esc(&before.label),
        esc(&after.label)
    );
    let files = changes(&snapshots, &before, &after);
    if files.is_empty() {
        body.push_str("<p>No difference.</p>");
    }
    for file in files {
        let _ = write!(
            body,
            "<h3 class=\"file\">{} <small>{}</small></h3>",
            esc(&file.path),
            file.status
        );
        match file.unified {
            Ok(unified) => {
                let _ = write!(body, "<pre class=\"diff\">{}</pre>", colour(&unified, usize::MAX));
            }
            Err(why) => {
                let _ = write!(body, "<p>{why}</p>");
            }
        }
    }
    Ok(layout(&format!("diff {id}"), &body))
}

/// What changed from snapshot `a` to snapshot `b`, short, for the
/// transcript: each file with its first lines of diff and a link to the
/// whole. Empty when a manifest cannot be read.
pub fn inline(snapshots: &Path, link: &str, a: u64, b: u64) -> String {
    let (Ok(before), Ok(after)) = (
        snapshot::read_manifest(snapshots, a),
        snapshot::read_manifest(snapshots, b),
    ) else {
        return String::new();
    };
    let files = changes(snapshots, &before, &after);
    let mut html = format!(
        "<div class=\"inline-diff\"><p class=\"diffhead\">workspace: {} file{} changed (snapshot {a} → {b}) <a href=\"{link}/diff?a={a}&amp;b={b}\">whole diff</a></p>",
        files.len(),
        if files.len() == 1 { "" } else { "s" },
    );
    let mut budget = INLINE_LINES;
    for file in files {
        let head = format!("{} <small>{}</small>", esc(&file.path), file.status);
        match file.unified {
            Ok(unified) if budget > 0 => {
                let lines = unified.lines().count();
                let pre = format!("<pre class=\"diff\">{}</pre>", colour(&unified, budget));
                // A long diff (a written data file) is folded under its name.
                if lines > FOLD_LINES {
                    let _ = write!(
                        html,
                        "<details class=\"file\"><summary>{head}, {lines} lines of diff</summary>{pre}</details>"
                    );
                } else {
                    let _ = write!(html, "<p class=\"file\">{head}</p>{pre}");
                }
                budget = budget.saturating_sub(lines);
            }
            Ok(_) => {
                let _ = write!(html, "<p class=\"file\">{head} (in the whole diff)</p>");
            }
            Err(why) => {
                let _ = write!(html, "<p class=\"file\">{head}: {why}</p>");
            }
        }
    }
    html.push_str("</div>");
    html
}

/// One file that differs between two snapshots.
struct FileChange {
    path: String,
    status: &'static str,
    /// Its unified diff where both sides are text under the size limit,
    /// else why there is none.
    unified: Result<String, &'static str>,
}

fn changes(snapshots: &Path, before: &Manifest, after: &Manifest) -> Vec<FileChange> {
    let paths: BTreeSet<&String> = before.entries.keys().chain(after.entries.keys()).collect();
    let objects = snapshot::ObjectReader::open(snapshots).ok();
    let text = |entry: Option<&ManifestEntry>| -> Option<String> {
        match entry {
            None => Some(String::new()),
            Some(ManifestEntry::File { hash, size, .. }) if *size <= DIFF_BYTES => {
                String::from_utf8(objects.as_ref()?.read(hash, DIFF_BYTES).ok()?).ok()
            }
            _ => None,
        }
    };
    let mut files = Vec::new();
    for path in paths {
        let (old, new) = (before.entries.get(path), after.entries.get(path));
        if old == new {
            continue;
        }
        let status = match (old, new) {
            (None, _) => "added",
            (_, None) => "removed",
            _ => "changed",
        };
        let unified = match (text(old), text(new)) {
            (Some(old_text), Some(new_text)) => {
                let diff = similar::TextDiff::from_lines(&old_text, &new_text);
                Ok(diff.unified_diff().context_radius(3).header(path, path).to_string())
            }
            _ if [old, new].iter().any(|e| matches!(e, Some(ManifestEntry::Dir))) => Err("a folder"),
            _ if [old, new]
                .iter()
                .any(|e| matches!(e, Some(ManifestEntry::Symlink { .. }))) =>
            {
                Err("a symbolic link")
            }
            _ => Err("binary, or over 1 MiB: compared by content hash only"),
        };
        files.push(FileChange {
            path: path.clone(),
            status,
            unified,
        });
    }
    files
}

/// The first `max` lines of a unified diff, each coloured by its kind.
fn colour(unified: &str, max: usize) -> String {
    let total = unified.lines().count();
    let mut lines: Vec<String> = unified
        .lines()
        .take(max)
        .map(|line| {
            let class = match line.chars().next() {
                Some('+') if !line.starts_with("+++") => "add",
                Some('-') if !line.starts_with("---") => "del",
                Some('@') => "hunk",
                _ => "ctx",
            };
            format!("<span class=\"{class}\">{}</span>", esc(&super::clip(line, 2000)))
        })
        .collect();
    if total > max {
        lines.push(format!("<span class=\"hunk\">… {} more lines</span>", total - max));
    }
    lines.join("\n")
}

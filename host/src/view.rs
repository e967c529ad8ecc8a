//! `mlrb view`: a trace viewer served on loopback. The list of episodes of
//! a run; for one episode its steps (tool calls, arguments, results,
//! timings), paged so a trace of any length stays responsive, the diff of
//! the workspace between any two snapshots, and the score. Pages are
//! rendered on the server; nothing is fetched from elsewhere.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use crate::format::esc;
use crate::record::snapshot::{self, ManifestEntry};

/// Events shown per page of an episode.
pub const PAGE: usize = 200;
/// Bytes of an argument or result shown in the step list.
const CELL_CHARS: usize = 400;
/// Files larger than this are compared by hash only.
const DIFF_BYTES: u64 = 1 << 20;

/// What the viewer serves: a run directory or a single episode directory.
pub struct Viewer {
    root: PathBuf,
    /// The path it is served under (empty: the site's root).
    base: String,
}

impl Viewer {
    /// A viewer of `root`; fails when it holds no episode.
    pub fn new(root: &Path) -> Result<Self> {
        let root = root
            .canonicalize()
            .with_context(|| format!("{}: cannot open", root.display()))?;
        if !root.join("episode.json").is_file() && episodes(&root).is_empty() {
            anyhow::bail!("{}: holds no episode (no episode.json below it)", root.display());
        }
        Ok(Self {
            root,
            base: String::new(),
        })
    }

    /// The same viewer served under `base` (`/view/7`): every link it makes
    /// points there.
    pub fn under(mut self, base: &str) -> Self {
        self.base = base.trim_end_matches('/').to_string();
        self
    }

    /// Serves on `listener` until the process ends.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> Result<()> {
        let viewer = Arc::new(self);
        let respond = move |request| {
            let viewer = viewer.clone();
            async move { viewer.respond(&request) }
        };
        let settings = crate::http_server::Settings::local();
        Ok(crate::http_server::serve(listener, "viewer", settings, respond).await?)
    }

    /// The page a request asks for.
    pub fn respond(&self, request: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let full = request.uri().path();
        let path = match full.strip_prefix(self.base.as_str()) {
            Some("") => "/",
            Some(rest) if rest.starts_with('/') => rest,
            _ => return not_found(),
        };
        let query = request.uri().query().unwrap_or("");
        let page = if path == "/" {
            if self.root.join("episode.json").is_file() {
                self.episode_page(&self.root, ".", query)
            } else {
                Ok(self.index())
            }
        } else if let Some(rest) = path.strip_prefix("/e/") {
            let (id, diff) = match rest.strip_suffix("/diff") {
                Some(id) => (id, true),
                None => (rest, false),
            };
            match self.episode_dir(id) {
                Some(dir) if diff => self.diff_page(&dir, id, query),
                Some(dir) => self.episode_page(&dir, id, query),
                None => return not_found(),
            }
        } else {
            return not_found();
        };
        match page {
            Ok(html) => html_response(StatusCode::OK, self.rebase(html)),
            Err(error) => html_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                layout("error", &format!("<p>{}</p>", esc(&format!("{error:#}")))),
            ),
        }
    }

    /// Points the page's own links under the viewer's base. Every text
    /// from a record is escaped (`"` included), so `href="/` is only ever
    /// the viewer's own.
    fn rebase(&self, html: String) -> String {
        if self.base.is_empty() {
            return html;
        }
        html.replace("href=\"/", &format!("href=\"{}/", self.base))
            .replace("action=\"/", &format!("action=\"{}/", self.base))
    }

    /// The episode directory named by a URL id, never outside the root.
    fn episode_dir(&self, id: &str) -> Option<PathBuf> {
        let id = percent_decode(id);
        let rel = Path::new(&id);
        if id == "." {
            return Some(self.root.clone());
        }
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return None;
        }
        let dir = self.root.join(rel);
        // Never a folder inside an episode (its workspace is the agent's).
        if rel
            .ancestors()
            .skip(1)
            .any(|above| self.root.join(above).join("episode.json").exists())
        {
            return None;
        }
        let is_record = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
        (std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) && is_record(&dir.join("episode.json")))
            .then_some(dir)
    }

    fn index(&self) -> String {
        let mut body = format!(
            "<p>{}</p><table id=\"episodes\"><thead><tr><th>episode</th><th>ended</th><th>steps</th><th>score</th><th>valid</th><th>public (best)</th></tr></thead><tbody>",
            esc(&self.root.display().to_string())
        );
        let forks = ForkTree::of(&self.root);
        for (id, depth) in forks.in_order() {
            let dir = self.root.join(&id);
            let record = read_json(&dir.join("episode.json")).unwrap_or(Value::Null);
            let score = read_json(&dir.join("score.json")).unwrap_or(Value::Null);
            // A fork sits under its parent, indented, saying where it forked.
            let branch = match depth {
                0 => String::new(),
                d => format!(
                    "{}└ fork after step {}: ",
                    "&nbsp;&nbsp;".repeat(d),
                    record["fork"]["at_step"]
                ),
            };
            let _ = write!(
                body,
                "<tr class=\"depth-{depth}\"><td>{branch}<a href=\"/e/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&id),
                esc(&id),
                esc(&status(&record)),
                record["end"]["steps"],
                esc(&score["score"].to_string()),
                score["valid"],
                esc(&public_cell(&score))
            );
        }
        body.push_str("</tbody></table>");
        if self.root.join("report.html").is_file() {
            body.push_str("<p>The run's report: report.html in its directory.</p>");
        }
        layout("mlrb view", &body)
    }

    /// The fork's parent and the episode's own forks, as links where they
    /// are under the viewer's root.
    fn lineage(&self, dir: &Path, record: &Value) -> String {
        let forks = ForkTree::of(&self.root);
        let link = |id: &str| format!("<a href=\"/e/{}\">{}</a>", esc(id), esc(id));
        let mut html = String::new();
        if let Some(parent) = record["fork"]["parent"].as_str() {
            let shown = forks
                .id_of(Path::new(parent))
                .map_or_else(|| esc(parent), |id| link(&id));
            let _ = write!(
                html,
                "<p id=\"fork-parent\">A fork of {shown} after its step {} ({}).</p>",
                record["fork"]["at_step"],
                if record["fork"]["new_agent"] == true {
                    "another agent, started fresh"
                } else {
                    "the same agent, its first steps replayed"
                }
            );
        }
        let children = forks.children_of(dir);
        if !children.is_empty() {
            let list: Vec<String> = children.iter().map(|id| link(id)).collect();
            let _ = write!(html, "<p id=\"forks\">Forks of this episode: {}</p>", list.join(", "));
        }
        html
    }

    fn episode_page(&self, dir: &Path, id: &str, query: &str) -> Result<String> {
        let record = read_json(&dir.join("episode.json"))?;
        let score = read_json(&dir.join("score.json")).unwrap_or(Value::Null);
        let events = read_events(&dir.join("events.jsonl"))?;
        let pages = events.len().div_ceil(PAGE).max(1);
        let page = param(query, "page").unwrap_or(1).clamp(1, pages as u64) as usize;
        let mut body = String::new();
        let _ = write!(
            body,
            "<p><a href=\"/\">all episodes</a></p><dl id=\"summary\"><dt>agent</dt><dd>{}</dd><dt>task</dt><dd>{} {}</dd><dt>seed</dt><dd>{}</dd><dt>ended</dt><dd>{}: {}</dd><dt>steps</dt><dd>{}</dd><dt>score</dt><dd id=\"score\">{} ({}) {}</dd></dl>",
            esc(record["agent"]["path"].as_str().unwrap_or("")),
            esc(record["task"]["name"].as_str().unwrap_or("")),
            esc(record["task"]["version"].as_str().unwrap_or("")),
            record["seed"],
            esc(&status(&record)),
            esc(record["end"]["detail"].as_str().unwrap_or("")),
            record["end"]["steps"],
            esc(&score["score"].to_string()),
            if score["valid"] == true { "valid" } else { "not valid" },
            esc(score["error"].as_str().unwrap_or(""))
        );
        body.push_str(&feedback_section(&score));
        body.push_str(&self.lineage(dir, &record));
        body.push_str(&network_section(&record, &events));
        body.push_str(&self.diff_form(dir, id)?);
        let _ = write!(
            body,
            "<h2>Steps</h2><p>{} events; page {page} of {pages}. {}</p>",
            events.len(),
            pager(id, page, pages)
        );
        body.push_str("<table id=\"steps\"><thead><tr><th>#</th><th>t (ms)</th><th>step</th><th>call</th><th>arguments</th><th>result</th><th>µs</th><th>snapshot</th></tr></thead><tbody>");
        for event in events.iter().skip((page - 1) * PAGE).take(PAGE) {
            let result = &event["result"];
            let failed = result.get("error").is_some();
            let _ = write!(
                body,
                "<tr class=\"{}\"><td>{}</td><td>{:.1}</td><td>{}</td><td>{}.{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                if failed { "error" } else { "ok" },
                event["seq"],
                event["t_ms"].as_f64().unwrap_or(0.0),
                event["step"].as_u64().map_or(String::new(), |s| s.to_string()),
                esc(event["interface"].as_str().unwrap_or("")),
                esc(event["function"].as_str().unwrap_or("")),
                esc(&clip(&event["args"].to_string())),
                esc(&clip(&result.to_string())),
                event["duration_us"],
                event["snapshot"].as_u64().map_or(String::new(), |s| s.to_string())
            );
        }
        body.push_str("</tbody></table>");
        Ok(layout(&format!("episode {id}"), &body))
    }

    /// The form choosing two snapshots to compare.
    fn diff_form(&self, dir: &Path, id: &str) -> Result<String> {
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
            "<h2>Workspace</h2><form id=\"diff\" action=\"/e/{}/diff\">compare snapshot <select name=\"a\">{}</select> with <select name=\"b\">{}</select> <button>diff</button></form>",
            esc(id),
            options(first),
            options(last)
        ))
    }

    fn diff_page(&self, dir: &Path, id: &str, query: &str) -> Result<String> {
        let snapshots = dir.join("snapshots");
        let (Some(a), Some(b)) = (param(query, "a"), param(query, "b")) else {
            anyhow::bail!("choose two snapshots: ?a=<id>&b=<id>");
        };
        let before = snapshot::read_manifest(&snapshots, a)?;
        let after = snapshot::read_manifest(&snapshots, b)?;
        let paths: BTreeSet<&String> = before.entries.keys().chain(after.entries.keys()).collect();
        let mut body = format!(
            "<p><a href=\"/e/{}\">back to the episode</a></p><h2>Snapshot {a} ({}) → {b} ({})</h2>",
            esc(id),
            esc(&before.label),
            esc(&after.label)
        );
        let mut changed = 0;
        for path in paths {
            let (old, new) = (before.entries.get(path), after.entries.get(path));
            if old == new {
                continue;
            }
            changed += 1;
            let status = match (old, new) {
                (None, _) => "added",
                (_, None) => "removed",
                _ => "changed",
            };
            let _ = write!(body, "<h3 class=\"file\">{} <small>{status}</small></h3>", esc(path));
            let text = |entry: Option<&ManifestEntry>| -> Option<String> {
                match entry {
                    None => Some(String::new()),
                    Some(ManifestEntry::File { hash, size, .. }) if *size <= DIFF_BYTES && snapshot::is_hash(hash) => {
                        read_record_file(&snapshots.join("objects").join(hash)).ok()
                    }
                    _ => None,
                }
            };
            match (text(old), text(new)) {
                (Some(old_text), Some(new_text)) => {
                    let diff = similar::TextDiff::from_lines(&old_text, &new_text);
                    let unified = diff.unified_diff().context_radius(3).header(path, path).to_string();
                    let _ = write!(body, "<pre class=\"diff\">{}</pre>", colour_diff(&unified));
                }
                _ => body.push_str("<p>binary, large or not a file: compared by content hash only</p>"),
            }
        }
        if changed == 0 {
            body.push_str("<p>No difference.</p>");
        }
        Ok(layout(&format!("diff {id}"), &body))
    }
}

/// The episode's connections, all of them, from the trace's `egress`
/// records (with the totals `episode.json` keeps); empty without a grant.
fn network_section(record: &Value, events: &[Value]) -> String {
    let connections: Vec<crate::network::Connection> = events
        .iter()
        .filter(|e| e["interface"] == "host" && e["function"] == "egress")
        .flat_map(|e| e["args"]["connections"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| serde_json::from_value(c).ok())
        .collect();
    let grant = &record["limits"]["network"];
    if connections.is_empty() && !grant.is_object() {
        return String::new();
    }
    let totals = crate::network::NetworkUse::of(&connections).map_or("no connection".into(), |n| n.describe());
    format!(
        "<h2 id=\"network\">Network</h2><p>granted: <code>{}</code></p><p>{}</p>{}",
        esc(&grant.to_string()),
        esc(&totals),
        crate::bench::html::connection_table(&connections)
    )
}

/// How an episode ended, or "running" / "host killed" while it has no end.
fn status(record: &Value) -> String {
    serde_json::from_value::<crate::episode::EpisodeRecord>(record.clone())
        .map(|r| r.status())
        .unwrap_or_else(|_| {
            record["end"]["reason"]
                .as_str()
                .unwrap_or("unreadable record")
                .to_string()
        })
}

fn colour_diff(unified: &str) -> String {
    unified
        .lines()
        .map(|line| {
            let class = match line.chars().next() {
                Some('+') if !line.starts_with("+++") => "add",
                Some('-') if !line.starts_with("---") => "del",
                Some('@') => "hunk",
                _ => "ctx",
            };
            format!("<span class=\"{class}\">{}</span>", esc(line))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn pager(id: &str, page: usize, pages: usize) -> String {
    let link = |p: usize, text: &str| format!("<a href=\"/e/{}?page={p}\">{text}</a>", esc(id));
    let mut parts = Vec::new();
    if page > 1 {
        parts.push(link(1, "first"));
        parts.push(link(page - 1, "previous"));
    }
    if page < pages {
        parts.push(link(page + 1, "next"));
        parts.push(link(pages, "last"));
    }
    parts.join(" · ")
}

fn clip(text: &str) -> String {
    if text.chars().count() <= CELL_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(CELL_CHARS).collect();
    format!("{head}… ({} bytes)", text.len())
}

fn param(query: &str, name: &str) -> Option<u64> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .and_then(|(_, value)| value.parse().ok())
}

/// `text` with its `%XX` escapes decoded, lossily as UTF-8.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(value) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(value);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The episodes under a root and which is a fork of which.
struct ForkTree {
    /// Each episode's id and canonical folder, in id order.
    episodes: Vec<(String, PathBuf)>,
    /// Each episode's parent's canonical folder, for forks.
    parents: std::collections::HashMap<String, PathBuf>,
}

impl ForkTree {
    fn of(root: &Path) -> Self {
        let mut tree = Self {
            episodes: Vec::new(),
            parents: std::collections::HashMap::new(),
        };
        for id in episodes(root) {
            let dir = root.join(&id);
            let record = read_json(&dir.join("episode.json")).unwrap_or(Value::Null);
            if let Some(parent) = record["fork"]["parent"].as_str() {
                let parent = Path::new(parent);
                tree.parents
                    .insert(id.clone(), parent.canonicalize().unwrap_or(parent.to_path_buf()));
            }
            tree.episodes.push((id, dir.canonicalize().unwrap_or(dir)));
        }
        tree
    }

    fn id_of(&self, dir: &Path) -> Option<String> {
        let dir = dir.canonicalize().ok()?;
        self.episodes.iter().find(|(_, d)| *d == dir).map(|(id, _)| id.clone())
    }

    fn children_of(&self, dir: &Path) -> Vec<String> {
        let Ok(dir) = dir.canonicalize() else { return Vec::new() };
        self.episodes
            .iter()
            .filter(|(id, _)| self.parents.get(id) == Some(&dir))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Every episode with its depth: each parent (or an episode whose
    /// parent is not here) followed by its forks, depth first.
    fn in_order(&self) -> Vec<(String, usize)> {
        let known: std::collections::HashSet<&PathBuf> = self.episodes.iter().map(|(_, d)| d).collect();
        let mut out = Vec::new();
        let mut stack: Vec<(String, PathBuf, usize)> = self
            .episodes
            .iter()
            .rev()
            .filter(|(id, _)| self.parents.get(id).is_none_or(|p| !known.contains(p)))
            .map(|(id, dir)| (id.clone(), dir.clone(), 0))
            .collect();
        while let Some((id, dir, depth)) = stack.pop() {
            out.push((id, depth));
            // A fork's chain cannot loop back (a parent exists before its
            // forks), but a hand-edited record could: depth bounds it.
            if depth < 64 {
                for child in self.children_of(&dir).into_iter().rev() {
                    let child_dir = self
                        .episodes
                        .iter()
                        .find(|(i, _)| *i == child)
                        .map(|(_, d)| d.clone())
                        .unwrap_or_default();
                    stack.push((child, child_dir, depth + 1));
                }
            }
        }
        // Forks of each other (only by hand-edited records) are still listed.
        for (id, _) in &self.episodes {
            if !out.iter().any(|(listed, _)| listed == id) {
                out.push((id.clone(), 0));
            }
        }
        out
    }
}

/// Episode directories under `root` (relative, `/`-separated), sorted.
pub fn episodes(root: &Path) -> Vec<String> {
    let is_episode = |dir: &Path| std::fs::symlink_metadata(dir.join("episode.json")).is_ok_and(|m| m.is_file());
    let mut found: Vec<String> = Vec::new();
    let mut walk = walkdir::WalkDir::new(root).min_depth(1).max_depth(4).into_iter();
    // Nothing inside an episode is listed: its workspace is the agent's.
    while let Some(entry) = walk.next() {
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_dir() || !is_episode(entry.path()) {
            continue;
        }
        walk.skip_current_dir();
        if let Ok(rel) = entry.path().strip_prefix(root) {
            found.push(rel.to_string_lossy().into_owned());
        }
    }
    found.sort();
    found
}

/// An index cell: the best public-part score, marked when its gain did
/// not carry over to the private part.
fn public_cell(score: &Value) -> String {
    let best = &score["public"]["best"];
    match (best.is_number(), score["public_gain_lost"] == true) {
        (false, _) => String::new(),
        (true, false) => best.to_string(),
        (true, true) => format!("{best} (gain lost on the private part)"),
    }
}

/// What validate() told the agent and, where the task splits its answers,
/// the public part's scores beside the private one.
fn feedback_section(score: &Value) -> String {
    let feedback = score["feedback"].as_str().unwrap_or("test-set");
    let told = match feedback {
        "off" => "no intermediate scoring",
        "validity" => "validity only",
        "public-score" => "the score of the public part of the test set; the score above is the private part's",
        "score" => "the score (the task has no hidden answers to select on)",
        _ => "the score on the test set itself (recorded before public/private splits)",
    };
    let mut html = format!("<p id=\"feedback\">validate() told the agent: {}</p>", esc(told));
    let public = &score["public"];
    if public.is_object() {
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

/// The most of one record file the viewer reads (a full trace fits).
const MAX_RECORD_FILE: u64 = 1 << 30;

fn read_record_file(path: &Path) -> Result<String> {
    crate::record::read_record_file(path, MAX_RECORD_FILE)
}

fn read_json(path: &Path) -> Result<Value> {
    let text = read_record_file(path)?;
    serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
}

fn read_events(path: &Path) -> Result<Vec<Value>> {
    let text = read_record_file(path)?;
    // A line torn by a killed host is skipped, not fatal.
    Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2em .5em;vertical-align:top;font-size:13px}th{background:#f3f3f3}tr.error td{background:#fff0f0}code{white-space:pre-wrap;word-break:break-all}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:bold}pre.diff{background:#fafafa;border:1px solid #ddd;padding:.5em;overflow:auto}.add{color:#067d17}.del{color:#b00}.hunk{color:#555}";

fn layout(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>{STYLE}</style></head><body><h1>{0}</h1>{body}</body></html>\n",
        esc(title)
    )
}

fn html_response(status: StatusCode, html: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(html)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response.headers_mut().insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        hyper::header::HeaderValue::from_static(crate::http_server::PAGE_POLICY),
    );
    response
}

fn not_found() -> Response<Full<Bytes>> {
    html_response(
        StatusCode::NOT_FOUND,
        layout("not found", "<p><a href=\"/\">all episodes</a></p>"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_escapes() {
        assert_eq!(param("a=3&b=7", "b"), Some(7));
        assert_eq!(param("a=x", "a"), None);
        assert_eq!(percent_decode("digits%2Fbase%20line/1"), "digits/base line/1");
        assert!(clip(&"x".repeat(1000)).ends_with("(1000 bytes)"));
    }
}

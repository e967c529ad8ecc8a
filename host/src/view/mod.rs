//! `mlrb view`: a trace viewer served on loopback. The list of episodes of
//! a run; for one episode its transcript (the conversation, tool calls
//! opening to their arguments and results, scripts' output, validations,
//! diffs between steps, the final score), paged so a trace of any length
//! stays responsive; its raw steps and their JSON; the diff of the
//! workspace between any two snapshots. Pages are rendered on the server;
//! nothing is fetched from elsewhere.

mod diff;
mod forks;
mod score;
mod steps;
mod text;
mod transcript;

use std::fmt::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use crate::format::esc;
use forks::ForkTree;
pub use forks::episodes;
use text::clip;

/// Events shown per page of an episode.
pub const PAGE: usize = 200;

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
        let single = self.root.join("episode.json").is_file();
        // `/e/<id>[/<view>]`, or for a viewer of one episode `/[<view>]`
        // (a browser drops the `.` of `/e/./diff`).
        let (id, view) = match path.strip_prefix("/e/") {
            Some(rest) => match split_view(rest) {
                ("", view) => (".", view),
                found => found,
            },
            None if single => (".", path.trim_start_matches('/')),
            None if path == "/" => return html_response(StatusCode::OK, self.rebase(self.index())),
            None => return not_found(),
        };
        let Some(dir) = self.episode_dir(id) else {
            return not_found();
        };
        let link = if id == "." {
            String::new()
        } else {
            format!("/e/{}", esc(id))
        };
        let page = match view {
            "" => self.episode_page(&dir, id, &link, query),
            "diff" => diff::page(&dir, &link, id, query),
            "steps" => steps::page(&dir, id, &link, query),
            "events.json" => return steps::json_page(&dir, query),
            _ => return not_found(),
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
            return self.root.join("episode.json").is_file().then(|| self.root.clone());
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
                    esc(&record["fork"]["at_step"].to_string())
                ),
            };
            let _ = write!(
                body,
                "<tr class=\"depth-{depth}\"><td>{branch}<a href=\"/e/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&id),
                esc(&id),
                esc(&status(&record)),
                esc(&record["end"]["steps"].to_string()),
                esc(&score["score"].to_string()),
                esc(&score["valid"].to_string()),
                esc(&score::public_cell(&score))
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
                esc(&record["fork"]["at_step"].to_string()),
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

    /// An episode's summary and one page of its transcript.
    fn episode_page(&self, dir: &Path, id: &str, link: &str, query: &str) -> Result<String> {
        let record = read_json(&dir.join("episode.json"))?;
        let score = read_json(&dir.join("score.json")).unwrap_or(Value::Null);
        let (events, unreadable) = read_events(&dir.join("events.jsonl"))?;
        let pages = events.len().div_ceil(PAGE).max(1);
        let page = param(query, "page").unwrap_or(1).clamp(1, pages as u64) as usize;
        let mut body = summary(&record);
        body.push_str(&score::final_score(&score));
        body.push_str(&self.lineage(dir, &record));
        body.push_str(&network_section(&record, &events));
        let first = (page - 1) * PAGE;
        let _ = write!(
            body,
            "<h2>Workspace</h2>{}<h2>Transcript</h2><p id=\"views\"><a href=\"{link}/steps?page={page}\">raw steps</a> · <a href=\"{link}/events.json?page={page}\">raw JSON</a> of these events</p>",
            diff::form(dir, link)?
        );
        let pager = pager(if link.is_empty() { "/" } else { link }, page, pages);
        let _ = write!(
            body,
            "<p class=\"pager\">{} events; page {page} of {pages}. {pager}</p>",
            events.len()
        );
        if unreadable > 0 {
            let _ = write!(
                body,
                "<p class=\"error\">{unreadable} lines of events.jsonl are not JSON and are left out.</p>"
            );
        }
        let episode = transcript::Episode {
            link,
            snapshots: &dir.join("snapshots"),
            events: &events,
        };
        body.push_str(&transcript::render(&episode, first..events.len().min(first + PAGE)));
        if page == pages {
            body.push_str(&ending(&record));
        }
        let _ = write!(body, "<p class=\"pager\">{pager}</p>");
        let name = match id {
            // The folder's last names (task/agent/seed in a run).
            "." => {
                let names: Vec<String> = dir.iter().map(|n| n.to_string_lossy().into_owned()).collect();
                names[names.len().saturating_sub(3)..].join("/")
            }
            _ => id.to_string(),
        };
        Ok(layout(&format!("episode {name}"), &body))
    }
}

/// Who ran what, and how it ended.
fn summary(record: &Value) -> String {
    format!(
        "<p><a href=\"/\">all episodes</a></p><dl id=\"summary\"><dt>agent</dt><dd>{}</dd><dt>task</dt><dd>{} {}</dd><dt>seed</dt><dd>{}</dd><dt>ended</dt><dd>{}: {}</dd><dt>steps</dt><dd>{}</dd><dt>model</dt><dd>{}</dd></dl>",
        esc(record["agent"]["path"].as_str().unwrap_or("")),
        esc(record["task"]["name"].as_str().unwrap_or("")),
        esc(record["task"]["version"].as_str().unwrap_or("")),
        esc(&record["seed"].to_string()),
        esc(&status(record)),
        esc(record["end"]["detail"].as_str().unwrap_or("")),
        esc(&record["end"]["steps"].to_string()),
        esc(&llm_use(&record["end"]["llm"]))
    )
}

/// The model calls' totals, in words.
fn llm_use(llm: &Value) -> String {
    match llm["calls"].as_u64() {
        Some(calls) if calls > 0 => format!(
            "{calls} calls, {} input and {} output tokens, ${:.4}",
            llm["input_tokens"],
            llm["output_tokens"],
            llm["cost_usd"].as_f64().unwrap_or(0.0)
        ),
        _ => "no model calls".into(),
    }
}

/// The transcript's last lines: how the episode ended and what the agent answered.
fn ending(record: &Value) -> String {
    let answer = record["end"]["answer"].as_str().map_or(String::new(), |a| {
        format!(
            "<div class=\"msg final-answer\"><div class=\"role\">the agent's answer</div><div class=\"text\">{}</div></div>",
            esc(&clip(a, 20_000))
        )
    });
    format!(
        "<div id=\"end\">{answer}<p class=\"ended\">The episode ended: {}: {}. <a href=\"#final\">Its final score</a> is at the top.</p></div>",
        esc(&status(record)),
        esc(&clip(record["end"]["detail"].as_str().unwrap_or(""), 2_000))
    )
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

/// Links to the other pages of `target` (a path, its text escaped).
fn pager(target: &str, page: usize, pages: usize) -> String {
    let link = |p: usize, text: &str| format!("<a href=\"{target}?page={p}\">{text}</a>");
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

/// The most of one record file the viewer reads (a full trace fits).
const MAX_RECORD_FILE: u64 = 1 << 30;

fn read_record_file(path: &Path) -> Result<String> {
    crate::record::read_record_file(path, MAX_RECORD_FILE)
}

fn read_json(path: &Path) -> Result<Value> {
    let text = read_record_file(path)?;
    serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
}

/// The events of a trace, and how many of its lines are not JSON (a line
/// torn by a killed host, or a hand-made one). Read lossily: bytes that are
/// not UTF-8 do not hide the rest.
fn read_events(path: &Path) -> Result<(Vec<Value>, usize)> {
    use std::io::Read;
    let mut bytes = Vec::new();
    crate::record::open_record_file(path)?
        .take(MAX_RECORD_FILE)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let (mut events, mut unreadable) = (Vec::new(), 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(event) if event.is_object() => events.push(event),
            _ => unreadable += 1,
        }
    }
    Ok((events, unreadable))
}

/// `/e/<id>/<view>` split into the id and the view ("" for the transcript).
fn split_view(rest: &str) -> (&str, &str) {
    for view in ["diff", "steps", "events.json"] {
        if let Some(id) = rest.strip_suffix(view).and_then(|r| r.strip_suffix('/')) {
            return (id, view);
        }
    }
    (rest.trim_end_matches('/'), "")
}

const STYLE: &str = concat!(
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:70em}table{border-collapse:collapse}",
    "td,th{border:1px solid #ddd;padding:.2em .5em;vertical-align:top;font-size:13px}th{background:#f3f3f3}",
    "tr.error td{background:#fff0f0}code{white-space:pre-wrap;word-break:break-all}",
    "dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:bold}",
    "pre{white-space:pre-wrap;word-break:break-all;font-size:12px;margin:.2em 0}",
    "pre.diff{background:#fafafa;border:1px solid #ddd;padding:.5em;overflow:auto}",
    ".add{color:#067d17}.del{color:#b00}.hunk{color:#555}",
    ".msg{border-radius:8px;padding:.4em .8em;margin:.5em 0;max-width:90%}.msg .text{white-space:pre-wrap;word-break:break-word}",
    ".role{font-size:11px;color:#666;margin-bottom:.2em}.system,.task{background:#f1f1f1}.user{background:#eef4ff}",
    ".assistant{background:#effaf0;margin-left:5%}.tool{background:#fdf6e3}.note{background:#fffbe6;border-left:4px solid #e0c040}",
    ".refused{color:#b00}.call{margin:.15em 0;font-size:13px}.call>summary{cursor:pointer;font-family:monospace}",
    ".call.failed>summary{color:#b00}.call.host>summary{color:#777}.call .body{border-left:3px solid #ddd;padding-left:.6em}",
    ".label{font-size:11px;color:#666}.output{background:#1e1e1e;color:#ddd;padding:.3em .8em;border-radius:6px;margin:.2em 0 .6em}",
    ".output .role{color:#aaa}.stderr{color:#f99}.validation{border:2px solid #5a7;border-radius:8px;padding:.3em .8em;margin:.6em 0}",
    ".inline-diff{margin:.2em 0 .8em 1em}.inline-diff .file{margin:.2em 0;font-family:monospace}",
    ".final{border:2px solid #333;border-radius:8px;padding:.3em .8em}.part{font-weight:bold;text-decoration:underline}",
    ".error,.flag{color:#b00}.hidden,.pager{color:#666;font-size:13px}"
);

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
        assert_eq!(split_view("digits/a/1/diff"), ("digits/a/1", "diff"));
        assert_eq!(split_view("digits/a/1"), ("digits/a/1", ""));
        assert_eq!(split_view("steps"), ("steps", ""));
        assert_eq!(split_view("x/events.json"), ("x", "events.json"));
    }
}

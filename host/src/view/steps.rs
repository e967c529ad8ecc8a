//! An episode's raw records: its events as a table, one row per call, and
//! a page of them as the JSON they were recorded as.

use std::fmt::Write;
use std::path::Path;

use anyhow::Result;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};

use super::text::{clip, json};
use super::{PAGE, layout, pager, param, read_events};
use crate::format::esc;

/// Characters of an argument or result shown in the table.
const CELL_CHARS: usize = 400;

/// One page of the table of an episode's events.
pub fn page(dir: &Path, id: &str, link: &str, query: &str) -> Result<String> {
    let (events, _) = read_events(&dir.join("events.jsonl"))?;
    let pages = events.len().div_ceil(PAGE).max(1);
    let page = param(query, "page").unwrap_or(1).clamp(1, pages as u64) as usize;
    let mut body = format!(
        "<p><a href=\"{}?page={page}\">the transcript</a> · <a href=\"{link}/events.json?page={page}\">raw JSON</a></p>",
        if link.is_empty() { "/" } else { link }
    );
    let _ = write!(
        body,
        "<h2>Steps</h2><p>{} events; page {page} of {pages}. {}</p>",
        events.len(),
        pager(&format!("{link}/steps"), page, pages)
    );
    body.push_str("<table id=\"steps\"><thead><tr><th>#</th><th>t (ms)</th><th>step</th><th>call</th><th>arguments</th><th>result</th><th>µs</th><th>snapshot</th></tr></thead><tbody>");
    for event in events.iter().skip((page - 1) * PAGE).take(PAGE) {
        let result = &event["result"];
        let failed = result.get("error").is_some();
        let _ = write!(
            body,
            "<tr class=\"{}\"><td>{}</td><td>{:.1}</td><td>{}</td><td>{}.{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            if failed { "error" } else { "ok" },
            event["seq"].as_u64().unwrap_or(0),
            event["t_ms"].as_f64().unwrap_or(0.0),
            event["step"].as_u64().map_or(String::new(), |s| s.to_string()),
            esc(event["interface"].as_str().unwrap_or("")),
            esc(event["function"].as_str().unwrap_or("")),
            esc(&clip(&json(&event["args"], 4 * CELL_CHARS, false), CELL_CHARS)),
            esc(&clip(&json(result, 4 * CELL_CHARS, false), CELL_CHARS)),
            event["duration_us"].as_u64().unwrap_or(0),
            event["snapshot"].as_u64().map_or(String::new(), |s| s.to_string())
        );
    }
    body.push_str("</tbody></table>");
    Ok(layout(&format!("episode {id}: steps"), &body))
}

/// One page of an episode's events as a JSON array, served as JSON (never
/// as a page a browser would run).
pub fn json_page(dir: &Path, query: &str) -> Response<Full<Bytes>> {
    let (status, text) = match read_events(&dir.join("events.jsonl")) {
        Ok((events, _)) => {
            let pages = events.len().div_ceil(PAGE).max(1);
            let page = param(query, "page").unwrap_or(1).clamp(1, pages as u64) as usize;
            let shown: Vec<&serde_json::Value> = events.iter().skip((page - 1) * PAGE).take(PAGE).collect();
            (StatusCode::OK, serde_json::to_string_pretty(&shown).unwrap_or_default())
        }
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({ "error": format!("{error:#}") }).to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        hyper::header::X_CONTENT_TYPE_OPTIONS,
        hyper::header::HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        hyper::header::HeaderValue::from_static(crate::http_server::PAGE_POLICY),
    );
    response
}

//! The leaderboard pages: each published benchmark version's board
//! (`submissions::leaderboard`) from its ranked and held submissions and
//! the people's runs added as references, as
//! HTML, or as JSON for `Accept: application/json`; and an index of the
//! benchmarks.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::Service;
use super::answer::{Answer, json, refuse};
use crate::submissions::leaderboard::{self, Board, Entry, Verify};
use crate::submissions::store::now_ms;
use crate::submissions::{Benchmark, State};

/// The board of benchmark `id` (`name/version`).
pub fn board(service: &Service, benchmark: &Benchmark) -> anyhow::Result<Board> {
    let of = Some((benchmark.name.as_str(), benchmark.version.as_str()));
    let now = now_ms();
    // A failed verification's findings may quote a score: told once closed.
    let private = benchmark.closed(now);
    let mut entries = Vec::new();
    for submission in service.store.in_states(&[State::Ranked, State::Held], of)? {
        let verdict = service.store.verdict(submission.id)?.map(|v| v.shown(private));
        entries.push(Entry {
            id: submission.id,
            agent: submission.agent.clone(),
            submitter: submission.submitter.clone(),
            state: submission.state,
            results: super::runner::results(service, submission.id)?,
            review_flags: verdict.as_ref().map_or(0, |v| v.review_flags),
            info_flags: verdict.as_ref().map_or(0, |v| v.info_flags),
            verify: match verdict {
                None => Verify::Pending,
                Some(v) if v.verified() => Verify::Verified,
                Some(v) => Verify::Failed(v.verify),
            },
            person: None,
        });
    }
    entries.extend(references(service, benchmark)?);
    Ok(leaderboard::board(benchmark, &entries, now))
}

/// The people's runs the organisers added as references (only verified
/// ones are ever added).
fn references(service: &Service, benchmark: &Benchmark) -> anyhow::Result<Vec<Entry>> {
    let key = (benchmark.name.as_str(), benchmark.version.as_str());
    let mut entries = Vec::new();
    for reference in service.store.references(key.0, key.1)? {
        let dir = service.layout.reference(key, &reference.name);
        entries.push(Entry {
            id: reference.id,
            agent: format!("human:{}", reference.name),
            submitter: "the organisers".into(),
            state: State::Ranked,
            results: crate::bench::read_results(&dir)?,
            review_flags: reference.verdict.review_flags,
            info_flags: reference.verdict.info_flags,
            verify: Verify::Verified,
            person: Some(reference.name),
        });
    }
    Ok(entries)
}

/// `GET /leaderboard/<name>/<version>`.
pub fn page(service: &Service, id: &str, request: &Request<Incoming>) -> Answer {
    let Some(benchmark) = service.benchmark(id) else {
        return refuse(StatusCode::NOT_FOUND, &format!("no benchmark `{id}`"));
    };
    let board = match board(service, benchmark) {
        Ok(board) => board,
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), "leaderboard");
            return refuse(StatusCode::INTERNAL_SERVER_ERROR, "the leaderboard could not be made");
        }
    };
    if wants_json(request) {
        return json(StatusCode::OK, &board);
    }
    html(StatusCode::OK, leaderboard::html(&board))
}

/// `GET /`: the benchmarks, each linking to its board.
pub fn index(service: &Service) -> Answer {
    let now = now_ms();
    let rows: String = service
        .benchmarks
        .values()
        .map(|b| {
            let id = crate::format::esc(&b.id());
            let state = if b.closed(now) { "closed" } else { "open" };
            format!("<li><a href=\"/leaderboard/{id}\">{id}</a> ({state})</li>")
        })
        .collect();
    html(
        StatusCode::OK,
        format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>mlrb leaderboards</title></head><body><h1>Leaderboards</h1><ul id=\"benchmarks\">{rows}</ul></body></html>"
        ),
    )
}

/// `GET /view/<id>/...`: the trace viewer of a ranked submission's run,
/// once its benchmark version closed (before, its pages would show the
/// private part's scores).
pub fn trace(service: &Service, id: &str, request: &Request<Incoming>) -> Answer {
    let not_shown = || {
        refuse(
            StatusCode::NOT_FOUND,
            &format!("no trace of submission {id} is shown (yet): traces are public once the benchmark version closes"),
        )
    };
    let Ok(number) = id.parse::<i64>() else {
        return not_shown();
    };
    let shown = service
        .store
        .any_submission(number)
        .ok()
        .flatten()
        .filter(|s| s.state == State::Ranked && super::records::closed(service, s));
    if shown.is_none() {
        return not_shown();
    }
    match crate::view::Viewer::new(&service.layout.run(number)) {
        Ok(viewer) => viewer.under(&format!("/view/{number}")).respond(request),
        Err(_) => not_shown(),
    }
}

/// `GET /view/reference/<id>/...`: the trace viewer of a person's
/// reference run, as a submission's is shown: once its benchmark version
/// closed, never before.
pub fn reference_trace(service: &Service, id: &str, request: &Request<Incoming>) -> Answer {
    let not_shown = || {
        refuse(
            StatusCode::NOT_FOUND,
            &format!("no trace of reference {id} is shown (yet): traces are public once the benchmark version closes"),
        )
    };
    let Some(reference) = super::records::closed_reference(service, id) else {
        return not_shown();
    };
    let dir = service
        .layout
        .reference((&reference.benchmark, &reference.version), &reference.name);
    match crate::view::Viewer::new(&dir) {
        Ok(viewer) => viewer
            .under(&format!("/view/reference/{}", reference.id))
            .respond(request),
        Err(_) => not_shown(),
    }
}

fn wants_json(request: &Request<Incoming>) -> bool {
    request
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("application/json") && !accept.contains("text/html"))
}

fn html(status: StatusCode, body: String) -> Answer {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/html; charset=utf-8")
        .header(hyper::header::CONTENT_SECURITY_POLICY, crate::http_server::PAGE_POLICY)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

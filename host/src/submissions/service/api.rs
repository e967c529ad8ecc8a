//! The service's HTTP API (hyper, JSON; the leaderboard also as HTML):
//!
//! ```text
//! GET  /v1/benchmarks                       the published benchmarks     (anyone)
//! POST /v1/submissions?benchmark=N/V&agent=A  upload a component (application/wasm)
//! GET  /v1/submissions                      your submissions
//! GET  /v1/submissions/<id>                 one, with its results so far
//! GET  /v1/submissions/<id>/records         its records, as a tar archive
//! POST /v1/submissions/<id>/withdraw        take it off
//! GET  /leaderboard/<name>/<version>        HTML, or JSON with Accept: application/json
//! GET  /view/<id>/                          a ranked submission's trace viewer, once closed
//! GET  /records/<id>                        a ranked submission's signed records, once closed
//! GET  /view/reference/<id>/                a person's reference run's trace viewer, once closed
//! GET  /records/reference/<id>              its signed records, once closed
//! ```
//!
//! Every request is counted against its address's rate first; a token is
//! checked (a keyed hash, as cheap for a bogus one as for a real one) only
//! for a request that got past that. A refusal is a
//! 4xx whose body says why in one line (`{"error": ...}`) and changes nothing.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use super::answer::{Answer, json, refuse};
use super::limiter::Limiter;
use super::uploading::Uploading;
use super::{Service, records, upload};
use crate::engine::gate;
use crate::http_server::{BodyDeadline, Peer, Settings};
use crate::submissions::Benchmark;
use crate::submissions::accounts::{Refused, Submitter};
use crate::submissions::quota::Exceeded;
use crate::submissions::store::now_ms;
use crate::submissions::submission::{State, Upload, actor};

/// The service, served.
pub struct Api {
    /// What it serves.
    pub service: Arc<Service>,
    /// Requests admitted per address.
    pub limiter: Limiter,
    /// Its connections' caps and timeouts.
    pub connections: Settings,
    /// Submitters with an upload in progress (one each).
    pub uploading: Uploading,
}

impl Api {
    /// Serves on `listener` until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
        let settings = self.connections.clone();
        let respond = move |request| {
            let api = self.clone();
            async move { api.respond(request).await }
        };
        Ok(crate::http_server::serve(listener, "submissions", settings, respond).await?)
    }

    async fn respond(&self, request: Request<Incoming>) -> Answer {
        let client = request
            .extensions()
            .get::<Peer>()
            .map_or(IpAddr::from([127, 0, 0, 1]), |p| p.0.ip());
        if let Err(wait) = self.limiter.admit(client, std::time::Instant::now()) {
            let seconds = wait.as_secs().max(1);
            let mut answer = refuse(
                StatusCode::TOO_MANY_REQUESTS,
                &format!("too many requests from {client}: try again in {seconds} s"),
            );
            answer.headers_mut().insert(hyper::header::RETRY_AFTER, seconds.into());
            return answer;
        }
        let path = request.uri().path().to_string();
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        match (request.method(), segments.as_slice()) {
            (&Method::GET, ["v1", "benchmarks"]) => json(StatusCode::OK, &self.benchmarks()),
            (&Method::GET, ["leaderboard", name, version]) => {
                super::board::page(&self.service, &format!("{name}/{version}"), &request)
            }
            (&Method::GET, [] | [""]) => super::board::index(&self.service),
            (&Method::GET, ["view", "reference", id, ..]) => super::board::reference_trace(&self.service, id, &request),
            (&Method::GET, ["view", id, ..]) => super::board::trace(&self.service, id, &request),
            (&Method::GET, ["records", "reference", id]) => self.reference_records(id),
            (&Method::GET, ["records", id]) => self.public_records(id),
            (_, ["v1", "submissions", ..]) => self.submissions(request).await,
            _ => refuse(
                StatusCode::NOT_FOUND,
                &format!("no such endpoint: {} {path}", request.method()),
            ),
        }
    }

    /// What each published benchmark is.
    fn benchmarks(&self) -> Vec<serde_json::Value> {
        let now = now_ms();
        let service = &self.service;
        service
            .benchmarks
            .values()
            .map(|b| {
                serde_json::json!({
                    "id": b.id(), "name": b.name, "version": b.version, "closes": b.closes,
                    "closed": b.closed(now), "tasks": b.plan.tasks, "max_agent_mb": b.max_agent_mb,
                    "quota": b.quota,
                })
            })
            .collect()
    }

    /// The endpoints that need a token.
    async fn submissions(&self, request: Request<Incoming>) -> Answer {
        let path = request.uri().path().trim_matches('/').to_string();
        let segments: Vec<&str> = path.split('/').skip(2).collect();
        // An upload's target and headers are checked before its token.
        let target = match (request.method(), segments.as_slice()) {
            (&Method::POST, []) => match self.upload_target(&request) {
                Ok(target) => Some(target),
                Err(answer) => return *answer,
            },
            _ => None,
        };
        if let Some((_, cap)) = &target
            && let Err(upload::Rejected(status, why)) = upload::check_headers(request.headers(), *cap)
        {
            return refuse(status, &why);
        }
        let who = match self.authenticate(&request).await {
            Ok(who) => who,
            Err(answer) => return *answer,
        };
        let id = segments.first().map(|s| s.parse::<i64>());
        if let Some(target) = target {
            // Quota, cooldown and uploads in flight before a byte of the body.
            let _held = match self.may_upload(&target.0, &who) {
                Ok(held) => held,
                Err(answer) => return *answer,
            };
            return self.upload(request, target, &who).await;
        }
        match (request.method(), segments.as_slice(), id) {
            (&Method::GET, [], _) => self.list(&who),
            (_, [_, ..], Some(Err(_))) => refuse(StatusCode::NOT_FOUND, "a submission's id is a number"),
            (&Method::GET, [_], Some(Ok(id))) => self.status(id, &who),
            (&Method::GET, [_, "records"], Some(Ok(id))) => self.records(id, &who),
            (&Method::POST, [_, "withdraw"], Some(Ok(id))) => self.withdraw(id, &who),
            _ => refuse(
                StatusCode::NOT_FOUND,
                &format!("no such endpoint: {} /{path}", request.method()),
            ),
        }
    }

    /// The submitter a request's bearer token names (a keyed hash looked up).
    async fn authenticate(&self, request: &Request<Incoming>) -> Result<Submitter, Box<Answer>> {
        let presented = request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("")
            .to_string();
        if presented.is_empty() {
            return Err(Box::new(refuse(
                StatusCode::UNAUTHORIZED,
                "no bearer token: pass yours as `Authorization: Bearer mlrbs_...`",
            )));
        }
        let store = &self.service.store;
        match tokio::task::block_in_place(|| store.authenticate(&presented)) {
            Ok(Ok(who)) => Ok(who),
            Ok(Err(refused @ (Refused::Invalid | Refused::Revoked))) => {
                Err(Box::new(refuse(StatusCode::UNAUTHORIZED, &refused.to_string())))
            }
            Err(error) => Err(Box::new(failed(&error))),
        }
    }

    /// The benchmark an upload names, and its size cap.
    fn upload_target(&self, request: &Request<Incoming>) -> Result<(String, u64), Box<Answer>> {
        let benchmark = query(request, "benchmark").unwrap_or_default();
        match self.service.benchmark(&benchmark) {
            Some(b) if !b.closed(now_ms()) => Ok((benchmark, b.max_agent_mb << 20)),
            Some(b) => Err(Box::new(refuse(
                StatusCode::CONFLICT,
                &format!(
                    "{} closed at {}: submit to a version still open",
                    b.id(),
                    b.closes.as_deref().unwrap_or("?")
                ),
            ))),
            None => {
                let known: Vec<&String> = self.service.benchmarks.keys().collect();
                Err(Box::new(refuse(
                    StatusCode::NOT_FOUND,
                    &format!("no benchmark `{benchmark}`: name one with ?benchmark=<name>/<version> ({known:?})"),
                )))
            }
        }
    }

    /// Whether `who` may upload to `benchmark_id` now: within the quota and
    /// cooldown, and with no other upload of theirs in progress (the place
    /// returned is held until the answer).
    fn may_upload(&self, benchmark_id: &str, who: &Submitter) -> Result<super::uploading::Held<'_>, Box<Answer>> {
        let benchmark = self.service.benchmark(benchmark_id).expect("checked above");
        match self.service.store.may_submit(who, &benchmark.quota) {
            Ok(Ok(())) => {}
            Ok(Err(exceeded)) => return Err(Box::new(quota_refusal(&exceeded))),
            Err(error) => return Err(Box::new(failed(&error))),
        }
        self.uploading.hold(who.id).ok_or_else(|| {
            let mut answer = refuse(
                StatusCode::TOO_MANY_REQUESTS,
                "another upload of yours is still being received or checked: wait for its answer",
            );
            answer.headers_mut().insert(hyper::header::RETRY_AFTER, 10.into());
            Box::new(answer)
        })
    }

    /// Takes an upload to `benchmark_id`: read (at most `cap` bytes),
    /// checked as `mlrb agent check` does, then queued or refused, counted
    /// against the quota either way.
    async fn upload(&self, request: Request<Incoming>, (benchmark_id, cap): (String, u64), who: &Submitter) -> Answer {
        let agent = query(&request, "agent").unwrap_or_else(|| "agent".into());
        if let Some(why) = crate::submissions::names::refused("agent", &agent, 40) {
            return refuse(StatusCode::BAD_REQUEST, &why);
        }
        let service = &self.service;
        let deadline = request.extensions().get::<BodyDeadline>().copied();
        let staging = service.layout.staging();
        let received = match upload::receive(request.into_body(), &staging, cap, deadline).await {
            Ok(received) => received,
            Err(upload::Rejected(status, why)) => return refuse(status, &why),
        };
        let benchmark = service.benchmark(&benchmark_id).expect("checked above");
        let refused = match self.verdict(benchmark, &received).await {
            Ok(refused) => refused,
            Err(answer) => return *answer,
        };
        let (sha256, bytes) = (received.sha256.clone(), received.bytes);
        let upload = Upload {
            benchmark: (&benchmark.name, &benchmark.version),
            agent_sha256: &sha256,
            agent_bytes: bytes,
            agent_name: &agent,
            refused: refused.clone(),
        };
        let target = service.layout.agent(&sha256);
        if refused.is_none()
            && let Err(error) = upload::keep(received, &target)
        {
            return failed(&anyhow::anyhow!("keeping the component: {error}"));
        }
        let recorded = service.store.submit(who, &upload, &benchmark.quota);
        let queued = matches!(&recorded, Ok(Ok(s)) if s.state != State::Refused);
        if !queued {
            // A component not taken leaves nothing in the compile cache.
            service.engine.cache().forget(&sha256);
        }
        match recorded {
            Ok(Ok(submission)) if submission.state == State::Refused => {
                let why = submission.reason.clone().unwrap_or_default();
                json(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &serde_json::json!({ "error": format!("refused: {why}"), "submission": submission }),
                )
            }
            Ok(Ok(submission)) => {
                service.queued.notify_one();
                json(StatusCode::CREATED, &submission)
            }
            Ok(Err(exceeded)) => quota_refusal(&exceeded),
            Err(error) => failed(&error),
        }
    }

    /// Why the host refuses a received component (`None`: it runs it), or
    /// the answer when the host itself cannot tell now (busy, or failing),
    /// which is not held against the component.
    async fn verdict(&self, benchmark: &Benchmark, received: &upload::Received) -> Result<Option<String>, Box<Answer>> {
        match super::runner::check_component(&self.service, benchmark, &received.file).await {
            Ok(refusals) => Ok((!refusals.is_empty()).then(|| refusals.join("; "))),
            Err(error) if error.chain().any(|e| e.is::<gate::Busy>()) => {
                let mut answer = refuse(StatusCode::SERVICE_UNAVAILABLE, &format!("{error:#}"));
                answer.headers_mut().insert(hyper::header::RETRY_AFTER, 60.into());
                Err(Box::new(answer))
            }
            Err(error) if error.chain().any(|e| e.is::<gate::HostFault>()) => Err(Box::new(failed(&error))),
            Err(error) => Ok(Some(format!("{error:#}"))),
        }
    }

    fn list(&self, who: &Submitter) -> Answer {
        match self.service.store.submissions(who) {
            Ok(list) => json(StatusCode::OK, &list),
            Err(error) => failed(&error),
        }
    }

    fn status(&self, id: i64, who: &Submitter) -> Answer {
        match self.service.store.submission(id, who) {
            Ok(Some(submission)) => match records::status(&self.service, &submission, who) {
                Ok(status) => json(StatusCode::OK, &status),
                Err(error) => failed(&error),
            },
            Ok(None) => not_yours(id),
            Err(error) => failed(&error),
        }
    }

    fn records(&self, id: i64, who: &Submitter) -> Answer {
        match self.service.store.submission(id, who) {
            Ok(Some(submission)) => match records::archive(&self.service, &submission, who) {
                Ok(Some(tar)) => tar_answer(tar),
                Ok(None) => refuse(
                    StatusCode::CONFLICT,
                    &format!("submission {id} has no records yet ({})", submission.state.name()),
                ),
                Err(error) => failed(&error),
            },
            Ok(None) => not_yours(id),
            Err(error) => failed(&error),
        }
    }

    /// A ranked submission's records for anyone, once its version closed.
    fn public_records(&self, id: &str) -> Answer {
        let service = &self.service;
        let shown = id
            .parse::<i64>()
            .ok()
            .and_then(|id| service.store.any_submission(id).ok().flatten())
            .filter(|s| s.state == State::Ranked && records::closed(service, s));
        let Some(submission) = shown else {
            return refuse(
                StatusCode::NOT_FOUND,
                &format!(
                    "no records of submission {id} are public (yet): a ranked submission's are, once its benchmark version closes"
                ),
            );
        };
        let anyone = Submitter {
            id: 0,
            name: String::new(),
            admin: false,
        };
        match records::archive(service, &submission, &anyone) {
            Ok(Some(tar)) => tar_answer(tar),
            Ok(None) => refuse(StatusCode::NOT_FOUND, "no records yet"),
            Err(error) => failed(&error),
        }
    }

    /// A person's reference run's records for anyone, once its version closed.
    fn reference_records(&self, id: &str) -> Answer {
        let Some(reference) = records::closed_reference(&self.service, id) else {
            return refuse(
                StatusCode::NOT_FOUND,
                &format!(
                    "no records of reference {id} are public (yet): a reference's are, once its benchmark version closes"
                ),
            );
        };
        match records::reference_archive(&self.service, &reference) {
            Ok(Some(tar)) => tar_answer(tar),
            Ok(None) => refuse(StatusCode::NOT_FOUND, "no records yet"),
            Err(error) => failed(&error),
        }
    }

    fn withdraw(&self, id: i64, who: &Submitter) -> Answer {
        match self.service.store.submission(id, who) {
            Ok(Some(_)) => match self
                .service
                .store
                .set_state(id, State::Withdrawn, "by its submitter", &actor(who))
            {
                Ok(submission) => json(StatusCode::OK, &submission),
                Err(error) => refuse(StatusCode::CONFLICT, &format!("{error:#}")),
            },
            Ok(None) => not_yours(id),
            Err(error) => failed(&error),
        }
    }
}

/// A 429 for a quota or cooldown, with when to come back.
fn quota_refusal(exceeded: &Exceeded) -> Answer {
    let mut answer = refuse(StatusCode::TOO_MANY_REQUESTS, &format!("quota: {}", exceeded.why));
    answer
        .headers_mut()
        .insert(hyper::header::RETRY_AFTER, exceeded.retry_after.into());
    answer
}

fn tar_answer(tar: Bytes) -> Answer {
    Response::builder()
        .status(StatusCode::OK)
        .header(hyper::header::CONTENT_TYPE, "application/x-tar")
        .body(Full::new(tar))
        .unwrap_or_default()
}

/// A query parameter's value (percent-decoded).
fn query(request: &Request<Incoming>, name: &str) -> Option<String> {
    let query = request.uri().query()?;
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| crate::view::percent_decode(value))
    })
}

/// Another's submission and a missing one answer alike: ids tell nothing.
fn not_yours(id: i64) -> Answer {
    refuse(StatusCode::NOT_FOUND, &format!("no submission {id} of yours"))
}

/// The service's own failure: logged in full, answered in one line.
fn failed(error: &anyhow::Error) -> Answer {
    tracing::error!(error = %format!("{error:#}"), "submission service");
    refuse(
        StatusCode::INTERNAL_SERVER_ERROR,
        "the service failed: the organisers have the details",
    )
}

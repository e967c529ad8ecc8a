//! `mlrb serve`: a run's queue over HTTP (hyper, JSON) for workers on other
//! nodes. Every request carries the run's bearer token; a refused request
//! gets a 4xx with its reason and changes nothing. An upload is size-capped
//! while it streams, hash-checked against what the worker states, checked
//! as unpacking would take it, and kept with its result when the queue
//! records it; its folder is placed in the run after the answer
//! (`placing`). A stopped worker's episode is kept suspended (`partial`)
//! for the next lease to go on with.

mod group_commit;
mod partial;
mod placing;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::protocol::{
    EPISODE_HEADER, HASH_HEADER, LEASE_HEADER, LeaseAnswer, LeaseRequest, Refusal, ReportAnswer, RunInfo,
    STAGED_HEADER, TokenRequest,
};
use super::upload;
use crate::bench::journal::Journal;
use crate::bench::queue::{Queue, Reported, now_ms};
use crate::bench::result_line::ResultLine;
use group_commit::{Write, Writes, Written};

/// The most a JSON request body may be.
const MAX_REQUEST: usize = 64 << 10;
/// Uploads up to this size stay in memory; larger ones go to a file.
const IN_MEMORY: usize = 16 << 20;

type Answer = Response<Full<Bytes>>;

/// How many requests' disk work (unpacking uploads) and queue reads may
/// run at once (see `blocking`); the queue's writes go to its one writer.
const BLOCKING_SLOTS: usize = 16;

/// A run's queue, served.
pub struct Server {
    dir: PathBuf,
    queue: Queue,
    token: blake3::Hash,
    info: Bytes,
    agents: Vec<PathBuf>,
    lease: Duration,
    max_upload: u64,
    max_leases: u32,
    journal: std::sync::Mutex<Journal>,
    // One report or suspension of an episode at a time is moved into the
    // run and recorded; others go on beside it.
    finishing: Finishing,
    writes: Writes,
    placing: placing::Placing,
    // Requests whose queue and disk work run on the blocking pool at once.
    blocking_slots: tokio::sync::Semaphore,
    arrived: tokio::sync::mpsc::UnboundedSender<ResultLine>,
    last_request: std::sync::atomic::AtomicI64,
    shared: bool,
}

/// What a server is made of.
pub struct ServerParts {
    /// The run directory.
    pub dir: PathBuf,
    /// Its queue.
    pub queue: Queue,
    /// The run's bearer token.
    pub token: String,
    /// What workers are told.
    pub info: RunInfo,
    /// The agents' component files, in the plan's order.
    pub agents: Vec<PathBuf>,
    /// Leases given to an episode before it is given up.
    pub max_leases: u32,
    /// The run's journal.
    pub journal: Journal,
}

impl Server {
    /// A server; each result recorded is also sent to `arrived`.
    pub fn new(parts: ServerParts, arrived: tokio::sync::mpsc::UnboundedSender<ResultLine>) -> Result<Self> {
        std::fs::create_dir_all(parts.dir.join("cluster/staging"))?;
        std::fs::create_dir_all(parts.dir.join("cluster/unplaced"))?;
        Ok(Self {
            token: blake3::hash(parts.token.as_bytes()),
            lease: Duration::from_millis(parts.info.lease_ms),
            max_upload: parts.info.max_upload,
            info: Bytes::from(serde_json::to_vec(&parts.info)?),
            dir: parts.dir,
            queue: parts.queue,
            agents: parts.agents,
            max_leases: parts.max_leases,
            journal: std::sync::Mutex::new(parts.journal),
            finishing: Finishing::default(),
            writes: Writes::new(),
            placing: placing::Placing::default(),
            blocking_slots: tokio::sync::Semaphore::new(BLOCKING_SLOTS),
            arrived,
            last_request: std::sync::atomic::AtomicI64::new(now_ms()),
            shared: parts.info.shared_run_dir.is_some(),
        })
    }

    /// The queue served.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// How long since the last request.
    pub fn quiet_for(&self) -> Duration {
        let last = self.last_request.load(std::sync::atomic::Ordering::Relaxed);
        Duration::from_millis(now_ms().saturating_sub(last).max(0) as u64)
    }

    /// Serves on `listener` until the task is dropped, once the folders of
    /// results recorded before a restart are on their way into place.
    pub async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener) -> Result<()> {
        self.start_writer();
        self.place_unplaced().await?;
        let respond = move |request| {
            let server = self.clone();
            async move { server.respond(request).await }
        };
        let settings = crate::http_server::Settings::queue();
        Ok(crate::http_server::serve(listener, "queue", settings, respond).await?)
    }

    /// Runs `work` on the blocking pool: the queue's SQLite and the journal
    /// block (on disk and on their locks), and must not hold up the threads
    /// that accept and read every worker's connection.
    async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Server) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        // A few at a time: a thousand workers reporting at once would
        // otherwise be a thousand threads unpacking on a few cores.
        let _slot = self.blocking_slots.acquire().await?;
        let server = self.clone();
        tokio::task::spawn_blocking(move || work(&server)).await?
    }

    async fn respond(self: Arc<Self>, request: Request<Incoming>) -> Answer {
        self.last_request.store(now_ms(), std::sync::atomic::Ordering::Relaxed);
        if !self.authorized(&request) {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token: pass this run's token (its cluster/token file)",
            );
        }
        let path = request.uri().path().to_string();
        let answer = match (request.method(), path.as_str()) {
            (&Method::GET, "/v1/run") => Ok(json_bytes(StatusCode::OK, self.info.clone())),
            (&Method::GET, "/v1/status") => {
                self.blocking(|s| s.queue.counts(now_ms()).map(|c| json(StatusCode::OK, &c)))
                    .await
            }
            (&Method::GET, p) if p.starts_with("/v1/agents/") => Ok(self.agent(&p["/v1/agents/".len()..]).await),
            (&Method::POST, "/v1/lease") => match body::<LeaseRequest>(request).await {
                Ok(ask) => self.lease(ask.worker).await,
                Err(refusal) => return refusal,
            },
            (&Method::POST, "/v1/renew") => match body::<TokenRequest>(request).await {
                Ok(ask) => self.renew(ask.token).await,
                Err(refusal) => return refusal,
            },
            (&Method::POST, "/v1/release") => match body::<TokenRequest>(request).await {
                Ok(ask) => self.release(ask.token).await,
                Err(refusal) => return refusal,
            },
            (&Method::POST, "/v1/report") => self.report(request).await,
            (&Method::POST, "/v1/suspend") => self.suspend(request).await,
            (&Method::GET, "/v1/partial") => self.partial(&request).await,
            _ => Ok(refuse(StatusCode::NOT_FOUND, &format!("no such endpoint: {path}"))),
        };
        answer.unwrap_or_else(|error| {
            tracing::error!(error = %format!("{error:#}"), "queue server");
            refuse(StatusCode::INTERNAL_SERVER_ERROR, &format!("{error:#}"))
        })
    }

    fn authorized(&self, request: &Request<Incoming>) -> bool {
        let Some(given) = request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        // blake3's Hash compares in constant time.
        blake3::hash(given.trim().as_bytes()) == self.token
    }

    async fn agent(&self, index: &str) -> Answer {
        let Some(path) = index.parse::<usize>().ok().and_then(|i| self.agents.get(i)) else {
            return refuse(StatusCode::NOT_FOUND, &format!("no agent {index} in this run"));
        };
        match tokio::fs::read(path).await {
            Ok(bytes) => Response::builder()
                .header(hyper::header::CONTENT_TYPE, "application/wasm")
                .body(Full::new(Bytes::from(bytes)))
                .unwrap_or_default(),
            Err(error) => refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("{}: {error}", path.display()),
            ),
        }
    }

    /// The next episode, leased in the next group of writes.
    async fn lease(self: &Arc<Self>, worker: String) -> Result<Answer> {
        let worker: String = worker.chars().take(200).collect();
        match self.write(Write::Lease { worker }).await? {
            Written::Leased { lease, counts } => {
                let partial = match lease.clone() {
                    Some(lease) if self.may_resume(&lease) => {
                        self.blocking(move |s| s.resumed_by(&lease, now_ms())).await?
                    }
                    _ => None,
                };
                Ok(json(StatusCode::OK, &LeaseAnswer { lease, counts, partial }))
            }
            _ => unreachable!("a lease is answered as one"),
        }
    }

    async fn renew(&self, token: String) -> Result<Answer> {
        Ok(match self.write(Write::Renew { token }).await? {
            Written::Renewed(true) => json(StatusCode::OK, &serde_json::json!({ "held": true })),
            _ => refuse(
                StatusCode::CONFLICT,
                "the lease is no longer held: it expired and was given to another worker, or the episode is done",
            ),
        })
    }

    async fn release(&self, token: String) -> Result<Answer> {
        match self.write(Write::Release { token }).await? {
            Written::Released(released) => Ok(json(StatusCode::OK, &serde_json::json!({ "released": released }))),
            _ => unreachable!("a release is answered as one"),
        }
    }

    /// Waits until no other upload of `episode` is being finished; this
    /// one is until the guard is dropped.
    async fn finishing(&self, episode: &str) -> Finished<'_> {
        let finishing = &self.finishing;
        loop {
            let freed = finishing.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if finishing.held().insert(episode.to_string()) {
                return Finished(finishing, episode.to_string());
            }
            freed.await;
        }
    }

    /// A result: answered once it is recorded with its upload kept; the
    /// upload's folder is placed after (see `placing`). One on a shared
    /// filesystem names its folder, moved into place before it is recorded.
    async fn report(self: &Arc<Self>, request: Request<Incoming>) -> Result<Answer> {
        let upload = match self.checked_upload(request).await? {
            Ok(upload) => upload,
            Err(refusal) => return Ok(refusal),
        };
        let staging = self.staging()?;
        let (episode, token) = (upload.episode.clone(), upload.token.clone());
        let _one = self.finishing(&episode).await;
        let kept = self.blocking(move |s| match upload.staged.is_some() {
            true => Ok(s.place(upload, &staging.0)?.map(|result| (result, None))),
            false => s.keep(upload),
        });
        let (result, unplaced) = match kept.await? {
            Ok(kept) => kept,
            Err(refusal) => return Ok(refusal),
        };
        let record = Write::Record {
            episode: episode.clone(),
            token,
            result,
            unplaced: unplaced.clone(),
        };
        let written = self.write(record).await;
        Ok(match written {
            Ok(Written::Recorded(reported)) => {
                match (reported, unplaced) {
                    (Reported::Recorded, Some(name)) => self.place_later(episode.clone(), name),
                    (_, unplaced) => self.drop_kept(unplaced).await,
                }
                self.drop_partial(&episode);
                json(StatusCode::OK, &ReportAnswer { reported })
            }
            Ok(Written::Refused(why)) => {
                self.drop_kept(unplaced).await;
                refuse(
                    StatusCode::CONFLICT,
                    &format!("{why}; the first result stands and this one was not kept"),
                )
            }
            Ok(_) => unreachable!("a result is answered as recorded or refused"),
            Err(error) => {
                self.drop_kept(unplaced).await;
                return Err(error);
            }
        })
    }

    /// A new folder beneath `cluster/staging/` for an upload to unpack in,
    /// removed with whatever is left in it once dropped.
    fn staging(&self) -> Result<Staging> {
        Ok(Staging(self.dir.join("cluster/staging").join(super::new_secret()?)))
    }

    /// An upload's headers, its lease (given for its episode) and its body,
    /// read under the cap and checked against the hash the worker stated.
    async fn checked_upload(&self, request: Request<Incoming>) -> Result<Result<Upload, Answer>> {
        let header = |name: &str| header(&request, name);
        let staged = header(STAGED_HEADER);
        let (Some(episode), Some(token), Some(claimed)) =
            (header(EPISODE_HEADER), header(LEASE_HEADER), header(HASH_HEADER))
        else {
            return Ok(Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!("an upload needs the headers {EPISODE_HEADER}, {LEASE_HEADER} and {HASH_HEADER}"),
            )));
        };
        if let Some(refusal) = self.lease_refusal(&episode, &token)? {
            return Ok(Err(refusal));
        }
        let spool = match self.spool(request.into_body()).await? {
            Ok(spool) => spool,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let actual = spool.hasher.finalize().to_hex().to_string();
        if !claimed.eq_ignore_ascii_case(&actual) {
            return Ok(Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the upload's blake3 is {actual}, not the {claimed} stated: it was damaged on the way; send it again"
                ),
            )));
        }
        Ok(Ok(Upload {
            episode,
            token,
            spool,
            staged,
            hash: actual,
        }))
    }

    /// Why `token` may not act for `episode` (no such episode, or a token
    /// never given for it); None when it may.
    fn lease_refusal(&self, episode: &str, token: &str) -> Result<Option<Answer>> {
        Ok(match self.queue.lease_of(episode, token)? {
            None => Some(refuse(
                StatusCode::NOT_FOUND,
                &format!("{episode}: no such episode in this run"),
            )),
            Some((false, _)) => Some(refuse(
                StatusCode::FORBIDDEN,
                &format!("{episode}: this lease token was never given for this episode"),
            )),
            Some((true, _)) => None,
        })
    }

    /// Unpacks a checked upload and moves the folder it names on the
    /// shared filesystem into the run (unless its episode is done); its
    /// result, for the queue to record, or why not.
    fn place(&self, upload: Upload, staging: &Path) -> Result<Result<Box<ResultLine>, Answer>> {
        let Upload {
            episode,
            token,
            spool,
            staged,
            ..
        } = upload;
        let (episode, token) = (episode.as_str(), token.as_str());
        let unpacked = match spool.unpack(staging) {
            Ok(unpacked) => unpacked,
            Err(error) => return Ok(Err(refuse(StatusCode::BAD_REQUEST, &format!("{error:#}")))),
        };
        let folder = match (staged, unpacked.episode) {
            (Some(_), Some(_)) => {
                return Ok(Err(refuse(
                    StatusCode::BAD_REQUEST,
                    &format!("an upload naming {STAGED_HEADER} holds only result.json"),
                )));
            }
            (Some(staged), None) => match self.staged_folder(&staged, episode) {
                Ok(folder) => Some(folder),
                Err(why) => return Ok(Err(refuse(StatusCode::BAD_REQUEST, &why))),
            },
            (None, folder) => folder,
        };
        let result = match episode_result(unpacked.result, episode) {
            Ok(result) => result,
            Err(why) => return Ok(Err(refuse(StatusCode::BAD_REQUEST, &why))),
        };
        if let Some((_, true)) = self.queue.lease_of(episode, token)? {
            // Done: recorded as a duplicate, or refused; nothing is moved.
            return Ok(Ok(Box::new(result)));
        }
        // Into place before it is recorded: a crash in between leaves an
        // episode still to run, never a result without its records.
        let target = self.dir.join(episode);
        if target.exists() {
            crate::record::walk::remove_tree(&target).with_context(|| format!("replacing {}", target.display()))?;
        }
        if let Some(folder) = &folder {
            std::fs::create_dir_all(target.parent().unwrap_or(&self.dir))?;
            std::fs::rename(folder, &target).with_context(|| format!("moving the upload to {}", target.display()))?;
        }
        Ok(Ok(Box::new(result)))
    }

    /// The folder a worker wrote on the shared filesystem: beneath the
    /// run's `cluster/work/`, named for the episode, with no link on the way.
    fn staged_folder(&self, staged: &str, episode: &str) -> Result<PathBuf, String> {
        let bad = |why: &str| format!("{STAGED_HEADER} `{staged}`: {why}");
        if !self.shared {
            return Err(bad(
                "this run does not use a shared filesystem; upload the episode's folder",
            ));
        }
        let rel = Path::new(staged);
        let plain = rel.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || !rel.starts_with("cluster/work") || !rel.ends_with(episode) {
            return Err(bad("not this episode's folder under the run's cluster/work/"));
        }
        let mut at = self.dir.clone();
        for component in rel.components() {
            at.push(component);
            match std::fs::symlink_metadata(&at) {
                Ok(meta) if meta.file_type().is_symlink() => return Err(bad("a symbolic link on the way")),
                Ok(_) => {}
                Err(error) => return Err(bad(&format!("{}: {error}", at.display()))),
            }
        }
        if !at.is_dir() {
            return Err(bad("not a folder"));
        }
        Ok(at)
    }

    /// Reads an upload's body, hashing it and stopping at the cap.
    async fn spool(&self, mut body: Incoming) -> Result<Result<Spool, Answer>> {
        let mut spool = Spool::default();
        while let Some(frame) = body.frame().await {
            let frame = match frame {
                Ok(frame) => frame,
                Err(error) => {
                    return Ok(Err(refuse(
                        StatusCode::BAD_REQUEST,
                        &format!("reading the upload: {error}"),
                    )));
                }
            };
            let Ok(data) = frame.into_data() else { continue };
            if spool.size + data.len() as u64 > self.max_upload {
                return Ok(Err(refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "the upload is over the run's cap of {} MiB (`max_upload_mb` in the plan's [cluster])",
                        self.max_upload >> 20
                    ),
                )));
            }
            spool.push(&data, &self.dir)?;
        }
        Ok(Ok(spool))
    }
}

/// A staging folder, removed when dropped (the upload in it kept, moved
/// out, or refused).
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        if self.0.exists() {
            let _ = crate::record::walk::remove_tree(&self.0);
        }
    }
}

/// Episodes whose uploads are being finished (moved into the run and
/// recorded, or kept suspended): one at a time for an episode, any number
/// of episodes at once.
#[derive(Default)]
struct Finishing {
    held: std::sync::Mutex<std::collections::HashSet<String>>,
    freed: tokio::sync::Notify,
}

impl Finishing {
    fn held(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An episode being finished, until dropped.
struct Finished<'a>(&'a Finishing, String);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.held().remove(&self.1);
        self.0.freed.notify_waiters();
    }
}

/// The text of a request's header `name`, if it has one.
fn header(request: &Request<Incoming>, name: &str) -> Option<String> {
    request
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// An upload whose lease and hash were checked.
struct Upload {
    episode: String,
    token: String,
    spool: Spool,
    staged: Option<String>,
    /// Its blake3, as hex.
    hash: String,
}

/// An upload's body, as read so far: in memory, or in a file once it is
/// large; its size and hash.
#[derive(Default)]
struct Spool {
    memory: Vec<u8>,
    file: Option<tempfile::NamedTempFile>,
    size: u64,
    hasher: blake3::Hasher,
}

impl Spool {
    fn push(&mut self, data: &[u8], dir: &Path) -> Result<()> {
        use std::io::Write;
        self.size += data.len() as u64;
        self.hasher.update(data);
        if self.file.is_none() && self.memory.len() + data.len() > IN_MEMORY {
            let mut file = tempfile::NamedTempFile::new_in(dir.join("cluster"))?;
            file.write_all(&self.memory)?;
            self.memory = Vec::new();
            self.file = Some(file);
        }
        match &mut self.file {
            Some(file) => file.write_all(data)?,
            None => self.memory.extend_from_slice(data),
        }
        Ok(())
    }

    fn unpack(self, into: &Path) -> Result<upload::Unpacked> {
        match self.file {
            Some(file) => upload::unpack(std::io::BufReader::new(file.reopen()?), into),
            None => upload::unpack(self.memory.as_slice(), into),
        }
    }

    /// What unpacking would give, nothing written.
    fn check(&self) -> Result<upload::Checked> {
        match &self.file {
            Some(file) => upload::check(std::io::BufReader::new(file.reopen()?)),
            None => upload::check(self.memory.as_slice()),
        }
    }

    /// Keeps the upload as the new file `to` (written through to the
    /// kernel: it outlives this process; as the queue, not a power cut).
    fn keep(self, to: &Path) -> Result<()> {
        use std::io::Write;
        match self.file {
            Some(file) => {
                file.persist_noclobber(to)?;
            }
            None => std::fs::File::create_new(to)?.write_all(&self.memory)?,
        }
        Ok(())
    }
}

/// A JSON request body, or the 4xx that says why it is not one.
async fn body<T: DeserializeOwned>(request: Request<Incoming>) -> Result<T, Answer> {
    let limited = http_body_util::Limited::new(request.into_body(), MAX_REQUEST);
    let bytes = match limited.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return Err(refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("a request body is at most {MAX_REQUEST} bytes"),
            ));
        }
    };
    serde_json::from_slice(&bytes).map_err(|error| {
        refuse(
            StatusCode::BAD_REQUEST,
            &format!("the request body is not what this endpoint takes: {error}"),
        )
    })
}

fn json(status: StatusCode, value: &impl Serialize) -> Answer {
    json_bytes(status, Bytes::from(serde_json::to_vec(value).unwrap_or_default()))
}

fn json_bytes(status: StatusCode, bytes: Bytes) -> Answer {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(bytes))
        .unwrap_or_default()
}

/// An upload's result, or why it is refused: it has none, or not `episode`'s.
fn episode_result(result: Option<ResultLine>, episode: &str) -> Result<ResultLine, String> {
    let Some(result) = result else {
        return Err("the upload has no result.json".into());
    };
    if result.id != episode || result.dir != episode {
        return Err(format!(
            "the upload's result is for {} (in {}), not {episode}",
            result.id, result.dir
        ));
    }
    Ok(result)
}

fn refuse(status: StatusCode, why: &str) -> Answer {
    json(status, &Refusal { error: why.to_string() })
}

//! `mlrb worker`: runs a served run's episodes, one lease at a time per
//! slot, as many slots as the node's CPUs and GPUs allow; renews each lease
//! by heartbeat, uploads each result, and stops leasing when the queue is
//! empty or its time is nearly up. Told to stop (SIGTERM, what Slurm sends
//! before a kill or on preemption), it ends its episodes at their current
//! step, uploads their records as suspended and gives their leases back, so
//! another worker takes them at once and goes on after their last step.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::protocol::{
    EPISODE_HEADER, HASH_HEADER, LEASE_HEADER, LeaseAnswer, LeaseRequest, Refusal, RunInfo, STAGED_HEADER, TokenRequest,
};
use super::upload;
use crate::bench::queue::Lease;
use crate::bench::result_line::ResultLine;
use crate::bench::{AgentEntry, Matrix};

/// How a worker is started.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The server's URL (`http://host:port`).
    pub server: String,
    /// The run's bearer token.
    pub token: String,
    /// Episodes at once [default: as many as the CPUs and GPUs allow].
    pub parallel: Option<usize>,
    /// This worker's own time limit (its job's): no lease is taken that
    /// could not finish before it.
    pub time_limit: Option<Duration>,
    /// The name it leases under.
    pub name: String,
    /// Where episodes are written before they are uploaded.
    pub work_dir: PathBuf,
    /// How long the server may be unreachable before the worker gives up.
    pub grace: Duration,
    /// The GPUs this node gives the worker (its job's), over the plan's.
    pub gpus: Vec<String>,
}

/// What a worker did.
#[derive(Debug, Default, Serialize)]
pub struct WorkerOutcome {
    /// Episodes whose results the server took (recorded or duplicate).
    pub reported: u32,
    /// Results the server already had another result for.
    pub superseded: u32,
    /// Leases given back unfinished (stopped, or lost to expiry).
    pub released: u32,
    /// Of those, episodes whose records went up as suspended, to be resumed.
    pub suspended: u32,
    /// Episodes this worker went on with from another's suspended records.
    pub resumed: u32,
    /// Bytes of results and episode folders uploaded.
    pub uploaded_bytes: u64,
    /// Why it stopped leasing.
    pub stopped: String,
}

/// The server, as a worker talks to it.
struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    grace: Duration,
}

/// An answer the server refused, with its status and reason.
struct Refused(reqwest::StatusCode, String);

impl Client {
    /// Sends a request, again while the server cannot be reached (it may
    /// be restarting) until the grace period is spent.
    async fn send(&self, make: impl Fn() -> reqwest::RequestBuilder) -> Result<Result<bytes::Bytes, Refused>> {
        let first_failure = Instant::now();
        loop {
            match make().bearer_auth(&self.token).send().await {
                Ok(answer) if answer.status().is_success() => return Ok(Ok(answer.bytes().await?)),
                Ok(answer) if answer.status().is_client_error() => {
                    let status = answer.status();
                    let text = answer.text().await.unwrap_or_default();
                    let why = serde_json::from_str::<Refusal>(&text).map_or(text, |r| r.error);
                    return Ok(Err(Refused(status, why)));
                }
                Ok(answer) => tracing::warn!(status = %answer.status(), "the queue server failed; trying again"),
                Err(error) => tracing::warn!(error = %error, "the queue server is unreachable; trying again"),
            }
            if first_failure.elapsed() > self.grace {
                bail!("the queue server at {} did not answer for {:?}", self.base, self.grace);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let url = format!("{}{path}", self.base);
        match self.send(|| self.http.get(&url)).await? {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).with_context(|| format!("{url}: not the answer expected"))?),
            Err(Refused(status, why)) => bail!("{url}: {status}: {why}"),
        }
    }

    async fn post<T: DeserializeOwned>(&self, path: &str, body: &impl Serialize) -> Result<Result<T, Refused>> {
        let url = format!("{}{path}", self.base);
        Ok(match self.send(|| self.http.post(&url).json(body)).await? {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).with_context(|| format!("{url}: not the answer expected"))?),
            Err(refused) => Err(refused),
        })
    }
}

/// Runs episodes of the server's run until the queue is empty, the time
/// limit nears or `terminate` resolves.
pub async fn run(
    options: WorkerOptions,
    cache_dir: &Path,
    terminate: impl std::future::Future<Output = ()>,
) -> Result<WorkerOutcome> {
    let started = Instant::now();
    let client = Arc::new(Client {
        http: reqwest::Client::builder().timeout(Duration::from_secs(600)).build()?,
        base: options.server.trim_end_matches('/').to_string(),
        token: options.token.clone(),
        grace: options.grace,
    });
    let info: RunInfo = client.get("/v1/run").await?;
    let mut plan = info.plan.clone();
    plan.agents = fetch_agents(&client, &info, cache_dir).await?;
    if !options.gpus.is_empty() {
        plan.host.gpus = options.gpus.clone();
    }
    let work = match &info.shared_run_dir {
        Some(run) => run.join("cluster/work"),
        None => options.work_dir.join(crate::paths::safe_component(&info.run)),
    };
    let dir = work.join(format!(
        "{}-{}",
        crate::paths::safe_component(&options.name),
        super::new_secret()?
    ));
    let matrix = Arc::new(Matrix::open(plan, &dir, cache_dir).await?);
    let slots = options.parallel.unwrap_or(slots_for(&matrix)?).max(1);
    let deadline = options.time_limit.map(|limit| started + limit);
    let longest = Duration::from_secs(matrix.longest_episode_seconds() + 60);
    tracing::info!(slots, run = %info.run, "worker started");
    let stop = CancellationToken::new();
    let counters = Arc::new(Counters::default());
    let slot = |n: usize| {
        let ctx = Slot {
            client: client.clone(),
            matrix: matrix.clone(),
            info: info.clone(),
            worker: format!("{}#{n}", options.name),
            stop: stop.clone(),
            counters: counters.clone(),
        };
        async move { ctx.run(deadline, longest).await }
    };
    let work = futures_util::future::join_all((0..slots).map(slot));
    tokio::pin!(work);
    tokio::pin!(terminate);
    let ends = tokio::select! {
        ends = &mut work => ends,
        _ = &mut terminate => {
            tracing::warn!("told to stop: ending the running episodes and giving their leases back");
            stop.cancel();
            work.await
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let mut stopped = if stop.is_cancelled() {
        "told to stop".to_string()
    } else {
        String::new()
    };
    for end in ends {
        match end {
            Ok(why) if stopped.is_empty() => stopped = why,
            Ok(_) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(WorkerOutcome {
        reported: counters.reported.load(Ordering::Relaxed),
        superseded: counters.superseded.load(Ordering::Relaxed),
        released: counters.released.load(Ordering::Relaxed),
        suspended: counters.suspended.load(Ordering::Relaxed),
        resumed: counters.resumed.load(Ordering::Relaxed),
        uploaded_bytes: counters.uploaded_bytes.load(Ordering::Relaxed),
        stopped,
    })
}

/// Episodes at once on this node: its CPUs over the largest episode's,
/// and its GPUs over the largest episode's when the tasks take GPUs.
fn slots_for(matrix: &Matrix) -> Result<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (episode_cpus, episode_gpus) = matrix.largest_episode();
    let mut slots = ((cpus as f64) / episode_cpus.ceil()).floor().max(1.0) as usize;
    if episode_gpus > 0 {
        let gpus = matrix.gpu_count();
        if gpus < episode_gpus as usize {
            bail!("the plan's tasks take {episode_gpus} GPUs an episode and this node offers {gpus}: pass --gpus");
        }
        slots = slots.min(gpus / episode_gpus as usize);
    }
    Ok(slots)
}

/// The agents' components, fetched once into the cache and hash-checked.
async fn fetch_agents(client: &Client, info: &RunInfo, cache_dir: &Path) -> Result<Vec<AgentEntry>> {
    let folder = cache_dir.join("cluster-agents");
    std::fs::create_dir_all(&folder)?;
    let mut agents = Vec::new();
    for (i, agent) in info.agents.iter().enumerate() {
        let path = folder.join(format!("{}.wasm", agent.blake3));
        if !path.exists() {
            let url = format!("{}/v1/agents/{i}", client.base);
            let bytes = match client.send(|| client.http.get(&url)).await? {
                Ok(bytes) => bytes,
                Err(Refused(status, why)) => bail!("{url}: {status}: {why}"),
            };
            let hash = blake3::hash(&bytes).to_hex().to_string();
            if hash != agent.blake3 {
                bail!(
                    "{url}: the agent {} arrived with blake3 {hash}, not {}",
                    agent.name,
                    agent.blake3
                );
            }
            let tmp = folder.join(format!(".{}.{}", agent.blake3, std::process::id()));
            std::fs::write(&tmp, &bytes)?;
            std::fs::rename(&tmp, &path)?;
        }
        agents.push(AgentEntry::Named {
            path,
            name: agent.name.clone(),
        });
    }
    Ok(agents)
}

#[derive(Default)]
struct Counters {
    reported: AtomicU32,
    superseded: AtomicU32,
    released: AtomicU32,
    suspended: AtomicU32,
    resumed: AtomicU32,
    uploaded_bytes: std::sync::atomic::AtomicU64,
}

/// One slot of a worker: leases, runs and reports, one episode at a time.
struct Slot {
    client: Arc<Client>,
    matrix: Arc<Matrix>,
    info: RunInfo,
    worker: String,
    stop: CancellationToken,
    counters: Arc<Counters>,
}

impl Slot {
    /// Leases until nothing waits, the deadline nears or the worker stops;
    /// returns why it stopped.
    async fn run(&self, deadline: Option<Instant>, longest: Duration) -> Result<String> {
        loop {
            if self.stop.is_cancelled() {
                return Ok("told to stop".into());
            }
            if deadline.is_some_and(|d| Instant::now() + longest > d) {
                return Ok("too little time left for another episode".into());
            }
            let ask = LeaseRequest {
                worker: self.worker.clone(),
            };
            let answer: LeaseAnswer = match self.client.post("/v1/lease", &ask).await? {
                Ok(answer) => answer,
                Err(Refused(status, why)) => bail!("leasing: {status}: {why}"),
            };
            let Some(lease) = answer.lease else {
                return Ok("nothing left to lease".into());
            };
            self.episode(lease, answer.partial).await?;
        }
    }

    /// Runs a leased episode with a heartbeat (going on from its suspended
    /// records when it has some), then reports, suspends or releases it.
    async fn episode(&self, lease: Lease, partial: Option<u32>) -> Result<()> {
        let local = self.matrix.episode_dir(&lease.episode);
        if partial.is_some() {
            match self.fetch_partial(&lease, &local).await {
                Ok(()) => {
                    self.counters.resumed.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => {
                    tracing::warn!(episode = %lease.episode, error = %format!("{error:#}"), "fetching the suspended records; starting the episode again")
                }
            }
        }
        let episode_stop = self.stop.child_token();
        let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let heartbeat = tokio::spawn(heartbeat(
            self.client.clone(),
            lease.token.clone(),
            Duration::from_millis(self.info.lease_ms / 3),
            episode_stop.clone(),
            lost.clone(),
        ));
        let outcome = self.matrix.run(&lease.episode, &episode_stop).await;
        heartbeat.abort();
        // Stopped while it ran: Slurm signals every process of the job, the
        // episode's scripts too, so it may have ended on their deaths.
        let outcome = match outcome {
            Ok(Some(_)) if episode_stop.is_cancelled() => Ok(None),
            other => other,
        };
        match outcome {
            Ok(Some(result)) => self.report(&lease, result, &local).await?,
            Ok(None) if lost.load(Ordering::Relaxed) => {
                tracing::warn!(episode = %lease.episode, "the lease was lost; the episode was abandoned");
                self.counters.released.fetch_add(1, Ordering::Relaxed);
            }
            other => {
                if let Err(error) = other {
                    tracing::error!(episode = %lease.episode, error = %format!("{error:#}"), "running the episode");
                }
                self.give_back(&lease, &local).await?;
            }
        }
        if local.exists() {
            let _ = crate::record::walk::remove_tree(&local);
        }
        Ok(())
    }

    /// Gives an unfinished lease back: its records go up as suspended when
    /// the worker is stopping and they can be gone on from, else it is
    /// released for the next worker to start again.
    async fn give_back(&self, lease: &Lease, local: &Path) -> Result<()> {
        if self.stop.is_cancelled() && crate::episode::resume::resumable_after(local).is_some() {
            match self.suspend(lease, local).await {
                Ok(()) => {
                    self.counters.suspended.fetch_add(1, Ordering::Relaxed);
                    self.counters.released.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(error) => {
                    tracing::warn!(episode = %lease.episode, error = %format!("{error:#}"), "suspending the episode; giving its lease back")
                }
            }
        }
        let release = TokenRequest {
            token: lease.token.clone(),
        };
        let _ = self.client.post::<serde_json::Value>("/v1/release", &release).await?;
        self.counters.released.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Uploads a stopped episode's records as suspended (the server gives
    /// its lease back once they are kept).
    async fn suspend(&self, lease: &Lease, local: &Path) -> Result<()> {
        let (body, hash) = packed(None, Some(local.to_path_buf())).await?;
        let url = format!("{}/v1/suspend", self.client.base);
        let answer = self
            .client
            .send(|| {
                self.client
                    .http
                    .post(&url)
                    .header(EPISODE_HEADER, &lease.episode)
                    .header(LEASE_HEADER, &lease.token)
                    .header(HASH_HEADER, &hash)
                    .body(body.clone())
            })
            .await?;
        match answer {
            Ok(_) => Ok(()),
            Err(Refused(status, why)) => bail!("{url}: {status}: {why}"),
        }
    }

    /// Fetches the suspended records of a leased episode into `local`.
    async fn fetch_partial(&self, lease: &Lease, local: &Path) -> Result<()> {
        let url = format!("{}/v1/partial", self.client.base);
        let body = match self
            .client
            .send(|| {
                self.client
                    .http
                    .get(&url)
                    .header(EPISODE_HEADER, &lease.episode)
                    .header(LEASE_HEADER, &lease.token)
            })
            .await?
        {
            Ok(body) => body,
            Err(Refused(status, why)) => bail!("{url}: {status}: {why}"),
        };
        let staging = local.with_extension(format!("partial-{}", super::new_secret()?));
        std::fs::create_dir_all(local.parent().context("an episode folder has a parent")?)?;
        let local = local.to_path_buf();
        tokio::task::spawn_blocking(move || -> Result<()> {
            let unpacked = upload::unpack(body.as_ref(), &staging);
            let moved = unpacked.and_then(|u| {
                let folder = u.episode.context("the suspended records hold no folder")?;
                if local.exists() {
                    crate::record::walk::remove_tree(&local)?;
                }
                Ok(std::fs::rename(&folder, &local)?)
            });
            let _ = crate::record::walk::remove_tree(&staging);
            moved
        })
        .await?
    }

    /// Uploads a result; a refused upload keeps the episode's folder.
    async fn report(&self, lease: &Lease, result: ResultLine, local: &Path) -> Result<()> {
        // On a shared filesystem the folder is already in the run: only
        // the result goes up, with where the folder is.
        let staged = self
            .info
            .shared_run_dir
            .as_ref()
            .and_then(|run| local.strip_prefix(run).ok())
            .map(|rel| rel.display().to_string());
        let folder = staged.is_none().then(|| local.to_path_buf());
        let (body, hash) = packed(Some(result), folder).await?;
        self.counters
            .uploaded_bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        let url = format!("{}/v1/report", self.client.base);
        let answer = self
            .client
            .send(|| {
                let request = self
                    .client
                    .http
                    .post(&url)
                    .header(EPISODE_HEADER, &lease.episode)
                    .header(LEASE_HEADER, &lease.token)
                    .header(HASH_HEADER, &hash);
                let request = match &staged {
                    Some(staged) => request.header(STAGED_HEADER, staged),
                    None => request,
                };
                request.body(body.clone())
            })
            .await?;
        match answer {
            Ok(_) => {
                self.counters.reported.fetch_add(1, Ordering::Relaxed);
            }
            Err(Refused(reqwest::StatusCode::CONFLICT, why)) => {
                tracing::info!(episode = %lease.episode, %why, "another worker's result stands");
                self.counters.superseded.fetch_add(1, Ordering::Relaxed);
            }
            Err(Refused(status, why)) => {
                let kept = local.with_extension("refused");
                let _ = std::fs::rename(local, &kept);
                bail!(
                    "{}: the server refused the result ({status}: {why}); the episode is kept in {}",
                    lease.episode,
                    kept.display()
                );
            }
        }
        Ok(())
    }
}

/// The archive of a result and/or an episode's folder, packed off the
/// async threads, with its blake3 (hex) for the server to check.
async fn packed(result: Option<ResultLine>, folder: Option<PathBuf>) -> Result<(bytes::Bytes, String)> {
    let body = tokio::task::spawn_blocking(move || {
        let mut body = Vec::new();
        upload::pack(result.as_ref(), folder.as_deref(), &mut body).map(|()| body)
    })
    .await??;
    let hash = blake3::hash(&body).to_hex().to_string();
    Ok((bytes::Bytes::from(body), hash))
}

/// Renews a lease every `every`; when the server says it is no longer
/// held, stops the episode (another worker has it, or it is done).
async fn heartbeat(
    client: Arc<Client>,
    token: String,
    every: Duration,
    episode: CancellationToken,
    lost: Arc<std::sync::atomic::AtomicBool>,
) {
    let ask = TokenRequest { token };
    loop {
        tokio::time::sleep(every.max(Duration::from_millis(200))).await;
        match client.post::<serde_json::Value>("/v1/renew", &ask).await {
            Ok(Ok(_)) => {}
            Ok(Err(Refused(status, why))) => {
                tracing::warn!(%status, %why, "lease lost");
                lost.store(true, Ordering::Relaxed);
                episode.cancel();
                return;
            }
            Err(error) => tracing::warn!(error = %format!("{error:#}"), "renewing the lease"),
        }
    }
}

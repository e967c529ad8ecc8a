//! A bench on a cluster: the run's episodes become a lease queue in its
//! directory (`bench::queue`), served over HTTP (`serve`) to workers
//! (`worker`) that Slurm (`slurm`), Kubernetes (`k8s`) or a user starts.
//! The cluster's own scheduler places and restarts them; mlrb only hands
//! out episodes and takes results back. The run's journal, results.jsonl,
//! summary.json and report.html come out as for a local bench.

pub mod k8s;
pub mod protocol;
pub mod serve;
pub mod slurm;
pub mod upload;
pub mod worker;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::bench::journal::{Entry, Journal};
use crate::bench::placement::{ClusterSetup, On};
use crate::bench::progress::Progress;
use crate::bench::queue::{Queue, now_ms};
use crate::bench::result_line::ResultLine;
use crate::bench::{self, EpisodeSpec, Outcome, Plan};
use protocol::{AgentFile, RunInfo};
use serve::{Server, ServerParts};

/// A fresh random secret (a run's token, a staging folder's name), as hex.
pub fn new_secret() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| anyhow::anyhow!("drawing a secret: {e}"))?;
    Ok(hex::encode(bytes))
}

/// The files of a cluster run, under `<run>/cluster/`.
struct Files {
    dir: PathBuf,
}

impl Files {
    fn cluster(&self) -> PathBuf {
        self.dir.join("cluster")
    }
    fn token(&self) -> PathBuf {
        self.cluster().join("token")
    }
    fn queue(&self) -> PathBuf {
        self.cluster().join("queue.sqlite")
    }
    fn server(&self) -> PathBuf {
        self.cluster().join("server.json")
    }
    fn jobs(&self) -> PathBuf {
        self.cluster().join("slurm.json")
    }
}

/// Where the server listened last, so a resumed one listens there again
/// and the workers still running find it.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Served {
    address: Option<SocketAddr>,
    url: String,
}

/// The Slurm jobs submitted for a run.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Jobs {
    jobs: Vec<String>,
}

/// Whether a run directory holds a bench that runs on a cluster.
pub fn is_cluster_run(dir: &Path) -> bool {
    Files { dir: dir.to_path_buf() }.queue().exists()
}

/// How the bench is watched.
pub struct Watch {
    /// No progress display.
    pub quiet: bool,
    /// Set aside invalidated episodes and run them again (a local bench).
    pub rerun_stale: bool,
}

/// Starts or resumes a bench where it runs: on this host, or on a cluster
/// (the plan's placement; a resumed bench where it started).
pub async fn bench_anywhere(
    plan: Option<Plan>,
    dir: &Path,
    watch: Watch,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Outcome> {
    let on = match &plan {
        Some(plan) => plan.placement(),
        None if is_cluster_run(dir) => crate::bench::placement::On::Server,
        None => crate::bench::placement::On::Local,
    };
    match on {
        crate::bench::placement::On::Local => {
            let cache = crate::paths::cache_dir();
            crate::bench::run(plan, dir, &cache, watch.quiet, watch.rerun_stale, interrupt).await
        }
        _ => bench(plan, dir, watch, interrupt).await,
    }
}

/// Starts a cluster bench in `dir` from `plan`, or resumes the one there;
/// serves its queue, starts workers where the plan says, and waits until
/// every episode has a result or `interrupt` resolves (the workers then go
/// on, and `--resume` serves them again).
pub async fn bench(
    plan: Option<Plan>,
    dir: &Path,
    watch: Watch,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Outcome> {
    let files = Files { dir: dir.to_path_buf() };
    let fresh = plan.is_some();
    let plan = match plan {
        Some(plan) => {
            plan.check()?;
            plan
        }
        None => Plan::saved(dir)?,
    };
    let episodes = bench::plan_episodes(&plan)?;
    if fresh {
        create(&plan, &episodes, &files)?;
    }
    let setup = plan.cluster.clone().unwrap_or_default();
    let (server, mut results_rx, total) = open_server(&plan, &episodes, &files, &setup)?;
    let (listener, url) = listen(&files, &setup).await?;
    let serving = tokio::spawn(server.clone().serve(listener));
    let mut starter = Starter::new(&plan, &files, &url)?;
    let already = server.queue().counts(now_ms())?.done;
    let progress = Progress::new(total, already, watch.quiet);
    progress.note(&format!(
        "serving {} at {url} (token in {})",
        dir.display(),
        files.token().display()
    ));
    tokio::pin!(interrupt);
    let mut interrupted = false;
    let mut ran = 0;
    // The queue is counted twice a second, not at every result.
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            Some(result) = results_rx.recv() => {
                ran += 1;
                progress.arrived(&result.id, &describe(&result));
                if already + (ran as u64) < total {
                    continue;
                }
            }
            _ = &mut interrupt => {
                interrupted = true;
                progress.note(&format!("interrupted: the workers go on; `mlrb bench --resume {}` serves them again", dir.display()));
                break;
            }
            _ = tick.tick() => {}
        }
        let counts = server.queue().counts(now_ms())?;
        if counts.done >= total {
            break;
        }
        starter.tend(&counts, &progress)?;
    }
    progress.finish();
    if !interrupted {
        starter.cancel_leftovers();
        linger(&server, &setup).await;
    }
    serving.abort();
    // Results are answered before their folders are in place.
    let unplaced = server.placed().await?;
    if unplaced > 0 {
        tracing::warn!(
            count = unplaced,
            "results whose folders could not be placed (see the errors above): `mlrb bench --resume` tries again"
        );
    }
    finish(dir, server.queue(), interrupted, ran)
}

/// Serves a drained queue a little longer, until no worker has asked for
/// a while: workers asking for more hear "nothing left", stopped ones give
/// their leases back, a duplicate run's heartbeat hears its episode is done.
async fn linger(server: &Server, setup: &ClusterSetup) {
    let most = Duration::from_millis(setup.lease_seconds.max(1) * 1000 / 3 + 2000).min(Duration::from_secs(30));
    let started = std::time::Instant::now();
    while started.elapsed() < most && server.quiet_for() < Duration::from_millis(1500) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The run's queue (its plan's episodes enqueued; again on a resume, which
/// adds nothing) behind a server; the results it records, and how many
/// episodes there are.
fn open_server(
    plan: &Plan,
    episodes: &[(String, EpisodeSpec)],
    files: &Files,
    setup: &ClusterSetup,
) -> Result<(Arc<Server>, tokio::sync::mpsc::UnboundedReceiver<ResultLine>, u64)> {
    let queue = Queue::open(&files.queue())?;
    let specs: Vec<(&str, serde_json::Value)> = episodes
        .iter()
        .map(|(id, spec)| Ok((id.as_str(), serde_json::to_value(spec)?)))
        .collect::<Result<_>>()?;
    queue.enqueue(specs.iter().map(|(id, spec)| (*id, spec)))?;
    let (arrived, results) = tokio::sync::mpsc::unbounded_channel();
    let parts = ServerParts {
        dir: files.dir.clone(),
        queue,
        token: read_token(&files.token())?,
        info: run_info(plan, &files.dir, setup)?,
        agents: plan.agents.iter().map(|a| a.path().to_path_buf()).collect(),
        max_leases: setup.max_leases,
        journal: Journal::append_to(&files.dir.join("journal.jsonl"))?,
    };
    Ok((Arc::new(Server::new(parts, arrived)?), results, specs.len() as u64))
}

/// Writes the run's results.jsonl, summary.json and report.html from the
/// queue's results, in plan order.
fn finish(dir: &Path, queue: &Queue, interrupted: bool, ran: usize) -> Result<Outcome> {
    let results: Vec<ResultLine> = queue
        .results()?
        .into_iter()
        .map(|(id, value)| serde_json::from_value(value).with_context(|| format!("{id}: its recorded result")))
        .collect::<Result<_>>()?;
    bench::write_outputs(dir, &results)?;
    Ok(Outcome {
        summary: bench::summary::summarize(&results),
        results,
        interrupted,
        ran,
    })
}

/// A new run's directory: the plan (checked), its journal and its token.
fn create(plan: &Plan, episodes: &[(String, EpisodeSpec)], files: &Files) -> Result<()> {
    if plan.placement() == On::Slurm {
        slurm::check_available()?;
    }
    if files.dir.join("journal.jsonl").exists() {
        bail!(
            "{}: already holds a bench: resume it with `mlrb bench --resume {}`, or choose another --run-name",
            files.dir.display(),
            files.dir.display()
        );
    }
    std::fs::create_dir_all(files.cluster()).with_context(|| format!("creating {}", files.cluster().display()))?;
    let ids: Vec<String> = episodes.iter().map(|(id, _)| id.clone()).collect();
    std::fs::write(files.dir.join("plan.json"), serde_json::to_vec_pretty(plan)?)?;
    Journal::create(&files.dir.join("journal.jsonl"))?.write(&Entry::Plan { episodes: ids })?;
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut token = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(files.token())
        .with_context(|| format!("creating {}", files.token().display()))?;
    token.write_all(new_secret()?.as_bytes())?;
    Ok(())
}

/// Reads a token file, refusing an empty one.
pub fn read_token(path: &Path) -> Result<String> {
    let token = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read the run's token ({e})", path.display()))?;
    let token = token.trim().to_string();
    if token.is_empty() {
        bail!("{}: the token file is empty", path.display());
    }
    Ok(token)
}

/// What workers are told: the plan, the agents' hashes, the lease's life.
fn run_info(plan: &Plan, dir: &Path, setup: &ClusterSetup) -> Result<RunInfo> {
    let mut agents = Vec::new();
    for agent in &plan.agents {
        let bytes =
            std::fs::read(agent.path()).with_context(|| format!("{}: reading the agent", agent.path().display()))?;
        agents.push(AgentFile {
            name: agent.name(),
            blake3: blake3::hash(&bytes).to_hex().to_string(),
            bytes: bytes.len() as u64,
        });
    }
    Ok(RunInfo {
        run: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into()),
        plan: plan.clone(),
        agents,
        lease_ms: setup.lease_seconds.max(1) * 1000,
        max_upload: setup.max_upload_mb << 20,
        shared_run_dir: match setup.shared_filesystem {
            true => Some(std::path::absolute(dir).with_context(|| format!("{}: its absolute path", dir.display()))?),
            false => None,
        },
    })
}

/// A listener on `address` whose queue of connections not yet accepted
/// holds a thousand workers connecting at the same moment (the usual 128
/// drops the rest, whose connects are then retried only a second later).
fn bind(address: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match address {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(4096)
}

/// Binds where the server listened before (a resume), else where the plan
/// says; returns the listener and the URL workers reach it at.
async fn listen(files: &Files, setup: &ClusterSetup) -> Result<(tokio::net::TcpListener, String)> {
    let before: Option<Served> = std::fs::read(files.server())
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let again = match before.as_ref().and_then(|b| b.address) {
        Some(address) => bind(address).ok(),
        None => None,
    };
    let listener = match again {
        Some(listener) => listener,
        None => {
            let cannot = || format!("[cluster] listen: cannot listen on {}", setup.listen);
            let address = tokio::net::lookup_host(&setup.listen)
                .await
                .with_context(cannot)?
                .next()
                .with_context(cannot)?;
            bind(address).with_context(cannot)?
        }
    };
    let address = listener.local_addr()?;
    let url = match &setup.url {
        Some(url) => url.clone(),
        None if address.ip().is_unspecified() => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "localhost".into());
            format!("http://{}:{}", host.trim(), address.port())
        }
        None => format!("http://{address}"),
    };
    let served = Served {
        address: Some(address),
        url: url.clone(),
    };
    std::fs::write(files.server(), serde_json::to_vec_pretty(&served)?)?;
    Ok((listener, url))
}

fn describe(result: &ResultLine) -> String {
    match (result.score, &result.infra_error) {
        (Some(score), _) => format!("{} {score}", result.metric),
        (None, Some(error)) => format!("infrastructure failure: {error}"),
        (None, None) => "no score".into(),
    }
}

/// Starts workers where the plan says, and again when they all ended
/// with episodes still waiting (up to a limit, so a broken node setup
/// ends the bench with an error rather than looping).
struct Starter {
    on: On,
    files: Files,
    plan: Plan,
    url: String,
    jobs: Jobs,
    rounds: u32,
    last_check: std::time::Instant,
}

impl Starter {
    fn new(plan: &Plan, files: &Files, url: &str) -> Result<Self> {
        let jobs = std::fs::read(files.jobs())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let on = plan.placement();
        if on == On::K8s {
            let manifest = k8s::manifest(plan, &files.dir, url)?;
            let path = files.cluster().join("k8s-job.json");
            std::fs::write(&path, serde_json::to_vec_pretty(&manifest)?)?;
            eprintln!(
                "the workers' Job is in {}: create the token's Secret and apply it (docs/scale.md)",
                path.display()
            );
        }
        Ok(Self {
            on,
            files: Files { dir: files.dir.clone() },
            plan: plan.clone(),
            url: url.to_string(),
            jobs,
            rounds: 0,
            last_check: std::time::Instant::now() - Duration::from_secs(60),
        })
    }

    /// Submits workers when none is alive and episodes wait.
    fn tend(&mut self, counts: &bench::queue::Counts, progress: &Progress) -> Result<()> {
        if self.on != On::Slurm || self.last_check.elapsed() < Duration::from_secs(3) {
            return Ok(());
        }
        self.last_check = std::time::Instant::now();
        let mut alive = 0;
        for job in &self.jobs.jobs {
            alive += slurm::alive(job)?.len();
        }
        if alive > 0 || counts.pending == 0 {
            return Ok(());
        }
        let setup = self.plan.cluster.clone().unwrap_or_default();
        if self.rounds > setup.max_leases {
            bail!(
                "the Slurm workers ended {} times with {} episodes still waiting: see their logs in {}",
                self.rounds,
                counts.pending,
                self.files.cluster().join("slurm").display()
            );
        }
        self.rounds += 1;
        let job = self.submit(&setup, counts.pending)?;
        progress.note(&format!(
            "submitted Slurm job {job} ({} workers)",
            setup.workers.min(counts.pending as u32)
        ));
        self.jobs.jobs.push(job);
        std::fs::write(self.files.jobs(), serde_json::to_vec_pretty(&self.jobs)?)?;
        Ok(())
    }

    fn submit(&self, setup: &ClusterSetup, pending: u64) -> Result<String> {
        let log_dir = self.files.cluster().join("slurm");
        std::fs::create_dir_all(&log_dir)?;
        let default = Default::default();
        let name = self
            .files
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = slurm::script(&slurm::Submission {
            slurm: self.plan.slurm.as_ref().unwrap_or(&default),
            cluster: setup,
            url: &self.url,
            token_file: &self.files.token(),
            log_dir: &log_dir,
            workers: setup.workers.min(pending as u32).max(1),
            name: &crate::paths::safe_component(&name),
        })?;
        let script = log_dir.join(format!("workers-{}.sbatch", self.rounds));
        std::fs::write(&script, text)?;
        slurm::submit(&script)
    }

    /// The queue drained: workers still alive have nothing to do.
    fn cancel_leftovers(&self) {
        if self.on != On::Slurm {
            return;
        }
        for job in &self.jobs.jobs {
            if let Err(error) = slurm::cancel(job) {
                tracing::warn!(%job, error = %format!("{error:#}"), "cancelling leftover workers");
            }
        }
    }
}

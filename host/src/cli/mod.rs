//! The `mlrb` command line: one file per command, each a clap `Args` (or
//! subcommand) type with a `run` method; this file parses and dispatches.

mod agent;
mod bench;
mod cache;
mod compare;
mod doctor;
mod eval;
mod export;
mod fork;
mod gc;
mod human;
mod image;
mod keygen;
mod llm;
mod replay;
mod report;
mod run;
mod runs;
mod scan;
mod serve;
mod sign;
mod submission_text;
mod submissions;
mod submit;
mod tasks;
mod verify;
mod view;
mod worker;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::episode::{HostSetup, Runner};
use crate::sandbox::SandboxKind;
use crate::{paths, task};

/// mlrb benchmarks AI research agents. An agent is a WebAssembly component;
/// mlrb gives it an ML task and a typed set of tools (files, scripts),
/// confines it to what the task grants, records every call, runs its scripts
/// in a sandbox and scores the result with the task's hidden evaluator.
///
/// Start with `mlrb tasks list`, then
/// `mlrb run --agent target/wasm32-wasip2/release/baseline.wasm --task digits`.
#[derive(Parser, Debug)]
#[command(
    name = "mlrb",
    version,
    propagate_version = true,
    after_help = "Examples:\n  mlrb tasks list\n  mlrb tasks show digits\n  mlrb run --agent baseline.wasm --task digits --seed 1\n  mlrb run --agent my_agent.wasm --task ./my-task --wall-seconds 600 --json\n  mlrb eval runs/<run>/digits/baseline/1"
)]
pub struct Cli {
    /// More log output (-v: progress of the host, -vv: every detail).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one agent on one task: a scored, fully recorded episode.
    Run(run::RunArgs),
    /// Work on a task yourself, in an agent's place: a shell in the task's
    /// sandbox, each command a recorded step, the final workspace scored.
    Human(human::HumanArgs),
    /// Run every agent on every task over several seeds: a journalled
    /// benchmark run that `--resume` completes after a crash.
    Bench(bench::BenchArgs),
    /// Serve a cluster bench's queue to its workers (a bench made with
    /// `mlrb bench --on server|slurm|k8s`), e.g. after a restart.
    Serve(serve::ServeArgs),
    /// Run episodes leased from a served bench until its queue is empty,
    /// its time is up or it is told to stop (SIGTERM gives leases back).
    Worker(worker::WorkerArgs),
    /// The tables of a bench run (from its results.jsonl); rewrites its
    /// summary.json and report.html.
    Report(report::ReportArgs),
    /// Compare two agents on the (task, seed) pairs both ran, from two runs
    /// or one: paired differences with t and bootstrap intervals, a sign
    /// test, the probability of improvement; `--fail-if-worse` for CI.
    Compare(compare::CompareArgs),
    /// Write a run's results as an Inspect AI evaluation log or as Every
    /// Eval Ever records (a run whose records do not verify is refused).
    Export(export::ExportArgs),
    /// A trace viewer on loopback: the episodes of a run, each episode's
    /// steps, workspace diffs between snapshots, and its score.
    View(view::ViewArgs),
    /// Agent components.
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    /// The cache of compiled agents and prepared task data.
    #[command(subcommand)]
    Cache(cache::CacheCommand),
    /// Score an episode again from its final snapshot.
    Eval(eval::EvalArgs),
    /// Run a recorded episode's agent again, every call answered from the
    /// recording (no script, no model, no clock), and say whether it did
    /// exactly the same.
    Replay(replay::ReplayArgs),
    /// A new episode that starts as a recorded one did up to a step and goes
    /// on live from there, with the same or another agent or model.
    Fork(fork::ForkArgs),
    /// Check that a run or episode is what it was: hash chains, snapshot
    /// objects, bindings, signature, scores re-computed, replays.
    Verify(verify::VerifyArgs),
    /// Check recorded episodes for what a reviewer should look at (escapes, refusals,
    /// hand-written submissions, probing validations); exit 1 when something needs review.
    Scan(scan::ScanArgs),
    /// Sign a run or episode directory (ed25519).
    Sign(sign::SignArgs),
    /// Upload an agent to a submission service for a published benchmark.
    Submit(submit::SubmitArgs),
    /// The submission service: an organiser's commands on its folder, a
    /// submitter's over HTTP.
    #[command(subcommand)]
    Submissions(submissions::SubmissionsCommand),
    /// Make an ed25519 key pair for `mlrb sign` and `mlrb verify --key`.
    Keygen(keygen::KeygenArgs),
    /// Stored results: invalidate what depended on a task, image or agent.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// List and inspect tasks.
    #[command(subcommand)]
    Tasks(tasks::TasksCommand),
    /// The container image scripts run in with `--sandbox docker`.
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// The local model (the offline default for agents' LLM calls).
    #[command(subcommand)]
    Llm(llm::LlmCommand),
    /// Remove containers left behind by an mlrb host that was killed.
    Gc(gc::GcArgs),
    /// What this machine offers mlrb: each part (sandboxes, images, GPUs,
    /// agent toolchains, the local model, Slurm, Chromium), whether it is
    /// here, what its absence disables and the command that adds it.
    Doctor(doctor::DoctorArgs),
}

/// Where the task's scripts (prepare, evaluation, starter) run, for the
/// commands that run no agent.
#[derive(Args, Debug, Clone)]
struct SandboxArgs {
    /// `local`: bubblewrap on this machine; `docker`: containers of the local Docker engine.
    #[arg(long, value_enum, default_value = "local")]
    sandbox: SandboxKind,
    /// The image for `--sandbox docker` [default: the task's, else the one `mlrb image build` makes].
    #[arg(long)]
    image: Option<String>,
    /// GPUs this host may hand to the task's scripts, by nvidia-smi index or UUID (e.g. 0,1).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    gpus: Vec<String>,
    /// The Python of the local sandbox: an interpreter, venv or installation whose
    /// packages meet the task's, run as its scripts' python3 [default: $MLRB_PYTHON].
    #[arg(long, value_name = "PATH")]
    python: Option<std::path::PathBuf>,
}

impl SandboxArgs {
    /// This sandbox, and no model source.
    fn setup(&self) -> HostSetup {
        HostSetup {
            sandbox: Some(self.sandbox),
            image: self.image.clone(),
            gpus: self.gpus.clone(),
            python: self.python.clone(),
            llm: Some("none".into()),
            config: None,
        }
    }

    /// A runner with this sandbox (and no model source), for `task`.
    async fn runner(&self, task: &task::Task) -> Result<Runner> {
        self.setup()
            .runner(&paths::cache_dir(), std::slice::from_ref(task))
            .await
    }
}

/// Exit status of an interrupted run, as shells expect after Ctrl-C.
const EXIT_INTERRUPTED: u8 = 130;

/// Parses the command line and runs the command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    raise_open_file_limit();
    if let Err(error) = enable_compile_gate() {
        eprintln!("error: {error:#}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: starting the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        // A reader that went away (`mlrb tasks list | head -1`) is not an error.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: the chain of causes, joined.
            eprintln!("error: {}", paths::shorten(&format!("{error:#}").replace('\n', " ")));
            ExitCode::FAILURE
        }
    }
}

/// Every component this process compiles goes through the compile gate:
/// a child `mlrb` within the limits (see `engine::gate`).
fn enable_compile_gate() -> anyhow::Result<()> {
    let limits = crate::engine::gate::Limits::from_env()?;
    let program = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("finding the mlrb binary for its compile children: {e}"))?;
    crate::engine::gate::enable(program, limits);
    Ok(())
}

/// Raises the soft limit on open files to the hard one: every episode
/// holds one descriptor per folder level while it walks its workspace, and
/// a bench runs many at once.
fn raise_open_file_limit() {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if let Some(hard) = limit.maximum
        && limit.current.is_some_and(|soft| soft < hard)
    {
        let raised = rustix::process::Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        };
        if let Err(error) = rustix::process::setrlimit(rustix::process::Resource::Nofile, raised) {
            tracing::debug!(%error, "raising the open-file limit");
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("MLRB_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{default},cranelift=warn,wasmtime=warn,wasm_compose=error"))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

async fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run(args) => args.run().await,
        Command::Human(args) => args.run().await,
        Command::Bench(args) => args.run().await,
        Command::Serve(args) => args.run().await,
        Command::Worker(args) => args.run().await,
        Command::Report(args) => args.run(),
        Command::Compare(args) => args.run(),
        Command::Export(args) => args.run(),
        Command::View(args) => args.run().await,
        Command::Agent(command) => command.run().await,
        Command::Cache(command) => command.run(),
        Command::Eval(args) => args.run().await,
        Command::Replay(args) => args.run().await,
        Command::Fork(args) => args.run().await,
        Command::Verify(args) => args.run().await,
        Command::Scan(args) => args.run(),
        Command::Sign(args) => args.run(),
        Command::Submit(args) => args.run().await,
        Command::Submissions(command) => command.run().await,
        Command::Keygen(args) => args.run(),
        Command::Runs(command) => command.run(),
        Command::Tasks(command) => command.run().await,
        Command::Image(command) => command.run().await,
        Command::Llm(command) => command.run().await,
        Command::Gc(args) => args.run().await,
        Command::Doctor(args) => args.run().await,
    }
}

/// Writes a line to stdout; a closed pipe becomes an error that ends the
/// program quietly, as for any Unix tool.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?
    }};
}
pub(crate) use say;

/// Exit status of an episode that ran but could not be scored (the
/// task's evaluator failed): not the agent's result, and not a success.
pub const EXIT_NOT_SCORED: u8 = 3;

/// An episode's result as `run`, `fork` and `human` print it: its record,
/// score and folder as JSON, or its table and folder.
fn print_episode(
    json: bool,
    record: &crate::episode::EpisodeRecord,
    score: &crate::episode::ScoreRecord,
    dir: &std::path::Path,
) -> Result<()> {
    if json {
        let all = serde_json::json!({ "episode": record, "score": score, "dir": dir });
        say!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        say!("{}", crate::report::episode_text(record, score));
        say!("episode: {}", dir.display());
    }
    Ok(())
}

/// The exit status for an episode's score: [`EXIT_NOT_SCORED`], with the
/// cause in one line, when the evaluator could not score it.
fn scored(score: &crate::episode::ScoreRecord) -> ExitCode {
    if !score.evaluator_failed {
        return ExitCode::SUCCESS;
    }
    let why = score.error.as_deref().unwrap_or("the evaluator failed");
    eprintln!("error: the episode could not be scored: {}", paths::shorten(why));
    ExitCode::from(EXIT_NOT_SCORED)
}

/// A spinner on stderr for long work.
fn spinner(message: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// Where a new run is written (`run`, `fork`, `bench`).
#[derive(Args, Debug)]
struct RunPlace {
    /// Where runs are written.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    out: std::path::PathBuf,
    /// The run's name [default: the current UTC time].
    #[arg(long)]
    run_name: Option<String>,
}

impl RunPlace {
    /// The run's directory: its name as given, or the current UTC time,
    /// made safe as a folder name, under `--out`.
    fn dir(&self) -> std::path::PathBuf {
        let name = self
            .run_name
            .clone()
            .unwrap_or_else(|| chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string());
        self.out.join(paths::safe_component(&name))
    }
}

/// Resolves on SIGTERM (what Slurm and Kubernetes send before a kill) or SIGINT.
fn terminated() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate()).ok();
    let interrupt = ctrl_c();
    async move {
        let term = async move {
            match term {
                Some(mut term) => {
                    term.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = term => {}
            _ = interrupt => {}
        }
    }
}

/// Resolves at the first Ctrl-C (never, where signals cannot be watched);
/// listening starts now, so a Ctrl-C during set-up is not lost.
fn ctrl_c() -> impl std::future::Future<Output = ()> {
    let sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    async move {
        match sigint {
            Some(mut sigint) => {
                sigint.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
}

//! The `mlrb` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::episode::{AgentLimits, EpisodeRecord, EpisodeSpec, Host};
use crate::sandbox::gpu::GpuPool;
use crate::sandbox::image::{self, ImageRecipe};
use crate::sandbox::{self, SandboxKind};
use crate::{bench, paths, report, task};

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
    Run(RunArgs),
    /// Run every agent on every task over several seeds: a journalled
    /// benchmark run that `--resume` completes after a crash.
    Bench(BenchArgs),
    /// The tables of a bench run (from its results.jsonl); rewrites its
    /// summary.json and report.html.
    Report {
        /// A bench run directory (runs/<run-name>).
        run_dir: PathBuf,
        /// Print summary.json instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// A trace viewer on loopback: the episodes of a run, each episode's
    /// steps, workspace diffs between snapshots, and its score.
    View {
        /// A run directory or one episode directory.
        dir: PathBuf,
        /// The port on 127.0.0.1 [default: any free one].
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// Agent components.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// The cache of compiled agents and prepared task data.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Score an episode again from its final snapshot.
    Eval {
        /// An episode directory (runs/<run>/<task>/<agent>/<seed>).
        episode_dir: PathBuf,
        #[command(flatten)]
        sandbox: SandboxArgs,
        /// Print score.json instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List and inspect tasks.
    #[command(subcommand)]
    Tasks(TasksCommand),
    /// The container image scripts run in with `--sandbox docker`.
    #[command(subcommand)]
    Image(ImageCommand),
    /// The local model (the offline default for agents' LLM calls).
    #[command(subcommand)]
    Llm(LlmCommand),
    /// Remove containers left behind by an mlrb host that was killed.
    Gc {
        /// Remove every mlrb container, also those of hosts still running.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ImageCommand {
    /// Build the task runtime image (Debian with Python and the scientific
    /// stack) from a debootstrap root filesystem; a no-op when it exists.
    Build {
        /// Include PyTorch (Debian's CPU build).
        #[arg(long)]
        with_torch: bool,
    },
}

/// Where the agent's scripts, prepare and evaluation run.
#[derive(Args, Debug, Clone)]
struct SandboxArgs {
    /// `local`: bubblewrap on this machine; `docker`: containers of the local Docker engine.
    #[arg(long, value_enum, default_value = "local")]
    sandbox: SandboxKind,
    /// The image for `--sandbox docker` [default: the task's, else the one `mlrb image build` makes].
    #[arg(long)]
    image: Option<String>,
    /// GPUs this host may hand to episodes, by device id (e.g. 0,1); with --sandbox docker.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    gpus: Vec<String>,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The agent component (.wasm) to run.
    #[arg(long, value_name = "FILE.wasm")]
    agent: PathBuf,
    /// A built-in task name (see `mlrb tasks list`) or the path of a task folder.
    #[arg(long, value_name = "NAME|PATH")]
    task: String,
    /// Seeds the agent's randomness; also names the episode directory.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where runs are written.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    out: PathBuf,
    /// The run's name [default: the current UTC time].
    #[arg(long)]
    run_name: Option<String>,
    /// Override the task's step budget.
    #[arg(long)]
    max_steps: Option<u32>,
    /// Override the task's wall-clock budget, in seconds.
    #[arg(long)]
    wall_seconds: Option<u64>,
    /// The agent's own memory limit, in MiB (all its linear memories together).
    #[arg(long, default_value_t = 1024)]
    agent_memory_mb: usize,
    /// What the agent's calls may write to the trace, in MiB; past it the
    /// episode ends as `trace-limit`.
    #[arg(long, default_value_t = 256)]
    trace_mb: u64,
    /// Print the episode and score records as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sandbox: SandboxArgs,
    #[command(flatten)]
    llm: LlmArgs,
}

/// Where the agent's LLM calls go, and how much they may spend.
#[derive(Args, Debug, Clone)]
struct LlmArgs {
    /// The configuration with the `[llm]` providers and model aliases
    /// [default: $MLRB_CONFIG, ./mlrb.toml, ~/.config/mlrb/mlrb.toml].
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// `replay:<episode-dir>`: answer the agent's requests from a recorded
    /// episode, in order, with no provider or key.
    #[arg(long, value_name = "replay:DIR")]
    llm: Option<String>,
    /// Override the task's LLM token budget (input and output; 0: no limit).
    #[arg(long)]
    llm_tokens: Option<u64>,
    /// Override the task's LLM cost budget in USD (0: no limit).
    #[arg(long)]
    llm_cost_usd: Option<f64>,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  mlrb bench --agent a.wasm --agent b.wasm --task digits --task house-prices --seeds 3 -j 2\n  mlrb bench --plan plan.toml\n  mlrb bench --resume runs/20261122-101500"
)]
struct BenchArgs {
    /// A plan file (TOML: agents, tasks, seeds, sandbox, parallel, ...); flags add to it.
    #[arg(long, value_name = "FILE.toml")]
    plan: Option<PathBuf>,
    /// Resume the bench in this run directory: run exactly the episodes without a final result.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["plan", "agent", "task"])]
    resume: Option<PathBuf>,
    /// An agent component (repeatable).
    #[arg(long, value_name = "FILE.wasm")]
    agent: Vec<PathBuf>,
    /// A task name or folder (repeatable).
    #[arg(long, value_name = "NAME|PATH")]
    task: Vec<String>,
    /// A number of seeds (3 means 1,2,3) or a list (1,5,9).
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Episodes run at once.
    #[arg(short = 'j', long)]
    parallel: Option<usize>,
    /// CPU slots shared by running episodes, each taking its task's CPUs [default: this machine's].
    #[arg(long)]
    cpus: Option<u32>,
    /// Attempts after an infrastructure failure [default: 2].
    #[arg(long)]
    retries: Option<u32>,
    #[arg(long)]
    max_steps: Option<u32>,
    #[arg(long)]
    wall_seconds: Option<u64>,
    /// Where runs are written.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    out: PathBuf,
    /// The run's name [default: the current UTC time].
    #[arg(long)]
    run_name: Option<String>,
    /// No progress display.
    #[arg(long, short)]
    quiet: bool,
    /// Print summary.json instead of tables.
    #[arg(long)]
    json: bool,
    /// `local` or `docker` [default: the plan's, else local].
    #[arg(long, value_enum)]
    sandbox: Option<SandboxKind>,
    #[arg(long)]
    image: Option<String>,
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    gpus: Vec<String>,
    /// The configuration with the `[llm]` providers [default: mlrb's usual places].
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Override the tasks' LLM token budgets.
    #[arg(long)]
    llm_tokens: Option<u64>,
    /// Override the tasks' LLM cost budgets, in USD.
    #[arg(long)]
    llm_cost_usd: Option<f64>,
}

#[derive(Subcommand, Debug)]
enum LlmCommand {
    /// Serve SmolLM2-135M-Instruct on 127.0.0.1 with an OpenAI-compatible
    /// API (llama-cpp-python's server), until Ctrl-C.
    Serve {
        #[arg(long, default_value_t = 8765)]
        port: u16,
    },
}

#[derive(Subcommand, Debug)]
enum CacheCommand {
    /// Remove compiled agents of other mlrb versions or unused for a while,
    /// prepared data of tasks not run for a while, and leftovers of
    /// interrupted writes.
    Prune {
        /// Keep what was used within this many days.
        #[arg(long, default_value_t = 30)]
        unused_days: u64,
    },
}

#[derive(Subcommand, Debug)]
enum AgentCommand {
    /// Create a buildable agent project (it starts as the baseline policy).
    New {
        /// The agent's name: lowercase letters, digits, '-' and '_'.
        name: String,
        #[arg(long, value_enum)]
        lang: crate::agent_build::Language,
        /// The project folder [default: ./<name>].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build an agent project (Rust, Python or C) into a .wasm component,
    /// then check it and compile it into the cache.
    Build {
        /// The project folder.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Where to write the component [default: <dir>/<name>.wasm].
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Python: the module that defines WitWorld [default: the manifest's `entry`, else app].
        #[arg(long)]
        entry: Option<String>,
    },
    /// What a component targets (world, WIT version), its imports and
    /// exports, size and sha256; refuses, with the reason, one this host
    /// will not run.
    Check {
        /// The component.
        file: PathBuf,
        /// Check against this task's grants (e.g. network).
        #[arg(long)]
        task: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum TasksCommand {
    /// The built-in tasks.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One task's definition and research problem.
    Show {
        /// A built-in task name or the path of a task folder.
        task: String,
        #[arg(long)]
        json: bool,
    },
    /// What a task folder lacks before a run (evaluator, prepared data,
    /// baseline, what this host must offer), without running it.
    Check {
        /// A built-in task name or the path of a task folder (mlrb or MLAgentBench layout).
        task: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// A task's quality test: prepare it, run its starter code and reference
    /// solution, and check the baseline, determinism and that the reference wins.
    Test {
        /// Built-in task names or task folder paths.
        tasks: Vec<String>,
        /// Every built-in task of this suite (e.g. `cpu`).
        #[arg(long)]
        suite: Option<String>,
        /// Keep the workspaces (their path is printed).
        #[arg(long)]
        keep: bool,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
}

/// Exit status of an interrupted run, as shells expect after Ctrl-C.
const EXIT_INTERRUPTED: u8 = 130;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: starting the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(error) => {
            // One line: the chain of causes, joined.
            eprintln!("error: {}", paths::shorten(&format!("{error:#}").replace('\n', " ")));
            ExitCode::FAILURE
        }
    }
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
        Command::Run(args) => run(args).await,
        Command::Bench(args) => bench(args).await,
        Command::Report { run_dir, json } => bench_report(&run_dir, json),
        Command::View { dir, port } => view(&dir, port).await,
        Command::Cache(CacheCommand::Prune { unused_days }) => cache_prune(unused_days),
        Command::Agent(AgentCommand::Check { file, task, json }) => agent_check(&file, task.as_deref(), json).await,
        Command::Agent(AgentCommand::New { name, lang, dir }) => agent_new(&name, lang, dir),
        Command::Agent(AgentCommand::Build { dir, output, entry }) => agent_build(&dir, output.as_deref(), entry).await,
        Command::Eval {
            episode_dir,
            sandbox,
            json,
        } => eval(&episode_dir, &sandbox, json).await,
        Command::Tasks(TasksCommand::List { json }) => tasks_list(json),
        Command::Tasks(TasksCommand::Show { task, json }) => tasks_show(&task, json),
        Command::Tasks(TasksCommand::Check { task, json, sandbox }) => tasks_check(&task, json, &sandbox).await,
        Command::Tasks(TasksCommand::Test {
            tasks,
            suite,
            keep,
            json,
            sandbox,
        }) => tasks_test(tasks, suite.as_deref(), keep, json, &sandbox).await,
        Command::Image(ImageCommand::Build { with_torch }) => image_build(with_torch).await,
        Command::Gc { all } => gc(all).await,
        Command::Llm(LlmCommand::Serve { port }) => llm_serve(port).await,
    }
}

async fn host(args: &SandboxArgs, task: &task::Task) -> Result<Host> {
    let image = args
        .image
        .clone()
        .or_else(|| task.spec.resources.image.clone())
        .unwrap_or_else(|| ImageRecipe::standard(false).tag());
    let sandbox = sandbox::open(args.sandbox, &image).await?;
    Ok(Host::new(&paths::cache_dir(), sandbox)?.with_gpus(GpuPool::new(&args.gpus)?))
}

async fn image_build(with_torch: bool) -> Result<ExitCode> {
    let recipe = ImageRecipe::standard(with_torch);
    let bar = spinner("building the image");
    let built = image::build(&recipe, &paths::cache_dir().join("image-build"), &|step| {
        bar.set_message(step.to_string())
    })
    .await;
    bar.finish_and_clear();
    let (tag, new) = built?;
    println!("{tag} {}", if new { "built" } else { "is up to date" });
    Ok(ExitCode::SUCCESS)
}

async fn llm_serve(port: u16) -> Result<ExitCode> {
    let server = tokio::task::spawn_blocking(move || crate::llm::local::start(Some(port), true)).await??;
    println!(
        "serving {} on http://127.0.0.1:{}/v1 (OpenAI-compatible); in mlrb.toml:\n\n\
         [llm.providers.local]\napi = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\n\n\
         [llm.models.main]\nprovider = \"local\"\nmodel = \"{}\"\n\nCtrl-C stops it.",
        crate::llm::local::MODEL,
        server.port,
        server.port,
        crate::llm::local::MODEL
    );
    tokio::signal::ctrl_c().await?;
    drop(server);
    Ok(ExitCode::SUCCESS)
}

async fn gc(all: bool) -> Result<ExitCode> {
    let removed = crate::sandbox::docker::gc(all).await?;
    for name in &removed {
        println!("removed {name}");
    }
    println!("{} container(s) removed", removed.len());
    Ok(ExitCode::SUCCESS)
}

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

async fn run(args: RunArgs) -> Result<ExitCode> {
    // Listen for Ctrl-C from the start: one pressed while the task is
    // prepared ends the episode as soon as the agent starts, with records.
    let sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    let task = task::resolve(&args.task)?;
    let llm = crate::llm::LlmSource::open(args.llm.llm.as_deref(), args.llm.config.as_deref())?;
    let host = host(&args.sandbox, &task).await?.with_llm(llm);
    let bar = spinner("loading the agent");
    let agent = host.load_agent(&args.agent).await?;
    let agent_name = paths::safe_component(
        &args
            .agent
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "agent".into()),
    );
    let run_name = paths::safe_component(
        &args
            .run_name
            .clone()
            .unwrap_or_else(|| chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string()),
    );
    let dir = args
        .out
        .join(run_name)
        .join(&task.spec.name)
        .join(agent_name)
        .join(args.seed.to_string());
    let steps = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let spec = EpisodeSpec {
        agent: args.agent.clone(),
        task,
        seed: args.seed,
        dir: dir.clone(),
        limits: AgentLimits {
            memory_bytes: args.agent_memory_mb << 20,
            max_steps: args.max_steps,
            wall_seconds: args.wall_seconds,
            llm_tokens: args.llm.llm_tokens,
            llm_cost_usd: args.llm.llm_cost_usd,
            trace_bytes: args.trace_mb << 20,
            ..AgentLimits::default()
        },
        progress: Some(steps.clone()),
    };
    let max_steps = args.max_steps.unwrap_or(spec.task.spec.budget.max_steps);
    let label = format!(
        "{} on {} (seed {})",
        args.agent.display(),
        spec.task.spec.name,
        spec.seed
    );
    let ticker = {
        let bar = bar.clone();
        tokio::spawn(async move {
            loop {
                let step = steps.load(std::sync::atomic::Ordering::Relaxed);
                bar.set_message(format!("{label}: step {step} of {max_steps}"));
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        })
    };
    let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = interrupted.clone();
    let interrupt = async move {
        match sigint {
            Some(mut sigint) => {
                sigint.recv().await;
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            None => std::future::pending::<()>().await,
        }
    };
    let result = host.run_episode(&agent, &spec, interrupt).await;
    ticker.abort();
    bar.finish_and_clear();
    let (record, score) = result?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "episode": record, "score": score, "dir": dir }))?
        );
    } else {
        println!("{}", report::episode_table(&record, &score));
        println!("episode: {}", dir.display());
    }
    Ok(if interrupted.load(std::sync::atomic::Ordering::SeqCst) {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

async fn eval(dir: &Path, sandbox: &SandboxArgs, json: bool) -> Result<ExitCode> {
    let record = EpisodeRecord::read(dir)?;
    let task = task::Task::load(Path::new(&record.task.root))
        .or_else(|_| task::resolve(&record.task.name))
        .with_context(|| format!("{}: task `{}` of this episode", dir.display(), record.task.name))?;
    if task.spec.version != record.task.version {
        tracing::warn!(episode = %record.task.version, now = %task.spec.version, "the task's version changed since this episode ran");
    }
    let host = host(sandbox, &task).await?;
    let bar = spinner("evaluating the final snapshot");
    let score = host.reevaluate(&task, dir, &record).await;
    bar.finish_and_clear();
    let score = score?;
    score.write(dir)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&score)?);
    } else {
        println!("{}", report::episode_table(&record, &score));
    }
    Ok(ExitCode::SUCCESS)
}

fn tasks_list(json: bool) -> Result<ExitCode> {
    let dir = task::builtin_tasks_dir();
    let mut tasks = Vec::new();
    for loaded in task::list(&dir) {
        match loaded {
            Ok(task) => tasks.push(task),
            Err(error) => eprintln!("warning: {error:#}"),
        }
    }
    if json {
        let specs: Vec<_> = tasks.iter().map(|t| &t.spec).collect();
        println!("{}", serde_json::to_string_pretty(&specs)?);
    } else {
        println!("{}", report::tasks_table(&tasks));
        println!("tasks from {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn tasks_show(name: &str, json: bool) -> Result<ExitCode> {
    let task = task::resolve(name)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&task.spec)?);
    } else {
        let spec = &task.spec;
        println!("{} {} — {}", spec.name, spec.version, spec.description);
        println!("folder: {}", task.root.display());
        println!(
            "metric: {} ({} is better), baseline {}",
            spec.metric.name,
            if spec.metric.higher_is_better {
                "higher"
            } else {
                "lower"
            },
            spec.metric.baseline.map_or("none declared".into(), |b| b.to_string())
        );
        println!(
            "budget: {} steps, {} s wall clock",
            spec.budget.max_steps, spec.budget.wall_seconds
        );
        println!(
            "scripts: {} CPUs, {} MiB, {} processes, {} s per script, network {}",
            spec.resources.cpus,
            spec.resources.memory_mb,
            spec.resources.pids,
            spec.resources.script_timeout_seconds,
            if spec.resources.network { "granted" } else { "none" }
        );
        if !spec.files.read_only.is_empty() {
            println!("read-only: {}", spec.files.read_only.join(", "));
        }
        println!("\n{}", spec.research_problem.trim());
    }
    Ok(ExitCode::SUCCESS)
}

async fn tasks_check(name: &str, json: bool, sandbox: &SandboxArgs) -> Result<ExitCode> {
    let task = task::resolve(name)?;
    let host = host(sandbox, &task).await?;
    let items = task::check::check(&task, host.cache_dir(), &host.offer()).await;
    let failed = items.iter().any(|i| i.status == task::check::Status::Fail);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "task": task.spec.name, "ok": !failed, "checks": items })
            )?
        );
    } else {
        println!("{}", report::check_table(&items));
        println!(
            "{} {}: {}",
            task.spec.name,
            task.spec.version,
            if failed { "not ready to run" } else { "ready to run" }
        );
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

async fn tasks_test(
    names: Vec<String>,
    suite: Option<&str>,
    keep: bool,
    json: bool,
    sandbox: &SandboxArgs,
) -> Result<ExitCode> {
    let mut tasks = Vec::new();
    for name in &names {
        tasks.push(task::resolve(name)?);
    }
    if let Some(suite) = suite {
        let dir = task::builtin_tasks_dir();
        let before = tasks.len();
        for loaded in task::list(&dir) {
            let loaded = loaded?;
            if loaded.spec.suite == suite {
                tasks.push(loaded);
            }
        }
        if tasks.len() == before {
            anyhow::bail!(
                "--suite {suite}: no built-in task in {} belongs to this suite",
                dir.display()
            );
        }
    }
    if tasks.is_empty() {
        anyhow::bail!("name the tasks to test, or pass --suite (e.g. --suite cpu)");
    }
    let mut reports = Vec::new();
    for task in &tasks {
        let host = host(sandbox, task).await?;
        let bar = spinner(&task.spec.name);
        let name = task.spec.name.clone();
        let step = |what: &str| bar.set_message(format!("{name}: {what}"));
        let report = task::selftest::run(task, &host.offer(), host.cache_dir(), keep, &step).await;
        bar.finish_and_clear();
        let report = report?;
        if !json {
            eprintln!(
                "{} {}: {}",
                report.task,
                report.version,
                if report.passed { "passed" } else { "FAILED" }
            );
        }
        reports.push(report);
    }
    let passed = reports.iter().all(|r| r.passed);
    if json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        println!("{}", report::selftest_table(&reports));
        for report in &reports {
            for finding in report.findings.iter().filter(|f| f.status != task::check::Status::Ok) {
                println!(
                    "{} {:?} {}: {}",
                    report.task, finding.status, finding.check, finding.detail
                );
            }
            if let Some(dir) = &report.work_dir {
                println!("{}: workspaces kept in {}", report.task, dir.display());
            }
        }
        println!(
            "{} of {} task(s) passed",
            reports.iter().filter(|r| r.passed).count(),
            reports.len()
        );
    }
    Ok(if passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The plan of a new bench: the plan file, if any, with the flags added.
fn bench_plan(args: &BenchArgs) -> Result<bench::Plan> {
    let mut plan = match &args.plan {
        Some(path) => bench::Plan::load(path)?,
        None => bench::Plan {
            agents: Vec::new(),
            tasks: Vec::new(),
            seeds: bench::Seeds::Count(1),
            sandbox: SandboxKind::Local,
            image: None,
            gpus: Vec::new(),
            parallel: 1,
            cpus: None,
            max_steps: None,
            wall_seconds: None,
            llm_tokens: None,
            llm_cost_usd: None,
            config: None,
            agent_memory_mb: 1024,
            retries: 2,
        },
    };
    plan.agents
        .extend(args.agent.iter().cloned().map(bench::AgentEntry::Path));
    plan.tasks.extend(args.task.iter().cloned());
    match args.seeds.as_slice() {
        [] => {}
        [count] => plan.seeds = bench::Seeds::Count(*count),
        list => plan.seeds = bench::Seeds::List(list.to_vec()),
    }
    if let Some(parallel) = args.parallel {
        plan.parallel = parallel;
    }
    plan.cpus = args.cpus.or(plan.cpus);
    if let Some(retries) = args.retries {
        plan.retries = retries;
    }
    if let Some(sandbox) = args.sandbox {
        plan.sandbox = sandbox;
    }
    plan.image = args.image.clone().or(plan.image);
    if !args.gpus.is_empty() {
        plan.gpus = args.gpus.clone();
    }
    plan.max_steps = args.max_steps.or(plan.max_steps);
    plan.wall_seconds = args.wall_seconds.or(plan.wall_seconds);
    plan.llm_tokens = args.llm_tokens.or(plan.llm_tokens);
    plan.llm_cost_usd = args.llm_cost_usd.or(plan.llm_cost_usd);
    // Kept absolute in plan.json, so a resume elsewhere finds it.
    if let Some(config) = args.config.clone().or(plan.config.take()) {
        plan.config = Some(
            config
                .canonicalize()
                .with_context(|| format!("{}: cannot read", config.display()))?,
        );
    }
    Ok(plan)
}

async fn bench(args: BenchArgs) -> Result<ExitCode> {
    let sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    let (plan, dir) = match &args.resume {
        Some(dir) => (None, dir.clone()),
        None => {
            let run_name = paths::safe_component(
                &args
                    .run_name
                    .clone()
                    .unwrap_or_else(|| chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string()),
            );
            (Some(bench_plan(&args)?), args.out.join(run_name))
        }
    };
    let interrupt = async move {
        match sigint {
            Some(mut sigint) => {
                sigint.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    let outcome = bench::run(plan, &dir, &paths::cache_dir(), args.quiet || args.json, interrupt).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome.summary)?);
    } else {
        println!("{}", report::summary_tables(&outcome.summary));
        println!(
            "{} of {} episodes have results ({} run now); results in {}",
            outcome.results.len(),
            outcome.summary.episodes.max(outcome.results.len()),
            outcome.ran,
            dir.display()
        );
    }
    Ok(if outcome.interrupted {
        eprintln!("interrupted: `mlrb bench --resume {}` runs what is left", dir.display());
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

fn bench_report(dir: &Path, json: bool) -> Result<ExitCode> {
    let results = bench::read_results(dir)?;
    let summary = bench::metrics::summarize(&results);
    bench::write_outputs(dir, &results)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("{}", report::summary_tables(&summary));
        println!(
            "{} episode(s) in {}; the HTML report is {}",
            results.len(),
            dir.display(),
            dir.join("report.html").display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn view(dir: &Path, port: u16) -> Result<ExitCode> {
    let viewer = crate::view::Viewer::new(dir)?;
    // Loopback only: traces may hold what an organiser must not publish.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("listening on 127.0.0.1:{port}"))?;
    let address = listener.local_addr()?;
    println!(
        "mlrb view: serving {} at http://{address}/ (Ctrl-C stops)",
        dir.display()
    );
    use std::io::Write;
    std::io::stdout().flush()?;
    tokio::select! {
        served = viewer.serve(listener) => served?,
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(ExitCode::SUCCESS)
}

async fn agent_check(file: &Path, task: Option<&str>, json: bool) -> Result<ExitCode> {
    let network = match task {
        Some(name) => task::resolve(name)?.spec.resources.network,
        None => false,
    };
    let engine = crate::engine::AgentEngine::new(&paths::cache_dir())?;
    let report = crate::agent_check::check(&engine, file, network).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report::agent_check_table(&report));
        match report.refusals.as_slice() {
            [] => println!("{}: this host runs it", file.display()),
            refusals => {
                for refusal in refusals {
                    println!("refused: {refusal}");
                }
            }
        }
    }
    Ok(if report.refusals.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn agent_new(name: &str, language: crate::agent_build::Language, dir: Option<PathBuf>) -> Result<ExitCode> {
    let sdk = crate::agent_build::sdk::materialize(&paths::cache_dir())?;
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    let created = crate::agent_build::scaffold::create(&dir, name, language, &sdk)?;
    println!("created the {language} agent {name} in {}", created.display());
    println!("build it with: mlrb agent build {}", created.display());
    Ok(ExitCode::SUCCESS)
}

async fn agent_build(dir: &Path, output: Option<&Path>, entry: Option<String>) -> Result<ExitCode> {
    let mut project = crate::agent_build::Project::open(dir)?;
    if let Some(entry) = entry {
        project.entry = entry;
    }
    let started = std::time::Instant::now();
    let built = crate::agent_build::build(&project, output)?;
    let built_in = started.elapsed();
    // Checking compiles it, so the first run starts from the cache.
    let engine = crate::engine::AgentEngine::new(&paths::cache_dir())?;
    let report = crate::agent_check::check(&engine, &built, false).await?;
    println!("{}", report::agent_check_table(&report));
    println!(
        "built {} ({} agent) in {:.1} s",
        built.display(),
        project.language,
        built_in.as_secs_f64()
    );
    for refusal in &report.refusals {
        println!("refused: {refusal}");
    }
    Ok(if report.refusals.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn cache_prune(unused_days: u64) -> Result<ExitCode> {
    let cache = paths::cache_dir();
    let unused_for = std::time::Duration::from_secs(unused_days * 86_400);
    let engine = crate::engine::AgentEngine::new(&cache)?;
    let mut removed = engine.cache().prune(unused_for)?;
    removed.extend(crate::task::prune_cache(&cache, unused_for)?);
    let bytes: u64 = removed.iter().map(|(_, size)| size).sum();
    for (path, _) in &removed {
        tracing::info!(path = %path.display(), "removed");
    }
    println!(
        "removed {} item(s), {:.1} MiB, from {}",
        removed.len(),
        bytes as f64 / (1 << 20) as f64,
        cache.display()
    );
    Ok(ExitCode::SUCCESS)
}

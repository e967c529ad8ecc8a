//! `mlrb tasks`: list, show, check and test tasks.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Subcommand;

use super::{SandboxArgs, say, spinner};
use crate::report;
use crate::task::item::Status;
use crate::task::selftest::Report;
use crate::task::{self, Task};

/// `mlrb tasks` commands.
#[derive(Subcommand, Debug)]
pub enum TasksCommand {
    /// The built-in tasks, one line each.
    List {
        #[arg(long)]
        json: bool,
        /// Every column: version, reference, budget and description too.
        #[arg(long)]
        wide: bool,
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
        #[arg(required_unless_present = "suite", conflicts_with = "suite")]
        task: Option<String>,
        /// `mlagentbench`: where each upstream MLAgentBench folder stands (smoke
        /// profile, real data, refused), without a folder at hand.
        #[arg(long)]
        suite: Option<String>,
        #[arg(long)]
        json: bool,
        /// With --suite: each folder's full account, not its first clause.
        #[arg(long, requires = "suite")]
        wide: bool,
        /// Only look at the folder: no import probe, preparation or dry run
        /// (then it cannot be called ready).
        #[arg(long)]
        no_run: bool,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Prepare a task's data now (once per task version, then cached): with
    /// the network where the task or --network allows, or offline from models
    /// and datasets downloaded elsewhere (--from), checked against its [[sources]].
    Prepare {
        /// A built-in task name or the path of a task folder.
        task: String,
        /// A folder of downloaded models and datasets: a Hugging Face cache
        /// (HF_HOME, with hub/ and datasets/) or `save_pretrained` /
        /// `save_to_disk` folders named by hub id (DIR/owner/name[/config]).
        #[arg(long, value_name = "DIR", conflicts_with = "network")]
        from: Option<std::path::PathBuf>,
        /// Let preparation reach the network, beyond what the task grants. An
        /// upstream MLAgentBench folder whose source mlrb knows (Kaggle, the
        /// Hugging Face hub, torchvision's mirror, OGB) has its real data
        /// fetched on the host, then prepared offline; later runs use them.
        #[arg(long)]
        network: bool,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Measure a task's baseline: run its unchanged starter code in the
    /// sandbox several times and keep the mean ± standard error; improvement
    /// and success are judged against it from then on.
    Baseline {
        /// A built-in task name or the path of a task folder.
        task: String,
        /// Runs of the starter.
        #[arg(long, default_value_t = 3)]
        runs: u32,
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
        /// The smoke profile: the real preparation, starter and evaluator on
        /// the CPU, offline, against a stand-in hub of toy models and
        /// synthetic data (its scores measure nothing and never enter a bench).
        #[arg(long)]
        smoke: bool,
        /// Tasks tested at once (each runs its scripts one after another).
        #[arg(short = 'j', long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
        parallel: u16,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
}

impl TasksCommand {
    /// Runs the subcommand.
    pub async fn run(self) -> Result<ExitCode> {
        match self {
            Self::List { json, wide } => list(json, wide),
            Self::Show { task, json } => show(&task, json),
            Self::Check {
                task,
                suite,
                json,
                wide,
                no_run,
                sandbox,
            } => match (task, suite) {
                (Some(task), _) => check(&task, json, !no_run, &sandbox).await,
                (None, suite) => check_suite(suite.as_deref().unwrap_or_default(), json, wide),
            },
            Self::Prepare {
                task,
                from,
                network,
                json,
                sandbox,
            } => prepare(&task, from.as_deref(), network, json, &sandbox).await,
            Self::Baseline {
                task,
                runs,
                json,
                sandbox,
            } => baseline(&task, runs, json, &sandbox).await,
            Self::Test {
                tasks,
                suite,
                keep,
                smoke,
                parallel,
                json,
                sandbox,
            } => {
                let tasks = task::suite::chosen(&tasks, suite.as_deref())?;
                let options = Options {
                    keep,
                    smoke,
                    json,
                    parallel: parallel.into(),
                };
                test(&tasks, options, &sandbox).await
            }
        }
    }
}

fn list(json: bool, wide: bool) -> Result<ExitCode> {
    let dir = task::builtin_tasks_dir();
    let mut tasks = Vec::new();
    for loaded in task::list(&dir) {
        match loaded {
            Ok(task) => tasks.push(task),
            Err(error) => eprintln!("warning: {error:#}"),
        }
    }
    if json {
        let specs: Vec<_> = tasks.iter().map(|t| t.spec.to_json()).collect::<Result<_>>()?;
        say!("{}", serde_json::to_string_pretty(&specs)?);
    } else {
        say!("{}", report::tasks_table(&tasks, wide));
        say!("{} tasks from {}", tasks.len(), dir.display());
        if !wide {
            say!("--wide for every column; `mlrb tasks show TASK` for one task");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn show(name: &str, json: bool) -> Result<ExitCode> {
    let task = task::resolve(name)?;
    let spec = &task.spec;
    if json {
        say!("{}", serde_json::to_string_pretty(&spec.to_json()?)?);
        return Ok(ExitCode::SUCCESS);
    }
    let direction = match (spec.metric.direction_known, spec.metric.higher_is_better) {
        (false, _) => "direction unknown: declare it",
        (true, true) => "higher is better",
        (true, false) => "lower is better",
    };
    let baseline = spec.metric.baseline.map_or("none declared".into(), |b| b.to_string());
    let resources = &spec.resources;
    use std::fmt::Write as _;
    let mut out = String::new();
    writeln!(out, "{} {} — {}", spec.name, spec.version, spec.description)?;
    writeln!(out, "folder: {}", task.root.display())?;
    writeln!(out, "metric: {} ({direction}), baseline {baseline}", spec.metric.name)?;
    writeln!(out, "validate(): {}", spec.validation.describe(spec.metric.baseline))?;
    writeln!(
        out,
        "budget: {} steps, {} s wall clock",
        spec.budget.max_steps, spec.budget.wall_seconds
    )?;
    writeln!(
        out,
        "scripts: {} CPUs, {} MiB, {} processes, {} s per script",
        resources.cpus, resources.memory_mb, resources.pids, resources.script_timeout_seconds,
    )?;
    writeln!(out, "network: {}", resources.network.describe())?;
    if !spec.files.read_only.is_empty() {
        writeln!(out, "read-only: {}", spec.files.read_only.join(", "))?;
    }
    if !spec.sources.is_empty() {
        let unconfirmed = spec.sources.iter().filter(|s| s.confirmed.is_none()).count();
        writeln!(
            out,
            "sources ({} listed, {unconfirmed} not confirmed):",
            spec.sources.len()
        )?;
        for source in &spec.sources {
            writeln!(out, "  {}", source.describe())?;
        }
    }
    writeln!(out, "\n{}", spec.research_problem.trim())?;
    say!("{}", crate::columns::wrap(&out));
    Ok(ExitCode::SUCCESS)
}

async fn check(name: &str, json: bool, run: bool, sandbox: &SandboxArgs) -> Result<ExitCode> {
    let task = task::resolve(name)?;
    let runner = sandbox.runner(&task).await?;
    let bar = spinner(&format!("checking {}", task.spec.name));
    let checked = task::check::checked(&task, runner.cache_dir(), &runner.offer(), run).await;
    bar.finish_and_clear();
    if json {
        say!("{}", serde_json::to_string_pretty(&checked)?);
    } else {
        say!("{}", report::check_table(&checked.checks));
        say!("{} {}: {}", task.spec.name, task.spec.version, checked.verdict);
    }
    Ok(if checked.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `tasks check --suite mlagentbench`: the upstream folders' standing.
fn check_suite(suite: &str, json: bool, wide: bool) -> Result<ExitCode> {
    if suite != "mlagentbench" {
        bail!("--suite {suite}: `tasks check` has a table for the suite mlagentbench only; check other tasks by name");
    }
    let rows = task::mlagentbench_table::rows();
    if json {
        say!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        say!("{}", report::mlagentbench_table(&rows, wide));
        say!("upstream MLAgentBench folders (snap-stanford/MLAgentBench, MLAgentBench/benchmarks)");
        if !wide {
            say!("More: --wide (each folder's full account), --json (everything).");
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn prepare(
    name: &str,
    from: Option<&std::path::Path>,
    network: bool,
    json: bool,
    sandbox: &SandboxArgs,
) -> Result<ExitCode> {
    let mut task = task::resolve(name)?;
    task.prepare_network |= network;
    let runner = sandbox.runner(&task).await?;
    let (sandbox, cache_dir) = (runner.offer().sandbox, runner.cache_dir());
    let bar = spinner(&format!("preparing {}", task.spec.name));
    let prepared = match from {
        None => task::prepare(&task, sandbox, cache_dir).await,
        Some(from) => task::prepare_from(task.clone(), sandbox, cache_dir, from).await,
    };
    bar.finish_and_clear();
    let prepared = prepared?;
    let how = if prepared.from_cache {
        "already prepared"
    } else {
        "prepared"
    };
    if json {
        let all = serde_json::json!({ "task": task.spec.name, "version": task.spec.version,
            "key": prepared.key, "dir": prepared.dir, "from_cache": prepared.from_cache });
        say!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        say!(
            "{} {}: {how} in {}",
            task.spec.name,
            task.spec.version,
            prepared.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn baseline(name: &str, runs: u32, json: bool, sandbox: &SandboxArgs) -> Result<ExitCode> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let task = task::resolve(name)?;
    let runner = sandbox.runner(&task).await?;
    task::requirements::ensure(&task, &runner.offer()).await?;
    let bar = spinner(&task.spec.name);
    let label = task.spec.name.clone();
    let step = |what: &str| bar.set_message(format!("{label}: {what}"));
    let measured = task::baseline::measure(&task, runner.offer().sandbox, runner.cache_dir(), runs, &step).await;
    bar.finish_and_clear();
    let measured = measured?;
    if json {
        say!("{}", serde_json::to_string_pretty(&measured)?);
    } else {
        let scores: Vec<String> = measured
            .scores
            .iter()
            .map(|s| s.map_or("invalid".into(), |s| s.to_string()))
            .collect();
        say!(
            "{} {}: baseline {} {} ({})",
            measured.task,
            measured.version,
            measured.mean,
            task.spec.metric.name,
            measured.source()
        );
        say!("scores: {}", scores.join(", "));
        say!("kept in {}", task::baseline::path(&task, runner.cache_dir()).display());
    }
    Ok(ExitCode::SUCCESS)
}

/// How `mlrb tasks test` runs.
struct Options {
    keep: bool,
    smoke: bool,
    json: bool,
    parallel: usize,
}

async fn test(tasks: &[Task], options: Options, sandbox: &SandboxArgs) -> Result<ExitCode> {
    use futures_util::{StreamExt, TryStreamExt};
    let bars = indicatif::MultiProgress::new();
    // In the order given, whichever ends first.
    let reports: Vec<Report> = futures_util::stream::iter(tasks)
        .map(|task| test_one(task, &options, sandbox, &bars))
        .buffered(options.parallel)
        .try_collect()
        .await?;
    if options.json {
        say!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print_reports(&reports)?;
    }
    let passed = reports.iter().all(|r| r.passed);
    Ok(if passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// One task's quality test, its progress a line of `bars`.
async fn test_one(
    task: &Task,
    options: &Options,
    sandbox: &SandboxArgs,
    bars: &indicatif::MultiProgress,
) -> Result<Report> {
    let runner = sandbox.runner(task).await?;
    let bar = bars.add(spinner(&task.spec.name));
    let name = task.spec.name.clone();
    let step = |what: &str| bar.set_message(format!("{name}: {what}"));
    let offer = runner.offer();
    let report = task::selftest::run(task, &offer, runner.cache_dir(), options.keep, options.smoke, &step).await;
    bar.finish_and_clear();
    bars.remove(&bar);
    let report = report?;
    if !options.json {
        let verdict = if report.passed { "passed" } else { "FAILED" };
        let profile = if options.smoke { " (smoke)" } else { "" };
        bars.suspend(|| eprintln!("{} {}: {verdict}{profile}", report.task, report.version));
    }
    Ok(report)
}

fn print_reports(reports: &[Report]) -> Result<()> {
    say!("{}", report::selftest_table(reports));
    for report in reports {
        for finding in report.findings.iter().filter(|f| f.status != Status::Ok) {
            say!(
                "{} {} {}: {}",
                report.task,
                finding.status,
                finding.check,
                finding.detail
            );
        }
        if let Some(dir) = &report.work_dir {
            say!("{}: workspaces kept in {}", report.task, dir.display());
        }
    }
    let passed = reports.iter().filter(|r| r.passed).count();
    say!("{passed} of {} task(s) passed", reports.len());
    if reports.iter().any(|r| r.smoke) {
        say!("smoke profile: toy models and synthetic data from the stand-in hub; its scores measure nothing");
    }
    Ok(())
}

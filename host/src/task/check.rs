//! `mlrb tasks check`: what a task folder lacks before a run (an evaluator,
//! a research problem, prepared data, a declared baseline, what this host
//! must offer), without running the task.

use std::path::Path;

use super::item::item;
use super::item::{Item, Status};
use super::requirements::{self, HostOffer};
use super::{Layout, Prepared, Task, code_scan, mlagentbench};
use crate::relpath::read_only_glob;

/// The checks of a task and what they add up to (`tasks check --json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Checked {
    /// The task's name.
    pub task: String,
    /// No check failed.
    pub ok: bool,
    /// No check failed and the dry run scored the unchanged starter.
    pub ready: bool,
    /// What they add up to, in words.
    pub verdict: &'static str,
    /// Each check, in the order a run meets them.
    pub checks: Vec<Item>,
}

/// Every check of `task` (see [`check`]) and its verdict.
pub async fn checked(task: &Task, cache_dir: &Path, offer: &HostOffer<'_>, run: bool) -> Checked {
    let checks = check(task, cache_dir, offer, run).await;
    let failed = checks.iter().any(|i| i.status == Status::Fail);
    let ready = !failed && checks.iter().any(|i| i.check == "dry run" && i.status == Status::Ok);
    let verdict = match (failed, ready) {
        (true, _) => "not ready to run",
        (false, true) => "ready to run",
        (false, false) if !run => "not verified (--no-run: nothing was run)",
        (false, false) => "runs, but the unchanged starter's submission is invalid",
    };
    Checked {
        task: task.spec.name.clone(),
        ok: !failed,
        ready,
        verdict,
        checks,
    }
}

/// Every check of `task`, in the order a run meets them; with `run`, the
/// imports are probed in the sandbox and the task is prepared, its starter
/// run and its output scored (the dry run).
pub async fn check(task: &Task, cache_dir: &Path, offer: &HostOffer<'_>, run: bool) -> Vec<Item> {
    let mut items = static_items(task, cache_dir, offer).await;
    items.extend(super::dry_run::scoring_network(task));
    if !run {
        return items;
    }
    items.extend(super::dry_run::imports(task, offer.sandbox, cache_dir).await);
    if items.iter().any(|i| i.status == Status::Fail) {
        items.push(item(
            "dry run",
            Status::Fail,
            "not attempted: fix the failures above first",
        ));
        return items;
    }
    items.extend(super::dry_run::dry_run(task, offer.sandbox, cache_dir).await);
    items
}

/// The checks made without running anything.
async fn static_items(task: &Task, cache_dir: &Path, offer: &HostOffer<'_>) -> Vec<Item> {
    let spec = &task.spec;
    let layout = match (task.layout, &spec.scoring.evaluator) {
        (Layout::Native, _) => "mlrb task (task.toml)".to_string(),
        (Layout::MlAgentBench, None) => "MLAgentBench folder, run unchanged through the get_score adapter".to_string(),
        // Its own get_score would rank what the agent reports of itself.
        (Layout::MlAgentBench, Some(evaluator)) => {
            format!("MLAgentBench folder, scored by mlrb's evaluator {evaluator}, not its own get_score")
        }
    };
    let mut items = vec![
        item("layout", Status::Ok, layout),
        item(
            "research problem",
            Status::Ok,
            format!("{} characters", spec.research_problem.trim().len()),
        ),
        starter_item(task),
        evaluator_item(task),
        submitted_code_item(task),
        prepare_item(task, cache_dir),
    ];
    items.extend(read_only_item(task, cache_dir));
    items.extend(metric_items(task));
    items.push(validation_item(task));
    let missing = requirements::shortfalls(task, offer).await;
    if missing.is_empty() {
        items.push(item("this host", Status::Ok, "offers what the task needs"));
    }
    for shortfall in missing {
        items.push(item("this host", Status::Fail, format!("needs {}", shortfall.message)));
    }
    items
}

fn starter_item(task: &Task) -> Item {
    let env_files = walkdir::WalkDir::new(task.env_dir())
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .count();
    if task.env_dir().join("train.py").is_file() {
        let detail = format!("env/ has {env_files} file(s), train.py among them");
        return item("starter code", Status::Ok, detail);
    }
    let detail = format!("env/ has {env_files} file(s) and no train.py: `mlrb tasks test` cannot run a starter");
    item("starter code", Status::Warn, detail)
}

/// The metric, its direction, the baseline and the reference solution.
fn metric_items(task: &Task) -> Vec<Item> {
    let spec = &task.spec;
    let declare =
        "declare it in a task.toml beside the folder (layout = \"mlagentbench\") or with --metric and --direction";
    let metric = match task.layout {
        Layout::MlAgentBench if !spec.metric.direction_known => {
            let fingerprint = mlagentbench::fingerprint(&task.root);
            let why = match mlagentbench::recognise(&spec.name, &fingerprint) {
                mlagentbench::Recognised::Changed { expected, found } => format!(
                    "its files differ from the upstream MLAgentBench task `{}` (fingerprint {found}, upstream {expected}), so nothing is assumed of its metric",
                    spec.name
                ),
                _ => format!("`{}` is not an MLAgentBench task mlrb knows", spec.name),
            };
            item(
                "metric",
                Status::Warn,
                format!("{why}: its scores are reported without improvement or success; {declare}"),
            )
        }
        _ => {
            let direction = if spec.metric.higher_is_better {
                "higher"
            } else {
                "lower"
            };
            item(
                "metric",
                Status::Ok,
                format!("{} ({direction} is better)", spec.metric.name),
            )
        }
    };
    let baseline = match spec.metric.baseline {
        Some(baseline) => item(
            "baseline",
            Status::Ok,
            format!("{baseline} (tolerance {})", spec.metric.tolerance),
        ),
        None => item(
            "baseline",
            Status::Warn,
            "none declared: success (> 10 % over the baseline) cannot be judged; `mlrb tasks test` measures it",
        ),
    };
    let reference = match (task.reference_dir().is_dir(), spec.metric.reference) {
        (true, Some(score)) => item(
            "reference solution",
            Status::Ok,
            format!("scripts/reference/, scores {score}"),
        ),
        (true, None) => item(
            "reference solution",
            Status::Warn,
            "scripts/reference/ exists but metric.reference is not declared",
        ),
        (false, _) => item(
            "reference solution",
            Status::Warn,
            "none (scripts/reference/): no normalised score, and `mlrb tasks test` cannot show the task is solvable",
        ),
    };
    vec![metric, baseline, reference]
}

fn validation_item(task: &Task) -> Item {
    let detail = task.spec.validation.describe(task.spec.metric.baseline);
    item("intermediate scoring", Status::Ok, detail)
}

fn evaluator_item(task: &Task) -> Item {
    match task.layout {
        Layout::Native => item("evaluator", Status::Ok, "scripts/eval.py"),
        Layout::MlAgentBench => {
            let source = std::fs::read_to_string(task.eval_script()).unwrap_or_default();
            if source.contains("def get_score") {
                item("evaluator", Status::Ok, "scripts/eval.py defines get_score")
            } else {
                item(
                    "evaluator",
                    Status::Fail,
                    "scripts/eval.py defines no get_score(submission_folder): nothing can score a run",
                )
            }
        }
    }
}

/// Which steps run code of the agent's, and where.
fn submitted_code_item(task: &Task) -> Item {
    const STEPS: &str =
        "prepare runs the task's own code; the agent's scripts run in the episode's sandbox, without the hidden files";
    match code_scan::scan(task) {
        code_scan::Finding::Declared(how) => item(
            "submitted code",
            Status::Ok,
            format!("{STEPS}; evaluation {}", how.describe()),
        ),
        code_scan::Finding::Undeclared(signs) => item(
            "submitted code",
            Status::Warn,
            format!(
                "scripts/eval.py may run code ({}) while [scoring] submission is not \"code\": if it runs the \
                 submission's, declare submission = \"code\" and run it with mlrb_eval.run_submission, in a sandbox of its own",
                signs.join("; ")
            ),
        ),
        code_scan::Finding::InProcess(_) | code_scan::Finding::Unreadable(_) => item(
            "submitted code",
            Status::Fail,
            code_scan::refusal(task).unwrap_or_default(),
        ),
    }
}

fn prepare_item(task: &Task, cache_dir: &Path) -> Item {
    if let Some(prepared) = Prepared::existing(task, cache_dir) {
        let detail = if prepared.dir == task.root {
            "nothing to prepare, or prepared in place (scripts/prepared)".to_string()
        } else {
            format!("prepared: {}", prepared.dir.display())
        };
        return item("data", Status::Ok, detail);
    }
    let source = std::fs::read_to_string(task.prepare_script()).unwrap_or_default();
    if super::mlagentbench::known(&task.root).is_some_and(|k| k.fetch.is_some()) {
        return item(
            "data",
            Status::Warn,
            "not prepared: `mlrb tasks prepare FOLDER --network` fetches its real data on the host \
             (what it needs: `mlrb tasks check --suite mlagentbench --wide`), or prepare it by hand",
        );
    }
    if source.contains("input(") {
        return item(
            "data",
            Status::Fail,
            "not prepared, and scripts/prepare.py asks for input: prepare steps run unattended; \
             prepare the folder by hand first (MLAgentBench's prepare_task leaves scripts/prepared)",
        );
    }
    let needs_network = ["kaggle", "urlretrieve", "requests.get", "wget", "download"]
        .iter()
        .any(|s| source.contains(s));
    if needs_network && !task.spec.resources.network.granted() {
        return item(
            "data",
            Status::Warn,
            "not prepared, and scripts/prepare.py seems to download, but prepare runs without network: \
             prepare the folder by hand first",
        );
    }
    item(
        "data",
        Status::Warn,
        format!(
            "not prepared yet: the first run prepares it in the sandbox{}",
            if task.spec.resources.network.granted() {
                ""
            } else {
                " (no network)"
            }
        ),
    )
}

/// Read-only patterns that match nothing in the prepared workspace files
/// (likely a typo, leaving the data writable).
fn read_only_item(task: &Task, cache_dir: &Path) -> Option<Item> {
    let patterns = &task.spec.files.read_only;
    if patterns.is_empty() {
        return Some(item("read-only files", Status::Ok, "none declared"));
    }
    let prepared = Prepared::existing(task, cache_dir)?;
    let mut roots = vec![prepared.public.clone()];
    if !prepared.includes_env {
        roots.push(task.env_dir());
    }
    let unmatched: Vec<&str> = patterns
        .iter()
        .filter(|pattern| {
            !roots.iter().any(|root| {
                crate::relpath::ReadOnlyFiles::scan(root, std::slice::from_ref(*pattern))
                    .map(|files| files.paths().next().is_some())
                    .unwrap_or(false)
            })
        })
        .map(|p| read_only_glob(p).0)
        .collect();
    Some(if unmatched.is_empty() {
        item(
            "read-only files",
            Status::Ok,
            format!("{} pattern(s), each matching files", patterns.len()),
        )
    } else {
        item(
            "read-only files",
            Status::Warn,
            format!("pattern(s) matching no file: {}", unmatched.join(", ")),
        )
    })
}

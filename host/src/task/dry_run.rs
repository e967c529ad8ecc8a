//! The checks of `mlrb tasks check` that run things in the sandbox the
//! task will use: every Python import of the starter, the evaluator and the
//! preparation probed there, the preparation itself, and the evaluator on
//! what the unchanged starter produces. A task is "ready" only when that
//! dry run scored.

use std::path::Path;

use serde::Deserialize;

use super::check::{Item, Status};
use super::selftest::{run_starter, starter_failure};
use super::{EvalRequest, Layout, Task, evaluate, populate, prepare, pylib};
use crate::sandbox::{self, Mount, Sandbox};

/// Lists the top-level modules each script imports (by its syntax tree,
/// nothing is run) and which of them cannot be found where the task's
/// scripts run: with the task's own folders and mlrb's helpers on the path.
const IMPORT_PROBE: &str = r#"
import ast, glob, importlib.util, json, os, sys
sys.path[:0] = ["/task/env", "/task/scripts"]
report = {}
for label, pattern in (("starter", "/task/env/*.py"), ("evaluator", "/task/scripts/eval.py"), ("preparation", "/task/scripts/prepare.py")):
    names = set()
    for path in sorted(glob.glob(pattern)):
        try:
            tree = ast.parse(open(path, encoding="utf-8", errors="replace").read())
        except SyntaxError as e:
            report.setdefault(label, {})["syntax"] = f"{os.path.basename(path)}: {e.msg} (line {e.lineno})"
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    def missing(name):
        try:
            return importlib.util.find_spec(name) is None
        except Exception:
            return True
    if names:
        entry = report.setdefault(label, {})
        entry["imports"] = sorted(names)
        entry["missing"] = sorted(n for n in names if missing(n))
print(json.dumps(report))
"#;

#[derive(Debug, Default, Deserialize)]
struct Imports {
    #[serde(default)]
    imports: Vec<String>,
    #[serde(default)]
    missing: Vec<String>,
    #[serde(default)]
    syntax: Option<String>,
}

fn item(check: &'static str, status: Status, detail: impl Into<String>) -> Item {
    Item {
        check,
        status,
        detail: detail.into(),
    }
}

/// The Python imports of the task's scripts, probed in `sandbox`.
pub async fn imports(task: &Task, sandbox: &dyn Sandbox, cache_dir: &Path) -> Vec<Item> {
    let report = match probe_imports(task, sandbox, cache_dir).await {
        Ok(report) => report,
        Err(error) => return vec![item("python imports", Status::Fail, format!("{error:#}"))],
    };
    let mut items = Vec::new();
    for (label, found) in report {
        let check = match label.as_str() {
            "starter" => "imports of the starter",
            "evaluator" => "imports of the evaluator",
            _ => "imports of the preparation",
        };
        items.push(match (&found.syntax, found.missing.is_empty()) {
            (Some(error), _) => item(check, Status::Fail, format!("does not parse: {error}")),
            (None, true) => item(check, Status::Ok, format!("all found: {}", found.imports.join(", "))),
            (None, false) => item(
                check,
                Status::Fail,
                format!(
                    "missing in the sandbox: {} (add them to the image, or to resources.python_packages so hosts without them are refused)",
                    found.missing.join(", ")
                ),
            ),
        });
    }
    items
}

async fn probe_imports(
    task: &Task,
    sandbox: &dyn Sandbox,
    cache_dir: &Path,
) -> anyhow::Result<std::collections::BTreeMap<String, Imports>> {
    let (lib_mount, lib_env) = pylib::mount(cache_dir)?;
    let outcome = sandbox
        .run(sandbox::Command {
            argv: vec!["python3".into(), "-c".into(), IMPORT_PROBE.into()],
            cwd: "/task/scripts".into(),
            mounts: vec![
                Mount::read_only(task.env_dir(), "/task/env"),
                Mount::read_only(task.scripts_dir(), "/task/scripts"),
                lib_mount,
            ],
            env: vec![lib_env],
            network: sandbox::Reach::Nothing,
            limits: task.task_script_limits(std::time::Duration::from_secs(120)),
            gpus: Vec::new(),
            log_prefix: None,
            stop: Default::default(),
        })
        .await?;
    if !outcome.success() {
        anyhow::bail!(
            "python3 in the sandbox could not list the imports ({}): {}",
            outcome.describe(),
            super::evaluate::failure_cause(&outcome.stderr.text)
        );
    }
    let line = outcome.stdout.text.lines().last().unwrap_or("{}");
    Ok(serde_json::from_str(line)?)
}

/// Markers of an evaluator that fetches data when it scores.
const FETCHES: &[&str] = &[
    "download=True",
    "load_dataset(",
    "urlretrieve",
    "urlopen(",
    "requests.get",
    "wget",
    "PygNodePropPredDataset(",
    "hf_hub_download",
];

/// Whether the evaluator seems to need the network when it scores.
pub fn scoring_network(task: &Task) -> Option<Item> {
    let source = std::fs::read_to_string(task.eval_script()).unwrap_or_default();
    let found: Vec<&str> = FETCHES.iter().copied().filter(|m| source.contains(m)).collect();
    if found.is_empty() {
        return None;
    }
    let how = match task.layout {
        Layout::MlAgentBench => {
            "scoring runs without network: prepare with --network, and mlrb runs the evaluator once during \
             preparation so that what it fetches lands beside the hidden answers"
        }
        Layout::Native => "scoring runs without network: have prepare.py fetch the data into the hidden folder",
    };
    Some(item(
        "scoring-time network",
        Status::Warn,
        format!("the evaluator seems to fetch data ({}); {how}", found.join(", ")),
    ))
}

/// Prepares the task, runs the unchanged starter and scores what it left:
/// the items for the preparation and the dry run.
pub async fn dry_run(task: &Task, sandbox: &dyn Sandbox, cache_dir: &Path) -> Vec<Item> {
    let prepared = match prepare(task, sandbox, cache_dir).await {
        Ok(prepared) => prepared,
        Err(error) => return vec![item("preparation", Status::Fail, format!("{error:#}"))],
    };
    let mut items = vec![item(
        "preparation",
        Status::Ok,
        format!("prepared: {}", prepared.dir.display()),
    )];
    items.push(match starter_and_score(task, sandbox, cache_dir, &prepared).await {
        Ok(item) => item,
        Err(error) => item("dry run", Status::Fail, format!("{error:#}")),
    });
    items
}

async fn starter_and_score(
    task: &Task,
    sandbox: &dyn Sandbox,
    cache_dir: &Path,
    prepared: &super::Prepared,
) -> anyhow::Result<Item> {
    let base = cache_dir.join("task-test");
    std::fs::create_dir_all(&base)?;
    let work = tempfile::Builder::new()
        .prefix(&format!("{}-check-", task.spec.name))
        .tempdir_in(&base)?;
    let dir = work.path().join("starter");
    populate(task, prepared, &dir)?;
    if dir.join("train.py").is_file() {
        let outcome = run_starter(task, sandbox, &dir, &[]).await?;
        if !outcome.success() {
            return Ok(item("dry run", Status::Fail, starter_failure(&outcome)));
        }
    }
    let request = EvalRequest {
        workspace: &dir,
        prepared,
        cache_dir,
        log_prefix: Some(dir.with_extension("eval")),
        gpus: Vec::new(),
        timeout: None,
    };
    let evaluation = evaluate(task, sandbox, request).await?;
    let metric = &task.spec.metric.name;
    Ok(match (evaluation.evaluator_failed, evaluation.score) {
        (true, _) => item(
            "dry run",
            Status::Fail,
            evaluation.error.unwrap_or_else(|| "the evaluator failed".into()),
        ),
        (false, Some(score)) => item(
            "dry run",
            Status::Ok,
            format!("the evaluator scored the starter's output: {score} {metric}"),
        ),
        (false, None) => item(
            "dry run",
            Status::Warn,
            format!(
                "the evaluator ran, and found the starter's output invalid: {}",
                evaluation.error.unwrap_or_default()
            ),
        ),
    })
}

//! The Python imports of a task's scripts (starter, evaluator, preparation),
//! read from their syntax trees and looked up where the task's scripts run:
//! in the sandbox, with the task's own folders and mlrb's helpers on the path.

use std::path::Path;

use serde::Deserialize;

use super::{Task, pylib};
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

/// What one of the task's scripts imports.
#[derive(Debug, Default, Deserialize)]
pub struct Imports {
    /// The top-level modules it imports.
    #[serde(default)]
    pub imports: Vec<String>,
    /// Those the sandbox cannot find.
    #[serde(default)]
    pub missing: Vec<String>,
    /// Why a script does not parse.
    #[serde(default)]
    pub syntax: Option<String>,
}

/// The imports of each of the task's scripts (`starter`, `evaluator`,
/// `preparation`), probed in `sandbox`.
pub async fn probe(
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
            meter: Default::default(),
        })
        .await?;
    if !outcome.success() {
        anyhow::bail!(
            "python3 in the sandbox could not list the imports ({}): {}",
            outcome.describe(),
            super::failure::failure_cause(&outcome.stderr.text)
        );
    }
    let line = outcome.stdout.text.lines().last().unwrap_or("{}");
    Ok(serde_json::from_str(line)?)
}

/// Why the task's evaluator cannot run in `sandbox`: modules it imports
/// that are not there, or a syntax error; none when it can.
pub async fn evaluator_fault(task: &Task, sandbox: &dyn Sandbox, cache_dir: &Path) -> Option<String> {
    let report = match probe(task, sandbox, cache_dir).await {
        Ok(report) => report,
        Err(error) => return Some(format!("{error:#}")),
    };
    let found = report.get("evaluator")?;
    match (&found.syntax, found.missing.is_empty()) {
        (Some(error), _) => Some(format!("scripts/eval.py does not parse: {error}")),
        (None, false) => Some(format!(
            "the Python modules scripts/eval.py imports, which the sandbox lacks: {}",
            found.missing.join(", ")
        )),
        (None, true) => None,
    }
}

//! The smoke profile of upstream MLAgentBench folders (which ones mlrb has
//! stand-in data for is `smoke::refusal`'s; `host/python/mlrb_standin_mlab.py`
//! writes what each folder's prepare.py downloads, in its exact form): the starters
//! upstream ships as skeletons for the agent to finish, which read the
//! stand-in data and stop where the model is to be written: the stand-in
//! then writes the submission a finished one would, so that the unchanged
//! evaluator is still run on the form it reads.

use std::path::Path;

use anyhow::Result;

use super::starter::{Script, run_in_workspace, starter_failure};
use super::{Layout, Task, mlagentbench, pylib};
use crate::sandbox::{self, Sandbox};

/// The stand-in, as the sandbox sees it.
const STAND_IN: &str = "/mlrb/lib/mlrb_standin_mlab.py";

/// What upstream's skeleton starter fails with, for a folder whose
/// train.py is one.
pub fn skeleton(task: &Task) -> Option<String> {
    if task.layout != Layout::MlAgentBench || !task.smoke() {
        return None;
    }
    mlagentbench::known(&task.root)?.smoke?.skeleton
}

/// After a skeleton starter's run (`outcome`) in `dir`: how it went, and
/// the stand-in's submission written, or why the starter did not stop as
/// upstream's skeleton does.
pub async fn finish_skeleton(
    task: &Task,
    sandbox: &dyn Sandbox,
    (dir, cache_dir, gpus): (&Path, &Path, &[String]),
    outcome: &sandbox::Outcome,
    expected: &str,
) -> Result<Result<String, String>> {
    if outcome.success() {
        return Ok(Err(format!(
            "train.py is upstream's skeleton, which stops with `{expected}`, yet it ran to the end"
        )));
    }
    if !outcome.stderr.text.contains(expected) {
        return Ok(Err(format!(
            "{} (upstream's skeleton stops with `{expected}`: the stand-in data are not what it reads)",
            starter_failure(outcome)
        )));
    }
    let (lib_mount, lib_env) = pylib::mount(cache_dir)?;
    let argv = ["python3", STAND_IN, "submit", task.spec.name.as_str()]
        .map(String::from)
        .to_vec();
    let script: Script = (argv, vec![lib_mount], vec![lib_env], gpus);
    let submitted = run_in_workspace(task, sandbox, dir, script, "submit").await?;
    if !submitted.success() {
        let why = super::failure::failure_cause(&submitted.stderr.text);
        return Ok(Err(format!(
            "the stand-in's submission failed ({}): {why}",
            submitted.describe()
        )));
    }
    Ok(Ok(format!(
        "upstream's train.py is a skeleton: it read the stand-in data and stopped where the agent is to write \
         the model ({expected}); the stand-in wrote the submission a finished one would"
    )))
}

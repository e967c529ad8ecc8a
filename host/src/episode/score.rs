//! Scoring: the final snapshot (and, through `episode.validate()`, copies
//! of the current one) in a fresh sandbox that alone sees the hidden files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use super::{EpisodeRecord, Runner, ScoreRecord};
use crate::capability::episode::{Scored, ValidationPolicy, Validator};
use crate::record::snapshot;
use crate::sandbox::Sandbox;
use crate::task::{self, EvalRequest, Evaluation, Prepared, Task, requirements};

impl Runner {
    /// Scores an episode again (`mlrb eval`), holding the GPUs its task needs.
    pub async fn reevaluate(&self, task: &Task, dir: &Path, record: &EpisodeRecord) -> Result<ScoreRecord> {
        requirements::ensure(task, &self.offer()).await?;
        let lease = self.lease_gpus(task)?;
        let devices = lease.as_ref().map(|l| l.devices().to_vec()).unwrap_or_default();
        self.evaluate(task, dir, record, &devices).await
    }

    /// Scores an episode's final snapshot; `gpus` are the devices the
    /// evaluator may use (the episode's).
    pub async fn evaluate(
        &self,
        task: &Task,
        dir: &Path,
        record: &EpisodeRecord,
        gpus: &[String],
    ) -> Result<ScoreRecord> {
        self.evaluate_in(task, dir, record, gpus, dir).await
    }

    /// Scores an episode's final snapshot again without writing to its
    /// folder (`mlrb verify`): the evaluator's scratch and logs go to `work`.
    pub async fn rescore(&self, task: &Task, dir: &Path, record: &EpisodeRecord, work: &Path) -> Result<ScoreRecord> {
        requirements::ensure(task, &self.offer()).await?;
        let lease = self.lease_gpus(task)?;
        let devices = lease.as_ref().map(|l| l.devices().to_vec()).unwrap_or_default();
        self.evaluate_in(task, dir, record, &devices, work).await
    }

    async fn evaluate_in(
        &self,
        task: &Task,
        dir: &Path,
        record: &EpisodeRecord,
        gpus: &[String],
        work: &Path,
    ) -> Result<ScoreRecord> {
        let prepared = task::prepare(task, self.sandbox.as_ref(), &self.cache_dir).await?;
        let snapshots = dir.join("snapshots");
        let manifest = snapshot::latest_manifest(&snapshots)?;
        let scratch = tempfile::Builder::new().prefix(".eval-").tempdir_in(work)?;
        let final_workspace = scratch.path().join("workspace");
        snapshot::materialize_contained(&snapshots, &manifest, &final_workspace)?;
        let request = EvalRequest {
            workspace: &final_workspace,
            prepared: &prepared,
            cache_dir: &self.cache_dir,
            log_prefix: Some(work.join("eval")),
            gpus: gpus.to_vec(),
            timeout: None,
            part: task.final_part(),
        };
        let evaluation = task::evaluate(task, self.sandbox.as_ref(), request).await?;
        Ok(ScoreRecord::from_evaluation(
            task,
            record,
            (manifest.id, &manifest.root),
            evaluation,
        ))
    }

    /// How the episode may score its work as it goes, where the task allows.
    pub(super) fn validation_policy(
        &self,
        task: &Task,
        prepared: &Prepared,
        devices: &[String],
        dir: &Path,
    ) -> ValidationPolicy {
        ValidationPolicy {
            validator: Arc::new(TaskValidator {
                task: task.clone(),
                sandbox: self.sandbox.clone(),
                prepared: prepared.clone(),
                cache_dir: self.cache_dir.clone(),
                gpus: devices.to_vec(),
                log_dir: dir.join("validate"),
            }),
            hide_score: !task.spec.validation.reveals(),
            keep_score: task.spec.validation.split.is_some(),
            told_of: match task.spec.validation.part() {
                crate::task::split::Part::Public => {
                    "on the public part of the test set (the final score uses the rest)"
                }
                _ => "",
            },
            max_calls: task.spec.validation.max_calls,
        }
    }
}

/// Scores copies of an episode's workspace for `episode.validate()` with
/// the task's evaluator, like the final evaluation.
struct TaskValidator {
    task: Task,
    sandbox: Arc<dyn Sandbox>,
    prepared: Prepared,
    cache_dir: PathBuf,
    gpus: Vec<String>,
    log_dir: PathBuf,
}

#[async_trait::async_trait]
impl Validator for TaskValidator {
    async fn validate(&self, workspace_copy: &Path, number: u32, timeout: Duration) -> Result<Scored> {
        std::fs::create_dir_all(&self.log_dir)?;
        let request = EvalRequest {
            workspace: workspace_copy,
            prepared: &self.prepared,
            cache_dir: &self.cache_dir,
            log_prefix: Some(self.log_dir.join(format!("{number:04}"))),
            gpus: self.gpus.clone(),
            timeout: Some(timeout),
            part: self.task.spec.validation.part(),
        };
        let evaluation: Evaluation = task::evaluate(&self.task, self.sandbox.as_ref(), request).await?;
        Ok(Scored {
            score: evaluation.score,
            valid: evaluation.valid,
            error: evaluation.error,
            evaluator_failed: evaluation.evaluator_failed,
            told: evaluation.told,
        })
    }
}

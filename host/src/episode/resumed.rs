//! The runner's side of a resume: where an episode starts (fresh, or where
//! a dead host left it, unless that cannot be gone on from), and the store
//! of a resumed episode, answered from its records until it goes live.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::resume::{Resumable, ResumePoint, ResumeRecord, remove_records};
use super::run::{Pieces, Start, new_recorder, recorded_task};
use super::{EpisodeRecord, EpisodeRequest, Runner};
use crate::capability::AgentState;
use crate::capability::agent_log::AgentLog;
use crate::capability::recorder::Resumption;
use crate::capability::replay::Replay;
use crate::record::snapshot::{self, SnapshotStore};
use crate::record::trace::Trace;
use crate::task::Prepared;

impl Runner {
    /// The store of a resumed episode: its workspace restored from the
    /// snapshot after its last recorded call, its records going on from
    /// there, and its agent answered from them until it goes on live.
    pub(super) async fn resumed_state(
        &self,
        request: &EpisodeRequest,
        prepared: &Prepared,
        devices: &[String],
        log: &AgentLog,
        point: ResumePoint,
    ) -> Result<AgentState> {
        let (dir, limits) = (&request.dir, &request.limits);
        let (workspace, snapshots_dir) = (dir.join("workspace"), dir.join("snapshots"));
        // What the dead host's step in flight left behind goes with it.
        for partial in [&workspace, &dir.join("history")] {
            if partial.exists() {
                remove_records(partial).with_context(|| format!("clearing {}", partial.display()))?;
            }
        }
        let manifest = snapshot::read_manifest(&snapshots_dir, point.snapshot)?;
        snapshot::materialize_writable(&snapshots_dir, &manifest, &workspace)?;
        let (files, scripts, network) = self
            .files_and_scripts((dir, &request.task, limits), devices, true)
            .await?;
        // The whole budget while it replays; from going live, what is left.
        let charged = Duration::from_millis(point.resume.charged_ms);
        let started = Instant::now();
        let mut snapshots = SnapshotStore::resumed(&snapshots_dir, point.snapshot, limits)?;
        snapshots.remember_materialized(&workspace, &manifest);
        let kept = point.recording.lines.len() as u64;
        let trace = Trace::continuing(&dir.join("events.jsonl"), kept, started, limits.trace_bytes)?;
        let mut recorder = new_recorder(request, trace, snapshots, started);
        let task_info = recorded_task(&point.recording)?;
        let mark = point.mark();
        recorder.resuming(Replay::resuming(point.recording), Resumption { charged, mark })?;
        Ok(self.state(
            request,
            prepared,
            devices,
            log,
            Pieces {
                recorder,
                files,
                scripts,
                network,
            },
            task_info,
        ))
    }

    /// How `request` starts: fresh in an empty folder, or (when it may resume)
    /// where the dead host left it; records that cannot be resumed from are
    /// cleared, and the episode starts again, saying why.
    pub(super) fn start_of(&self, request: &EpisodeRequest) -> Result<Start> {
        let dir = &request.dir;
        if !request.resume {
            if dir.join("episode.json").exists() {
                bail!(
                    "{}: already holds an episode; choose another --run-name or --out",
                    dir.display()
                );
            }
            return Ok(Start::Fresh(Vec::new()));
        }
        let restart = match Resumable::read(dir) {
            Resumable::Resume(point) if point.record.agent.sha256 == request.agent.sha256 => {
                return Ok(Start::Resume(point));
            }
            Resumable::Resume(point) => Some(format!(
                "the agent changed since it ran (SHA-256 {}, now {}): its records are not this agent's",
                point.record.agent.sha256, request.agent.sha256
            )),
            Resumable::Ended(record) if record.agent.sha256 == request.agent.sha256 => {
                return Ok(Start::Ended(record));
            }
            Resumable::Ended(_) => Some("the agent changed since it ran".to_string()),
            Resumable::Nothing => None,
            Resumable::Restart(why) => Some(why),
        };
        let mut resumes = Vec::new();
        if let Some(why) = restart {
            tracing::warn!(dir = %dir.display(), %why, "the episode cannot be resumed; starting again");
            resumes = EpisodeRecord::read(dir).map(|r| r.resumes).unwrap_or_default();
            resumes.push(ResumeRecord::restarted(why));
        }
        if dir.exists() {
            remove_records(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        Ok(Start::Fresh(resumes))
    }
}

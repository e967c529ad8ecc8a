//! A person's episode made ready to work in: fresh (the task prepared, the
//! workspace made, its first snapshot and the task recorded), or a paused
//! one gone on with (the workspace from its last snapshot, the trace
//! continued, the time it used charged, the time paused not).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::super::resume::{ResumeRecord, chained_lines, remove_records, snapshot_of};
use super::super::run::{FilesAndScripts, recorded_task, task_info};
use super::super::{EpisodeRecord, Runner};
use crate::capability::agent_log::AgentLog;
use crate::capability::episode::{TaskInfoRecord, ValidationRecord};
use crate::capability::recorder::Recorder;
use crate::capability::{AgentState, Parts};
use crate::limits::Limits;
use crate::llm::LlmSource;
use crate::record::recording::Recording;
use crate::record::snapshot::{self, SnapshotStore};
use crate::record::trace::{GENESIS, Trace, line_hash};
use crate::sandbox::gpu::GpuLease;
use crate::task::overrides::Configured;
use crate::task::{self, Prepared, Task, requirements};

/// A person's episode, open.
pub struct Opened {
    pub(super) state: AgentState,
    pub(super) record: EpisodeRecord,
    pub(super) log: AgentLog,
    pub(super) task: Task,
    pub(super) limits: Limits,
    pub(super) dir: PathBuf,
    pub(super) devices: Vec<String>,
    /// Held until the episode is scored.
    pub(super) _lease: Option<GpuLease>,
    pub(super) opened_at: Instant,
}

impl Opened {
    fn new(
        state: AgentState,
        record: EpisodeRecord,
        log: AgentLog,
        (task, limits): (Task, Limits),
        dir: &Path,
        ready: Ready,
    ) -> Self {
        Self {
            state,
            record,
            log,
            task,
            limits,
            dir: dir.to_path_buf(),
            devices: ready.devices,
            _lease: ready.lease,
            opened_at: Instant::now(),
        }
    }
}

/// What both starts share: the task checked, its GPUs held, it prepared.
struct Ready {
    lease: Option<GpuLease>,
    devices: Vec<String>,
    prepared: Prepared,
}

impl Runner {
    async fn ready(&self, task: &Task) -> Result<Ready> {
        requirements::ensure(task, &self.offer()).await?;
        let lease = self.lease_gpus(task)?;
        let devices = lease.as_ref().map(|l| l.devices().to_vec()).unwrap_or_default();
        let prepared = task::prepare(task, self.sandbox.as_ref(), &self.cache_dir).await?;
        Ok(Ready {
            lease,
            devices,
            prepared,
        })
    }

    /// A fresh episode of `configured` for the person `name`, in `dir`.
    pub(super) async fn open_fresh(&self, configured: Configured, name: &str, seed: u64, dir: &Path) -> Result<Opened> {
        let Configured { task, limits } = configured;
        if dir.join("episode.json").exists() {
            bail!(
                "{}: already holds an episode; choose another --run-name or --out, or --resume it",
                dir.display()
            );
        }
        let ready = self.ready(&task).await?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        task::populate(&task, &ready.prepared, &dir.join("workspace"))?;
        let (files, scripts, network) = self
            .files_and_scripts((dir, &task, &limits), &ready.devices, false)
            .await?;
        let started = Instant::now();
        let snapshots = SnapshotStore::create(&dir.join("snapshots"), &limits)?;
        let trace = Trace::create(&dir.join("events.jsonl"), started, limits.trace_bytes)?;
        let trace = trace.keeping_objects(snapshots.objects_dir());
        let mut recorder = Recorder::new(trace, snapshots, limits.max_steps, started, started + limits.wall());
        recorder.snapshot_now(files.handle(), "start")?;
        let info = task_info(&task, &limits);
        // The limits bound in the chain: `mlrb verify` holds episode.json to them.
        let run = json!({ "task": info, "seed": seed, "person": name, "limits": limits });
        recorder.record_host("run", run);
        let mut record =
            EpisodeRecord::of_person(name, (&task, &limits), seed, &ready.prepared, self.sandbox.as_ref())?;
        record.llm = "none".into();
        record.gpus = ready.devices.clone();
        record.write(dir)?;
        let log = AgentLog::create(&dir.join("agent.log"), limits.agent_log_bytes)?;
        let parts = (files, scripts, network);
        let state = self.person_state((dir, &task, &limits), seed, &ready, &log, recorder, parts, info);
        Ok(Opened::new(state, record, log, (task, limits), dir, ready))
    }

    /// The paused episode in `dir`, gone on with.
    pub(super) async fn open_paused(&self, dir: &Path) -> Result<Opened> {
        let mut record = paused_record(dir)?;
        let task = record.load_task()?;
        if task.content_hash()? != record.task.content_hash {
            bail!(
                "{}: the task folder {} changed since the session started; it cannot go on with another task",
                dir.display(),
                task.root.display()
            );
        }
        let recording = recorded(dir)?;
        if let Some(why) = super::super::verify::check_limits(&record, &recording) {
            bail!("{}: {why}; it cannot go on under other limits", dir.display());
        }
        let limits = record.limits.clone();
        let ready = self.ready(&task).await?;
        let last = recording
            .events
            .iter()
            .rev()
            .find_map(snapshot_of)
            .with_context(|| format!("{}: its trace names no snapshot", dir.display()))?;
        let (workspace, snapshots_dir) = (dir.join("workspace"), dir.join("snapshots"));
        for stale in [&workspace, &dir.join("history")] {
            remove_records(stale).with_context(|| format!("clearing {}", stale.display()))?;
        }
        let manifest = snapshot::read_manifest(&snapshots_dir, last)?;
        snapshot::materialize_writable(&snapshots_dir, &manifest, &workspace)?;
        let parts = self
            .files_and_scripts((dir, &task, &limits), &ready.devices, true)
            .await?;
        let resume = resume_record(dir, &recording);
        let mut snapshots = SnapshotStore::resumed(&snapshots_dir, last, &limits)?;
        snapshots.remember_materialized(&workspace, &manifest);
        let recorder = continued(dir, &recording, snapshots, &limits, &resume)?;
        let info = recorded_task(&recording)?;
        record.resumes.push(resume);
        if let Some(person) = &mut record.person {
            person.paused_at = None;
        }
        record.host.process = crate::process::HostProcess::current();
        record.write(dir)?;
        let log = AgentLog::create(&dir.join("agent.log"), limits.agent_log_bytes)?;
        let mut state = self.person_state((dir, &task, &limits), record.seed, &ready, &log, recorder, parts, info);
        state.episode.restore_validations(validations(&recording));
        Ok(Opened::new(state, record, log, (task, limits), dir, ready))
    }

    /// Each interface's state, as an agent's would be (validation as the
    /// task allows it; no model).
    #[allow(clippy::too_many_arguments)]
    fn person_state(
        &self,
        (dir, task, limits): (&Path, &Task, &Limits),
        seed: u64,
        ready: &Ready,
        log: &AgentLog,
        recorder: Recorder,
        (files, scripts, network): FilesAndScripts,
        info: TaskInfoRecord,
    ) -> AgentState {
        let validation =
            (task.spec.validation.enabled).then(|| self.validation_policy(task, &ready.prepared, &ready.devices, dir));
        AgentState::new(Parts {
            limits,
            seed,
            log,
            recorder,
            files,
            scripts,
            task: info,
            validation,
            llm: LlmSource::None,
            network,
        })
    }
}

/// The record of the paused person's episode in `dir`, or why it cannot go on.
fn paused_record(dir: &Path) -> Result<EpisodeRecord> {
    let record = EpisodeRecord::read(dir)?;
    if record.person.is_none() {
        bail!(
            "{}: not a person's episode (`mlrb human` made none here); an agent's goes on with `mlrb bench --resume`",
            dir.display()
        );
    }
    if let Some(end) = &record.end {
        bail!(
            "{}: the session already ended ({}); `mlrb view` shows it",
            dir.display(),
            end.reason.name()
        );
    }
    let paused = record.person.as_ref().is_some_and(|p| p.paused_at.is_some());
    if let Some(process) = record.host.process.as_ref().filter(|p| !paused && p.alive()) {
        bail!(
            "{}: its session is open in process {}; pause it there first",
            dir.display(),
            process.pid
        );
    }
    Ok(record)
}

/// The session's trace as far as it chains: a last line its dead host
/// left half written is dropped (and cut from the file, which goes on
/// after the lines kept); a break before that is refused.
fn recorded(dir: &Path) -> Result<Recording> {
    let path = dir.join("events.jsonl");
    let text = crate::record::read_record_file(&path, crate::record::MAX_EVENTS)?;
    let (lines, events) = chained_lines(&text).with_context(|| path.display().to_string())?;
    let whole: usize = lines.iter().map(|l| l.len() + 1).sum();
    if whole != text.len() {
        let tmp = dir.join("events.jsonl.resume");
        std::fs::write(&tmp, &text.as_bytes()[..whole]).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("replacing {}", path.display()))?;
    }
    let head = lines.last().map_or(GENESIS.to_string(), |l| line_hash(l.as_bytes()));
    Ok(Recording {
        dir: dir.to_path_buf(),
        lines,
        events,
        head,
    })
}

/// This resume: the time used so far (to the last event: the pause, or
/// the last step of a session whose host died) is charged; from then to
/// now is not.
fn resume_record(dir: &Path, recording: &Recording) -> ResumeRecord {
    let events = &recording.events;
    let charged_ms = events.last().and_then(|e| e["t_ms"].as_f64()).unwrap_or(0.0) as u64;
    let paused = events
        .last()
        .is_some_and(|e| e["interface"] == "host" && e["function"] == "pause");
    let uncharged_ms = std::fs::metadata(dir.join("events.jsonl"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .map_or(0, |d| d.as_millis() as u64);
    ResumeRecord {
        at: crate::format::now_rfc3339(),
        why: if paused { "paused" } else { "host killed" }.into(),
        after_step: events.iter().filter_map(|e| e["step"].as_u64()).max().unwrap_or(0) as u32,
        kept_events: recording.lines.len() as u64,
        dropped_events: 0,
        charged_ms,
        uncharged_ms,
        restarted: None,
    }
}

/// The recorder going on after `recording`: its lines kept (the chain
/// continued from the last), its clock started `charged_ms` ago.
fn continued(
    dir: &Path,
    recording: &Recording,
    snapshots: SnapshotStore,
    limits: &Limits,
    resume: &ResumeRecord,
) -> Result<Recorder> {
    let charged = Duration::from_millis(resume.charged_ms);
    let now = Instant::now();
    let started = now.checked_sub(charged).unwrap_or(now);
    let path = dir.join("events.jsonl");
    let mut trace = Trace::continuing(&path, recording.lines.len() as u64, started, limits.trace_bytes)?;
    for (line, event) in recording.lines.iter().zip(&recording.events) {
        trace.write_recorded(line, event["seq"].as_u64().unwrap_or(0))?;
    }
    let trace = trace.keeping_objects(snapshots.objects_dir());
    let mut recorder = Recorder::new(trace, snapshots, limits.max_steps, started, started + limits.wall());
    recorder.start_at_step(resume.after_step);
    let mark = json!({
        "why": resume.why,
        "after_step": resume.after_step,
        "charged_ms": resume.charged_ms,
        "uncharged_ms": resume.uncharged_ms,
        "note": "a person's session went on where it stopped; the time it was paused is not charged",
    });
    recorder.record_host("resume", mark);
    Ok(recorder)
}

/// The validations the episode made before it was paused.
fn validations(recording: &Recording) -> Vec<ValidationRecord> {
    let kept = |e: &Value| {
        (e["interface"] == "episode" && e["function"] == "validate").then(|| e["result"]["validation"].clone())
    };
    recording
        .events
        .iter()
        .filter_map(kept)
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect()
}

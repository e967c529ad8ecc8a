//! What every interface's host code shares: the step budget, the event
//! trace (one line per call, in order) and the workspace snapshots taken
//! after calls that change files. Each interface calls it; none owns it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

pub use super::ending::{EndEpisode, Stop, end, host_fault};
use super::observed::Observed;
use super::replay::{Matched, Replay};
use super::tool_error::{ToolError, ToolResult};
use crate::record::snapshot::{Refused, SnapshotStore};
use crate::record::trace::{Event, Trace, raw};
use crate::record::walk::DirHandle;

/// Calls past an exhausted step budget that are answered with an error
/// before the episode is ended: enough for an agent to notice and return.
const CALLS_AFTER_BUDGET: u32 = 5;

/// How a tool result is recorded: `{"ok": value}` or `{"error": {...}}`.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum Recorded<'a, T> {
    Ok(&'a T),
    Error(&'a ToolError),
}

/// A tool result as the trace records it.
pub fn recorded<T: Serialize>(result: &ToolResult<T>) -> Box<RawValue> {
    match result {
        Ok(value) => raw(&Recorded::Ok(value)),
        Err(error) => raw(&Recorded::<T>::Error(error)),
    }
}

/// A recorded tool result (`{"ok": value}` or `{"error": {...}}`) back as
/// the result it was; a recording that does not parse ends a replay.
pub fn from_recorded<T: serde::de::DeserializeOwned>(recorded: Value) -> wasmtime::Result<ToolResult<T>> {
    let parsed = match recorded {
        Value::Object(mut map) if map.contains_key("ok") => {
            serde_json::from_value(map.remove("ok").unwrap_or_default()).map(Ok)
        }
        Value::Object(mut map) if map.contains_key("error") => {
            serde_json::from_value(map.remove("error").unwrap_or_default()).map(Err)
        }
        other => serde_json::from_value::<T>(other).map(Ok),
    };
    parsed.map_err(|e| end(Stop::ReplayDiverged, format!("a recorded result does not parse: {e}")))
}

/// [`recorded`] as a JSON value.
pub fn result_json<T: Serialize>(result: &ToolResult<T>) -> Value {
    serde_json::from_str(recorded(result).get()).unwrap_or(Value::Null)
}

/// The interface the host's own records (the run, snapshots, egress) go
/// under: no agent calls it.
const HOST: &str = "host";

/// One call's event before it is numbered and timed.
pub struct Call<'a> {
    /// The WIT interface called, e.g. `workspace`.
    pub interface: &'a str,
    /// The function called, as the WIT names it.
    pub function: &'a str,
    /// The step this call counted as, if it was one.
    pub step: Option<u32>,
    /// The call's arguments, as JSON.
    pub args: &'a RawValue,
    /// The call's result, as JSON.
    pub result: &'a RawValue,
    /// When the call began, for its duration.
    pub started: Instant,
    /// The snapshot taken after this call, when it changed the workspace.
    pub snapshot: Option<u64>,
    /// For `llm` calls: the provider, attempts, waiting and working time, cost.
    pub llm: Option<&'a RawValue>,
}

/// The shared bookkeeping of one episode.
pub struct Recorder {
    /// The event trace, one line per call.
    pub trace: Trace,
    /// The workspace snapshots taken so far.
    pub snapshots: SnapshotStore,
    /// When the episode started.
    pub started: Instant,
    /// When the episode's wall-clock budget runs out.
    pub deadline: Instant,
    max_steps: u32,
    steps: u32,
    refused_steps: u32,
    budget_hit: bool,
    first_call_at: Option<Instant>,
    /// Mirrors `steps` for a progress display in another task.
    progress: Option<Arc<AtomicU32>>,
    /// What the last snapshot refused, to record each change once.
    last_refused: (Vec<Refused>, Option<String>),
    /// The agent's clock reads and random bytes.
    pub observed: Observed,
    /// The agent's finished HTTP exchanges, to write as `http exchange` lines.
    pub http: super::http::exchanges::Exchanges,
    /// The recording calls are answered from, while replaying.
    replay: Option<Replay>,
    /// For a resumed episode: what to record and charge once it goes live.
    resumption: Option<Resumption>,
    /// Set when the host is stopping (SIGTERM, Ctrl-C): a call that ends
    /// after that, a script killed with the host say, is not recorded, so
    /// that a resume runs it again rather than replaying its death.
    halt: Option<tokio_util::sync::CancellationToken>,
}

/// A resumed episode's going live: the time its agent already used (the
/// clock goes on from there; the time its host was dead is not charged)
/// and the `host resume` record that marks where the live part begins.
pub struct Resumption {
    /// Wall-clock time the agent used before its host died.
    pub charged: std::time::Duration,
    /// The `host resume` event's arguments.
    pub mark: Value,
}

impl Recorder {
    /// A recorder with no steps taken, allowing `max_steps` until `deadline`.
    pub fn new(trace: Trace, snapshots: SnapshotStore, max_steps: u32, started: Instant, deadline: Instant) -> Self {
        Self {
            trace,
            snapshots,
            started,
            deadline,
            max_steps,
            steps: 0,
            refused_steps: 0,
            budget_hit: false,
            first_call_at: None,
            progress: None,
            last_refused: (Vec::new(), None),
            observed: Observed::default(),
            http: Default::default(),
            replay: None,
            resumption: None,
            halt: None,
        }
    }

    /// Waits up to `grace` for the host to stop (at once without a halt
    /// to wait for, or once it has stopped).
    pub async fn await_stop(&self, grace: std::time::Duration) {
        if let Some(halt) = &self.halt {
            let _ = tokio::time::timeout(grace, halt.cancelled()).await;
        }
    }

    /// Records no call once `halt` is cancelled (the host stopping).
    pub fn halted_by(&mut self, halt: Option<tokio_util::sync::CancellationToken>) {
        self.halt = halt;
    }

    /// Replays a dead episode's recording, then goes on live as `resumption` says.
    pub fn resuming(&mut self, replay: Replay, resumption: Resumption) -> anyhow::Result<()> {
        self.resumption = Some(resumption);
        self.replaying(replay)
    }

    /// Where a resumed episode goes live: its clock goes on from the time
    /// already charged (the dead time and the replay are not charged), its
    /// deadline moves with it, and the trace marks the place.
    fn resumed_live(&mut self) {
        let Some(resumption) = self.resumption.take() else {
            return;
        };
        let wall = self.deadline.saturating_duration_since(self.started);
        let now = Instant::now();
        self.started = now.checked_sub(resumption.charged).unwrap_or(now);
        self.deadline = self.started + wall;
        self.trace.rebase(self.started);
        self.record_host("resume", resumption.mark);
    }

    /// Answers calls from `replay` until it goes live; the recording's
    /// first records (the task, clock reads) are passed at once.
    pub fn replaying(&mut self, mut replay: Replay) -> anyhow::Result<()> {
        if !replay.live() {
            self.observed.start_replay();
            let (observed, trace) = (&self.observed, &mut self.trace);
            replay
                .pass_records(observed, &mut |line, seq| trace.write_recorded(line, seq))
                .map_err(|d| anyhow::anyhow!("{}", d.0))?;
        }
        self.replay = Some(replay);
        Ok(())
    }

    /// Whether calls are answered from a recording now.
    pub fn is_replaying(&self) -> bool {
        self.replay.as_ref().is_some_and(|r| !r.live())
    }

    /// The replay, if this episode is one (or a fork).
    pub fn replay(&self) -> Option<&Replay> {
        self.replay.as_ref()
    }

    /// Steps already taken when the episode starts (a fork's new agent
    /// starts at the step it forked at).
    pub fn start_at_step(&mut self, steps: u32) {
        self.steps = steps;
    }

    /// While replaying: the recorded answer to this call (its line copied
    /// into the trace, the step count and clocks brought along), or the
    /// end of the episode when the call is not the one recorded. `None`
    /// when calls run live.
    pub fn replayed(&mut self, (interface, function): (&str, &str), args: &Value) -> wasmtime::Result<Option<Matched>> {
        let Some(replay) = self.replay.as_mut().filter(|r| !r.live()) else {
            return Ok(None);
        };
        if let Some(why) = self.observed.diverged() {
            return Err(end(Stop::ReplayDiverged, why));
        }
        if replay.calls_left() == 0
            && let Some((stop, detail)) = replay.ending.clone()
        {
            return Err(end(stop, format!("{detail} (as recorded)")));
        }
        let (matched, line) = replay
            .matched(interface, function, args)
            .map_err(|d| end(Stop::ReplayDiverged, d.0))?;
        let seq = matched.event["seq"].as_u64().unwrap_or(0);
        self.trace
            .write_recorded(&line, seq)
            .map_err(|e| end(Stop::ReplayDiverged, e.to_string()))?;
        self.first_call_at.get_or_insert_with(Instant::now);
        // A call refused for the step budget counts as it did live.
        if matched.event["step"].is_null()
            && matched.result["error"]["kind"] == "budget-exhausted"
            && self.steps >= self.max_steps
        {
            self.budget_hit = true;
            self.refused_steps += 1;
        }
        if let Some(step) = matched.event["step"].as_u64() {
            self.steps = step as u32;
            if let Some(progress) = &self.progress {
                progress.store(self.steps, Ordering::Relaxed);
            }
        }
        if replay.live() {
            self.observed.go_live();
            self.resumed_live();
        } else {
            let (observed, trace) = (&self.observed, &mut self.trace);
            replay
                .pass_records(observed, &mut |line, seq| trace.write_recorded(line, seq))
                .map_err(|d| end(Stop::ReplayDiverged, d.0))?;
        }
        Ok(Some(matched))
    }

    /// Records what the agent observed that no call returned: the clock
    /// reads since the last call, its HTTP exchanges finished since, and
    /// (at the end) its random bytes. A replay writes none: the recorded
    /// lines are copied instead.
    pub fn record_observed(&mut self, at_end: bool) -> wasmtime::Result<()> {
        if self.is_replaying() {
            return Ok(());
        }
        if let Some(batch) = self.observed.take_batch() {
            self.write_unobserved("wasi", "clocks", batch)?;
        }
        for exchange in self.http.take() {
            self.write_unobserved("http", "exchange", exchange)?;
        }
        if at_end {
            let summary = self.observed.random_summary();
            self.write_unobserved("wasi", "random", summary)?;
        }
        Ok(())
    }

    fn write_unobserved(&mut self, interface: &str, function: &str, result: Value) -> wasmtime::Result<()> {
        let event = Event {
            prev: "",
            seq: self.trace.next_seq(),
            t_ms: self.trace.elapsed_ms(),
            interface,
            function,
            step: None,
            args: &raw(&Value::Null),
            result: &raw(&result),
            duration_us: 0,
            snapshot: None,
            llm: None,
        };
        self.trace
            .write(&event)
            .map_err(|e| host_fault("writing events.jsonl", e))
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// The step budget.
    pub fn max_steps(&self) -> u32 {
        self.max_steps
    }

    /// Whether the agent asked for a step past its budget.
    pub fn budget_hit(&self) -> bool {
        self.budget_hit
    }

    /// When the agent first called the host.
    pub fn first_call_at(&self) -> Option<Instant> {
        self.first_call_at
    }

    /// Publishes the step count to `counter` as it changes.
    pub fn report_progress(&mut self, counter: Arc<AtomicU32>) {
        self.progress = Some(counter);
    }

    /// Counts a step, or refuses it when the budget is spent (and ends the
    /// episode when the agent keeps asking).
    pub fn begin_step(&mut self) -> wasmtime::Result<ToolResult<u32>> {
        if self.steps >= self.max_steps {
            self.budget_hit = true;
            self.refused_steps += 1;
            if self.refused_steps > CALLS_AFTER_BUDGET {
                return Err(end(
                    Stop::StepBudget,
                    format!(
                        "the agent kept calling tools after its budget of {} steps was spent",
                        self.max_steps
                    ),
                ));
            }
            return Ok(Err(ToolError::BudgetExhausted(format!(
                "all {} steps of this episode are spent; return your final answer",
                self.max_steps
            ))));
        }
        self.steps += 1;
        if let Some(progress) = &self.progress {
            progress.store(self.steps, Ordering::Relaxed);
        }
        Ok(Ok(self.steps))
    }

    /// Writes one call's event; ends the episode once the trace is over
    /// its budget.
    pub fn write(&mut self, call: Call<'_>) -> wasmtime::Result<()> {
        if self.halt.as_ref().is_some_and(|h| h.is_cancelled()) {
            return Err(end(
                Stop::Interrupted,
                "the host is stopping: the call in flight is not recorded, and runs again on resume",
            ));
        }
        // What the host records of its own doing is not the agent's call.
        if call.interface != HOST {
            self.first_call_at.get_or_insert(call.started);
        }
        // Clock reads come before the call that follows them.
        self.record_observed(false)?;
        let event = Event {
            prev: "",
            seq: self.trace.next_seq(),
            t_ms: self.trace.elapsed_ms(),
            interface: call.interface,
            function: call.function,
            step: call.step,
            args: call.args,
            result: call.result,
            duration_us: call.started.elapsed().as_micros() as u64,
            snapshot: call.snapshot,
            llm: call.llm,
        };
        self.trace
            .write(&event)
            .map_err(|e| host_fault("writing events.jsonl", e))?;
        // A step is durable once its call returns: a resume starts after it.
        if call.step.is_some() {
            self.trace.sync().map_err(|e| host_fault("syncing events.jsonl", e))?;
        }
        if self.trace.spent() {
            return Err(end(
                Stop::TraceLimit,
                format!(
                    "the agent's calls filled the trace's budget of {} MiB ({} calls recorded)",
                    self.trace.budget() >> 20,
                    self.trace.events()
                ),
            ));
        }
        Ok(())
    }

    /// A call that is not a step (task, usage, notes): recorded only, and
    /// counted against the trace's budget like every other call.
    pub fn record_plain(
        &mut self,
        interface: &str,
        function: &str,
        args: Value,
        result: Value,
    ) -> wasmtime::Result<()> {
        self.write(Call {
            interface,
            function,
            step: None,
            args: &raw(&args),
            result: &raw(&result),
            started: Instant::now(),
            snapshot: None,
            llm: None,
        })
    }

    /// Records something the host did on its own (not a call of the
    /// agent's); a full trace only loses the record, with a warning.
    pub fn record_host(&mut self, function: &str, args: Value) {
        if let Err(error) = self.record_plain(HOST, function, args, Value::Null) {
            tracing::warn!(%error, function, "recording what the host did");
        }
    }

    /// Runs one synchronous workspace call as a step: budget, the call, a
    /// snapshot of `root` when it changed files, and its event.
    pub fn tool_call<T: Serialize + serde::de::DeserializeOwned>(
        &mut self,
        (interface, function): (&str, &str),
        args: Value,
        root: Option<&DirHandle>,
        call: impl FnOnce() -> ToolResult<T>,
    ) -> wasmtime::Result<ToolResult<T>> {
        if let Some(matched) = self.replayed((interface, function), &args)? {
            return from_recorded(matched.result);
        }
        let started = Instant::now();
        let (step, result) = match self.begin_step()? {
            Ok(step) => (Some(step), call()),
            Err(refused) => (None, Err(refused)),
        };
        let snapshot = match root {
            Some(root) if result.is_ok() => self.snapshot(root, &format!("step {}: {function}", step.unwrap_or(0)))?,
            _ => None,
        };
        self.write_result((interface, function), step, &args, &result, started, snapshot)?;
        Ok(result)
    }

    /// Writes the event of a call that was (or was refused as) a step.
    pub fn write_result<T: Serialize>(
        &mut self,
        (interface, function): (&str, &str),
        step: Option<u32>,
        args: &Value,
        result: &ToolResult<T>,
        started: Instant,
        snapshot: Option<u64>,
    ) -> wasmtime::Result<()> {
        self.write(Call {
            interface,
            function,
            step,
            args: &raw(args),
            result: &recorded(result),
            started,
            snapshot,
            llm: None,
        })
    }

    /// Snapshots `root` if it changed; the new snapshot's id. What the
    /// snapshot refused is recorded (a `host` event) whenever it changes.
    /// Past the snapshots' byte budget the episode ends (as `trace-limit`:
    /// the run record is full), after this snapshot is kept.
    pub fn snapshot(&mut self, root: &DirHandle, label: &str) -> wasmtime::Result<Option<u64>> {
        let taken = self
            .snapshot_now(root, label)
            .map_err(|e| host_fault("snapshot", format!("{e:#}")))?;
        if let Some(why) = self.snapshots.spent() {
            return Err(end(Stop::TraceLimit, why));
        }
        Ok(taken)
    }

    /// [`Recorder::snapshot`], for callers outside a host call.
    pub fn snapshot_now(&mut self, root: &DirHandle, label: &str) -> anyhow::Result<Option<u64>> {
        let Some(manifest) = self.snapshots.snapshot(root, label)? else {
            return Ok(None);
        };
        let id = manifest.id;
        let refused = (manifest.refused.clone(), manifest.stats.truncated.clone());
        // Each snapshot's root joins the hash chain, so no manifest can be
        // swapped for another without breaking it.
        let (label, root) = (manifest.label.clone(), manifest.root.clone());
        let bound = json!({ "id": id, "label": label, "root": root, "manifest": self.snapshots.header_hash(id) });
        if refused != self.last_refused && (!refused.0.is_empty() || refused.1.is_some()) {
            const SHOWN: usize = 20;
            let args = json!({
                "snapshot": id,
                "refused": refused.0.len(),
                "truncated": refused.1,
                "first": &refused.0[..refused.0.len().min(SHOWN)],
            });
            self.record_host("snapshot-refused", args);
        }
        self.last_refused = refused;
        self.record_host("snapshot", bound);
        Ok(Some(id))
    }

    /// What the workspace held at the last snapshot.
    pub fn used(&self) -> crate::record::walk::Usage {
        let stats = self.snapshots.last().map(|m| m.stats.clone()).unwrap_or_default();
        crate::record::walk::Usage {
            entries: stats.entries,
            bytes: stats.bytes,
            allocated_bytes: stats.allocated_bytes,
            uncounted: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's own records, written before the agent is instantiated
    /// (the run, the first snapshot), are not the agent's first call:
    /// otherwise `first_call_ms` would read 0 for every agent.
    #[test]
    fn host_records_are_not_the_agents_first_call() {
        let tmp = tempfile::tempdir().unwrap();
        let limits = crate::limits::Limits::default();
        let started = Instant::now();
        let trace = Trace::create(&tmp.path().join("events.jsonl"), started, u64::MAX).unwrap();
        let snapshots = SnapshotStore::create(&tmp.path().join("snapshots"), &limits).unwrap();
        let deadline = started + std::time::Duration::from_secs(60);
        let mut recorder = Recorder::new(trace, snapshots, 10, started, deadline);
        recorder.record_host("run", json!({ "seed": 0 }));
        assert_eq!(recorder.first_call_at(), None);
        let before = Instant::now();
        recorder
            .record_plain("episode", "note", json!({ "text": "first" }), Value::Null)
            .unwrap();
        assert!(recorder.first_call_at().is_some_and(|t| t >= before));
    }
}

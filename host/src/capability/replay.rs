//! Answering an agent's calls from a recording: every call must be the one
//! recorded next (same interface, function and arguments) and gets the
//! recorded result; the recorded line is copied into the new trace, so the
//! hash chain goes on unchanged. Clock reads between calls come from the
//! `wasi clocks` events. A fork goes live after a given step; a resumed
//! episode (its host died) goes live where its recording ends.

use serde_json::Value;

use super::observed::Observed;
use crate::record::recording::Recording;

/// A recorded call, matched: what to answer and what to copy.
pub struct Matched {
    /// The recorded result, its long strings made whole.
    pub result: Value,
    /// The recorded event, as parsed (step, snapshot, llm stats).
    pub event: Value,
}

/// Where a replay stands in its recording.
pub struct Replay {
    recording: Recording,
    next: usize,
    /// After the call that was this step, calls run live (a fork); never
    /// when `None` (a replay), unless `live_at_end`.
    live_after: Option<u32>,
    /// Calls run live once every recorded one was answered (a resume).
    live_at_end: bool,
    live: bool,
    /// The recording's calls, counted once (asking what is left is then
    /// no walk over the rest of the recording at every call).
    calls: usize,
    /// Recorded calls answered so far.
    answered: usize,
    /// How the recorded episode ended, for an agent that calls on where
    /// the recording stopped (a step budget, a full trace, the deadline).
    pub ending: Option<(super::ending::Stop, String)>,
}

/// Why a replay cannot go on.
pub struct Divergence(pub String);

impl Replay {
    /// A replay of `recording`, going live after step `live_after` if given.
    pub fn new(recording: Recording, live_after: Option<u32>) -> Self {
        let calls = (0..recording.events.len()).filter(|i| recording.is_call(*i)).count();
        Self {
            calls,
            answered: 0,
            recording,
            next: 0,
            live_after,
            live_at_end: false,
            live: live_after == Some(0),
            ending: None,
        }
    }

    /// A replay of the recording of an episode whose host died, going live
    /// after its last recorded call (which the recording must end with).
    pub fn resuming(recording: Recording) -> Self {
        Self {
            live_at_end: true,
            ..Self::new(recording, None)
        }
    }

    /// Whether calls now run live.
    pub fn live(&self) -> bool {
        self.live
    }

    /// The recording replayed.
    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    /// The non-call lines before the next call (clock batches, the host's
    /// own records): clock batches are queued for `observed`; each line is
    /// handed to `copy` with its sequence number.
    pub fn pass_records(
        &mut self,
        observed: &Observed,
        copy: &mut dyn FnMut(&str, u64) -> std::io::Result<()>,
    ) -> Result<(), Divergence> {
        while self.next < self.recording.events.len() && !self.recording.is_call(self.next) {
            let event = &self.recording.events[self.next];
            if event["interface"] == "wasi" && event["function"] == "clocks" && !observed.queue(&event["result"]) {
                return Err(Divergence(format!(
                    "recorded event {} holds clock reads that do not parse",
                    self.next + 1
                )));
            }
            let seq = event["seq"].as_u64().unwrap_or(0);
            copy(&self.recording.lines[self.next], seq)
                .map_err(|e| Divergence(format!("copying recorded event {seq}: {e}")))?;
            self.next += 1;
        }
        Ok(())
    }

    /// Matches the agent's call with the next recorded one.
    pub fn matched(&mut self, interface: &str, function: &str, args: &Value) -> Result<(Matched, String), Divergence> {
        let Some(event) = self.recording.events.get(self.next) else {
            return Err(Divergence(format!(
                "the agent called {interface}.{function} after the recording's last call"
            )));
        };
        let seq = event["seq"].as_u64().unwrap_or(0);
        let step = event["step"].as_u64().map_or(String::new(), |s| format!(" (step {s})"));
        let expected = format!(
            "{}.{} {}",
            event["interface"].as_str().unwrap_or("?"),
            event["function"].as_str().unwrap_or("?"),
            short(&event["args"])
        );
        let actual = format!("{interface}.{function} {}", short(args));
        if event["interface"] != interface || event["function"] != function || event["args"] != *args {
            return Err(Divergence(format!(
                "call {seq}{step} differs from the recording: expected {expected}, the agent called {actual}"
            )));
        }
        let result = crate::record::trace::unclip(event["result"].clone(), &self.recording.objects()).ok_or_else(|| {
            Divergence(format!("recorded event {seq}: a long string of its result is missing from the snapshot objects or was changed"))
        })?;
        let matched = Matched {
            result,
            event: event.clone(),
        };
        let line = self.recording.lines[self.next].clone();
        self.next += 1;
        if let (Some(after), Some(step)) = (self.live_after, matched.event["step"].as_u64()) {
            self.live = step >= u64::from(after);
        }
        self.answered += 1;
        if self.live_at_end && self.calls_left() == 0 {
            self.live = true;
        }
        Ok((matched, line))
    }

    /// Recorded calls answered so far.
    pub fn calls_answered(&self) -> usize {
        self.answered
    }

    /// Recorded calls the agent has not made (a replay that ends early).
    pub fn calls_left(&self) -> usize {
        self.calls - self.answered
    }
}

/// A JSON value shown in a message: at most 200 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

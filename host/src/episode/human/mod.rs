//! A person in an agent's place (`mlrb human`): an interactive session in
//! a fresh workspace of a task, each command line typed run in the task's
//! script sandbox as one step, recorded like an agent's calls (the trace,
//! snapshots, validations against the same allowance), and the final
//! workspace scored by the same evaluator on the same private part. A
//! session can be paused and gone on with; the time paused is not charged.

mod console;
mod input;
mod session;
mod start;
mod text;

use std::path::PathBuf;

use anyhow::Result;
use serde_json::json;

use super::end::EndReason;
use super::run::{Ended, close};
use super::{EpisodeRecord, Runner, ScoreRecord};
pub use console::Console;
use session::{Finish, Session};
use start::Opened;

/// Where a person's session starts.
pub enum HumanStart {
    /// A fresh episode of the configured task, for the person `name`,
    /// recorded in `dir`.
    Fresh {
        /// The task and its limits.
        configured: Box<crate::task::overrides::Configured>,
        /// The person's name (`--name`).
        name: String,
        /// The episode's seed.
        seed: u64,
        /// Where it is recorded.
        dir: PathBuf,
    },
    /// The paused episode in this folder.
    Resume(PathBuf),
}

/// How a session came out.
pub enum HumanOutcome {
    /// Paused: `mlrb human --resume` goes on with the episode in this folder.
    Paused(PathBuf),
    /// Ended and scored: its records and folder.
    Scored(Box<EpisodeRecord>, Box<ScoreRecord>, PathBuf),
}

/// The one-line error for a person's name that cannot name an episode.
pub fn check_name(name: &str) -> Result<()> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > 40 || !name.chars().all(fine) || name.starts_with('.') {
        anyhow::bail!("--name {name:?}: use 1 to 40 letters, digits, '-', '_' or '.' (not first), e.g. --name ada");
    }
    Ok(())
}

impl Runner {
    /// Runs a person's session on `console` until they submit or pause or
    /// the time is up; a session that ended is scored.
    pub async fn human(&self, start: HumanStart, console: &mut Console) -> Result<HumanOutcome> {
        let (mut opened, resumed) = match start {
            HumanStart::Fresh {
                configured,
                name,
                seed,
                dir,
            } => (self.open_fresh(*configured, &name, seed, &dir).await?, false),
            HumanStart::Resume(dir) => (self.open_paused(&dir).await?, true),
        };
        console.keep_transcript(&opened.dir.join("transcript.txt"))?;
        let info = opened.state.episode.task_info.clone();
        match resumed {
            false => console.say(&text::task_info(&info)),
            true => console.say(&format!("going on with task {} where it was paused", info.name)),
        }
        console.say(text::HELP);
        let finish = Session::new(&mut opened.state, console).run().await;
        let (reason, detail) = match finish {
            Finish::Paused => return self.pause(opened, console).await,
            Finish::Submitted => (EndReason::Completed, String::new()),
            Finish::TimeUp => (
                EndReason::Timeout,
                format!("the wall-clock budget of {} s ran out", opened.limits.wall_seconds),
            ),
            Finish::Stopped(reason, detail) => (reason, detail),
        };
        self.finish(opened, (reason, detail), console).await
    }

    /// Stops for now: the sandbox closed, the time used recorded last (what
    /// a resume charges), the record marked paused.
    async fn pause(&self, opened: Opened, console: &mut Console) -> Result<HumanOutcome> {
        let Opened {
            mut state,
            mut record,
            dir,
            ..
        } = opened;
        if let Err(error) = state.exec.runner.close().await {
            tracing::warn!(error = %format!("{error:#}"), "closing the episode's sandbox");
        }
        let charged_ms = state.recorder.started.elapsed().as_millis() as u64;
        let steps = state.recorder.steps();
        state
            .recorder
            .record_host("pause", json!({ "charged_ms": charged_ms, "steps": steps }));
        state.recorder.trace.finish()?;
        if let Some(person) = &mut record.person {
            person.paused_at = Some(crate::format::now_rfc3339());
        }
        record.write(&dir)?;
        console.say(&format!(
            "paused after {} of wall-clock time; go on with: mlrb human --resume {}",
            text::duration(std::time::Duration::from_millis(charged_ms)),
            dir.display()
        ));
        Ok(HumanOutcome::Paused(dir))
    }

    /// Ends the episode as an agent's ends (the final snapshot, the
    /// records), then scores it with the task's evaluator.
    async fn finish(
        &self,
        opened: Opened,
        (reason, detail): (EndReason, String),
        console: &mut Console,
    ) -> Result<HumanOutcome> {
        let Opened {
            state,
            mut record,
            log,
            task,
            limits,
            dir,
            devices,
            _lease,
            opened_at,
        } = opened;
        let name = record.person.as_ref().map(|p| p.name.clone()).unwrap_or_default();
        let answer = (reason == EndReason::Completed).then(|| format!("submitted by {name}"));
        let ended = Ended { reason, detail, answer };
        record.finish(close(state, ended, &limits, &log, opened_at).await?);
        record.write(&dir)?;
        console.say("scoring the final workspace with the task's evaluator ...");
        let score = self.evaluate(&task, &dir, &record, &devices).await?;
        score.write(&dir)?;
        Ok(HumanOutcome::Scored(Box::new(record), Box::new(score), dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_must_be_one_plain_path_component() {
        for fine in ["ada", "Ada.Lovelace", "a_1-b"] {
            assert!(check_name(fine).is_ok(), "{fine}");
        }
        for bad in ["", "../x", "a/b", ".hidden", "a b", &"x".repeat(41)] {
            let error = check_name(bad).unwrap_err().to_string();
            assert!(error.starts_with("--name") && !error.contains('\n'), "{error}");
        }
    }
}

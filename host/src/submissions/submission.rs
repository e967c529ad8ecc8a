//! A submission and its life: queued on upload (or refused there, with
//! the reason), running, then ranked, failed or held for review; an
//! organiser may withdraw, invalidate or re-run it. Each change of state is
//! checked against what may follow what, and audited.

use anyhow::{Result, bail};
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use super::accounts::Submitter;
use super::audit;
use super::quota::{Exceeded, Quota};
use super::store::{Store, now_ms};

/// Where a submission is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Refused on upload (the component asks for what the host will not grant).
    Refused,
    /// Waiting for workers.
    Queued,
    /// Its episodes are running.
    Running,
    /// Ran; its records are being scanned and verified.
    Scoring,
    /// Flagged by the scan: an organiser looks before it is ranked.
    Held,
    /// On the leaderboard.
    Ranked,
    /// Could not be run or scored (the reason says which).
    Failed,
    /// Taken off by its submitter or an organiser.
    Withdrawn,
    /// Found to break the rules: kept, never ranked.
    Invalidated,
}

impl State {
    /// The name the API and the audit log use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Refused => "refused",
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Scoring => "scoring",
            Self::Held => "held",
            Self::Ranked => "ranked",
            Self::Failed => "failed",
            Self::Withdrawn => "withdrawn",
            Self::Invalidated => "invalidated",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        ALL.iter().copied().find(|s| s.name() == name)
    }

    /// Whether a submission in this state takes a worker's time.
    pub fn in_flight(self) -> bool {
        matches!(self, Self::Queued | Self::Running | Self::Scoring)
    }

    /// Whether `self` may become `next`. A re-run (an organiser's) puts a
    /// finished submission back in the queue.
    pub fn may_become(self, next: Self) -> bool {
        use State::*;
        matches!(
            (self, next),
            (Queued, Running)
                | (Running, Scoring)
                | (Scoring, Held | Ranked)
                | (Queued | Running | Scoring, Failed)
                | (Held, Ranked)
                | (Ranked | Failed | Held | Invalidated, Queued)
                | (
                    Queued | Running | Scoring | Held | Ranked | Failed,
                    Withdrawn | Invalidated
                )
        )
    }
}

const ALL: [State; 9] = [
    State::Refused,
    State::Queued,
    State::Running,
    State::Scoring,
    State::Held,
    State::Ranked,
    State::Failed,
    State::Withdrawn,
    State::Invalidated,
];

/// A submission, as its submitter and the organisers see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Submission {
    /// Its id.
    pub id: i64,
    /// Who submitted it.
    pub submitter: String,
    /// The benchmark and version it was submitted to.
    pub benchmark: String,
    /// The benchmark's version.
    pub version: String,
    /// The component's SHA-256.
    pub agent_sha256: String,
    /// The component's size in bytes.
    pub agent_bytes: u64,
    /// The name its results go by (the submitter's choice).
    pub agent: String,
    /// Where it is.
    pub state: State,
    /// Why it is there, where that needs saying.
    pub reason: Option<String>,
    /// When it was uploaded, in ms since the Unix epoch.
    pub created_ms: i64,
}

/// What an upload is, once read and hashed.
#[derive(Debug, Clone)]
pub struct Upload<'a> {
    /// The benchmark and its version.
    pub benchmark: (&'a str, &'a str),
    /// The component's SHA-256.
    pub agent_sha256: &'a str,
    /// Its size.
    pub agent_bytes: u64,
    /// The name its results go by.
    pub agent_name: &'a str,
    /// Why the host refuses it, if it does (`mlrb agent check`'s reasons).
    pub refused: Option<String>,
}

const COLUMNS: &str = "s.id, u.name, s.benchmark, s.version, s.agent_sha256, s.agent_bytes, s.state, s.reason, s.created_ms, s.agent_name";

impl Store {
    /// Whether `who` may submit now under `quota`, asked before an upload's
    /// body is read (and asked again, atomically, when it is recorded).
    /// A refusal is audited as `submit`'s is.
    pub fn may_submit(&self, who: &Submitter, quota: &Quota) -> Result<Result<(), Exceeded>> {
        self.change(|tx| {
            let verdict = quota.check(tx, who.id, now_ms())?;
            if let Err(exceeded) = &verdict {
                audit::append(
                    tx,
                    &actor(who),
                    "refused-quota",
                    &format!("submitter:{}", who.name),
                    &exceeded.why,
                )?;
            }
            Ok(verdict)
        })
    }

    /// Records an upload: refused or queued, counted against `quota` either
    /// way, or not recorded at all when the quota is exceeded (checked and
    /// recorded in one transaction, so two uploads at once cannot both
    /// take the last place).
    pub fn submit(&self, who: &Submitter, upload: &Upload<'_>, quota: &Quota) -> Result<Result<Submission, Exceeded>> {
        self.change(|tx| {
            if let Err(exceeded) = quota.check(tx, who.id, now_ms())? {
                audit::append(tx, &actor(who), "refused-quota", &format!("submitter:{}", who.name), &exceeded.why)?;
                return Ok(Err(exceeded));
            }
            let state = if upload.refused.is_some() { State::Refused } else { State::Queued };
            tx.execute(
                "INSERT INTO submissions (submitter, benchmark, version, agent_sha256, agent_bytes, state, reason, created_ms, agent_name)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    who.id,
                    upload.benchmark.0,
                    upload.benchmark.1,
                    upload.agent_sha256,
                    upload.agent_bytes as i64,
                    state.name(),
                    upload.refused,
                    now_ms(),
                    upload.agent_name
                ],
            )?;
            let id = tx.last_insert_rowid();
            let detail = format!("{} {} sha256:{} {}", upload.benchmark.0, upload.benchmark.1, upload.agent_sha256, state.name());
            audit::append(tx, &actor(who), "submitted", &format!("submission:{id}"), &detail)?;
            Ok(Ok(get(tx, id)?.expect("the row just written")))
        })
    }

    /// Moves submission `id` to `next` (when that may follow), saying why.
    pub fn set_state(&self, id: i64, next: State, why: &str, actor: &str) -> Result<Submission> {
        self.change(|tx| {
            let Some(current) = get(tx, id)? else {
                bail!("no submission {id}");
            };
            if !current.state.may_become(next) {
                bail!(
                    "submission {id} is {}: it cannot become {}",
                    current.state.name(),
                    next.name()
                );
            }
            tx.execute(
                "UPDATE submissions SET state = ?1, reason = ?2 WHERE id = ?3",
                params![next.name(), (!why.is_empty()).then_some(why), id],
            )?;
            let stamp = match next {
                State::Running => Some("started_ms"),
                State::Ranked | State::Failed | State::Held => Some("finished_ms"),
                _ => None,
            };
            if let Some(column) = stamp {
                tx.execute(
                    &format!("UPDATE submissions SET {column} = ?1 WHERE id = ?2"),
                    params![now_ms(), id],
                )?;
            }
            let detail = format!("{} → {}: {why}", current.state.name(), next.name());
            audit::append(tx, actor, "changed-state", &format!("submission:{id}"), &detail)?;
            Ok(get(tx, id)?.expect("the row just changed"))
        })
    }

    /// Submission `id`, if `who` may see it: their own, or any for an admin.
    pub fn submission(&self, id: i64, who: &Submitter) -> Result<Option<Submission>> {
        let found = self.read(|db| get(db, id))?;
        Ok(found.filter(|s| who.admin || s.submitter == who.name))
    }

    /// `who`'s submissions (every one, for an admin), newest first.
    pub fn submissions(&self, who: &Submitter) -> Result<Vec<Submission>> {
        self.read(|db| {
            let sql = format!(
                "SELECT {COLUMNS} FROM submissions s JOIN submitters u ON u.id = s.submitter
                 WHERE ?1 OR s.submitter = ?2 ORDER BY s.id DESC"
            );
            let mut statement = db.prepare(&sql)?;
            let rows = statement.query_map(params![who.admin, who.id], row)?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
    }
}

impl Store {
    /// Submission `id`, whoever's it is (for the service itself).
    pub fn any_submission(&self, id: i64) -> Result<Option<Submission>> {
        self.read(|db| get(db, id))
    }

    /// Every submission now in one of `states`, oldest first; only those
    /// of one benchmark version when `of` names it.
    pub fn in_states(&self, states: &[State], of: Option<(&str, &str)>) -> Result<Vec<Submission>> {
        let names: Vec<&str> = states.iter().map(|s| s.name()).collect();
        self.read(|db| {
            let sql = format!(
                "SELECT {COLUMNS} FROM submissions s JOIN submitters u ON u.id = s.submitter
                 WHERE s.state IN (SELECT value FROM json_each(?1))
                 AND (?2 IS NULL OR (s.benchmark = ?2 AND s.version = ?3)) ORDER BY s.id"
            );
            let mut statement = db.prepare(&sql)?;
            let (name, version) = of.unzip();
            let rows = statement.query_map(params![serde_json::to_string(&names)?, name, version], row)?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
    }
}

/// How the audit log names a submitter acting.
pub fn actor(who: &Submitter) -> String {
    let role = if who.admin { "admin" } else { "submitter" };
    format!("{role}:{}", who.name)
}

fn get(db: &Connection, id: i64) -> Result<Option<Submission>> {
    let sql = format!("SELECT {COLUMNS} FROM submissions s JOIN submitters u ON u.id = s.submitter WHERE s.id = ?1");
    Ok(db.query_row(&sql, [id], row).optional()?)
}

fn row(r: &Row<'_>) -> rusqlite::Result<Submission> {
    let state: String = r.get(6)?;
    Ok(Submission {
        id: r.get(0)?,
        submitter: r.get(1)?,
        benchmark: r.get(2)?,
        version: r.get(3)?,
        agent_sha256: r.get(4)?,
        agent_bytes: r.get::<_, i64>(5)? as u64,
        state: State::parse(&state).unwrap_or(State::Failed),
        reason: r.get(7)?,
        created_ms: r.get(8)?,
        agent: r.get(9)?,
    })
}

impl Store {
    /// Adds what submission `id`'s episodes used to what counts against
    /// its submitter's quota.
    pub fn add_usage(&self, id: i64, agent_seconds: f64, llm_usd: f64) -> Result<()> {
        self.change(|tx| {
            tx.execute(
                "UPDATE submissions SET agent_seconds = agent_seconds + ?1, llm_usd = llm_usd + ?2 WHERE id = ?3",
                params![agent_seconds, llm_usd, id],
            )?;
            Ok(())
        })
    }
}

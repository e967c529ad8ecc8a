//! What each submitter may use: submissions a day, episodes in flight,
//! agent-hours and LLM dollars a day, and a cooldown between submissions.
//! Every submission that was recorded counts, refused or failed alike:
//! probing the hidden set costs the same as a real attempt.

use anyhow::Result;
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

const DAY_MS: i64 = 24 * 3600 * 1000;

/// A submitter's allowance (a benchmark's `[quota]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Quota {
    /// Submissions in any 24 hours.
    pub per_day: u32,
    /// Submissions queued or running at once.
    pub in_flight: u32,
    /// Agent wall-clock hours in any 24 hours.
    pub agent_hours_per_day: f64,
    /// LLM spending in any 24 hours, in US dollars.
    pub llm_usd_per_day: f64,
    /// Seconds between two submissions.
    pub cooldown_seconds: u64,
}

impl Default for Quota {
    fn default() -> Self {
        Self {
            per_day: 5,
            in_flight: 1,
            agent_hours_per_day: 24.0,
            llm_usd_per_day: 10.0,
            cooldown_seconds: 60,
        }
    }
}

/// Why a submission is not taken now, and when it would be.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exceeded {
    /// What was exceeded, in one line.
    pub why: String,
    /// Seconds until a submission would be taken (for `Retry-After`).
    pub retry_after: u64,
}

/// What a submitter has used.
struct Used {
    today: u32,
    in_flight: u32,
    agent_hours: f64,
    llm_usd: f64,
    last_ms: Option<i64>,
    oldest_today_ms: Option<i64>,
}

impl Quota {
    /// Whether submitter `id` may submit at `now_ms`.
    pub(super) fn check(&self, db: &Connection, id: i64, now_ms: i64) -> Result<Result<(), Exceeded>> {
        let used = used(db, id, now_ms)?;
        let until_a_day_passes = used
            .oldest_today_ms
            .map_or(0, |t| ((t + DAY_MS - now_ms).max(0) / 1000) as u64);
        let exceeded = |why: String, retry_after: u64| Ok(Err(Exceeded { why, retry_after }));
        if let Some(last) = used.last_ms {
            let wait = (last + self.cooldown_seconds as i64 * 1000 - now_ms).max(0) as u64;
            if wait > 0 {
                let why = format!(
                    "one submission per {} s: wait {} s",
                    self.cooldown_seconds,
                    wait.div_ceil(1000)
                );
                return exceeded(why, wait.div_ceil(1000));
            }
        }
        if used.today >= self.per_day {
            return exceeded(
                format!("{} submissions in 24 hours, the most allowed", used.today),
                until_a_day_passes,
            );
        }
        if used.in_flight >= self.in_flight {
            let why = format!(
                "{} submission(s) still running, the most allowed at once",
                used.in_flight
            );
            return exceeded(why, 60);
        }
        if used.agent_hours >= self.agent_hours_per_day {
            let why = format!("{:.1} agent-hours used in 24 hours, the most allowed", used.agent_hours);
            return exceeded(why, until_a_day_passes);
        }
        if used.llm_usd >= self.llm_usd_per_day {
            let why = format!("${:.2} of LLM calls in 24 hours, the most allowed", used.llm_usd);
            return exceeded(why, until_a_day_passes);
        }
        Ok(Ok(()))
    }
}

fn used(db: &Connection, id: i64, now_ms: i64) -> Result<Used> {
    let since = now_ms - DAY_MS;
    let (today, agent_seconds, llm_usd, oldest): (u32, f64, f64, Option<i64>) = db.query_row(
        "SELECT COUNT(*), COALESCE(SUM(agent_seconds), 0), COALESCE(SUM(llm_usd), 0), MIN(created_ms)
         FROM submissions WHERE submitter = ?1 AND created_ms > ?2",
        params![id, since],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    let in_flight: u32 = db.query_row(
        "SELECT COUNT(*) FROM submissions WHERE submitter = ?1 AND state IN ('queued', 'running', 'scoring')",
        [id],
        |r| r.get(0),
    )?;
    let last_ms: Option<i64> = db.query_row(
        "SELECT MAX(created_ms) FROM submissions WHERE submitter = ?1",
        [id],
        |r| r.get(0),
    )?;
    Ok(Used {
        today,
        in_flight,
        agent_hours: agent_seconds / 3600.0,
        llm_usd,
        last_ms,
        oldest_today_ms: oldest,
    })
}

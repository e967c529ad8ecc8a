//! The audit log: one line per change of state (who, what, to what, why),
//! written in the same transaction as the change; the database refuses to
//! change or remove a line.

use anyhow::Result;
use rusqlite::{Connection, Transaction, params};
use serde::Serialize;

use super::store::{Store, now_ms};

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    /// When, in ms since the Unix epoch.
    pub at_ms: i64,
    /// Who: `submitter:<name>`, `admin:<name>` or `service`.
    pub actor: String,
    /// What was done, e.g. `submitted`, `revoked-token`.
    pub action: String,
    /// To what, e.g. `submission:12`, `token:ab12cd34`.
    pub subject: String,
    /// Why, or what else a reader needs.
    pub detail: String,
}

/// Appends a line within the change's transaction.
pub(super) fn append(tx: &Transaction<'_>, actor: &str, action: &str, subject: &str, detail: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO audit (at_ms, actor, action, subject, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![now_ms(), actor, action, subject, detail],
    )?;
    Ok(())
}

impl Store {
    /// The audit log, oldest first.
    pub fn audit_log(&self) -> Result<Vec<Line>> {
        self.read(lines)
    }
}

fn lines(db: &Connection) -> Result<Vec<Line>> {
    let mut statement = db.prepare("SELECT at_ms, actor, action, subject, detail FROM audit ORDER BY id")?;
    let rows = statement.query_map([], |row| {
        Ok(Line {
            at_ms: row.get(0)?,
            actor: row.get(1)?,
            action: row.get(2)?,
            subject: row.get(3)?,
            detail: row.get(4)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

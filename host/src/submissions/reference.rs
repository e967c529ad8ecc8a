//! People's runs as references on a benchmark version's board: what the
//! database keeps of each (`person_references`), added in one transaction
//! with its audit line. Never a submission: no submitter, no quota, no rank.

use anyhow::{Result, bail};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::audit;
use super::store::{Store, now_ms};
use super::verdict::Verdict;

/// A person's run on a benchmark version, added by the organisers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reference {
    /// Its id (its subject in the audit log: `reference:<id>`).
    pub id: i64,
    /// The benchmark's name.
    pub benchmark: String,
    /// Its version.
    pub version: String,
    /// The person's name (their episodes' `human:NAME`).
    pub name: String,
    /// What checking its records found.
    pub verdict: Verdict,
    /// When it was added, in ms since the Unix epoch.
    pub created_ms: i64,
}

impl Store {
    /// Adds `name`'s run on `benchmark`/`version` with its verdict, audited
    /// as `actor`; a second run of one name on one version is refused.
    pub fn add_reference(
        &self,
        (benchmark, version): (&str, &str),
        name: &str,
        verdict: &Verdict,
        actor: &str,
    ) -> Result<Reference> {
        self.change(|tx| {
            let there: Option<i64> = tx
                .query_row(
                    "SELECT id FROM person_references WHERE benchmark = ?1 AND version = ?2 AND name = ?3",
                    params![benchmark, version, name],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(id) = there {
                bail!("{benchmark}/{version} already has a reference of {name} (reference {id}): choose another --name");
            }
            let created_ms = now_ms();
            // Never an id a removed reference had: the audit log and links name it.
            let id: i64 = tx.query_row(
                "SELECT 1 + MAX(COALESCE((SELECT MAX(id) FROM person_references), 0),
                                COALESCE((SELECT MAX(CAST(substr(subject, 11) AS INTEGER)) FROM audit
                                          WHERE subject LIKE 'reference:%'), 0))",
                [],
                |r| r.get(0),
            )?;
            tx.execute(
                "INSERT INTO person_references (id, benchmark, version, name, review_flags, info_flags, verify, created_ms)
                 VALUES (?8, ?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    benchmark,
                    version,
                    name,
                    verdict.review_flags as i64,
                    verdict.info_flags as i64,
                    verdict.verify,
                    created_ms,
                    id
                ],
            )?;
            let detail = format!(
                "human:{name} on {benchmark}/{version}, a person's reference (not a submission); {}; {} flag(s) for review",
                verdict.verify, verdict.review_flags
            );
            audit::append(tx, actor, "added-reference", &format!("reference:{id}"), &detail)?;
            Ok(Reference {
                id,
                benchmark: benchmark.into(),
                version: version.into(),
                name: name.into(),
                verdict: verdict.clone(),
                created_ms,
            })
        })
    }

    /// Takes `name`'s run off `benchmark`/`version`, audited as `actor`;
    /// an unknown name is refused, naming those there are.
    pub fn remove_reference(&self, (benchmark, version): (&str, &str), name: &str, actor: &str) -> Result<Reference> {
        let there = self.references(benchmark, version)?;
        let Some(reference) = there.iter().find(|r| r.name == name).cloned() else {
            let names: Vec<&str> = there.iter().map(|r| r.name.as_str()).collect();
            bail!(
                "{benchmark}/{version} has no reference of {name} (its references: {}): see the board's \"References: people\"",
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            );
        };
        self.change(|tx| {
            let removed = tx.execute(
                "DELETE FROM person_references WHERE id = ?1 AND name = ?2",
                params![reference.id, name],
            )?;
            if removed != 1 {
                bail!("{benchmark}/{version}: the reference of {name} was removed meanwhile");
            }
            let detail = format!("human:{name} taken off {benchmark}/{version} (a person's reference)");
            audit::append(
                tx,
                actor,
                "removed-reference",
                &format!("reference:{}", reference.id),
                &detail,
            )?;
            Ok(())
        })?;
        Ok(reference)
    }

    /// The reference with id `id`, if there is one.
    pub fn reference(&self, id: i64) -> Result<Option<Reference>> {
        let Some((benchmark, version)) = self.read(|db| {
            Ok(db
                .query_row(
                    "SELECT benchmark, version FROM person_references WHERE id = ?1",
                    params![id],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
                )
                .optional()?)
        })?
        else {
            return Ok(None);
        };
        Ok(self.references(&benchmark, &version)?.into_iter().find(|r| r.id == id))
    }

    /// The references of `benchmark`/`version`, oldest first.
    pub fn references(&self, benchmark: &str, version: &str) -> Result<Vec<Reference>> {
        self.read(|db| {
            let mut statement = db.prepare(
                "SELECT id, name, review_flags, info_flags, verify, created_ms FROM person_references
                 WHERE benchmark = ?1 AND version = ?2 ORDER BY id",
            )?;
            let rows = statement.query_map(params![benchmark, version], |r| {
                Ok(Reference {
                    id: r.get(0)?,
                    benchmark: benchmark.into(),
                    version: version.into(),
                    name: r.get(1)?,
                    verdict: Verdict {
                        review_flags: r.get::<_, i64>(2)? as usize,
                        info_flags: r.get::<_, i64>(3)? as usize,
                        verify: r.get(4)?,
                    },
                    created_ms: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
    }
}

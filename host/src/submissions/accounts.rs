//! Submitters and their tokens. A token is shown once, when it is made
//! (`mlrbs_<id>_<secret>`, 256 random bits); the database keeps its id and
//! a keyed BLAKE3 of it under the service's token key (a file beside the
//! database, `<name>.token-key`), so a copy of the database opens no
//! account and checking a token, known or not, costs microseconds: a
//! flood of bogus tokens costs the service no more than it costs whoever
//! sends it. Tokens made before this (argon2 hashes) keep working and are
//! re-stored keyed the first time they are used.

use anyhow::{Result, bail};
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordVerifier};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::audit;
use super::store::{Store, now_ms};

/// Whoever submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Submitter {
    /// The database's id.
    pub id: i64,
    /// The name the leaderboard shows.
    pub name: String,
    /// May revoke, re-run, withdraw and invalidate.
    pub admin: bool,
}

/// A token, as its owner is shown it once.
#[derive(Debug, Clone)]
pub struct Token {
    /// Its public id (what the audit log names).
    pub id: String,
    /// The whole token, secret included.
    pub secret: String,
}

/// Why a presented token opens nothing; its message is the 401's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not a token of this service (or a wrong secret).
    Invalid,
    /// Revoked by an organiser.
    Revoked,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Invalid => "the token is not valid: pass the one `mlrb submissions` gave you",
            Self::Revoked => "the token was revoked: ask the organisers for a new one",
        })
    }
}

const PREFIX: &str = "mlrbs_";

impl Store {
    /// A new submitter and its first token; `actor` is who made it.
    pub fn add_submitter(&self, name: &str, admin: bool, actor: &str) -> Result<(Submitter, Token)> {
        check_name(name)?;
        self.change(|tx| {
            let exists: Option<i64> = tx
                .query_row("SELECT id FROM submitters WHERE name = ?1", [name], |r| r.get(0))
                .optional()?;
            if exists.is_some() {
                bail!("a submitter is already named `{name}`: choose another name");
            }
            tx.execute(
                "INSERT INTO submitters (name, admin, created_ms) VALUES (?1, ?2, ?3)",
                params![name, admin, now_ms()],
            )?;
            let submitter = Submitter {
                id: tx.last_insert_rowid(),
                name: name.to_string(),
                admin,
            };
            let token = insert_token(self, tx, submitter.id)?;
            let role = if admin { "admin" } else { "submitter" };
            audit::append(tx, actor, "added-submitter", &format!("submitter:{name}"), role)?;
            audit::append(tx, actor, "issued-token", &format!("token:{}", token.id), name)?;
            Ok((submitter, token))
        })
    }

    /// Another token for the submitter `name`.
    pub fn issue_token(&self, name: &str, actor: &str) -> Result<Token> {
        self.change(|tx| {
            let Some(id) = tx
                .query_row("SELECT id FROM submitters WHERE name = ?1", [name], |r| {
                    r.get::<_, i64>(0)
                })
                .optional()?
            else {
                bail!("no submitter is named `{name}`");
            };
            let token = insert_token(self, tx, id)?;
            audit::append(tx, actor, "issued-token", &format!("token:{}", token.id), name)?;
            Ok(token)
        })
    }

    /// Revokes the token `id`: it opens nothing from now on.
    pub fn revoke_token(&self, id: &str, actor: &str, why: &str) -> Result<()> {
        self.change(|tx| {
            let changed = tx.execute(
                "UPDATE tokens SET revoked_ms = ?1 WHERE id = ?2 AND revoked_ms IS NULL",
                params![now_ms(), id],
            )?;
            if changed == 0 {
                bail!("no token `{id}` that is not revoked already");
            }
            audit::append(tx, actor, "revoked-token", &format!("token:{id}"), why)
        })
    }

    /// The submitter a presented token belongs to. A token is a random
    /// secret, so its keyed hash is looked up directly: a check costs the
    /// same microseconds whether the token, or its id, exists or not. A
    /// token stored before keyed hashes (an argon2 hash) is checked the old
    /// way, one at a time, and stored keyed once it matched.
    pub fn authenticate(&self, presented: &str) -> Result<Result<Submitter, Refused>> {
        let keyed = self.token_hash(presented);
        let found = self.read(|db| Ok(db.query_row(BY_HASH, [&keyed], holder).optional()?))?;
        let found = match found {
            Some((stored, holder)) if constant_time_eq(stored.as_bytes(), keyed.as_bytes()) => Some(holder),
            _ => self.legacy(presented, &keyed)?,
        };
        Ok(match found {
            Some(Holder { revoked: Some(_), .. }) => Err(Refused::Revoked),
            Some(Holder { submitter, .. }) => Ok(submitter),
            None => Err(Refused::Invalid),
        })
    }

    /// A token of the id `presented` names whose row still holds an argon2
    /// hash: checked against it and, if it matches, stored as `keyed`.
    fn legacy(&self, presented: &str, keyed: &str) -> Result<Option<Holder>> {
        let id = presented
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('_'))
            .map(|(id, _)| id.to_string())
            .unwrap_or_default();
        let query = format!("{HOLDER} WHERE t.id = ?1 AND t.hash LIKE '$argon2%'");
        let Some((stored, holder)) = self.read(|db| Ok(db.query_row(&query, [&id], holder).optional()?))? else {
            return Ok(None);
        };
        let _one = self.legacy_checks.lock().unwrap_or_else(|e| e.into_inner());
        if !argon2_matches(presented, &stored) {
            return Ok(None);
        }
        self.change(|tx| {
            tx.execute("UPDATE tokens SET hash = ?1 WHERE id = ?2", params![keyed, id])?;
            Ok(())
        })?;
        Ok(Some(holder))
    }

    /// How a token is stored: its keyed BLAKE3 under the service's token
    /// key, so a copy of the database alone opens no account.
    fn token_hash(&self, token: &str) -> String {
        format!(
            "{KEYED}{}",
            blake3::keyed_hash(&self.token_key, token.as_bytes()).to_hex()
        )
    }
}

/// A stored token's marker: a keyed BLAKE3 of the whole token.
const KEYED: &str = "blake3-keyed:";

/// A token's row with its submitter.
const HOLDER: &str = "SELECT t.hash, t.revoked_ms, s.id, s.name, s.admin FROM tokens t
     JOIN submitters s ON s.id = t.submitter";
const BY_HASH: &str = "SELECT t.hash, t.revoked_ms, s.id, s.name, s.admin FROM tokens t
     JOIN submitters s ON s.id = t.submitter WHERE t.hash = ?1";

/// Who holds a token, and whether it was revoked.
struct Holder {
    submitter: Submitter,
    revoked: Option<i64>,
}

fn holder(row: &rusqlite::Row<'_>) -> rusqlite::Result<(String, Holder)> {
    Ok((
        row.get(0)?,
        Holder {
            revoked: row.get(1)?,
            submitter: Submitter {
                id: row.get(2)?,
                name: row.get(3)?,
                admin: row.get(4)?,
            },
        },
    ))
}

fn insert_token(store_key: &Store, tx: &rusqlite::Transaction<'_>, submitter: i64) -> Result<Token> {
    let id = hex::encode(random::<6>());
    let secret = format!("{PREFIX}{id}_{}", hex::encode(random::<32>()));
    tx.execute(
        "INSERT INTO tokens (id, submitter, hash, created_ms) VALUES (?1, ?2, ?3, ?4)",
        params![id, submitter, store_key.token_hash(&secret), now_ms()],
    )?;
    Ok(Token { id, secret })
}

/// Whether `presented` matches an argon2 hash of the tokens made before
/// keyed hashes.
fn argon2_matches(presented: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|hash| Argon2::default().verify_password(presented.as_bytes(), &hash).is_ok())
}

/// Compares in time that depends on the length alone.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::getrandom(&mut bytes).expect("the system's random source");
    bytes
}

/// Names the leaderboard shows: short, plain, unambiguous.
fn check_name(name: &str) -> Result<()> {
    let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if name.is_empty() || name.len() > 40 || !plain {
        bail!("`{name}`: a submitter's name is 1 to 40 letters, digits, `-` or `_`");
    }
    Ok(())
}

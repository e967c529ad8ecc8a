//! Submitters and their tokens. A token is shown once, when it is made
//! (`mlrbs_<id>_<secret>`); the database keeps its id and an argon2 hash
//! of the secret, so a copy of the database opens no account.

use anyhow::{Result, bail};
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
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
            let token = insert_token(tx, submitter.id)?;
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
            let token = insert_token(tx, id)?;
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

    /// The submitter a presented token belongs to.
    pub fn authenticate(&self, presented: &str) -> Result<Result<Submitter, Refused>> {
        let id = presented
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('_'))
            .map(|(id, _)| id.to_string())
            .unwrap_or_default();
        let found = self.read(|db| {
            Ok(db
                .query_row(
                    "SELECT t.hash, t.revoked_ms, s.id, s.name, s.admin FROM tokens t
                     JOIN submitters s ON s.id = t.submitter WHERE t.id = ?1",
                    [&id],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, Option<i64>>(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                        ))
                    },
                )
                .optional()?)
        })?;
        // An unknown id costs a verification too: the time taken does not
        // tell which ids exist.
        let stored = found.as_ref().map_or(DUMMY_HASH, |f| f.0.as_str());
        let matches = verify(presented, stored);
        Ok(match found {
            Some((_, revoked, id, name, admin)) if matches => match revoked {
                Some(_) => Err(Refused::Revoked),
                None => Ok(Submitter { id, name, admin }),
            },
            _ => Err(Refused::Invalid),
        })
    }
}

/// The argon2 hash of a secret no token has, verified against for unknown ids.
const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$bWxyYnMtZHVtbXktc2FsdA$0HAyGBIx8JuYzPhJTv7R0z2n1tE3kUUXktsc0Sq3IwQ";

fn insert_token(tx: &rusqlite::Transaction<'_>, submitter: i64) -> Result<Token> {
    let id = hex::encode(random::<6>());
    let secret = format!("{PREFIX}{id}_{}", hex::encode(random::<32>()));
    let salt = SaltString::encode_b64(&random::<16>()).map_err(|e| anyhow::anyhow!("a salt: {e}"))?;
    let hash = Argon2::default()
        .hash_password(secret.as_bytes(), &salt)
        .map_err(|e| anyhow::anyhow!("hashing a token: {e}"))?
        .to_string();
    tx.execute(
        "INSERT INTO tokens (id, submitter, hash, created_ms) VALUES (?1, ?2, ?3, ?4)",
        params![id, submitter, hash, now_ms()],
    )?;
    Ok(Token { id, secret })
}

fn verify(presented: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|hash| Argon2::default().verify_password(presented.as_bytes(), &hash).is_ok())
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

//! The submission service's database: SQLite in WAL mode, one file. Every
//! change of state is one transaction that also appends to the audit log,
//! so a service killed at any point leaves either the change and its audit
//! line or neither.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use rusqlite::{Connection, Transaction, TransactionBehavior};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS submitters (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    admin INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    submitter INTEGER NOT NULL REFERENCES submitters(id),
    hash TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    revoked_ms INTEGER
);
CREATE INDEX IF NOT EXISTS tokens_by_hash ON tokens (hash);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY,
    submitter INTEGER NOT NULL REFERENCES submitters(id),
    benchmark TEXT NOT NULL,
    version TEXT NOT NULL,
    agent_sha256 TEXT NOT NULL,
    agent_bytes INTEGER NOT NULL,
    agent_name TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    reason TEXT,
    created_ms INTEGER NOT NULL,
    started_ms INTEGER,
    finished_ms INTEGER,
    agent_seconds REAL NOT NULL DEFAULT 0,
    llm_usd REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS submissions_by_submitter ON submissions (submitter, created_ms);
-- What checking a submission's records found: the scan's flags and
-- whether its signed records verified.
CREATE TABLE IF NOT EXISTS verdicts (
    submission INTEGER PRIMARY KEY REFERENCES submissions(id),
    review_flags INTEGER NOT NULL,
    info_flags INTEGER NOT NULL,
    verify TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
-- People's runs the organisers added to a benchmark version's board as
-- references (`mlrb submissions reference`): never a submission, never
-- ranked, counted against no quota.
CREATE TABLE IF NOT EXISTS person_references (
    id INTEGER PRIMARY KEY,
    benchmark TEXT NOT NULL,
    version TEXT NOT NULL,
    name TEXT NOT NULL,
    review_flags INTEGER NOT NULL,
    info_flags INTEGER NOT NULL,
    verify TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    UNIQUE (benchmark, version, name)
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    subject TEXT NOT NULL,
    detail TEXT NOT NULL
);
-- The audit log is append-only: the database itself refuses to change or
-- remove a line, whoever asks.
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
";

/// The service's database.
pub struct Store {
    db: Mutex<Connection>,
    /// The key tokens are hashed with (`accounts`).
    pub(super) token_key: [u8; 32],
    /// Tokens still stored as argon2 hashes are checked one at a time.
    pub(super) legacy_checks: Mutex<()>,
}

impl Store {
    /// Opens (or creates) the database at `path`, and its token key
    /// beside it (`<name>.token-key`, made the first time).
    pub fn open(path: &Path) -> Result<Self> {
        let db = Connection::open(path).with_context(|| format!("{}: cannot open the database", path.display()))?;
        // WAL with full sync: a submission the service answered is on disk
        // even if the machine dies the next moment.
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        db.pragma_update(None, "foreign_keys", "ON")?;
        db.busy_timeout(Duration::from_secs(30))?;
        db.execute_batch(SCHEMA)
            .with_context(|| format!("{}: not an mlrb submissions database", path.display()))?;
        Ok(Self {
            db: Mutex::new(db),
            token_key: token_key(&path.with_extension("token-key"))?,
            legacy_checks: Mutex::new(()),
        })
    }

    /// Runs `change` in one immediate transaction, committed only if it
    /// returns Ok.
    pub(super) fn change<T>(&self, change: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut db = self.db.lock().unwrap_or_else(|e| e.into_inner());
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = change(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// Reads with `read` (no transaction of its own).
    pub(super) fn read<T>(&self, read: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let db = self.db.lock().unwrap_or_else(|e| e.into_inner());
        read(&db)
    }
}

/// The token key in `path`, made (32 random bytes, readable by the owner
/// alone) when there is none yet.
fn token_key(path: &Path) -> Result<[u8; 32]> {
    use std::io::Write;
    let mut key = [0u8; 32];
    getrandom::getrandom(&mut key).map_err(|e| anyhow::anyhow!("reading the OS's randomness: {e}"))?;
    // Written whole, then put in place only if none is there (mode 0600).
    let mut file = tempfile::NamedTempFile::new_in(path.parent().unwrap_or(Path::new(".")))?;
    file.write_all(hex::encode(key).as_bytes())?;
    file.as_file().sync_all()?;
    match file.persist_noclobber(path) {
        Ok(_) => Ok(key),
        // Made already (by an earlier start, or a process starting beside this one).
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = crate::record::read_record_file(path, 4096)?;
            hex::decode(text.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .with_context(|| {
                    format!(
                        "{}: not a token key (64 hex digits); restore it from a backup",
                        path.display()
                    )
                })
        }
        Err(e) => Err(e.error).with_context(|| format!("{}: cannot make the token key", path.display())),
    }
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

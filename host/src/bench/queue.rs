//! A bench as a queue of episodes with leases, in SQLite (WAL mode) in the
//! run directory: workers lease one episode at a time with an expiry, renew
//! the lease by heartbeat and report the result; a lease that expires (its
//! node died, its job was preempted) returns the episode to the queue, and
//! a result reported twice is recorded once. What an episode is (agent,
//! task, seed, limits) is the caller's JSON; the queue only hands it out.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

/// The queue of one run.
pub struct Queue {
    db: Mutex<Connection>,
    // A second connection for reads: in WAL mode they never wait for the
    // writer, whose transactions may hold `db` for a group of requests.
    reads: Mutex<Connection>,
}

/// An episode handed to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    /// The episode's id in the run, e.g. `digits/baseline/1`.
    pub episode: String,
    /// What the worker needs to run it, as enqueued.
    pub spec: serde_json::Value,
    /// The lease's secret: renewing, releasing and reporting name it.
    pub token: String,
    /// 1 for the first lease of this episode, 2 after one expired, ...
    pub attempt: u32,
    /// When the lease expires unless renewed, in ms since the Unix epoch.
    pub expires_ms: i64,
}

/// What became of a reported result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reported {
    /// Recorded: the episode is done.
    Recorded,
    /// The episode was already done with this same result; nothing changed.
    Duplicate,
}

/// How many episodes are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Waiting for a worker (expired leases included).
    pub pending: u64,
    /// Leased and not expired.
    pub leased: u64,
    /// With a recorded result.
    pub done: u64,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    spec TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    token TEXT,
    worker TEXT,
    expires_ms INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    result_hash TEXT
);
-- Two partial indexes so that a lease is two index lookups, not a sort of
-- every waiting episode: never leased (or released) by position, leased
-- by expiry.
DROP INDEX IF EXISTS episodes_waiting;
CREATE INDEX IF NOT EXISTS episodes_fresh ON episodes (position) WHERE done = 0 AND expires_ms IS NULL;
CREATE INDEX IF NOT EXISTS episodes_expiring ON episodes (expires_ms) WHERE done = 0 AND expires_ms IS NOT NULL;
-- Renewals and releases find their episode by lease token: without this
-- each walked every row (10,000 rows, 1,000 workers renewing each second).
CREATE INDEX IF NOT EXISTS episodes_token ON episodes (token) WHERE token IS NOT NULL;
CREATE TABLE IF NOT EXISTS leases (
    token TEXT PRIMARY KEY,
    episode TEXT NOT NULL,
    worker TEXT NOT NULL,
    leased_ms INTEGER NOT NULL
);
-- Recorded results whose uploaded folder is not yet in the run: the file
-- under cluster/unplaced/ it is unpacked from (after the answer, and again
-- after a restart). Written with the result, in the same transaction.
CREATE TABLE IF NOT EXISTS unplaced (
    episode TEXT PRIMARY KEY,
    upload TEXT NOT NULL
);
-- Leases that went on from a suspended episode's records, after a step.
CREATE TABLE IF NOT EXISTS resumes (
    token TEXT PRIMARY KEY,
    episode TEXT NOT NULL,
    after_step INTEGER NOT NULL,
    at_ms INTEGER NOT NULL
);
";

/// A renewal, found by its lease token (through `episodes_token`).
const RENEW: &str = "UPDATE episodes SET expires_ms = ?2 WHERE token = ?1 AND done = 0";
/// A release, found the same way.
const RELEASE: &str =
    "UPDATE episodes SET token = NULL, worker = NULL, expires_ms = NULL WHERE token = ?1 AND done = 0";

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A connection to the queue in `path`, the whole queue kept in memory
/// (results make rows large): no page is read back with a system call
/// once it has been seen.
fn connect(path: &Path) -> Result<Connection> {
    let db = Connection::open(path).with_context(|| format!("{}: cannot open the queue", path.display()))?;
    db.pragma_update(None, "cache_size", -65_536)?;
    db.pragma_update(None, "mmap_size", 1_i64 << 30)?;
    db.busy_timeout(Duration::from_secs(30))?;
    Ok(db)
}

fn new_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).map_err(|e| anyhow::anyhow!("drawing a lease token: {e}"))?;
    Ok(hex::encode(bytes))
}

impl Queue {
    /// Opens (creating if needed) the queue in `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let db = connect(path)?;
        // WAL: readers never wait for the writer; NORMAL is durable across
        // a process crash, which is what a lease queue must survive.
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "NORMAL")?;
        db.execute_batch(SCHEMA)
            .with_context(|| format!("{}: not an mlrb queue", path.display()))?;
        let reads = connect(path)?;
        reads.pragma_update(None, "query_only", true)?;
        Ok(Self {
            db: Mutex::new(db),
            reads: Mutex::new(reads),
        })
    }

    fn reads(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.reads.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds episodes in order; one already in the queue is left as it is
    /// (so enqueueing a plan again after a restart changes nothing).
    pub fn enqueue<'a>(&self, episodes: impl IntoIterator<Item = (&'a str, &'a serde_json::Value)>) -> Result<u64> {
        let mut db = self.db();
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut added = 0;
        {
            let next: i64 = tx.query_row("SELECT COALESCE(MAX(position), 0) FROM episodes", [], |r| r.get(0))?;
            let mut insert = tx.prepare("INSERT OR IGNORE INTO episodes (id, position, spec) VALUES (?1, ?2, ?3)")?;
            for (i, (id, spec)) in episodes.into_iter().enumerate() {
                added += insert.execute(params![id, next + 1 + i as i64, spec.to_string()])? as u64;
            }
        }
        tx.commit()?;
        Ok(added)
    }

    /// Leases the next waiting episode to `worker` for `ttl`: the first
    /// never leased, or one whose lease expired. None when nothing waits.
    pub fn lease(&self, worker: &str, ttl: Duration, now: i64) -> Result<Option<Lease>> {
        let mut db = self.db();
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let lease = Writes(&tx).lease(worker, ttl, now)?;
        tx.commit()?;
        Ok(lease)
    }

    /// Extends a lease to `now + ttl`; false when it is no longer held (it
    /// expired and was leased again, or the episode is done).
    pub fn renew(&self, token: &str, ttl: Duration, now: i64) -> Result<bool> {
        Writes(&self.db()).renew(token, ttl, now)
    }

    /// Gives a lease back (a worker stopping cleanly): the episode waits
    /// for the next worker at once. False when the lease was not held.
    pub fn release(&self, token: &str) -> Result<bool> {
        Writes(&self.db()).release(token)
    }

    /// Records the result of `episode`, reported under a lease `token` it
    /// was given (an expired one still counts if nobody finished it since:
    /// the work was done). The first result wins; the same result again is
    /// a `Duplicate`; a different result for a done episode, or a token
    /// this episode never had, is refused.
    pub fn report(&self, episode: &str, token: &str, result: &serde_json::Value) -> Result<Reported> {
        let mut db = self.db();
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let reported = Writes(&tx).report(episode, token, result)?;
        tx.commit()?;
        Ok(reported)
    }

    /// Runs `work` in one write transaction, committed once at its end
    /// (group commit: one commit for many requests' writes). Each request's
    /// writes go through `Group::apply`, which undoes them alone if they
    /// fail. Nothing `work` wrote holds unless this returns Ok.
    pub fn group<T>(&self, work: impl FnOnce(&mut Group<'_>) -> T) -> Result<T> {
        let mut db = self.db();
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut group = Group { tx };
        let done = work(&mut group);
        group.tx.commit()?;
        Ok(done)
    }

    /// Whether `episode` is held under the lease `token` now (not done,
    /// not expired and leased to another since).
    pub fn holds(&self, episode: &str, token: &str) -> Result<bool> {
        let held: i64 = self.reads().query_row(
            "SELECT COUNT(*) FROM episodes WHERE id = ?1 AND token = ?2 AND done = 0",
            params![episode, token],
            |r| r.get(0),
        )?;
        Ok(held > 0)
    }

    /// Records that the lease `token` of `episode` goes on from its
    /// suspended records, after step `after_step`.
    pub fn record_resume(&self, token: &str, episode: &str, after_step: u32, now: i64) -> Result<()> {
        self.db().execute(
            "INSERT OR REPLACE INTO resumes (token, episode, after_step, at_ms) VALUES (?1, ?2, ?3, ?4)",
            params![token, episode, after_step, now],
        )?;
        Ok(())
    }

    /// Whether `token` was ever a lease of `episode`, and whether the
    /// episode is done; None when the run has no such episode.
    pub fn lease_of(&self, episode: &str, token: &str) -> Result<Option<(bool, bool)>> {
        let mut reads = self.reads();
        // One snapshot for both questions.
        let db = reads.transaction()?;
        let done = db
            .query_row("SELECT done FROM episodes WHERE id = ?1", [episode], |r| {
                r.get::<_, bool>(0)
            })
            .optional()?;
        let Some(done) = done else {
            return Ok(None);
        };
        let known = db.query_row(
            "SELECT COUNT(*) FROM leases WHERE episode = ?1 AND token = ?2",
            params![episode, token],
            |r| r.get::<_, i64>(0),
        )? > 0;
        Ok(Some((known, done)))
    }

    /// The recorded results whose folders are still to be placed: each
    /// episode and the name of its upload's file.
    pub fn unplaced(&self) -> Result<Vec<(String, String)>> {
        let db = self.reads();
        let mut select = db.prepare("SELECT episode, upload FROM unplaced ORDER BY episode")?;
        let rows = select.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// How many episodes wait, are leased and are done, at `now`. Each
    /// count walks one of the partial indexes, never the whole table
    /// (whose rows hold the results).
    pub fn counts(&self, now: i64) -> Result<Counts> {
        let mut reads = self.reads();
        let snapshot = reads.transaction()?;
        Writes(&snapshot).counts(now)
    }

    /// The recorded results, in the order the episodes were enqueued.
    pub fn results(&self) -> Result<Vec<(String, serde_json::Value)>> {
        let db = self.reads();
        let mut select = db.prepare("SELECT id, result FROM episodes WHERE done = 1 ORDER BY position")?;
        let rows = select.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        rows.map(|row| {
            let (id, text) = row?;
            Ok((id, serde_json::from_str(&text)?))
        })
        .collect()
    }
}

/// One transaction of grouped writes (see `Queue::group`).
pub struct Group<'a> {
    tx: rusqlite::Transaction<'a>,
}

impl Group<'_> {
    /// Runs one request's writes in a savepoint of their own: when they
    /// fail they are undone alone and the rest of the group still commits.
    pub fn apply<T>(&mut self, write: impl FnOnce(&Writes<'_>) -> Result<T>) -> Result<T> {
        let savepoint = self.tx.savepoint()?;
        // Dropped without a commit (on an error), it rolls back.
        let done = write(&Writes(&savepoint))?;
        savepoint.commit()?;
        Ok(done)
    }
}

/// The queue's writes on a connection, in whatever transaction it is in.
pub struct Writes<'a>(&'a Connection);

impl Writes<'_> {
    /// See `Queue::lease`.
    pub fn lease(&self, worker: &str, ttl: Duration, now: i64) -> Result<Option<Lease>> {
        let db = self.0;
        let row = |r: &rusqlite::Row| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, u32>(2)?));
        // An expired lease first: its episode started longest ago.
        let expired = db
            .prepare_cached(
                "SELECT id, spec, attempts FROM episodes
                 WHERE done = 0 AND expires_ms IS NOT NULL AND expires_ms <= ?1
                 ORDER BY expires_ms LIMIT 1",
            )?
            .query_row([now], row)
            .optional()?;
        let next = match expired {
            Some(next) => Some(next),
            None => db
                .prepare_cached(
                    "SELECT id, spec, attempts FROM episodes
                     WHERE done = 0 AND expires_ms IS NULL ORDER BY position LIMIT 1",
                )?
                .query_row([], row)
                .optional()?,
        };
        let Some((episode, spec, attempts)) = next else {
            return Ok(None);
        };
        let token = new_token()?;
        let expires_ms = now + ttl.as_millis() as i64;
        db.prepare_cached(
            "UPDATE episodes SET token = ?2, worker = ?3, expires_ms = ?4, attempts = attempts + 1 WHERE id = ?1",
        )?
        .execute(params![episode, token, worker, expires_ms])?;
        // Every lease ever given, so that the work of an expired one can
        // still be reported (and who ran what stays on record).
        db.prepare_cached("INSERT INTO leases (token, episode, worker, leased_ms) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![token, episode, worker, now])?;
        Ok(Some(Lease {
            spec: serde_json::from_str(&spec).with_context(|| format!("{episode}: its spec is not JSON"))?,
            episode,
            token,
            attempt: attempts + 1,
            expires_ms,
        }))
    }

    /// See `Queue::renew`.
    pub fn renew(&self, token: &str, ttl: Duration, now: i64) -> Result<bool> {
        let changed = self
            .0
            .prepare_cached(RENEW)?
            .execute(params![token, now + ttl.as_millis() as i64])?;
        Ok(changed == 1)
    }

    /// See `Queue::release`.
    pub fn release(&self, token: &str) -> Result<bool> {
        Ok(self.0.prepare_cached(RELEASE)?.execute([token])? == 1)
    }

    /// See `Queue::report`.
    pub fn report(&self, episode: &str, token: &str, result: &serde_json::Value) -> Result<Reported> {
        let db = self.0;
        let text = result.to_string();
        let hash = blake3::hash(text.as_bytes()).to_hex().to_string();
        let row = db
            .prepare_cached("SELECT done, token, result_hash FROM episodes WHERE id = ?1")?
            .query_row([episode], |r| {
                Ok((
                    r.get::<_, bool>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Option<String>>(2)?,
                ))
            })
            .optional()?;
        let Some((done, current, recorded)) = row else {
            bail!("{episode}: no such episode in this run");
        };
        if done {
            return match recorded.as_deref() == Some(hash.as_str()) {
                true => Ok(Reported::Duplicate),
                false => bail!("{episode}: already done with another result"),
            };
        }
        let known: bool = current.as_deref() == Some(token)
            || db
                .prepare_cached("SELECT COUNT(*) FROM leases WHERE episode = ?1 AND token = ?2")?
                .query_row(params![episode, token], |r| r.get::<_, i64>(0))?
                > 0;
        if !known {
            bail!("{episode}: the lease token was never given for this episode");
        }
        db.prepare_cached(
            "UPDATE episodes SET done = 1, result = ?2, result_hash = ?3, token = NULL, expires_ms = NULL WHERE id = ?1",
        )?
        .execute(params![episode, text, hash])?;
        Ok(Reported::Recorded)
    }

    /// Notes that the folder of `episode`, just recorded, is still in the
    /// upload `name` (see `Queue::unplaced`).
    pub fn unplaced(&self, episode: &str, name: &str) -> Result<()> {
        self.0
            .prepare_cached("INSERT OR REPLACE INTO unplaced (episode, upload) VALUES (?1, ?2)")?
            .execute(params![episode, name])?;
        Ok(())
    }

    /// Notes that the folder of `episode` in the upload `name` is placed
    /// (or set aside): false when that was not the upload noted.
    pub fn placed(&self, episode: &str, name: &str) -> Result<bool> {
        let sql = "DELETE FROM unplaced WHERE episode = ?1 AND upload = ?2";
        Ok(self.0.prepare_cached(sql)?.execute(params![episode, name])? == 1)
    }

    /// See `Queue::counts`.
    pub fn counts(&self, now: i64) -> Result<Counts> {
        let count = |sql: &str, args: &[&dyn rusqlite::ToSql]| -> Result<u64> {
            Ok(self.0.prepare_cached(sql)?.query_row(args, |r| r.get::<_, i64>(0))? as u64)
        };
        let fresh = count(
            "SELECT COUNT(*) FROM episodes WHERE done = 0 AND expires_ms IS NULL",
            &[],
        )?;
        let expired = count(
            "SELECT COUNT(*) FROM episodes WHERE done = 0 AND expires_ms IS NOT NULL AND expires_ms <= ?1",
            &[&now],
        )?;
        let leased = count(
            "SELECT COUNT(*) FROM episodes WHERE done = 0 AND expires_ms IS NOT NULL AND expires_ms > ?1",
            &[&now],
        )?;
        let total = count("SELECT COUNT(*) FROM episodes", &[])?;
        Ok(Counts {
            pending: fresh + expired,
            leased,
            done: total - fresh - expired - leased,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::{Queue, Reported};

    const TTL: Duration = Duration::from_secs(60);

    fn queue(n: usize) -> (tempfile::TempDir, Queue) {
        let tmp = tempfile::tempdir().unwrap();
        let queue = Queue::open(&tmp.path().join("queue.sqlite")).unwrap();
        let specs: Vec<(String, serde_json::Value)> = (1..=n)
            .map(|i| (format!("digits/baseline/{i}"), json!({"seed": i})))
            .collect();
        assert_eq!(
            queue.enqueue(specs.iter().map(|(id, s)| (id.as_str(), s))).unwrap(),
            n as u64
        );
        (tmp, queue)
    }

    /// Renewals and releases come from every worker every few seconds:
    /// each must find its row through an index, never by a scan.
    #[test]
    fn renewals_and_releases_use_the_token_index() {
        let (_tmp, queue) = queue(3);
        for sql in [super::RENEW, super::RELEASE] {
            let db = queue.db();
            let mut plan = db.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let args = ["token", "1"].into_iter().take(plan.parameter_count());
            let lines: Vec<String> = plan
                .query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(3))
                .unwrap()
                .map(|l| l.unwrap())
                .collect();
            assert!(
                lines.iter().any(|l| l.contains("USING INDEX episodes_token")),
                "{sql}: {lines:?}"
            );
        }
    }

    #[test]
    fn episodes_are_leased_once_each_in_order_then_none() {
        let (_tmp, queue) = queue(3);
        let leased: Vec<_> = (0..3).map(|_| queue.lease("w", TTL, 1_000).unwrap().unwrap()).collect();
        assert_eq!(leased[0].episode, "digits/baseline/1");
        assert_eq!(leased[2].spec, json!({"seed": 3}));
        assert!(leased.iter().all(|l| l.attempt == 1 && l.expires_ms == 61_000));
        assert!(queue.lease("w", TTL, 1_000).unwrap().is_none());
        let counts = queue.counts(1_000).unwrap();
        assert_eq!((counts.pending, counts.leased, counts.done), (0, 3, 0));
    }

    #[test]
    fn an_expired_lease_returns_the_episode_and_its_old_token_loses_the_renewal() {
        let (_tmp, queue) = queue(1);
        let first = queue.lease("dead-node", TTL, 0).unwrap().unwrap();
        assert!(queue.renew(&first.token, TTL, 30_000).unwrap(), "a held lease renews");
        assert!(
            queue.lease("other", TTL, 60_000).unwrap().is_none(),
            "renewed: not expired at 60 s"
        );
        let second = queue.lease("other", TTL, 90_001).unwrap().unwrap();
        assert_eq!((second.episode.as_str(), second.attempt), ("digits/baseline/1", 2));
        assert_ne!(second.token, first.token);
        assert!(
            !queue.renew(&first.token, TTL, 90_002).unwrap(),
            "the old lease is gone"
        );
        assert!(queue.renew(&second.token, TTL, 90_002).unwrap());
    }

    #[test]
    fn a_result_reported_twice_is_recorded_once() {
        let (_tmp, queue) = queue(1);
        let first = queue.lease("a", TTL, 0).unwrap().unwrap();
        // Its lease expired and another worker took the episode over; the
        // first worker's late result is the one recorded.
        let second = queue.lease("b", TTL, 120_000).unwrap().unwrap();
        let result = json!({"score": 0.83});
        assert_eq!(
            queue.report(&first.episode, &first.token, &result).unwrap(),
            Reported::Recorded
        );
        assert_eq!(
            queue.report(&second.episode, &second.token, &result).unwrap(),
            Reported::Duplicate
        );
        let other = queue
            .report(&second.episode, &second.token, &json!({"score": 0.9}))
            .unwrap_err();
        assert!(
            other.to_string().contains("already done with another result"),
            "{other}"
        );
        assert_eq!(queue.results().unwrap(), vec![(first.episode.clone(), result)]);
        assert!(
            queue.lease("c", TTL, 999_999).unwrap().is_none(),
            "a done episode is never leased again"
        );
        assert!(!queue.renew(&second.token, TTL, 1).unwrap());
        assert_eq!(queue.counts(0).unwrap().done, 1);
    }

    #[test]
    fn a_report_with_a_foreign_token_or_episode_is_refused_and_changes_nothing() {
        let (_tmp, queue) = queue(2);
        let one = queue.lease("a", TTL, 0).unwrap().unwrap();
        let two = queue.lease("a", TTL, 0).unwrap().unwrap();
        let wrong = queue.report(&one.episode, &two.token, &json!(1)).unwrap_err();
        assert!(wrong.to_string().contains("never given for this episode"), "{wrong}");
        let missing = queue.report("nope/x/1", &one.token, &json!(1)).unwrap_err();
        assert!(missing.to_string().contains("no such episode"), "{missing}");
        assert_eq!(queue.counts(0).unwrap().done, 0);
    }

    #[test]
    fn a_released_lease_is_leased_again_at_once_and_enqueueing_again_changes_nothing() {
        let (tmp, queue) = queue(1);
        let lease = queue.lease("stopping", TTL, 0).unwrap().unwrap();
        assert!(queue.release(&lease.token).unwrap());
        assert!(!queue.release(&lease.token).unwrap());
        let again = queue.lease("next", TTL, 1).unwrap().unwrap();
        assert_eq!(again.attempt, 2);
        drop(queue);
        // Reopened (the server restarted): the plan enqueued again adds nothing.
        let reopened = Queue::open(&tmp.path().join("queue.sqlite")).unwrap();
        let spec = json!({"seed": 1});
        assert_eq!(reopened.enqueue([("digits/baseline/1", &spec)]).unwrap(), 0);
        assert_eq!(reopened.counts(1).unwrap().leased, 1);
    }

    /// A group commits once: each write's own result, distinct episodes,
    /// and a write that fails undone alone while the rest hold.
    #[test]
    fn a_group_commits_its_writes_together_and_a_failing_one_alone_is_undone() {
        let (_tmp, queue) = queue(3);
        let held = queue.lease("a", TTL, 0).unwrap().unwrap();
        let (first, refused, second, renewed, stale) = queue
            .group(|group| {
                let first = group.apply(|w| w.lease("b", TTL, 0)).unwrap().unwrap();
                // Leases the last episode, then fails: its lease is undone.
                let refused = group.apply(|w| {
                    w.lease("c", TTL, 0)?;
                    w.report("nope/x/1", "t", &json!(1))
                });
                let second = group.apply(|w| w.lease("d", TTL, 0)).unwrap().unwrap();
                let renewed = group.apply(|w| w.renew(&held.token, TTL, 5_000)).unwrap();
                let stale = group.apply(|w| w.renew("never-given", TTL, 5_000)).unwrap();
                (first, refused, second, renewed, stale)
            })
            .unwrap();
        assert!(refused.unwrap_err().to_string().contains("no such episode"));
        assert_eq!(
            (first.episode.as_str(), second.episode.as_str()),
            ("digits/baseline/2", "digits/baseline/3"),
            "the undone lease's episode went to the next"
        );
        assert!(renewed && !stale);
        let counts = queue.counts(61_000).unwrap();
        assert_eq!(
            (counts.pending, counts.leased),
            (2, 1),
            "only the renewed lease holds at 61 s"
        );
        assert!(queue.holds(&second.episode, &second.token).unwrap());
    }

    /// A result's unplaced upload is noted in its savepoint: undone with a
    /// refused report, kept with a recorded one until placed.
    #[test]
    fn an_unplaced_upload_is_noted_with_its_result_or_not_at_all() {
        let (_tmp, queue) = queue(2);
        let one = queue.lease("a", TTL, 0).unwrap().unwrap();
        let two = queue.lease("a", TTL, 0).unwrap().unwrap();
        let (recorded, refused) = queue
            .group(|group| {
                let recorded = group.apply(|w| {
                    let reported = w.report(&one.episode, &one.token, &json!(1))?;
                    w.unplaced(&one.episode, "one.tar")?;
                    Ok(reported)
                });
                let refused = group.apply(|w| {
                    w.report(&two.episode, &one.token, &json!(2))?;
                    w.unplaced(&two.episode, "two.tar")
                });
                (recorded.unwrap(), refused)
            })
            .unwrap();
        assert_eq!(recorded, Reported::Recorded);
        assert!(refused.is_err());
        assert_eq!(
            queue.unplaced().unwrap(),
            vec![(one.episode.clone(), "one.tar".to_string())]
        );
        let placed = queue
            .group(|g| {
                let other = g.apply(|w| w.placed(&one.episode, "other.tar")).unwrap();
                (other, g.apply(|w| w.placed(&one.episode, "one.tar")).unwrap())
            })
            .unwrap();
        assert_eq!(placed, (false, true));
        assert!(queue.unplaced().unwrap().is_empty());
    }

    #[test]
    fn concurrent_workers_never_share_an_episode() {
        let (_tmp, queue) = queue(200);
        let queue = std::sync::Arc::new(queue);
        let handles: Vec<_> = (0..8)
            .map(|w| {
                let queue = queue.clone();
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    while let Some(lease) = queue.lease(&format!("w{w}"), TTL, 0).unwrap() {
                        queue.report(&lease.episode, &lease.token, &json!(w)).unwrap();
                        mine.push(lease.episode);
                    }
                    mine
                })
            })
            .collect();
        let mut all: Vec<String> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 200);
        assert_eq!(queue.counts(0).unwrap().done, 200);
    }
}

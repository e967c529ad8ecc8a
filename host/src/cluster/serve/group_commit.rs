//! Group commit: the queue's writes (leases, renewals, releases, results)
//! wait in a bounded line, and one writer applies those that arrived
//! together in one SQLite transaction, committed once, each request in a
//! savepoint of its own so that one refused is undone and answered alone.
//! A thousand workers asking at the same moment then cost a few commits,
//! not a thousand in turn. Journal lines and results sent on are written
//! only once their commit holds.

use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::{Result, anyhow};
use tokio::sync::{mpsc, oneshot};

use super::Server;
use crate::bench::EpisodeSpec;
use crate::bench::journal::Entry;
use crate::bench::queue::{Counts, Group, Lease, Reported, now_ms};
use crate::bench::result_line::ResultLine;

/// The most writes one transaction takes.
const MAX_GROUP: usize = 256;
/// How long the writer waits for more once a write has come.
const MAX_WAIT: Duration = Duration::from_millis(2);
/// Writes that may wait for the writer; past that, requests wait to be
/// let in, in the order they came (memory stays bounded under a flood).
const MAX_WAITING: usize = 4 * MAX_GROUP;

/// A write a request asks for.
pub(super) enum Write {
    /// The next episode for a worker.
    Lease {
        worker: String,
    },
    Renew {
        token: String,
    },
    Release {
        token: String,
    },
    /// A result whose folder is in place, or in the upload `unplaced`
    /// names (noted with the result, to be placed once answered).
    Record {
        episode: String,
        token: String,
        result: Box<ResultLine>,
        unplaced: Option<String>,
    },
    /// A recorded result's folder, placed from the upload named.
    Placed {
        episode: String,
        upload: String,
    },
}

/// What became of a write, once committed.
pub(super) enum Written {
    /// The lease, or the counts when nothing waits.
    Leased {
        lease: Option<Lease>,
        counts: Option<Counts>,
    },
    Renewed(bool),
    Released(bool),
    Recorded(Reported),
    Placed(bool),
    /// A result the queue refused (another result stands), and why.
    Refused(String),
}

struct Waiting {
    write: Write,
    answer: oneshot::Sender<Result<Written>>,
}

/// The line of writes waiting for the writer.
pub(super) struct Writes {
    line: mpsc::Sender<Waiting>,
    taken: std::sync::Mutex<Option<mpsc::Receiver<Waiting>>>,
}

impl Writes {
    pub(super) fn new() -> Self {
        let (line, taken) = mpsc::channel(MAX_WAITING);
        Self {
            line,
            taken: std::sync::Mutex::new(Some(taken)),
        }
    }
}

impl Server {
    /// Starts the writer (once): it holds the server weakly and ends with it.
    pub(super) fn start_writer(self: &Arc<Self>) {
        let taken = self.writes.taken.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(line) = taken {
            tokio::spawn(writer(Arc::downgrade(self), line));
        }
    }

    /// Applies `write` in the next group; its result once committed.
    pub(super) async fn write(&self, write: Write) -> Result<Written> {
        let (answer, answered) = oneshot::channel();
        self.writes
            .line
            .send(Waiting { write, answer })
            .await
            .map_err(|_| anyhow!("the queue's writer has stopped"))?;
        answered.await.map_err(|_| anyhow!("the queue's writer has stopped"))?
    }

    /// `write`, from a thread outside the runtime.
    pub(super) fn write_blocking(&self, write: Write) -> Result<Written> {
        let (answer, answered) = oneshot::channel();
        self.writes
            .line
            .blocking_send(Waiting { write, answer })
            .map_err(|_| anyhow!("the queue's writer has stopped"))?;
        answered
            .blocking_recv()
            .map_err(|_| anyhow!("the queue's writer has stopped"))?
    }

    /// One group: applied, committed, then journalled and answered.
    fn commit(&self, waiting: Vec<Waiting>) {
        let now = now_ms();
        let mut recorded = Vec::new();
        let group = self.queue.group(|group| {
            waiting
                .iter()
                .map(|w| self.apply(group, &w.write, now, &mut recorded))
                .collect::<Vec<_>>()
        });
        let done = match group {
            Ok(done) => done,
            Err(error) => {
                let error = format!("committing the queue: {error:#}");
                for w in waiting {
                    let _ = w.answer.send(Err(anyhow!("{error}")));
                }
                return;
            }
        };
        for result in recorded {
            if let Err(error) = self.journal_done(result) {
                tracing::error!(error = %format!("{error:#}"), "journalling a result");
            }
        }
        for (w, done) in waiting.into_iter().zip(done) {
            let _ = w.answer.send(done);
        }
    }

    /// One request's writes, in a savepoint of the group.
    fn apply(&self, group: &mut Group<'_>, write: &Write, now: i64, recorded: &mut Vec<ResultLine>) -> Result<Written> {
        match write {
            Write::Lease { worker } => self.lease_in(group, worker, now, recorded),
            Write::Renew { token } => Ok(Written::Renewed(group.apply(|w| w.renew(token, self.lease, now))?)),
            Write::Release { token } => Ok(Written::Released(group.apply(|w| w.release(token))?)),
            Write::Placed { episode, upload } => Ok(Written::Placed(group.apply(|w| w.placed(episode, upload))?)),
            Write::Record {
                episode,
                token,
                result,
                unplaced,
            } => {
                let value = serde_json::to_value(result.as_ref())?;
                let record = |w: &crate::bench::queue::Writes<'_>| {
                    let reported = w.report(episode, token, &value)?;
                    // Noted only with the result it goes with: a duplicate's is dropped.
                    if let (Reported::Recorded, Some(upload)) = (reported, unplaced) {
                        w.unplaced(episode, upload)?;
                    }
                    Ok(reported)
                };
                let reported = match group.apply(record) {
                    Ok(reported) => reported,
                    Err(why) => return Ok(Written::Refused(format!("{why:#}"))),
                };
                if reported == Reported::Recorded {
                    recorded.push(result.as_ref().clone());
                }
                Ok(Written::Recorded(reported))
            }
        }
    }

    /// The next episode; one leased too often is given up as an
    /// infrastructure failure (whatever kills its workers would go on).
    fn lease_in(
        &self,
        group: &mut Group<'_>,
        worker: &str,
        now: i64,
        recorded: &mut Vec<ResultLine>,
    ) -> Result<Written> {
        group.apply(|w| {
            loop {
                let lease = w.lease(worker, self.lease, now)?;
                let Some(lease) = lease else {
                    // Counted only when nothing was leased: a count reads every row.
                    let counts = Some(w.counts(now)?);
                    return Ok(Written::Leased { lease: None, counts });
                };
                if lease.attempt <= self.max_leases {
                    return Ok(Written::Leased {
                        lease: Some(lease),
                        counts: None,
                    });
                }
                let error = format!(
                    "leased {} times and never reported: its workers died or were cut off each time",
                    self.max_leases
                );
                let spec: EpisodeSpec = serde_json::from_value(lease.spec.clone()).unwrap_or_default();
                let id = &lease.episode;
                let result =
                    ResultLine::infra_failed(id, &spec.task, &spec.agent, spec.seed, id, lease.attempt - 1, &error);
                if w.report(id, &lease.token, &serde_json::to_value(&result)?)? == Reported::Recorded {
                    recorded.push(result);
                }
            }
        })
    }

    /// Journals a recorded result and sends it on.
    fn journal_done(&self, result: ResultLine) -> Result<()> {
        let done = Entry::Done {
            id: result.id.clone(),
            result: Box::new(result.clone()),
        };
        self.journal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_unsynced(&done)?;
        let _ = self.arrived.send(result);
        Ok(())
    }
}

/// Takes the writes that wait (at most `MAX_GROUP`, waiting at most
/// `MAX_WAIT` for more once one has come) and commits them as one group,
/// on the blocking pool; until the server is gone.
async fn writer(server: Weak<Server>, mut line: mpsc::Receiver<Waiting>) {
    let mut waiting = Vec::with_capacity(MAX_GROUP);
    while line.recv_many(&mut waiting, MAX_GROUP).await > 0 {
        let deadline = tokio::time::Instant::now() + MAX_WAIT;
        while waiting.len() < MAX_GROUP {
            let room = MAX_GROUP - waiting.len();
            let more = tokio::time::timeout_at(deadline, line.recv_many(&mut waiting, room));
            if !matches!(more.await, Ok(n) if n > 0) {
                break;
            }
        }
        let Some(server) = server.upgrade() else {
            return;
        };
        let group = std::mem::replace(&mut waiting, Vec::with_capacity(MAX_GROUP));
        if let Err(error) = tokio::task::spawn_blocking(move || server.commit(group)).await {
            tracing::error!(error = %error, "the queue's writer");
        }
    }
}

//! Uploads placed after their result is answered. A report's upload is
//! checked as unpacking would take it (a refusal still names the entry),
//! kept as a file under `cluster/unplaced/` named by its blake3, and noted
//! in the queue in the same transaction as its result: the worker is
//! answered once that commits, and the folder is unpacked into the run in
//! the background by a few threads of low priority (so that, cores short,
//! requests go first and placing catches up). The file is removed only after its
//! note; a server killed in between places what is noted when it starts
//! again, and removes any file no note names (never answered). A kept
//! upload whose bytes no longer match its name is set aside, not placed:
//! its result stands, its folder is lost.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak, mpsc};

use anyhow::{Context, Result, bail};
use hyper::StatusCode;

use super::group_commit::{Write, Written};
use super::{Answer, Server, Upload, refuse};
use crate::bench::result_line::ResultLine;
use crate::cluster::upload;

/// How many threads unpack folders.
const PLACERS: usize = 2;
/// Their nice value: below the requests, which never wait for them.
const PLACERS_NICE: i32 = 10;

/// A folder to place: its episode and the kept upload's name.
type Job = (String, String);

/// Folders waiting to be placed or being placed.
#[derive(Default)]
pub(super) struct Placing {
    line: OnceLock<Mutex<mpsc::Sender<Job>>>,
    busy: AtomicUsize,
    idle: tokio::sync::Notify,
}

/// A checked upload's result, and the name of its kept file when it has a
/// folder to place.
pub(super) type Kept = (Box<ResultLine>, Option<String>);

impl Server {
    fn unplaced_dir(&self) -> PathBuf {
        self.dir.join("cluster/unplaced")
    }

    /// Checks `upload` as unpacking would take it and keeps it for placing;
    /// its result, or why it is refused.
    pub(super) fn keep(&self, upload: Upload) -> Result<Result<Kept, Answer>> {
        let episode = upload.episode.as_str();
        let checked = match upload.spool.check() {
            Ok(checked) => checked,
            Err(error) => return Ok(Err(refuse(StatusCode::BAD_REQUEST, &format!("{error:#}")))),
        };
        let result = match super::episode_result(checked.result, episode) {
            Ok(result) => result,
            Err(why) => return Ok(Err(refuse(StatusCode::BAD_REQUEST, &why))),
        };
        if !checked.folder {
            return Ok(Ok((Box::new(result), None)));
        }
        let name = format!("{}.{}.tar", upload.hash, &super::super::new_secret()?[..16]);
        upload.spool.keep(&self.unplaced_dir().join(&name))?;
        Ok(Ok((Box::new(result), Some(name))))
    }

    /// Removes a kept upload that was not recorded (a duplicate, refused).
    pub(super) async fn drop_kept(&self, name: Option<String>) {
        if let Some(name) = name {
            let _ = tokio::fs::remove_file(self.unplaced_dir().join(name)).await;
        }
    }

    /// Places the folder of `episode` from its kept upload `name`, in the
    /// background; one that fails stays noted for the next start.
    pub(super) fn place_later(self: &Arc<Self>, episode: String, name: String) {
        self.placing.busy.fetch_add(1, Ordering::SeqCst);
        let line = self
            .placing
            .line
            .get_or_init(|| Mutex::new(start_placers(Arc::downgrade(self))));
        let sent = line.lock().unwrap_or_else(|e| e.into_inner()).send((episode, name));
        if sent.is_err() {
            self.placed_one();
        }
    }

    fn placed_one(&self) {
        if self.placing.busy.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.placing.idle.notify_waiters();
        }
    }

    /// Places one folder, on a placer's thread.
    fn place_kept(&self, episode: &str, name: &str) -> Result<()> {
        self.unpack_kept(episode, name, &self.staging()?.0)?;
        let placed = Write::Placed {
            episode: episode.to_string(),
            upload: name.to_string(),
        };
        if let Written::Placed(false) = self.write_blocking(placed)? {
            tracing::warn!(%episode, upload = %name, "placed, but another upload was noted for it");
        }
        // Only once its note is gone: a crash in between leaves a file no
        // note names, removed at the next start.
        let _ = std::fs::remove_file(self.unplaced_dir().join(name));
        Ok(())
    }

    /// Unpacks the kept upload `name` into the run as the folder of
    /// `episode`; a damaged one is set aside instead.
    fn unpack_kept(&self, episode: &str, name: &str, staging: &Path) -> Result<()> {
        let path = self.unplaced_dir().join(name);
        if let Err(why) = intact(&path, name) {
            tracing::error!(%episode, upload = %name, error = %format!("{why:#}"), "a kept upload is damaged: its result stands, its folder is set aside in cluster/unplaced/damaged/");
            let damaged = self.unplaced_dir().join("damaged");
            std::fs::create_dir_all(&damaged)?;
            if path.exists() {
                std::fs::rename(&path, damaged.join(name))?;
            }
            return Ok(());
        }
        let file = std::io::BufReader::new(std::fs::File::open(&path)?);
        let unpacked = upload::unpack(file, staging).with_context(|| format!("unpacking {}", path.display()))?;
        let Some(folder) = unpacked.episode else {
            bail!("{}: no episode folder in it", path.display());
        };
        let target = self.dir.join(episode);
        if target.exists() {
            crate::record::walk::remove_tree(&target).with_context(|| format!("replacing {}", target.display()))?;
        }
        std::fs::create_dir_all(target.parent().unwrap_or(&self.dir))?;
        std::fs::rename(folder, &target).with_context(|| format!("moving the upload to {}", target.display()))?;
        Ok(())
    }

    /// At start, before any request: removes kept uploads no note names
    /// and places the noted ones.
    pub(super) async fn place_unplaced(self: &Arc<Self>) -> Result<()> {
        let server = self.clone();
        let noted = tokio::task::spawn_blocking(move || server.unnoted_removed()).await??;
        if !noted.is_empty() {
            tracing::info!(
                count = noted.len(),
                "placing the folders of results recorded before a restart"
            );
        }
        for (episode, name) in noted {
            self.place_later(episode, name);
        }
        Ok(())
    }

    fn unnoted_removed(&self) -> Result<Vec<(String, String)>> {
        let noted = self.queue.unplaced()?;
        let names: std::collections::HashSet<&str> = noted.iter().map(|(_, name)| name.as_str()).collect();
        for entry in std::fs::read_dir(self.unplaced_dir())? {
            let entry = entry?;
            let name = entry.file_name();
            let kept = name.to_str().is_some_and(|n| n.ends_with(".tar") && !names.contains(n));
            if kept && entry.file_type()?.is_file() {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(noted)
    }

    /// Waits until no folder is being placed; how many recorded results'
    /// folders are still not in place (kept for the next start).
    pub async fn placed(&self) -> Result<usize> {
        loop {
            let idle = self.placing.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.placing.busy.load(Ordering::SeqCst) == 0 {
                break;
            }
            idle.await;
        }
        Ok(self.queue.unplaced()?.len())
    }
}

/// The placers' threads, holding the server weakly (they end with it);
/// the line they take folders from.
fn start_placers(server: Weak<Server>) -> mpsc::Sender<Job> {
    let (line, jobs) = mpsc::channel::<Job>();
    let jobs = Arc::new(Mutex::new(jobs));
    for n in 0..PLACERS {
        let (server, jobs) = (server.clone(), jobs.clone());
        let placer = std::thread::Builder::new().name(format!("placer-{n}"));
        let started = placer.spawn(move || {
            // SAFETY: setpriority on this thread (who 0) only reads its arguments.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, PLACERS_NICE) };
            loop {
                let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let (Ok((episode, name)), Some(server)) = (job, server.upgrade()) else {
                    return;
                };
                if let Err(error) = server.place_kept(&episode, &name) {
                    tracing::error!(%episode, upload = %name, error = %format!("{error:#}"), "placing an episode's folder: kept for the next start");
                }
                server.placed_one();
            }
        });
        if let Err(error) = started {
            tracing::error!(error = %error, "starting a placer");
        }
    }
    line
}

/// Whether the kept upload at `path` still hashes to the blake3 its name
/// starts with.
fn intact(path: &Path, name: &str) -> Result<()> {
    let expected = name.split('.').next().unwrap_or_default();
    let mut hasher = blake3::Hasher::new();
    let mut file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    std::io::copy(&mut file, &mut hasher)?;
    let actual = hasher.finalize().to_hex();
    if !actual.as_str().eq_ignore_ascii_case(expected) {
        bail!("its blake3 is {actual}, not the {expected} it was kept with");
    }
    Ok(())
}

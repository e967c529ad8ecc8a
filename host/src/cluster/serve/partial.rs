//! Suspended episodes: a worker told to stop (SIGTERM, Slurm's warning
//! before preemption or requeue) uploads its episode's records, which the
//! server keeps in `cluster/partial/<episode>/` and hands to the next lease
//! of that episode, so that it goes on after the last recorded step instead
//! of from scratch. On a shared filesystem, an episode whose worker died
//! without a word (SIGKILL, a lost node or lease) is taken up the same way
//! from the folder that worker was writing.

use std::path::PathBuf;

use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::{Answer, Server, Upload, header, json, refuse};
use crate::bench::journal::Entry;
use crate::bench::queue::Lease;
use crate::cluster::protocol::{EPISODE_HEADER, LEASE_HEADER};
use crate::cluster::upload;
use crate::episode::resume::Resumable;

impl Server {
    /// Where the suspended records of `episode` are kept.
    fn partial_dir(&self, episode: &str) -> PathBuf {
        self.dir.join("cluster/partial").join(episode)
    }

    /// Whether `lease` may go on from suspended records (kept here, or a
    /// dead worker's on the shared filesystem): a look at one file, made
    /// for every lease before the work of `resumed_by`.
    pub(super) fn may_resume(&self, lease: &Lease) -> bool {
        (self.shared && lease.attempt > 1) || self.partial_dir(&lease.episode).join("episode.json").exists()
    }

    /// The step `lease` goes on after, when its episode was suspended:
    /// journalled and recorded in the queue.
    pub(super) fn resumed_by(&self, lease: &Lease, now: i64) -> Result<Option<u32>> {
        let kept = self.partial_dir(&lease.episode);
        if self.shared && lease.attempt > 1 && !kept.exists() {
            self.take_up_dead_workers(&lease.episode)?;
        }
        let Resumable::Resume(point) = Resumable::read(&kept) else {
            return Ok(None);
        };
        let after_step = point.resume.after_step;
        self.queue
            .record_resume(&lease.token, &lease.episode, after_step, now)?;
        let start = Entry::Start {
            id: lease.episode.clone(),
            attempt: lease.attempt,
            resumed_after_step: Some(after_step),
        };
        self.journal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_unsynced(&start)?;
        Ok(Some(after_step))
    }

    /// `POST /v1/suspend`: a stopped worker's episode, its folder alone,
    /// under a lease it still holds; kept, and the lease given back.
    pub(super) async fn suspend(&self, request: Request<Incoming>) -> Result<Answer> {
        let upload = match self.checked_upload(request).await? {
            Ok(upload) => upload,
            Err(refusal) => return Ok(refusal),
        };
        let staging = self.staging()?;
        self.keep_suspended(upload, &staging.0).await
    }

    async fn keep_suspended(&self, upload: Upload, staging: &std::path::Path) -> Result<Answer> {
        let (episode, token) = (upload.episode.as_str(), upload.token.as_str());
        let unpacked = match upload.spool.unpack(staging) {
            Ok(unpacked) => unpacked,
            Err(error) => return Ok(refuse(StatusCode::BAD_REQUEST, &format!("{error:#}"))),
        };
        let (None, Some(folder)) = (unpacked.result, unpacked.episode) else {
            return Ok(refuse(
                StatusCode::BAD_REQUEST,
                "a suspended episode's upload holds its folder (episode/) and no result",
            ));
        };
        let Resumable::Resume(point) = Resumable::read(&folder) else {
            return Ok(refuse(
                StatusCode::UNPROCESSABLE_ENTITY,
                "the folder holds no records to go on from; release the lease instead",
            ));
        };
        let _one = self.finishing(episode).await;
        if !self.queue.holds(episode, token)? {
            return Ok(refuse(
                StatusCode::CONFLICT,
                "the lease is no longer held: another worker has the episode, or it is done",
            ));
        }
        let target = self.partial_dir(episode);
        if target.exists() {
            crate::record::walk::remove_tree(&target)?;
        }
        std::fs::create_dir_all(target.parent().unwrap_or(&self.dir))?;
        std::fs::rename(&folder, &target)?;
        let after_step = point.resume.after_step;
        let suspended = Entry::Suspended {
            id: episode.to_string(),
            after_step,
        };
        self.journal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_unsynced(&suspended)?;
        self.queue.release(token)?;
        Ok(json(
            StatusCode::OK,
            &serde_json::json!({ "suspended": true, "after_step": after_step }),
        ))
    }

    /// `GET /v1/partial`: the suspended records of the episode the caller
    /// holds the lease of, as a tar of its folder.
    pub(super) async fn partial(&self, request: &Request<Incoming>) -> Result<Answer> {
        let header = |name: &str| header(request, name);
        let (Some(episode), Some(token)) = (header(EPISODE_HEADER), header(LEASE_HEADER)) else {
            return Ok(refuse(
                StatusCode::BAD_REQUEST,
                &format!("fetching suspended records needs the headers {EPISODE_HEADER} and {LEASE_HEADER}"),
            ));
        };
        if !self.queue.holds(&episode, &token)? {
            return Ok(refuse(
                StatusCode::CONFLICT,
                &format!("{episode}: this lease is not the one it is held under"),
            ));
        }
        let dir = self.partial_dir(&episode);
        if !dir.join("episode.json").is_file() {
            return Ok(refuse(
                StatusCode::NOT_FOUND,
                &format!("{episode}: no suspended records"),
            ));
        }
        let body = tokio::task::spawn_blocking(move || {
            let mut body = Vec::new();
            upload::pack(None, Some(&dir), &mut body).map(|()| body)
        })
        .await??;
        Ok(Response::builder()
            .header(hyper::header::CONTENT_TYPE, "application/x-tar")
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default())
    }

    /// Keeps, as suspended, the most recent records of `episode` that a
    /// worker left under the run's `cluster/work/` (copied: that worker
    /// may still be running, cut off). Copied through the upload's archive,
    /// which follows no link and refuses what is not a file or folder.
    fn take_up_dead_workers(&self, episode: &str) -> Result<()> {
        let work = self.dir.join("cluster/work");
        let Ok(workers) = std::fs::read_dir(&work) else {
            return Ok(());
        };
        let latest = workers
            .filter_map(|w| w.ok())
            .map(|w| w.path().join(episode))
            .filter(|dir| !dir.is_symlink() && dir.join("episode.json").is_file())
            .filter_map(|dir| Some((dir.join("events.jsonl").metadata().ok()?.modified().ok()?, dir)))
            .max();
        let Some((_, dir)) = latest else {
            return Ok(());
        };
        let mut archive = tempfile::tempfile_in(self.dir.join("cluster"))?;
        upload::pack(None, Some(&dir), &mut archive)?;
        std::io::Seek::rewind(&mut archive)?;
        let staging = self.staging()?;
        let taken = upload::unpack(std::io::BufReader::new(archive), &staging.0).and_then(|unpacked| {
            let folder = unpacked.episode.ok_or_else(|| anyhow::anyhow!("an empty folder"))?;
            let target = self.partial_dir(episode);
            std::fs::create_dir_all(target.parent().unwrap_or(&self.dir))?;
            Ok(std::fs::rename(folder, target)?)
        });
        if let Err(error) = taken {
            tracing::warn!(%episode, from = %dir.display(), error = %format!("{error:#}"), "taking up a dead worker's records");
        }
        Ok(())
    }

    /// Forgets the suspended records of an episode whose result is in.
    pub(super) fn drop_partial(&self, episode: &str) {
        let dir = self.partial_dir(episode);
        if dir.exists()
            && let Err(error) = crate::record::walk::remove_tree(&dir)
        {
            tracing::warn!(%episode, error = %error, "removing suspended records");
        }
    }
}

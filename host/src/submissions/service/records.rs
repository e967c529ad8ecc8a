//! What a submitter is shown of a submission: its state, the scan's and
//! verification's verdict, each episode's result, and its records as a tar
//! archive. Until the benchmark version closes, nothing derived from the
//! private part of the hidden answers leaves the service (the score,
//! improvement, normalised score, success, each episode's `score.json`,
//! the run's tables, even the signature, whose hashes would let the score
//! be guessed back): only what `validate()` already told the agent on the
//! public part. After it closes (and always for an organiser), all of it.

use std::path::Path;

use anyhow::{Context, Result};
use bytes::Bytes;
use serde_json::{Value, json};

use super::Service;
use crate::bench::result_line::ResultLine;
use crate::record::archive as packing;
use crate::submissions::Submission;
use crate::submissions::accounts::Submitter;
use crate::submissions::reference::Reference;
use crate::submissions::store::now_ms;

/// A result's fields that tell nothing of the private part.
const PUBLIC_FIELDS: &[&str] = &[
    "id",
    "task",
    "agent",
    "seed",
    "metric",
    "higher_is_better",
    "end_reason",
    "steps",
    "wall_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "attempts",
    "feedback",
    "public_score",
    "public_improvement",
];

/// The run-level files shown before the close (the plan and the scan).
const PUBLIC_RUN_FILES: &[&str] = &["plan.json", "scan.json"];

/// Whether `submission`'s benchmark version has closed.
pub fn closed(service: &Service, submission: &Submission) -> bool {
    let id = format!("{}/{}", submission.benchmark, submission.version);
    service.benchmark(&id).is_some_and(|b| b.closed(now_ms()))
}

/// The reference `id` if its benchmark version has closed: only then are
/// its records and trace public (before, they would tell the private part).
pub fn closed_reference(service: &Service, id: &str) -> Option<Reference> {
    let id = id.parse::<i64>().ok()?;
    let reference = service.store.reference(id).ok().flatten()?;
    let version = format!("{}/{}", reference.benchmark, reference.version);
    let benchmark = service.benchmark(&version)?;
    benchmark.closed(now_ms()).then_some(reference)
}

/// Whether `who` may see the private part of `submission`'s results now.
pub fn sees_private(service: &Service, submission: &Submission, who: &Submitter) -> bool {
    who.admin || closed(service, submission)
}

/// One result as `who` may see it.
pub fn shown(result: &ResultLine, private: bool) -> Result<Value> {
    let mut value = serde_json::to_value(result)?;
    if private {
        return Ok(value);
    }
    if let Value::Object(map) = &mut value {
        map.retain(|key, _| PUBLIC_FIELDS.contains(&key.as_str()));
        // The infrastructure's message may quote an evaluator: only that it failed.
        map.insert("infra_failed".into(), json!(result.infra_error.is_some()));
    }
    Ok(value)
}

/// The status of `submission` as `who` sees it.
pub fn status(service: &Service, submission: &Submission, who: &Submitter) -> Result<Value> {
    let private = sees_private(service, submission, who);
    let results = super::runner::results(service, submission.id)?;
    let shown: Vec<Value> = results.iter().map(|r| shown(r, private)).collect::<Result<_>>()?;
    Ok(json!({
        "submission": submission,
        "verdict": service.store.verdict(submission.id)?.map(|v| v.shown(private)),
        "part": if private { "private" } else { "public" },
        "results": shown,
    }))
}

/// `submission`'s records as a tar archive, as `who` may see them (none
/// before its run has begun): the run's folder as `submission-<id>/`, and
/// beside it, when something had no content to pack (a FIFO, a socket,
/// an unreadable folder), `submission-<id>.left-out.txt` naming each, so
/// the folder itself stays as signed. Written to an unlinked file and
/// mapped, never held in memory whole.
pub fn archive(service: &Service, submission: &Submission, who: &Submitter) -> Result<Option<Bytes>> {
    let dir = service.layout.run(submission.id);
    if !dir.is_dir() {
        return Ok(None);
    }
    let private = sees_private(service, submission, who);
    let keep = |rel: &Path| private || shown_before_close(&dir, rel);
    pack(service, &dir, &format!("submission-{}", submission.id), keep).map(Some)
}

/// A person's reference run as a tar archive, whole (`reference-<id>/`):
/// shown only once its version closed, when nothing of it is hidden.
pub fn reference_archive(service: &Service, reference: &Reference) -> Result<Option<Bytes>> {
    let dir = service
        .layout
        .reference((&reference.benchmark, &reference.version), &reference.name);
    if !dir.is_dir() {
        return Ok(None);
    }
    pack(service, &dir, &format!("reference-{}", reference.id), |_| true).map(Some)
}

/// The folder `dir` packed as `root/`, what `keep` keeps of it.
fn pack(service: &Service, dir: &Path, root: &str, keep: impl Fn(&Path) -> bool) -> Result<Bytes> {
    let file = tempfile::tempfile_in(service.layout.staging()).context("a file for the archive")?;
    let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
    tar.follow_symlinks(false);
    let left_out = packing::append_tree(&mut tar, dir, Path::new(root), keep)
        .with_context(|| format!("packing {}", dir.display()))?;
    if !left_out.is_empty() {
        let note: String = left_out
            .iter()
            .map(|l| format!("{}: left out, {}\n", l.path.display(), l.why))
            .collect();
        let mut header = tar::Header::new_gnu();
        header.set_size(note.len() as u64);
        header.set_mode(0o644);
        tar.append_data(&mut header, format!("{root}.left-out.txt"), note.as_bytes())?;
    }
    let file = tar.into_inner()?.into_inner().map_err(|e| e.into_error())?;
    // SAFETY: the file is unlinked and this process's alone; nothing changes it.
    let map = unsafe { memmap2::Mmap::map(&file) }.context("mapping the archive")?;
    Ok(Bytes::from_owner(map))
}

/// What of an episode's folder is shown before the close: what the agent
/// made, did and was told; never `score.json`, the evaluator's output
/// (`eval.*`) nor the validations' own output (`validate/`), whose
/// messages the agent heard only as a fixed vocabulary. Anything not named
/// here stays hidden.
const EPISODE_ENTRIES: &[&str] = &[
    "episode.json",
    "events.jsonl",
    "agent.log",
    "snapshots",
    "exec",
    "workspace",
    "history",
];

/// Before the close: the plan, the scan, and what `EPISODE_ENTRIES` names
/// of each episode (nothing of the run's `cluster/` folder).
fn shown_before_close(dir: &Path, rel: &Path) -> bool {
    let first = |p: &Path| {
        p.components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
    };
    if rel.components().count() == 1 && dir.join(rel).is_file() {
        return PUBLIC_RUN_FILES.contains(&first(rel).unwrap_or_default().as_str());
    }
    if first(rel).as_deref() == Some("cluster") {
        return false;
    }
    let episode = rel
        .ancestors()
        .skip(1)
        .find(|above| !above.as_os_str().is_empty() && dir.join(above).join("episode.json").is_file());
    match episode {
        Some(episode) => {
            let inside = rel.strip_prefix(episode).unwrap_or(rel);
            EPISODE_ENTRIES.contains(&first(inside).unwrap_or_default().as_str())
        }
        // Folders on the way to an episode.
        None => dir.join(rel).is_dir(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_the_close_an_episode_keeps_what_the_agent_saw_and_nothing_scored() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        let episode = run.join("digits/agent/1");
        for file in [
            "plan.json",
            "scan.json",
            "results.jsonl",
            "summary.json",
            "report.html",
            "SIGNATURE.json",
            "journal.jsonl",
            "cluster/queue.sqlite",
            "digits/agent/1/episode.json",
            "digits/agent/1/events.jsonl",
            "digits/agent/1/agent.log",
            "digits/agent/1/score.json",
            "digits/agent/1/eval.stdout",
            "digits/agent/1/eval.stderr",
            "digits/agent/1/validate/0001.stderr",
            "digits/agent/1/exec/0001.stdout",
            "digits/agent/1/workspace/train.py",
            "digits/agent/1/workspace/score.json",
            "digits/agent/1/snapshots/objects/ab",
            "digits/agent/1/something-new.json",
        ] {
            let path = run.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        assert!(episode.join("episode.json").is_file());
        let shown: Vec<String> = walkdir::WalkDir::new(run)
            .into_iter()
            .map(|e| e.unwrap().path().strip_prefix(run).unwrap().to_path_buf())
            .filter(|rel| !rel.as_os_str().is_empty() && run.join(rel).is_file())
            .filter(|rel| shown_before_close(run, rel))
            .map(|rel| rel.display().to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(
            shown,
            [
                "digits/agent/1/agent.log",
                "digits/agent/1/episode.json",
                "digits/agent/1/events.jsonl",
                "digits/agent/1/exec/0001.stdout",
                "digits/agent/1/snapshots/objects/ab",
                "digits/agent/1/workspace/score.json",
                "digits/agent/1/workspace/train.py",
                "plan.json",
                "scan.json",
            ]
        );
    }

    #[test]
    fn before_the_close_a_result_shows_only_the_public_part() {
        let mut line = ResultLine::infra_failed("t/a/1", "t", "a", 1, "t/a/1", 1, "evaluator said: label 7 expected");
        line.infra_error = Some("evaluator said: label 7 expected".into());
        line.score = Some(0.9);
        line.improvement = Some(0.2);
        line.normalized = Some(0.5);
        line.success = Some(true);
        line.best_score = Some(0.95);
        line.public_score = Some(0.8);
        line.public_gain_lost = Some(true);
        let open = shown(&line, false).unwrap();
        let text = open.to_string();
        for hidden in ["0.9", "0.2", "0.5", "0.95", "label 7", "public_gain_lost", "success"] {
            assert!(!text.contains(hidden), "{hidden} in {text}");
        }
        assert_eq!(open["public_score"], 0.8);
        assert_eq!(open["infra_failed"], true);
        assert_eq!(shown(&line, true).unwrap()["score"], 0.9);
    }
}

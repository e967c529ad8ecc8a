//! Runs the queue of submissions: each accepted component on its
//! benchmark's plan (a bench on this host or on the plan's cluster, in
//! `runs/<id>/`), then its records scanned (`mlrb scan`), signed with the
//! service's key and verified (`mlrb verify`) before it is ranked; a
//! flagged one is held for an organiser. A service restarted mid-run
//! resumes the bench where it stopped.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use super::Service;
use crate::bench::result_line::ResultLine;
use crate::bench::{AgentEntry, Plan};
use crate::submissions::verdict::Verdict;
use crate::submissions::{Benchmark, State, Submission};

/// Who the runner's changes are audited as.
const ACTOR: &str = "service:runner";

/// Why the host refuses a component for `benchmark` (empty: it runs it):
/// `mlrb agent check` against the plan's tasks' network grant.
pub async fn check_component(service: &Service, benchmark: &Benchmark, path: &Path) -> Result<Vec<String>> {
    let mut network = true;
    for name in &benchmark.plan.tasks {
        network &= crate::task::resolve(name)?.spec.resources.network.granted();
    }
    let report = crate::agent_check::check(&service.engine, path, Some(network)).await?;
    Ok(report.refusals)
}

/// Runs submissions until `stop` is cancelled: first those a stopped
/// service left running, then each queued one, oldest first.
pub async fn run(service: Arc<Service>, stop: CancellationToken) -> Result<()> {
    for left in service.store.in_states(&[State::Running, State::Scoring], None)? {
        if stop.is_cancelled() {
            return Ok(());
        }
        run_one(&service, &left, &stop).await;
    }
    while !stop.is_cancelled() {
        let next = service.store.in_states(&[State::Queued], None)?.into_iter().next();
        match next {
            Some(submission) => run_one(&service, &submission, &stop).await,
            // An organiser's re-run is written to the database directly:
            // look again now and then even when nobody wakes the runner.
            None => tokio::select! {
                _ = service.queued.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                _ = stop.cancelled() => {}
            },
        }
    }
    Ok(())
}

/// Runs, checks and places one submission; a failure of the service's own
/// is recorded as the submission's failure, never lost.
async fn run_one(service: &Service, submission: &Submission, stop: &CancellationToken) {
    let id = submission.id;
    let outcome = advance(service, submission, stop).await;
    if let Err(error) = outcome {
        tracing::error!(submission = id, error = %format!("{error:#}"), "running a submission");
        let _ = service.store.set_state(
            id,
            State::Failed,
            "the service could not run it: the organisers have the details",
            ACTOR,
        );
    }
}

async fn advance(service: &Service, submission: &Submission, stop: &CancellationToken) -> Result<()> {
    let id = submission.id;
    let benchmark_id = format!("{}/{}", submission.benchmark, submission.version);
    let benchmark = service
        .benchmark(&benchmark_id)
        .with_context(|| format!("benchmark {benchmark_id} is no longer published"))?;
    let dir = service.layout.run(id);
    if submission.state != State::Scoring {
        if submission.state == State::Queued {
            set_aside(&dir)?;
            service.store.set_state(id, State::Running, "", ACTOR)?;
        }
        let plan = plan_for(service, benchmark, submission);
        let resume = dir.join("journal.jsonl").exists();
        let watch = crate::cluster::Watch {
            quiet: true,
            rerun_stale: false,
        };
        let interrupt = async {
            tokio::select! {
                () = stop.cancelled() => {}
                () = withdrawn(service, id) => {}
            }
        };
        let outcome = crate::cluster::bench_anywhere((!resume).then_some(plan), &dir, watch, interrupt).await?;
        // Stopped (resumed at the next start), or withdrawn: then not charged.
        if outcome.interrupted {
            return Ok(());
        }
        let used: f64 = outcome.results.iter().map(|r| r.wall_ms as f64 / 1000.0).sum();
        let usd: f64 = outcome.results.iter().map(|r| r.cost_usd).sum();
        service.store.add_usage(id, used, usd)?;
        if outcome.results.iter().all(|r| r.infra_error.is_some()) {
            let why = "every episode failed on the infrastructure: the organisers look into it";
            service.store.set_state(id, State::Failed, why, ACTOR)?;
            return Ok(());
        }
        service.store.set_state(id, State::Scoring, "", ACTOR)?;
    }
    let verdict = check_records(&service.layout, benchmark, &dir).await?;
    service.store.set_verdict(id, &verdict)?;
    let (next, why) = placement(&verdict);
    service.store.set_state(id, next, &why, ACTOR)?;
    Ok(())
}

/// Resolves once submission `id` is withdrawn (through the API or by an
/// organiser's `mlrb submissions withdraw`, another process: the database
/// is looked at every second).
async fn withdrawn(service: &Service, id: i64) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(Some(submission)) = service.store.any_submission(id)
            && submission.state == State::Withdrawn
        {
            tracing::info!(submission = id, "withdrawn while running: stopped, not charged");
            return;
        }
    }
}

/// The benchmark's plan with the submission as its one agent.
fn plan_for(service: &Service, benchmark: &Benchmark, submission: &Submission) -> Plan {
    let mut plan = benchmark.plan.clone();
    plan.agents = vec![AgentEntry::Named {
        path: service.layout.agent(&submission.agent_sha256),
        name: submission.agent.clone(),
    }];
    plan
}

/// A re-run starts in a fresh folder; the earlier run is kept beside it.
fn set_aside(dir: &Path) -> Result<()> {
    if dir.exists() {
        let aside = dir.with_file_name(format!(
            "{}-before-{}",
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            crate::submissions::store::now_ms()
        ));
        std::fs::rename(dir, &aside).with_context(|| format!("setting {} aside", dir.display()))?;
    }
    Ok(())
}

/// Scans the run's records, signs them and verifies the signed records
/// (re-scoring each episode, as anyone with the records can).
pub(super) async fn check_records(layout: &super::Layout, benchmark: &Benchmark, dir: &Path) -> Result<Verdict> {
    let scan = crate::bench::scan::scan_run(dir, &Default::default())?;
    std::fs::write(dir.join("scan.json"), serde_json::to_vec_pretty(&scan)?)?;
    let key = layout.key();
    crate::record::signature::sign(dir, &key)?;
    let mut setup = benchmark.plan.host.clone();
    setup.llm = Some("none".into());
    let options = crate::bench::verify::Options {
        dir: dir.to_path_buf(),
        key: Some(crate::record::signature::public_path(&key)),
        replay: false,
        no_eval: false,
        tolerance: 1e-9,
        setup,
    };
    let findings = crate::bench::verify::verify(&options, &|_| {}).await?;
    let mut failures: Vec<String> = findings
        .iter()
        .flat_map(|f| f.failures.iter().map(move |why| format!("{}: {why}", f.what)))
        .collect();
    // Verified or not, a smoke episode's score measures nothing: never ranked.
    if let Some(smoke) = findings.iter().find(|f| f.smoke) {
        failures.insert(
            0,
            format!(
                "{}: an episode of the smoke profile (stand-in data), which never ranks",
                smoke.what
            ),
        );
    }
    Ok(Verdict {
        review_flags: scan.review,
        info_flags: scan.info,
        verify: match failures.first() {
            None => "verified".into(),
            Some(first) => format!("failed ({} findings), first: {first}", failures.len()),
        },
    })
}

/// Ranked, or held for an organiser (flags to review, or records that did
/// not verify), and why.
fn placement(verdict: &Verdict) -> (State, String) {
    match (verdict.review_flags, verdict.verified()) {
        (0, true) => (State::Ranked, String::new()),
        (flags, true) => (
            State::Held,
            format!("{flags} flag(s) for review: an organiser looks before it is ranked"),
        ),
        (_, false) => (
            State::Held,
            "its records did not verify: an organiser looks before it is ranked".into(),
        ),
    }
}

/// The results of submission `id`'s run (none before it has any).
pub fn results(service: &Service, id: i64) -> Result<Vec<ResultLine>> {
    let dir = service.layout.run(id);
    if !dir.join("results.jsonl").is_file() {
        return Ok(Vec::new());
    }
    crate::bench::read_results(&dir)
}

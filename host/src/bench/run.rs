//! `mlrb bench` on this host: a new bench or the resume of one, its
//! episodes run a bounded number at once, and its outputs written.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicU32;

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;

use super::journal::{self, Journal};
use super::opened::Bench;
use super::plan::Plan;
use super::progress::Progress;
use super::result_line::ResultLine;
use super::results::{stale_results, write_outputs};
use super::summary::{self, Summary};

/// What `run` did.
pub struct Outcome {
    /// The metrics of the run.
    pub summary: Summary,
    /// The result line of each finished episode, in plan order.
    pub results: Vec<ResultLine>,
    /// Whether the bench was interrupted before every episode ended.
    pub interrupted: bool,
    /// Episodes run by this invocation (not adopted or already done).
    pub ran: usize,
}

/// Where a bench starts from: its plan, and for a resume the journal so far.
struct Start {
    plan: Plan,
    state: Option<journal::State>,
    journal: Option<Journal>,
}

/// A new bench's plan, checked, or the plan and journal of the one in `dir`.
fn start(plan: Option<Plan>, dir: &Path) -> Result<Start> {
    let journal_path = dir.join("journal.jsonl");
    if let Some(plan) = plan {
        plan.check()?;
        if journal_path.exists() {
            bail!(
                "{}: already holds a bench: resume it with `mlrb bench --resume {}`, or choose another --run-name",
                dir.display(),
                dir.display()
            );
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        return Ok(Start {
            plan,
            state: None,
            journal: None,
        });
    }
    Ok(Start {
        plan: Plan::saved(dir)?,
        state: Some(journal::read(&journal_path)?),
        journal: Some(Journal::append_to(&journal_path)?),
    })
}

/// Starts a new bench in `dir` (which must not hold one), or resumes the
/// one there. `interrupt` resolving stops it: running episodes end as
/// interrupted and are redone by a resume.
pub async fn run(
    plan: Option<Plan>,
    dir: &Path,
    cache_dir: &Path,
    quiet: bool,
    rerun_stale: bool,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Outcome> {
    let Start { plan, state, journal } = start(plan, dir)?;
    let bench = Bench::open(plan, dir, cache_dir).await?;
    let cells = bench.cells();
    let ids: Vec<String> = cells.iter().map(|c| c.id.clone()).collect();
    let (state, journal) = bench.journal(&ids, state, journal)?;
    let journal = tokio::sync::Mutex::new(journal);
    let mut results: BTreeMap<String, ResultLine> = state.results.clone();
    stale_results(dir, &mut results, rerun_stale)?;
    let pending = bench.settle(&cells, &mut results, &journal).await?;
    let progress = Progress::new(cells.len() as u64, results.len() as u64, quiet);
    let stop = tokio_util::sync::CancellationToken::new();
    let ran = AtomicU32::new(0);
    let finished = {
        let work = futures_util::stream::iter(pending.iter())
            .map(|cell| {
                let attempts = state.attempts.get(&cell.id).copied().unwrap_or(0);
                bench.run_cell(cell, attempts, &journal, &progress, &stop, &ran)
            })
            .buffer_unordered(bench.plan.parallel)
            .collect::<Vec<_>>();
        tokio::pin!(interrupt);
        tokio::pin!(work);
        tokio::select! {
            done = &mut work => done,
            _ = &mut interrupt => {
                progress.note("interrupted: ending the running episodes; `mlrb bench --resume` redoes them");
                stop.cancel();
                work.await
            }
        }
    };
    progress.finish();
    for result in finished {
        if let Some(result) = result? {
            results.insert(result.id.clone(), result);
        }
    }
    let ordered: Vec<ResultLine> = ids.iter().filter_map(|id| results.get(id).cloned()).collect();
    write_outputs(dir, &ordered)?;
    Ok(Outcome {
        summary: summary::summarize(&ordered),
        results: ordered,
        interrupted: stop.is_cancelled(),
        ran: ran.into_inner() as usize,
    })
}

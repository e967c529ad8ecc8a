//! `mlrb compare`: two agents on the (task, seed) pairs both ran, from two
//! runs or one; `--fail-if-worse` gates a change in CI.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

use super::say;
use crate::bench::compare::{Measure, Side, compare};
use crate::bench::result_line::ResultLine;
use crate::{bench, report, stats};

/// Exit status of `mlrb compare --fail-if-worse` when B is worse than A
/// beyond the margin with 95 % confidence.
pub const EXIT_WORSE: u8 = 4;

/// Options of `mlrb compare`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  mlrb compare runs/main runs/branch --fail-if-worse --margin 0.05\n  mlrb compare runs/r --agents baseline search_agent --json"
)]
pub struct CompareArgs {
    /// The run of A (the reference), a bench run directory.
    run_a: PathBuf,
    /// The run of B (the candidate) [default: the same run as A, with --agents].
    run_b: Option<PathBuf>,
    /// The agents compared, A then B, by their names in the runs [default:
    /// each run's only agent].
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    agents: Vec<String>,
    /// What is compared per episode [default: the normalised score where
    /// every task has a reference, else the improvement, else the score].
    #[arg(long, value_enum)]
    measure: Option<Measure>,
    /// Exit 4 when B is worse than A beyond the margin with 95 % confidence
    /// (the overall t interval of B − A lies below −margin), or, where the
    /// seeds did not vary so no interval can be given, when B lost every
    /// pair beyond the margin.
    #[arg(long)]
    fail_if_worse: bool,
    /// How much worse B may be, in the measure's units (0.05 = 5 % of the
    /// way from starter to reference for the normalised score).
    #[arg(long, default_value_t = 0.0, value_name = "X")]
    margin: f64,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
    /// Every column of every table, unwrapped (wider than the terminal).
    #[arg(long)]
    wide: bool,
}

/// The results of `agent` in `run`; its only agent when none is named.
fn side(run: &Path, agent: Option<&String>) -> Result<(Side, Vec<ResultLine>)> {
    let results = bench::read_results(run)?;
    let mut agents: Vec<&str> = results.iter().map(|r| r.agent.as_str()).collect();
    agents.sort();
    agents.dedup();
    let name = match (agent, agents.as_slice()) {
        (Some(name), _) if agents.contains(&name.as_str()) => name.clone(),
        (Some(name), _) => bail!(
            "{}: no agent named {name} (its agents: {})",
            run.display(),
            agents.join(", ")
        ),
        (None, [only]) => only.to_string(),
        (None, _) => bail!(
            "{}: it has several agents ({}); name them with --agents A B",
            run.display(),
            agents.join(", ")
        ),
    };
    let own = results.into_iter().filter(|r| r.agent == name).collect();
    let side = Side {
        run: run.display().to_string(),
        agent: name,
    };
    Ok((side, own))
}

impl CompareArgs {
    /// Compares, prints, and exits 4 when asked to fail on a worse B.
    pub fn run(self) -> Result<ExitCode> {
        if !(self.margin >= 0.0 && self.margin.is_finite()) {
            bail!("--margin must be a number at least 0, not {}", self.margin);
        }
        let run_b = match (&self.run_b, self.agents.is_empty()) {
            (Some(b), _) => b.clone(),
            (None, false) => self.run_a.clone(),
            (None, true) => bail!("compare two runs (RUN_A RUN_B), or two agents of one run (RUN --agents A B)"),
        };
        let (sa, a) = side(&self.run_a, self.agents.first())?;
        let (sb, b) = side(&run_b, self.agents.get(1))?;
        if self.run_b.is_none() && sa.agent == sb.agent {
            bail!(
                "--agents names {} twice: compare two different agents of one run",
                sa.agent
            );
        }
        let (a, b): (Vec<&ResultLine>, Vec<&ResultLine>) = (a.iter().collect(), b.iter().collect());
        let comparison = compare(
            (&a, &b),
            (sa, sb),
            self.measure,
            self.margin,
            &stats::Bootstrap::default(),
        )?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&comparison)?);
        } else {
            say!("{}", report::comparison_text(&comparison, self.wide));
        }
        Ok(match self.fail_if_worse && comparison.fails_gate() {
            true => ExitCode::from(EXIT_WORSE),
            false => ExitCode::SUCCESS,
        })
    }
}

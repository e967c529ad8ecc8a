//! `mlrb report`: a bench run's tables again, from its results.jsonl;
//! rewrites its summary.json and report.html.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::say;
use crate::{bench, report};

/// Options of `mlrb report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A bench run directory (runs/<run-name>).
    run_dir: PathBuf,
    /// Print summary.json instead of tables.
    #[arg(long)]
    json: bool,
    /// Every column of every table, unwrapped (wider than the terminal).
    #[arg(long)]
    wide: bool,
}

impl ReportArgs {
    /// Prints the tables and rewrites the run's summary and report.
    pub fn run(self) -> Result<ExitCode> {
        let dir = &self.run_dir;
        let results = bench::read_results(dir)?;
        let summary = bench::summary::summarize(&results);
        bench::write_outputs(dir, &results)?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&summary)?);
        } else {
            say!("{}", report::summary_tables(&summary, self.wide));
            let done = format!(
                "{} episode(s) in {}; the HTML report is {}",
                results.len(),
                dir.display(),
                dir.join("report.html").display()
            );
            say!("{}", crate::columns::wrap(&done));
        }
        Ok(ExitCode::SUCCESS)
    }
}

//! `mlrb export`: a run's results as an Inspect AI evaluation log or as
//! Every Eval Ever records; a run whose records do not verify is refused.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

use super::say;
use crate::bench::export::{Format, Source, export};

/// Options of `mlrb export`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  mlrb export runs/r --format inspect     # then: inspect view --log-dir runs/r/export/inspect\n  mlrb export runs/r --format eee --organization 'My Lab' --relationship third_party"
)]
pub struct ExportArgs {
    /// A bench run directory (runs/<run-name>).
    run_dir: PathBuf,
    /// `inspect`: one Inspect AI log per agent; `eee`: Every Eval Ever records.
    #[arg(long, value_enum)]
    format: Format,
    /// Where the files go [default: <run>/export/<format>].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// For EEE: the organisation that ran the evaluation.
    #[arg(long, default_value = "unknown")]
    organization: String,
    /// For EEE: the evaluator's relation to the agents evaluated.
    #[arg(long, default_value = "other", value_parser = ["first_party", "third_party", "collaborative", "other"])]
    relationship: String,
    /// Print the files written as JSON.
    #[arg(long)]
    json: bool,
}

impl ExportArgs {
    /// Verifies the run's records, writes the files, lists them.
    pub fn run(self) -> Result<ExitCode> {
        if !self.run_dir.join("results.jsonl").is_file() {
            bail!(
                "{}: no results.jsonl here: export takes a bench run directory",
                self.run_dir.display()
            );
        }
        let name = match self.format {
            Format::Inspect => "inspect",
            Format::Eee => "eee",
        };
        let out = self
            .out
            .clone()
            .unwrap_or_else(|| self.run_dir.join("export").join(name));
        let source = Source {
            organization: self.organization.clone(),
            relationship: self.relationship.clone(),
        };
        let bar = super::spinner("checking the run's records, exporting");
        let written = export(&self.run_dir, self.format, &out, &source);
        bar.finish_and_clear();
        let written = written?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&written)?);
        } else {
            for path in &written {
                say!("wrote {}", path.display());
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

//! `mlrb scan`: recorded episodes checked for what a reviewer should look
//! at before trusting their scores, without running anything. Exit 0 when
//! nothing needs review, 1 when something does, 2 when the records cannot
//! be read.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::say;
use crate::bench::scan::{scan_run, table};
use crate::episode::scan::ScanOptions;

/// Exit status when the input cannot be read.
const EXIT_UNREADABLE: u8 = 2;

/// Options of `mlrb scan`.
#[derive(Args, Debug)]
pub struct ScanArgs {
    /// A run directory (every episode under it) or one episode directory.
    dir: PathBuf,
    /// Flag an episode that made more validations than this (the task's
    /// own allowance is always checked).
    #[arg(long, value_name = "N")]
    max_validations: Option<u32>,
    /// Print the flags as JSON.
    #[arg(long)]
    json: bool,
}

impl ScanArgs {
    /// Scans and prints the flags; the exit status says whether any needs review.
    pub fn run(self) -> Result<ExitCode> {
        let options = ScanOptions {
            max_validations: self.max_validations,
        };
        let scan = match scan_run(&self.dir, &options) {
            Ok(scan) => scan,
            Err(error) => {
                eprintln!("error: {}", format!("{error:#}").replace('\n', " "));
                return Ok(ExitCode::from(EXIT_UNREADABLE));
            }
        };
        if self.json {
            say!("{}", serde_json::to_string_pretty(&scan)?);
        } else {
            if !scan.flags.is_empty() {
                say!("{}", table::flags_table(&scan));
            }
            say!("{}", table::verdict(&scan));
        }
        Ok(if scan.needs_review() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    }
}

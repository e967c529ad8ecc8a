//! `mlrb verify`: check that a run or episode directory is what it was when
//! it was recorded: one line per episode (verified, or what failed), the
//! run's results and summary against its episodes, and its signature.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{SandboxArgs, say};
use crate::bench::verify::{self, Options, Progress};

/// Options of `mlrb verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// A run directory (every episode under it), one episode directory, or
    /// a tar archive of either (`mlrb submissions download`, `/records/<id>`),
    /// unpacked into a temporary folder that nothing in it can leave.
    dir: PathBuf,
    /// The signer's public key (`mlrb keygen`'s `.pub`): the directory must
    /// carry a signature by this key [default: a signature present is
    /// checked against the key it names, and an unsigned run passes].
    #[arg(long, value_name = "FILE.pub")]
    key: Option<PathBuf>,
    /// Also replay each episode (hermetically) and require it identical.
    #[arg(long)]
    replay: bool,
    /// Do not re-run the evaluators (the records are still checked).
    #[arg(long)]
    no_eval: bool,
    /// How far (relative) a re-computed score may be from the recorded one;
    /// a task whose metric is not deterministic (a timing) is also allowed
    /// its own `metric.tolerance`.
    #[arg(long, default_value_t = 1e-9, value_name = "REL")]
    tolerance: f64,
    #[command(flatten)]
    sandbox: SandboxArgs,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

impl VerifyArgs {
    /// Checks everything; exits 1 when anything fails.
    pub async fn run(self) -> Result<ExitCode> {
        // Kept until the end: the temporary folder goes with it.
        let unpacked = if self.dir.is_file() {
            Some(crate::record::archive::unpack_file(&self.dir)?)
        } else {
            None
        };
        let options = Options {
            dir: unpacked.as_ref().map_or(self.dir, |(_, records)| records.clone()),
            key: self.key,
            replay: self.replay,
            no_eval: self.no_eval,
            tolerance: self.tolerance,
            setup: self.sandbox.setup(),
        };
        let bar = indicatif::ProgressBar::hidden();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} episodes verified [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let progress = |at: Progress| match at {
            Progress::Episodes(n) => {
                bar.set_length(n as u64);
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            Progress::Checked => bar.inc(1),
        };
        let findings = verify::verify(&options, &progress).await;
        bar.finish_and_clear();
        let findings = findings?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&findings)?);
        } else {
            if findings.iter().any(|f| f.smoke) {
                say!("{}", crate::task::smoke::BANNER);
            }
            for finding in &findings {
                say!("{}", finding.line());
            }
        }
        let failed = findings.iter().any(|f| !f.failures.is_empty());
        Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
    }
}

//! `mlrb sign`: sign a run (or episode) directory with an ed25519 key.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::say;
use crate::record::signature;

/// Options of `mlrb sign`.
#[derive(Args, Debug)]
pub struct SignArgs {
    /// The run or episode directory to sign.
    dir: PathBuf,
    /// The secret key file `mlrb keygen` wrote.
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
}

impl SignArgs {
    /// Writes `SIGNATURE.json` into the directory.
    pub fn run(self) -> Result<ExitCode> {
        let list = signature::sign(&self.dir, &self.key)?;
        say!(
            "signed {} files of {} with key {}: {}",
            list.files.len(),
            self.dir.display(),
            &list.public_key[..16],
            self.dir.join(signature::FILE).display()
        );
        Ok(ExitCode::SUCCESS)
    }
}

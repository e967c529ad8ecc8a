//! `mlrb keygen`: an ed25519 key pair for signing run directories.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::say;
use crate::record::signature;

/// Options of `mlrb keygen`.
#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// The secret key file to write (mode 0600); the public key goes to `<FILE>.pub`.
    #[arg(long, short, value_name = "FILE", default_value = "mlrb-key")]
    out: PathBuf,
}

impl KeygenArgs {
    /// Writes the key pair; never overwrites a key.
    pub fn run(self) -> Result<ExitCode> {
        let public = signature::keygen(&self.out)?;
        say!("secret key: {} (keep it private)", self.out.display());
        say!(
            "public key: {} (give it to whoever verifies your runs)",
            public.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}

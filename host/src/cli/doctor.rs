//! `mlrb doctor`: each part mlrb can use, whether this machine has it,
//! what its absence disables and the command that adds it.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

use super::say;

/// Options of `mlrb doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// The parts as JSON (an array of {part, present, detail, disables, add, required}).
    #[arg(long)]
    json: bool,
    /// Instead, run a probe in the local sandbox as a GPU task's steps run,
    /// with GPU DEVICE passed through (`none`: no GPU), and print what it
    /// saw as JSON: user, limits, seccomp, device nodes, variables' names,
    /// cuInit's result, torch.cuda.is_available(), and whether reserving
    /// address space, sizing a memfd and starting threads work there.
    #[arg(long, value_name = "DEVICE")]
    gpu_probe: Option<String>,
    /// The Python environment of the probe (as `--python` elsewhere).
    #[arg(long, value_name = "PATH", requires = "gpu_probe")]
    python: Option<std::path::PathBuf>,
}

impl DoctorArgs {
    /// Examines the machine and prints the table; exits 1 when a part the
    /// default path needs (bubblewrap) is missing.
    pub async fn run(self) -> Result<ExitCode> {
        if let Some(device) = &self.gpu_probe {
            let outcome = crate::doctor::gpu_probe(device, self.python.as_deref()).await?;
            say!("{}", outcome.stdout.text.trim_end());
            if !outcome.success() {
                eprintln!(
                    "the probe failed ({}): {}",
                    outcome.describe(),
                    outcome.stderr.text.trim_end()
                );
                return Ok(ExitCode::FAILURE);
            }
            return Ok(ExitCode::SUCCESS);
        }
        let parts = crate::doctor::examine().await;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&parts)?);
        } else {
            let mut table = Table::new();
            table.load_preset(UTF8_FULL_CONDENSED).set_header([
                "part",
                "here",
                "found / why not",
                "what it is needed for",
                "to add it",
            ]);
            crate::columns::fit(&mut table);
            for p in &parts {
                let here = if p.present { "yes" } else { "no" };
                table.add_row([p.part, here, &p.detail, p.disables, if p.present { "" } else { p.add }]);
            }
            say!("{table}");
        }
        let missing: Vec<&str> = parts
            .iter()
            .filter(|p| p.required && !p.present)
            .map(|p| p.part)
            .collect();
        if missing.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "mlrb cannot run an episode here: {} missing (see above)",
            missing.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}

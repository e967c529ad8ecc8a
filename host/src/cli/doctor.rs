//! `mlrb doctor`: each part mlrb can use, whether this machine has it,
//! what its absence disables and the command that adds it.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use super::say;

/// Options of `mlrb doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// The parts as JSON (an array of {part, present, detail, disables, add, required}).
    #[arg(long)]
    json: bool,
}

impl DoctorArgs {
    /// Examines the machine and prints the table; exits 1 when a part the
    /// default path needs (bubblewrap) is missing.
    pub async fn run(self) -> Result<ExitCode> {
        let parts = crate::doctor::examine().await;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&parts)?);
        } else {
            let mut table = Table::new();
            table
                .load_preset(UTF8_FULL_CONDENSED)
                .set_content_arrangement(ContentArrangement::Dynamic)
                .set_header(["part", "here", "found / why not", "what it is needed for", "to add it"]);
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

//! `mlrb submissions`: the submission service from both sides. An
//! organiser acts on the service folder itself (`init`, `add-submitter`,
//! `token`, `revoke`, `rerun`, `withdraw`, `invalidate`, `release`,
//! `reference`, `audit`); a submitter asks the service over HTTP (`list`, `status`,
//! `download`) with their token.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::{say, submission_text};
use crate::submissions::client::Client;
use crate::submissions::service::{Service, reference};
use crate::submissions::{State, Store};

/// `mlrb submissions` subcommands.
#[derive(Subcommand, Debug)]
pub enum SubmissionsCommand {
    /// Make a service folder: its database, signing key and folders
    /// (publish benchmarks as TOML files in its `benchmarks/`).
    Init {
        /// The service folder.
        dir: PathBuf,
    },
    /// Add a submitter and print their first token (shown once).
    AddSubmitter {
        /// The service folder.
        dir: PathBuf,
        /// The name the leaderboard shows.
        name: String,
        /// May see every submission through the API.
        #[arg(long)]
        admin: bool,
    },
    /// Issue another token for a submitter (shown once).
    Token {
        /// The service folder.
        dir: PathBuf,
        /// The submitter.
        name: String,
    },
    /// Revoke a token by its id (the part after `mlrbs_`, before the next `_`).
    Revoke {
        /// The service folder.
        dir: PathBuf,
        /// The token's id.
        token: String,
        /// Why (kept in the audit log).
        #[arg(long, default_value = "")]
        why: String,
    },
    /// Put a submission back in the queue (a re-run).
    Rerun(Change),
    /// Take a submission off the leaderboard.
    Withdraw(Change),
    /// Mark a submission as breaking the rules: kept, never ranked.
    Invalidate(Change),
    /// Rank a held submission after review.
    Release(Change),
    /// Add a person's run (episodes made by `mlrb human` on the benchmark's
    /// tasks and seeds, under its limits) to a benchmark version's board as
    /// a reference row: verified like a submission, never ranked, no quota.
    /// With `--remove NAME`, take one off.
    #[command(
        override_usage = "mlrb submissions reference <DIR> --benchmark <NAME/VERSION> \\\n           \
                                --episodes <DIR> --name <NAME>\n       \
                          mlrb submissions reference <DIR> --benchmark <NAME/VERSION> --remove <NAME>"
    )]
    Reference {
        /// The service folder.
        dir: PathBuf,
        /// The benchmark version, NAME/VERSION.
        #[arg(long, value_name = "NAME/VERSION")]
        benchmark: String,
        /// The run folder of the person's episodes (`mlrb human --out OUT
        /// --run-name RUN`: OUT/RUN).
        #[arg(long, value_name = "DIR", required_unless_present = "remove")]
        episodes: Option<PathBuf>,
        /// The person's name, as given to `mlrb human --name`.
        #[arg(long, required_unless_present = "remove")]
        name: Option<String>,
        /// Take the reference of this person off the board (audited).
        #[arg(long, value_name = "NAME", conflicts_with_all = ["episodes", "name"])]
        remove: Option<String>,
    },
    /// Print the audit log.
    Audit {
        /// The service folder.
        dir: PathBuf,
        /// As JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Your submissions (a submitter's view, over HTTP).
    List {
        #[command(flatten)]
        remote: Remote,
        /// Print the service's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One submission's state, checks and results so far.
    Status {
        #[command(flatten)]
        remote: Remote,
        /// The submission's id.
        id: i64,
        /// Print the service's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Download a submission's records (a tar archive).
    Download {
        #[command(flatten)]
        remote: Remote,
        /// The submission's id.
        id: i64,
        /// Where to write the archive.
        #[arg(long, short, value_name = "FILE.tar")]
        out: Option<PathBuf>,
    },
}

/// An organiser's change to one submission.
#[derive(Args, Debug)]
pub struct Change {
    /// The service folder.
    dir: PathBuf,
    /// The submission's id.
    id: i64,
    /// Why (kept in the audit log and shown to the submitter).
    #[arg(long, default_value = "")]
    why: String,
}

/// Where the service is and whose token to use.
#[derive(Args, Debug)]
pub struct Remote {
    /// The service's URL.
    #[arg(long, env = "MLRB_SERVICE", value_name = "URL")]
    pub server: String,
    /// A file holding your token.
    #[arg(long, env = "MLRB_TOKEN_FILE", value_name = "FILE")]
    pub token_file: PathBuf,
}

impl Remote {
    /// A client with the token read from its file.
    pub fn client(&self) -> Result<Client> {
        let token = std::fs::read_to_string(&self.token_file)
            .map_err(|e| anyhow::anyhow!("{}: cannot read the token ({e})", self.token_file.display()))?;
        Client::new(&self.server, &token)
    }
}

/// The organiser acting on the folder directly.
const ORGANISER: &str = "admin:local";

impl SubmissionsCommand {
    /// Does what was asked; prints the outcome.
    pub async fn run(self) -> Result<ExitCode> {
        match self {
            Self::Init { dir } => {
                let layout = Service::init(&dir)?;
                let dir = dir.display();
                say!(
                    "{}",
                    crate::columns::wrap(&format!(
                        "made {dir}\n  publish benchmarks as TOML files in {}\n  add submitters with \
                         `mlrb submissions add-submitter {dir} NAME`\n  serve with `mlrb serve --submissions {dir}`",
                        layout.benchmarks().display(),
                    ))
                );
            }
            Self::AddSubmitter { dir, name, admin } => {
                let (_, token) = store(&dir)?.add_submitter(&name, admin, ORGANISER)?;
                say!("{}", token.secret);
                eprintln!("the token of {name} (id {}): shown once, keep it", token.id);
            }
            Self::Token { dir, name } => {
                let token = store(&dir)?.issue_token(&name, ORGANISER)?;
                say!("{}", token.secret);
                eprintln!("a new token of {name} (id {}): shown once, keep it", token.id);
            }
            Self::Revoke { dir, token, why } => {
                store(&dir)?.revoke_token(&token, ORGANISER, &why)?;
                say!("revoked token {token}");
            }
            Self::Rerun(change) => change.apply(State::Queued)?,
            Self::Withdraw(change) => change.apply(State::Withdrawn)?,
            Self::Invalidate(change) => change.apply(State::Invalidated)?,
            Self::Release(change) => change.apply(State::Ranked)?,
            Self::Reference {
                dir,
                benchmark,
                episodes,
                name,
                remove,
            } => reference_command(&dir, &benchmark, (episodes, name), remove).await?,
            Self::Audit { dir, json } => {
                for line in store(&dir)?.audit_log()? {
                    match json {
                        true => say!("{}", serde_json::to_string(&line)?),
                        false => say!(
                            "{}",
                            crate::columns::wrap(&format!(
                                "{}  {}  {}  {}  {}",
                                chrono::DateTime::from_timestamp_millis(line.at_ms)
                                    .map_or_else(|| line.at_ms.to_string(), |t| t.to_rfc3339()),
                                line.actor,
                                line.action,
                                line.subject,
                                line.detail
                            ))
                        ),
                    }
                }
            }
            Self::List { remote, json } => {
                let list = remote.client()?.list().await?;
                match json {
                    true => say!("{}", serde_json::to_string_pretty(&list)?),
                    false => say!("{}", submission_text::list(&list)),
                }
            }
            Self::Status { remote, id, json } => {
                let status = remote.client()?.status(id).await?;
                match json {
                    true => say!("{}", serde_json::to_string_pretty(&status)?),
                    false => say!("{}", submission_text::status(&status)),
                }
            }
            Self::Download { remote, id, out } => {
                let out = out.unwrap_or_else(|| PathBuf::from(format!("submission-{id}.tar")));
                let bytes = remote.client()?.download(id, &out).await?;
                say!("wrote {} ({bytes} bytes)", out.display());
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// `mlrb submissions reference`: adds the person's run, or with `remove`
/// takes one off.
async fn reference_command(
    dir: &std::path::Path,
    benchmark: &str,
    (episodes, name): (Option<PathBuf>, Option<String>),
    remove: Option<String>,
) -> Result<()> {
    if let Some(name) = remove {
        let removed = reference::remove(dir, benchmark, &name, ORGANISER)?;
        say!(
            "removed human:{} (reference {}) from {benchmark}",
            removed.name,
            removed.id
        );
        return Ok(());
    }
    let (Some(episodes), Some(name)) = (episodes, name) else {
        anyhow::bail!("--episodes DIR and --name NAME are needed (or --remove NAME)");
    };
    let request = reference::Request {
        service: dir,
        benchmark,
        episodes: &episodes,
        name: &name,
    };
    let added = reference::add(&request, ORGANISER).await?;
    say!(
        "added human:{} to {benchmark} as reference {} (a person's reference row, not ranked)",
        added.name,
        added.id
    );
    Ok(())
}

impl Change {
    fn apply(self, next: State) -> Result<()> {
        let submission = store(&self.dir)?.set_state(self.id, next, &self.why, ORGANISER)?;
        println!("submission {} is {}", submission.id, submission.state.name());
        Ok(())
    }
}

fn store(dir: &std::path::Path) -> Result<Store> {
    let layout = crate::submissions::service::Layout { dir: dir.to_path_buf() };
    if !layout.database().is_file() {
        anyhow::bail!(
            "{}: not a submission service folder (no service.sqlite): make one with `mlrb submissions init {}`",
            dir.display(),
            dir.display()
        );
    }
    Store::open(&layout.database())
}

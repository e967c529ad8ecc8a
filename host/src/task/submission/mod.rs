//! The submission runner: how an evaluator runs the agent's code without
//! that code ever running where a result is written.
//!
//! A task whose evaluator must run or time submitted code (`[scoring]
//! submission = "code"`) gets a socket at [`GUEST_SOCKET`] and a writable
//! exchange folder at [`GUEST_EXCHANGE`]. Each request (a JSON line: argv,
//! a folder of the exchange with the run's inputs, a timeout, whether it
//! is timed) is one run in a fresh sandbox of its own (`run.rs`): its own
//! control group or container, killed as a whole, with the workspace
//! read-only, the inputs read-only, a scratch output folder (bounded and
//! copied back by `outputs.rs`) and a result channel (a FIFO this host
//! reads, which the run may write but never read; a timed run also gets a
//! `go` FIFO it may read but never write). What the records keep of the runs is bounded per evaluation
//! (`logs.rs`). It sees neither the hidden files, nor
//! the evaluator's processes, nor the evaluator's result file. The host
//! times a run itself, from the run's `ready` to the last byte of its
//! result, in wall-clock and in CPU time (`run.rs`), and answers with how it ended; the evaluator, apart, judges
//! what it returned. `mlrb_eval.run_submission` is the evaluator's side.

mod logs;
mod outputs;
mod run;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use super::Task;
use crate::sandbox::{Mount, Sandbox};

/// Where the evaluator finds the runner's socket (a read-only folder).
pub const GUEST_SOCKET_DIR: &str = "/mlrb/runner";
/// The socket's path inside the evaluator's sandbox.
pub const GUEST_SOCKET: &str = "/mlrb/runner/sock";
/// The exchange folder inside the evaluator's sandbox.
pub const GUEST_EXCHANGE: &str = "/mlrb/exchange";
/// The most runs one evaluation may ask for.
const MAX_RUNS: u32 = 256;
/// The longest request line.
const MAX_REQUEST: usize = 64 << 10;

/// One run the evaluator asks for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The program and its arguments, as seen in the run's sandbox.
    pub argv: Vec<String>,
    /// The exchange folder holding the run's inputs (a plain name).
    pub folder: String,
    /// The longest the run may take, in seconds (at most the task's script timeout).
    pub timeout_s: f64,
    /// Whether the run is timed: the clock runs from its `ready` line on
    /// the channel to the last byte of its framed result.
    #[serde(default)]
    pub timed: bool,
    /// The largest result the run may send on its channel.
    #[serde(default = "default_result_bytes")]
    pub result_max_bytes: u64,
}

fn default_result_bytes() -> u64 {
    64 << 20
}

/// How a run ended, as the evaluator is told.
#[derive(Debug, Clone, Serialize)]
pub struct Reply {
    /// Set when the request itself was refused; nothing ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// `exited`, `timed-out`, `out-of-memory` or `killed`.
    pub termination: String,
    /// The exit code, when it exited on its own.
    pub exit_code: Option<i32>,
    /// Whether a complete result came on the channel (saved as `<folder>/result`).
    pub result: bool,
    /// Seconds from `ready` to the result's last byte (timed runs), or the
    /// run's whole time.
    pub seconds: Option<f64>,
    /// The CPU time the run's processes used from `ready` to the result's
    /// last byte (timed runs), as this host read it from the run's control
    /// group or container; none where the sandbox has no such meter.
    pub cpu_seconds: Option<f64>,
    /// The end of what the run printed on stderr (at most 2 KiB): for the
    /// evaluator's records, never for the agent.
    pub stderr: String,
    /// What came of its output folder (none where nothing ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outputs: Option<outputs::Outputs>,
}

impl Reply {
    fn refused(why: impl Into<String>) -> Self {
        Self {
            refused: Some(why.into()),
            termination: "refused".into(),
            exit_code: None,
            result: false,
            seconds: None,
            cpu_seconds: None,
            stderr: String::new(),
            outputs: None,
        }
    }

    /// This reply with what came of the run's output folder: a run whose
    /// folder broke a bound is refused (`outputs-too-large`), whatever it
    /// sent on its channel.
    fn with_outputs(mut self, outputs: outputs::Outputs) -> Self {
        if outputs.is_refused() {
            self.termination = OUTPUTS_TOO_LARGE.into();
            self.result = false;
            self.exit_code = None;
        }
        self.outputs = Some(outputs);
        self
    }
}

/// The termination of a run whose output folder broke a bound.
pub const OUTPUTS_TOO_LARGE: &str = "outputs-too-large";

/// What the runs of one evaluation share.
pub struct Runs<'a> {
    /// The task being scored.
    pub task: &'a Task,
    /// Where runs start.
    pub sandbox: &'a dyn Sandbox,
    /// The workspace being scored (read-only in every run).
    pub workspace: &'a Path,
    /// The GPUs the evaluator holds.
    pub gpus: Vec<String>,
    /// Where runs' logs go (`<prefix>-run-<n>.stdout`), if anywhere.
    pub log_prefix: Option<PathBuf>,
}

/// The runner of one evaluation: its socket and its exchange folder.
pub struct Service {
    dir: tempfile::TempDir,
    listener: tokio::net::UnixListener,
}

impl Service {
    /// Listens for the evaluator's requests (served by [`Service::serve`]).
    pub fn start() -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("mlrb-runner-")
            .tempdir()
            .context("making the submission runner's folder")?;
        for sub in ["sock", "exchange", "runs"] {
            std::fs::create_dir(dir.path().join(sub))?;
        }
        open_to_all(dir.path())?;
        open_to_all(&dir.path().join("sock"))?;
        let socket = dir.path().join("sock/sock");
        let listener =
            tokio::net::UnixListener::bind(&socket).with_context(|| format!("listening at {}", socket.display()))?;
        std::fs::set_permissions(&socket, std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
        Ok(Self { dir, listener })
    }

    /// Answers the evaluator's connections, one request at a time, until
    /// the future is dropped (a run still going ends with its sandbox).
    pub async fn serve(&self, context: &Runs<'_>) {
        let mut paths = Paths {
            exchange: self.dir.path().join("exchange"),
            runs: self.dir.path().join("runs"),
            log_cap: 0,
        };
        let budget = context.task.limits().script_log_bytes;
        let mut logs = logs::Logs::new(context.log_prefix.clone(), budget);
        let mut count = 0u32;
        while let Ok((stream, _)) = self.listener.accept().await {
            let (read, mut write) = stream.into_split();
            let mut lines = tokio::io::BufReader::new(read.take(MAX_REQUEST as u64 * MAX_RUNS as u64)).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                count += 1;
                paths.log_cap = logs.next_cap();
                let reply = match count > MAX_RUNS {
                    true => Reply::refused(format!("an evaluation may run submitted code at most {MAX_RUNS} times")),
                    false => answer(&line, count, context, &paths).await,
                };
                logs.ran(count, &reply);
                let mut text = serde_json::to_string(&reply).unwrap_or_default();
                text.push('\n');
                if write.write_all(text.as_bytes()).await.is_err() {
                    break;
                }
            }
        }
    }

    /// The mounts and variables that give the evaluator this runner.
    pub fn for_evaluator(&self) -> (Vec<Mount>, Vec<(String, String)>) {
        let mounts = vec![
            Mount::read_only(self.dir.path().join("sock"), GUEST_SOCKET_DIR),
            Mount::writable(self.dir.path().join("exchange"), GUEST_EXCHANGE),
        ];
        let env = vec![
            ("MLRB_RUNNER".to_string(), GUEST_SOCKET.to_string()),
            ("MLRB_EXCHANGE".to_string(), GUEST_EXCHANGE.to_string()),
        ];
        (mounts, env)
    }
}

/// Host-side folders of the runner.
#[derive(Clone)]
struct Paths {
    exchange: PathBuf,
    runs: PathBuf,
    /// What each stream of the next run may log (the evaluation's budget).
    log_cap: u64,
}

/// Makes a folder enterable by the sandbox user.
fn open_to_all(dir: &Path) -> Result<()> {
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .with_context(|| format!("opening {} to the sandbox", dir.display()))
}

/// One request's reply.
async fn answer(line: &str, number: u32, context: &Runs<'_>, paths: &Paths) -> Reply {
    if line.len() > MAX_REQUEST {
        return Reply::refused(format!("a request is at most {MAX_REQUEST} bytes"));
    }
    let request: Request = match serde_json::from_str(line) {
        Ok(request) => request,
        Err(e) => return Reply::refused(format!("not a run request: {e}")),
    };
    match run::run(&request, number, context, paths).await {
        Ok(reply) => reply,
        Err(error) => Reply::refused(format!("{error:#}")),
    }
}

//! Scripts started by a launcher that lives in the episode's sandbox
//! (`launcher.py`), so that a script costs one spawn instead of a
//! new bubblewrap or a Docker exec.
//!
//! The launcher is out of the scripts' reach (the pid namespace's init
//! under bubblewrap, root in a container; never dumpable: see
//! `launcher.py`), and is still trusted for nothing but the exit status of
//! the agent's own script. Everything else stays with the host: the output pipes are the
//! host's (handed over as `SCM_RIGHTS`), the timeout and the flood limit are
//! enforced here, and after every script the caller checks from outside
//! that nothing but the launcher is left. Any doubt ends the whole sandbox
//! and the next script starts a fresh one. Task steps (prepare, evaluate)
//! never use a launcher: they run in a sandbox of their own.

use std::future::Future;
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use rustix::net::{RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::output::Capture;
use super::{CapturedOutput, CommandLimits, Ending, Exec, Outcome, Termination};

/// The launcher's source, run with `python3 -I -S -c`.
pub const SOURCE: &str = include_str!("launcher.py");

/// How long a launcher may take to say it is ready.
pub const READY_WITHIN: Duration = Duration::from_secs(10);

/// The largest message a launcher may send; anything longer is a lie.
const REPLY_CAP: usize = 4096;

/// How long a script's output may stay open after the script ended.
const OUTPUT_GRACE: Duration = Duration::from_secs(5);

/// The largest request the host sends (argv and environment).
const REQUEST_CAP: usize = 256 << 10;

/// The argv that starts a launcher inside a sandbox: `how` is `fd` (an
/// inherited socket) or `connect` (a socket path), for at most `lifetime`;
/// with `relay`, it also relays the scripts' proxy port to the egress
/// proxy's socket (`egress/forwarder.py`); with `script_user` (`uid:gid`),
/// it runs as root and starts scripts as that user.
pub fn argv(how: &str, place: &str, lifetime: Duration, relay: bool, script_user: Option<&str>) -> Vec<String> {
    let lifetime = lifetime.as_secs().max(1).to_string();
    let source = match relay {
        true => format!("{}\nforward()\n{SOURCE}", super::egress::gateway::FORWARDER),
        false => SOURCE.to_string(),
    };
    ["python3", "-I", "-S", "-c", &source, how, place, &lifetime]
        .into_iter()
        .chain(script_user)
        .map(String::from)
        .collect()
}

/// An episode's long-lived sandbox `T` (a launcher and what holds it), as
/// its scripts find it.
pub struct Warm<T>(Arc<tokio::sync::Mutex<State<T>>>);

enum State<T> {
    /// Not started, or ended after a script it could not vouch for.
    Cold,
    Ready(T),
    /// Cannot be had here: every script runs another way.
    Unavailable,
}

impl<T> Warm<T> {
    /// A sandbox started at the first script, or never when not `available`.
    pub fn new(available: bool) -> Self {
        Self(Arc::new(tokio::sync::Mutex::new(if available {
            State::Cold
        } else {
            State::Unavailable
        })))
    }

    /// Starts the sandbox now, in the background, so that the episode's
    /// first script finds it ready (the first snapshot and the agent's
    /// start come in between); a script that comes sooner waits for it.
    pub fn prestart<S>(&self, start: S)
    where
        T: Send + 'static,
        S: Future<Output = Result<T>> + Send + 'static,
    {
        // Taken here, before the task runs, so that no script overtakes it.
        let Ok(mut state) = self.0.clone().try_lock_owned() else {
            return;
        };
        if matches!(*state, State::Cold) {
            tokio::spawn(async move { *state = started(start.await) });
        }
    }

    /// Runs a script with `run` in the warm sandbox, which `start` makes
    /// when there is none; `run` says whether the sandbox may go on.
    /// `Ok(None)` when the script is to run another way (no launcher could
    /// be started, or it was gone before the script started).
    pub async fn run<S>(
        &self,
        start: impl FnOnce() -> S,
        run: impl AsyncFnOnce(&T) -> Result<(Outcome, bool), Failure>,
    ) -> Result<Option<Outcome>>
    where
        S: Future<Output = Result<T>>,
    {
        let mut state = self.0.lock().await;
        if matches!(*state, State::Cold) {
            *state = started(start().await);
        }
        let State::Ready(sandbox) = &*state else {
            return Ok(None);
        };
        match run(sandbox).await {
            Ok((outcome, keep)) => {
                if !keep {
                    *state = State::Cold;
                }
                Ok(Some(outcome))
            }
            Err(Failure::NotStarted(error)) => {
                tracing::warn!(error = %format!("{error:#}"), "the episode's launcher is gone; the script runs in a sandbox of its own");
                *state = State::Cold;
                Ok(None)
            }
            Err(Failure::Broken(error)) => {
                *state = State::Cold;
                Err(error)
            }
        }
    }

    /// Ends the warm sandbox (dropping it) for good.
    pub async fn close(&self) {
        *self.0.lock().await = State::Unavailable;
    }
}

/// The state a start leaves.
fn started<T>(start: Result<T>) -> State<T> {
    match start {
        Ok(sandbox) => State::Ready(sandbox),
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "scripts of this episode start one sandbox each (slower): its launcher could not start");
            State::Unavailable
        }
    }
}

/// Why a script given to a launcher has no outcome.
#[derive(Debug)]
pub enum Failure {
    /// It never started (the launcher is gone): run it another way.
    NotStarted(anyhow::Error),
    /// It ran, but what it left could not be ended: the episode cannot go on.
    Broken(anyhow::Error),
}

/// A socket path that a launcher in a container connects to. One
/// connection is accepted; the path is removed when this is dropped.
pub struct Rendezvous {
    listener: AsyncFd<OwnedFd>,
    path: PathBuf,
}

impl Rendezvous {
    /// Listens at `path` (replacing what is there).
    pub fn listen(path: &Path) -> Result<Self> {
        use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
        let _ = std::fs::remove_file(path);
        let fd = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )
        .context("making the launcher's socket")?;
        let address = SocketAddrUnix::new(path).with_context(|| format!("socket path {}", path.display()))?;
        rustix::net::bind(&fd, &address).with_context(|| format!("binding {}", path.display()))?;
        let rendezvous = Self {
            listener: watch(fd)?,
            path: path.to_path_buf(),
        };
        // The sandbox user must be able to connect; who did is checked on accept.
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o666);
        std::fs::set_permissions(path, mode)
            .with_context(|| format!("opening {} to the sandbox user", path.display()))?;
        rustix::net::listen(rendezvous.listener.get_ref(), 1).context("listening for the launcher")?;
        Ok(rendezvous)
    }

    /// The first connection within `within`, if `allowed` accepts the pid
    /// of the process that made it (as this host's kernel names it).
    pub async fn accept(&self, within: Duration, allowed: impl Fn(i32) -> bool) -> Result<OwnedFd> {
        let accept = self.listener.async_io(Interest::READABLE, |fd| {
            rustix::net::accept_with(fd, rustix::net::SocketFlags::CLOEXEC).map_err(std::io::Error::from)
        });
        let conn = tokio::time::timeout(within, accept)
            .await
            .map_err(|_| anyhow!("the launcher did not connect within {} s", within.as_secs()))?
            .context("accepting the launcher's connection")?;
        let peer = rustix::net::sockopt::socket_peercred(&conn).context("asking who connected")?;
        let pid = peer.pid.as_raw_nonzero().get();
        if !allowed(pid) {
            bail!(
                "process {pid}, not the sandbox's launcher, connected to {}",
                self.path.display()
            );
        }
        Ok(conn)
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What the launcher says of a script that ended.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    code: Option<i32>,
    signal: Option<i32>,
    #[serde(default)]
    leftover: bool,
    error: Option<String>,
    #[serde(default)]
    ready: bool,
}

/// A connection to a launcher that said it is ready.
pub struct Launcher {
    conn: AsyncFd<OwnedFd>,
}

/// How a script started by a launcher ended, before anyone has checked
/// that nothing of it is left.
struct Launched {
    exit_code: Option<i32>,
    ended_by_host: Option<(Termination, String)>,
    /// False when the launcher could not vouch that nothing is left, or
    /// said something the host cannot trust.
    clean: bool,
    duration: Duration,
    capture: Capture,
}

/// How a script started by a launcher ended, checked from outside.
pub struct Checked {
    /// The exit status in the sandboxes' convention (128 + N for signal N),
    /// when the launcher reported one.
    pub exit_code: Option<i32>,
    /// Set when the host ended the script (timeout, output flood, stop).
    pub ended_by_host: Option<(Termination, String)>,
    /// From sending the request to the script's end.
    pub duration: Duration,
    /// What it printed.
    pub stdout: CapturedOutput,
    /// What it printed to stderr.
    pub stderr: CapturedOutput,
    /// Whether the sandbox may go on; false when everything in it,
    /// the launcher too, was killed.
    pub keep: bool,
}

impl Checked {
    /// Whether the script may have been ended by the OOM killer (SIGKILL,
    /// or its launcher gone without a word), so that its event may trail.
    pub fn may_be_out_of_memory(&self) -> bool {
        self.ended_by_host.is_none() && matches!(self.exit_code, Some(137) | None)
    }

    /// The outcome, given whether the sandbox saw the OOM killer strike
    /// under its memory limit of `memory_bytes`, and whether it may go on.
    pub fn outcome(self, out_of_memory: bool, memory_bytes: u64) -> (Outcome, bool) {
        let launcher_lost = self.exit_code.is_none() && self.ended_by_host.is_none() && !out_of_memory;
        let ended_by_host = match (self.exit_code, self.ended_by_host) {
            (None, None) if !out_of_memory => Some((
                Termination::Killed,
                "killed: the sandbox's launcher failed during the script (it was killed, or said what cannot be \
                 believed), so the script's exit status is unknown"
                    .to_string(),
            )),
            (_, ended) => ended,
        };
        let ending = Ending {
            exit_code: self.exit_code,
            signal: None,
            ended_by_host,
            out_of_memory,
            memory_bytes,
        };
        let mut outcome = Outcome::from_ending(ending, self.duration, self.stdout, self.stderr);
        outcome.ended_from_outside |= launcher_lost;
        (outcome, self.keep)
    }
}

impl Launcher {
    /// Waits for the launcher at the other end of `conn` to say it is ready.
    pub async fn ready(conn: OwnedFd) -> Result<Self> {
        rustix::io::ioctl_fionbio(&conn, true).context("making the launcher's socket non-blocking")?;
        let conn = watch(conn)?;
        let launcher = Self { conn };
        let reply = tokio::time::timeout(READY_WITHIN, launcher.receive())
            .await
            .map_err(|_| anyhow!("the launcher did not start within {} s", READY_WITHIN.as_secs()))??;
        if !reply.ready {
            bail!("the launcher's first message was not `ready`");
        }
        Ok(launcher)
    }

    /// The launcher's next message; an error when it closed or sent
    /// something that is not one.
    async fn receive(&self) -> Result<Reply> {
        let mut buf = vec![0u8; REPLY_CAP + 1];
        let n = self
            .conn
            .async_io(Interest::READABLE, |fd| {
                rustix::net::recv(fd, &mut buf[..], RecvFlags::empty())
                    .map(|(n, _)| n)
                    .map_err(std::io::Error::from)
            })
            .await
            .context("reading from the launcher")?;
        if n == 0 {
            bail!("the launcher is gone");
        }
        if n > REPLY_CAP {
            bail!("the launcher sent a message over {REPLY_CAP} bytes");
        }
        serde_json::from_slice(&buf[..n]).context("the launcher sent a malformed message")
    }

    /// Sends one script request, with the write ends of its output pipes.
    async fn send(&self, request: &[u8], stdout: &OwnedFd, stderr: &OwnedFd) -> Result<()> {
        if request.len() > REQUEST_CAP {
            bail!(
                "the script's arguments and environment take {} bytes; at most {REQUEST_CAP} can be passed",
                request.len()
            );
        }
        let fds = [stdout.as_fd(), stderr.as_fd()];
        self.conn
            .async_io(Interest::WRITABLE, |fd| {
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
                let mut control = SendAncillaryBuffer::new(&mut space);
                control.push(SendAncillaryMessage::ScmRights(&fds));
                rustix::net::sendmsg(fd, &[IoSlice::new(request)], &mut control, SendFlags::NOSIGNAL)
                    .map_err(std::io::Error::from)
            })
            .await
            .context("sending a script to the launcher")?;
        Ok(())
    }

    /// Runs `exec` in `cwd` under `limits`, then makes sure nothing of it
    /// is left: `only_launcher_left` says so from outside the sandbox, and
    /// `end_all` kills everything in it, the launcher included, whenever
    /// the script was stopped by the host or anything is in doubt.
    pub async fn run_checked<F: Future<Output = Result<()>>>(
        &self,
        exec: &Exec,
        cwd: &Path,
        limits: &CommandLimits,
        only_launcher_left: impl Fn() -> bool,
        end_all: impl Fn() -> F,
    ) -> Result<Checked, Failure> {
        let mut launched = self.run(exec, cwd, limits).await.map_err(Failure::NotStarted)?;
        let mut keep = launched.clean && launched.ended_by_host.is_none() && only_launcher_left();
        if !keep {
            end_all().await.map_err(Failure::Broken)?;
        }
        let mut outputs = launched.capture.outputs(OUTPUT_GRACE).await;
        if outputs.is_none() {
            // Something outside the script's process tree holds its
            // output: nothing in the sandbox is to be trusted.
            keep = false;
            end_all().await.map_err(Failure::Broken)?;
            outputs = launched.capture.outputs(OUTPUT_GRACE).await;
        }
        let (stdout, stderr) = outputs.and_then(Result::ok).unwrap_or_default();
        Ok(Checked {
            exit_code: launched.exit_code,
            ended_by_host: launched.ended_by_host,
            duration: launched.duration,
            stdout,
            stderr,
            keep,
        })
    }

    /// Runs `exec` and waits until it ends, the timeout or the flood limit
    /// passes, or the host stops it.
    async fn run(&self, exec: &Exec, cwd: &Path, limits: &CommandLimits) -> Result<Launched> {
        let request = serde_json::to_vec(&serde_json::json!({
            "argv": exec.argv,
            "env": exec.env,
            "cwd": cwd,
        }))?;
        let (out_read, out_write) = pipe()?;
        let (err_read, err_write) = pipe()?;
        let capture = Capture::start(
            tokio::net::unix::pipe::Receiver::from_owned_fd(out_read)?,
            tokio::net::unix::pipe::Receiver::from_owned_fd(err_read)?,
            limits,
            &exec.log_prefix,
        );
        let started = Instant::now();
        self.send(&request, &out_write, &err_write).await?;
        // Only the script holds the write ends now: they close with it.
        drop((out_write, err_write));
        let (reply, ended_by_host) = match capture.until(self.receive(), exec.timeout, &exec.stop).await {
            Ok(reply) => (Some(reply), None),
            Err(ended) => (None, Some(ended)),
        };
        let duration = started.elapsed();
        let (exit_code, clean) = match reply {
            Some(Ok(reply)) => judge(reply),
            Some(Err(error)) => {
                tracing::warn!(error = %format!("{error:#}"), "the episode's launcher failed during a script");
                (None, false)
            }
            None => (None, false),
        };
        Ok(Launched {
            exit_code,
            ended_by_host,
            clean,
            duration,
            capture,
        })
    }
}

/// The exit status a reply claims, and whether the sandbox may go on.
fn judge(reply: Reply) -> (Option<i32>, bool) {
    match reply {
        Reply { error: Some(error), .. } => {
            tracing::warn!(%error, "the episode's launcher refused a script");
            (None, false)
        }
        Reply {
            signal: Some(signal), ..
        } if (1..=64).contains(&signal) => (Some(128 + signal), !reply.leftover),
        Reply {
            code: Some(code),
            signal: None,
            ..
        } if (0..=255).contains(&code) => (Some(code), !reply.leftover),
        _ => (None, false),
    }
}

/// A socket registered with the runtime.
fn watch(fd: OwnedFd) -> Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd keeps its descriptor open, and the same, until it is dropped with the AsyncFd.
    unsafe { AsyncFd::register(fd) }.map_err(|e| anyhow!("watching the launcher's socket: {e}"))
}

/// A pipe whose ends are closed on exec (the write end is handed over
/// explicitly).
fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).context("making a pipe for a script's output")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(json: &str) -> Reply {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_reply_is_believed_only_for_an_exit_status_in_range() {
        assert_eq!(judge(reply(r#"{"code": 3, "leftover": false}"#)), (Some(3), true));
        assert_eq!(judge(reply(r#"{"signal": 9, "leftover": false}"#)), (Some(137), true));
        assert_eq!(judge(reply(r#"{"code": 0, "leftover": true}"#)), (Some(0), false));
        assert_eq!(judge(reply(r#"{"code": 9999}"#)), (None, false));
        assert_eq!(judge(reply(r#"{"signal": 0}"#)), (None, false));
        assert_eq!(judge(reply(r#"{"code": 1, "signal": 9}"#)), (Some(137), true));
        assert_eq!(judge(reply(r#"{"error": "no pipes"}"#)), (None, false));
        assert_eq!(judge(reply(r#"{}"#)), (None, false));
        assert!(serde_json::from_str::<Reply>(r#"{"code": 0, "extra": 1}"#).is_err());
    }
}

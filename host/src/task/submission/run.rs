//! One run of submitted code: a fresh sandbox with the workspace and the
//! run's inputs read-only, a scratch output folder, and a result channel
//! (a FIFO) that this host reads and times.
//!
//! The channel is write-only from the run's side: this host opens its read
//! end while only it may, then leaves the FIFO writable and unreadable to
//! everyone (its folder is mounted read-only, so no run can change that).
//! No process of the run can take the harness's `ready` line, reorder it or
//! read it back: the clock starts when this host reads it.
//!
//! A timed run is measured twice, by this host: the wall-clock time from
//! `ready` to its result's last byte, and the CPU time its control group
//! (or container) used in between, which load on the machine does not
//! stretch (see `sandbox::cpu_time`). So that both readings of the CPU time
//! fall while the harness waits, a timed run gets a second FIFO, `go`, that
//! only this host writes: the harness blocks on it after `ready` until this
//! host has read the meter, and again after its result.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use tokio::io::AsyncReadExt;

use super::{Paths, Reply, Request, Runs, logs, outputs};
use crate::sandbox::{self, Mount, Outcome, Stopper};

/// The run's channel inside its sandbox.
const GUEST_CHANNEL: &str = "/mlrb/channel/result";
/// A timed run's `go` FIFO inside its sandbox.
const GUEST_GO: &str = "/mlrb/channel/go";
/// What this host writes on `go` once it has read the meter at `ready`.
const GO: &[u8] = b"go\n";
/// What a timed run writes on its channel when its clock may start.
const READY: &[u8] = b"ready\n";
/// How much of the run's stderr the evaluator is given.
const STDERR_TAIL: usize = 2048;

/// Runs `request` (the evaluation's run number `number`).
pub async fn run(request: &Request, number: u32, context: &Runs<'_>, paths: &Paths) -> Result<Reply> {
    let inputs = inputs_folder(&paths.exchange, &request.folder)?;
    let own = paths.runs.join(number.to_string());
    let (out, channel_dir) = (own.join("out"), own.join("channel"));
    for dir in [&own, &out, &channel_dir] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    super::open_to_all(&own)?;
    super::open_to_all(&channel_dir)?;
    let receiver = open_channel(&channel_dir.join("result"))?;
    let go = match request.timed {
        true => Some(open_go(&channel_dir.join("go"))?),
        false => None,
    };
    let stop = Stopper::default();
    let mut command = command(request, number, context, &inputs, &out, &channel_dir, stop.clone())?;
    command.limits.log_cap = paths.log_cap;
    command.limits.max_file_bytes = command.limits.max_file_bytes.min(outputs::MAX_BYTES);
    let ends = Ends {
        receiver,
        go,
        meter: command.meter.clone(),
    };
    let running = run_and_read(context, command, ends, request, stop.clone());
    let (outcome, channel) = outputs::watched(&out, &stop, running).await?;
    let copied = outputs::copy_back(&out, &inputs.join("out"))?;
    let result = channel.as_ref().and_then(|c| c.result.as_deref());
    if let Some(bytes) = result.filter(|_| !copied.is_refused()) {
        std::fs::write(inputs.join("result"), bytes).context("saving the run's result")?;
    }
    Ok(reply(&outcome, channel.as_ref(), request.timed).with_outputs(copied))
}

/// The inputs folder `name` of the exchange: a plain name of a folder.
fn inputs_folder(exchange: &Path, name: &str) -> Result<PathBuf> {
    let plain =
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plain {
        bail!(
            "`folder` must be a plain name (letters, digits, - and _) of a folder in {}",
            super::GUEST_EXCHANGE
        );
    }
    let path = exchange.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => Ok(path),
        _ => bail!("{}/{name} is not a folder", super::GUEST_EXCHANGE),
    }
}

/// Makes the run's channel at `path` and opens its read end: a FIFO that
/// the run's user may only write.
fn open_channel(path: &Path) -> Result<tokio::net::unix::pipe::Receiver> {
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, 0o600.into(), 0)
        .with_context(|| format!("making the run's channel {}", path.display()))?;
    // Read and write: the reader never sees an end of file, whoever opens
    // and closes the write end inside. Opened before the mode allows
    // anyone else to open it at all.
    let receiver = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(path)
        .context("opening the run's channel")?;
    // Write-only for everyone, the owner included: a run whose user maps to
    // this host's (bubblewrap without root) is the owner.
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(WRITE_ONLY))
        .with_context(|| format!("making {} write-only", path.display()))?;
    Ok(receiver)
}

/// The channel's mode: anyone may write, nobody may read.
const WRITE_ONLY: u32 = 0o222;

/// Makes a timed run's `go` FIFO at `path` and opens its write end: a FIFO
/// the run's user may only read.
fn open_go(path: &Path) -> Result<tokio::net::unix::pipe::Sender> {
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, 0o600.into(), 0)
        .with_context(|| format!("making the run's go channel {}", path.display()))?;
    // Read and write, so that opening never waits for a reader.
    let sender = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_sender(path)
        .context("opening the run's go channel")?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(READ_ONLY))
        .with_context(|| format!("making {} read-only", path.display()))?;
    Ok(sender)
}

/// The go channel's mode: anyone may read, nobody may write.
const READ_ONLY: u32 = 0o444;

/// What a timed run uses one thread of each numerical library with: its
/// CPU time sums its threads, and idle threads of a pool that spin while
/// they wait would be counted as work.
const ONE_THREAD: [&str; 3] = ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"];

/// The run's sandboxed command.
fn command(
    request: &Request,
    number: u32,
    context: &Runs<'_>,
    inputs: &Path,
    out: &Path,
    channel_dir: &Path,
    stop: Stopper,
) -> Result<sandbox::Command> {
    if request.argv.is_empty() {
        bail!("`argv` is empty");
    }
    let task_timeout = context.task.spec.resources.script_timeout_seconds as f64;
    if !(request.timeout_s > 0.0 && request.timeout_s.is_finite()) {
        bail!("`timeout_s` must be a positive number of seconds");
    }
    let timeout = Duration::from_secs_f64(request.timeout_s.min(task_timeout));
    let mounts = vec![
        Mount::read_only(context.workspace, "/workspace"),
        Mount::read_only(inputs, "/mlrb/in"),
        Mount::writable(out, "/mlrb/output"),
        Mount::read_only(channel_dir, "/mlrb/channel"),
    ];
    let mut env = vec![("MLRB_CHANNEL".to_string(), GUEST_CHANNEL.to_string())];
    if request.timed {
        env.push(("MLRB_GO".into(), GUEST_GO.into()));
        env.extend(ONE_THREAD.map(|name| (name.to_string(), "1".to_string())));
    }
    Ok(sandbox::Command {
        argv: request.argv.clone(),
        cwd: "/tmp".into(),
        mounts,
        env,
        network: sandbox::Reach::Nothing,
        limits: context.task.task_script_limits(timeout),
        gpus: context.gpus.clone(),
        log_prefix: context.log_prefix.as_ref().map(|p| logs::run_prefix(p, number)),
        stop,
        meter: Default::default(),
    })
}

/// What came on a run's channel.
struct Channel {
    /// When `ready` came, and the run's CPU time then.
    ready: Option<(Instant, Option<Duration>)>,
    /// The framed result, complete.
    result: Option<Vec<u8>>,
    /// When its last byte came, and the run's CPU time then.
    done: Option<(Instant, Option<Duration>)>,
}

/// This host's ends of a run: its channel, its `go` (timed runs) and the
/// meter of its CPU time.
struct Ends {
    receiver: tokio::net::unix::pipe::Receiver,
    go: Option<tokio::net::unix::pipe::Sender>,
    meter: sandbox::cpu_time::CpuMeter,
}

/// Runs `command` while reading its channel; once a complete result is in
/// (or the channel is spoiled), the run is ended (nothing it does
/// afterwards can change what was sent).
async fn run_and_read(
    context: &Runs<'_>,
    command: sandbox::Command,
    ends: Ends,
    request: &Request,
    stop: Stopper,
) -> Result<(Outcome, Option<Channel>)> {
    let run = context.sandbox.run(command);
    tokio::pin!(run);
    let read = read_channel(ends, request.timed, request.result_max_bytes);
    tokio::pin!(read);
    let (outcome, channel) = tokio::select! {
        biased;
        channel = &mut read => {
            stop.stop(match channel.result {
                Some(_) => "the run's result is in",
                None => "the run spoiled its result channel",
            });
            (run.await?, Some(channel))
        }
        outcome = &mut run => {
            // A run that wrote its whole result and exited may be seen to end
            // before its channel is read: what it wrote is still in the pipe.
            let drained = tokio::time::timeout(DRAIN, &mut read).await.ok();
            (outcome?, drained)
        }
    };
    Ok((outcome, channel))
}

/// How long the channel of a run that has ended is read for what it left
/// there; a complete result is read at once, this bounds an incomplete one.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads `ready` (when timed: then reads the meter and says `go`) and then
/// a result framed as its length (8 bytes, little-endian) and its bytes;
/// resolves once it is complete, or at once without a result when the
/// channel is spoiled (a wrong first line, a result over `cap` bytes):
/// no frame can follow, and the harness, waiting on `go`, would otherwise
/// hold the run until its timeout.
async fn read_channel(ends: Ends, timed: bool, cap: u64) -> Channel {
    // `go` stays open until the result is in and measured: closing it
    // would let the waiting harness go on (and exit) before.
    let Ends {
        mut receiver,
        mut go,
        meter,
    } = ends;
    let mut channel = Channel {
        ready: None,
        result: None,
        done: None,
    };
    if timed {
        let mut line = [0u8; READY.len()];
        if receiver.read_exact(&mut line).await.is_err() || line != READY {
            return channel;
        }
        let at = Instant::now();
        channel.ready = Some((at, meter.read().await));
        if let Some(go) = go.as_mut() {
            use tokio::io::AsyncWriteExt;
            // A harness that never reads it is only measured less exactly.
            let _ = go.write_all(GO).await;
        }
    }
    let mut length = [0u8; 8];
    if receiver.read_exact(&mut length).await.is_err() {
        return channel;
    }
    let length = u64::from_le_bytes(length);
    if length > cap {
        return channel;
    }
    let mut bytes = vec![0u8; length as usize];
    if receiver.read_exact(&mut bytes).await.is_err() {
        return channel;
    }
    let at = Instant::now();
    channel.done = Some((at, if timed { meter.read().await } else { None }));
    channel.result = Some(bytes);
    drop(go);
    channel
}

/// The evaluator's reply for a run that ended as `outcome`: a timed run's
/// seconds are from `ready` to its result's last byte, an untimed one's
/// its whole time.
fn reply(outcome: &Outcome, channel: Option<&Channel>, timed: bool) -> Reply {
    let result = channel.is_some_and(|c| c.result.is_some());
    let timed_span = channel.filter(|_| timed).and_then(|c| c.ready.zip(c.done));
    let seconds = match (timed, timed_span) {
        (false, _) => Some(outcome.duration.as_secs_f64()),
        (true, span) => span.map(|((ready, _), (done, _))| done.duration_since(ready).as_secs_f64()),
    };
    let cpu_seconds = timed_span.and_then(|((_, start), (_, end))| Some(end?.checked_sub(start?)?.as_secs_f64()));
    let stderr = &outcome.stderr.text;
    let tail = stderr
        .char_indices()
        .rev()
        .nth(STDERR_TAIL)
        .map_or(stderr.as_str(), |(i, _)| &stderr[i..]);
    let termination = match (result, outcome.termination) {
        // Ended by this host because its result was in: it finished.
        (true, _) => "exited".to_string(),
        (false, t) => serde_json::to_value(t)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
    };
    Reply {
        refused: None,
        termination,
        exit_code: outcome.exit_code,
        result,
        seconds,
        cpu_seconds,
        stderr: tail.to_string(),
        outputs: None,
    }
}

//! The compile gate: a component is compiled in a child process (`child`)
//! with a wall-clock deadline and an address-space limit, a bounded number
//! at once, and the child is killed when the deadline passes or whoever
//! waits for it goes away (the future dropped). Cranelift cannot be
//! interrupted and wasmtime does not count slow compilation as a security
//! bug, so the host bounds it itself. The `mlrb` binary enables the gate
//! for every compile it makes (`enable`).

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Result;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::child;

/// What one compile may use, and how many run at once.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Wall-clock seconds a compile may take.
    pub seconds: u64,
    /// The compile child's address space, in MiB.
    pub memory_mib: u64,
    /// Compiles at once (in this process); the others wait for a slot.
    pub at_once: usize,
}

/// The defaults come from scripts/bench_compile_gate.sh: the largest honest
/// component here, an 18 MB Python agent from componentize-py, compiles in
/// 25 CPU-seconds with a 350 MiB peak (52 s of wall clock on two cores
/// under a load of 10; 155 s at worst), and fits in an address space of
/// 640 MiB; a 173 KB compile bomb (6,000 locals live across 6,000 joins)
/// takes 80 CPU-seconds and 1.3 GiB, a larger one more of both, up to these
/// bounds. Compiles run two or more at once (one per submitter on the
/// service), so a slot is never long away.
impl Default for Limits {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            seconds: 300,
            memory_mib: 2048,
            at_once: cores.clamp(2, 4),
        }
    }
}

impl Limits {
    /// The defaults, each overridden by its environment variable
    /// (`MLRB_COMPILE_SECONDS`, `MLRB_COMPILE_MEMORY_MIB`, `MLRB_COMPILES_AT_ONCE`).
    pub fn from_env() -> Result<Self> {
        let mut limits = Self::default();
        let read = |name: &str, into: &mut u64| -> Result<()> {
            if let Ok(text) = std::env::var(name) {
                *into = text
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| anyhow::anyhow!("{name}=`{text}`: give a whole number above 0"))?;
            }
            Ok(())
        };
        read("MLRB_COMPILE_SECONDS", &mut limits.seconds)?;
        read("MLRB_COMPILE_MEMORY_MIB", &mut limits.memory_mib)?;
        let mut at_once = limits.at_once as u64;
        read("MLRB_COMPILES_AT_ONCE", &mut at_once)?;
        limits.at_once = at_once as usize;
        Ok(limits)
    }
}

/// Every compile slot stayed taken for as long as a compile may last.
#[derive(Debug, thiserror::Error)]
#[error("this host is compiling {0} components already (the most at once): try again in a minute")]
pub struct Busy(pub usize);

/// The host could not run its compiler: its own fault, not the component's.
#[derive(Debug, thiserror::Error)]
#[error("the host could not start its compiler: {0}")]
pub struct HostFault(pub String);

/// The compile gate of this process.
pub struct Gate {
    program: PathBuf,
    limits: Limits,
    slots: tokio::sync::Semaphore,
}

static GATE: OnceLock<Gate> = OnceLock::new();

/// Makes every compile of this process go through `program` (the `mlrb`
/// binary) within `limits`. The first call wins.
pub fn enable(program: PathBuf, limits: Limits) {
    let slots = tokio::sync::Semaphore::new(limits.at_once);
    let _ = GATE.set(Gate { program, limits, slots });
}

/// The gate, when this process enabled one.
pub fn enabled() -> Option<&'static Gate> {
    GATE.get()
}

impl Gate {
    /// Its limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Compiles `wasm` into the file `out` (which must exist), or says why
    /// not: a refusal names the limit it passed.
    pub async fn compile(&self, wasm: &[u8], out: &Path) -> Result<()> {
        let deadline = Duration::from_secs(self.limits.seconds);
        let Ok(Ok(_slot)) = tokio::time::timeout(deadline, self.slots.acquire()).await else {
            return Err(Busy(self.limits.at_once).into());
        };
        let mut child = self.spawn(wasm.len(), out)?;
        let pid = child.id().unwrap_or(0);
        tracing::info!(pid, bytes = wasm.len(), "compiling a component in a child process");
        let (Some(mut stdin), Some(mut stderr)) = (child.stdin.take(), child.stderr.take()) else {
            return Err(HostFault("the compiler's pipes were not set up".into()).into());
        };
        let said = tokio::spawn(async move {
            let mut text = Vec::new();
            let _ = (&mut stderr).take(16 << 10).read_to_end(&mut text).await;
            String::from_utf8_lossy(&text).into_owned()
        });
        let started = std::time::Instant::now();
        let ended = {
            let run = async {
                // A child that died early closes its end: its status tells why.
                let _ = stdin.write_all(wasm).await;
                let _ = stdin.flush().await;
                // `stdin` stays open until the child ends: its lifeline.
                child.wait().await
            };
            tokio::time::timeout(deadline, run).await
        };
        let status = match ended {
            Ok(status) => status.map_err(|e| HostFault(format!("waiting for the compiler: {e}")))?,
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                tracing::warn!(pid, seconds = self.limits.seconds, "a compile passed its deadline");
                anyhow::bail!(
                    "compilation took longer than {} s, the most this host allows: make the component smaller or simpler",
                    self.limits.seconds
                );
            }
        };
        drop(stdin);
        let said = said.await.unwrap_or_default();
        tracing::debug!(pid, ms = started.elapsed().as_millis() as u64, %status, "compile child ended");
        self.verdict(status, &said)
    }

    /// Starts a compile child within the limits.
    fn spawn(&self, len: usize, out: &Path) -> Result<tokio::process::Child> {
        let mut command = tokio::process::Command::new(&self.program);
        command
            .arg(child::ARG)
            .arg(len.to_string())
            .arg(out)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Few malloc arenas: each reserves address space the limit counts.
            .env("MALLOC_ARENA_MAX", "2")
            .kill_on_drop(true);
        let bytes = self.limits.memory_mib << 20;
        // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
        unsafe {
            command.pre_exec(move || limit_child(bytes));
        }
        command
            .spawn()
            .map_err(|e| anyhow::Error::from(HostFault(format!("{}: {e}", self.program.display()))))
    }

    /// Success, or the refusal a child's end means.
    fn verdict(&self, status: ExitStatus, said: &str) -> Result<()> {
        if status.success() {
            return Ok(());
        }
        let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        if out_of_memory(said) {
            anyhow::bail!(
                "compilation needed more than {} MiB, the most this host allows: make the component smaller or simpler",
                self.limits.memory_mib
            );
        }
        if status.code() == Some(child::INVALID.into()) {
            anyhow::bail!("{last}");
        }
        let how = match status.signal() {
            Some(signal) => format!("signal {signal}"),
            None => format!("exit code {}", status.code().unwrap_or(-1)),
        };
        anyhow::bail!("the compiler failed on this component ({how}): {last}")
    }
}

/// Whether a child's stderr tells of memory it could not get.
fn out_of_memory(said: &str) -> bool {
    [
        "memory allocation of",
        "out of memory",
        "Cannot allocate memory",
        "os error 12",
    ]
    .iter()
    .any(|sign| said.contains(sign))
}

/// Runs in the child between fork and exec: the address-space limit and
/// no core dumps. (Not a lower priority: the deadline is wall-clock, and
/// an honest compile on a busy host must still make it.)
fn limit_child(address_space: u64) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let cap = |limit: u64| Rlimit {
        current: Some(limit),
        maximum: Some(limit),
    };
    setrlimit(Resource::As, cap(address_space))?;
    setrlimit(Resource::Core, cap(0))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_ran_out_of_memory_is_told_apart() {
        let defaults = Limits::default();
        assert!(defaults.at_once >= 2 && defaults.seconds > 0);
        assert!(out_of_memory("memory allocation of 4096 bytes failed"));
        assert!(!out_of_memory("not a valid WebAssembly component"));
    }
}

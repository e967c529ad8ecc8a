//! The memory of a sandbox's processes together, where no control group
//! counts it. `RLIMIT_DATA` (see `limits`) holds each process, not their
//! sum: a script that starts N workers could use N times its limit. The
//! host adds up the private memory of every process below the sandbox
//! (proportional shares, so that pages shared since a fork count once) a
//! few times a second, and stops the sandbox past the limit.
//!
//! What it does not see: memory a process holds for less than one interval
//! (each process is still under its own `RLIMIT_DATA`), shared memory (its
//! `/tmp` and `/dev/shm` are sized to the limit instead), GPU memory.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How often the processes are measured.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// A watch over the processes below one sandbox; it ends when dropped.
pub struct MemoryWatch {
    exceeded: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl MemoryWatch {
    /// Watches the processes below `root` (bubblewrap's pid) and calls
    /// `stop` once when together they hold more than `limit` bytes.
    pub fn start(root: i32, limit: u64, stop: impl Fn() + Send + 'static) -> Self {
        let exceeded = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (flag, high) = (exceeded.clone(), peak.clone());
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(INTERVAL);
            loop {
                ticks.tick().await;
                let used = tokio::task::spawn_blocking(move || tree_private_bytes(root))
                    .await
                    .unwrap_or(0);
                high.fetch_max(used, Ordering::Relaxed);
                if used > limit {
                    tracing::debug!(used, limit, "the sandbox's processes together passed the memory limit");
                    flag.store(true, Ordering::SeqCst);
                    stop();
                    return;
                }
            }
        });
        Self { exceeded, peak, task }
    }

    /// Whether the watch stopped the sandbox.
    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::SeqCst)
    }

    /// The most the processes held together at one measurement, in bytes.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for MemoryWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The private memory of `root` and every process below it, in bytes.
pub fn tree_private_bytes(root: i32) -> u64 {
    descendants(root).into_iter().map(private_bytes).sum()
}

/// `root` and the processes below it, by the kernel's lists of each
/// thread's children.
fn descendants(root: i32) -> Vec<i32> {
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let pid = found[next];
        next += 1;
        let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for thread in threads.flatten() {
            let children = std::fs::read_to_string(thread.path().join("children")).unwrap_or_default();
            found.extend(children.split_whitespace().filter_map(|c| c.parse::<i32>().ok()));
        }
    }
    found
}

/// A process's private memory: its proportional share of anonymous pages
/// (`Pss_Anon`), else, where that cannot be read, its resident anonymous
/// pages (`RssAnon`, which counts pages shared since a fork in each).
fn private_bytes(pid: i32) -> u64 {
    let proc = Path::new("/proc").join(pid.to_string());
    field_kib(&proc.join("smaps_rollup"), "Pss_Anon:")
        .or_else(|| field_kib(&proc.join("status"), "RssAnon:"))
        .map_or(0, |kib| kib * 1024)
}

/// The value in KiB of the line `name` of a `/proc` file.
fn field_kib(path: &Path, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_this_process_and_its_children() {
        let held = vec![1u8; 64 << 20];
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let me = std::process::id() as i32;
        let tree = descendants(me);
        assert!(tree.contains(&(child.id() as i32)), "{tree:?}");
        assert!(tree_private_bytes(me) >= 64 << 20);
        child.kill().unwrap();
        child.wait().unwrap();
        drop(held);
    }
}

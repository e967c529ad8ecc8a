//! Which mlrb host process made something (a control group, a container,
//! an episode record), told apart from a later process that reuses its pid:
//! the pid with its start time and the boot it belongs to.

use serde::{Deserialize, Serialize};

/// One process of one boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostProcess {
    /// The process id.
    pub pid: u32,
    /// Its start time (clock ticks since boot) and the boot it belongs to.
    pub started: u64,
    /// The boot id from `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
}

impl HostProcess {
    /// This process.
    pub fn current() -> Option<Self> {
        Self::of(std::process::id())
    }

    /// The process `pid` as it is now, if it exists.
    pub fn of(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name (which may hold spaces) are plain.
        let after = stat.rsplit_once(')')?.1;
        let started = after.split_whitespace().nth(19)?.parse().ok()?;
        Some(Self {
            pid,
            started,
            boot_id: boot_id()?,
        })
    }

    /// Whether this process still runs (the same one, not a reuse of its pid).
    pub fn alive(&self) -> bool {
        Self::of(self.pid).as_ref() == Some(self)
    }

    /// A short name for it, `<pid>.<start time>`, safe in file and label
    /// names; it holds within one boot.
    pub fn token(&self) -> String {
        format!("{}.{}", self.pid, self.started)
    }

    /// The process a [`token`](Self::token) of this boot names.
    pub fn from_token(token: &str) -> Option<Self> {
        let (pid, started) = token.split_once('.')?;
        Some(Self {
            pid: pid.parse().ok()?,
            started: started.parse().ok()?,
            boot_id: boot_id()?,
        })
    }
}

/// This process's token, or its pid alone where `/proc` cannot say more.
pub fn current_token() -> String {
    HostProcess::current().map_or_else(|| std::process::id().to_string(), |p| p.token())
}

/// A number this process never gives twice: what names the things it makes
/// (containers, control groups) apart, however many sandboxes it opens.
pub fn next_serial() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Whether the process a token names still runs; a bare pid (an older
/// token) is judged by the pid alone.
pub fn token_alive(token: &str) -> bool {
    match HostProcess::from_token(token) {
        Some(process) => process.alive(),
        None => token.parse::<i32>().is_ok_and(|pid| {
            // SAFETY: kill(pid, 0) only checks that the process exists.
            let signalled = unsafe { libc::kill(pid, 0) };
            signalled == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
        }),
    }
}

fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_this_process_and_not_a_reuse_of_its_pid() {
        let me = HostProcess::current().unwrap();
        assert!(token_alive(&me.token()));
        assert_eq!(HostProcess::from_token(&me.token()), Some(me.clone()));
        // The same pid with another start time is another process.
        assert!(!token_alive(&format!("{}.{}", me.pid, me.started + 1)));
        assert!(!token_alive("999999999.1"));
    }
}

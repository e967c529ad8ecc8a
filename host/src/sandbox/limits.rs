//! The rlimits a sandboxed command runs under, and what stands in for a
//! control group where there is none: one place for both sandboxes.
//!
//! Always: no core dumps, and a cap on the size of any file written
//! (`RLIMIT_FSIZE`: a sparse or runaway file fails with `EFBIG` instead of
//! filling the disk). Without a control group (no writable cgroup, or
//! `MLRB_CGROUPS=off`), also:
//!
//! * memory: `RLIMIT_DATA`, not `RLIMIT_AS`. Since Linux 4.7 it counts a
//!   process's private writable mappings (heap, `malloc`'s and numpy's
//!   anonymous maps, thread stacks), which is what a script that allocates
//!   too much grows, but not address space merely reserved (`PROT_NONE`)
//!   nor shared or device mappings. CUDA reserves hundreds of GiB of
//!   address space at initialisation and fails with "out of memory" under
//!   any address-space cap that a script could be given; under
//!   `RLIMIT_DATA` it initialises (measured on an H100 at 8 GiB).
//! * processes: `RLIMIT_NPROC`, set inside the sandbox's own user namespace
//!   (by `prlimit`, the command's first program), where the kernel counts
//!   only the sandbox's processes and threads. Set on bubblewrap, before its
//!   namespace exists, the same limit counted every process of the host
//!   user (Linux counts `RLIMIT_NPROC` per real user, and records the
//!   creator's limit for every level above a new namespace): another job
//!   of the same user, or this host's own threads, left a script, and the
//!   threads CUDA and torch start, nothing.
//!
//! Without a control group the host also adds up the memory of the
//! sandbox's processes together (`memory_watch`: one process's limit is not
//! N workers' limit), and sizes the memory filesystems (`/tmp`, `/dev/shm`)
//! to the limit (`local`). What a script can still overrun without one:
//! memory held for less than the watch's interval by processes each under
//! the per-process limit; GPU memory; and, where this host runs as root,
//! processes, since the kernel exempts root's processes from
//! `RLIMIT_NPROC` altogether.

use std::ffi::OsString;

use super::CommandLimits;

/// Where the program that sets a limit inside the sandbox is found (the
/// host's `/usr` is every local sandbox's).
pub const PRLIMIT: &str = "/usr/bin/prlimit";

/// One resource limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimit {
    /// The resource, as `setrlimit(2)` names it.
    pub resource: libc::__rlimit_resource_t,
    /// Its name for `docker --ulimit` and for people.
    pub name: &'static str,
    /// Soft and hard limit alike.
    pub value: u64,
}

/// The limits every command gets, in both sandboxes.
pub fn always(limits: &CommandLimits) -> Vec<Rlimit> {
    vec![
        Rlimit {
            resource: libc::RLIMIT_CORE,
            name: "core",
            value: 0,
        },
        Rlimit {
            resource: libc::RLIMIT_FSIZE,
            name: "fsize",
            value: limits.max_file_bytes,
        },
    ]
}

/// The memory limit that stands in for a control group's.
pub fn memory(limits: &CommandLimits) -> Rlimit {
    Rlimit {
        resource: libc::RLIMIT_DATA,
        name: "data",
        value: limits.memory_bytes,
    }
}

/// The process limit that stands in for a control group's.
pub fn processes(limits: &CommandLimits) -> Rlimit {
    Rlimit {
        resource: libc::RLIMIT_NPROC,
        name: "nproc",
        value: limits.max_processes as u64,
    }
}

/// How a local command without a control group gets its process limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessLimit {
    /// Set inside the sandbox by [`PRLIMIT`], counting only its processes.
    Inside,
    /// Set on bubblewrap (no `prlimit` on this host), counting every
    /// process of the host user.
    OnBubblewrap,
}

impl ProcessLimit {
    /// `Inside` where this host has `prlimit`.
    pub fn detect() -> Self {
        match std::path::Path::new(PRLIMIT).is_file() {
            true => Self::Inside,
            false => {
                tracing::warn!(
                    "{PRLIMIT} is missing (util-linux): without a control group, a script's process limit counts \
                     every process of this host's user"
                );
                Self::OnBubblewrap
            }
        }
    }
}

/// What a local command runs under: the rlimits set on bubblewrap, and the
/// program put before the command's argv (limits that must be set inside
/// the sandbox's namespaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Set between fork and exec of bubblewrap.
    pub on_bubblewrap: Vec<Rlimit>,
    /// Set by the command's first program, inside the sandbox.
    pub inside: Vec<Rlimit>,
}

impl Applied {
    /// The limits of a local command: with a control group (`grouped`),
    /// only [`always`]; without, memory and processes too, the latter as
    /// `how` says.
    pub fn local(limits: &CommandLimits, grouped: bool, how: ProcessLimit) -> Self {
        let mut applied = Self {
            on_bubblewrap: always(limits),
            inside: Vec::new(),
        };
        if !grouped {
            applied.on_bubblewrap.push(memory(limits));
            match how {
                ProcessLimit::Inside => applied.inside.push(processes(limits)),
                ProcessLimit::OnBubblewrap => applied.on_bubblewrap.push(processes(limits)),
            }
        }
        applied
    }

    /// The argv that runs `argv` under the limits set inside.
    pub fn wrap(&self, argv: &[String]) -> Vec<OsString> {
        let mut wrapped: Vec<OsString> = Vec::new();
        if !self.inside.is_empty() {
            wrapped.push(PRLIMIT.into());
            for limit in &self.inside {
                wrapped.push(format!("--{}={}", limit.name, limit.value).into());
            }
            wrapped.push("--".into());
        }
        wrapped.extend(argv.iter().map(OsString::from));
        wrapped
    }

    /// One line for logs and diagnostics: `fsize=... data=... (inside: nproc=...)`.
    pub fn describe(&self) -> String {
        let show = |list: &[Rlimit]| {
            list.iter()
                .map(|l| format!("{}={}", l.name, l.value))
                .collect::<Vec<_>>()
                .join(" ")
        };
        match self.inside.is_empty() {
            true => show(&self.on_bubblewrap),
            false => format!("{} (inside: {})", show(&self.on_bubblewrap), show(&self.inside)),
        }
    }
}

/// Sets `limits` on the calling process (between fork and exec: only
/// async-signal-safe calls).
pub fn set_all(limits: &[Rlimit]) {
    for limit in limits {
        let value = libc::rlimit {
            rlim_cur: limit.value,
            rlim_max: limit.value,
        };
        // SAFETY: setrlimit(2) is async-signal-safe.
        unsafe { libc::setrlimit(limit.resource, &value) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> CommandLimits {
        CommandLimits::new(&crate::limits::Limits::default(), std::time::Duration::from_secs(1))
    }

    /// Never an address-space cap; memory and processes only without a
    /// control group, the process limit inside the sandbox where it can be.
    #[test]
    fn the_fallback_caps_data_not_address_space_and_counts_processes_inside() {
        let limits = limits();
        let grouped = Applied::local(&limits, true, ProcessLimit::Inside);
        assert_eq!(grouped.on_bubblewrap, always(&limits));
        assert!(grouped.inside.is_empty());
        assert_eq!(grouped.wrap(&["python3".to_string()]), [OsString::from("python3")]);

        let fallback = Applied::local(&limits, false, ProcessLimit::Inside);
        let resources: Vec<_> = fallback.on_bubblewrap.iter().map(|l| l.resource).collect();
        assert!(resources.contains(&libc::RLIMIT_DATA) && !resources.contains(&libc::RLIMIT_AS));
        assert!(!resources.contains(&libc::RLIMIT_NPROC));
        assert_eq!(
            fallback.wrap(&["python3".to_string(), "-c".to_string()]),
            ["/usr/bin/prlimit", "--nproc=256", "--", "python3", "-c"].map(OsString::from)
        );
        assert_eq!(
            fallback.describe(),
            format!("core=0 fsize={} data={} (inside: nproc=256)", 10u64 << 30, 2u64 << 30)
        );
        let without_prlimit = Applied::local(&limits, false, ProcessLimit::OnBubblewrap);
        assert!(without_prlimit.inside.is_empty());
        assert!(without_prlimit.on_bubblewrap.contains(&processes(&limits)));
    }
}

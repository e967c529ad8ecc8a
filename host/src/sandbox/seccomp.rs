//! The system calls no sandboxed script may make, in both sandboxes: one
//! list, compiled to a BPF program for bubblewrap (`--add-seccomp-fd`) and
//! written as a Docker seccomp profile.
//!
//! What it closes: reaching another process of the sandbox, its init above
//! all (`ptrace`, `process_vm_*`, `pidfd_getfd`, `kcmp`); changing the view
//! of the system (mounts, namespaces, `open_by_handle_at`); kernel surfaces
//! a script never needs (BPF, perf, keyrings, userfaultfd, io_uring,
//! modules). Denied calls fail with `EPERM`; `clone3` fails with `ENOSYS`,
//! which makes the C library fall back to `clone`, whose flags the filter
//! can see (a new user namespace is refused).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// Denied outright, by name (the Docker profile) and number (BPF).
const DENIED: &[(&str, i64)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("bpf", libc::SYS_bpf),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("setns", libc::SYS_setns),
    ("unshare", libc::SYS_unshare),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog", libc::SYS_syslog),
    ("vhangup", libc::SYS_vhangup),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm),
];

/// On x86-64 the x32 ABI reaches the same calls with this bit set (and a
/// few of its own numbers); the filter denies those spellings too.
#[cfg(target_arch = "x86_64")]
const X32_BIT: i64 = 0x4000_0000;
/// x32's own numbers for `ptrace`, `process_vm_readv` and `process_vm_writev`.
#[cfg(target_arch = "x86_64")]
const X32_SPECIAL: &[i64] = &[521, 539, 540];

fn target() -> Result<TargetArch> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| anyhow::anyhow!("no seccomp filter for {}: {e}", std::env::consts::ARCH))
}

/// Every number a denied call can be made with on this architecture.
fn denied_numbers() -> Vec<i64> {
    let mut numbers: Vec<i64> = DENIED.iter().map(|(_, nr)| *nr).collect();
    #[cfg(target_arch = "x86_64")]
    {
        let x32: Vec<i64> = numbers.iter().chain(X32_SPECIAL).map(|nr| nr | X32_BIT).collect();
        numbers.extend(x32);
    }
    numbers
}

/// The main filter: denied calls and `clone` of a new user namespace fail
/// with `EPERM`, everything else is allowed.
fn deny_program() -> Result<BpfProgram> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = denied_numbers().into_iter().map(|nr| (nr, vec![])).collect();
    let new_user = libc::CLONE_NEWUSER as u64;
    let condition = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(new_user), new_user)
        .context("the clone condition")?;
    rules.insert(
        libc::SYS_clone,
        vec![SeccompRule::new(vec![condition]).context("the clone rule")?],
    );
    compile(rules, libc::EPERM, "seccomp filter")
}

/// A filter that answers `errno` to the calls of `rules` and lets the rest through.
fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32, what: &str) -> Result<BpfProgram> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        target()?,
    )
    .with_context(|| format!("building the {what}"))?;
    BpfProgram::try_from(filter).with_context(|| format!("compiling the {what}"))
}

/// The second filter: `clone3` answers `ENOSYS`, so threads and processes
/// are made with `clone`, whose flags the main filter checks.
fn clone3_program() -> Result<BpfProgram> {
    compile(
        BTreeMap::from([(libc::SYS_clone3, vec![])]),
        libc::ENOSYS,
        "clone3 filter",
    )
}

/// The BPF programs for bubblewrap, as the bytes of `struct sock_filter[]`.
pub fn bwrap_programs() -> Result<Vec<Vec<u8>>> {
    [deny_program()?, clone3_program()?]
        .into_iter()
        .map(|program| {
            Ok(program
                .iter()
                .flat_map(|insn| {
                    let mut bytes = Vec::with_capacity(8);
                    bytes.extend(insn.code.to_ne_bytes());
                    bytes.push(insn.jt);
                    bytes.push(insn.jf);
                    bytes.extend(insn.k.to_ne_bytes());
                    bytes
                })
                .collect())
        })
        .collect()
}

/// The same rules as a Docker seccomp profile (JSON), for `security_opt`.
pub fn docker_profile() -> String {
    let names: Vec<&str> = DENIED.iter().map(|(name, _)| *name).collect();
    serde_json::json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
        "syscalls": [
            { "names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": libc::EPERM },
            { "names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": libc::ENOSYS },
            {
                "names": ["clone"],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": libc::EPERM,
                "args": [{ "index": 0, "value": libc::CLONE_NEWUSER, "valueTwo": libc::CLONE_NEWUSER, "op": "SCMP_CMP_MASKED_EQ" }]
            }
        ]
    })
    .to_string()
}

/// A memfd holding `bytes`, read from its start: how bubblewrap takes a
/// filter (or a file's content, `--ro-bind-data`). Close-on-exec: the
/// child that needs it clears the flag.
pub fn memfd_with(bytes: &[u8]) -> Result<std::os::fd::OwnedFd> {
    use std::io::{Seek, Write};
    let fd = rustix::fs::memfd_create("mlrb-seccomp", rustix::fs::MemfdFlags::CLOEXEC)
        .context("creating a memfd for the seccomp filter")?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_and_the_profile_names_every_denied_call() {
        let programs = bwrap_programs().unwrap();
        assert_eq!(programs.len(), 2);
        assert!(programs.iter().all(|p| !p.is_empty() && p.len() % 8 == 0));
        let profile: serde_json::Value = serde_json::from_str(&docker_profile()).unwrap();
        let names = profile["syscalls"][0]["names"].as_array().unwrap();
        for (name, _) in DENIED {
            assert!(names.iter().any(|n| n == name), "{name}");
        }
        assert!(names.iter().any(|n| n == "ptrace") && names.iter().any(|n| n == "pidfd_getfd"));
    }
}

//! Finding and running the external tools an agent build needs (cargo,
//! componentize-py, clang and wasi-libc), with errors that say how to get a
//! missing one.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, bail};

/// A tool: `$<env>` if set, else the first of `names` on `PATH`, in
/// `~/.cargo/bin` or in the tools venv.
pub fn find(names: &[&str], env: &str, install_hint: &str) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        return Ok(PathBuf::from(path));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.push(crate::paths::tools_dir().join("python/bin"));
    for name in names {
        for dir in &dirs {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    bail!("{}: not found (set {env} or {install_hint})", names[0])
}

/// Runs `command`, returning its stdout; a failure carries the tail of its
/// output and the command line.
pub fn run(command: &mut Command, what: &str) -> Result<String> {
    tracing::info!(command = ?command, "{what}");
    let output = command
        .output()
        .map_err(|e| anyhow::anyhow!("{what}: cannot start {:?}: {e}", command.get_program()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let text = if stderr.trim().is_empty() { stdout } else { stderr };
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("{what} failed ({}):\n{}", output.status, tail.join("\n"));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The `--sysroot` for wasi-libc: `WASI_SYSROOT`, a wasi-sdk style
/// sysroot, or none where Debian's `wasi-libc` installs it multiarch
/// (`/usr/include/wasm32-wasi`), which Debian's clang finds by itself.
pub fn wasi_sysroot() -> Result<Option<PathBuf>> {
    if let Some(dir) = std::env::var_os("WASI_SYSROOT") {
        return Ok(Some(PathBuf::from(dir)));
    }
    for dir in ["/usr/share/wasi-sysroot", "/opt/wasi-sdk/share/wasi-sysroot"] {
        if Path::new(dir).is_dir() {
            return Ok(Some(PathBuf::from(dir)));
        }
    }
    if Path::new("/usr/include/wasm32-wasi").is_dir() {
        return Ok(None);
    }
    bail!("no wasi-libc found (run scripts/setup.sh --with c, install Debian's wasi-libc, or set WASI_SYSROOT)")
}

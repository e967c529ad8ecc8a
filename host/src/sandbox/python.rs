//! A Python environment for the local sandbox (`--python PATH`): an
//! interpreter, a venv or a Python installation of the host whose packages
//! meet the tasks' `python_packages` (PyTorch where there is no Docker).
//! Its folders are bound read-only at their own paths, so a venv's links
//! and `pyvenv.cfg` hold inside, and its `bin` goes first on PATH: it is
//! every script's `python3`, the task's, the agent's, the launcher's and
//! the requirement probe's.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::HOST_SYSTEM_DIRS;

/// Where a link named `python3` is made inside the sandbox when the
/// interpreter named has another name (`python3.12`).
pub const GUEST_BIN: &str = "/opt/mlrb-python/bin";

/// A resolved Python environment.
#[derive(Debug, Clone, PartialEq)]
pub struct PythonEnv {
    /// What was named, made absolute.
    named: PathBuf,
    /// The folder put first on PATH.
    bin: PathBuf,
    /// Host folders bound read-only at their own path.
    mounts: Vec<PathBuf>,
    /// The interpreter a `python3` link in [`GUEST_BIN`] points to, where
    /// the named one is not its folder's `python3`.
    link: Option<PathBuf>,
}

impl PythonEnv {
    /// Resolves `named`: an interpreter, or a folder with `bin/python3`
    /// (a venv or an installation's prefix).
    pub fn resolve(named: &Path) -> Result<Self> {
        let named = std::path::absolute(named).with_context(|| format!("--python {}", named.display()))?;
        let shown = named.display();
        let meta = std::fs::metadata(&named).with_context(|| format!("--python {shown}: cannot be read"))?;
        let interpreter = match meta.is_dir() {
            true => ["bin/python3", "python3"]
                .iter()
                .map(|candidate| named.join(candidate))
                .find(|candidate| candidate.is_file())
                .with_context(|| {
                    format!(
                        "--python {shown}: holds no bin/python3 (name a venv, a Python installation or an interpreter)"
                    )
                })?,
            false => named.clone(),
        };
        let real = interpreter
            .canonicalize()
            .with_context(|| format!("--python {shown}: {} cannot be resolved", interpreter.display()))?;
        if std::fs::metadata(&real)?.permissions().mode() & 0o111 == 0 {
            bail!("--python {shown}: {} is not executable", real.display());
        }
        let bin = interpreter
            .parent()
            .context("the interpreter has no folder")?
            .to_path_buf();
        let venv = bin.parent().filter(|root| root.join("pyvenv.cfg").is_file());
        let mut roots = vec![prefix_of(&bin), prefix_of(real.parent().unwrap_or(&real))];
        if let Some(home) = venv.and_then(venv_home) {
            roots.push(prefix_of(&home));
        }
        let mounts = outside_system(roots, &named)?;
        let same = |path: &Path| path.canonicalize().is_ok_and(|p| p == real);
        let (bin, link) = match (same(&bin.join("python3")), venv) {
            (true, _) => (bin, None),
            (false, Some(venv)) => bail!(
                "--python {shown}: the venv {} has no bin/python3 for this interpreter: name the venv itself",
                venv.display()
            ),
            (false, None) => (PathBuf::from(GUEST_BIN), Some(real)),
        };
        Ok(Self {
            named,
            bin,
            mounts,
            link,
        })
    }

    /// Host folders to bind read-only at their own path.
    pub fn mounts(&self) -> &[PathBuf] {
        &self.mounts
    }

    /// The interpreter a `python3` link in [`GUEST_BIN`] must point to, if any.
    pub fn link(&self) -> Option<&Path> {
        self.link.as_deref()
    }

    /// PATH inside the sandbox: this environment's `bin`, then `system`.
    pub fn path(&self, system: &str) -> String {
        format!("{}:{system}", self.bin.display())
    }

    /// How provenance records name it.
    pub fn describe(&self) -> String {
        format!("python {}", self.named.display())
    }
}

/// The installation folder above a `bin` folder (the folder itself otherwise).
fn prefix_of(bin: &Path) -> PathBuf {
    match (bin.file_name(), bin.parent()) {
        (Some(name), Some(parent)) if name == "bin" => parent.to_path_buf(),
        _ => bin.to_path_buf(),
    }
}

/// The folder of the interpreter a venv was made from (`home` in its `pyvenv.cfg`).
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let home = text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })?;
    Some(home.canonicalize().unwrap_or(home))
}

/// `roots` less those every sandbox sees anyway and those inside another;
/// the root of the filesystem itself is refused.
fn outside_system(roots: Vec<PathBuf>, named: &Path) -> Result<Vec<PathBuf>> {
    let mut kept: Vec<PathBuf> = Vec::new();
    for root in roots {
        if HOST_SYSTEM_DIRS.iter().any(|system| root.starts_with(system)) {
            continue;
        }
        if root.parent().is_none() {
            bail!(
                "--python {}: its installation would be the whole filesystem: name a venv or an installation in a folder of its own",
                named.display()
            );
        }
        if kept.iter().any(|k| root.starts_with(k)) {
            continue;
        }
        kept.retain(|k| !k.starts_with(&root));
        kept.push(root);
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_venv_is_bound_with_its_base_and_put_first_on_path() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("python");
        std::fs::create_dir_all(base.join("bin")).unwrap();
        let real = base.join("bin/python3.12");
        std::fs::write(&real, "").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).unwrap();
        let venv = tmp.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(&real, venv.join("bin/python3")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", base.join("bin").display()),
        )
        .unwrap();

        let env = PythonEnv::resolve(&venv).unwrap();
        let real_base = base.canonicalize().unwrap();
        assert!(
            env.mounts().contains(&venv) && env.mounts().contains(&real_base),
            "{env:?}"
        );
        assert_eq!(env.path("/usr/bin"), format!("{}:/usr/bin", venv.join("bin").display()));
        assert_eq!(env.link(), None);
        let by_file = PythonEnv::resolve(&venv.join("bin/python3")).unwrap();
        assert_eq!((by_file.mounts(), by_file.path("")), (env.mounts(), env.path("")));

        // An interpreter not called python3 gets a python3 link of its own.
        let named = PythonEnv::resolve(&real).unwrap();
        assert_eq!(named.link(), Some(real.canonicalize().unwrap().as_path()));
        assert!(named.path("/usr/bin").starts_with(GUEST_BIN));
        assert_eq!(named.mounts(), [real_base.as_path()]);

        let error = PythonEnv::resolve(tmp.path()).unwrap_err().to_string();
        assert!(error.contains("holds no bin/python3"), "{error}");
        let error = PythonEnv::resolve(&tmp.path().join("absent")).unwrap_err().to_string();
        assert!(error.contains("cannot be read"), "{error}");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = format!("{:#}", PythonEnv::resolve(&venv).unwrap_err());
        assert!(error.contains("is not executable"), "{error}");
    }

    #[test]
    fn system_folders_are_not_bound_again() {
        let env = PythonEnv::resolve(Path::new("/usr/bin/python3")).unwrap();
        assert!(env.mounts().is_empty(), "{env:?}");
        assert_eq!(env.link(), None);
    }
}

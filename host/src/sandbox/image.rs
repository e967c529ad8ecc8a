//! The task runtime image, built without a registry: a Debian root
//! filesystem from debootstrap with Python and the scientific stack from
//! Debian's packages (or, for the torch image, Python with the exact wheels
//! of `images/torch/requirements.lock`, each checked against its hash),
//! imported into the local engine and tagged by a hash of its recipe, so an
//! unchanged recipe is never built twice.

use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures_util::StreamExt;
use serde::Serialize;

/// What goes into the image. The mirror is not part of the identity.
#[derive(Debug, Clone, Serialize)]
pub struct ImageRecipe {
    /// The Debian release, e.g. "bookworm".
    pub suite: String,
    /// The debootstrap variant, e.g. "minbase".
    pub variant: String,
    /// Debian packages installed on top.
    pub packages: Vec<String>,
    /// Bumped when the way the root filesystem is made changes.
    pub revision: u32,
    /// Python wheels installed with pip, exactly as locked: the lock's text
    /// (`name==version --hash=sha256:...` a line), part of the identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheels: Option<String>,
    /// A module every Python start-up imports (through a `.pth` in
    /// site-packages): [`SITE_COMPAT`], part of the identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site_compat: Option<String>,
}

/// The torch image's lock: PyTorch and the Hugging Face stack, every wheel
/// pinned with its hash (`scripts/lock_torch_image.py` writes it).
pub const TORCH_LOCK: &str = include_str!("../../../images/torch/requirements.lock");

/// What an upstream folder's code assumed of its libraries (numpy 1's
/// printing), restored where its environment asks: imported at every
/// Python start-up of the torch image, a no-op otherwise.
pub const SITE_COMPAT: &str = include_str!("../../python/mlrb_site_compat.py");
/// Its module name, and the `.pth` that imports it.
const SITE_COMPAT_MODULE: &str = "mlrb_site_compat";

/// The repository images are tagged in (`mlrb-runtime:<hash>`).
pub const IMAGE_REPOSITORY: &str = "mlrb-runtime";

impl ImageRecipe {
    /// Debian bookworm with Python 3 and numpy, scipy, scikit-learn,
    /// pandas from Debian; with `torch`, Python 3 and the locked wheels of
    /// PyTorch and the Hugging Face stack instead (their numpy is not
    /// Debian's, which Debian's scipy and scikit-learn are built against).
    pub fn standard(torch: bool) -> Self {
        let debian: &[&str] = match torch {
            false => &[
                "python3",
                "python3-numpy",
                "python3-scipy",
                "python3-sklearn",
                "python3-pandas",
                "procps",
            ],
            true => &["python3", "python3-pip", "ca-certificates", "procps"],
        };
        Self {
            suite: "bookworm".into(),
            variant: "minbase".into(),
            packages: debian.iter().map(|p| p.to_string()).collect(),
            // 2: the torch image's wheels are installed compiled (below).
            revision: if torch { 2 } else { 1 },
            wheels: torch.then(|| TORCH_LOCK.to_string()),
            site_compat: torch.then(|| SITE_COMPAT.to_string()),
        }
    }

    /// `mlrb-runtime:<hash of the recipe>`.
    pub fn tag(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let hash = blake3::hash(&json).to_hex();
        format!("{IMAGE_REPOSITORY}:{}", &hash[..12])
    }
}

fn mirror() -> String {
    std::env::var("MLRB_DEBIAN_MIRROR").unwrap_or_else(|_| "http://deb.debian.org/debian".into())
}

/// Builds the image of `recipe` unless the engine has it already; returns
/// its tag and whether it was built now.
pub async fn build(recipe: &ImageRecipe, work_dir: &Path, progress: &dyn Fn(&str)) -> Result<(String, bool)> {
    let (docker, _) = super::docker::engine::connect().await?;
    let tag = recipe.tag();
    if docker.inspect_image(&tag).await.is_ok() {
        return Ok((tag, false));
    }
    std::fs::create_dir_all(work_dir)?;
    let scratch = tempfile::Builder::new().prefix("rootfs-").tempdir_in(work_dir)?;
    let rootfs = scratch.path().join("rootfs");
    progress(&format!(
        "debootstrap {} ({} packages)",
        recipe.suite,
        recipe.packages.len()
    ));
    debootstrap(recipe, &rootfs, scratch.path()).await?;
    if let Some(lock) = &recipe.wheels {
        let cache = work_dir.join("wheels");
        progress(&format!("downloading the locked wheels into {}", cache.display()));
        download_wheels(lock, &cache).await?;
        progress("installing the locked wheels");
        install_wheels(&cache, &rootfs).await?;
    }
    if let Some(module) = &recipe.site_compat {
        install_site_compat(module, &rootfs)?;
    }
    progress(&format!("importing the root filesystem as {tag}"));
    import(&docker, &rootfs, &tag).await?;
    docker
        .inspect_image(&tag)
        .await
        .context("the imported image is missing")?;
    Ok((tag, true))
}

/// Makes the recipe's Debian root filesystem in `rootfs`, without the
/// package caches.
async fn debootstrap(recipe: &ImageRecipe, rootfs: &Path, scratch: &Path) -> Result<()> {
    let debootstrap = ["/usr/sbin/debootstrap", "/usr/bin/debootstrap"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .context(
            "debootstrap is not installed: run scripts/setup.sh --with docker (or `apt-get install debootstrap`)",
        )?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("building the image runs debootstrap, which needs root: run `sudo mlrb image build`");
    }
    let output = tokio::process::Command::new(debootstrap)
        .arg(format!("--variant={}", recipe.variant))
        .arg(format!("--include={}", recipe.packages.join(",")))
        .arg(&recipe.suite)
        .arg(rootfs)
        .arg(mirror())
        .stdin(Stdio::null())
        .output()
        .await
        .context("running debootstrap")?;
    if !output.status.success() {
        let text = String::from_utf8_lossy(&output.stdout);
        let last = text
            .lines()
            .rev()
            .find(|l| l.starts_with("E:") || l.starts_with("W:"))
            .unwrap_or("");
        bail!(
            "debootstrap failed ({}): {last} (log: {}/rootfs/debootstrap/debootstrap.log)",
            output.status,
            scratch.display()
        );
    }
    for cache in ["var/cache/apt/archives", "var/lib/apt/lists"] {
        for entry in std::fs::read_dir(rootfs.join(cache)).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(())
}

/// The image's platform, for pip on the host: CPython 3.11 (bookworm's) on
/// x86_64 Linux, any manylinux tag bookworm's glibc 2.36 runs.
fn platform_arguments() -> Vec<String> {
    let mut args: Vec<String> = ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]
        .map(String::from)
        .to_vec();
    let tags = (17..=36).rev().map(|minor| format!("manylinux_2_{minor}_x86_64"));
    for tag in tags.chain(["manylinux2014_x86_64".into(), "linux_x86_64".into(), "any".into()]) {
        args.extend(["--platform".into(), tag]);
    }
    args
}

/// Runs a command to its end; an error with the last line it printed.
async fn run(command: &mut tokio::process::Command, what: &str) -> Result<()> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("{what}: cannot start"))?;
    if !output.status.success() {
        let text = String::from_utf8_lossy(&output.stderr);
        let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        bail!("{what} failed ({}): {last}", output.status);
    }
    Ok(())
}

/// A Python with pip on the host: the tools venv `scripts/setup.sh` makes,
/// else the first `python3` on the PATH.
fn host_python() -> std::path::PathBuf {
    let venv = crate::paths::tools_dir().join("python/bin/python");
    if venv.is_file() { venv } else { "python3".into() }
}

/// Every wheel of `lock` in `cache`, each checked against its hash (pip
/// keeps a wheel already there whose hash matches).
async fn download_wheels(lock: &str, cache: &Path) -> Result<()> {
    std::fs::create_dir_all(cache)?;
    let lock_file = cache.join("requirements.lock");
    std::fs::write(&lock_file, lock)?;
    let mut pip = tokio::process::Command::new(host_python());
    pip.args([
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--require-hashes",
        "--only-binary=:all:",
    ])
    .args(platform_arguments())
    .arg("-r")
    .arg(&lock_file)
    .arg("-d")
    .arg(cache);
    run(
        &mut pip,
        "downloading the locked wheels (python -m pip download: run scripts/setup.sh, or install pip)",
    )
    .await
}

/// Installs the wheels of `cache` into the image with the image's own pip,
/// offline, each checked against the lock's hash again.
async fn install_wheels(cache: &Path, rootfs: &Path) -> Result<()> {
    let inside = rootfs.join("tmp/mlrb-wheels");
    std::fs::create_dir_all(&inside)?;
    for entry in std::fs::read_dir(cache)?.flatten() {
        let to = inside.join(entry.file_name());
        // A hard link where both are on one file system, else a copy.
        if std::fs::hard_link(entry.path(), &to).is_err() {
            std::fs::copy(entry.path(), &to)?;
        }
    }
    let mut pip = tokio::process::Command::new("chroot");
    pip.arg(rootfs)
        .args([
            "python3",
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--require-hashes",
        ])
        // Compiled on install: a container cannot keep the bytecode its
        // imports write, so without it every script and evaluation would
        // compile torch's and transformers' Python again (7.8 s of a 15.7 s
        // `import torch, transformers` in a fresh container, on 2 cores).
        .args(["--break-system-packages", "--no-cache-dir"])
        .args([
            "--find-links",
            "/tmp/mlrb-wheels",
            "-r",
            "/tmp/mlrb-wheels/requirements.lock",
        ]);
    let installed = run(&mut pip, "installing the locked wheels in the image").await;
    std::fs::remove_dir_all(&inside)?;
    installed
}

/// Writes the start-up module into the image's site-packages (where pip
/// installed the wheels), with the `.pth` line that imports it.
fn install_site_compat(module: &str, rootfs: &Path) -> Result<()> {
    let site = rootfs.join("usr/local/lib/python3.11/dist-packages");
    std::fs::create_dir_all(&site).with_context(|| format!("creating {}", site.display()))?;
    std::fs::write(site.join(format!("{SITE_COMPAT_MODULE}.py")), module)?;
    std::fs::write(
        site.join(format!("{SITE_COMPAT_MODULE}.pth")),
        format!("import {SITE_COMPAT_MODULE}\n"),
    )?;
    Ok(())
}

/// Imports `rootfs` into the engine as `tag` (a tar stream, no registry).
async fn import(docker: &bollard::Docker, rootfs: &Path, tag: &str) -> Result<()> {
    let mut tar = tokio::process::Command::new("tar")
        .args([
            "--numeric-owner",
            "--exclude=./dev/*",
            "--exclude=./proc/*",
            "--exclude=./sys/*",
            "-C",
        ])
        .arg(rootfs)
        .args(["-cf", "-", "."])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .context("running tar")?;
    let stream = tokio_util::io::ReaderStream::new(tar.stdout.take().context("tar output")?);
    let (repository, version) = tag.split_once(':').unwrap_or((tag, "latest"));
    let options = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(repository)
        .tag(version)
        .build();
    let mut import = docker.create_image(Some(options), Some(bollard::body_try_stream(stream)), None);
    while let Some(step) = import.next().await {
        step.context("importing the image")?;
    }
    let status = tar.wait().await?;
    if !status.success() {
        bail!("tar of the root filesystem failed: {status}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_follows_the_recipe() {
        let plain = ImageRecipe::standard(false);
        assert_eq!(plain.tag(), ImageRecipe::standard(false).tag());
        assert_ne!(plain.tag(), ImageRecipe::standard(true).tag());
        assert!(plain.tag().starts_with("mlrb-runtime:"));
        // A new lock is a new image.
        let mut relocked = ImageRecipe::standard(true);
        relocked.wheels = Some(format!("{TORCH_LOCK}extra==1.0 --hash=sha256:00\n"));
        assert_ne!(relocked.tag(), ImageRecipe::standard(true).tag());
    }

    #[test]
    fn every_locked_wheel_has_one_version_and_a_hash() {
        let pinned: Vec<&str> = TORCH_LOCK
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        assert!(pinned.len() > 20, "{pinned:?}");
        for line in &pinned {
            let (requirement, hash) = line.split_once(" --hash=sha256:").expect(line);
            assert!(requirement.contains("==") && hash.len() == 64, "{line}");
        }
        assert!(
            pinned.iter().any(|l| l.starts_with("torch==")) && pinned.iter().any(|l| l.starts_with("transformers=="))
        );
    }
}

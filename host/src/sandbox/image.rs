//! The task runtime image, built without a registry: a Debian root
//! filesystem from debootstrap with Python and the scientific stack from
//! Debian's packages, imported into the local engine and tagged by a hash of
//! its recipe, so an unchanged recipe is never built twice.

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
}

/// The repository images are tagged in (`mlrb-runtime:<hash>`).
pub const IMAGE_REPOSITORY: &str = "mlrb-runtime";

impl ImageRecipe {
    /// Debian bookworm with Python 3 and numpy, scipy, scikit-learn,
    /// pandas; with `torch`, PyTorch (CPU build from Debian) as well.
    pub fn standard(torch: bool) -> Self {
        let mut packages: Vec<String> = [
            "python3",
            "python3-numpy",
            "python3-scipy",
            "python3-sklearn",
            "python3-pandas",
            "procps",
        ]
        .map(String::from)
        .to_vec();
        if torch {
            packages.push("python3-torch".into());
        }
        Self {
            suite: "bookworm".into(),
            variant: "minbase".into(),
            packages,
            revision: 1,
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
    let (docker, _) = super::docker::connect().await?;
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
        .context("debootstrap is not installed: install it with `apt-get install debootstrap`")?;
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
    }
}

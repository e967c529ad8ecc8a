//! The real-data path of an upstream MLAgentBench folder whose source mlrb
//! knows (`fetch` in mlagentbench_overlay.toml): with `--network`, mlrb
//! fetches the data on the host (credentials stay there; each source's
//! endpoint can be set), then a sandboxed step, offline, puts them where
//! the folder's code reads them (`mlrb_fetched_mlab.py`, which runs the
//! folder's own prepare.py on them, or `mlrb_hub.py` for a Hugging Face
//! dataset, kept in the prepared data as an offline hub, `hf/`, that later
//! runs use: [`prepared_hub`]).

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::mlagentbench::{self, Fetch};
use super::{Layout, Task, fetch, hf_snapshot, kaggle, zip_listing};
use crate::sandbox::Mount;

/// The driver that puts fetched files where a folder reads them.
const DRIVER: &str = "/mlrb/lib/mlrb_fetched_mlab.py";
/// Builds an offline hub from a Hugging Face cache.
const HUB_BUILDER: &str = "/mlrb/lib/mlrb_hub.py";
/// Where the sandboxed step sees the fetched files (read-only).
const GUEST_DIR: &str = "/mlrb/fetched";
/// Where it writes the offline hub of a Hugging Face dataset.
const GUEST_HUB: &str = "/task/hf";
/// The prepared data's offline hub, beside `env/` and `scripts/`.
pub const HUB_DIR: &str = "hf";
/// torchvision's CIFAR-10 mirror and OGB's server, unless set otherwise.
const CIFAR10_MIRROR: (&str, &str) = ("MLRB_CIFAR10_MIRROR", "https://www.cs.toronto.edu/~kriz");
const OGB_SERVER: (&str, &str) = ("MLRB_OGB_ENDPOINT", "http://snap.stanford.edu/ogb/data/nodeproppred");

/// A sandboxed step: its argv, its mounts, its environment.
pub type Step = (Vec<String>, Vec<Mount>, Vec<(String, String)>);

/// Files fetched for one preparation, in a folder removed with it.
pub struct Fetched {
    dir: tempfile::TempDir,
    source: Fetch,
}

/// Where `task`'s real data come from, when mlrb fetches them: an upstream
/// folder it knows, prepared for real (not the smoke profile) with the
/// network allowed.
pub fn source(task: &Task) -> Option<Fetch> {
    if task.layout != Layout::MlAgentBench || task.smoke() || !task.prepare_network() {
        return None;
    }
    mlagentbench::known(&task.root)?.fetch
}

/// Fetches `task`'s real data into a fresh folder under `base` (beside
/// the prepared data, so that nothing half-fetched outlives a failure),
/// or nothing where mlrb does not fetch them itself. Errors are one line
/// naming the folder and the source.
pub async fn fetch(task: &Task, base: &Path) -> Result<Option<Fetched>> {
    let Some(source) = source(task) else {
        return Ok(None);
    };
    let dir = tempfile::Builder::new().prefix(".fetch-").tempdir_in(base)?;
    let name = task.spec.name.as_str();
    match &source {
        Fetch::Kaggle(competition) => {
            kaggle::fetch(name, competition, dir.path()).await?;
        }
        Fetch::HuggingFace(id) => {
            hf_snapshot::fetch(name, id, dir.path()).await?;
        }
        Fetch::Torchvision(_) => {
            let file = "cifar-10-python.tar.gz";
            let mirror = fetch::endpoint(CIFAR10_MIRROR.0, CIFAR10_MIRROR.1);
            let source = format!("torchvision's CIFAR-10 mirror ({mirror})");
            archive(name, &source, &format!("{mirror}/{file}"), &dir.path().join(file)).await?;
        }
        Fetch::Ogb(dataset) => {
            let file = format!("{dataset}.zip");
            let server = fetch::endpoint(OGB_SERVER.0, OGB_SERVER.1);
            let source = format!("OGB's server ({server})");
            archive(name, &source, &format!("{server}/{file}"), &dir.path().join(file)).await?;
        }
    }
    Ok(Some(Fetched { dir, source }))
}

/// Downloads one archive (a zip or a tar.gz, by `to`'s name) and checks
/// that it is one; a zip's listing is checked whole.
async fn archive(task: &str, source: &str, url: &str, to: &Path) -> Result<()> {
    let fail = |e: anyhow::Error| anyhow::anyhow!("task {task}: {source}: {e:#}");
    let max = fetch::max_bytes();
    fetch::download(url, None, to, max, &|_: u16| None)
        .await
        .map_err(fail)?;
    let mut magic = [0u8; 2];
    use std::io::Read;
    let read = std::fs::File::open(to)?.read(&mut magic)?;
    let zip = to.extension().is_some_and(|e| e == "zip");
    match zip {
        true => zip_listing::check(to, max)
            .map(drop)
            .map_err(|e| fail(e.context("refused its zip"))),
        false if read < 2 || magic != [0x1f, 0x8b] => Err(fail(anyhow::anyhow!("its answer is not a tar.gz archive"))),
        false => Ok(()),
    }
}

impl Fetched {
    /// The sandboxed step that puts the fetched files where the folder
    /// reads them, in `staging` (the prepared `env/` and `scripts/` are
    /// already there): argv, the mounts beyond those two, its environment.
    pub fn step(&self, task: &Task, staging: &Path) -> Result<Step> {
        let name = task.spec.name.clone();
        let mut mounts = vec![Mount::read_only(self.dir.path(), GUEST_DIR)];
        let argv = match &self.source {
            Fetch::Kaggle(_) => vec![DRIVER.into(), "kaggle".into(), name, GUEST_DIR.into()],
            Fetch::Torchvision(_) => vec![DRIVER.into(), "torchvision".into(), name, GUEST_DIR.into()],
            Fetch::Ogb(_) => vec![DRIVER.into(), "ogb".into(), name, GUEST_DIR.into()],
            Fetch::HuggingFace(id) => {
                let hub = staging.join(HUB_DIR);
                std::fs::create_dir_all(&hub)?;
                mounts.push(Mount::writable(&hub, GUEST_HUB));
                let sources = serde_json::json!([{ "kind": "dataset", "id": id }]).to_string();
                vec![HUB_BUILDER.into(), GUEST_DIR.into(), GUEST_HUB.into(), sources]
            }
        };
        let argv = std::iter::once("python3".to_string()).chain(argv).collect();
        let limit = ("MLRB_FETCH_MAX_BYTES".to_string(), fetch::max_bytes().to_string());
        Ok((argv, mounts, vec![limit]))
    }
}

/// The offline hub kept in `task`'s prepared data, where its real data
/// were fetched from the Hugging Face hub: what its scripts load instead.
pub fn prepared_hub(task: &Task, cache_dir: &Path) -> Option<super::hub::Hub> {
    if task.layout != Layout::MlAgentBench {
        return None;
    }
    let dir = super::Prepared::cache_path(task, cache_dir);
    let hub: PathBuf = dir.join(HUB_DIR);
    if !dir.join("complete").is_file() || !hub.join("index.json").is_file() {
        return None;
    }
    match super::hub::Hub::prepared(hub, cache_dir) {
        Ok(hub) => Some(hub),
        Err(error) => {
            tracing::warn!(task = %task.spec.name, error = %format!("{error:#}"), "the prepared offline hub");
            None
        }
    }
}

/// How a folder's `real_data` text names its source.
#[cfg(test)]
fn describe(source: &Fetch) -> Result<&'static str> {
    Ok(match source {
        Fetch::Kaggle(c) if !c.is_empty() => "Kaggle's API",
        Fetch::HuggingFace(id) if !id.is_empty() => "the Hugging Face hub",
        Fetch::Torchvision(what) if what == "cifar10" => "torchvision's CIFAR-10 mirror",
        Fetch::Ogb(dataset) if !dataset.is_empty() => "OGB's server",
        other => anyhow::bail!("{other:?}: not a source mlrb fetches from"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_folder_with_real_data_to_fetch_names_its_source() {
        let (known, _) = mlagentbench::upstream();
        assert!(!known.is_empty());
        for (name, known) in known {
            let kaggle = known.real_data.starts_with("Kaggle");
            assert_eq!(kaggle, matches!(known.fetch, Some(Fetch::Kaggle(_))), "{name}");
            if let Some(source) = &known.fetch {
                let said = describe(source).unwrap();
                assert!(
                    known.real_data.contains(said),
                    "{name}: {} does not say {said}",
                    known.real_data
                );
            }
        }
    }
}

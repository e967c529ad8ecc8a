//! An offline Hugging Face hub for a task's scripts: a folder in the cache
//! layouts of `huggingface_hub` (`hub/`) and `datasets` (`datasets/`) with an
//! `index.json` of what it holds, mounted read-only at [`GUEST_DIR`] with the
//! libraries told to use only it. Either the smoke profile's stand-in
//! (`mlrb_standin.py`: toy models and synthetic data, built once) or one
//! assembled from the models and datasets a user brought
//! (`mlrb_hub.py`, for `mlrb tasks prepare --from DIR` on an air-gapped host).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::spec::SourceKind;
use super::{Task, pylib};
use crate::sandbox::{self, Mount, Sandbox};

/// Where scripts see the hub (read-only).
pub const GUEST_DIR: &str = "/mlrb/hub";
/// Where the folder a user brought is seen while a hub is assembled from
/// it, and by the scripts after (the hub links into it).
const FROM_DIR: &str = "/mlrb/from";
/// The models (`huggingface_hub`'s cache) in the hub, as scripts see them.
const HUB_CACHE: &str = "/mlrb/hub/hub";
/// The datasets cache scripts see: links into the hub's, in their private /tmp.
const DATASETS_CACHE: &str = "/tmp/mlrb-datasets";
/// The folder of a stand-in hub whose `sitecustomize.py` the smoke
/// profile's scripts load (`mlrb_smoke_site.py`).
const SITE_DIR: &str = "python";
/// The longest building a hub may take.
const BUILD_TIMEOUT: Duration = Duration::from_secs(1800);

/// A built hub: where it is and what it holds.
#[derive(Debug, Clone)]
pub struct Hub {
    /// Its folder (`hub/`, `datasets/`, `index.json`), sealed.
    pub dir: PathBuf,
    /// Names this build.
    pub key: String,
    /// Whether it is the smoke profile's stand-in (toy models, synthetic data).
    pub stand_in: bool,
    /// The folder a user brought, which an assembled hub links into.
    from: Option<PathBuf>,
    /// mlrb's Python helpers, installed.
    lib: PathBuf,
    index: Index,
}

/// `index.json`: the model ids and each dataset's configurations.
#[derive(Debug, Clone, Default, Deserialize)]
struct Index {
    models: Vec<String>,
    datasets: BTreeMap<String, Vec<String>>,
}

/// What an episode's sandbox is opened with so that the agent's scripts
/// see a hub as the task's own scripts do ([`Hub::apply`]): its mounts,
/// and the environment and leading command each script runs with.
pub type EpisodeProfile = (Vec<Mount>, (Vec<(String, String)>, Vec<String>));

impl Hub {
    /// The smoke profile's stand-in hub, built in `sandbox` (the torch
    /// image) the first time and cached under `<cache>/standin/<key>/` after,
    /// the key naming the content of the helpers that build it.
    pub async fn stand_in(task: &Task, sandbox: &dyn Sandbox, cache_dir: &Path) -> Result<Self> {
        let lib = pylib::install(cache_dir)?;
        let key = lib.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if !reads_hub(task) {
            return Self::bare(cache_dir, key, lib);
        }
        let dir = cache_dir.join("standin").join(&key);
        // Tasks tested at once wait for one build rather than each making its own.
        static BUILDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _building = BUILDING.lock().await;
        if !dir.join("complete").is_file() {
            let argv = ["python3", "/mlrb/lib/mlrb_standin.py", "/out"];
            build(task, sandbox, cache_dir, (&argv[..], None), &dir).await?;
        }
        Self::open(dir, key, true, None, lib)
    }

    /// The stand-in of a task whose scripts read no hub (an MLAgentBench
    /// folder's data are its own files, which the stand-in writes as it
    /// prepares; a native task may name no model or dataset): no hub
    /// models or datasets, only the smoke profile's library change
    /// (`mlrb_smoke_site.py`) as `python/sitecustomize.py`. Written here,
    /// as it runs nothing, under `<cache>/standin/bare-<key>/`.
    fn bare(cache_dir: &Path, key: String, lib: PathBuf) -> Result<Self> {
        let key = format!("bare-{key}");
        let dir = cache_dir.join("standin").join(&key);
        if !dir.join("complete").is_file() {
            let base = dir.parent().context("a hub has a parent folder")?;
            std::fs::create_dir_all(base).with_context(|| format!("creating {}", base.display()))?;
            let staging = tempfile::Builder::new().prefix(".staging-").tempdir_in(base)?;
            let out = staging.path();
            for folder in ["hub", "datasets", SITE_DIR] {
                std::fs::create_dir_all(out.join(folder))?;
            }
            std::fs::write(out.join("index.json"), r#"{"models": [], "datasets": {}}"#)?;
            let site = pylib::files()
                .iter()
                .find(|(name, _)| *name == "mlrb_smoke_site.py")
                .map(|(_, text)| *text)
                .context("mlrb_smoke_site.py is embedded")?;
            std::fs::write(
                out.join(SITE_DIR).join("sitecustomize.py"),
                format!("{site}\ninstall()\n"),
            )?;
            std::fs::write(out.join("complete"), "")?;
            super::sealed::publish(staging, &dir)?;
        }
        Self::open(dir, key, true, None, lib)
    }

    /// A hub assembled from `from` (a Hugging Face cache, or
    /// `save_pretrained` / `save_to_disk` folders named by hub id), holding
    /// each model and dataset of the task's `[[sources]]` at its declared
    /// revision, or an error naming what is missing. Rebuilt each time.
    pub async fn from_files(task: &Task, sandbox: &dyn Sandbox, cache_dir: &Path, from: &Path) -> Result<Self> {
        let from = std::path::absolute(from).unwrap_or_else(|_| from.to_path_buf());
        if !from.is_dir() {
            bail!(
                "--from {}: not a folder (give the folder that holds the downloaded models and datasets)",
                from.display()
            );
        }
        let lib = pylib::install(cache_dir)?;
        let base = cache_dir.join("offline-hub");
        std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
        let dir = base.join(format!("{}-{}", task.spec.name, std::process::id()));
        if dir.exists() {
            let _ = super::sealed::unseal(&dir);
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        let sources = serde_json::to_string(&task.spec.sources)?;
        let argv = ["python3", "/mlrb/lib/mlrb_hub.py", FROM_DIR, "/out", sources.as_str()];
        build(task, sandbox, cache_dir, (&argv[..], Some(from.as_path())), &dir).await?;
        let key = format!("from-{}", dir.file_name().unwrap_or_default().to_string_lossy());
        Self::open(dir, key, false, Some(from), lib)
    }

    /// The offline hub kept in a folder's prepared data (`real_data.rs`):
    /// its real data, fetched from the Hugging Face hub.
    pub fn prepared(dir: PathBuf, cache_dir: &Path) -> Result<Self> {
        let lib = pylib::install(cache_dir)?;
        let key = format!(
            "prepared-{}",
            dir.parent()
                .and_then(|d| d.file_name())
                .unwrap_or_default()
                .to_string_lossy()
        );
        Self::open(dir, key, false, None, lib)
    }

    fn open(dir: PathBuf, key: String, stand_in: bool, from: Option<PathBuf>, lib: PathBuf) -> Result<Self> {
        let path = dir.join("index.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let index = serde_json::from_str(&text).with_context(|| format!("{}: not a hub index", path.display()))?;
        Ok(Self {
            dir,
            key,
            stand_in,
            from,
            lib,
            index,
        })
    }

    /// The task's models and datasets (`[[sources]]`) the hub lacks.
    pub fn missing(&self, task: &Task) -> Vec<String> {
        let has = |kind: SourceKind, id: &str, config: Option<&str>| match kind {
            SourceKind::Model => self.index.models.iter().any(|m| m == id),
            SourceKind::Dataset => self
                .index
                .datasets
                .get(id)
                .is_some_and(|configs| config.is_none_or(|c| configs.iter().any(|have| have == c))),
            SourceKind::Protocol => true,
        };
        task.spec
            .sources
            .iter()
            .filter(|s| !has(s.kind, &s.id, s.config.as_deref()))
            .map(|s| match &s.config {
                Some(config) => format!("{} (config {config})", s.id),
                None => s.id.clone(),
            })
            .collect()
    }

    /// mlrb's Python helpers, for a task's smoke submission script.
    pub fn helpers(&self) -> (Mount, (String, String)) {
        pylib::mount_dir(&self.lib)
    }

    /// `command` with the hub ([`Hub::for_episode`]'s parts, applied to
    /// one command).
    pub fn apply(&self, mut command: sandbox::Command) -> sandbox::Command {
        let (mounts, (env, wrapper)) = self.for_episode();
        command.env.extend(env);
        command.mounts.extend(mounts);
        command.argv.splice(0..0, wrapper);
        command
    }

    /// What a script runs with to see the hub: the hub (and the folder it
    /// links into) read-only; the Hugging Face libraries told to use only
    /// it; and the command its argv goes through, which makes the datasets
    /// cache a private writable tree of links into the hub before the
    /// script starts (`datasets` writes locks, and a script's `map` or
    /// `train_test_split` results, into its cache), once: an episode's
    /// scripts share their /tmp.
    pub fn for_episode(&self) -> EpisodeProfile {
        let mut env = vec![
            ("HF_HUB_OFFLINE", "1"),
            ("HF_DATASETS_OFFLINE", "1"),
            ("TRANSFORMERS_OFFLINE", "1"),
            ("HF_HUB_CACHE", HUB_CACHE),
            ("HF_DATASETS_CACHE", DATASETS_CACHE),
        ];
        if self.stand_in {
            env.push(("MLRB_SMOKE", "1"));
        }
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mounts = std::iter::once(Mount::read_only(&self.dir, GUEST_DIR))
            .chain(self.from.iter().map(|from| Mount::read_only(from, FROM_DIR)))
            .collect();
        // A stand-in's change to a library comes first on the path.
        let site = match self.dir.join(SITE_DIR).is_dir() {
            true => format!("export PYTHONPATH={GUEST_DIR}/{SITE_DIR}${{PYTHONPATH:+:$PYTHONPATH}} && "),
            false => String::new(),
        };
        let link_tree = format!(
            "{site}{{ [ -d {DATASETS_CACHE} ] || {{ cp -rsL {GUEST_DIR}/datasets {DATASETS_CACHE} && chmod -R u+w {DATASETS_CACHE}; }}; }} && exec \"$@\""
        );
        let wrapper = ["sh", "-c", &link_tree, "sh"].map(String::from).to_vec();
        (mounts, (env, wrapper))
    }
}

/// Whether the stand-in of `task` needs the hub's toy models and
/// synthetic datasets: a native task that names a model or dataset in its
/// `[[sources]]`, an MLAgentBench folder whose stand-in says so. Any
/// other is given the bare stand-in, which builds nothing (a CPU task such
/// as `digits` then needs no PyTorch for its smoke profile).
fn reads_hub(task: &Task) -> bool {
    match task.layout {
        super::Layout::Native => task.spec.sources.iter().any(|s| s.kind != SourceKind::Protocol),
        super::Layout::MlAgentBench => super::mlagentbench::known(&task.root)
            .and_then(|k| k.smoke)
            .is_some_and(|s| s.hub),
    }
}

/// Runs a hub builder (`argv`, with the user's folder when given) offline
/// in `sandbox`, into a staging folder it then publishes at `dir`.
async fn build(
    task: &Task,
    sandbox: &dyn Sandbox,
    cache_dir: &Path,
    (argv, from): (&[&str], Option<&Path>),
    dir: &Path,
) -> Result<()> {
    let base = dir.parent().context("a hub has a parent folder")?;
    std::fs::create_dir_all(base).with_context(|| format!("creating {}", base.display()))?;
    let staging = tempfile::Builder::new().prefix(".staging-").tempdir_in(base)?;
    let out = staging.path();
    let (lib_mount, lib_env) = pylib::mount(cache_dir)?;
    let mut mounts = vec![lib_mount, Mount::writable(out, "/out")];
    mounts.extend(from.map(|from| Mount::read_only(from, FROM_DIR)));
    let outcome = sandbox
        .run(sandbox::Command {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            cwd: "/tmp".into(),
            mounts,
            env: vec![lib_env, ("HF_HUB_OFFLINE".into(), "1".into())],
            network: sandbox::Reach::Nothing,
            limits: task.task_script_limits(BUILD_TIMEOUT),
            gpus: Vec::new(),
            log_prefix: Some(out.join("build")),
            stop: Default::default(),
            meter: Default::default(),
        })
        .await?;
    if !outcome.success() {
        let what = if from.is_some() {
            "the files brought"
        } else {
            "the smoke profile's stand-in hub"
        };
        bail!(
            "building an offline hub from {what} failed ({}): {}",
            outcome.describe(),
            super::failure::failure_cause(&outcome.stderr.text)
        );
    }
    std::fs::write(out.join("complete"), "")?;
    super::sealed::publish(staging, dir)
}

/// A hub holding `models` and `datasets` (for tests elsewhere).
#[cfg(test)]
pub(super) fn for_tests(models: &[&str], datasets: &[(&str, &[&str])]) -> Hub {
    Hub {
        dir: "/nowhere".into(),
        key: "k".into(),
        stand_in: true,
        from: None,
        lib: "/nowhere/lib".into(),
        index: Index {
            models: models.iter().map(|m| m.to_string()).collect(),
            datasets: datasets
                .iter()
                .map(|(id, configs)| (id.to_string(), configs.iter().map(|c| c.to_string()).collect()))
                .collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_the_hub_lacks_is_named() {
        let task = Task::load(&super::super::builtin_tasks_dir().join("mini_llm_merging")).unwrap();
        let full = for_tests(
            &["Qwen/Qwen1.5-1.8B", "Qwen/Qwen1.5-1.8B-Chat"],
            &[
                ("AlgorithmicResearchGroup/llm_merging", &["cosmos_qa", "xsum"]),
                ("allenai/cosmos_qa", &["default"]),
                ("EdinburghNLP/xsum", &["default"]),
                ("Salesforce/wikitext", &["wikitext-2-raw-v1"]),
            ],
        );
        assert_eq!(full.missing(&task), Vec::<String>::new());
        let lacking = for_tests(
            &["Qwen/Qwen1.5-1.8B"],
            &[
                ("AlgorithmicResearchGroup/llm_merging", &["xsum"]),
                ("allenai/cosmos_qa", &["default"]),
                ("EdinburghNLP/xsum", &["default"]),
                ("Salesforce/wikitext", &["wikitext-103-raw-v1"]),
            ],
        );
        let missing = lacking.missing(&task);
        for id in [
            "Qwen/Qwen1.5-1.8B-Chat",
            "AlgorithmicResearchGroup/llm_merging (config cosmos_qa)",
            "Salesforce/wikitext (config wikitext-2-raw-v1)",
        ] {
            assert!(missing.iter().any(|m| m == id), "{id} not in {missing:?}");
        }
        assert!(!missing.iter().any(|m| m.contains("xsum")), "{missing:?}");
    }

    /// A CPU task's smoke profile builds no toy models (and needs no PyTorch).
    #[test]
    fn only_a_task_that_names_a_model_or_dataset_reads_the_hub() {
        let dir = super::super::builtin_tasks_dir();
        assert!(!reads_hub(&Task::load(&dir.join("digits")).unwrap()));
        assert!(reads_hub(&Task::load(&dir.join("mini_baby_lm")).unwrap()));
    }

    #[test]
    fn only_the_stand_in_says_smoke_and_a_brought_folder_is_mounted() {
        let command = || sandbox::Command {
            argv: vec!["python3".into(), "x.py".into()],
            cwd: "/".into(),
            mounts: Vec::new(),
            env: Vec::new(),
            network: sandbox::Reach::Nothing,
            limits: sandbox::CommandLimits::new(&crate::limits::Limits::default(), Duration::from_secs(1)),
            gpus: Vec::new(),
            log_prefix: None,
            stop: Default::default(),
            meter: Default::default(),
        };
        let mut hub = for_tests(&[], &[]);
        let smoke = hub.apply(command());
        assert!(smoke.env.iter().any(|(k, v)| k == "MLRB_SMOKE" && v == "1"));
        assert_eq!(smoke.argv[..2], ["sh", "-c"]);
        assert_eq!(
            smoke.argv[4..],
            ["python3", "x.py"],
            "the script runs after the links are made"
        );
        hub.stand_in = false;
        hub.from = Some("/data/hf".into());
        let brought = hub.apply(command());
        assert!(!brought.env.iter().any(|(k, _)| k == "MLRB_SMOKE"));
        assert!(brought.env.iter().any(|(k, v)| k == "HF_HUB_OFFLINE" && v == "1"));
        assert!(brought.mounts.iter().all(|m| !m.writable) && brought.mounts.len() == 2);
    }
}

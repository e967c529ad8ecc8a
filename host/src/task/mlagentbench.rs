//! MLAgentBench task folders, run unchanged.
//!
//! Their layout: `env/` (the agent's files), `scripts/research_problem.txt`,
//! `scripts/prepare.py` (run with cwd `scripts/`, writing the data into
//! `../env` and the answers next to itself), `scripts/eval.py` defining
//! `get_score(submission_folder)`, and `scripts/read_only_files.txt` with
//! fnmatch patterns such as `./train.csv`. mlrb synthesises a [`TaskSpec`]
//! from them; the evaluator is called through an adapter (see
//! `host/python/mlrb_mlagentbench.py`).
//!
//! Documented deviations from MLAgentBench's own runner: prepare runs in the
//! sandbox without network on a copy of the folder (never in place) with
//! stdin closed, so a prepare step that asks for input fails with a clear
//! error instead of waiting; read-only patterns match however a path is
//! spelt (`./a`, `a`, `x/../a`); the final snapshot is taken and scored even
//! when the episode times out.

use std::path::Path;

use anyhow::{Result, bail};

use super::spec::{Budget, Files, Metric, PrepareSpec, Resources, TaskSpec, Validation};

/// Does `root` look like an MLAgentBench task folder?
pub fn looks_like(root: &Path) -> bool {
    root.join("env").is_dir() && root.join("scripts/research_problem.txt").is_file()
}

/// What mlrb knows of the upstream MLAgentBench tasks, each keyed by the
/// fingerprint of its defining files (see [`fingerprint`]), so that a
/// changed folder is noticed rather than scored by facts that no longer
/// hold.
const OVERLAY: &str = include_str!("mlagentbench_overlay.toml");

/// The facts of one upstream task.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Known {
    /// The fingerprint of the upstream folder.
    pub fingerprint: String,
    /// The metric `get_score` returns.
    pub metric: String,
    /// Whether a higher score is better.
    pub higher_is_better: bool,
    /// The scores a valid submission can have.
    pub range: [f64; 2],
    /// False where the score varies between runs (timing, randomness).
    #[serde(default = "yes")]
    pub deterministic: bool,
    /// The baseline, when a published or measured one is known.
    #[serde(default)]
    pub baseline: Option<f64>,
    /// What preparation must produce (patterns under the prepared folder).
    #[serde(default)]
    pub prepare_outputs: Vec<String>,
    /// mlrb's evaluator in place of the folder's (see `spec::Scoring`).
    #[serde(default)]
    pub evaluator: Option<String>,
    /// Why the folder's own evaluator is not used.
    #[serde(default)]
    pub evaluator_why: Option<String>,
    /// `torch`: its scripts import what the torch image holds (torchvision, datasets).
    #[serde(default)]
    pub image: Option<String>,
    /// What every script of the folder runs with (`resources.env`): what
    /// its code assumed of its libraries, e.g. Keras's backend.
    #[serde(default)]
    pub environment: std::collections::BTreeMap<String, String>,
    /// The memory its scripts need, in MiB, where mlrb's default (2 GiB) is
    /// too little for its own starter on its real data.
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// How the smoke profile runs it, where mlrb has stand-in data for it.
    #[serde(default)]
    pub smoke: Option<KnownSmoke>,
    /// Why the smoke profile does not run it, where it does not.
    #[serde(default)]
    pub no_smoke: Option<String>,
    /// What running it with its real data needs (credentials, network, packages).
    #[serde(default)]
    pub real_data: String,
    /// Where mlrb itself fetches its real data from, on the host, when it
    /// is prepared with `--network` (`real_data.rs`).
    #[serde(default)]
    pub fetch: Option<Fetch>,
    /// Why mlrb refuses to score it, where it does.
    #[serde(default)]
    pub refused: Option<String>,
    /// Where these facts come from.
    pub source: String,
}

/// The smoke profile of an upstream folder (`host/python/mlrb_standin_mlab.py`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownSmoke {
    /// Upstream's train.py is a skeleton the agent is to finish: what its
    /// failure says (after it has read the data); the stand-in then writes
    /// the submission a finished one would.
    #[serde(default)]
    pub skeleton: Option<String>,
    /// Each invalid submission case and what its refusal must say.
    pub invalid: std::collections::BTreeMap<String, String>,
    /// Its scripts read the stand-in hub's synthetic Hugging Face data sets.
    #[serde(default)]
    pub hub: bool,
}

/// A source mlrb fetches a folder's real data from.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fetch {
    /// A Kaggle competition's files (what `kaggle competitions download -c NAME` gives).
    Kaggle(String),
    /// A dataset repository of the Hugging Face hub, which `datasets.load_dataset` reads.
    HuggingFace(String),
    /// The archive torchvision's dataset class downloads (`cifar10`).
    Torchvision(String),
    /// An OGB dataset's zip, as `PygNodePropPredDataset` downloads it (`arxiv`).
    Ogb(String),
}

fn yes() -> bool {
    true
}

#[derive(serde::Deserialize)]
struct Overlay {
    tasks: std::collections::BTreeMap<String, Known>,
    /// Upstream folders that cannot be run at all, and why.
    #[serde(default)]
    absent: std::collections::BTreeMap<String, Absent>,
}

/// An upstream folder mlrb cannot run (it has no evaluator).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Absent {
    /// Why.
    pub why: String,
}

/// How a folder relates to the upstream tasks mlrb knows.
#[derive(Debug, Clone)]
pub enum Recognised {
    /// An upstream task, unchanged: its facts apply.
    Upstream(Box<Known>),
    /// Named as an upstream task, but its files differ: nothing is assumed.
    Changed {
        /// The upstream fingerprint.
        expected: String,
        /// This folder's.
        found: String,
    },
    /// Not an upstream task mlrb knows.
    Unknown,
}

/// The facts of the folder at `root`, when it is an unchanged upstream one.
pub fn known(root: &Path) -> Option<Known> {
    let name = root.file_name()?.to_string_lossy();
    match recognise(&name, &fingerprint(root)) {
        Recognised::Upstream(known) => Some(*known),
        _ => None,
    }
}

/// Upstream folders by name, with what mlrb knows of each.
pub type ByName<T> = Vec<(String, T)>;

/// Every upstream folder mlrb knows, by name, and those it cannot run
/// (`tasks check --suite mlagentbench`).
pub fn upstream() -> (ByName<Known>, ByName<Absent>) {
    toml::from_str::<Overlay>(OVERLAY)
        .map(|overlay| {
            (
                overlay.tasks.into_iter().collect(),
                overlay.absent.into_iter().collect(),
            )
        })
        .unwrap_or_default()
}

/// What mlrb knows of the folder `name` whose fingerprint is `fingerprint`.
pub fn recognise(name: &str, fingerprint: &str) -> Recognised {
    recognise_in(OVERLAY, name, fingerprint)
}

fn recognise_in(overlay: &str, name: &str, fingerprint: &str) -> Recognised {
    let overlay: Overlay = match toml::from_str(overlay) {
        Ok(overlay) => overlay,
        Err(error) => {
            tracing::error!(%error, "the embedded MLAgentBench overlay does not parse");
            return Recognised::Unknown;
        }
    };
    match overlay.tasks.get(name) {
        Some(known) if known.fingerprint == fingerprint => Recognised::Upstream(Box::new(known.clone())),
        Some(known) => Recognised::Changed {
            expected: known.fingerprint.clone(),
            found: fingerprint.to_string(),
        },
        None => Recognised::Unknown,
    }
}

/// The files that define what a folder's task is: the evaluator, the
/// research problem and the starter (not the data preparation downloads).
const DEFINING_FILES: &[&str] = &["scripts/eval.py", "scripts/research_problem.txt", "env/train.py"];

/// A short hash of the folder's defining files, and of every module of
/// the folder's own that the evaluator imports (a metric in `env/metric.py`
/// defines the score as much as `eval.py` does).
pub fn fingerprint(root: &Path) -> String {
    let mut hasher = blake3::Hasher::new();
    let imported = evaluator_modules(root);
    let files = DEFINING_FILES.iter().map(|rel| rel.to_string()).chain(imported);
    for rel in files {
        if let Ok(bytes) = std::fs::read(root.join(&rel)) {
            hasher.update(rel.as_bytes()).update(b"\0").update(&bytes).update(b"\0");
        }
    }
    hasher.finalize().to_hex()[..16].to_string()
}

/// The folder's own modules (`scripts/<m>.py`, `env/<m>.py`) that
/// `scripts/eval.py` imports, other than the defining files, sorted.
pub fn evaluator_modules(root: &Path) -> Vec<String> {
    let source = std::fs::read_to_string(root.join("scripts/eval.py")).unwrap_or_default();
    let mut found: Vec<String> = source
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let rest = line.strip_prefix("import ").or_else(|| line.strip_prefix("from "))?;
            let module: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            (!module.is_empty()).then_some(module)
        })
        .flat_map(|module| [format!("scripts/{module}.py"), format!("env/{module}.py")])
        .filter(|rel| root.join(rel).is_file() && !DEFINING_FILES.contains(&rel.as_str()))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The metric of a folder mlrb does not know: a score whose direction is
/// unknown, so that no improvement or success is claimed for it.
fn unknown_metric() -> Metric {
    Metric {
        name: "score".into(),
        higher_is_better: true,
        baseline: None,
        baseline_from: None,
        declared_baseline: None,
        reference: None,
        tolerance: 0.0,
        deterministic: true,
        // Nobody declared a range; MLAgentBench's evaluators mark a missing
        // submission with 1e10 (or inf, NaN): no such value is a score.
        range: None,
        missing_mark: Some(NO_SUBMISSION),
        direction_known: false,
    }
}

/// What MLAgentBench's evaluators return for a missing submission.
const NO_SUBMISSION: f64 = 1e10;

/// The metric of an unchanged upstream task.
fn known_metric(known: &Known) -> Metric {
    Metric {
        name: known.metric.clone(),
        higher_is_better: known.higher_is_better,
        baseline: known.baseline,
        baseline_from: known.baseline.map(|_| known.source.clone()),
        declared_baseline: None,
        reference: None,
        tolerance: 0.0,
        deterministic: known.deterministic,
        range: Some(known.range),
        missing_mark: None,
        direction_known: true,
    }
}

/// How an unchanged upstream task is scored: by mlrb's own evaluator where
/// the overlay gives one (it runs the submission's code, in sandboxes of
/// its own), else by the folder's get_score on the submission as data.
fn known_scoring(known: &Known) -> super::spec::Scoring {
    match &known.evaluator {
        Some(evaluator) => super::spec::Scoring {
            submission: super::spec::SubmissionUse::Code,
            evaluator: Some(evaluator.clone()),
        },
        None => Default::default(),
    }
}

/// Reads `scripts/read_only_files.txt`: one fnmatch pattern per line,
/// blank lines and `#` comments skipped.
pub fn read_only_patterns(root: &Path) -> Result<Vec<String>> {
    let path = root.join("scripts/read_only_files.txt");
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
    let mut patterns = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('/') || line.split('/').any(|part| part == "..") {
            bail!(
                "{}: line {}: `{line}` points outside the workspace; patterns are relative to env/",
                path.display(),
                number + 1
            );
        }
        let pattern = format!("fnmatch:{line}");
        let (glob, _) = crate::relpath::read_only_glob(&pattern);
        globset::Glob::new(glob)
            .map_err(|e| anyhow::anyhow!("{}: line {}: invalid pattern `{line}`: {e}", path.display(), number + 1))?;
        patterns.push(pattern);
    }
    Ok(patterns)
}

/// A version that changes whenever the folder's content does, so prepared
/// data are never reused after an edit. Large files count by path and size.
fn content_version(root: &Path) -> Result<String> {
    const HASHED_BYTES: u64 = 16 << 20;
    let hash = super::content::hash_folder(root, &["env", "scripts"], HASHED_BYTES, |rel| {
        // MLAgentBench's own marker of a prepared folder is not content.
        rel == Path::new("scripts/prepared")
    })?;
    Ok(format!("mlab-{}", &hash[..12]))
}

/// The task definition mlrb uses for an MLAgentBench folder.
pub fn spec(root: &Path) -> Result<TaskSpec> {
    let problem_path = root.join("scripts/research_problem.txt");
    let research_problem = std::fs::read_to_string(&problem_path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", problem_path.display()))?;
    if research_problem.trim().is_empty() {
        bail!(
            "{}: is empty: it must say what the agent should do",
            problem_path.display()
        );
    }
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty() && !n.starts_with('.'))
        .ok_or_else(|| anyhow::anyhow!("{}: cannot name a task after this folder", root.display()))?;
    let mut resources = Resources::default();
    let (metric, prepare, scoring) = match recognise(&name, &fingerprint(root)) {
        Recognised::Upstream(known) => {
            if known.image.as_deref() == Some("torch") {
                resources.image = Some(crate::sandbox::image::ImageRecipe::standard(true).tag());
            }
            resources.env = known.environment.clone();
            resources.memory_mb = known.memory_mb.unwrap_or(resources.memory_mb);
            (
                known_metric(&known),
                PrepareSpec {
                    outputs: known.prepare_outputs.clone(),
                },
                known_scoring(&known),
            )
        }
        _ => (unknown_metric(), PrepareSpec::default(), Default::default()),
    };
    Ok(TaskSpec {
        description: format!("MLAgentBench task folder {name}"),
        layout: Some(super::Layout::MlAgentBench),
        name,
        version: content_version(root)?,
        suite: "mlagentbench".into(),
        research_problem,
        metric,
        // MLAgentBench's defaults: 50 steps, 5 hours.
        budget: Budget {
            max_steps: 50,
            wall_seconds: 5 * 3600,
            llm_tokens: 0,
            llm_cost_usd: 0.0,
        },
        resources,
        files: Files {
            read_only: read_only_patterns(root)?,
        },
        // Validity only: the folder declares no public part to score.
        validation: Validation {
            enabled: true,
            ..Validation::default()
        },
        scoring,
        prepare,
        sources: Vec::new(),
        smoke: None,
    })
}

/// A task.toml's declarations for the MLAgentBench folder at `root`: what
/// it leaves out (research problem, read-only files) comes from the folder.
pub fn declared(root: &Path, mut spec: TaskSpec) -> Result<TaskSpec> {
    let from_folder = self::spec(root)?;
    if spec.research_problem.trim().is_empty() {
        spec.research_problem = from_folder.research_problem;
    }
    if spec.files.read_only.is_empty() {
        spec.files.read_only = from_folder.files.read_only;
    }
    Ok(spec)
}

/// True when MLAgentBench's own runner already prepared the folder in place
/// (it leaves `scripts/prepared`), or when there is nothing to prepare.
pub fn prepared_in_place(root: &Path) -> bool {
    root.join("scripts/prepared").is_file() || !root.join("scripts/prepare.py").is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder() -> tempfile::TempDir {
        let tmp = tempfile::Builder::new().prefix("toy-task").tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("env")).unwrap();
        std::fs::create_dir_all(tmp.path().join("scripts")).unwrap();
        std::fs::write(tmp.path().join("env/train.py"), "print(1)\n").unwrap();
        std::fs::write(tmp.path().join("scripts/research_problem.txt"), "Do better.\n").unwrap();
        std::fs::write(tmp.path().join("scripts/eval.py"), "def get_score(f):\n    return 1\n").unwrap();
        tmp
    }

    #[test]
    fn read_only_lines_become_fnmatch_patterns() {
        let tmp = folder();
        std::fs::write(
            tmp.path().join("scripts/read_only_files.txt"),
            "./train.csv\n\n# comment\ndata/*\n",
        )
        .unwrap();
        let patterns = read_only_patterns(tmp.path()).unwrap();
        assert_eq!(patterns, vec!["fnmatch:./train.csv", "fnmatch:data/*"]);

        std::fs::write(tmp.path().join("scripts/read_only_files.txt"), "ok\n../../etc/passwd\n").unwrap();
        let err = read_only_patterns(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("read_only_files.txt: line 2"), "{err}");
    }

    #[test]
    fn the_embedded_overlay_parses_and_an_unchanged_folder_gets_its_facts() {
        let overlay: Overlay = toml::from_str(OVERLAY).unwrap();
        assert!(overlay.tasks.len() >= 10);
        for (name, known) in &overlay.tasks {
            assert_eq!(known.fingerprint.len(), 16, "{name}");
            assert!(known.range[0] <= known.range[1], "{name}");
        }
        let tmp = folder();
        let found = fingerprint(tmp.path());
        let test_overlay = format!(
            "[tasks.mine]\nfingerprint = \"{found}\"\nmetric = \"loss\"\nhigher_is_better = false\nrange = [0.0, inf]\nsource = \"test\"\n"
        );
        let Recognised::Upstream(known) = recognise_in(&test_overlay, "mine", &found) else {
            panic!("an unchanged folder is recognised");
        };
        let metric = known_metric(&known);
        assert!(metric.direction_known && !metric.higher_is_better);
        assert!(metric.out_of_range(1e300).is_none() && metric.out_of_range(-1.0).is_some());
        std::fs::write(tmp.path().join("scripts/eval.py"), "def get_score(f):\n    return 2\n").unwrap();
        assert!(matches!(
            recognise_in(&test_overlay, "mine", &fingerprint(tmp.path())),
            Recognised::Changed { .. }
        ));
    }

    /// An upstream folder as it is (tests/fixtures/mlagentbench), copied.
    fn upstream(name: &str) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/mlagentbench")
            .join(name);
        super::super::populate::copy_tree(&from, &tmp.path().join(name)).unwrap();
        tmp
    }

    #[test]
    fn a_changed_module_the_evaluator_imports_changes_the_fingerprint() {
        let tmp = upstream("fathomnet");
        let root = tmp.path().join("fathomnet");
        assert_eq!(evaluator_modules(&root), vec!["env/metric.py".to_string()]);
        let Recognised::Upstream(known) = recognise("fathomnet", &fingerprint(&root)) else {
            panic!("the upstream fathomnet folder is recognised");
        };
        assert_eq!(known.range, [-0.5, 1.0], "0.5 * (2 * AUC - 1 + MAP@20) reaches -0.5");
        // The metric's sign flipped where eval.py imports it from: noticed.
        let metric = root.join("env/metric.py");
        let text = std::fs::read_to_string(&metric).unwrap();
        let flipped = text.replace(
            "normalized_oos_score = 2 * (oos_score - 0.5)",
            "normalized_oos_score = -2 * (oos_score - 0.5)",
        );
        assert_ne!(flipped, text);
        std::fs::write(&metric, flipped).unwrap();
        assert!(matches!(
            recognise("fathomnet", &fingerprint(&root)),
            Recognised::Changed { .. }
        ));
        let spec = spec(&root).unwrap();
        assert!(!spec.metric.direction_known);
        // Unknown: MLAgentBench's 1e10 for "no submission" is not a score.
        assert!(spec.metric.out_of_range(1e10).is_some() && spec.metric.out_of_range(-1e10).is_some());
        assert!(spec.metric.out_of_range(9.9e9).is_none());
        assert!(spec.metric.out_of_range(f64::NAN).is_some() && spec.metric.out_of_range(f64::INFINITY).is_some());
        // No range was declared: none is shown, in JSON or in the reason.
        assert_eq!(spec.metric.range, None);
        let why = spec.metric.out_of_range(1e10).unwrap();
        assert!(
            why.contains("mark of a missing submission") && !why.contains("9999"),
            "{why}"
        );
        assert_eq!(
            serde_json::to_value(&spec.metric).unwrap()["range"],
            serde_json::Value::Null
        );
        // Nor a direction: `mlrb tasks show --json` says it is unknown.
        let shown = spec.to_json().unwrap();
        assert_eq!(shown["metric"]["higher_is_better"], serde_json::Value::Null);
        assert_eq!(shown["metric"]["direction_known"], false);
    }

    #[test]
    fn upstream_vectorization_is_scored_by_mlrbs_own_measure() {
        let tmp = upstream("vectorization");
        let spec = spec(&tmp.path().join("vectorization")).unwrap();
        assert_eq!(spec.scoring.evaluator.as_deref(), Some("mlrb_mlab_vectorization.py"));
        assert_eq!(spec.scoring.submission, super::super::spec::SubmissionUse::Code);
        assert!(
            super::super::pylib::files()
                .iter()
                .any(|(name, _)| *name == "mlrb_mlab_vectorization.py"),
            "the evaluator is embedded"
        );
    }

    #[test]
    fn version_follows_content_and_metric_direction_is_known_or_assumed() {
        let tmp = folder();
        let first = spec(tmp.path()).unwrap();
        assert_eq!(first.suite, "mlagentbench");
        assert_eq!(first.research_problem, "Do better.\n");
        std::fs::write(tmp.path().join("scripts/prepared"), "success").unwrap();
        assert_eq!(
            spec(tmp.path()).unwrap().version,
            first.version,
            "the marker is not content"
        );
        std::fs::write(tmp.path().join("env/train.py"), "print(2)\n").unwrap();
        assert_ne!(spec(tmp.path()).unwrap().version, first.version);

        // A folder mlrb does not know: no direction is assumed.
        assert!(!spec(tmp.path()).unwrap().metric.direction_known);
        // One named like an upstream task, with other files, is noticed.
        assert!(matches!(
            recognise("house-price", &fingerprint(tmp.path())),
            Recognised::Changed { .. }
        ));

        std::fs::write(tmp.path().join("scripts/research_problem.txt"), " \n").unwrap();
        let err = spec(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("research_problem.txt: is empty"), "{err}");
    }
}

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

use super::spec::{Budget, Files, Metric, Resources, TaskSpec, Validation};

/// Does `root` look like an MLAgentBench task folder?
pub fn looks_like(root: &Path) -> bool {
    root.join("env").is_dir() && root.join("scripts/research_problem.txt").is_file()
}

/// The metric of the MLAgentBench tasks whose direction is known; any
/// other folder is assumed to report a score where higher is better.
const KNOWN_METRICS: &[(&str, &str, bool)] = &[
    ("cifar10", "accuracy", true),
    ("imdb", "accuracy", true),
    ("ogbn-arxiv", "accuracy", true),
    ("spaceship-titanic", "accuracy", true),
    ("fathomnet", "score", true),
    ("identify-contrails", "dice", true),
    ("llama-inference", "tokens_per_second", true),
    ("house-price", "mae", false),
    ("feedback", "mcrmse", false),
    ("amp-parkinsons-disease-progression-prediction", "smape", false),
    ("vectorization", "seconds", false),
];

/// The metric of a folder by its name, and whether that is known rather
/// than assumed.
pub fn metric_for(name: &str) -> (Metric, bool) {
    let known = KNOWN_METRICS.iter().find(|(task, _, _)| *task == name);
    let (metric, higher, is_known) = match known {
        Some((_, metric, higher)) => (*metric, *higher, true),
        None => ("score", true, false),
    };
    (
        Metric {
            name: metric.into(),
            higher_is_better: higher,
            baseline: None,
            reference: None,
            tolerance: 0.0,
            deterministic: name != "vectorization" && name != "llama-inference",
            range: None,
            direction_known: is_known,
        },
        is_known,
    )
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
    let mut hasher = blake3::Hasher::new();
    for sub in ["env", "scripts"] {
        let mut entries: Vec<_> = walkdir::WalkDir::new(root.join(sub))
            .follow_links(false)
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file())
            // MLAgentBench's own marker of a prepared folder is not content.
            .filter(|e| e.path() != root.join("scripts/prepared"))
            .collect();
        entries.sort_by(|a, b| a.path().cmp(b.path()));
        for entry in entries {
            let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
            hasher.update(rel.to_string_lossy().as_bytes());
            hasher.update(b"\0");
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            hasher.update(&size.to_le_bytes());
            if size <= HASHED_BYTES {
                hasher.update(&std::fs::read(entry.path()).unwrap_or_default());
            }
        }
    }
    Ok(format!("mlab-{}", &hasher.finalize().to_hex()[..12]))
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
    let (metric, _) = metric_for(&name);
    Ok(TaskSpec {
        description: format!("MLAgentBench task folder {name}"),
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
        resources: Resources::default(),
        files: Files {
            read_only: read_only_patterns(root)?,
        },
        validation: Validation::default(),
    })
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

        assert!(!metric_for("house-price").0.higher_is_better);
        assert!(metric_for("house-price").1);
        assert!(metric_for("cifar10").0.higher_is_better);
        let (assumed, known) = metric_for("my-own-task");
        assert!(assumed.higher_is_better && !known);

        std::fs::write(tmp.path().join("scripts/research_problem.txt"), " \n").unwrap();
        let err = spec(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("research_problem.txt: is empty"), "{err}");
    }
}

//! Whether a task's evaluator runs code of the submission it scores: what
//! its `[scoring]` declares, and what its source shows, read from its syntax
//! tree by `host/python/mlrb_code_readers.py` (nothing of it is run): an
//! unpickling (`pickle.load`, `joblib.load`, `numpy.load(allow_pickle=True)`,
//! `pandas.read_pickle`, `torch.load` without `weights_only=True`), an
//! `exec`/`eval`, an import by name or path, a dataset script, a model's own
//! code, a program. Code of the submission that runs in the evaluator's own
//! process can forge the score (and read the hidden answers), so mlrb
//! refuses to score with such an evaluator.

use std::path::Path;

use super::spec::SubmissionUse;
use super::{Layout, Task};

/// The reader of evaluators' syntax trees.
const READER: &str = include_str!("../../python/mlrb_code_readers.py");

/// What a scan found of the evaluation step.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// What the step does with the submission, as declared, with nothing against it.
    Declared(SubmissionUse),
    /// Source that may run submitted code although the task does not say
    /// so (a native evaluator): `line N: why`.
    Undeclared(Vec<String>),
    /// An MLAgentBench `get_score` that runs code from its submission folder
    /// in its own process: `line N: why`. Such a folder is not scored.
    InProcess(Vec<String>),
    /// The evaluator could not be read (it does not parse, or no Python
    /// reads it here): nothing can be said of it, so it is not trusted.
    Unreadable(String),
}

/// What the evaluation step of `task` does with submitted code.
pub fn scan(task: &Task) -> Finding {
    match (task.layout, task.spec.scoring.submission) {
        (Layout::MlAgentBench, declared) if task.spec.scoring.evaluator.is_some() => Finding::Declared(declared),
        (Layout::MlAgentBench, _) => match read(Mode::GetScore, &task.eval_script()) {
            Ok(found) if found.is_empty() => Finding::Declared(SubmissionUse::Data),
            Ok(found) => Finding::InProcess(found),
            Err(why) => Finding::Unreadable(why),
        },
        (Layout::Native, SubmissionUse::Code) => Finding::Declared(SubmissionUse::Code),
        (Layout::Native, declared) => match read(Mode::Module, &task.eval_script()) {
            Ok(found) if found.is_empty() => Finding::Declared(declared),
            Ok(found) => Finding::Undeclared(found),
            // A native evaluator's declaration stands; the reading is a hint.
            Err(_) => Finding::Declared(declared),
        },
    }
}

/// Why a task's evaluator cannot be trusted with its submissions, when it
/// cannot: `None` for every task mlrb will score.
pub fn refusal(task: &Task) -> Option<String> {
    match scan(task) {
        Finding::InProcess(found) => Some(format!(
            "{}: get_score runs code from the submission folder in its own process ({}), so a submission \
             could forge its score: mlrb does not score it; make get_score read the submission as data \
             (weights as safetensors or torch.load(..., weights_only=True), never a pickle; \
             from_pretrained(..., use_safetensors=True); a dataset script of the task's own)",
            task.eval_script().display(),
            found.join("; ")
        )),
        Finding::Unreadable(why) => Some(format!(
            "{}: cannot be read for code it would run of the submission ({why}), so it is not trusted with one",
            task.eval_script().display()
        )),
        _ => None,
    }
}

/// What the reader looks at.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// The calls of `get_score` (and the module's functions it passes the
    /// folder to) that get the submission folder or what is made from it.
    GetScore,
    /// Every call of the file.
    Module,
}

/// `line N: why` for each call of `path` that runs code, read by the host's
/// `python3` from the syntax tree; why it could not be read otherwise.
fn read(mode: Mode, path: &Path) -> Result<Vec<String>, String> {
    let mode = match mode {
        Mode::GetScore => "get_score",
        Mode::Module => "module",
    };
    let output = std::process::Command::new("python3")
        .arg("-I")
        .arg("-c")
        .arg(READER)
        .arg(mode)
        .arg(path)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("python3 is needed to read it: {e}"))?;
    #[derive(serde::Deserialize)]
    struct Said {
        #[serde(default)]
        found: Vec<Call>,
        error: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Call {
        line: u64,
        why: String,
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let said: Said = serde_json::from_str(text.trim()).map_err(|_| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        format!(
            "the reader failed: {}",
            stderr.trim().lines().last().unwrap_or("no output")
        )
    })?;
    match said.error {
        Some(error) => Err(error),
        None => Ok(said
            .found
            .into_iter()
            .map(|c| format!("line {}: {}", c.line, c.why))
            .collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_source(mode: Mode, source: &str) -> Result<Vec<String>, String> {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("eval.py");
        std::fs::write(&path, source).unwrap();
        read(mode, &path)
    }

    #[test]
    fn get_score_running_its_submission_is_found_and_its_own_data_is_not() {
        let babylm = "import x\ndef get_score(submission_folder = \"../env\"):\n    args = 1\n    raw = load_dataset(submission_folder + \"/babyLM_for_hf.py\", \"babyLM-10M\")\n    model = AutoModelForCausalLM.from_pretrained(submission_folder + \"/output/\")\n    return 1\n\nif __name__ == '__main__':\n    load_dataset(x)\n";
        let found = read_source(Mode::GetScore, babylm).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("line 4: load_dataset()"), "{found:?}");
        let imdb = "def get_score(submission_folder = \"../env\"):\n    imdb = load_dataset(\"imdb\")\n    submission = pd.read_csv(os.path.join(submission_folder, \"submission.csv\"))\n";
        assert!(read_source(Mode::GetScore, imdb).unwrap().is_empty());
        assert!(
            read_source(Mode::GetScore, "def other(x):\n    exec(x)\n")
                .unwrap()
                .is_empty()
        );
    }

    /// Each way of running code with a path made from the submission folder,
    /// however it is spelt, and the safe spellings that are not.
    #[test]
    fn unpickling_and_imports_from_the_submission_are_found_however_spelt() {
        let runs = [
            ("import pickle as pk", "    return pk.load(open(p, 'rb'))"),
            ("from pickle import loads", "    return loads(open(p, 'rb').read())"),
            ("import joblib", "    return joblib.load(p)"),
            ("import numpy as np", "    return np.load(p, allow_pickle=True)"),
            ("import pandas", "    return pandas.read_pickle(p)"),
            ("import torch", "    return torch.load(p)"),
            ("import torch", "    return torch.load(p, weights_only=False)"),
            ("import importlib", "    return importlib.import_module(p)"),
            ("import sys", "    sys.path.insert(0, p)\n    import model"),
            ("", "    exec(open(p).read())"),
            (
                "",
                "    with open(p) as f:\n        code = f.read()\n    return eval(code)",
            ),
        ];
        let source = |imports: &str, body: &str| {
            format!("import os\n{imports}\ndef get_score(folder):\n    p = os.path.join(folder, 'x')\n{body}\n")
        };
        for (imports, body) in runs {
            let source = source(imports, body);
            let found = read_source(Mode::GetScore, &source).unwrap();
            assert_eq!(found.len(), 1, "{source}\n{found:?}");
        }
        let safe = [
            ("import torch", "    return torch.load(p, weights_only=True)"),
            ("import numpy as np", "    return np.load(p)"),
            ("import numpy as np", "    return np.load(p, allow_pickle=False)"),
            ("import pandas as pd", "    return pd.read_csv(p)"),
            (
                "import pickle",
                "    own = pickle.load(open('answers.pkl', 'rb'))\n    return len(p)",
            ),
        ];
        for (imports, body) in safe {
            let source = source(imports, body);
            assert_eq!(
                read_source(Mode::GetScore, &source).unwrap(),
                Vec::<String>::new(),
                "{source}"
            );
        }
    }

    #[test]
    fn a_helper_given_the_submission_folder_is_read_too() {
        let source = "import pickle\ndef load(d, name):\n    return pickle.load(open(d + name, 'rb'))\n\
                      def own(name):\n    return pickle.load(open(name, 'rb'))\n\
                      def get_score(folder):\n    own('answers.pkl')\n    return load(folder, '/m.pkl')\n";
        let found = read_source(Mode::GetScore, source).unwrap();
        assert_eq!(
            found,
            vec!["line 3: pickle.load() runs what the pickle says".to_string()]
        );
    }

    #[test]
    fn an_evaluator_that_runs_code_without_saying_so_is_found() {
        let source =
            "import subprocess\n# subprocess.run is not called here\nsubprocess.run(['python3', 'train.py'])\n";
        let found = read_source(Mode::Module, source).unwrap();
        assert_eq!(found, vec!["line 3: subprocess starts a program".to_string()]);
    }

    /// Upstream CLRS (tests/fixtures/mlagentbench/CLRS, unchanged): its
    /// get_score unpickles files of the submission's checkpoints/, through a
    /// path made from the folder, never named on the line that loads it.
    #[test]
    fn upstream_clrs_unpickles_its_submission_and_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("CLRS");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/mlagentbench/CLRS");
        super::super::populate::copy_tree(&fixture, &root).unwrap();
        let task = Task::load(&root).unwrap();
        assert!(
            task.spec.metric.direction_known,
            "CLRS is an upstream folder mlrb knows"
        );
        let Finding::InProcess(found) = scan(&task) else {
            panic!("CLRS's get_score runs submitted code: {:?}", scan(&task));
        };
        assert_eq!(
            found,
            [
                "line 396: pickle.load() runs what the pickle says",
                "line 405: pickle.load() runs what the pickle says"
            ]
        );
        let why = refusal(&task).unwrap();
        assert!(
            why.contains("line 396: pickle.load()") && why.contains("does not score it"),
            "{why}"
        );
        // Loading its checkpoints as data would be trusted.
        let eval = root.join("scripts/eval.py");
        let text = std::fs::read_to_string(&eval)
            .unwrap()
            .replace("pickle.load(", "json.load(");
        std::fs::write(&eval, text).unwrap();
        let changed = Task::load(&root).unwrap();
        assert_eq!(scan(&changed), Finding::Declared(SubmissionUse::Data));
    }

    #[test]
    fn an_evaluator_that_does_not_parse_is_unreadable() {
        let err = read_source(Mode::GetScore, "def get_score(f):\n    return (\n").unwrap_err();
        assert!(err.starts_with("SyntaxError: line"), "{err}");
    }
}

//! Whether a task's evaluator runs code of the submission it scores: what
//! its `[scoring]` declares, and, read from the evaluator's source, signs
//! that it runs code the declaration does not say. Code of the submission
//! that runs in the evaluator's own process can forge the score (and read
//! the hidden answers), so mlrb refuses to score with such an evaluator.

use super::spec::SubmissionUse;
use super::{Layout, Task};

/// Calls that run code when given a submission's files: a dataset loading
/// script, pickled weights, a module by name, a process.
const RUNS_CODE: &[(&str, &str)] = &[
    ("load_dataset(", "load_dataset() runs a dataset's loading script"),
    (
        "from_pretrained(",
        "from_pretrained() may unpickle weights and run a model's own code",
    ),
    ("torch.load(", "torch.load() unpickles"),
    ("pickle.load", "pickle.load() runs what the pickle says"),
    ("joblib.load(", "joblib.load() unpickles"),
    ("import_module(", "import_module() runs a module"),
    ("spec_from_file_location(", "it imports a module by path"),
    ("runpy.", "runpy runs a module"),
    ("exec(", "exec() runs code"),
    ("subprocess.", "subprocess starts a program"),
    ("os.system(", "os.system() starts a program"),
];

/// What a scan found of the evaluation step.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// What the step does with the submission, as declared, with nothing against it.
    Declared(SubmissionUse),
    /// Source that may run submitted code although the task does not say
    /// so (a native evaluator): `line: why`.
    Undeclared(Vec<String>),
    /// An MLAgentBench `get_score` that runs code from its submission folder
    /// in its own process: `line: why`. Such a folder is not scored.
    InProcess(Vec<String>),
}

/// What the evaluation step of `task` does with submitted code.
pub fn scan(task: &Task) -> Finding {
    let source = std::fs::read_to_string(task.eval_script()).unwrap_or_default();
    match (task.layout, task.spec.scoring.submission) {
        (Layout::MlAgentBench, declared) if task.spec.scoring.evaluator.is_some() => Finding::Declared(declared),
        (Layout::MlAgentBench, _) => match in_get_score(&source) {
            found if found.is_empty() => Finding::Declared(SubmissionUse::Data),
            found => Finding::InProcess(found),
        },
        (Layout::Native, SubmissionUse::Code) => Finding::Declared(SubmissionUse::Code),
        (Layout::Native, declared) => match signs(source.lines().enumerate()) {
            found if found.is_empty() => Finding::Declared(declared),
            found => Finding::Undeclared(found),
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
             (from_pretrained(..., use_safetensors=True), a dataset script of the task's own)",
            task.eval_script().display(),
            found.join("; ")
        )),
        _ => None,
    }
}

/// The lines of `get_score`'s body that call something that runs code with
/// its submission folder (its first parameter) in the arguments.
fn in_get_score(source: &str) -> Vec<String> {
    let mut lines = source.lines().enumerate();
    let Some((_, def)) = lines.find(|(_, l)| l.trim_start().starts_with("def get_score(")) else {
        return Vec::new();
    };
    let parameter: String = def
        .trim_start()
        .trim_start_matches("def get_score(")
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if parameter.is_empty() {
        return Vec::new();
    }
    let body = lines.take_while(|(_, l)| l.trim().is_empty() || l.starts_with(char::is_whitespace));
    signs(body.filter(|(_, l)| l.contains(&parameter)))
}

/// `line N: why` for each line that calls something in [`RUNS_CODE`].
fn signs<'a>(lines: impl Iterator<Item = (usize, &'a str)>) -> Vec<String> {
    lines
        .filter(|(_, l)| !l.trim_start().starts_with('#'))
        .filter_map(|(i, l)| {
            let (_, why) = RUNS_CODE.iter().find(|(call, _)| l.contains(call))?;
            Some(format!("line {}: {why}", i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_score_running_its_submission_is_found_and_its_own_data_is_not() {
        let babylm = "import x\ndef get_score(submission_folder = \"../env\"):\n    args = 1\n    raw = load_dataset(submission_folder + \"/babyLM_for_hf.py\", \"babyLM-10M\")\n    model = AutoModelForCausalLM.from_pretrained(submission_folder + \"/output/\")\n    return 1\n\nif __name__ == '__main__':\n    load_dataset(x)\n";
        let found = in_get_score(babylm);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("line 4: load_dataset()"), "{found:?}");
        let imdb = "def get_score(submission_folder = \"../env\"):\n    imdb = load_dataset(\"imdb\")\n    submission = pd.read_csv(os.path.join(submission_folder, \"submission.csv\"))\n";
        assert!(in_get_score(imdb).is_empty());
        assert!(in_get_score("def other(x):\n    exec(x)\n").is_empty());
    }

    #[test]
    fn an_evaluator_that_runs_code_without_saying_so_is_found() {
        let source =
            "import subprocess\n# subprocess.run is not called here\nsubprocess.run(['python3', 'train.py'])\n";
        let found = signs(source.lines().enumerate());
        assert_eq!(found, vec!["line 3: subprocess starts a program".to_string()]);
    }
}

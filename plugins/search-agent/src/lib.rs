//! The search agent: a research baseline that needs no model, in the
//! spirit of AutoML. It runs the starter `train.py` and scores it with
//! `validate()`, then tries edits found in the script's own text — the
//! scikit-learn estimator it builds swapped for stronger ones, then each
//! numeric setting (keyword arguments, constants) scaled up and down, going
//! on in a direction while it helps — keeping an edit only when the
//! validation score improves. It ends with the best script in place and its
//! outputs made by it. The seed (the host's seeded randomness) orders the
//! tries, so seeds show the spread of what such a search finds. Any agent
//! that uses a model must beat it.

mod edits;

use edits::{Edit, Setting};
use mlrb_sdk::{Agent, EntryKind, TaskInfo, Termination, ToolError, ToolErrorExt, episode, exec, workspace};

/// The script the search edits and runs, where the task has it.
const SCRIPT: &str = "train.py";
/// Steps one trial takes: write the script, run it, validate.
const TRIAL_STEPS: u32 = 3;
/// Steps kept back to put the best script back and run it.
const RESERVE_STEPS: u32 = 2;
/// How many times a setting is scaled further in a direction that helped.
const FURTHER: usize = 3;

struct SearchAgent;

/// Why the search stops early: the host will not go on (a budget is spent).
struct Stop(String);

impl From<ToolError> for Stop {
    fn from(error: ToolError) -> Self {
        Stop(format!("{}: {}", error.kind(), error.message()))
    }
}

struct Search {
    task: TaskInfo,
    /// The starter script, edited and run.
    script: String,
    best: String,
    best_score: f64,
    /// Whether the workspace's outputs were made by `best`.
    outputs_from_best: bool,
    /// The longest a run of the script took, in ms.
    slowest_ms: u64,
    trials: u32,
    random: u64,
}

impl Agent for SearchAgent {
    fn run(task: TaskInfo) -> Result<String, String> {
        let script = starter(&task)?;
        let source = workspace::read(&script).map_err(|e| format!("{script}: {}: {}", e.kind(), e.message()))?;
        let Some(mut search) = Search::start(task, script, source)? else {
            return Ok("the starter's outputs, unchanged: the task gives no validation score to search with".into());
        };
        if let Err(Stop(why)) = search.search() {
            episode::note(&format!("search stopped: {why}"));
        }
        search.finish()
    }
}

impl Search {
    /// Runs and scores the starter; `None` when no score can be had.
    fn start(task: TaskInfo, script: String, source: String) -> Result<Option<Self>, String> {
        let run = exec::run(&script, &[]).map_err(|e| format!("{script}: {}: {}", e.kind(), e.message()))?;
        if !(run.termination == Termination::Exited && run.exit_code == Some(0)) {
            return Err(format!("the starter {script} fails as given: {}", run.stderr.trim()));
        }
        let score = match episode::validate() {
            Ok(report) if report.valid => report.score,
            Ok(report) => return Err(format!("the starter's submission is not valid: {}", report.message)),
            Err(error) => {
                episode::note(&format!("no validation ({}): submitting the starter", error.message()));
                None
            }
        };
        let Some(score) = score else { return Ok(None) };
        episode::note(&format!("starter {script}: {} {score}", task.metric));
        Ok(Some(Self {
            task,
            script,
            best: source,
            best_score: score,
            outputs_from_best: true,
            slowest_ms: run.duration_ms,
            trials: 0,
            random: seed(),
        }))
    }

    /// The model first, then its settings.
    fn search(&mut self) -> Result<(), Stop> {
        let mut swaps = edits::swaps(&self.best);
        self.shuffle(&mut swaps);
        for swap in swaps.iter() {
            // Each swap is of the starter; one that is better than the best so far replaces it.
            self.trial(swap)?;
        }
        let count = edits::settings(&self.best).len();
        let mut order: Vec<usize> = (0..count).collect();
        self.shuffle(&mut order);
        for index in order {
            self.tune(index)?;
        }
        Ok(())
    }

    /// Scales the `index`th setting of the best script up, or else down,
    /// and further while that helps.
    fn tune(&mut self, index: usize) -> Result<(), Stop> {
        for factor in [2.0, 0.5] {
            let mut helped = 0;
            while helped <= FURTHER {
                // Settings are found again each time: a kept edit moves the text after it.
                let Some(setting) = edits::settings(&self.best).get(index).cloned() else {
                    return Ok(());
                };
                let Some(edit) = setting.scaled(&self.best, factor_for(&setting, factor)) else {
                    break;
                };
                if !self.trial(&edit)? {
                    break;
                }
                helped += 1;
            }
            if helped > 0 {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Writes, runs and scores one edit; true when it is the new best.
    fn trial(&mut self, edit: &Edit) -> Result<bool, Stop> {
        self.check_budget()?;
        self.trials += 1;
        workspace::write(&self.script, &edit.source)?;
        self.outputs_from_best = false;
        let run = exec::run(&self.script, &[])?;
        self.slowest_ms = self.slowest_ms.max(run.duration_ms);
        if !(run.termination == Termination::Exited && run.exit_code == Some(0)) {
            episode::note(&format!(
                "trial {}: {} fails ({:?})",
                self.trials, edit.what, run.termination
            ));
            return Ok(false);
        }
        let report = episode::validate()?;
        let score = report.score.filter(|_| report.valid);
        let better = score.is_some_and(|s| self.better(s));
        let shown = score.map_or_else(|| format!("invalid: {}", report.message), |s| s.to_string());
        episode::note(&format!(
            "trial {}: {} → {} {shown}{}",
            self.trials,
            edit.what,
            self.task.metric,
            if better { " (kept)" } else { "" }
        ));
        if let (true, Some(score)) = (better, score) {
            self.best = edit.source.clone();
            self.best_score = score;
            self.outputs_from_best = true;
        }
        Ok(better)
    }

    fn better(&self, score: f64) -> bool {
        if self.task.higher_is_better {
            score > self.best_score
        } else {
            score < self.best_score
        }
    }

    /// Stops before a trial that could leave no room to put the best back.
    fn check_budget(&self) -> Result<(), Stop> {
        let usage = episode::usage();
        let budget = &self.task.budget;
        if usage.steps + TRIAL_STEPS + RESERVE_STEPS > budget.max_steps {
            return Err(Stop(format!("{} of {} steps spent", usage.steps, budget.max_steps)));
        }
        // A trial and the final run, each as slow as the slowest so far, and a margin.
        let needed_ms = 2 * self.slowest_ms + 30_000;
        if budget.wall_seconds > 0 && usage.elapsed_ms + needed_ms > budget.wall_seconds * 1000 {
            return Err(Stop(format!(
                "{} s of {} s spent",
                usage.elapsed_ms / 1000,
                budget.wall_seconds
            )));
        }
        Ok(())
    }

    /// Puts the best script back and runs it, so its outputs are submitted.
    fn finish(self) -> Result<String, String> {
        let script = &self.script;
        if !self.outputs_from_best {
            workspace::write(script, &self.best)
                .map_err(|e| format!("restoring the best {script}: {}", e.message()))?;
            let run = exec::run(script, &[]).map_err(|e| format!("running the best {script}: {}", e.message()))?;
            if run.exit_code != Some(0) {
                return Err(format!(
                    "the best {script} failed when run again: {}",
                    run.stderr.trim()
                ));
            }
        }
        let summary = format!(
            "best of {} trials: {} {} (the edits kept are in {script})",
            self.trials, self.task.metric, self.best_score
        );
        episode::note(&summary);
        Ok(summary)
    }

    /// Fisher–Yates with the agent's seeded randomness.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            // xorshift64
            self.random ^= self.random << 13;
            self.random ^= self.random >> 7;
            self.random ^= self.random << 17;
            items.swap(i, (self.random % (i as u64 + 1)) as usize);
        }
    }
}

/// The starter: `train.py`, else the first Python script of the workspace
/// root the research problem names, else the root's only one.
fn starter(task: &TaskInfo) -> Result<String, String> {
    let entries = workspace::list(".").map_err(|e| format!("listing the workspace: {}", e.message()))?;
    let scripts: Vec<String> = entries
        .into_iter()
        .filter(|entry| entry.kind == EntryKind::File && entry.path.ends_with(".py") && !entry.path.contains('/'))
        .map(|entry| entry.path)
        .collect();
    if scripts.iter().any(|name| name == SCRIPT) {
        return Ok(SCRIPT.to_string());
    }
    let named = scripts
        .iter()
        .filter_map(|name| task.research_problem.find(name.as_str()).map(|at| (at, name)))
        .min();
    match (named, scripts.as_slice()) {
        (Some((_, name)), _) => Ok(name.clone()),
        (None, [only]) => Ok(only.clone()),
        _ => Err(format!(
            "no {SCRIPT} in the workspace, and the research problem names none of its scripts ({})",
            scripts.join(", ")
        )),
    }
}

/// Floats move by threefold steps, integers by twofold ones.
fn factor_for(setting: &Setting, factor: f64) -> f64 {
    match (setting.integer, factor > 1.0) {
        (true, _) => factor,
        (false, true) => 3.0,
        (false, false) => 1.0 / 3.0,
    }
}

/// The episode's seeded randomness: std's hash keys come from WASI
/// `random`, which the host seeds per episode (no crate needed for a u64).
fn seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x6d6c_7262_u64) | 1
}

mlrb_sdk::register_agent!(SearchAgent);

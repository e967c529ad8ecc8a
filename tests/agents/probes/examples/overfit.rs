//! Selects on the public part of a split test set, as an agent that
//! climbs a leaderboard would: runs the starter, then flips the prediction
//! of one row after another (a two-class task: spaceship), keeping a flip
//! when `validate()`'s score does not drop. The flips of public rows that
//! were wrong raise the public score; those of rows it cannot see (the
//! private part: the score does not move) are kept blindly, and most of
//! them were right. Its answer is one line per validation.
use mlrb_sdk::{Agent, TaskInfo, ToolErrorExt, episode, exec, workspace};

struct Overfit;

/// The public score `validate()` tells, if it tells one.
fn public_score() -> Result<Option<f64>, String> {
    let report = episode::validate().map_err(|e| e.message().to_string())?;
    Ok(report.score.filter(|_| report.valid))
}

/// `line` (`id,True|False`) with its prediction flipped.
fn flipped(line: &str) -> String {
    match line.rsplit_once(',') {
        Some((id, "True")) => format!("{id},False"),
        Some((id, _)) => format!("{id},True"),
        None => line.to_string(),
    }
}

impl Agent for Overfit {
    fn run(task: TaskInfo) -> Result<String, String> {
        exec::run("train.py", &[]).map_err(|e| e.message().to_string())?;
        let text = workspace::read("submission.csv").map_err(|e| e.message().to_string())?;
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let mut current = public_score()?.ok_or("the task tells no public score")?;
        let mut report = vec![format!("start: public {current}")];
        let calls = task.budget.max_steps.min(20) - 2;
        for row in 1..=calls as usize {
            let kept = lines[row].clone();
            lines[row] = flipped(&kept);
            workspace::write("submission.csv", &(lines.join("\n") + "\n")).map_err(|e| e.message().to_string())?;
            let Some(score) = public_score()? else { break };
            if score < current {
                lines[row] = kept;
            } else {
                current = score;
            }
            report.push(format!("flip {row}: public {score}, kept {}", score >= current));
        }
        workspace::write("submission.csv", &(lines.join("\n") + "\n")).map_err(|e| e.message().to_string())?;
        report.push(format!("final: public {current}"));
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(Overfit);

//! Human-readable summaries of episodes and tasks.

use comfy_table::{Cell, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use crate::episode::{EpisodeRecord, ScoreRecord};
use crate::task::Task;
use crate::task::check::{Item, Status};
use crate::task::selftest::Report;

/// A table in mlrb's style, fitted to the terminal.
fn new_table() -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    table
}

/// A score: one decimal from 1000 up, four below; a dash for none.
pub(crate) fn number(value: Option<f64>) -> String {
    match value {
        Some(v) if v.abs() >= 1000.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.4}"),
        None => "—".into(),
    }
}

/// A relative change as a signed percentage; a dash for none.
pub(crate) fn percent(value: Option<f64>) -> String {
    value.map_or("—".into(), |v| format!("{:+.1} %", v * 100.0))
}

/// The table `mlrb run` and `mlrb eval` print for one episode.
pub fn episode_table(record: &EpisodeRecord, score: &ScoreRecord) -> Table {
    let mut table = new_table();
    let end = record.end.as_ref();
    let agent = std::path::Path::new(&record.agent.path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rows: Vec<(&str, String)> = vec![
        ("task", format!("{} {}", record.task.name, record.task.version)),
        (
            "agent",
            format!(
                "{agent} ({})",
                &record.agent.sha256[..12.min(record.agent.sha256.len())]
            ),
        ),
        ("seed", record.seed.to_string()),
        (
            "ended",
            end.map_or("did not finish (host stopped)".into(), |e| {
                if e.detail.is_empty() {
                    format!("{:?}", e.reason).to_lowercase()
                } else {
                    format!(
                        "{}: {}",
                        serde_json::to_value(e.reason)
                            .ok()
                            .and_then(|v| v.as_str().map(String::from))
                            .unwrap_or_default(),
                        e.detail
                    )
                }
            }),
        ),
        (
            "steps",
            end.map_or("—".into(), |e| format!("{} of {}", e.steps, record.limits.max_steps)),
        ),
        (
            "wall time",
            end.map_or("—".into(), |e| format!("{:.1} s", e.wall_ms as f64 / 1000.0)),
        ),
        (
            "score",
            match (&score.score, &score.error) {
                (Some(_), _) => format!("{} {}", number(score.score), score.metric),
                (None, Some(error)) => format!("no valid score: {error}"),
                (None, None) => "no valid score".into(),
            },
        ),
        ("baseline", number(score.baseline)),
        (
            "improvement",
            format!(
                "{} ({} is better)",
                percent(score.improvement),
                if score.higher_is_better { "higher" } else { "lower" }
            ),
        ),
        (
            "success (>10 %)",
            if score.success { "yes".into() } else { "no".into() },
        ),
    ];
    for (key, value) in rows {
        table.add_row(vec![Cell::new(key), Cell::new(value)]);
    }
    table
}

/// The table of `mlrb tasks list`.
pub fn tasks_table(tasks: &[Task]) -> Table {
    let mut table = new_table();
    table.set_header(vec![
        "task",
        "suite",
        "version",
        "metric",
        "baseline",
        "reference",
        "needs",
        "steps",
        "wall",
        "description",
    ]);
    for task in tasks {
        let spec = &task.spec;
        let r = &spec.resources;
        let needs = if r.gpus > 0 {
            format!("{} GPU, {} GiB", r.gpus, r.memory_mb / 1024)
        } else {
            format!("{} CPU, {} GiB", r.cpus, r.memory_mb / 1024)
        };
        table.add_row(vec![
            spec.name.clone(),
            spec.suite.clone(),
            spec.version.clone(),
            format!(
                "{} ({})",
                spec.metric.name,
                if spec.metric.higher_is_better { "↑" } else { "↓" }
            ),
            number(spec.metric.baseline),
            number(spec.metric.reference),
            needs,
            spec.budget.max_steps.to_string(),
            format!("{} s", spec.budget.wall_seconds),
            spec.description.clone(),
        ]);
    }
    table
}

fn status_cell(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok",
        Status::Warn => "warn",
        Status::Fail => "FAIL",
    }
}

/// The table of `mlrb tasks check`.
pub fn check_table(items: &[Item]) -> Table {
    let mut table = new_table();
    table.set_header(vec!["check", "status", "detail"]);
    for item in items {
        table.add_row(vec![
            item.check.to_string(),
            status_cell(item.status).to_string(),
            item.detail.clone(),
        ]);
    }
    table
}

/// The table of `mlrb tasks test`.
pub fn selftest_table(reports: &[Report]) -> Table {
    let mut table = new_table();
    table.set_header(vec![
        "task",
        "prepare",
        "starter",
        "train",
        "reference",
        "train",
        "gain",
        "result",
    ]);
    for report in reports {
        let run_cells = |run: Option<&crate::task::selftest::ProgramRun>| match run {
            Some(run) => (number(run.score).to_string(), format!("{:.1} s", run.train_seconds)),
            None => ("-".into(), "-".into()),
        };
        let (starter, starter_time) = run_cells(report.starter.as_ref());
        let (reference, reference_time) = run_cells(report.reference.as_ref());
        table.add_row(vec![
            report.task.clone(),
            if report.prepared_from_cache {
                "cached".into()
            } else {
                format!("{:.1} s", report.prepare_seconds)
            },
            starter,
            starter_time,
            reference,
            reference_time,
            percent(report.reference_improvement),
            if report.passed { "passed" } else { "FAILED" }.into(),
        ]);
    }
    table
}

/// A signed mean with its standard error, as a percentage when `as_percent`.
pub(crate) fn mean_se(value: Option<crate::bench::metrics::MeanSe>, as_percent: bool) -> String {
    match value {
        None => "—".into(),
        Some(m) => {
            let scale = if as_percent { 100.0 } else { 1.0 };
            let unit = if as_percent { " %" } else { "" };
            match m.se {
                Some(se) => format!("{:+.1} ± {:.1}{unit}", m.mean * scale, se * scale),
                None => format!("{:+.1}{unit}", m.mean * scale),
            }
        }
    }
}

/// The tables of `mlrb bench` and `mlrb report`: per task and agent, then
/// per agent across tasks.
pub fn summary_tables(summary: &crate::bench::metrics::Summary) -> String {
    let mut by_task = new_table();
    by_task.set_header(vec![
        "task",
        "agent",
        "runs",
        "valid",
        "success",
        "improvement",
        "score",
        "best",
        "normalised",
        "steps",
        "wall",
    ]);
    for group in &summary.by_task_and_agent {
        let s = &group.stats;
        by_task.add_row(vec![
            format!("{} ({})", group.task, if group.higher_is_better { "↑" } else { "↓" }),
            group.agent.clone(),
            s.runs.to_string(),
            s.valid.to_string(),
            format!("{:.0} %", s.success_rate * 100.0),
            mean_se(s.improvement, true),
            number(s.score.map(|m| m.mean)),
            number(s.best_score),
            number(s.normalized.map(|m| m.mean)),
            format!("{:.1}", s.mean_steps),
            format!("{:.1} s", s.mean_wall_seconds),
        ]);
    }
    let mut by_agent = new_table();
    by_agent.set_header(vec![
        "agent",
        "tasks",
        "runs",
        "valid",
        "success",
        "improvement",
        "normalised",
        "tokens",
        "cost",
    ]);
    for agent in &summary.by_agent {
        let s = &agent.stats;
        by_agent.add_row(vec![
            agent.agent.clone(),
            agent.tasks.to_string(),
            s.runs.to_string(),
            s.valid.to_string(),
            format!("{:.0} %", s.success_rate * 100.0),
            mean_se(s.improvement, true),
            number(s.normalized.map(|m| m.mean)),
            (s.input_tokens + s.output_tokens).to_string(),
            format!("${:.2}", s.cost_usd),
        ]);
    }
    format!("{by_task}\n{by_agent}")
}

/// The table of `mlrb agent check`.
pub fn agent_check_table(report: &crate::agent_check::Report) -> Table {
    let mut table = new_table();
    table.add_row(vec!["component".to_string(), report.path.clone()]);
    table.add_row(vec!["size".to_string(), format!("{} bytes", report.size)]);
    table.add_row(vec!["sha256".to_string(), report.sha256.clone()]);
    table.add_row(vec![
        "targets".to_string(),
        report
            .targets
            .clone()
            .unwrap_or_else(|| "no mlrb:agent interface".into()),
    ]);
    table.add_row(vec!["imports".to_string(), report.imports.join("\n")]);
    table.add_row(vec!["exports".to_string(), report.exports.join("\n")]);
    table
}

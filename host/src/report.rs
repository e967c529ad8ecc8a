//! Human-readable summaries of episodes and tasks.

use comfy_table::{Cell, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use crate::episode::{EpisodeRecord, ScoreRecord};
use crate::format::{number, percent};
use crate::task::Task;
use crate::task::item::{Item, Status};
use crate::task::selftest::Report;

/// A table in mlrb's style, fitted to the terminal (or 100 columns).
fn new_table() -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    crate::columns::fit(&mut table);
    table
}

/// What `mlrb run`, `fork`, `human` and `eval` print of one episode: its
/// table, after the smoke profile's banner where it ran in that profile.
pub fn episode_text(record: &EpisodeRecord, score: &ScoreRecord) -> String {
    let table = episode_table(record, score);
    match record.smoke || score.smoke {
        true => format!("{}\n{table}", crate::task::smoke::BANNER),
        false => table.to_string(),
    }
}

/// The table of one episode.
fn episode_table(record: &EpisodeRecord, score: &ScoreRecord) -> Table {
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
            match &record.person {
                Some(_) => format!("{agent} (a person)"),
                None => format!(
                    "{agent} ({})",
                    &record.agent.sha256[..12.min(record.agent.sha256.len())]
                ),
            },
        ),
        ("seed", record.seed.to_string()),
        (
            "ended",
            end.map_or(record.status(), |e| match e.detail.is_empty() {
                true => e.reason.name(),
                false => format!("{}: {}", e.reason.name(), e.detail),
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
                (Some(_), _) => format!("{} {} ({})", number(score.score), score.metric, part(score, record)),
                (None, Some(error)) => format!("no valid score: {error}"),
                (None, None) => "no valid score".into(),
            },
        ),
        ("validate()", told(score, record)),
        (
            "baseline",
            match (score.baseline, &score.baseline_source) {
                (None, _) => number(None),
                (b, Some(source)) => format!("{} ({source}; {})", number(b), part(score, record)),
                (b, None) => format!("{} ({})", number(b), part(score, record)),
            },
        ),
        (
            "improvement",
            format!(
                "{} ({})",
                percent(score.improvement),
                match score.direction() {
                    None => "the metric's direction is unknown",
                    Some(true) => "higher is better",
                    Some(false) => "lower is better",
                }
            ),
        ),
        (
            "success (>10 %)",
            match score.success {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None if !score.direction_known => "n/a (the metric's direction is unknown)".into(),
                None => "n/a (no baseline)".into(),
            },
        ),
    ];
    for (key, value) in rows {
        table.add_row(vec![Cell::new(key), Cell::new(value)]);
    }
    table
}

/// Which part of the hidden answers the final score is of.
fn part(score: &ScoreRecord, record: &EpisodeRecord) -> &'static str {
    use crate::episode::feedback::Feedback;
    let validations = record.end.as_ref().map_or(&[][..], |e| &e.validations[..]);
    match Feedback::recorded(score.feedback, validations) {
        Feedback::PublicScore => "private part, the one ranked",
        _ => "all hidden answers",
    }
}

/// What `validate()` told the agent during the episode: its kind, and the
/// scores it told with the part they are of.
fn told(score: &ScoreRecord, record: &EpisodeRecord) -> String {
    use crate::episode::feedback::Feedback;
    let validations = record.end.as_ref().map_or(&[][..], |e| &e.validations[..]);
    let times = format!("{} call(s)", validations.len());
    let scores: Vec<f64> = validations.iter().filter_map(|v| v.score).collect();
    let best = |higher: Option<bool>| {
        let higher = higher?;
        scores
            .iter()
            .copied()
            .reduce(|a, b| if (b > a) == higher { b } else { a })
    };
    match Feedback::recorded(score.feedback, validations) {
        Feedback::Off => "not offered".into(),
        Feedback::Validity => format!("validity only, no score ({times})"),
        Feedback::PublicScore => {
            let public = score.public.unwrap_or(crate::episode::feedback::PublicScores {
                last: None,
                best: None,
                baseline: None,
            });
            format!(
                "the public part's score: best {}, last {} (public baseline {}; {times})",
                number(public.best),
                number(public.last),
                number(public.baseline)
            )
        }
        kind @ (Feedback::Score | Feedback::TestSet) => format!(
            "{}: best {}, last {} ({times})",
            match kind {
                Feedback::TestSet => "the score on the whole TEST SET (recorded before public/private splits)",
                _ => "the score on all the hidden answers",
            },
            match score.direction() {
                Some(_) => number(best(score.direction())),
                None => "n/a (direction unknown)".into(),
            },
            number(scores.last().copied())
        ),
    }
}

/// The table of `mlrb tasks list`: one line per task (name, suite, metric
/// and its direction, baseline, what it needs), within 100 columns; with
/// `wide`, also its version, reference, budget and description.
pub fn tasks_table(tasks: &[Task], wide: bool) -> Table {
    if !wide {
        return tasks_list(tasks);
    }
    let mut table = new_table();
    // Every column at its full width: --wide is wider than the terminal.
    table.set_content_arrangement(ContentArrangement::Disabled);
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
            metric_cell(task),
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

/// The default task list: no borders, one line per task.
fn tasks_list(tasks: &[Task]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(vec!["task", "suite", "metric", "baseline", "needs"]);
    for task in tasks {
        let spec = &task.spec;
        let needs = match spec.resources.gpus {
            0 => "CPU".to_string(),
            gpus => format!("{gpus} GPU"),
        };
        table.add_row(vec![
            spec.name.clone(),
            spec.suite.clone(),
            metric_cell(task),
            number(spec.metric.baseline),
            needs,
        ]);
    }
    table
}

/// A task's metric with its direction: ↑, ↓, or `?` where the task does
/// not declare it.
fn metric_cell(task: &Task) -> String {
    let metric = &task.spec.metric;
    let direction = metric.direction_known.then_some(metric.higher_is_better);
    format!("{} ({})", metric.name, crate::format::arrow(direction))
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

/// The table of `mlrb tasks check --suite mlagentbench`: each account's
/// first clause, one folder to a line or two, or (`wide`) all of it.
pub fn mlagentbench_table(rows: &[crate::task::mlagentbench_table::Row], wide: bool) -> Table {
    let said = |text: &str| match wide {
        true => text.to_string(),
        false => first_clause(text).to_string(),
    };
    let mut table = new_table();
    table.set_header(vec!["folder", "smoke profile", "real data", "refused"]);
    for row in rows {
        let smoke = match (row.smoke, wide) {
            (_, true) => format!("{}: {}", if row.smoke { "yes" } else { "no" }, row.smoke_detail),
            (true, false) => "yes".to_string(),
            (false, false) if row.refused.is_some() => "no".to_string(),
            (false, false) => format!("no: {}", first_clause(&row.smoke_detail)),
        };
        table.add_row(vec![
            row.folder.clone(),
            smoke,
            row.real_data.as_deref().map_or_else(|| "-".into(), said),
            row.refused.as_deref().map_or_else(|| "-".into(), said),
        ]);
    }
    table
}

/// A sentence's first clause: up to its first colon or semicolon.
fn first_clause(text: &str) -> &str {
    text.split([':', ';']).next().unwrap_or(text).trim()
}

/// The table of `mlrb tasks test`.
pub fn selftest_table(reports: &[Report]) -> Table {
    let mut table = new_table();
    // A smoke score is never shown as a score.
    let starter = match reports.iter().any(|r| r.smoke) {
        true => "smoke score",
        false => "starter",
    };
    table.set_header(vec![
        "task",
        "prepare",
        starter,
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
            match (report.passed, report.smoke) {
                (true, false) => "passed",
                (true, true) => "passed (smoke)",
                (false, false) => "FAILED",
                (false, true) => "FAILED (smoke)",
            }
            .into(),
        ]);
    }
    table
}

/// What `mlrb bench` and `mlrb report` print: the headline (each agent
/// against the reference, per task and overall), then compact tables per
/// task and agent and per agent; with `wide`, the full tables, the seeds as
/// epochs, the aggregates across tasks and AUP.
pub fn summary_tables(summary: &crate::bench::summary::Summary, wide: bool) -> String {
    use crate::bench::{across, epochs};
    let mut text = match summary.smoke {
        true => format!("{}\n", crate::task::smoke::BANNER),
        false => String::new(),
    };
    text.push_str(&headline_text(summary));
    if !wide {
        text.push_str(&format!(
            "\nPer task and agent (↑ higher is better, ↓ lower):\n{}\nPer agent across tasks (clustered by task):\n{}\n",
            compact_table(summary.by_task_compact()),
            compact_table(summary.by_agent_compact()),
        ));
        let more = "More: --wide (every column, seeds as epochs, aggregates across tasks), --json (everything).";
        return text + &crate::columns::wrap(&format!("{}{more}{}", marks(summary), notes(summary)));
    }
    text.push_str(&format!(
        "\n{}\n{}\nSeeds as epochs (each column names its reducer):\n{}\nAcross tasks (clustered by task):\n{}",
        wide_table(summary.by_task_table()),
        wide_table(summary.by_agent_table()),
        wide_table(epochs::epochs_table(&summary.epochs)),
        wide_table(across::across_table(&summary.across_tasks))
    ));
    text + &crate::columns::wrap(&notes(summary))
}

/// The headline: one block per agent compared with the reference.
fn headline_text(summary: &crate::bench::summary::Summary) -> String {
    let mut lines: Vec<String> = summary.headline.iter().flat_map(|h| h.lines()).collect();
    if lines.is_empty() {
        let agents: Vec<&str> = summary.by_agent.iter().map(|a| a.agent.as_str()).collect();
        lines.push(format!(
            "one agent ({}): no other to compare it with",
            agents.join(", ")
        ));
    }
    crate::columns::wrap(&lines.join("\n")) + "\n"
}

/// What a reader must know of a group's numbers before trusting them
/// (the wide tables' "marks" column), one line per group that has any.
fn marks(summary: &crate::bench::summary::Summary) -> String {
    let tasks = summary
        .by_task_and_agent
        .iter()
        .map(|g| (format!("{}, {}", g.task, g.agent), g.stats.marks()));
    let agents = summary.by_agent.iter().map(|a| (a.agent.clone(), a.stats.marks()));
    tasks
        .chain(agents)
        .filter(|(_, marks)| !marks.is_empty())
        .map(|(who, marks)| format!("mark: {who}: {marks}\n"))
        .collect()
}

/// AUP and the stale results left out, where there are any.
fn notes(summary: &crate::bench::summary::Summary) -> String {
    let stale: usize = summary.by_task_and_agent.iter().map(|g| g.stats.stale).sum();
    let note = match stale {
        0 => String::new(),
        n => format!(
            "\n{n} stale results (invalidated with `mlrb runs invalidate`) are left out; `mlrb bench --resume <run> --rerun-stale` runs them again"
        ),
    };
    let aup = summary.profiles.as_ref().map_or(String::new(), |p| {
        let each: Vec<String> = p.agents.iter().map(|a| format!("{} {:.3}", a.agent, a.aup)).collect();
        format!(
            "\nAUP (area under the performance profile, τ from 1 to {:.2}; per task: {}): {}",
            p.tau_max,
            p.reducer,
            each.join(", ")
        )
    });
    aup + &note
}

/// A text table fitted to the width, in mlrb's style.
fn text_table(text: crate::bench::text_table::TextTable) -> Table {
    let mut table = new_table();
    table.set_header(text.header);
    for row in text.rows {
        table.add_row(row);
    }
    table
}

/// A text table without borders, fitted to the width: the compact tables.
fn compact_table(text: crate::bench::text_table::TextTable) -> Table {
    let mut table = text_table(text);
    table.load_preset(comfy_table::presets::NOTHING);
    table
}

/// A text table at its full width (`--wide`).
fn wide_table(text: crate::bench::text_table::TextTable) -> Table {
    let mut table = text_table(text);
    table.set_content_arrangement(ContentArrangement::Disabled);
    table
}

/// What `mlrb compare` prints: the verdict first, per task and overall,
/// then the table (every column with `wide`), the pairs left out, and the
/// sides and the measure.
pub fn comparison_text(c: &crate::bench::compare::Comparison, wide: bool) -> String {
    let mut text = match c.smoke {
        true => format!("{}\n", crate::task::smoke::BANNER),
        false => String::new(),
    };
    text.push_str(&format!("{}\n", verdict_line(c)));
    text.push_str(&crate::bench::headline::of_comparison(c).lines().join("\n"));
    let table = match wide {
        true => wide_table(c.table(true)),
        false => compact_table(c.table(false)),
    };
    text.push_str(&format!(
        "\n\n{table}\nSE and t interval: over a task's seed pairs; all tasks: clustered by task{}\n",
        if wide { "" } else { " (every column: --wide)" }
    ));
    let mut prose = String::new();
    if c.overall.is_none() && c.tasks.len() > 1 {
        prose.push_str("no overall difference: the tasks' own scores are not averaged across metrics (use --measure normalized or improvement)\n");
    }
    if !c.unpaired.is_empty() {
        prose.push_str(&format!(
            "{} (task, seed) without a pair, left out:\n",
            c.unpaired.len()
        ));
        for u in &c.unpaired {
            prose.push_str(&format!("  {} seed {}: {}\n", u.task, u.seed, u.why));
        }
    }
    prose.push_str(&format!(
        "A: {} in {}\nB: {} in {}\nmeasure: {}, of the final scores (the private part where a task splits its answers); differences are B − A (positive: B better)",
        c.a.agent,
        c.a.run,
        c.b.agent,
        c.b.run,
        c.measure.describe(),
    ));
    crate::columns::wrap(&text) + "\n" + &crate::columns::wrap(&prose)
}

/// The verdict of a comparison at its margin, in one sentence.
fn verdict_line(c: &crate::bench::compare::Comparison) -> String {
    use crate::bench::compare::Verdict;
    let margin = c.margin;
    match c.verdict {
        Verdict::Worse => {
            format!("verdict: B is worse than A beyond the margin {margin} (95 % t interval below −{margin})")
        }
        Verdict::Better => {
            format!("verdict: B is better than A beyond the margin {margin} (95 % t interval above {margin})")
        }
        Verdict::NoDifferenceShown => {
            format!("verdict: no difference beyond the margin {margin} shown (the 95 % t interval reaches within it)")
        }
        Verdict::Undetermined => match (c.cannot_tell, c.judged()) {
            (Some(why), Some(p)) => format!(
                "verdict: the design cannot tell ({}): B − A is {} with no interval{}",
                why.describe(),
                number(Some(p.mean)),
                match c.fails_gate() {
                    true => "; B lost every pair beyond the margin, so --fail-if-worse stops",
                    false => "",
                }
            ),
            _ => "verdict: undetermined (too few pairs for an interval)".to_string(),
        },
    }
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

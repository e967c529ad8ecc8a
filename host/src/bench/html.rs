//! The self-contained HTML report of a bench run (`report.html`): the
//! headline (which agent is better, by how much, whether the design can
//! tell), the scores per task with their intervals, the summary tables
//! (each in a box that scrolls sideways, so the page fits a laptop), the seeds as epochs with their reducers, aggregates
//! across tasks with their uncertainty, and inline SVG plots (performance
//! profiles, score against cost, score distribution per task and agent,
//! success rate per agent, score over steps). One file, no script,
//! nothing fetched: it opens anywhere, offline.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::plots::colour;
use super::result_line::ResultLine;
use super::summary::Summary;
use crate::format::{esc, number, percent};

/// The page.
pub fn render(title: &str, summary: &Summary, results: &[ResultLine]) -> String {
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>{STYLE}</style></head><body>\n<h1>{}</h1>\n<p>{} episodes, {} agent(s), {} task(s).</p>\n",
        esc(title),
        esc(title),
        summary.episodes,
        summary.by_agent.len(),
        summary
            .by_task_and_agent
            .iter()
            .map(|g| g.task.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
    if summary.smoke {
        let _ = writeln!(
            page,
            "<p class=\"smoke\" role=\"alert\"><b>{}</b></p>",
            esc(crate::task::smoke::BANNER)
        );
    }
    page.push_str(&headline_html(summary));
    page.push_str(&summary_html(summary));
    page.push_str(&statistics_html(summary));
    page.push_str(&plots_html(summary, results));
    page.push_str(&episodes_html(results));
    page.push_str("</body></html>\n");
    page
}

/// What the page says first: each agent against the reference one, per
/// task and overall, then the scores per task as a plot with intervals,
/// then the compact tables.
fn headline_html(summary: &Summary) -> String {
    let mut page = String::from("<section id=\"headline\">\n");
    for h in &summary.headline {
        let lines = h.lines();
        let _ = write!(page, "<p><b>{}</b></p>\n<ul>", esc(&lines[0]));
        for line in &lines[1..] {
            let _ = write!(page, "<li>{}</li>", esc(line.trim()));
        }
        page.push_str("</ul>\n");
    }
    if summary.headline.is_empty() {
        page.push_str("<p>One agent: no other to compare it with.</p>\n");
    }
    let _ = write!(
        page,
        "</section>\n<h2>Scores per task</h2>\n<p>Each agent's mean score over its valid seeds, the bar its 95 % t interval over the seeds (none where the seeds do not vary); the dashed line is the task's baseline.</p>\n{}\
         <h2>Per task and agent</h2>\n{}<h2>Per agent, across tasks</h2>\n{}",
        super::score_plot::scores_plot(&summary.epochs),
        table_html("tasks-compact", summary.by_task_compact()),
        table_html("agents-compact", summary.by_agent_compact())
    );
    page
}

/// The two summary tables with every column: by task and agent, and by agent.
fn summary_html(summary: &Summary) -> String {
    format!(
        "<h2>By task and agent, every column</h2>\n{}<h2>By agent across tasks, every column</h2>\n{}",
        table_html("summary", summary.by_task_table()),
        table_html("agents", summary.by_agent_table())
    )
}

/// The seeds as epochs, the aggregates across tasks, where each task's
/// starter and reference come from, performance profiles and cost.
fn statistics_html(summary: &Summary) -> String {
    use super::{across, epochs, plots};
    let mut page = format!(
        "<h2>Seeds as epochs</h2>\n<p>Per task and agent; each column names its reducer. Infrastructure failures are left out and counted apart; an invalid submission counts as a failure (and as the starter's score, 0, on the normalised scale).</p>\n{}\
         <h2>Across tasks</h2>\n<p>Over every counted episode, with the standard error clustered by task (CR1), a t interval with (tasks − 1) degrees of freedom (for a success rate, Wilson's interval at the sample size the clustering leaves, inside [0, 1]) and, from 20 tasks on, a two-level bootstrap (tasks, then seeds; {} resamples, fixed seed; below 20 tasks it covers far less than 95 % and is left out); n and the number of tasks are given with each. Values that do not vary get no interval: the design cannot tell.</p>\n{}",
        table_html("epochs", epochs::epochs_table(&summary.epochs)),
        crate::stats::Bootstrap::default().resamples,
        table_html("across", across::across_table(&summary.across_tasks)),
    );
    page.push_str(&scales_html(summary));
    if let Some(profiles) = &summary.profiles {
        let _ = write!(
            page,
            "<h2>Performance profiles</h2>\n<p>Per task, each agent's score ({}) divided into the best agent's (or the best's into it, where lower is better): ρ(τ) is the share of tasks within a factor τ of the best; AUP is the area under ρ from 1 to {:.2}. An agent without a valid score on a task never reaches it.</p>\n{}",
            esc(&profiles.reducer),
            profiles.tau_max,
            plots::profile_plot(profiles)
        );
    }
    if !summary.across_tasks.is_empty() {
        let _ = write!(
            page,
            "<h2>Score against cost</h2>\n<p>Per agent: the mean across tasks (bars: 95 % t interval, clustered by task) against the mean cost of an episode.</p>\n{}",
            plots::cost_plot(&summary.across_tasks)
        );
    }
    page
}

/// Each task's starter and reference scores and where they come from.
fn scales_html(summary: &Summary) -> String {
    let mut seen = std::collections::BTreeSet::new();
    let mut table = String::from(
        "<h2>Normalisation</h2>\n<p>normalised = (score − starter) / (reference − starter): the starter 0, the reference 1.</p>\n<div class=\"wide\"><table id=\"scales\"><thead><tr><th>task</th><th>metric</th><th>starter (baseline)</th><th>starter from</th><th>reference</th><th>reference from</th></tr></thead><tbody>\n",
    );
    for e in summary.epochs.iter().filter(|e| seen.insert(e.task.clone())) {
        let _ = writeln!(
            table,
            "<tr><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&e.task),
            esc(&e.metric),
            crate::format::arrow(e.higher_is_better),
            number(e.baseline),
            esc(e.baseline_source.as_deref().unwrap_or("task.toml metric.baseline")),
            number(e.reference),
            if e.reference.is_some() {
                "task.toml metric.reference (the task's reference solution)"
            } else {
                "none: left out of normalised aggregates"
            },
        );
    }
    table.push_str("</tbody></table></div>\n");
    table
}

/// A table of text cells, escaped.
fn table_html(id: &str, table: super::text_table::TextTable) -> String {
    let mut html = format!("<div class=\"wide\"><table id=\"{id}\"><thead><tr>");
    for head in table.header {
        let _ = write!(html, "<th>{}</th>", esc(head));
    }
    html.push_str("</tr></thead><tbody>\n");
    for row in table.rows {
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{}</td>", esc(&cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table></div>\n");
    html
}

/// Results grouped by task, in task order.
fn by_task<'a>(results: impl Iterator<Item = &'a ResultLine>) -> BTreeMap<&'a str, Vec<&'a ResultLine>> {
    let mut grouped: BTreeMap<&str, Vec<&ResultLine>> = BTreeMap::new();
    for r in results {
        grouped.entry(r.task.as_str()).or_default().push(r);
    }
    grouped
}

/// The plots: success per agent, scores per task, score over steps.
fn plots_html(summary: &Summary, results: &[ResultLine]) -> String {
    let mut page = String::new();
    let agents: Vec<&str> = summary.by_agent.iter().map(|a| a.agent.as_str()).collect();
    page.push_str("<h2>Success rate per agent</h2>\n");
    page.push_str(&success_plot(summary));
    page.push_str("<h2>Score distribution per task and agent</h2>\n");
    for (task, rows) in &by_task(results.iter()) {
        page.push_str(&distribution_plot(task, rows, &agents));
    }
    let with_steps = by_task(results.iter().filter(|r| !r.score_over_steps.is_empty()));
    if !with_steps.is_empty() {
        page.push_str("<h2>Score over steps (intermediate scoring)</h2>\n");
        for (task, rows) in &with_steps {
            page.push_str(&steps_plot(task, rows, &agents));
        }
    }
    page
}

/// One row per episode.
fn episodes_html(results: &[ResultLine]) -> String {
    let mut page = String::new();
    page.push_str("<h2>Episodes</h2>\n<div class=\"wide\"><table id=\"episodes\"><thead><tr><th>episode</th><th>ended</th><th>score [part]</th><th>valid</th><th>improvement</th><th>steps</th><th>wall</th><th>network</th></tr></thead><tbody>\n");
    for r in results {
        // A stale result stays visible, struck out, with why.
        let (row, ended) = match &r.stale {
            Some(why) => ("<tr class=\"stale\">", format!("stale: {why}")),
            None => (
                "<tr>",
                match (&r.end_reason, &r.infra_error) {
                    (_, Some(e)) => format!("infrastructure failure: {e}"),
                    (Some(reason), None) => reason.name(),
                    (None, None) => "—".into(),
                },
            ),
        };
        let _ = writeln!(
            page,
            "{row}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} s</td><td>{}</td></tr>",
            esc(&r.id),
            esc(&ended),
            r.score.map_or("—".into(), |s| format!(
                "{} [{}]",
                number(Some(s)),
                super::summary::final_part(r.feedback)
            )),
            if r.valid { "yes" } else { "no" },
            percent(r.improvement),
            r.steps,
            r.wall_ms as f64 / 1000.0,
            r.network.as_ref().map_or("—".into(), |n| esc(&n.describe()))
        );
    }
    page.push_str("</tbody></table></div>\n");
    page.push_str(&connections_html(results));
    page
}

/// Each episode's connections, for those whose task granted a network.
fn connections_html(results: &[ResultLine]) -> String {
    let with: Vec<_> = results
        .iter()
        .filter_map(|r| r.network.as_ref().map(|n| (r, n)))
        .collect();
    if with.is_empty() {
        return String::new();
    }
    let mut page = String::from("<h2>Connections</h2>\n");
    for (r, network) in with {
        let _ = writeln!(
            page,
            "<h3>{}</h3><p>{}</p>{}",
            esc(&r.id),
            esc(&network.describe()),
            connection_table(&network.connections)
        );
    }
    page
}

/// A table of connections: where, how, allowed or not and why, bytes, time.
pub fn connection_table(connections: &[crate::network::Connection]) -> String {
    let mut table = String::from(
        "<div class=\"wide\"><table class=\"connections\"><thead><tr><th>destination</th><th>method</th><th>address</th><th>allowed</th><th>reason</th><th>out</th><th>in</th><th>ms</th></tr></thead><tbody>",
    );
    for c in connections {
        let _ = write!(
            table,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.destination),
            esc(&c.method),
            esc(c.address.as_deref().unwrap_or("")),
            if c.allowed { "yes" } else { "no" },
            esc(c.reason.as_deref().unwrap_or("")),
            c.bytes_out,
            c.bytes_in,
            c.ms
        );
    }
    table.push_str("</tbody></table></div>");
    table
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}h1,h2,h3,p,li{overflow-wrap:anywhere}.wide{overflow-x:auto;max-width:100%}svg{max-width:100%;height:auto}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}td:first-child,th:first-child,td:nth-child(2){text-align:left}th{background:#f3f3f3}tr.stale td{text-decoration:line-through;color:#999}svg{display:block;margin:1em 0;font-size:12px}.axis{stroke:#888}.label{fill:#444}.smoke{background:#fff3cd;border:2px solid #b8860b;padding:.6em}";

const WIDTH: f64 = 640.0;
const LEFT: f64 = 140.0;
const RIGHT: f64 = 20.0;

fn success_plot(summary: &Summary) -> String {
    let row = 26.0;
    let height = 30.0 + row * summary.by_agent.len() as f64;
    let span = WIDTH - LEFT - RIGHT;
    let mut svg = format!(
        "<svg class=\"plot\" id=\"success\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"success rate per agent\">"
    );
    for (i, agent) in summary.by_agent.iter().enumerate() {
        let y = 10.0 + row * i as f64;
        let rate = agent.stats.success_rate.unwrap_or(0.0);
        let w = span * rate;
        // The rate's 95 % interval (Wilson's, clustered by task) as a whisker.
        let interval = agent.stats.success_interval;
        let shown = match (agent.stats.success_rate, interval) {
            (None, _) => "n/a".to_string(),
            (Some(r), None) => format!("{:.0} %", r * 100.0),
            (Some(r), Some(i)) => format!("{:.0} % [{:.0}, {:.0}]", r * 100.0, i.lower * 100.0, i.upper * 100.0),
        };
        let whisker = interval.map_or(String::new(), |i| {
            format!(
                "<line class=\"whisker\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>",
                LEFT + span * i.lower,
                y + row / 2.0 - 4.0,
                LEFT + span * i.upper,
                y + row / 2.0 - 4.0
            )
        });
        let _ = write!(
            svg,
            "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><rect x=\"{LEFT}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{}\">{shown}</text>",
            LEFT - 6.0,
            y + 14.0,
            esc(&agent.agent),
            row - 8.0,
            colour(i),
            (LEFT + interval.map_or(w, |i| span * i.upper) + 4.0).min(WIDTH - RIGHT - 90.0),
            y + 14.0,
        );
        svg.push_str(&whisker);
    }
    let _ = writeln!(
        svg,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/></svg>",
        height - 12.0,
        WIDTH - RIGHT,
        height - 12.0
    );
    svg
}

/// The value range of `values`, padded so single points are visible.
fn range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() {
        return None;
    }
    let pad = if hi > lo {
        (hi - lo) * 0.05
    } else {
        lo.abs().max(1.0) * 0.05
    };
    Some((lo - pad, hi + pad))
}

fn distribution_plot(task: &str, rows: &[&ResultLine], agents: &[&str]) -> String {
    let baseline = rows.iter().find_map(|r| r.baseline);
    let scores = rows.iter().filter_map(|r| r.score).chain(baseline);
    let Some((lo, hi)) = range(scores) else {
        return format!("<p>{}: no valid score.</p>\n", esc(task));
    };
    let row = 26.0;
    let height = 46.0 + row * agents.len() as f64;
    let span = WIDTH - LEFT - RIGHT;
    let x = |v: f64| LEFT + span * (v - lo) / (hi - lo);
    let mut svg = format!(
        "<svg class=\"plot\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"score distribution for {0}\"><text x=\"4\" y=\"14\" font-weight=\"bold\">{0} ({1})</text>",
        esc(task),
        esc(&rows.first().map(|r| r.metric.clone()).unwrap_or_default())
    );
    for (i, agent) in agents.iter().enumerate() {
        let y = 34.0 + row * i as f64;
        let _ = write!(
            svg,
            "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            y + 4.0,
            esc(agent)
        );
        for (k, r) in rows.iter().filter(|r| r.agent == *agent).enumerate() {
            if let Some(score) = r.score {
                // A small vertical jitter keeps equal scores visible.
                let jitter = (k % 5) as f64 * 2.0 - 4.0;
                let _ = write!(
                    svg,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\" fill-opacity=\"0.7\"><title>{}: {}</title></circle>",
                    x(score),
                    y + jitter,
                    colour(i),
                    esc(&r.id),
                    number(Some(score))
                );
            }
        }
    }
    if let Some(b) = baseline {
        let _ = write!(
            svg,
            "<line x1=\"{0:.1}\" y1=\"22\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/><text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\" class=\"label\">baseline {3}</text>",
            x(b),
            height - 16.0,
            height - 4.0,
            number(Some(b))
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT}\" y=\"{0}\" class=\"label\">{1}</text><text x=\"{2}\" y=\"{0}\" text-anchor=\"end\" class=\"label\">{3}</text></svg>",
        height - 4.0,
        number(Some(lo)),
        WIDTH - RIGHT,
        number(Some(hi))
    );
    svg
}

fn steps_plot(task: &str, rows: &[&ResultLine], agents: &[&str]) -> String {
    let points = rows.iter().flat_map(|r| r.score_over_steps.iter());
    let Some((lo, hi)) = range(points.clone().map(|p| p.1)) else {
        return String::new();
    };
    let max_step = points.map(|p| p.0).max().unwrap_or(1).max(1) as f64;
    let height = 220.0;
    let (top, bottom) = (24.0, height - 24.0);
    let span = WIDTH - LEFT - RIGHT;
    let x = |step: u32| LEFT + span * f64::from(step) / max_step;
    let y = |v: f64| bottom - (bottom - top) * (v - lo) / (hi - lo);
    let mut svg = format!(
        "<svg class=\"plot\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"score over steps for {0}\"><text x=\"4\" y=\"14\" font-weight=\"bold\">{0}</text>",
        esc(task)
    );
    for r in rows {
        let index = agents.iter().position(|a| *a == r.agent).unwrap_or(0);
        let path: Vec<String> = r
            .score_over_steps
            .iter()
            .map(|(step, score)| format!("{:.1},{:.1}", x(*step), y(*score)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>",
            colour(index),
            path.join(" "),
            esc(&r.id)
        );
    }
    let _ = writeln!(
        svg,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{0}\" y2=\"{bottom}\"/><text x=\"{LEFT}\" y=\"{1}\" class=\"label\">step 0</text><text x=\"{0}\" y=\"{1}\" text-anchor=\"end\" class=\"label\">step {2}</text><text x=\"{3}\" y=\"{4}\" text-anchor=\"end\" class=\"label\">{5}</text><text x=\"{3}\" y=\"{6}\" text-anchor=\"end\" class=\"label\">{7}</text></svg>",
        WIDTH - RIGHT,
        height - 6.0,
        max_step,
        LEFT - 6.0,
        top + 4.0,
        number(Some(hi)),
        bottom,
        number(Some(lo))
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }
}

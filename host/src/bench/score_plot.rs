//! The report's first plot, as inline SVG: per task, each agent's mean
//! score with its 95 % t interval over the seeds (from the seeds as
//! epochs), on the task's own scale, with its baseline dashed.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::epochs::EpochStats;
use super::plots::colour;
use crate::format::{esc, number};

const WIDTH: f64 = 760.0;
const LEFT: f64 = 130.0;
const RIGHT: f64 = 250.0;
const TITLE: f64 = 22.0;
const ROW: f64 = 20.0;

/// The plot: one block per task, one row per agent.
pub fn scores_plot(epochs: &[EpochStats]) -> String {
    let agents: Vec<&str> = {
        let mut a: Vec<&str> = epochs.iter().map(|e| e.agent.as_str()).collect();
        a.sort();
        a.dedup();
        a
    };
    let mut tasks: BTreeMap<&str, Vec<&EpochStats>> = BTreeMap::new();
    for e in epochs {
        tasks.entry(e.task.as_str()).or_default().push(e);
    }
    let height: f64 = tasks
        .values()
        .map(|rows| TITLE + ROW * rows.len() as f64 + 8.0)
        .sum::<f64>()
        + 4.0;
    let mut svg = format!(
        "<svg class=\"plot\" id=\"scores\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"mean score per task and agent with 95 % t intervals over seeds\">"
    );
    let mut top = 4.0;
    for (task, rows) in &tasks {
        top = task_block(&mut svg, (task, rows), &agents, top);
    }
    svg.push_str("</svg>\n");
    svg
}

/// One task's block from `top`; returns where the next one starts.
fn task_block(svg: &mut String, (task, rows): (&str, &[&EpochStats]), agents: &[&str], top: f64) -> f64 {
    let first = rows[0];
    let _ = write!(
        svg,
        "<text x=\"4\" y=\"{}\" font-weight=\"bold\">{} ({} {})</text>",
        top + 14.0,
        esc(task),
        esc(&first.metric),
        crate::format::arrow(first.higher_is_better)
    );
    let values = rows
        .iter()
        .filter_map(|e| e.score)
        .flat_map(|s| [Some(s.mean), s.interval.map(|i| i.lower), s.interval.map(|i| i.upper)])
        .flatten()
        .chain(first.baseline);
    let Some((lo, hi)) = padded(values) else {
        let _ = write!(
            svg,
            "<text x=\"{LEFT}\" y=\"{}\">no valid score</text>",
            top + TITLE + 12.0
        );
        return top + TITLE + ROW * rows.len() as f64 + 8.0;
    };
    let span = WIDTH - LEFT - RIGHT;
    let x = |v: f64| LEFT + span * (v - lo) / (hi - lo);
    let bottom = top + TITLE + ROW * rows.len() as f64;
    if let Some(b) = first.baseline {
        let _ = write!(
            svg,
            "<line x1=\"{0:.1}\" y1=\"{1}\" x2=\"{0:.1}\" y2=\"{bottom}\" stroke=\"#999\" stroke-dasharray=\"4 3\"><title>baseline {2}</title></line>",
            x(b),
            top + TITLE - 4.0,
            number(Some(b))
        );
    }
    for (k, e) in rows.iter().enumerate() {
        let y = top + TITLE + ROW * k as f64 + ROW / 2.0;
        let index = agents.iter().position(|a| *a == e.agent).unwrap_or(0);
        agent_row(svg, e, (y, colour(index)), &x);
    }
    bottom + 8.0
}

/// One agent's mean (a dot), its interval (a whisker) and both in words.
fn agent_row(svg: &mut String, e: &EpochStats, (y, colour): (f64, &str), x: &dyn Fn(f64) -> f64) {
    let _ = write!(
        svg,
        "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
        LEFT - 6.0,
        y + 4.0,
        esc(&e.agent)
    );
    let Some(score) = e.score else {
        let _ = write!(svg, "<text x=\"{LEFT}\" y=\"{}\">no valid score</text>", y + 4.0);
        return;
    };
    let words = match score.interval {
        Some(i) => {
            let _ = write!(
                svg,
                "<line class=\"interval\" x1=\"{:.1}\" y1=\"{y}\" x2=\"{:.1}\" y2=\"{y}\" stroke=\"{colour}\" stroke-width=\"2\"/>",
                x(i.lower),
                x(i.upper)
            );
            format!(
                "{} [{}, {}]",
                number(Some(score.mean)),
                number(Some(i.lower)),
                number(Some(i.upper))
            )
        }
        None if score.n < 2 => format!("{} (one seed: no interval)", number(Some(score.mean))),
        None => format!("{} (no spread: no interval)", number(Some(score.mean))),
    };
    let _ = write!(
        svg,
        "<circle class=\"mean\" cx=\"{:.1}\" cy=\"{y}\" r=\"4\" fill=\"{colour}\"><title>{}</title></circle><text x=\"{}\" y=\"{}\">{}</text>",
        x(score.mean),
        esc(&words),
        WIDTH - RIGHT + 8.0,
        y + 4.0,
        esc(&words)
    );
}

/// The range of `values`, padded so single points are visible.
fn padded(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() || !hi.is_finite() {
        return None;
    }
    let pad = if hi > lo {
        (hi - lo) * 0.08
    } else {
        lo.abs().max(1.0) * 0.05
    };
    Some((lo - pad, hi + pad))
}

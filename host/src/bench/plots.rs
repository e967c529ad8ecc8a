//! The report's plots across agents, as inline SVG: performance profiles
//! with each agent's AUP, and score against cost.

use std::fmt::Write;

use super::across::AcrossTasks;
use super::profiles::Profiles;
use crate::format::{esc, number};

const PALETTE: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// The colour of the `index`-th agent in every plot of the report.
pub fn colour(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 40.0;

/// The plot area's x and y mappings for value ranges.
fn scales((x0, x1): (f64, f64), (y0, y1): (f64, f64)) -> (impl Fn(f64) -> f64, impl Fn(f64) -> f64) {
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let xs = move |x: f64| LEFT + w * (x - x0) / (x1 - x0).max(f64::EPSILON);
    let ys = move |y: f64| TOP + h - h * (y - y0) / (y1 - y0).max(f64::EPSILON);
    (xs, ys)
}

/// Axes with their end labels and titles.
fn axes(svg: &mut String, x: (f64, f64, &str), y: (f64, f64, &str)) {
    let (bottom, right) = (HEIGHT - BOTTOM, WIDTH - RIGHT);
    let _ = write!(
        svg,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\"/><line class=\"axis\" x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom}\"/>\
         <text class=\"label\" x=\"{LEFT}\" y=\"{}\">{}</text><text class=\"label\" x=\"{right}\" y=\"{}\" text-anchor=\"end\">{}</text>\
         <text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text class=\"label\" x=\"{}\" y=\"{bottom}\" text-anchor=\"end\">{}</text><text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
         <text class=\"label\" x=\"12\" y=\"{}\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>",
        bottom + 14.0,
        number(Some(x.0)),
        bottom + 14.0,
        number(Some(x.1)),
        (LEFT + right) / 2.0,
        bottom + 30.0,
        esc(x.2),
        LEFT - 4.0,
        number(Some(y.0)),
        LEFT - 4.0,
        TOP + 8.0,
        number(Some(y.1)),
        (TOP + bottom) / 2.0,
        (TOP + bottom) / 2.0,
        esc(y.2),
    );
}

fn legend(svg: &mut String, i: usize, text: &str) {
    let y = TOP + 16.0 * i as f64;
    let _ = write!(
        svg,
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
        WIDTH - RIGHT + 12.0,
        y,
        colour(i),
        WIDTH - RIGHT + 26.0,
        y + 9.0,
        esc(text)
    );
}

/// ρ(τ) of each agent as a step line from τ = 1 to τ_max, its AUP in the legend.
pub fn profile_plot(p: &Profiles) -> String {
    let (xs, ys) = scales((1.0, p.tau_max), (0.0, 1.0));
    let mut svg = format!(
        "<svg class=\"plot\" id=\"profiles\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"performance profiles\">"
    );
    axes(
        &mut svg,
        (1.0, p.tau_max, "τ (ratio to the best agent of the task)"),
        (0.0, 1.0, "ρ(τ): share of tasks"),
    );
    let tasks = p.tasks.len().max(1) as f64;
    for (i, agent) in p.agents.iter().enumerate() {
        let mut steps: Vec<f64> = agent
            .ratios
            .iter()
            .flatten()
            .copied()
            .filter(|r| *r <= p.tau_max)
            .collect();
        steps.sort_by(f64::total_cmp);
        let mut points = vec![format!("{:.1},{:.1}", xs(1.0), ys(0.0))];
        // ρ steps up by 1 / tasks at each ratio.
        for (k, r) in steps.iter().enumerate() {
            points.push(format!("{:.1},{:.1}", xs(*r), ys(k as f64 / tasks)));
            points.push(format!("{:.1},{:.1}", xs(*r), ys((k + 1) as f64 / tasks)));
        }
        points.push(format!("{:.1},{:.1}", xs(p.tau_max), ys(steps.len() as f64 / tasks)));
        let _ = write!(
            svg,
            "<polyline class=\"profile\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"><title>{}: AUP {:.3}</title></polyline>",
            colour(i),
            points.join(" "),
            esc(&agent.agent),
            agent.aup
        );
        legend(&mut svg, i, &format!("{} (AUP {:.3})", agent.agent, agent.aup));
    }
    svg.push_str("</svg>\n");
    svg
}

/// Which cost an axis shows: dollars where any was spent, else tokens,
/// else CPU-hours, else wall hours.
fn cost_axis(agents: &[AcrossTasks]) -> (&'static str, fn(&AcrossTasks) -> Option<f64>) {
    if agents.iter().any(|a| a.cost.usd > 0.0) {
        ("cost per episode ($)", |a| Some(a.cost.usd))
    } else if agents.iter().any(|a| a.cost.tokens > 0.0) {
        ("model tokens per episode", |a| Some(a.cost.tokens))
    } else if agents.iter().any(|a| a.cost.cpu_hours.is_some()) {
        ("CPU-hours per episode", |a| a.cost.cpu_hours)
    } else {
        ("wall hours per episode", |a| Some(a.cost.wall_hours))
    }
}

/// Each agent's normalised score (else success rate) against its cost per
/// episode, with the score's 95 % t interval as a bar.
pub fn cost_plot(agents: &[AcrossTasks]) -> String {
    let use_normalized = agents.iter().any(|a| a.normalized.is_some());
    let (y_name, pick): (&str, fn(&AcrossTasks) -> Option<&super::across::Aggregate>) = match use_normalized {
        true => ("normalised score (mean)", |a| a.normalized.as_ref()),
        false => ("success rate", |a| a.success.as_ref()),
    };
    let (x_name, cost) = cost_axis(agents);
    let points: Vec<(usize, f64, &super::across::Aggregate)> = agents
        .iter()
        .enumerate()
        .filter_map(|(i, a)| Some((i, cost(a)?, pick(a)?)))
        .collect();
    let Some(x_hi) = points.iter().map(|p| p.1).reduce(f64::max) else {
        return "<p>No agent has both a score and a cost to plot.</p>\n".into();
    };
    let ends = |p: &&(usize, f64, &super::across::Aggregate)| {
        // A rate's interval is Wilson's (inside [0, 1]), not the t interval.
        let i = p.2.clustered.interval.or(p.2.rate.map(|r| r.interval));
        [
            p.2.clustered.mean,
            i.map_or(p.2.clustered.mean, |i| i.lower),
            i.map_or(p.2.clustered.mean, |i| i.upper),
        ]
    };
    let ys_all: Vec<f64> = points.iter().flat_map(|p| ends(&p)).collect();
    let y_lo = ys_all.iter().copied().fold(0.0, f64::min);
    let y_hi = ys_all.iter().copied().fold(1.0, f64::max);
    let (xs, ys) = scales((0.0, (x_hi * 1.1).max(f64::MIN_POSITIVE)), (y_lo, y_hi));
    let mut svg = format!(
        "<svg class=\"plot\" id=\"cost\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"score against cost\">"
    );
    axes(&mut svg, (0.0, x_hi * 1.1, x_name), (y_lo, y_hi, y_name));
    for p in &points {
        let (i, x, a) = *p;
        let [m, lo, hi] = ends(&p);
        let name = &agents[i].agent;
        let _ = write!(
            svg,
            "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"{3}\"/><circle class=\"agent\" cx=\"{0:.1}\" cy=\"{4:.1}\" r=\"5\" fill=\"{3}\"><title>{5}: {6} at {7} (n {8}, {9} tasks)</title></circle>",
            xs(x),
            ys(lo),
            ys(hi),
            colour(i),
            ys(m),
            esc(name),
            number(Some(m)),
            number(Some(x)),
            a.clustered.n,
            a.clustered.clusters
        );
        legend(&mut svg, i, name);
    }
    svg.push_str("</svg>\n");
    svg
}

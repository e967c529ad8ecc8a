//! How numbers and text are shown, the same in the terminal tables, the
//! HTML report and the trace viewer.

use crate::stats::MeanSe;

/// A score: one decimal from 1000 up, four below; a dash for none.
pub fn number(value: Option<f64>) -> String {
    match value {
        Some(v) if v.abs() >= 1000.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.4}"),
        None => "—".into(),
    }
}

/// A metric's direction as an arrow: ↑ higher is better, ↓ lower, ? unknown.
pub fn arrow(higher_is_better: Option<bool>) -> &'static str {
    match higher_is_better {
        Some(true) => "↑",
        Some(false) => "↓",
        None => "?",
    }
}

/// A metric's direction in words.
pub fn direction(higher_is_better: Option<bool>) -> &'static str {
    match higher_is_better {
        Some(true) => "higher is better",
        Some(false) => "lower is better",
        None => "direction unknown",
    }
}

/// A metric's range `[low, high]`, or what stands in for a missing one: a
/// range nobody declared is never shown as numbers.
pub fn range(range: Option<[f64; 2]>) -> String {
    match range {
        Some([low, high]) => format!("[{low}, {high}]"),
        None => "none declared".into(),
    }
}

/// A relative change as a signed percentage; a dash for none.
pub fn percent(value: Option<f64>) -> String {
    value.map_or("—".into(), |v| format!("{:+.1} %", v * 100.0))
}

/// A signed mean with its standard error, as a percentage when `as_percent`.
pub fn mean_se(value: Option<MeanSe>, as_percent: bool) -> String {
    match value {
        None => "—".into(),
        Some(m) => {
            let scale = if as_percent { 100.0 } else { 1.0 };
            let unit = if as_percent { " %" } else { "" };
            match m.se {
                // Values that do not vary: a zero error is not certainty.
                Some(0.0) => format!("{:+.1}{unit} ({})", m.mean * scale, crate::stats::NO_SPREAD),
                Some(se) => format!("{:+.1} ± {:.1}{unit}", m.mean * scale, se * scale),
                None => format!("{:+.1}{unit}", m.mean * scale),
            }
        }
    }
}

/// Escapes text for HTML.
pub fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The current UTC time in RFC 3339, to the millisecond, as records write it.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

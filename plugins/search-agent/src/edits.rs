//! The edits the search tries on a starter script, found in its text: the
//! model it builds (a scikit-learn estimator swapped for stronger ones) and
//! the numeric settings it passes or declares (scaled up and down).

/// One change to a script: the text after it and what it is, in words.
#[derive(Clone, Debug)]
pub struct Edit {
    pub source: String,
    pub what: String,
}

/// Estimators a starter may build, and what the search tries instead.
/// (name, alternatives as (import, constructor call)).
const SWAPS: &[(&str, &[(&str, &str)])] = &[
    ("DecisionTreeClassifier", CLASSIFIERS),
    ("LogisticRegression", CLASSIFIERS),
    (
        "MultinomialNB",
        &[("sklearn.linear_model", "LogisticRegression(max_iter=2000, C=10.0)")],
    ),
    ("GaussianNB", CLASSIFIERS),
    ("KNeighborsClassifier", CLASSIFIERS),
    ("LinearRegression", REGRESSORS),
    ("DecisionTreeRegressor", REGRESSORS),
    ("KNeighborsRegressor", REGRESSORS),
];

const CLASSIFIERS: &[(&str, &str)] = &[
    (
        "sklearn.ensemble",
        "ExtraTreesClassifier(n_estimators=400, n_jobs=-1, random_state=0)",
    ),
    (
        "sklearn.ensemble",
        "RandomForestClassifier(n_estimators=400, n_jobs=-1, random_state=0)",
    ),
    ("sklearn.ensemble", "HistGradientBoostingClassifier(random_state=0)"),
];

const REGRESSORS: &[(&str, &str)] = &[
    ("sklearn.ensemble", "HistGradientBoostingRegressor(random_state=0)"),
    (
        "sklearn.ensemble",
        "RandomForestRegressor(n_estimators=400, n_jobs=-1, random_state=0)",
    ),
    (
        "sklearn.ensemble",
        "ExtraTreesRegressor(n_estimators=400, n_jobs=-1, random_state=0)",
    ),
];

/// Settings the search never touches: they choose data, seeds, classes or
/// output, not the model. Names containing one of these...
const NOT_TUNABLE_PARTS: &[&str] = &[
    "seed",
    "random",
    "verbose",
    "n_jobs",
    "test_size",
    "split",
    "class",
    "label",
    "version",
    "port",
];
/// ...and these names as they are: array plumbing, not settings.
const NOT_TUNABLE_NAMES: &[&str] = &["id", "axis", "start", "stop", "indent", "minlength", "workers", "state"];

/// Every estimator swap the script allows.
pub fn swaps(source: &str) -> Vec<Edit> {
    let mut edits = Vec::new();
    for (name, alternatives) in SWAPS {
        for (start, end) in calls(source, name) {
            for (module, call) in *alternatives {
                let class = &call[..call.find('(').unwrap_or(call.len())];
                let replaced = format!("{}{call}{}", &source[..start], &source[end..]);
                edits.push(Edit {
                    source: with_import(&replaced, module, class),
                    what: format!("{name}(…) → {call}"),
                });
            }
        }
    }
    edits
}

/// A numeric setting of the script: where its value is and what it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    pub name: String,
    pub start: usize,
    pub end: usize,
    pub value: f64,
    pub integer: bool,
}

impl Setting {
    /// The script with this setting at `factor` times its value, if that
    /// value is still meaningful (an integer stays ≥ 1 and changes; a
    /// fraction stays below 1).
    pub fn scaled(&self, source: &str, factor: f64) -> Option<Edit> {
        let text = if self.integer {
            let value = (self.value * factor).round().max(1.0);
            if value == self.value {
                return None;
            }
            format!("{value:.0}")
        } else {
            let value = self.value * factor;
            if self.value < 1.0 && value >= 1.0 {
                return None;
            }
            let text = format!("{value:.6}");
            let text = text.trim_end_matches('0');
            // Still a float literal: `17.0`, not `17.`.
            if text.ends_with('.') {
                format!("{text}0")
            } else {
                text.to_string()
            }
        };
        // The setting's place in `source` is still where it was found.
        source.get(self.start..self.end).and_then(number)?;
        let line = source[..self.start].matches('\n').count() + 1;
        Some(Edit {
            source: format!("{}{text}{}", &source[..self.start], &source[self.end..]),
            what: format!(
                "{} = {text} (was {}, line {line})",
                self.name,
                &source[self.start..self.end]
            ),
        })
    }
}

/// The numeric settings of a script: keyword arguments (`max_depth=8`) and
/// module-level constants (`HIDDEN = 64`), outside comments and strings,
/// except those that choose data, seeds or output.
pub fn settings(source: &str) -> Vec<Setting> {
    let mut found = Vec::new();
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        let code = code_part(line);
        let bytes = code.as_bytes();
        let mut i = 0;
        while let Some(eq) = code[i..].find('=').map(|p| p + i) {
            i = eq + 1;
            // `==`, `<=`, `!=`, `+=` and the like are not assignments.
            let before = bytes.get(eq.wrapping_sub(1)).copied().unwrap_or(b' ');
            if b"=<>!+-*/%&|^:".contains(&before) || bytes.get(eq + 1) == Some(&b'=') {
                continue;
            }
            let head = code[..eq].trim_end();
            let name_at = head
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |p| p + 1);
            let name = &head[name_at..];
            // A keyword argument (`f(a, max_depth=8)`), or a name set on a
            // line of its own (`HIDDEN = 64`, or an argument of a call split
            // over lines).
            let prefix = head[..name_at].trim_end();
            let starts_name = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            if !starts_name || !(prefix.is_empty() || prefix.ends_with('(') || prefix.ends_with(',')) {
                continue;
            }
            let lowered = name.to_ascii_lowercase();
            if NOT_TUNABLE_PARTS.iter().any(|part| lowered.contains(part)) || NOT_TUNABLE_NAMES.contains(&&*lowered) {
                continue;
            }
            let rest = &code[eq + 1..];
            let start = eq + 1 + (rest.len() - rest.trim_start().len());
            let end = start
                + code[start..]
                    .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_' || c == 'e' || c == '-'))
                    .unwrap_or(code.len() - start);
            let text = &code[start..end];
            // The whole value must be the number (not `8 * k`, not `f(8)`).
            let after = code[end..].trim_start();
            if !(after.is_empty() || after.starts_with(',') || after.starts_with(')')) {
                continue;
            }
            if let Some(value) = number(text).filter(|v| *v > 0.0) {
                found.push(Setting {
                    name: name.to_string(),
                    start: offset + start,
                    end: offset + end,
                    value,
                    integer: !text.contains(['.', 'e']),
                });
            }
        }
        offset += line.len();
    }
    found
}

fn number(text: &str) -> Option<f64> {
    text.replace('_', "").parse().ok().filter(|v: &f64| v.is_finite())
}

/// A line without its comment (a `#` outside quotes).
fn code_part(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

/// Where calls of `name(…)` start and end, with nested parentheses.
fn calls(source: &str, name: &str) -> Vec<(usize, usize)> {
    let pattern = format!("{name}(");
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = source[from..].find(&pattern).map(|p| p + from) {
        from = at + pattern.len();
        let preceded = source[..at].chars().next_back();
        if preceded.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            continue;
        }
        let mut depth = 0;
        for (i, c) in source[at + name.len()..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        found.push((at, at + name.len() + i + 1));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// The script with `from module import class` after its first import (so
/// after any `from __future__`), or first when it has none.
fn with_import(source: &str, module: &str, class: &str) -> String {
    let line = format!("from {module} import {class}\n");
    let mut offset = 0;
    for text in source.split_inclusive('\n') {
        let is_import = text.starts_with("import ") || text.starts_with("from ");
        if is_import && !text.starts_with("from __future__") && !text.trim_end().ends_with('(') {
            let at = offset + text.len();
            let sep = if text.ends_with('\n') { "" } else { "\n" };
            return format!("{}{sep}{line}{}", &source[..at], &source[at..]);
        }
        offset += text.len();
    }
    format!("{line}{source}")
}

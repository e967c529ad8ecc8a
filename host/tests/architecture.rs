//! The host's shape: dependencies between its top-level modules point one
//! way (cli → cluster → bench → episode → {capability, sandbox, task, llm, record} →
//! engine/paths), with no cycle, and no function grows past a screen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level module a file of `src/` belongs to.
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// The top-level modules a source text names through `crate::`.
fn uses(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The items of the group at its own level: `crate::{a::{b, c}, d}` names a and d.
            let (mut depth, mut items) = (0usize, vec![String::new()]);
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => items.push(String::new()),
                    _ if depth == 0 => items.last_mut().unwrap().push(c),
                    _ => {}
                }
            }
            for item in items {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert(name);
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            found.insert(name);
        }
    }
    found.retain(|n| !n.is_empty() && n != "self");
    found
}

/// Module → the modules it uses.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in walkdir::WalkDir::new(src()) {
        let entry = entry.unwrap();
        if entry.path().extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let module = module_of(entry.path());
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let used = uses(&text);
        let deps = graph.entry(module.clone()).or_default();
        deps.extend(used.into_iter().filter(|m| *m != module));
    }
    graph
}

/// A cycle through `node`, if there is one.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, node: &str, path: &mut Vec<String>) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|n| n == node) {
        let mut cycle = path[at..].to_vec();
        cycle.push(node.to_string());
        return Some(cycle);
    }
    path.push(node.to_string());
    for next in graph.get(node).into_iter().flatten() {
        if let Some(cycle) = cycle_from(graph, next, path) {
            return Some(cycle);
        }
    }
    path.pop();
    None
}

#[test]
fn top_level_modules_form_no_cycle() {
    let graph = graph();
    assert!(graph.len() > 10, "{graph:?}");
    for module in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, module, &mut Vec::new()) {
            panic!("import cycle: {}", cycle.join(" → "));
        }
    }
}

#[test]
fn dependencies_point_from_the_command_line_down_to_the_engine() {
    let graph = graph();
    // Each layer may use only the layers below it.
    let layers: [&[&str]; 6] = [
        &["cli"],
        &["cluster"],
        &["bench", "report", "view", "doctor"],
        &["episode", "agent_check", "agent_build"],
        &["capability", "sandbox", "task", "llm", "record"],
        &[
            "engine",
            "paths",
            "process",
            "limits",
            "network",
            "relpath",
            "stats",
            "format",
            "http_server",
        ],
    ];
    let layer_of = |m: &str| layers.iter().position(|l| l.contains(&m));
    for (module, deps) in &graph {
        let Some(own) = layer_of(module) else {
            assert!(["lib", "main"].contains(&module.as_str()), "{module} is in no layer");
            continue;
        };
        for dep in deps {
            let Some(theirs) = layer_of(dep) else { continue };
            assert!(
                theirs >= own,
                "{module} (layer {own}) uses {dep} (layer {theirs}): dependencies point down"
            );
        }
    }
}

/// Functions of `text` longer than `limit` lines: (name, lines).
fn long_functions(text: &str, limit: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let is_fn = [
            "fn ",
            "pub fn ",
            "async fn ",
            "pub async fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
        ]
        .iter()
        .any(|p| trimmed.starts_with(p));
        if !is_fn {
            continue;
        }
        // A declaration without a body (a trait's) ends with `;` first.
        let signature_end = lines[i..]
            .iter()
            .find(|l| l.contains('{') || l.trim_end().ends_with(';'));
        if signature_end.is_none_or(|l| !l.contains('{')) {
            continue;
        }
        let indent = line.len() - trimmed.len();
        // The body ends at the first closing brace at the same indent.
        let closing = " ".repeat(indent) + "}";
        let Some(end) = lines[i + 1..].iter().position(|l| *l == closing) else {
            continue;
        };
        if end + 2 > limit {
            let name = trimmed.split('(').next().unwrap_or(trimmed).to_string();
            long.push((name, end + 2));
        }
    }
    long
}

#[test]
fn no_function_in_the_host_is_longer_than_a_screen() {
    let mut long = Vec::new();
    for entry in walkdir::WalkDir::new(src()) {
        let entry = entry.unwrap();
        if entry.path().extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        // Tests may be long; the host's own code may not.
        let code = text.split("#[cfg(test)]").next().unwrap_or(&text);
        for (name, lines) in long_functions(code, 80) {
            long.push(format!("{}: {name} ({lines} lines)", entry.path().display()));
        }
    }
    assert!(long.is_empty(), "functions over 80 lines:\n{}", long.join("\n"));
}

#[test]
fn the_scanner_sees_grouped_imports_and_long_functions() {
    let used = uses("use crate::{bench, task::Task};\nlet x = crate::paths::cache_dir();");
    assert_eq!(used, BTreeSet::from(["bench".into(), "paths".into(), "task".into()]));
    let nested = uses("use crate::{episode::{EpisodeRequest, HostSetup}, limits::Overrides, report};");
    assert_eq!(
        nested,
        BTreeSet::from(["episode".into(), "limits".into(), "report".into()])
    );
    let in_macro = uses("recorder: &$lt mut $crate::capability::recorder::Recorder,");
    assert_eq!(in_macro, BTreeSet::from(["capability".into()]));
    let long_fn = format!("fn big() {{\n{}}}\n", "    x();\n".repeat(90));
    assert_eq!(long_functions(&long_fn, 80).len(), 1);
    assert!(long_functions("fn small() {\n    x();\n}\n", 80).is_empty());
    // A trait's declaration has no body to measure.
    let declared = format!(
        "trait T {{\n    fn f(&self);\n{}}}\n",
        "    fn g(&self) {}\n".repeat(90)
    );
    assert!(long_functions(&declared, 80).is_empty());
}

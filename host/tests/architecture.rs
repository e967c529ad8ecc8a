//! The host's shape: dependencies between its top-level modules point one
//! way (cli → cluster → bench → episode → {capability, sandbox, task, llm, record} →
//! engine/paths), with no cycle, no import loop between its files either,
//! and no function grows past a screen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod graph;
use graph::{cycle_from, loops};

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
        &["cluster", "submissions"],
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
            "columns",
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

/// `text` without comments and without the items marked `#[cfg(test)]`
/// (a test module may use anything).
fn production_code(text: &str) -> String {
    let uncommented: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut code = String::new();
    let mut rest = uncommented.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        code.push_str(&rest[..at]);
        rest = &rest[at..];
        // The item ends at its `;` (a declaration) or its matching brace.
        let (mut depth, mut end) = (0usize, rest.len());
        for (i, c) in rest.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    code.push_str(rest);
    code
}

/// The module a file of `src/` is: `task/mod.rs` is `task`, `task/spec.rs` is `task::spec`.
fn file_module(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// The paths a source text names from `crate::` or `super::`, resolved
/// against `module` (the file's own); a group `a::{b, c::d}` names a::b and a::c.
fn named_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut paths = Vec::new();
    for (i, _) in text.match_indices("::") {
        // Only where a path starts: `crate::` or a run of `super::`.
        let head: String = text[..i].chars().rev().take_while(|c| ident(*c)).collect::<String>();
        let head: String = head.chars().rev().collect();
        if head != "crate" && head != "super" {
            continue;
        }
        let start = i - head.len();
        if text[..start].ends_with("::") || text[..start].chars().last().is_some_and(ident) {
            continue;
        }
        let mut base: Vec<String> = if head == "crate" {
            Vec::new()
        } else {
            module[..module.len().saturating_sub(1)].to_vec()
        };
        let mut rest = &text[i + 2..];
        while let Some(after) = rest.strip_prefix("super::") {
            base.pop();
            rest = after;
        }
        let mut path = base;
        loop {
            let name: String = rest.chars().take_while(|c| ident(*c)).collect();
            if name.is_empty() {
                break;
            }
            path.push(name.clone());
            rest = &rest[name.len()..];
            match rest.strip_prefix("::") {
                Some(after) => rest = after,
                None => break,
            }
        }
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut item, mut items) = (0usize, String::new(), Vec::new());
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                    _ if depth == 0 => item.push(c),
                    _ => {}
                }
            }
            items.push(item);
            for item in items {
                let first: String = item.trim().chars().take_while(|c| ident(*c)).collect();
                if !first.is_empty() && first != "self" {
                    paths.push([path.clone(), vec![first]].concat());
                }
            }
        }
        paths.push(path);
    }
    paths
}

/// File → the files it uses: a path resolves to the longest module prefix
/// that is a file; a file's own ancestors (whose `mod` declares it) are
/// not counted, as every child names its parent's types.
fn file_graph(files: &BTreeMap<Vec<String>, String>) -> BTreeMap<String, BTreeSet<String>> {
    let name = |m: &[String]| if m.is_empty() { "lib".to_string() } else { m.join("/") };
    let mut graph = BTreeMap::new();
    for (module, text) in files {
        let mut deps = BTreeSet::new();
        for path in named_paths(&production_code(text), module) {
            let target = (1..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|p| files.contains_key(*p));
            if let Some(target) = target
                && target != module.as_slice()
                && !module.starts_with(target)
            {
                deps.insert(name(target));
            }
        }
        graph.insert(name(module), deps);
    }
    graph
}

fn source_files() -> BTreeMap<Vec<String>, String> {
    walkdir::WalkDir::new(src())
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| (file_module(e.path()), std::fs::read_to_string(e.path()).unwrap()))
        .collect()
}

#[test]
fn no_import_loop_between_files() {
    let graph = file_graph(&source_files());
    assert!(graph.len() > 100, "{}", graph.len());
    let loops = loops(&graph);
    assert!(
        loops.is_empty(),
        "import loops between files:\n{}",
        loops.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_file_scanner_sees_loops_through_super_groups_and_not_test_code() {
    let files: BTreeMap<Vec<String>, String> = [
        (vec!["task".to_string()], "mod a; mod b; pub struct Task;".to_string()),
        (vec!["task".into(), "a".into()], "use super::{Task, b::Thing};".into()),
        (vec!["task".into(), "b".into()], "// crate::task::a is named in a comment only\npub struct Thing;\n#[cfg(test)]\nmod tests { use super::super::a; }".into()),
        (vec!["bench".into()], "use crate::task::a::f;".into()),
    ]
    .into_iter()
    .collect();
    let graph = file_graph(&files);
    assert_eq!(graph["task/a"], BTreeSet::from(["task/b".to_string()]));
    assert!(graph["task/b"].is_empty(), "{graph:?}");
    assert_eq!(graph["bench"], BTreeSet::from(["task/a".to_string()]));
    // b using a outside its tests closes a loop.
    let mut looped = files.clone();
    looped.insert(
        vec!["task".into(), "b".into()],
        "pub struct Thing;\nfn f() { crate::task::a::g(); }".into(),
    );
    let graph = file_graph(&looped);
    assert_eq!(loops(&graph), BTreeSet::from(["task/a → task/b".to_string()]));
}

//! Dependency graphs of the shape tests: a cycle through a node, and
//! every loop of a graph.

use std::collections::{BTreeMap, BTreeSet};

/// A cycle through `node`, if there is one.
#[allow(dead_code)] // the Python shape test needs only `loops`
pub fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
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

/// The loops of `graph`, each named once from its smallest node: a
/// depth-first walk that visits each node once and reports each edge back
/// into the path it is on.
pub fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    fn walk<'a>(
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        node: &'a str,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        found: &mut BTreeSet<String>,
    ) {
        if let Some(at) = path.iter().position(|n| *n == node) {
            let mut cycle: Vec<&str> = path[at..].to_vec();
            let first = cycle.iter().enumerate().min_by_key(|(_, f)| **f).map_or(0, |(i, _)| i);
            cycle.rotate_left(first);
            found.insert(cycle.join(" → "));
            return;
        }
        if !done.insert(node) {
            return;
        }
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            walk(graph, next, path, done, found);
        }
        path.pop();
    }
    let (mut done, mut found) = (BTreeSet::new(), BTreeSet::new());
    for node in graph.keys() {
        walk(graph, node, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

//! `mlrb agent check`: what an agent component is (the world and WIT
//! version it targets, its imports and exports, size, sha256) and whether
//! this host will run it, with the reason when not.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use wasmtime::component::types::ComponentItem;

use crate::capability::{EARLIER_WIT_VERSIONS, WIT_PACKAGE};
use crate::engine::AgentEngine;

/// What `mlrb agent check` finds out about a component.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The component's path, as given.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// The sha256 of its bytes, in hex.
    pub sha256: String,
    /// The mlrb WIT package the component was built against, if any.
    pub targets: Option<String>,
    /// The names of everything it imports.
    pub imports: Vec<String>,
    /// The names of everything it exports.
    pub exports: Vec<String>,
    /// Whether it imports wasi:http (requests of its own, which go out only
    /// as the task's network grant allows).
    pub http: bool,
    /// What is worth knowing about it that is no refusal.
    pub notes: Vec<String>,
    /// Why the host refuses it; empty when it accepts it.
    pub refusals: Vec<String>,
}

/// Imports that ask for what an agent is never given.
const NEVER_GRANTED: &[(&str, &str)] = &[(
    "wasi:filesystem/preopens",
    "preopened directories: an agent sees files only through mlrb:agent/workspace",
)];

/// Inspects the component at `path`. `network_granted`: whether the task
/// it is checked for grants network (sockets and wasi:http are refused
/// otherwise); `None` when it is checked for no task (sockets are refused,
/// wasi:http is noted).
pub async fn check(engine: &AgentEngine, path: &Path, network_granted: Option<bool>) -> Result<Report> {
    let (bytes, sha256) = crate::engine::map_agent(path)?;
    let size = bytes.len() as u64;
    let loaded = engine.load(&bytes, &sha256).await.map_err(|e| {
        anyhow::anyhow!(
            "{}: not a WebAssembly component this host can compile: {e:#}",
            path.display()
        )
    })?;
    let ty = loaded.component.component_type();
    let imports: Vec<String> = ty.imports(engine.engine()).map(|(name, _)| name.to_string()).collect();
    let exports: Vec<(String, bool)> = ty
        .exports(engine.engine())
        .map(|(name, item)| (name.to_string(), matches!(item.ty, ComponentItem::ComponentFunc(_))))
        .collect();

    let (package, version) = WIT_PACKAGE.split_once('@').unwrap_or((WIT_PACKAGE, ""));
    let ours: Vec<&String> = imports
        .iter()
        .filter(|i| i.starts_with(&format!("{package}/")))
        .collect();
    let targets = ours
        .iter()
        .filter_map(|i| i.split_once('@').map(|(_, v)| format!("{package}@{v}")))
        .next();
    let mut refusals = Vec::new();
    if let Some(target) = &targets {
        let theirs = target.split_once('@').map_or("", |(_, v)| v);
        let linked = std::iter::once(version).chain(EARLIER_WIT_VERSIONS.iter().copied());
        if !linked.clone().any(|ours| compatible(theirs, ours)) {
            let versions: Vec<&str> = linked.collect();
            refusals.push(format!(
                "built for {target}; this host implements {WIT_PACKAGE} and runs agents of {package}@{} (rebuild against this host's wit/)",
                versions.join(", @")
            ));
        }
    }
    let runs = exports.iter().any(|(name, is_func)| name == "run" && *is_func);
    if !runs {
        let world = exports
            .iter()
            .map(|(name, _)| name.as_str())
            .find(|name| name.contains(':'))
            .map(|name| format!(" (it exports {name})"))
            .unwrap_or_default();
        refusals.push(format!(
            "built for another world{world}: an agent exports `run` of the {WIT_PACKAGE} world `agent`"
        ));
    }
    let (imports_http, notes) = network_imports(&imports, network_granted, &mut refusals);
    for import in &imports {
        for (prefix, why) in NEVER_GRANTED {
            if import.starts_with(prefix) {
                refusals.push(format!("imports {import}: {why}"));
            }
        }
    }
    Ok(Report {
        path: path.display().to_string(),
        size,
        sha256,
        targets,
        imports,
        exports: exports.into_iter().map(|(name, _)| name).collect(),
        http: imports_http,
        notes,
        refusals,
    })
}

/// What the network imports ask: sockets are refused unless the task grants
/// network; wasi:http too when the task is known not to, and noted
/// otherwise. Whether it imports wasi:http, and the notes.
fn network_imports(
    imports: &[String],
    network_granted: Option<bool>,
    refusals: &mut Vec<String>,
) -> (bool, Vec<String>) {
    let interfaces = |package: &str| -> Vec<&str> {
        imports
            .iter()
            .filter_map(|i| i.strip_prefix(package))
            .map(|i| i.split('@').next().unwrap_or(i))
            .collect()
    };
    let sockets = interfaces("wasi:sockets/");
    if !sockets.is_empty() && network_granted != Some(true) {
        refusals.push(format!(
            "imports wasi:sockets ({}): the task grants no network",
            sockets.join(", ")
        ));
    }
    // wasi:http is linked for every agent; its requests go out only under
    // the episode's grant, so a task without one would refuse them all.
    let http = interfaces("wasi:http/").join(", ");
    let mut notes = Vec::new();
    if http.is_empty() {
        return (false, notes);
    }
    match network_granted {
        Some(false) => refusals.push(format!("imports wasi:http ({http}): the task grants no network")),
        Some(true) => notes.push(format!(
            "imports wasi:http ({http}): the task grants network, and its requests go out as the grant allows (each recorded)"
        )),
        None => notes.push(format!(
            "imports wasi:http ({http}): its requests go out only under a task that grants network (check with --task)"
        )),
    }
    (true, notes)
}

/// Whether a component built against WIT version `theirs` runs on a host
/// implementing `ours`: same major (and, before 1.0, same minor) and no newer.
pub fn compatible(theirs: &str, ours: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut parts = v.split(['.', '-']).map(|p| p.parse::<u64>().ok());
        Some((parts.next()??, parts.next()??, parts.next()??))
    };
    let (Some(t), Some(o)) = (parse(theirs), parse(ours)) else {
        return false;
    };
    if t.0 != o.0 || (o.0 == 0 && t.1 != o.1) {
        return false;
    }
    (t.1, t.2) <= (o.1, o.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_compatibility_follows_the_policy() {
        assert!(compatible("0.1.0", "0.1.0"));
        assert!(compatible("0.1.0", "0.1.3"), "an older patch runs on a newer host");
        assert!(
            !compatible("0.1.4", "0.1.3"),
            "a newer patch may use what the host lacks"
        );
        assert!(!compatible("0.2.0", "0.1.0"));
        assert!(!compatible("0.1.0", "0.2.0"), "before 1.0 a minor bump breaks");
        assert!(compatible("1.1.0", "1.2.0"));
        assert!(!compatible("2.0.0", "1.9.0"));
        assert!(!compatible("x", "0.1.0"));
    }
}

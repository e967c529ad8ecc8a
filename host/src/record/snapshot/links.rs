//! Where a recorded symbolic link leads inside the workspace, every link on
//! the way followed as the kernel would.

use std::collections::BTreeMap;

use crate::record::snapshot::manifest::ManifestEntry;

/// Links followed at most while resolving one path, as the kernel allows.
const MAX_LINK_HOPS: usize = 40;

/// Where the link at `rel` (workspace-relative) pointing to `target` leads
/// inside the tree `entries` describes, every link on the way followed as
/// the kernel would: its workspace-relative path without links (`""` is the
/// root), or `None` when it is absolute, climbs above the root at any point,
/// needs a path the tree lacks, or loops. Judging each link's text alone is
/// not enough: with `s -> .`, the link `s/../x` climbs out of the root.
pub fn resolve_link(entries: &BTreeMap<String, ManifestEntry>, rel: &str, target: &str) -> Option<String> {
    let parent = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
    let mut hops = 0;
    resolve_from(entries, parent, target, &mut hops)
}

/// Resolves `path` (relative) from the link-free folder `base`.
fn resolve_from(entries: &BTreeMap<String, ManifestEntry>, base: &str, path: &str, hops: &mut usize) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut at: Vec<String> = base.split('/').filter(|p| !p.is_empty()).map(String::from).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                at.pop()?;
            }
            name => {
                let here = at.join("/");
                let next = if here.is_empty() {
                    name.to_string()
                } else {
                    format!("{here}/{name}")
                };
                match entries.get(&next)? {
                    ManifestEntry::Symlink { target } => {
                        *hops += 1;
                        if *hops > MAX_LINK_HOPS {
                            return None;
                        }
                        let resolved = resolve_from(entries, &here, target, hops)?;
                        at = resolved
                            .split('/')
                            .filter(|p| !p.is_empty())
                            .map(String::from)
                            .collect();
                    }
                    _ => at.push(name.to_string()),
                }
            }
        }
    }
    Some(at.join("/"))
}

/// The link text that leads from the folder of `rel` to `resolved` (both
/// link-free workspace-relative paths) by plain folders only.
pub(super) fn direct_link(rel: &str, resolved: &str) -> String {
    let parent: Vec<&str> = rel
        .rsplit_once('/')
        .map_or(Vec::new(), |(dir, _)| dir.split('/').collect());
    let to: Vec<&str> = resolved.split('/').filter(|p| !p.is_empty()).collect();
    let common = parent.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; parent.len() - common];
    parts.extend(&to[common..]);
    if parts.is_empty() { ".".into() } else { parts.join("/") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_that_leave_the_workspace_are_recognised() {
        let dir = || ManifestEntry::Dir;
        let link = |t: &str| ManifestEntry::Symlink { target: t.into() };
        let file = || ManifestEntry::File {
            hash: "0".into(),
            size: 1,
            executable: false,
        };
        let entries: BTreeMap<String, ManifestEntry> = [
            ("b", file()),
            ("d", dir()),
            ("d/e", dir()),
            ("s", link(".")),
            ("up", link("..")),
            ("d/up", link("..")),
            ("loop", link("loop")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let resolve = |rel: &str, target: &str| resolve_link(&entries, rel, target);
        assert_eq!(resolve("a", "b").as_deref(), Some("b"));
        assert_eq!(resolve("d/a", "../b").as_deref(), Some("b"));
        assert_eq!(resolve("d/e/a", "./../../b").as_deref(), Some("b"));
        assert_eq!(resolve("d/a", "up/b").as_deref(), Some("b"));
        assert_eq!(resolve("x", "s/d/e").as_deref(), Some("d/e"));
        for (rel, target) in [
            ("a", "../b"),
            ("d/a", "../../hidden/answers.csv"),
            ("d/a", "x/../../../b"),
            ("a", "/hidden/answers.csv"),
            // Each link's text stays inside; what they lead to together does not.
            ("a", "s/../hidden/answers.csv"),
            ("d/x", "up/../../hidden/answers.csv"),
            ("a", "up/b"),
            ("a", "loop"),
            ("a", "missing/../b"),
        ] {
            assert_eq!(resolve(rel, target), None, "{rel} -> {target}");
        }
        assert_eq!(direct_link("d/e/a", "b"), "../../b");
        assert_eq!(direct_link("d/a", "d/e"), "e");
        assert_eq!(direct_link("a", ""), ".");
    }
}

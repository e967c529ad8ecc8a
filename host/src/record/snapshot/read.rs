//! Reading snapshots back: manifest headers, and their entries from the trees.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::record::snapshot::manifest::{Manifest, ManifestEntry, Refused};
use crate::record::snapshot::tree::{Tree, TreeEntry, join};
use crate::record::{MAX_JSON_RECORD, read_record_file};

/// Whether `hash` names an object or tree (and so is safe to join to a path).
pub fn is_hash(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn read_tree(dir: &Path, hash: &str) -> Result<Tree> {
    if !is_hash(hash) {
        bail!("{}: `{hash}` is not a tree hash", dir.display());
    }
    let path = dir.join("trees").join(hash);
    let text = read_record_file(&path, MAX_JSON_RECORD).with_context(|| format!("{}: missing tree", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: malformed tree", path.display()))
}

/// Fills `manifest.entries` and `refused` from its trees.
fn flatten(dir: &Path, manifest: &mut Manifest) -> Result<()> {
    let mut stack = vec![(String::new(), manifest.root.clone())];
    while let Some((rel, hash)) = stack.pop() {
        let tree = read_tree(dir, &hash)?;
        if !tree.shards.is_empty() {
            stack.extend(tree.shards.into_values().map(|h| (rel.clone(), h)));
            continue;
        }
        for refused in tree.refused {
            manifest.refused.push(Refused {
                path: join(&rel, &refused.name),
                path_hex: refused.name_hex,
                kind: refused.kind,
                why: refused.why,
            });
        }
        for (name, entry) in tree.entries {
            if name.is_empty() || name == "." || name == ".." || name.contains('/') {
                bail!("{}: tree {hash} has a malformed name `{name}`", dir.display());
            }
            let path = join(&rel, &name);
            let flat = match entry {
                TreeEntry::File { hash, size, executable } => {
                    if !is_hash(&hash) {
                        bail!("{}: `{path}` has a malformed object hash", dir.display());
                    }
                    ManifestEntry::File { hash, size, executable }
                }
                TreeEntry::Symlink { target } => ManifestEntry::Symlink { target },
                TreeEntry::Dir { tree } => {
                    stack.push((path.clone(), tree));
                    ManifestEntry::Dir
                }
            };
            manifest.entries.insert(path, flat);
        }
    }
    manifest.refused.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(())
}

fn read_header(path: &Path) -> Result<Manifest> {
    let text =
        read_record_file(path, MAX_JSON_RECORD).with_context(|| format!("{}: no such snapshot", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: malformed manifest", path.display()))
}

/// Reads a manifest with its entries (from the trees; an older flat
/// manifest holds them itself).
fn load(dir: &Path, path: &Path) -> Result<Manifest> {
    let mut manifest = read_header(path)?;
    if !manifest.root.is_empty() {
        flatten(dir, &mut manifest)?;
    }
    for (rel, entry) in &manifest.entries {
        if let ManifestEntry::File { hash, .. } = entry
            && !is_hash(hash)
        {
            bail!("{}: `{rel}` has a malformed object hash", path.display());
        }
    }
    Ok(manifest)
}

/// The header of manifest `id` (totals, root), without its entries.
pub fn read_manifest_header(dir: &Path, id: u64) -> Result<Manifest> {
    read_header(&dir.join("manifests").join(format!("{id:06}.json")))
}

/// The manifest `id` of an episode's snapshot directory, with its entries.
pub fn read_manifest(dir: &Path, id: u64) -> Result<Manifest> {
    load(dir, &dir.join("manifests").join(format!("{id:06}.json")))
}

fn manifest_paths(dir: &Path) -> Result<Vec<PathBuf>> {
    let manifests = dir.join("manifests");
    let mut names: Vec<PathBuf> = fs::read_dir(&manifests)
        .with_context(|| format!("{}: no snapshots here", manifests.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    Ok(names)
}

/// Every manifest header of an episode's snapshot directory, in order
/// (without entries: listing stays cheap however large the trees).
pub fn list_manifests(dir: &Path) -> Result<Vec<Manifest>> {
    manifest_paths(dir)?.iter().map(|p| read_header(p)).collect()
}

/// The manifest with the highest id in an episode's snapshot directory.
pub fn latest_manifest(dir: &Path) -> Result<Manifest> {
    let names = manifest_paths(dir)?;
    let last = names
        .last()
        .with_context(|| format!("{}: no snapshot manifest", dir.join("manifests").display()))?;
    load(dir, last)
}

//! An archive checked as `unpack` would take it, without writing a thing:
//! so that a server can answer an upload (accepted or refused, with the
//! entry and why) before unpacking it, later and off the request's path.
//! Every entry `unpack` refuses is refused here; so is a link beneath
//! another link, which `unpack` would follow.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Taken, each_entry};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Folder,
    File,
    Link,
}

/// The tree an archive would unpack to: each path and what it is.
#[derive(Default)]
struct Tree(HashMap<PathBuf, Kind>);

impl Tree {
    /// Makes the folders above `rel` (and `rel`, for a folder); fails where
    /// one of them is a file or a link.
    fn folders(&mut self, rel: &Path, including: bool) -> Result<()> {
        let mut above: Vec<&Path> = rel.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).collect();
        if including {
            above.insert(0, rel);
        }
        for folder in above.into_iter().rev() {
            match self.0.get(folder) {
                None => {
                    self.0.insert(folder.to_path_buf(), Kind::Folder);
                }
                Some(Kind::Folder) => {}
                Some(_) => bail!("{}: beneath {}, which is not a folder", rel.display(), folder.display()),
            }
        }
        Ok(())
    }

    /// Adds the file or link `rel`; fails where something is there already.
    fn add(&mut self, rel: &Path, kind: Kind) -> Result<()> {
        self.folders(rel, false)?;
        if self.0.insert(rel.to_path_buf(), kind).is_some() {
            bail!("{}: written twice", rel.display());
        }
        Ok(())
    }
}

/// Checks `archive` as [`super::unpack`] would unpack it, with the same
/// `allow` and `take`; whether it holds a folder at `folder`.
pub fn check(
    archive: impl Read,
    allow: &dyn Fn(&Path) -> Result<()>,
    take: &mut dyn FnMut(&Path, &mut dyn Read) -> Result<bool>,
    folder: &Path,
) -> Result<bool> {
    let mut tree = Tree::default();
    let mut links = Vec::new();
    each_entry(archive, allow, take, &mut |taken, rel, content| match taken {
        Taken::Folder => tree.folders(rel, true),
        Taken::File(_) => {
            // Read through, as unpacking does: a truncated archive fails here.
            std::io::copy(content, &mut std::io::sink()).with_context(|| format!("{}", rel.display()))?;
            tree.add(rel, Kind::File)
        }
        Taken::Link(_) => {
            links.push(rel.to_path_buf());
            Ok(())
        }
    })?;
    for link in links {
        tree.add(&link, Kind::Link)?;
    }
    Ok(tree.0.get(folder) == Some(&Kind::Folder))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::check;

    /// An archive of `entries`, its links pointing at `to`.
    fn archive(entries: &[(&str, tar::EntryType)], to: &Path) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (name, kind) in entries {
            entry(&mut tar, name, *kind, to);
        }
        tar.into_inner().unwrap()
    }

    fn entry(tar: &mut tar::Builder<Vec<u8>>, name: &str, kind: tar::EntryType, to: &Path) {
        let data: &[u8] = if kind.is_file() { b"x" } else { b"" };
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        if kind.is_symlink() {
            header.set_link_name(to).unwrap();
        }
        header.set_path(name).unwrap();
        header.set_cksum();
        tar.append(&header, data).unwrap();
    }

    fn checked(entries: &[(&str, tar::EntryType)]) -> anyhow::Result<bool> {
        let archive = archive(entries, Path::new("/nowhere"));
        check(
            archive.as_slice(),
            &|_| Ok(()),
            &mut |_, _| Ok(false),
            Path::new("episode"),
        )
    }

    #[test]
    fn a_plain_folder_passes_and_what_unpacking_refuses_is_refused() {
        use tar::EntryType::{Directory, Regular, Symlink};
        assert!(checked(&[("episode/a/b.txt", Regular), ("episode/l", Symlink)]).unwrap());
        assert!(!checked(&[("other.txt", Regular)]).unwrap(), "no folder at episode/");
        let refused = [
            vec![("episode/a", Regular), ("episode/a", Regular)],
            vec![("episode/a", Regular), ("episode/a/b", Regular)],
            vec![("episode/a", Regular), ("episode/a", Directory)],
            vec![("episode/a", Directory), ("episode/a", Regular)],
            vec![("episode/a", Symlink), ("episode/a/b", Regular)],
            vec![("episode/a", Symlink), ("episode/a/b", Symlink)],
            vec![("episode/a", Symlink), ("episode/a", Symlink)],
            vec![("episode/dev", tar::EntryType::Char)],
            vec![("episode/h", tar::EntryType::Link)],
        ];
        for entries in refused {
            assert!(checked(&entries).is_err(), "{entries:?}");
        }
    }

    /// What `check` refuses, `unpack` refuses too (a link beneath a link
    /// included: it would have been made where the first one points).
    #[test]
    fn every_refusal_of_unpack_is_one_of_check() {
        use tar::EntryType::{Regular, Symlink};
        let cases = [
            vec![("episode/a", Regular), ("episode/a", Regular)],
            vec![("episode/a", Regular), ("episode/a/b", Regular)],
            vec![("episode/a", Symlink), ("episode/a/b", Regular)],
            vec![("episode/a", Symlink), ("episode/a/b", Symlink)],
        ];
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        for (n, entries) in cases.iter().enumerate() {
            let archive = archive(entries, &outside);
            let into = tmp.path().join(n.to_string());
            let unpacked = super::super::unpack(archive.as_slice(), &into, &|_| Ok(()), &mut |_, _| Ok(false));
            assert!(unpacked.is_err(), "unpack took {entries:?}");
            assert!(checked(entries).is_err(), "check took {entries:?}");
        }
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "made outside the target"
        );
    }
}

//! An episode's result as one tar archive: `result.json` (its result
//! line) and the episode's folder under `episode/`; a suspended episode
//! (a stopped worker's, to be resumed) is the folder alone. Packing never follows
//! a symbolic link (an agent's script may have pointed one at the worker's
//! own files); unpacking writes only beneath its target, refuses links out,
//! devices and `..`, and makes the symbolic links last, so nothing is ever
//! written through one.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::bench::result_line::ResultLine;

/// The most entries an upload may hold.
const MAX_ENTRIES: usize = 500_000;

/// Writes the archive of `result` (none for a suspended episode) and,
/// when it has one, its episode folder.
pub fn pack(result: Option<&ResultLine>, episode_dir: Option<&Path>, out: impl Write) -> Result<()> {
    let mut tar = tar::Builder::new(out);
    tar.follow_symlinks(false);
    if let Some(result) = result {
        let line = serde_json::to_vec(result)?;
        let mut header = tar::Header::new_gnu();
        header.set_size(line.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, "result.json", line.as_slice())?;
    }
    if let Some(dir) = episode_dir.filter(|d| d.is_dir()) {
        append_folder(&mut tar, dir).with_context(|| format!("packing {}", dir.display()))?;
    }
    tar.into_inner()?.flush()?;
    Ok(())
}

/// Appends `dir` as `episode/`: its folders, files and symbolic links (as
/// links); what is none of these (the socket of a host that died with its
/// sandbox open) is left out.
fn append_folder<W: Write>(tar: &mut tar::Builder<W>, dir: &Path) -> Result<()> {
    for entry in walkdir::WalkDir::new(dir).follow_links(false) {
        let entry = entry?;
        let kind = entry.file_type();
        if !(kind.is_dir() || kind.is_file() || kind.is_symlink()) {
            continue;
        }
        let rel = entry.path().strip_prefix(dir)?;
        let name = Path::new("episode").join(rel);
        tar.append_path_with_name(entry.path(), &name)?;
    }
    Ok(())
}

/// What an unpacked upload holds.
pub struct Unpacked {
    /// Its result line (none for a suspended episode).
    pub result: Option<ResultLine>,
    /// The episode folder, if the archive had one.
    pub episode: Option<PathBuf>,
}

/// Unpacks an archive into `into` (created when the archive has more than
/// its result; must not exist). An error names the entry and why it was
/// refused; `into` is then left for the caller to remove.
pub fn unpack(archive: impl Read, into: &Path) -> Result<Unpacked> {
    let mut created = false;
    let mut archive = tar::Archive::new(archive);
    let mut result = None;
    let mut links = Vec::new();
    for (n, entry) in archive.entries()?.enumerate() {
        if n >= MAX_ENTRIES {
            bail!("the upload holds more than {MAX_ENTRIES} entries");
        }
        let mut entry = entry.context("reading the upload")?;
        let path = entry.path()?.into_owned();
        let rel = checked(&path)?;
        let kind = entry.header().entry_type();
        if rel == Path::new("result.json") && kind.is_file() {
            let mut text = Vec::new();
            entry.by_ref().take(1 << 20).read_to_end(&mut text)?;
            result = Some(serde_json::from_slice::<ResultLine>(&text).context("result.json is not a result line")?);
            continue;
        }
        if !rel.starts_with("episode") {
            bail!("{}: the upload holds only result.json and episode/", path.display());
        }
        if !created {
            std::fs::create_dir(into).with_context(|| format!("creating {}", into.display()))?;
            created = true;
        }
        let target = into.join(&rel);
        match kind {
            k if k.is_dir() => std::fs::create_dir_all(&target)?,
            k if k.is_file() => {
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&target)
                    .with_context(|| format!("{}: written twice in the upload", path.display()))?;
                std::io::copy(&mut entry, &mut file)?;
                let mode = entry.header().mode().unwrap_or(0o644) & 0o755;
                std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(mode | 0o600))?;
            }
            k if k.is_symlink() => {
                let to = entry.link_name()?.map(|l| l.into_owned()).unwrap_or_default();
                links.push((target, to));
            }
            other => bail!(
                "{}: a {other:?} entry; only files, folders and symbolic links are taken",
                path.display()
            ),
        }
    }
    // Last: a link made earlier could have had a later entry written through it.
    for (at, to) in links {
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(&to, &at).with_context(|| format!("{}: made twice in the upload", at.display()))?;
    }
    let episode = into.join("episode");
    Ok(Unpacked {
        result,
        episode: episode.is_dir().then_some(episode),
    })
}

/// A relative path of plain names: no root, no `..`, no `.` games.
fn checked(path: &Path) -> Result<PathBuf> {
    let mut rel = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => rel.push(name),
            Component::CurDir => {}
            _ => bail!("{}: a path outside the upload", path.display()),
        }
    }
    if rel.as_os_str().is_empty() {
        bail!("an entry with an empty path");
    }
    Ok(rel)
}

#[cfg(test)]
mod tests {
    use super::{pack, unpack};
    use crate::bench::result_line::ResultLine;

    fn result() -> ResultLine {
        ResultLine::infra_failed("digits/a/1", "digits", "a", 1, "digits/a/1", 1, "test")
    }

    #[test]
    fn an_episode_round_trips_and_its_links_stay_links() {
        let tmp = tempfile::tempdir().unwrap();
        let episode = tmp.path().join("ep");
        std::fs::create_dir_all(episode.join("workspace/sub")).unwrap();
        std::fs::write(episode.join("episode.json"), b"{}").unwrap();
        std::fs::write(episode.join("workspace/sub/train.py"), b"print(1)").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", episode.join("workspace/leak")).unwrap();
        let mut archive = Vec::new();
        pack(Some(&result()), Some(&episode), &mut archive).unwrap();
        let into = tmp.path().join("into");
        let unpacked = unpack(archive.as_slice(), &into).unwrap();
        assert_eq!(unpacked.result.unwrap().id, "digits/a/1");
        let dir = unpacked.episode.unwrap();
        assert_eq!(std::fs::read(dir.join("workspace/sub/train.py")).unwrap(), b"print(1)");
        let leak = dir.join("workspace/leak");
        assert!(
            leak.symlink_metadata().unwrap().file_type().is_symlink(),
            "packed as a link, not its target"
        );
    }

    /// A hand-made archive with one hostile entry after a good result.
    fn hostile(entry: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        let line = serde_json::to_vec(&result()).unwrap();
        let mut header = tar::Header::new_gnu();
        header.set_size(line.len() as u64);
        header.set_cksum();
        tar.append_data(&mut header, "result.json", line.as_slice()).unwrap();
        entry(&mut tar);
        tar.into_inner().unwrap()
    }

    fn raw_entry(tar: &mut tar::Builder<Vec<u8>>, name: &[u8], kind: tar::EntryType, link: Option<&str>, data: &[u8]) {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        if let Some(link) = link {
            header.set_link_name(link).unwrap();
        }
        header.set_cksum();
        tar.append(&header, data).unwrap();
    }

    #[test]
    fn hostile_entries_are_refused_with_their_name_and_nothing_lands_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "dotdot",
                hostile(|t| raw_entry(t, b"episode/../../escaped", tar::EntryType::Regular, None, b"x")),
                "outside the upload",
            ),
            (
                "absolute",
                hostile(|t| raw_entry(t, b"/tmp/escaped", tar::EntryType::Regular, None, b"x")),
                "outside the upload",
            ),
            (
                "device",
                hostile(|t| raw_entry(t, b"episode/dev", tar::EntryType::Char, None, b"")),
                "only files, folders and symbolic links",
            ),
            (
                "hardlink",
                hostile(|t| raw_entry(t, b"episode/h", tar::EntryType::Link, Some("/etc/passwd"), b"")),
                "only files, folders and symbolic links",
            ),
            (
                "elsewhere",
                hostile(|t| raw_entry(t, b"other/file", tar::EntryType::Regular, None, b"x")),
                "only result.json and episode/",
            ),
        ];
        for (name, archive, why) in cases {
            let into = tmp.path().join(name);
            let error = format!("{:#}", unpack(archive.as_slice(), &into).err().expect(name));
            assert!(error.contains(why), "{name}: {error}");
        }
        assert!(!tmp.path().join("escaped").exists());
        assert!(!std::path::Path::new("/tmp/escaped").exists());
    }

    #[test]
    fn nothing_is_written_through_a_link_in_the_upload() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let archive = hostile(|t| {
            raw_entry(
                t,
                b"episode/d",
                tar::EntryType::Symlink,
                Some(outside.to_str().unwrap()),
                b"",
            );
            raw_entry(t, b"episode/d/planted", tar::EntryType::Regular, None, b"x");
        });
        let into = tmp.path().join("into");
        let error = unpack(archive.as_slice(), &into);
        assert!(!outside.join("planted").exists(), "written through the link");
        // The file landed in a real folder; the link, made last, collides with it.
        assert!(error.is_err());
    }
}

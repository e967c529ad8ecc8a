//! An episode's result as one tar archive: `result.json` (its result
//! line) and the episode's folder under `episode/`; a suspended episode
//! (a stopped worker's, to be resumed) is the folder alone. Packing and
//! unpacking are `record::archive`'s: never following a symbolic link (an
//! agent's script may have pointed one at the worker's own files), never
//! failing on what an agent left, never writing outside the target.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::bench::result_line::ResultLine;
use crate::record::archive;

/// Writes the archive of `result` (none for a suspended episode) and,
/// when it has one, its episode folder (as `record::archive` packs it:
/// what has no content, a FIFO or a socket, is left out and logged).
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
        let left_out = archive::append_tree(&mut tar, dir, Path::new("episode"), |_| true)
            .with_context(|| format!("packing {}", dir.display()))?;
        for left in left_out {
            tracing::info!(path = %left.path.display(), why = %left.why, "left out of the upload");
        }
    }
    tar.into_inner()?.flush()?;
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
    let mut result = None;
    archive::unpack(archive, into, &allow, &mut |rel, entry| take(rel, entry, &mut result))?;
    let episode = into.join("episode");
    Ok(Unpacked {
        result,
        episode: episode.is_dir().then_some(episode),
    })
}

/// What a checked upload holds: its result line, and whether it has an
/// episode folder.
pub struct Checked {
    /// Its result line (none for a suspended episode).
    pub result: Option<ResultLine>,
    /// Whether it holds an episode folder.
    pub folder: bool,
}

/// Checks an archive as `unpack` would take it, writing nothing: an
/// archive that passes unpacks (short of the disk failing).
pub fn check(archive: impl Read) -> Result<Checked> {
    let mut result = None;
    let folder = archive::check(
        archive,
        &allow,
        &mut |rel, entry| take(rel, entry, &mut result),
        Path::new("episode"),
    )?;
    Ok(Checked { result, folder })
}

/// An upload holds result.json and episode/, nothing else.
fn allow(rel: &Path) -> Result<()> {
    if rel != Path::new("result.json") && !rel.starts_with("episode") {
        bail!("{}: the upload holds only result.json and episode/", rel.display());
    }
    Ok(())
}

/// Reads result.json into `result` instead of writing it.
fn take(rel: &Path, entry: &mut dyn Read, result: &mut Option<ResultLine>) -> Result<bool> {
    if rel != Path::new("result.json") {
        return Ok(false);
    }
    let mut text = Vec::new();
    entry.take(1 << 20).read_to_end(&mut text)?;
    *result = Some(serde_json::from_slice::<ResultLine>(&text).context("result.json is not a result line")?);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::{check, pack, unpack};
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
        let checked = check(archive.as_slice()).unwrap();
        assert!(checked.folder && checked.result.is_some());
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
                "outside the archive",
            ),
            (
                "absolute",
                hostile(|t| raw_entry(t, b"/tmp/escaped", tar::EntryType::Regular, None, b"x")),
                "outside the archive",
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
            let checked = format!("{:#}", check(archive.as_slice()).err().expect(name));
            assert!(checked.contains(why), "{name}, checked: {checked}");
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

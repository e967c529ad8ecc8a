//! Records as tar archives, whatever an agent left in them, both ways.
//!
//! Packing records every entry as what it is: folders, files, symbolic
//! links as links (never followed, and nothing is packed beneath one), any
//! name (not UTF-8, with newlines, longer than a header holds: GNU long
//! names); a sparse file as a GNU sparse entry, its holes not stored, so a
//! file of terabytes that holds nothing costs nothing. What has no content
//! to record (a FIFO, a socket, a device) or cannot be read is left out and
//! named in what `pack` returns. Packing never fails on what the folder
//! holds, only on writing the archive.
//!
//! Unpacking writes only beneath its target: a path with a root or `..`,
//! a hard link, a device or a FIFO is refused with its name; symbolic links
//! are made last, so nothing is ever written through one; a sparse entry
//! keeps its holes.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};

mod check;
pub use check::check;

/// Something of a packed folder that the archive does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// Its path inside the archive.
    pub path: PathBuf,
    /// Why (`a FIFO`, `unreadable: ...`).
    pub why: String,
}

/// Files at least this large whose blocks on disk cover less than their
/// size are packed as sparse entries.
const SPARSE_FROM: u64 = 1 << 20;

/// Appends `dir` under `prefix` (every entry `keep` accepts by its path
/// relative to `dir`); returns what was left out.
pub fn append_tree<W: Write>(
    tar: &mut tar::Builder<W>,
    dir: &Path,
    prefix: &Path,
    keep: impl Fn(&Path) -> bool,
) -> io::Result<Vec<LeftOut>> {
    let mut left_out = Vec::new();
    let mut walk = walkdir::WalkDir::new(dir)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = walk.next() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                let path = error
                    .path()
                    .and_then(|p| p.strip_prefix(dir).ok())
                    .unwrap_or(Path::new(""));
                left_out.push(LeftOut {
                    path: prefix.join(path),
                    why: format!(
                        "unreadable: {}",
                        error.io_error().map_or(error.to_string(), |e| e.to_string())
                    ),
                });
                continue;
            }
        };
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        if rel.as_os_str().is_empty() {
            continue;
        }
        if !keep(rel) {
            if entry.file_type().is_dir() {
                walk.skip_current_dir();
            }
            continue;
        }
        let name = prefix.join(rel);
        if let Some(why) = append_entry(tar, entry.path(), &name)? {
            left_out.push(LeftOut { path: name, why });
        }
    }
    Ok(left_out)
}

/// Appends one entry as `name`; Some(why) when it is left out. Errors
/// only when the archive cannot be written.
fn append_entry<W: Write>(tar: &mut tar::Builder<W>, path: &Path, name: &Path) -> io::Result<Option<String>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(error) => return Ok(Some(format!("unreadable: {error}"))),
    };
    let kind = meta.file_type();
    let mut header = tar::Header::new_gnu();
    header.set_mode(meta.mode() & 0o7777);
    header.set_mtime(meta.mtime().max(0) as u64);
    if kind.is_dir() {
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        tar.append_data(&mut header, name, io::empty())?;
    } else if kind.is_symlink() {
        let Ok(target) = std::fs::read_link(path) else {
            return Ok(Some("a symbolic link that could not be read".into()));
        };
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        tar.append_link(&mut header, name, &target)?;
    } else if kind.is_file() {
        return append_file(tar, path, name, header);
    } else {
        return Ok(Some(format!("{}: no content to record", special_kind(&meta))));
    }
    Ok(None)
}

/// What kind of special file `meta` is, in words.
fn special_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "neither a file, a folder nor a link"
    }
}

/// Appends a regular file, opened without following a link or blocking
/// (it may have become a FIFO since it was listed); sparse when it is.
fn append_file<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &Path,
    name: &Path,
    mut header: tar::Header,
) -> io::Result<Option<String>> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let (file, meta) = match opened.and_then(|f| f.metadata().map(|m| (f, m))) {
        Ok((file, meta)) if meta.is_file() => (file, meta),
        Ok((_, meta)) => return Ok(Some(format!("{}: no content to record", special_kind(&meta)))),
        Err(error) => return Ok(Some(format!("unreadable: {error}"))),
    };
    let size = meta.len();
    if size >= SPARSE_FROM && meta.blocks() * 512 < size {
        let segments = data_segments(&file, size);
        return append_sparse(tar, &file, name, header, size, &segments).map(|()| None);
    }
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    // Exactly `size` bytes, whatever the file does meanwhile.
    let exact = Exact {
        file: &file,
        at: 0,
        end: size,
    };
    tar.append_data(&mut header, name, exact)?;
    Ok(None)
}

/// The data segments of `file` (`[start, end)`), holes skipped; each
/// starts and ends on a 512-byte boundary (the last may end at `size`),
/// as tar's sparse entries must, and a last one of no bytes at `size`
/// marks a hole at the end.
fn data_segments(file: &File, size: u64) -> Vec<(u64, u64)> {
    let mut segments = super::extents::data_ranges(file, size, 512);
    if segments.last().is_none_or(|last| last.1 < size) {
        segments.push((size, size));
    }
    segments
}

/// A GNU sparse entry ('S'): up to four segments in the header, the rest in
/// extension headers of 21 each, then the segments' bytes.
fn append_sparse<W: Write>(
    tar: &mut tar::Builder<W>,
    file: &File,
    name: &Path,
    mut header: tar::Header,
    size: u64,
    segments: &[(u64, u64)],
) -> io::Result<()> {
    let stored: u64 = segments.iter().map(|(a, b)| b - a).sum();
    header.set_entry_type(tar::EntryType::GNUSparse);
    header.set_size(stored);
    let gnu = header.as_gnu_mut().expect("a GNU header");
    number(&mut gnu.realsize, size);
    let mut chunks = segments.chunks(4);
    let first = chunks.next().unwrap_or(&[]);
    for (slot, &(start, end)) in gnu.sparse.iter_mut().zip(first) {
        number(&mut slot.offset, start);
        number(&mut slot.numbytes, end - start);
    }
    let rest: Vec<&[(u64, u64)]> = segments.get(4..).unwrap_or(&[]).chunks(21).collect();
    gnu.isextended[0] = u8::from(!rest.is_empty());
    let mut extensions = Vec::with_capacity(rest.len() * 512);
    for (i, chunk) in rest.iter().enumerate() {
        let mut block = [0u8; 512];
        for (j, &(start, end)) in chunk.iter().enumerate() {
            number(&mut block[j * 24..j * 24 + 12], start);
            number(&mut block[j * 24 + 12..j * 24 + 24], end - start);
        }
        block[504] = u8::from(i + 1 < rest.len());
        extensions.extend_from_slice(&block);
    }
    let data = Segments {
        file,
        segments,
        index: 0,
        at: segments.first().map_or(0, |s| s.0),
    };
    tar.append_data(&mut header, name, extensions.as_slice().chain(data))
}

/// Writes `value` in a numeric header field: octal, or GNU's base-256 when
/// it does not fit.
fn number(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    if value < 1u64 << (3 * digits) {
        let text = format!("{value:0digits$o}");
        field[..digits].copy_from_slice(text.as_bytes());
        field[digits] = 0;
    } else {
        field.fill(0);
        let n = field.len();
        field[n - 8..].copy_from_slice(&value.to_be_bytes());
        field[0] = 0x80;
    }
}

/// A file's first `end` bytes, zeros past what it holds now.
struct Exact<'a> {
    file: &'a File,
    at: u64,
    end: u64,
}

impl Read for Exact<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.at).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = match self.file.read_at(&mut buf[..want], self.at)? {
            0 => {
                buf[..want].fill(0);
                want
            }
            n => n,
        };
        self.at += n as u64;
        Ok(n)
    }
}

/// The bytes of a file's data segments, one after another.
struct Segments<'a> {
    file: &'a File,
    segments: &'a [(u64, u64)],
    index: usize,
    at: u64,
}

impl Read for Segments<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while let Some(&(_, end)) = self.segments.get(self.index) {
            if self.at < end {
                let mut exact = Exact {
                    file: self.file,
                    at: self.at,
                    end,
                };
                let n = exact.read(buf)?;
                self.at += n as u64;
                return Ok(n);
            }
            self.index += 1;
            self.at = self.segments.get(self.index).map_or(0, |s| s.0);
        }
        Ok(0)
    }
}

/// The most entries an archive unpacked may hold.
const MAX_ENTRIES: usize = 500_000;

/// What an entry of an archive is, as [`unpack`] takes it.
enum Taken {
    Folder,
    /// A file, with its permission bits (its content is the entry's).
    File(u32),
    /// A symbolic link, to where it points.
    Link(PathBuf),
}

/// Each entry of `archive` that `take` does not claim, its path checked
/// (and by `allow`), given to `visit` with what it is; an entry of any
/// other kind is refused, as are more than [`MAX_ENTRIES`].
fn each_entry(
    archive: impl Read,
    allow: &dyn Fn(&Path) -> Result<()>,
    take: &mut dyn FnMut(&Path, &mut dyn Read) -> Result<bool>,
    visit: &mut dyn FnMut(Taken, &Path, &mut dyn Read) -> Result<()>,
) -> Result<()> {
    let mut archive = tar::Archive::new(archive);
    for (n, entry) in archive.entries()?.enumerate() {
        if n >= MAX_ENTRIES {
            bail!("the archive holds more than {MAX_ENTRIES} entries");
        }
        let mut entry = entry.context("reading the archive")?;
        let path = entry.path()?.into_owned();
        let rel = checked(&path)?;
        allow(&rel)?;
        let kind = entry.header().entry_type();
        let file = kind.is_file() || kind.is_gnu_sparse();
        if file && take(&rel, &mut entry)? {
            continue;
        }
        let taken = if kind.is_dir() {
            Taken::Folder
        } else if file {
            Taken::File(entry.header().mode().unwrap_or(0o644) & 0o755)
        } else if kind.is_symlink() {
            Taken::Link(entry.link_name()?.map(|l| l.into_owned()).unwrap_or_default())
        } else {
            bail!(
                "{}: a {kind:?} entry; only files, folders and symbolic links are taken",
                path.display()
            );
        };
        visit(taken, &rel, &mut entry)?;
    }
    Ok(())
}

/// Unpacks `archive` beneath `into` (made when the first entry is; must
/// not exist), each entry's path first checked by `allow` (an error names
/// it and why). Returns the entries `take` claimed instead of writing them.
pub fn unpack(
    archive: impl Read,
    into: &Path,
    allow: &dyn Fn(&Path) -> Result<()>,
    take: &mut dyn FnMut(&Path, &mut dyn Read) -> Result<bool>,
) -> Result<()> {
    let mut links = Vec::new();
    let mut created = false;
    each_entry(archive, allow, take, &mut |taken, rel, content| {
        if !created {
            std::fs::create_dir(into).with_context(|| format!("creating {}", into.display()))?;
            created = true;
        }
        let target = into.join(rel);
        match taken {
            Taken::Folder => std::fs::create_dir_all(&target)?,
            Taken::File(mode) => {
                write_file(content, &target, mode).with_context(|| format!("{}: written twice", rel.display()))?
            }
            Taken::Link(to) => links.push((target, to)),
        }
        Ok(())
    })?;
    // Last: a link made earlier could have had a later entry written through it.
    for (at, to) in links {
        // Beneath another link, it would be made wherever that one points.
        let mut above = at.ancestors().skip(1).take_while(|a| a.starts_with(into) && *a != into);
        if above.any(|a| a.is_symlink()) {
            bail!("{}: a symbolic link beneath another", at.display());
        }
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(&to, &at).with_context(|| format!("{}: made twice", at.display()))?;
    }
    Ok(())
}

/// What a run of zeros is compared with.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// A records archive (a download of `/records/<id>`, say) unpacked as
/// [`unpack`] does into a new temporary folder; the folder of records in
/// it (its one top-level folder, else the whole) and the temporary folder,
/// removed when dropped.
pub fn unpack_file(path: &Path) -> Result<(tempfile::TempDir, PathBuf)> {
    let file = File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let tmp = tempfile::tempdir()?;
    let into = tmp.path().join("records");
    unpack(io::BufReader::new(file), &into, &|_| Ok(()), &mut |_, _| Ok(false))
        .with_context(|| format!("{}: not an archive of records mlrb unpacks", path.display()))?;
    let folders: Vec<PathBuf> = std::fs::read_dir(&into)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    let records = match folders.as_slice() {
        [one] => one.clone(),
        _ => into,
    };
    Ok((tmp, records))
}

/// Writes `from` as a new file `target`; runs of zeros become holes.
fn write_file(from: &mut dyn Read, target: &Path, mode: u32) -> Result<()> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(target)?;
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        // Compared as slices (a memcmp): fast in any build.
        if buf[..n] != ZEROS[..n] {
            file.write_all_at(&buf[..n], at)?;
        }
        at += n as u64;
    }
    file.set_len(at)?;
    file.flush()?;
    std::fs::set_permissions(target, std::fs::Permissions::from_mode(mode | 0o600))?;
    Ok(())
}

/// A relative path of plain names: no root, no `..`, no `.` games.
fn checked(path: &Path) -> Result<PathBuf> {
    let mut rel = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => rel.push(name),
            Component::CurDir => {}
            _ => bail!("{}: a path outside the archive's folder", path.display()),
        }
    }
    if rel.as_os_str().is_empty() {
        bail!("an entry with an empty path");
    }
    Ok(rel)
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    /// A folder as an agent's scripts may leave it.
    fn hostile_folder(dir: &Path) {
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("plain.txt"), b"plain").unwrap();
        let fifo = std::ffi::CString::new(dir.join("a-fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo reads only the path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let _socket = std::os::unix::net::UnixListener::bind(dir.join("a-socket")).unwrap();
        std::fs::write(dir.join(std::ffi::OsStr::from_bytes(b"not-utf8-\xff")), b"x").unwrap();
        std::fs::write(dir.join("a\nnewline"), b"x").unwrap();
        let deep = dir.join("d".repeat(120)).join("e".repeat(120));
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("f".repeat(200)), b"deep").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("sub/link-out")).unwrap();
        std::os::unix::fs::symlink("l".repeat(300), dir.join("long-link")).unwrap();
        // 2 GiB of holes, 4 KiB of data in the middle and 5 bytes at the end.
        let sparse = File::create(dir.join("sparse")).unwrap();
        sparse.write_all_at(&[7u8; 4096], 1 << 30).unwrap();
        sparse.write_all_at(b"tail\n", (2 << 30) - 5).unwrap();
        // And one that ends in a hole.
        File::create(dir.join("holes")).unwrap().set_len(3 << 30).unwrap();
    }

    #[test]
    fn a_hostile_folder_packs_as_what_it_holds_and_unpacks_the_same() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("in");
        hostile_folder(&dir);
        let mut tar = tar::Builder::new(Vec::new());
        let left = append_tree(&mut tar, &dir, Path::new("run"), |_| true).unwrap();
        let bytes = tar.into_inner().unwrap();
        let mut why: Vec<String> = left.iter().map(|l| l.why.clone()).collect();
        why.sort();
        assert_eq!(why, ["a FIFO: no content to record", "a socket: no content to record"]);
        assert!(bytes.len() < 1 << 20, "the holes were packed: {} bytes", bytes.len());
        let into = tmp.path().join("out");
        unpack(bytes.as_slice(), &into, &|_| Ok(()), &mut |_, _| Ok(false)).unwrap();
        let out = into.join("run");
        let sparse = std::fs::metadata(out.join("sparse")).unwrap();
        assert_eq!(sparse.len(), 2 << 30);
        assert!(sparse.blocks() * 512 < 1 << 20, "unpacked whole");
        assert_eq!(std::fs::metadata(out.join("holes")).unwrap().len(), 3 << 30);
        let file = File::open(out.join("sparse")).unwrap();
        let (mut middle, mut tail) = ([0u8; 4096], [0u8; 5]);
        file.read_exact_at(&mut middle, 1 << 30).unwrap();
        file.read_exact_at(&mut tail, (2 << 30) - 5).unwrap();
        assert!(middle.iter().all(|&b| b == 7) && &tail == b"tail\n");
        assert_eq!(
            std::fs::read(out.join(std::ffi::OsStr::from_bytes(b"not-utf8-\xff"))).unwrap(),
            b"x"
        );
        assert_eq!(std::fs::read(out.join("a\nnewline")).unwrap(), b"x");
        let deep = out.join("d".repeat(120)).join("e".repeat(120)).join("f".repeat(200));
        assert_eq!(std::fs::read(deep).unwrap(), b"deep");
        assert_eq!(
            std::fs::read_link(out.join("sub/link-out")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert_eq!(
            std::fs::read_link(out.join("long-link")).unwrap(),
            Path::new(&"l".repeat(300))
        );
        assert!(!out.join("a-fifo").exists() && !out.join("a-socket").exists());
    }

    /// An archive of one crafted entry.
    fn crafted(name: &[u8], kind: tar::EntryType, link: Option<&str>) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_entry_type(kind);
        header.set_size(1);
        if let Some(link) = link {
            header.set_link_name(link).unwrap();
            header.set_size(0);
        }
        header.set_cksum();
        let data: &[u8] = if link.is_some() { b"" } else { b"x" };
        tar.append(&header, data).unwrap();
        tar.into_inner().unwrap()
    }

    #[test]
    fn an_unpacked_archive_never_writes_outside_its_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let cases = [
            (
                "dotdot",
                crafted(b"a/../../escaped", tar::EntryType::Regular, None),
                "outside",
            ),
            (
                "absolute",
                crafted(b"/tmp/mlrb-escaped", tar::EntryType::Regular, None),
                "outside",
            ),
            ("device", crafted(b"dev", tar::EntryType::Char, None), "only files"),
            ("fifo", crafted(b"fifo", tar::EntryType::Fifo, None), "only files"),
            (
                "hardlink",
                crafted(b"h", tar::EntryType::Link, Some("/etc/passwd")),
                "only files",
            ),
        ];
        for (name, archive, why) in cases {
            let error = unpack(archive.as_slice(), &tmp.path().join(name), &|_| Ok(()), &mut |_, _| {
                Ok(false)
            });
            let error = format!("{:#}", error.expect_err(name));
            assert!(error.contains(why), "{name}: {error}");
        }
        // A link, then a file written through it: the file lands in a real
        // folder and the link, made last, collides with it.
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        tar.append_link(&mut header, "d", &outside).unwrap();
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..9].copy_from_slice(b"d/planted");
        header.set_size(1);
        header.set_cksum();
        tar.append(&header, &b"x"[..]).unwrap();
        let bytes = tar.into_inner().unwrap();
        let result = unpack(
            bytes.as_slice(),
            &tmp.path().join("through"),
            &|_| Ok(()),
            &mut |_, _| Ok(false),
        );
        assert!(result.is_err());
        assert!(!outside.join("planted").exists(), "written through the link");
        assert!(!tmp.path().join("escaped").exists() && !Path::new("/tmp/mlrb-escaped").exists());
    }
}

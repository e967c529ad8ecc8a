//! Reading a tree the agent can write to without ever leaving it.
//!
//! Every entry is reached from its parent directory's handle by a single
//! name (never a path with `/`), opened with `O_NOFOLLOW | O_NONBLOCK`, and
//! its type is decided by `fstat` on the opened handle, not by the directory
//! listing: a script that swaps a file for a symbolic link, a FIFO or
//! another directory between the listing and the open makes the walk see
//! the new entry as what it now is, never a file outside the tree, and
//! never blocks on a FIFO. Reads come from that same handle.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

/// What a directory entry is, from its own handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A FIFO (named pipe).
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Anything else.
    Unknown,
}

impl Kind {
    /// The kind `stat` describes.
    pub fn of(stat: &Stat) -> Self {
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Directory,
            FileType::Symlink => Self::Symlink,
            FileType::Fifo => Self::Fifo,
            FileType::Socket => Self::Socket,
            FileType::CharacterDevice => Self::CharDevice,
            FileType::BlockDevice => Self::BlockDevice,
            FileType::Unknown => Self::Unknown,
        }
    }

    /// How a user would name it, e.g. "a FIFO (named pipe)".
    pub fn describe(self) -> &'static str {
        match self {
            Self::File => "a regular file",
            Self::Directory => "a directory",
            Self::Symlink => "a symbolic link",
            Self::Fifo => "a FIFO (named pipe)",
            Self::Socket => "a socket",
            Self::CharDevice => "a character device",
            Self::BlockDevice => "a block device",
            Self::Unknown => "a special file",
        }
    }
}

/// An entry opened beneath its parent, typed by its own handle.
pub enum Opened {
    /// A regular file, open for reading, and its `stat`.
    File(File, Stat),
    /// A directory, open as a handle, and its `stat`.
    Dir(DirHandle, Stat),
    /// A symbolic link (never followed).
    Symlink,
    /// A FIFO, socket or device: never read.
    Special(Kind),
}

/// An open directory of the tree; the only way to reach what is inside it.
pub struct DirHandle {
    fd: OwnedFd,
}

/// A single path component, refused if it could name anything but an
/// entry of this directory.
fn component(name: &[u8]) -> io::Result<CString> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a single name inside the directory",
        ));
    }
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a name may not contain NUL"))
}

const OPEN_ENTRY: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

impl DirHandle {
    /// Opens the root of a tree. The root's own path is the host's choice
    /// (a run directory), so it is opened as given; nothing below it is.
    pub fn open_root(path: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self { fd })
    }

    /// A second handle to the same directory.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            fd: self.fd.try_clone()?,
        })
    }

    /// The names in this directory (bytes, as the kernel has them), sorted.
    pub fn names(&self) -> io::Result<Vec<Vec<u8>>> {
        self.names_up_to(usize::MAX)
    }

    /// At most `max` names in this directory, sorted: a folder of millions
    /// of entries is never held whole when only a few can be recorded.
    pub fn names_up_to(&self, max: usize) -> io::Result<Vec<Vec<u8>>> {
        let mut dir = rustix::fs::Dir::read_from(&self.fd)?;
        let mut names = Vec::new();
        while names.len() < max
            && let Some(entry) = dir.read()
        {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(name.to_vec());
            }
        }
        names.sort();
        Ok(names)
    }

    /// The status of the entry `name` itself (a link is not followed).
    pub fn stat_entry(&self, name: &[u8]) -> io::Result<Stat> {
        Ok(rustix::fs::statat(
            &self.fd,
            component(name)?,
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    /// Opens the entry `name` without following a link and without
    /// blocking, and types it by the opened handle.
    pub fn open_entry(&self, name: &[u8]) -> io::Result<Opened> {
        let name = component(name)?;
        let fd = match rustix::fs::openat(&self.fd, &name, OPEN_ENTRY, Mode::empty()) {
            Ok(fd) => fd,
            // O_NOFOLLOW on a link fails with ELOOP; a socket cannot be opened.
            Err(rustix::io::Errno::LOOP) => return Ok(Opened::Symlink),
            Err(rustix::io::Errno::NXIO) => return Ok(Opened::Special(Kind::Socket)),
            Err(e) => return Err(e.into()),
        };
        let stat = rustix::fs::fstat(&fd)?;
        Ok(match Kind::of(&stat) {
            Kind::File => Opened::File(File::from(fd), stat),
            Kind::Directory => Opened::Dir(Self { fd }, stat),
            Kind::Symlink => Opened::Symlink,
            special => Opened::Special(special),
        })
    }

    /// Opens the subdirectory `name`; anything else (a link included) is an error.
    pub fn open_dir(&self, name: &[u8]) -> io::Result<Self> {
        match self.open_entry(name)? {
            Opened::Dir(dir, _) => Ok(dir),
            _ => Err(io::Error::new(io::ErrorKind::NotADirectory, "not a directory")),
        }
    }

    /// Opens the regular file `name` for reading; anything else is an error
    /// naming what it is.
    pub fn open_file(&self, name: &[u8]) -> io::Result<(File, Stat)> {
        match self.open_entry(name)? {
            Opened::File(file, stat) => Ok((file, stat)),
            Opened::Dir(..) => Err(io::Error::new(io::ErrorKind::IsADirectory, "is a directory")),
            Opened::Symlink => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a symbolic link, which is never followed here",
            )),
            Opened::Special(kind) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("is {}, not a regular file", kind.describe()),
            )),
        }
    }

    /// The target of the symbolic link `name`, as bytes.
    pub fn read_link(&self, name: &[u8]) -> io::Result<Vec<u8>> {
        let target = rustix::fs::readlinkat(&self.fd, component(name)?, Vec::new())?;
        Ok(target.into_bytes())
    }

    /// Follows `rel` (`a/b/c`) down from this directory, one name at a time,
    /// refusing any link on the way.
    pub fn descend(&self, rel: &str) -> io::Result<Self> {
        let mut dir = self.try_clone()?;
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            dir = dir.open_dir(part.as_bytes())?;
        }
        Ok(dir)
    }

    /// Removes the entry `name` (a directory with everything inside it),
    /// never following a link.
    pub fn remove_entry(&self, name: &[u8]) -> io::Result<()> {
        let cname = component(name)?;
        match rustix::fs::unlinkat(&self.fd, &cname, AtFlags::empty()) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::ISDIR) => {
                let sub = self.open_dir(name)?;
                for child in sub.names()? {
                    sub.remove_entry(&child)?;
                }
                Ok(rustix::fs::unlinkat(&self.fd, &cname, AtFlags::REMOVEDIR)?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Creates the subdirectory `name` if it is missing and opens it.
    pub fn create_dir(&self, name: &[u8]) -> io::Result<Self> {
        match rustix::fs::mkdirat(&self.fd, component(name)?, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => self.open_dir(name),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates (or truncates) the regular file `name` for writing, refusing
    /// to write through a link or into anything but a regular file.
    pub fn create_file(&self, name: &[u8], mode: u32) -> io::Result<File> {
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::TRUNC
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::NOCTTY
            | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, component(name)?, flags, Mode::from_raw_mode(mode))?;
        if Kind::of(&rustix::fs::fstat(&fd)?) != Kind::File {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
        }
        Ok(File::from(fd))
    }

    /// Makes the symbolic link `name` pointing to `target`.
    pub fn symlink(&self, target: &str, name: &[u8]) -> io::Result<()> {
        Ok(rustix::fs::symlinkat(target, &self.fd, component(name)?)?)
    }

    /// Changes the owner of the entry `name` itself (a link is not followed).
    pub fn chown_entry(&self, name: &[u8], uid: u32, gid: u32) -> io::Result<()> {
        let (uid, gid) = (rustix::fs::Uid::from_raw(uid), rustix::fs::Gid::from_raw(gid));
        Ok(rustix::fs::chownat(
            &self.fd,
            component(name)?,
            Some(uid),
            Some(gid),
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    /// Changes the owner of this directory.
    pub fn chown_self(&self, uid: u32, gid: u32) -> io::Result<()> {
        let (uid, gid) = (rustix::fs::Uid::from_raw(uid), rustix::fs::Gid::from_raw(gid));
        Ok(rustix::fs::fchown(&self.fd, Some(uid), Some(gid))?)
    }
}

impl AsFd for DirHandle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A name for records: the text itself, or `None` when it is not UTF-8.
pub fn utf8_name(name: &[u8]) -> Option<&str> {
    std::str::from_utf8(name).ok()
}

/// A name as a user can read it, whatever its bytes (lossy: for messages).
pub fn display_name(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// Copies all of `from` into `to` (both open, `to` empty), keeping holes:
/// only the data segments are copied, so a sparse file stays sparse.
pub fn copy_sparse(from: &File, to: &File) -> io::Result<u64> {
    use rustix::fs::SeekFrom;
    let len = from.metadata()?.len();
    let mut offset = 0u64;
    while offset < len {
        let data = match rustix::fs::seek(from, SeekFrom::Data(offset)) {
            Ok(data) => data,
            // No data past `offset`: the rest is a hole.
            Err(rustix::io::Errno::NXIO) => break,
            Err(_) => offset,
        };
        let hole = rustix::fs::seek(from, SeekFrom::Hole(data)).unwrap_or(len).min(len);
        copy_range(from, to, data, hole)?;
        offset = hole.max(data + 1);
    }
    to.set_len(len)?;
    Ok(len)
}

/// Copies bytes `[start, end)` of `from` to the same offsets of `to`.
fn copy_range(from: &File, to: &File, start: u64, end: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let (mut pos_in, mut pos_out) = (start, start);
    while pos_in < end {
        let want = (end - pos_in).min(1 << 30) as usize;
        match rustix::fs::copy_file_range(from, Some(&mut pos_in), to, Some(&mut pos_out), want) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            // Across filesystems or where the kernel cannot: copy by hand.
            Err(_) => {
                let mut buf = vec![0u8; 1 << 20];
                while pos_in < end {
                    let n = from.read_at(&mut buf[..(end - pos_in).min(1 << 20) as usize], pos_in)?;
                    if n == 0 {
                        return Ok(());
                    }
                    to.write_all_at(&buf[..n], pos_in)?;
                    pos_in += n as u64;
                }
                return Ok(());
            }
        }
    }
    Ok(())
}

/// What a tree holds, by `stat` alone (nothing is opened but folders).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Entries of every kind.
    pub entries: u64,
    /// Apparent bytes (`st_size`) of all entries.
    pub bytes: u64,
    /// Bytes on disk (`st_blocks` × 512).
    pub allocated_bytes: u64,
    /// Folders whose content could not be counted (unreadable, or deeper
    /// than [`USAGE_MAX_DEPTH`]): what they hold is unknown, so a cap on
    /// the tree cannot be shown to hold.
    pub uncounted: u64,
}

/// Folders deep a usage count descends; a deeper one is uncounted.
pub const USAGE_MAX_DEPTH: usize = 256;

/// Counts what is under `dir`, stopping early once past `limit` (then the
/// counts are at least that).
pub fn usage(dir: &DirHandle, limit: &Usage) -> io::Result<Usage> {
    let mut total = Usage::default();
    usage_into(dir, limit, &mut total, 0)?;
    Ok(total)
}

fn usage_into(dir: &DirHandle, limit: &Usage, total: &mut Usage, depth: usize) -> io::Result<()> {
    let room = limit.entries.saturating_sub(total.entries) + 1;
    let names = match dir.names_up_to(usize::try_from(room).unwrap_or(usize::MAX)) {
        Ok(names) => names,
        Err(_) => {
            total.uncounted += 1;
            return Ok(());
        }
    };
    for name in names {
        let Ok(stat) = dir.stat_entry(&name) else { continue };
        total.entries += 1;
        total.bytes += stat.st_size as u64;
        total.allocated_bytes += stat.st_blocks as u64 * 512;
        if total.entries > limit.entries || total.bytes > limit.bytes || total.allocated_bytes > limit.allocated_bytes {
            return Ok(());
        }
        if Kind::of(&stat) == Kind::Directory {
            match dir.open_dir(&name) {
                Ok(sub) if depth < USAGE_MAX_DEPTH => usage_into(&sub, limit, total, depth + 1)?,
                // Gone meanwhile: nothing left to count.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                _ => total.uncounted += 1,
            }
        }
    }
    Ok(())
}

/// Hands every entry under `root` to `uid:gid`, never following a link
/// (links themselves change owner), so nothing outside the tree changes.
pub fn chown_tree(root: &DirHandle, uid: u32, gid: u32) -> io::Result<()> {
    root.chown_self(uid, gid)?;
    for name in root.names()? {
        root.chown_entry(&name, uid, gid)?;
        if let Ok(Opened::Dir(sub, _)) = root.open_entry(&name) {
            chown_tree(&sub, uid, gid)?;
        }
    }
    Ok(())
}

/// Makes every folder under `root` open and writable for its owner (a
/// script may leave folders at mode 000), so the tree can be removed; links
/// are never followed: only folders the listing and a fresh `stat` show are
/// changed, each by name beneath its parent.
pub fn make_removable(root: &DirHandle) -> io::Result<()> {
    for name in root.names()? {
        let Ok(stat) = root.stat_entry(&name) else { continue };
        if Kind::of(&stat) != Kind::Directory {
            continue;
        }
        let _ = rustix::fs::chmodat(
            &root.fd,
            component(&name)?,
            Mode::from_raw_mode(0o700),
            AtFlags::empty(),
        );
        if let Ok(sub) = root.open_dir(&name) {
            make_removable(&sub)?;
        }
    }
    Ok(())
}

/// Removes the tree at `path` whatever modes a script left on its folders.
pub fn remove_tree(path: &std::path::Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
            make_removable(&DirHandle::open_root(path)?)?;
            std::fs::remove_dir_all(path)
        }
        other => other,
    }
}

/// Makes a tree read-only for everyone (files 0444 or 0555, folders 0555)
/// and, when the host is root, owned by root: what a shared cache must be
/// before any sandbox sees it.
pub fn seal_tree(root: &DirHandle) -> io::Result<()> {
    let euid = rustix::process::geteuid();
    for name in root.names()? {
        match root.open_entry(&name)? {
            Opened::Dir(sub, _) => seal_tree(&sub)?,
            Opened::File(file, stat) => {
                let mode = if stat.st_mode & 0o111 != 0 { 0o555 } else { 0o444 };
                if euid.is_root() {
                    rustix::fs::fchown(&file, Some(euid), Some(rustix::process::getegid()))?;
                }
                rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
            }
            Opened::Symlink | Opened::Special(_) => {
                if euid.is_root() {
                    root.chown_entry(&name, 0, 0)?;
                }
            }
        }
    }
    if euid.is_root() {
        rustix::fs::fchown(root, Some(euid), Some(rustix::process::getegid()))?;
    }
    rustix::fs::fchmod(root, Mode::from_raw_mode(0o555))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_with_folders_left_at_mode_000_is_removed_and_no_link_is_followed() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o500)).unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::write(tree.join("a/b/f"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("a/link")).unwrap();
        std::fs::set_permissions(tree.join("a/b"), std::fs::Permissions::from_mode(0o000)).unwrap();
        std::fs::set_permissions(tree.join("a"), std::fs::Permissions::from_mode(0o000)).unwrap();
        remove_tree(&tree).unwrap();
        assert!(!tree.exists());
        // The folder a link pointed at keeps its mode.
        let mode = std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o500);
    }

    #[test]
    fn entries_are_typed_by_their_handle_and_links_are_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::write(root.join("f"), "x").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("l")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("ld")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("p"),
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let dir = DirHandle::open_root(root).unwrap();
        assert_eq!(
            dir.names().unwrap(),
            [
                b"d".to_vec(),
                b"f".to_vec(),
                b"l".to_vec(),
                b"ld".to_vec(),
                b"p".to_vec()
            ]
        );
        assert!(matches!(dir.open_entry(b"f").unwrap(), Opened::File(..)));
        assert!(matches!(dir.open_entry(b"d").unwrap(), Opened::Dir(..)));
        assert!(matches!(dir.open_entry(b"l").unwrap(), Opened::Symlink));
        assert!(matches!(dir.open_entry(b"ld").unwrap(), Opened::Symlink));
        // A FIFO with no writer: opened without blocking, never read.
        assert!(matches!(dir.open_entry(b"p").unwrap(), Opened::Special(Kind::Fifo)));
        assert!(dir.open_dir(b"ld").is_err());
        assert!(dir.open_file(b"p").unwrap_err().to_string().contains("FIFO"));
        assert!(dir.descend("ld").is_err());
        assert_eq!(dir.read_link(b"l").unwrap(), b"/etc/passwd");
        for bad in [&b".."[..], b".", b"a/b", b""] {
            assert!(dir.open_entry(bad).is_err(), "{bad:?}");
        }
        // Writing never goes through a link.
        assert!(dir.create_file(b"l", 0o644).is_err());
        assert!(dir.create_file(b"p", 0o644).is_err());
        assert_eq!(std::fs::read_to_string(root.join("f")).unwrap(), "x");
    }

    #[test]
    fn removal_and_reads_stay_beneath() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "k").unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/c"), "abc").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("a/out")).unwrap();
        let dir = DirHandle::open_root(&root).unwrap();
        let (file, _) = dir.descend("a/b").unwrap().open_file(b"c").unwrap();
        let mut read = String::new();
        std::io::Read::read_to_string(&mut &file, &mut read).unwrap();
        assert_eq!(read, "abc");
        dir.remove_entry(b"a").unwrap();
        assert!(!root.join("a").exists());
        assert!(outside.join("keep").is_file());
    }

    #[test]
    fn a_sparse_copy_keeps_its_holes_and_its_bytes() {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let tmp = tempfile::tempdir().unwrap();
        let src = File::create(tmp.path().join("src")).unwrap();
        src.set_len(1 << 30).unwrap();
        src.write_all_at(b"head", 0).unwrap();
        src.write_all_at(b"tail", (1 << 30) - 4).unwrap();
        let src = File::open(tmp.path().join("src")).unwrap();
        let dst = File::create(tmp.path().join("dst")).unwrap();
        assert_eq!(copy_sparse(&src, &dst).unwrap(), 1 << 30);
        let meta = std::fs::metadata(tmp.path().join("dst")).unwrap();
        assert_eq!(meta.len(), 1 << 30);
        assert!(
            meta.blocks() * 512 < 1 << 20,
            "{} blocks: the copy is not sparse",
            meta.blocks()
        );
        let dst = File::open(tmp.path().join("dst")).unwrap();
        let mut buf = [0u8; 4];
        dst.read_exact_at(&mut buf, (1 << 30) - 4).unwrap();
        assert_eq!(&buf, b"tail");
        dst.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"head");
    }
}

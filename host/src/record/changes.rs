//! Which directories of a workspace changed since the last snapshot, told
//! by the kernel (inotify) instead of found by walking every entry.
//!
//! The snapshot walk watches each directory before it lists it, so nothing
//! that happens after a listing goes unseen. Every way a directory's entries
//! or a file's content or mode can change (write, truncate, `close` after a
//! write through a mapping, create, delete, rename, chmod) queues an event
//! naming the directory, synchronously with the change; the agent's scripts
//! have all ended before a snapshot drains the queue. What inotify cannot
//! tell precisely is answered with "walk everything": a lost event
//! (`IN_Q_OVERFLOW`), a watch that could not be added (the per-user watch
//! limit), an event for a watch it does not know, the root itself moved or
//! deleted. A file with more than one link is outside this (a write through
//! one name is reported to that name's directory only): the walk always
//! re-examines the directories that hold one (see `snapshot`).

use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::walk::DirHandle;

/// What changed since the last [`Changes::take`].
#[derive(Debug, PartialEq, Eq)]
pub enum Changed {
    /// Anything may have: walk the whole tree (why, for the log).
    Everything(&'static str),
    /// Only entries of these directories (workspace-relative, `""` is the
    /// root) were created, removed, renamed, written or changed mode.
    Dirs(HashSet<String>),
}

/// An inotify instance watching the directories of one workspace.
pub struct Changes {
    fd: OwnedFd,
    /// Watch descriptor → the directory's path when it was last watched.
    dirs: HashMap<i32, String>,
    /// Set when something was missed; the next `take` says `Everything`.
    lost: Option<&'static str>,
}

const WATCHED: WatchFlags = WatchFlags::MODIFY
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::CREATE)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR);

impl Changes {
    /// A new watcher, or `None` where the platform has no inotify.
    pub fn new() -> Option<Self> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        Some(Self {
            fd,
            dirs: HashMap::new(),
            lost: None,
        })
    }

    /// Watches the directory `dir`, found at `rel`. The watch is added by
    /// the open handle (through `/proc/self/fd`), so it is on exactly the
    /// directory the walk lists. False if it could not be added.
    pub fn watch(&mut self, dir: &DirHandle, rel: &str) -> bool {
        let path = format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd());
        match inotify::add_watch(&self.fd, path, WATCHED) {
            Ok(wd) => {
                self.dirs.insert(wd, rel.to_string());
                true
            }
            Err(_) => false,
        }
    }

    /// Drains the queued events: the directories they name, or
    /// `Everything` if any could not be attributed.
    pub fn take(&mut self) -> Changed {
        let mut changed = HashSet::new();
        let mut buf = [MaybeUninit::<u8>::uninit(); 64 << 10];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => {
                    self.lost = Some("the change queue could not be read");
                    break;
                }
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                self.lost = Some("more changes than the kernel queues");
                continue;
            }
            if flags.contains(ReadFlags::IGNORED) {
                self.dirs.remove(&event.wd());
                continue;
            }
            match self.dirs.get(&event.wd()) {
                Some(rel) if rel.is_empty() && flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) => {
                    self.lost = Some("the workspace itself was moved or deleted");
                }
                Some(rel) => {
                    changed.insert(rel.clone());
                }
                None => self.lost = Some("a change in a directory no longer watched"),
            }
        }
        match self.lost.take() {
            Some(why) => Changed::Everything(why),
            None => Changed::Dirs(changed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(changed: Changed) -> Vec<String> {
        match changed {
            Changed::Dirs(set) => {
                let mut v: Vec<String> = set.into_iter().collect();
                v.sort();
                v
            }
            Changed::Everything(why) => panic!("everything: {why}"),
        }
    }

    #[test]
    fn each_kind_of_change_names_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join("a/b/f"), "1").unwrap();
        let mut changes = Changes::new().unwrap();
        let root = DirHandle::open_root(ws).unwrap();
        assert!(changes.watch(&root, ""));
        let a = root.open_dir(b"a").unwrap();
        assert!(changes.watch(&a, "a"));
        assert!(changes.watch(&a.open_dir(b"b").unwrap(), "a/b"));
        assert_eq!(dirs(changes.take()), Vec::<String>::new());

        // A write, a truncate, a chmod, a rename, a create and a delete.
        std::fs::write(ws.join("a/b/f"), "22").unwrap();
        assert_eq!(dirs(changes.take()), ["a/b"]);
        std::fs::OpenOptions::new()
            .write(true)
            .open(ws.join("a/b/f"))
            .unwrap()
            .set_len(0)
            .unwrap();
        assert_eq!(dirs(changes.take()), ["a/b"]);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(ws.join("a/b/f"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(dirs(changes.take()), ["a/b"]);
        std::fs::rename(ws.join("a/b/f"), ws.join("g")).unwrap();
        assert_eq!(dirs(changes.take()), ["", "a/b"]);
        std::fs::create_dir(ws.join("a/new")).unwrap();
        assert_eq!(dirs(changes.take()), ["a"]);
        std::fs::remove_file(ws.join("g")).unwrap();
        assert_eq!(dirs(changes.take()), [""]);
    }

    #[test]
    fn a_write_through_a_mapping_is_seen_at_close_and_a_moved_root_means_everything() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("m"), "0123").unwrap();
        let mut changes = Changes::new().unwrap();
        let root = DirHandle::open_root(&ws).unwrap();
        assert!(changes.watch(&root, ""));
        // Opened for writing and closed without a write(2): still named.
        drop(std::fs::OpenOptions::new().write(true).open(ws.join("m")).unwrap());
        assert_eq!(dirs(changes.take()), [""]);
        std::fs::rename(&ws, tmp.path().join("elsewhere")).unwrap();
        assert!(matches!(changes.take(), Changed::Everything(_)));
    }
}

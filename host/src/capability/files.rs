//! The files of the workspace interface: the agent's only view of files,
//! confined to the episode's workspace folder.
//!
//! Every path is normalised lexically first (`./x`, `a/../x` and `x` are the
//! same file; a path that climbs out of the root is refused), then opened
//! through a `cap_std::fs::Dir`, which refuses absolute paths and symbolic
//! links that lead outside the root, including links a script made.
//! Read-only files are recognised both by the task's glob patterns and by
//! their inode, so a symbolic or hard link to one does not make it writable.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use serde::Serialize;

use super::tool_error::{ToolError, ToolResult};
use crate::limits::Limits;
use crate::record::walk::{DirHandle, copy_sparse};
use crate::relpath::{PathError, ReadOnlyFiles};

/// What kind of filesystem object a listed entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else, including a name that is not UTF-8.
    Other,
}

/// One entry of a `list-files` answer.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct DirEntry {
    /// Path relative to the workspace root.
    pub path: String,
    /// What kind of entry it is.
    pub kind: EntryKind,
    /// Its size, in bytes.
    pub size: u64,
    /// True when the task marks this file read-only.
    pub read_only: bool,
}

fn fs_path(rel: &str) -> &str {
    if rel.is_empty() { "." } else { rel }
}

/// What `undo-edit` can restore for one path.
enum PriorVersion {
    Absent,
    Saved(PathBuf),
    /// Too large for the history's budget: not kept.
    NotKept(u64),
}

/// The files of one episode's workspace.
pub struct WorkspaceFiles {
    root: PathBuf,
    dir: Dir,
    /// The root for walks that never follow a link (snapshots, restores).
    handle: DirHandle,
    read_only: ReadOnlyFiles,
    history_dir: PathBuf,
    undo: HashMap<String, Vec<PriorVersion>>,
    saved_versions: u64,
    history_bytes: u64,
    limits: Limits,
}

impl WorkspaceFiles {
    /// Opens `root` as the agent's workspace. Prior versions for undo are
    /// kept in `history_dir`, which must lie outside `root`.
    pub fn open(
        root: &Path,
        history_dir: &Path,
        read_only_patterns: &[String],
        limits: Limits,
    ) -> anyhow::Result<Self> {
        let dir = Dir::open_ambient_dir(root, ambient_authority())
            .with_context(|| format!("opening workspace {}", root.display()))?;
        std::fs::create_dir_all(history_dir)?;
        let read_only = ReadOnlyFiles::scan(root, read_only_patterns)?;
        let handle = DirHandle::open_root(root).with_context(|| format!("opening workspace {}", root.display()))?;
        Ok(Self {
            root: root.to_path_buf(),
            dir,
            handle,
            read_only,
            history_dir: history_dir.to_path_buf(),
            undo: HashMap::new(),
            saved_versions: 0,
            history_bytes: 0,
            limits,
        })
    }

    /// The workspace folder on the host.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root as a handle that walks never leave.
    pub fn handle(&self) -> &DirHandle {
        &self.handle
    }

    /// The files the task marks read-only.
    pub fn read_only(&self) -> &ReadOnlyFiles {
        &self.read_only
    }

    /// The path an existing or new file really lives at, after symbolic
    /// links inside the workspace are followed.
    fn resolved(&self, rel: &str) -> Option<String> {
        if let Ok(path) = self.dir.canonicalize(fs_path(rel)) {
            return Some(path.to_string_lossy().into_owned());
        }
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let parent = self.dir.canonicalize(fs_path(parent)).ok()?;
        let parent = parent.to_string_lossy();
        Some(if parent.is_empty() || parent == "." {
            name.to_string()
        } else {
            format!("{parent}/{name}")
        })
    }

    fn is_read_only(&self, rel: &str) -> bool {
        use cap_std::fs::MetadataExt;
        if self.read_only.matches_path(rel) {
            return true;
        }
        if let Some(resolved) = self.resolved(rel)
            && self.read_only.matches_path(&resolved)
        {
            return true;
        }
        match self.dir.metadata(fs_path(rel)) {
            Ok(meta) => self.read_only.matches_inode(meta.dev(), meta.ino()),
            Err(_) => false,
        }
    }

    /// Refuses to change a read-only file, a directory or the root.
    fn check_writable(&self, path: &str, rel: &str) -> ToolResult<()> {
        if rel.is_empty() {
            return Err(ToolError::InvalidArgument(format!(
                "`{path}` names the workspace root, not a file"
            )));
        }
        if self.is_read_only(rel) {
            return Err(ToolError::PermissionDenied(format!(
                "{path} is read-only for this task (read-only patterns: {})",
                self.read_only.patterns().join(", ")
            )));
        }
        match self.dir.metadata(rel) {
            Ok(meta) if meta.is_dir() => Err(ToolError::InvalidArgument(format!("{path} is a directory"))),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ToolError::from_io(path, &e)),
        }
    }

    /// Lists the directory `dir` ("" is the root), sorted by path.
    pub fn list_files(&self, dir: &str) -> ToolResult<Vec<DirEntry>> {
        let rel = normalize(dir, &self.limits)?;
        let entries = self
            .dir
            .read_dir(fs_path(&rel))
            .map_err(|e| ToolError::from_io(dir, &e))?;
        let mut listed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| ToolError::from_io(dir, &e))?;
            if listed.len() >= self.limits.list_entries {
                return Err(ToolError::TooLarge(format!(
                    "{} has more than {} entries; list a subdirectory",
                    fs_path(&rel),
                    self.limits.list_entries
                )));
            }
            let file_name = entry.file_name();
            // A name that is not UTF-8 cannot be named by a tool call: it is
            // listed as `other`, as snapshots record it as refused, with its
            // bytes escaped so that two such names never read the same.
            let utf8 = file_name.to_str().is_some();
            let name = escaped_name(&file_name);
            let path = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let meta = entry.metadata().map_err(|e| ToolError::from_io(&path, &e))?;
            let file_type = meta.file_type();
            let kind = if !utf8 {
                EntryKind::Other
            } else if file_type.is_symlink() {
                EntryKind::Symlink
            } else if file_type.is_dir() {
                EntryKind::Directory
            } else if file_type.is_file() {
                EntryKind::File
            } else {
                EntryKind::Other
            };
            // The entry's own path and inode suffice here (no symlink to
            // resolve for a regular file), and keep listing cheap.
            let read_only = kind == EntryKind::File && {
                use cap_std::fs::MetadataExt;
                self.read_only.matches_path(&path) || self.read_only.matches_inode(meta.dev(), meta.ino())
            };
            listed.push(DirEntry {
                path,
                kind,
                size: meta.len(),
                read_only,
            });
        }
        listed.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(listed)
    }

    /// Reads a UTF-8 text file of at most the read cap.
    pub fn read_file(&self, path: &str) -> ToolResult<String> {
        let rel = normalize(path, &self.limits)?;
        let mut file = self.open_regular(path, &rel)?;
        let size = file.metadata().map_err(|e| ToolError::from_io(path, &e))?.len();
        if size > self.limits.read_bytes {
            return Err(ToolError::TooLarge(format!(
                "{path} is {size} bytes; read-file returns at most {} bytes: use inspect-lines to read it in parts",
                self.limits.read_bytes
            )));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        (&mut file)
            .take(self.limits.read_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ToolError::from_io(path, &e))?;
        if bytes.len() as u64 > self.limits.read_bytes {
            return Err(ToolError::TooLarge(format!(
                "{path} grew past {} bytes while being read",
                self.limits.read_bytes
            )));
        }
        text_or_refuse(path, bytes)
    }

    /// Opens a regular file for reading. Never blocks (a FIFO is opened
    /// non-blocking and refused by its type), whatever the path names.
    fn open_regular(&self, path: &str, rel: &str) -> ToolResult<cap_std::fs::File> {
        if rel.is_empty() {
            return Err(ToolError::InvalidArgument(format!(
                "`{path}` is the workspace root, not a file"
            )));
        }
        let mut options = OpenOptions::new();
        options.read(true);
        self.open_typed(path, rel, &mut options)
    }

    /// Opens `rel` without blocking (a FIFO with no peer never stalls the
    /// host) and refuses, by the opened handle, anything but a regular file.
    fn open_typed(&self, path: &str, rel: &str, options: &mut OpenOptions) -> ToolResult<cap_std::fs::File> {
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        let file = self
            .dir
            .open_with(rel, options)
            .map_err(|e| self.open_error(path, rel, &e))?;
        let meta = file.metadata().map_err(|e| ToolError::from_io(path, &e))?;
        refuse_non_file(path, &meta)?;
        Ok(file)
    }

    /// The error of a failed open, naming a socket or FIFO for what it is.
    fn open_error(&self, path: &str, rel: &str, error: &std::io::Error) -> ToolError {
        if error.raw_os_error() == Some(libc::ENXIO)
            && let Ok(meta) = self.dir.metadata(rel)
            && let Err(refused) = refuse_non_file(path, &meta)
        {
            return refused;
        }
        ToolError::from_io(path, error)
    }

    /// Opens (creating) a regular file for writing, without blocking on a
    /// FIFO and refusing anything that is not a regular file.
    fn open_for_write(&self, path: &str, rel: &str, append: bool) -> ToolResult<cap_std::fs::File> {
        if let Ok(meta) = self.dir.metadata(rel) {
            refuse_non_file(path, &meta)?;
        }
        let mut options = OpenOptions::new();
        options.write(true).create(true);
        if append {
            options.append(true);
        } else {
            options.truncate(true);
        }
        self.open_typed(path, rel, &mut options)
    }

    /// Whether `path` is a regular file of the workspace (for scripts).
    pub fn check_regular_file(&self, path: &str) -> ToolResult<()> {
        let rel = normalize(path, &self.limits)?;
        self.open_regular(path, &rel).map(drop)
    }

    /// Creates or replaces a file, keeping its previous version for undo.
    pub fn write_file(&mut self, path: &str, content: &str) -> ToolResult<()> {
        self.write_impl(path, content, false)
    }

    /// Appends to a file, creating it if needed.
    pub fn append_file(&mut self, path: &str, content: &str) -> ToolResult<()> {
        self.write_impl(path, content, true)
    }

    fn write_impl(&mut self, path: &str, content: &str, append: bool) -> ToolResult<()> {
        let rel = normalize(path, &self.limits)?;
        if content.len() as u64 > self.limits.write_bytes {
            return Err(ToolError::TooLarge(format!(
                "{} bytes for {path}; one write may carry at most {} bytes",
                content.len(),
                self.limits.write_bytes
            )));
        }
        self.check_writable(path, &rel)?;
        self.save_prior_version(path, &rel)?;
        self.create_parents(path, &rel)?;
        let mut file = self.open_for_write(path, &rel, append)?;
        file.write_all(content.as_bytes())
            .map_err(|e| ToolError::from_io(path, &e))?;
        Ok(())
    }

    fn create_parents(&self, path: &str, rel: &str) -> ToolResult<()> {
        if let Some((parent, _)) = rel.rsplit_once('/') {
            self.dir
                .create_dir_all(parent)
                .map_err(|e| ToolError::from_io(path, &e))?;
        }
        Ok(())
    }

    /// Copies a file inside the workspace; a sparse file stays sparse, and
    /// a copy that would take the workspace past its size cap is refused.
    /// `used_bytes` is what the workspace holds now (its last snapshot).
    pub fn copy_file(&mut self, source: &str, destination: &str, used_bytes: u64) -> ToolResult<()> {
        let src = normalize(source, &self.limits)?;
        let dst = normalize(destination, &self.limits)?;
        let input = self.open_regular(source, &src)?;
        self.check_writable(destination, &dst)?;
        if self.resolved(&src).is_some() && self.resolved(&src) == self.resolved(&dst) {
            return Err(ToolError::InvalidArgument(format!(
                "{source} and {destination} are the same file"
            )));
        }
        let size = input.metadata().map_err(|e| ToolError::from_io(source, &e))?.len();
        if used_bytes.saturating_add(size) > self.limits.workspace_bytes {
            return Err(ToolError::TooLarge(format!(
                "copying {source} ({} MiB) would take the workspace past its cap of {} MiB",
                size >> 20,
                self.limits.workspace_bytes >> 20
            )));
        }
        self.save_prior_version(destination, &dst)?;
        self.create_parents(destination, &dst)?;
        let output = self.open_for_write(destination, &dst, false)?;
        copy_sparse(&input.into_std(), &output.into_std()).map_err(|e| ToolError::from_io(destination, &e))?;
        Ok(())
    }

    /// Keeps the current content of `rel` (or the fact it does not exist) so
    /// that `undo-edit` can bring it back, within the history's budget.
    fn save_prior_version(&mut self, path: &str, rel: &str) -> ToolResult<()> {
        let prior = match self.open_regular(path, rel) {
            Ok(file) => {
                let size = file.metadata().map_err(|e| ToolError::from_io(path, &e))?.len();
                if self.history_bytes + size > self.limits.history_bytes {
                    PriorVersion::NotKept(size)
                } else {
                    self.saved_versions += 1;
                    let saved = self.history_dir.join(format!("{:06}", self.saved_versions));
                    let out = std::fs::File::create(&saved)
                        .map_err(|e| ToolError::Io(format!("saving the prior version of {path}: {e}")))?;
                    copy_sparse(&file.into_std(), &out)
                        .map_err(|e| ToolError::Io(format!("saving the prior version of {path}: {e}")))?;
                    self.history_bytes += size;
                    PriorVersion::Saved(saved)
                }
            }
            Err(ToolError::NotFound(_)) => PriorVersion::Absent,
            Err(e) => return Err(e),
        };
        self.undo.entry(rel.to_string()).or_default().push(prior);
        Ok(())
    }

    /// Restores the version of `path` before its last change; says what was restored.
    pub fn undo_edit(&mut self, path: &str) -> ToolResult<String> {
        let rel = normalize(path, &self.limits)?;
        self.check_writable(path, &rel)?;
        let Some(prior) = self.undo.get_mut(&rel).and_then(Vec::pop) else {
            return Err(ToolError::NotFound(format!("{path}: no earlier version to restore")));
        };
        match prior {
            PriorVersion::Absent => {
                if let Ok(meta) = self.dir.symlink_metadata(&rel) {
                    refuse_non_file(path, &meta)?;
                }
                match self.dir.remove_file(&rel) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(ToolError::from_io(path, &e)),
                }
                Ok(format!(
                    "{path} did not exist before its last edit; it has been removed"
                ))
            }
            PriorVersion::NotKept(size) => Err(ToolError::TooLarge(format!(
                "the version of {path} before its last edit ({} MiB) was too large for the undo history, which keeps at most {} MiB",
                size >> 20,
                self.limits.history_bytes >> 20
            ))),
            PriorVersion::Saved(saved) => {
                let input = std::fs::File::open(&saved)
                    .map_err(|e| ToolError::Io(format!("reading the saved version of {path}: {e}")))?;
                let output = self.open_for_write(path, &rel, false)?;
                let bytes = copy_sparse(&input, &output.into_std()).map_err(|e| ToolError::from_io(path, &e))?;
                Ok(format!("{path} restored to its previous version ({bytes} bytes)"))
            }
        }
    }

    /// Returns lines `start` to `end` (1-based, inclusive), each prefixed with its number.
    pub fn inspect_lines(&self, path: &str, start: u32, end: u32) -> ToolResult<String> {
        let rel = normalize(path, &self.limits)?;
        if start == 0 || end < start {
            return Err(ToolError::InvalidArgument(format!(
                "lines {start}..{end}: lines are numbered from 1 and end must not be before start"
            )));
        }
        if end - start >= self.limits.inspect_lines {
            return Err(ToolError::TooLarge(format!(
                "{} lines asked; inspect-lines returns at most {} lines per call",
                end - start + 1,
                self.limits.inspect_lines
            )));
        }
        let file = self.open_regular(path, &rel)?;
        // A line is held only up to the read cap, and a file is scanned only
        // so far: a 10 GiB file without a newline costs neither memory nor minutes.
        let line_cap = self.limits.read_bytes as usize;
        let scan_cap = self.limits.read_bytes.saturating_mul(INSPECT_SCAN_FACTOR);
        let mut reader = BufReader::new(file.take(scan_cap));
        let mut out = String::new();
        let mut line = Vec::new();
        let mut number = 0u32;
        let mut scanned = 0u64;
        loop {
            line.clear();
            let cap = if number + 1 < start { 0 } else { line_cap + 1 };
            let read = read_line_capped(&mut reader, &mut line, cap).map_err(|e| ToolError::from_io(path, &e))?;
            if read == 0 {
                if scanned >= scan_cap {
                    return Err(ToolError::TooLarge(format!(
                        "{path}: line {start} is not within its first {} bytes; inspect-lines reads no further",
                        scan_cap
                    )));
                }
                break;
            }
            scanned += read as u64;
            number += 1;
            if number < start {
                continue;
            }
            if number > end {
                break;
            }
            if line.len() > line_cap {
                return Err(ToolError::TooLarge(format!(
                    "line {number} of {path} is longer than {line_cap} bytes"
                )));
            }
            let text = text_or_refuse(path, std::mem::take(&mut line))?;
            out.push_str(&format!("{number}: {}\n", text.trim_end_matches(['\n', '\r'])));
            if out.len() as u64 > self.limits.read_bytes {
                return Err(ToolError::TooLarge(format!(
                    "lines {start}..{end} of {path} exceed {} bytes: ask for fewer lines",
                    self.limits.read_bytes
                )));
            }
        }
        if number < start {
            return Err(ToolError::InvalidArgument(format!(
                "{path} has {number} lines; line {start} does not exist"
            )));
        }
        Ok(out)
    }
}

/// How many times the read cap inspect-lines scans of a file at most.
const INSPECT_SCAN_FACTOR: u64 = 256;

/// Reads one line (through its `\n`) from `reader`, keeping at most `cap`
/// bytes of it in `line` and skipping the rest; the bytes read in all.
fn read_line_capped(reader: &mut impl BufRead, line: &mut Vec<u8>, cap: usize) -> std::io::Result<usize> {
    let mut read = 0;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(read);
        }
        let (used, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        let room = cap.saturating_sub(line.len());
        line.extend_from_slice(&buffer[..used.min(room)]);
        reader.consume(used);
        read += used;
        if done {
            return Ok(read);
        }
    }
}

/// Refuses anything but a regular file, naming what it is.
fn refuse_non_file(path: &str, meta: &cap_std::fs::Metadata) -> ToolResult<()> {
    use cap_std::fs::FileTypeExt;
    let kind = meta.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        return Err(ToolError::InvalidArgument(format!(
            "{path} is a directory: use list-files"
        )));
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(ToolError::InvalidArgument(format!(
        "{path} is {what}; tool calls only read and write regular files"
    )))
}

/// Turns an agent-supplied path into its one spelling, refusing absolute
/// paths, climbs out of the workspace and paths longer than it allows.
pub fn normalize(path: &str, limits: &Limits) -> ToolResult<String> {
    if path.len() > limits.path_bytes {
        return Err(ToolError::InvalidArgument(format!(
            "a path of {} bytes; paths may be at most {} bytes",
            path.len(),
            limits.path_bytes
        )));
    }
    let rel = crate::relpath::normalize(path).map_err(|e| match e {
        PathError::Nul => ToolError::InvalidArgument(e.to_string()),
        PathError::Absolute(_) | PathError::Outside(_) => ToolError::PermissionDenied(e.to_string()),
    })?;
    // Snapshots record no deeper path, so none is made through a tool call.
    let depth = rel.split('/').count();
    if depth > limits.path_depth {
        return Err(ToolError::InvalidArgument(format!(
            "a path {depth} levels deep; paths may be at most {} levels deep",
            limits.path_depth
        )));
    }
    Ok(rel)
}

/// Text for the agent, or a clear refusal for binary content.
fn text_or_refuse(path: &str, bytes: Vec<u8>) -> ToolResult<String> {
    if bytes.contains(&0) {
        return Err(ToolError::InvalidArgument(format!(
            "{path} is a binary file; only text files can be read"
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| ToolError::InvalidArgument(format!("{path} is not UTF-8 text; only text files can be read")))
}

/// `name` as text: UTF-8 as it is, each other byte as `\xNN`.
fn escaped_name(name: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in name.as_bytes().utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_paths_are_normalised_and_refused_with_the_right_kind() {
        let limits = Limits::default();
        assert_eq!(normalize("./a//b/", &limits).unwrap(), "a/b");
        assert!(matches!(
            normalize("../x", &limits),
            Err(ToolError::PermissionDenied(_))
        ));
        assert!(matches!(
            normalize("/etc/passwd", &limits),
            Err(ToolError::PermissionDenied(_))
        ));
        assert!(matches!(normalize("a\0b", &limits), Err(ToolError::InvalidArgument(_))));
        assert!(matches!(
            normalize(&"p".repeat(2000), &limits),
            Err(ToolError::InvalidArgument(_))
        ));
        let deep = vec!["d"; limits.path_depth + 1].join("/");
        assert!(matches!(normalize(&deep, &limits), Err(ToolError::InvalidArgument(m)) if m.contains("levels deep")));
        assert!(normalize(&vec!["d"; limits.path_depth].join("/"), &limits).is_ok());
    }

    #[test]
    fn inspect_lines_never_holds_a_huge_line_nor_scans_a_huge_file() {
        let (tmp, ws) = workspace(&[]);
        let root = tmp.path().join("ws");
        // A sparse file of 8 GiB without a newline, then one short line.
        let huge = std::fs::File::create(root.join("huge")).unwrap();
        huge.set_len(8 << 30).unwrap();
        let mut mixed = vec![b'x'; 3 << 20];
        mixed.extend_from_slice(b"\nshort line\n");
        std::fs::write(root.join("mixed"), &mixed).unwrap();
        let err = ws.inspect_lines("huge", 1, 1).unwrap_err();
        assert!(
            matches!(&err, ToolError::TooLarge(m) if m.contains("line 1")),
            "{err:?}"
        );
        let err = ws.inspect_lines("huge", 2, 2).unwrap_err();
        assert!(matches!(&err, ToolError::TooLarge(m) if m.contains("first")), "{err:?}");
        // The long first line is skipped without being held; the next one reads.
        assert_eq!(ws.inspect_lines("mixed", 2, 2).unwrap(), "2: short line\n");
        let err = ws.inspect_lines("mixed", 1, 2).unwrap_err();
        assert!(
            matches!(&err, ToolError::TooLarge(m) if m.contains("line 1")),
            "{err:?}"
        );
    }

    fn workspace(patterns: &[&str]) -> (tempfile::TempDir, WorkspaceFiles) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(root.join("data")).unwrap();
        std::fs::write(root.join("data/train.csv"), "a,b\n1,2\n").unwrap();
        std::fs::write(root.join("train.py"), "print('hi')\n").unwrap();
        let patterns: Vec<String> = patterns.iter().map(|s| s.to_string()).collect();
        let ws = WorkspaceFiles::open(&root, &tmp.path().join("history"), &patterns, Limits::default()).unwrap();
        (tmp, ws)
    }

    #[test]
    fn read_only_holds_under_every_spelling_and_link() {
        let (tmp, mut ws) = workspace(&["data/*.csv"]);
        for spelling in [
            "data/train.csv",
            "./data/train.csv",
            "x/../data/train.csv",
            "data//train.csv",
        ] {
            let err = ws.write_file(spelling, "evil").unwrap_err();
            assert!(matches!(err, ToolError::PermissionDenied(_)), "{spelling}: {err:?}");
        }
        std::os::unix::fs::symlink("data/train.csv", tmp.path().join("ws/alias")).unwrap();
        std::fs::hard_link(tmp.path().join("ws/data/train.csv"), tmp.path().join("ws/hard")).unwrap();
        for spelling in ["alias", "hard"] {
            assert!(
                matches!(ws.write_file(spelling, "evil"), Err(ToolError::PermissionDenied(_))),
                "{spelling}"
            );
            assert!(
                matches!(ws.append_file(spelling, "evil"), Err(ToolError::PermissionDenied(_))),
                "{spelling}"
            );
        }
        assert!(matches!(
            ws.copy_file("train.py", "data/train.csv", 0),
            Err(ToolError::PermissionDenied(_))
        ));
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("ws/data/train.csv")).unwrap(),
            "a,b\n1,2\n"
        );
        // Reading stays allowed.
        assert_eq!(ws.read_file("./alias").unwrap(), "a,b\n1,2\n");
    }

    #[test]
    fn symlink_out_of_the_workspace_is_refused() {
        let (tmp, mut ws) = workspace(&[]);
        std::os::unix::fs::symlink("/etc", tmp.path().join("ws/etc")).unwrap();
        std::os::unix::fs::symlink("../history", tmp.path().join("ws/up")).unwrap();
        assert!(matches!(
            ws.read_file("etc/passwd"),
            Err(ToolError::PermissionDenied(_))
        ));
        assert!(matches!(ws.list_files("etc"), Err(ToolError::PermissionDenied(_))));
        assert!(matches!(
            ws.write_file("up/x", "x"),
            Err(ToolError::PermissionDenied(_))
        ));
        assert!(!tmp.path().join("history/x").exists());
    }

    #[test]
    fn undo_restores_and_removes() {
        let (_tmp, mut ws) = workspace(&[]);
        ws.write_file("train.py", "v2").unwrap();
        ws.write_file("./train.py", "v3").unwrap();
        ws.write_file("new/file.txt", "n").unwrap();
        ws.undo_edit("train.py").unwrap();
        assert_eq!(ws.read_file("train.py").unwrap(), "v2");
        ws.undo_edit("train.py").unwrap();
        assert_eq!(ws.read_file("train.py").unwrap(), "print('hi')\n");
        assert!(matches!(ws.undo_edit("train.py"), Err(ToolError::NotFound(_))));
        ws.undo_edit("new/file.txt").unwrap();
        assert!(matches!(ws.read_file("new/file.txt"), Err(ToolError::NotFound(_))));
        // Prior versions live outside the agent's view.
        assert!(ws.list_files("").unwrap().iter().all(|e| !e.path.contains("history")));
    }

    #[test]
    fn caps_and_binary_files_give_clear_errors() {
        let (tmp, mut ws) = workspace(&[]);
        ws.limits.read_bytes = 16;
        ws.limits.write_bytes = 8;
        std::fs::write(tmp.path().join("ws/big.txt"), "x".repeat(17)).unwrap();
        std::fs::write(tmp.path().join("ws/blob.bin"), [0u8, 1, 2]).unwrap();
        assert!(matches!(ws.read_file("big.txt"), Err(ToolError::TooLarge(m)) if m.contains("inspect-lines")));
        assert!(matches!(ws.read_file("blob.bin"), Err(ToolError::InvalidArgument(m)) if m.contains("binary")));
        assert!(matches!(
            ws.write_file("w.txt", "123456789"),
            Err(ToolError::TooLarge(_))
        ));
        assert!(matches!(ws.read_file("missing.txt"), Err(ToolError::NotFound(_))));
        assert!(matches!(ws.read_file("data"), Err(ToolError::InvalidArgument(_))));
    }

    #[test]
    fn inspect_lines_numbers_and_bounds() {
        let (tmp, ws) = workspace(&[]);
        std::fs::write(tmp.path().join("ws/f.txt"), "one\ntwo\nthree\n").unwrap();
        assert_eq!(ws.inspect_lines("f.txt", 2, 3).unwrap(), "2: two\n3: three\n");
        assert_eq!(ws.inspect_lines("f.txt", 3, 99).unwrap(), "3: three\n");
        assert!(matches!(
            ws.inspect_lines("f.txt", 0, 1),
            Err(ToolError::InvalidArgument(_))
        ));
        assert!(matches!(
            ws.inspect_lines("f.txt", 5, 6),
            Err(ToolError::InvalidArgument(_))
        ));
        assert!(matches!(
            ws.inspect_lines("f.txt", 1, 5000),
            Err(ToolError::TooLarge(_))
        ));
    }

    #[test]
    fn two_names_that_are_not_utf8_are_listed_apart() {
        use std::os::unix::ffi::OsStrExt;
        let (tmp, ws) = workspace(&[]);
        let root = tmp.path().join("ws");
        for name in [&b"odd\xff"[..], b"odd\xfe", b"odd\xc3"] {
            std::fs::write(root.join(std::ffi::OsStr::from_bytes(name)), "x").unwrap();
        }
        let odd: Vec<String> = ws
            .list_files("")
            .unwrap()
            .into_iter()
            .filter(|e| e.path.starts_with("odd"))
            .map(|e| {
                assert_eq!(e.kind, EntryKind::Other, "{}", e.path);
                e.path
            })
            .collect();
        assert_eq!(odd.len(), 3);
        let distinct: std::collections::BTreeSet<&String> = odd.iter().collect();
        assert_eq!(distinct.len(), 3, "{odd:?}");
        assert!(odd.contains(&"odd\\xFF".to_string()), "{odd:?}");
    }
}

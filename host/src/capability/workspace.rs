//! The WIT `workspace` interface: each call is a step, checked and recorded
//! by the shared recorder, and answered by the episode's [`WorkspaceFiles`];
//! calls that change files are followed by a snapshot.

use serde_json::json;

use crate::record::trace::text;

use super::files::{self, WorkspaceFiles};
use super::mlrb::agent::workspace as wit;
use super::{HostResult, to_wit};

link_view! {
    /// What the workspace interface's host code sees of the agent's state.
    WorkspaceCapability => WorkspaceView<'a>, |state| {
        files: &'a mut WorkspaceFiles = &mut state.files,
    }
}

impl From<files::DirEntry> for wit::DirEntry {
    fn from(entry: files::DirEntry) -> Self {
        use wit::EntryKind as K;
        Self {
            path: entry.path,
            kind: match entry.kind {
                files::EntryKind::File => K::File,
                files::EntryKind::Directory => K::Directory,
                files::EntryKind::Symlink => K::Symlink,
                files::EntryKind::Other => K::Other,
            },
            size: entry.size,
            read_only: entry.read_only,
        }
    }
}

/// A `Vec` wrapper so `to_wit` can convert lists element-wise.
struct Entries(Vec<wit::DirEntry>);

impl From<Vec<files::DirEntry>> for Entries {
    fn from(entries: Vec<files::DirEntry>) -> Self {
        Self(entries.into_iter().map(Into::into).collect())
    }
}

impl WorkspaceView<'_> {
    /// A call that only reads: a step, no snapshot.
    fn read<T: serde::Serialize + serde::de::DeserializeOwned>(
        &mut self,
        function: &str,
        args: serde_json::Value,
        call: impl FnOnce(&WorkspaceFiles) -> super::ToolResult<T>,
    ) -> wasmtime::Result<super::ToolResult<T>> {
        let files = &*self.files;
        self.recorder
            .tool_call(("workspace", function), args, None, || call(files))
    }

    /// A call that changes files: a step, then a snapshot if anything changed.
    fn change<T: serde::Serialize + serde::de::DeserializeOwned>(
        &mut self,
        function: &str,
        args: serde_json::Value,
        call: impl FnOnce(&mut WorkspaceFiles) -> super::ToolResult<T>,
    ) -> wasmtime::Result<super::ToolResult<T>> {
        let root = self
            .files
            .handle()
            .try_clone()
            .map_err(|e| super::recorder::host_fault("opening the workspace", e))?;
        let files = &mut *self.files;
        self.recorder
            .tool_call(("workspace", function), args, Some(&root), || call(files))
    }
}

impl wit::Host for WorkspaceView<'_> {
    async fn list_files(&mut self, dir: String) -> HostResult<Vec<wit::DirEntry>> {
        let result = self.read("list-files", json!({ "dir": text(&dir) }), |f| f.list_files(&dir))?;
        Ok(to_wit::<_, Entries>(result).map(|e| e.0))
    }

    async fn read_file(&mut self, path: String) -> HostResult<String> {
        let result = self.read("read-file", json!({ "path": text(&path) }), |f| f.read_file(&path))?;
        Ok(to_wit(result))
    }

    async fn write_file(&mut self, path: String, content: String) -> HostResult<()> {
        let args = json!({ "path": text(&path), "content": text(&content) });
        let result = self.change("write-file", args, |f| f.write_file(&path, &content))?;
        Ok(to_wit(result))
    }

    async fn append_file(&mut self, path: String, content: String) -> HostResult<()> {
        let args = json!({ "path": text(&path), "content": text(&content) });
        let result = self.change("append-file", args, |f| f.append_file(&path, &content))?;
        Ok(to_wit(result))
    }

    async fn copy_file(&mut self, source: String, destination: String) -> HostResult<()> {
        let used = self.recorder.used().bytes;
        let args = json!({ "source": text(&source), "destination": text(&destination) });
        let result = self.change("copy-file", args, |f| f.copy_file(&source, &destination, used))?;
        Ok(to_wit(result))
    }

    async fn undo_edit(&mut self, path: String) -> HostResult<String> {
        let result = self.change("undo-edit", json!({ "path": text(&path) }), |f| f.undo_edit(&path))?;
        Ok(to_wit(result))
    }

    async fn inspect_lines(&mut self, path: String, start: u32, end: u32) -> HostResult<String> {
        let args = json!({ "path": text(&path), "start": start, "end": end });
        let result = self.read("inspect-lines", args, |f| f.inspect_lines(&path, start, end))?;
        Ok(to_wit(result))
    }
}

//! Small synthetic episodes for the checks' tests: a real snapshot store of
//! a real workspace folder, and events written as the host writes them.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::*;
use crate::limits::Limits;
use crate::record::snapshot::SnapshotStore;
use crate::record::walk::DirHandle;

/// An episode built call by call.
pub struct Synthetic {
    tmp: tempfile::TempDir,
    store: SnapshotStore,
    pub events: Vec<Value>,
    step: u32,
    pub record: Value,
}

impl Synthetic {
    /// A workspace holding `train.py`, its first snapshot and the task told.
    pub fn new() -> Self {
        Self::with_files(&[])
    }

    /// [`Synthetic::new`] with more files of the task's in the workspace.
    pub fn with_files(files: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let workspace = tmp.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(workspace.join("train.py"), "print('training')\n").unwrap();
        for (path, content) in files {
            std::fs::create_dir_all(workspace.join(path).parent().unwrap()).unwrap();
            std::fs::write(workspace.join(path), content).unwrap();
        }
        let store = SnapshotStore::create(&tmp.path().join("snapshots"), &Limits::default()).unwrap();
        let record = json!({
            "seed": 1, "started_at": "", "ended_at": "",
            "agent": {"path": "a.wasm", "sha256": "00", "size": 1, "compiled_from_cache": false, "load_ms": 0.0},
            "task": {"name": "t", "version": "1", "root": "/t", "prepare_key": "k", "metric": "accuracy",
                     "higher_is_better": true, "baseline": null},
            "host": {"mlrb": "", "wit": "", "wasmtime": "", "os": "", "arch": "", "sandbox": ""},
            "limits": {},
            "end": {"reason": "completed", "detail": "", "answer": "done", "steps": 0, "notes": 0, "wall_ms": 1,
                    "agent_memory_peak_bytes": 0, "agent_log_dropped_bytes": 0, "final_snapshot": 0,
                    "first_call_ms": null}
        });
        let mut episode = Self {
            tmp,
            store,
            events: Vec::new(),
            step: 0,
            record,
        };
        episode.snapshot("start");
        let problem = "Make train.py write submission.csv (see data/sample_submission.csv).";
        episode.host(
            "run",
            json!({"task": {"name": "t", "research_problem": problem}, "seed": 1}),
        );
        episode
    }

    /// The live workspace folder.
    pub fn workspace(&self) -> PathBuf {
        self.tmp.path().join("workspace")
    }

    /// Snapshots the workspace, recording it as the host does; its id when it changed.
    pub fn snapshot(&mut self, label: &str) -> Option<u64> {
        let root = DirHandle::open_root(&self.workspace()).unwrap();
        let manifest = self.store.snapshot(&root, label).unwrap()?;
        let (id, root) = (manifest.id, manifest.root.clone());
        let refused = manifest.refused.clone();
        if !refused.is_empty() {
            self.host(
                "snapshot-refused",
                json!({"snapshot": id, "refused": refused.len(), "first": refused}),
            );
        }
        self.host("snapshot", json!({"id": id, "label": label, "root": root}));
        Some(id)
    }

    /// A host record.
    pub fn host(&mut self, function: &str, args: Value) -> usize {
        self.push(json!({"interface": "host", "function": function, "args": args, "result": null}))
    }

    /// A call that counts as a step, answered `Ok(null)` or with a tool error.
    pub fn call(&mut self, interface: &str, function: &str, args: Value, result: Result<(), (&str, &str)>) -> usize {
        let result = match result {
            Ok(()) => json!({"ok": null}),
            Err((kind, message)) => json!({"error": {"kind": kind, "message": message}}),
        };
        self.call_with(interface, function, args, result, None)
    }

    /// A step with its result as recorded and the snapshot taken after it.
    pub fn call_with(
        &mut self,
        interface: &str,
        function: &str,
        args: Value,
        result: Value,
        snapshot: Option<u64>,
    ) -> usize {
        self.step += 1;
        let mut event =
            json!({"interface": interface, "function": function, "step": self.step, "args": args, "result": result});
        if let Some(id) = snapshot {
            event["snapshot"] = json!(id);
        }
        self.push(event)
    }

    /// The agent's `write-file` of `content` at `path`, snapshotted.
    pub fn write(&mut self, path: &str, content: &str) -> usize {
        let target = self.workspace().join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, content).unwrap();
        let snapshot = self.snapshot(&format!("step {}: write-file", self.step + 1));
        let args = json!({"path": path, "content": content});
        self.call_with("workspace", "write-file", args, json!({"ok": null}), snapshot)
    }

    /// A script run that does `work` to the workspace and ends as `outcome`
    /// says (merged over an exit with code 0).
    pub fn exec(&mut self, script: &str, args: &[&str], outcome: Value, work: impl FnOnce(&Path)) -> usize {
        work(&self.workspace());
        let snapshot = self.snapshot(&format!("step {}: execute-script {script}", self.step + 1));
        let mut result = json!({"exit_code": 0, "stdout": "", "stderr": "", "stdout_truncated": false,
                                "stderr_truncated": false, "duration_ms": 5, "termination": "exited"});
        for (key, value) in outcome.as_object().cloned().unwrap_or_default() {
            result[key] = value;
        }
        let args = json!({"script": script, "args": args, "timeout_seconds": null});
        self.call_with("exec", "execute-script", args, json!({"ok": result}), snapshot)
    }

    /// A `validate()` that scored the workspace (`valid`), as recorded.
    pub fn validate(&mut self, valid: bool) -> usize {
        let told = json!({"ok": {"score": 0.5, "valid": valid, "message": ""}});
        let snapshot = self.store.last().map_or(0, |last| last.id);
        let kept = json!({"step": self.step + 1, "t_ms": 1, "snapshot": snapshot, "score": 0.5, "valid": valid,
                          "error": null});
        self.call_with(
            "episode",
            "validate",
            Value::Null,
            json!({"told": told, "validation": kept}),
            None,
        )
    }

    /// A `validate()` refused because the allowance of `max` is spent.
    pub fn validate_refused(&mut self, max: u32) -> usize {
        let message = format!("all {max} validations of this episode are used; the final workspace is still scored");
        let told = json!({"error": {"kind": "budget-exhausted", "message": message}});
        self.call_with(
            "episode",
            "validate",
            Value::Null,
            json!({"told": told, "validation": null}),
            None,
        )
    }

    fn push(&mut self, event: Value) -> usize {
        self.events.push(event);
        self.events.len() - 1
    }

    /// The evidence a scan reads of it, the final snapshot being the last taken.
    pub fn evidence(&self) -> Evidence {
        let mut record = self.record.clone();
        if let (Some(last), Some(end)) = (self.store.last(), record["end"].as_object_mut()) {
            end.insert("final_snapshot".into(), json!(last.id));
        }
        std::fs::write(self.tmp.path().join("episode.json"), record.to_string()).unwrap();
        let record = serde_json::from_value(record).unwrap();
        Evidence::of(self.tmp.path(), "t/a/1", record, self.events.clone())
    }
}

#[test]
fn flags_beyond_the_kept_number_of_a_kind_are_counted_in_one() {
    let flag = |line: usize| Flag {
        kind: Kind::PathEscape,
        severity: Severity::Review,
        episode: "e".into(),
        step: Some(line as u32),
        line: Some(line),
        detail: String::new(),
    };
    let other = Flag {
        kind: Kind::ReadOnlyWrite,
        ..flag(100)
    };
    let mut flags: Vec<Flag> = (1..=30).map(flag).collect();
    flags.push(other.clone());
    let kept = keep_per_kind(flags);
    assert_eq!(kept.len(), KEPT_PER_KIND + 2);
    let more = &kept[KEPT_PER_KIND];
    assert_eq!(more.line, Some(KEPT_PER_KIND + 1));
    assert!(more.detail.starts_with("10 more"), "{}", more.detail);
    assert_eq!(kept.last(), Some(&other));
}

#[test]
fn host_records_of_a_snapshot_belong_to_the_call_that_follows_them() {
    let mut episode = Synthetic::new();
    episode.call("workspace", "list-files", json!({"dir": ""}), Ok(()));
    let egress = episode.host("egress", json!({"connections": []}));
    let restored = episode.host("restore-read-only", json!({"paths": ["data/a.csv"]}));
    episode.exec("train.py", &[], json!({}), |_| {});
    let evidence = episode.evidence();
    let at = |index| evidence.flag(Kind::ReadOnlyWrite, Severity::Review, Some(index), String::new());
    assert_eq!((at(egress).step, at(egress).line), (Some(1), Some(egress + 1)));
    assert_eq!(at(restored).step, Some(2));
}

#[test]
fn a_string_cut_from_its_line_is_read_whole_from_the_objects() {
    let episode = Synthetic::new();
    let evidence = episode.evidence();
    let whole = "x".repeat(100);
    let hash = blake3::hash(whole.as_bytes()).to_hex().to_string();
    std::fs::write(evidence.dir.join("snapshots/objects").join(&hash), &whole).unwrap();
    let cut = json!({"clipped": "xx", "bytes": 100, "blake3": hash});
    assert_eq!(evidence.full_text(&cut), Some(whole));
    assert_eq!(evidence.full_text(&json!("short")), Some("short".into()));
}

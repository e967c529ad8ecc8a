//! What a script can leave in its workspace, in each sandbox (bubblewrap
//! and Docker), and what the snapshot after its step makes of it: an 8 GiB
//! sparse file stored and restored sparse, its holes never read; a file
//! rewritten in place with its size and time set back still recorded; a
//! tree 1,000 folders deep recorded to the depth limit; many small files.

mod common;

use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::time::Duration;

use mlrb::limits::Limits;
use mlrb::record::snapshot::{self, ManifestEntry, SnapshotStore};
use mlrb::record::walk::DirHandle;
use mlrb::sandbox::docker::DockerSandbox;
use mlrb::sandbox::image::ImageRecipe;
use mlrb::sandbox::local::LocalSandbox;
use mlrb::sandbox::{CommandLimits, EpisodeSandbox, EpisodeSetup, Exec, Mount, Sandbox};

const GIB: u64 = 1 << 30;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Local,
    Docker,
}

/// An episode's sandbox over a workspace, and the snapshot store of its steps.
struct Episode {
    _tmp: tempfile::TempDir,
    ws: std::path::PathBuf,
    snap: std::path::PathBuf,
    runtime: tokio::runtime::Runtime,
    sandbox: Box<dyn EpisodeSandbox>,
    store: SnapshotStore,
}

impl Episode {
    /// `None` where the sandbox cannot run here (Docker without its
    /// engine, said visibly; under `CI=true` that fails instead).
    fn open(kind: Kind) -> Option<Self> {
        if matches!(kind, Kind::Docker) && !common::docker_ready() {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        fs::write(ws.join("train.py"), "print(0)\n").unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let setup = EpisodeSetup {
            name: tmp.path().display().to_string(),
            mounts: vec![Mount::writable(&ws, "/workspace")],
            cwd: "/workspace".into(),
            network: mlrb::sandbox::Reach::Nothing,
            limits: CommandLimits::new(&Limits::default(), Duration::from_secs(300)),
            gpus: vec![],
            lifetime: Duration::from_secs(3600),
        };
        let sandbox = runtime.block_on(async {
            match kind {
                Kind::Local => LocalSandbox::detect().unwrap().open_episode(setup).await.unwrap(),
                Kind::Docker => {
                    let docker = DockerSandbox::connect(&ImageRecipe::standard(false).tag())
                        .await
                        .unwrap();
                    docker.open_episode(setup).await.unwrap()
                }
            }
        });
        let snap = tmp.path().join("snap");
        let mut store = SnapshotStore::create(&snap, &Limits::default()).unwrap();
        store.snapshot(&DirHandle::open_root(&ws).unwrap(), "start").unwrap();
        Some(Self {
            _tmp: tmp,
            ws,
            snap,
            runtime,
            sandbox,
            store,
        })
    }

    /// Runs `python3 -c code` in the workspace; it must succeed.
    fn script(&self, code: &str) {
        let exec = Exec {
            argv: vec!["python3".into(), "-c".into(), code.into()],
            env: Vec::new(),
            timeout: Duration::from_secs(300),
            log_prefix: None,
            stop: Default::default(),
        };
        let outcome = self.runtime.block_on(self.sandbox.exec(exec)).unwrap();
        assert!(outcome.success(), "{}: {}", outcome.describe(), outcome.stderr.text);
    }

    /// The snapshot after a step, which must have seen a change, and the
    /// bytes it read.
    fn step(&mut self) -> (snapshot::Manifest, u64) {
        let before = bytes_read();
        let root = DirHandle::open_root(&self.ws).unwrap();
        self.store.snapshot(&root, "step").unwrap().expect("a change");
        let read = bytes_read() - before;
        (self.store.last_with_entries().unwrap(), read)
    }

    fn hash(&self, rel: &str) -> String {
        match self.store.entry(rel) {
            Some(ManifestEntry::File { hash, .. }) => hash,
            other => panic!("{rel}: {other:?}"),
        }
    }
}

impl Drop for Episode {
    fn drop(&mut self) {
        let _ = self.runtime.block_on(self.sandbox.close());
    }
}

/// Bytes this thread has read so far (`rchar`): the snapshot runs on it.
fn bytes_read() -> u64 {
    let io = fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn on_disk(path: &Path) -> u64 {
    fs::metadata(path).unwrap().blocks() * 512
}

fn a_sparse_file_stays_sparse(kind: Kind) {
    let Some(mut episode) = Episode::open(kind) else { return };
    episode.script(
        "f = open('sparse.bin', 'wb'); f.truncate(8 << 30); f.seek(3 << 30); f.write(b'\\7' * 10000); \
         f.seek((8 << 30) - 4); f.write(b'tail'); f.close()",
    );
    let (manifest, read) = episode.step();
    assert!(read < 16 << 20, "{kind:?}: the snapshot read {} MiB", read >> 20);
    let object = episode.snap.join("objects").join(episode.hash("sparse.bin"));
    assert_eq!(fs::metadata(&object).unwrap().len(), 8 * GIB);
    assert!(
        on_disk(&object) < 1 << 20,
        "{kind:?}: the object takes {} bytes",
        on_disk(&object)
    );
    // Restored for a fork: sparse, the same bytes.
    let fork = episode.ws.parent().unwrap().join("fork");
    snapshot::materialize_writable(&episode.snap, &manifest, &fork).unwrap();
    let back = fork.join("sparse.bin");
    assert!(on_disk(&back) < 1 << 20, "{kind:?}: restored whole");
    let mut buf = [0u8; 4];
    File::open(&back).unwrap().read_exact_at(&mut buf, 8 * GIB - 4).unwrap();
    assert_eq!(&buf, b"tail");
    File::open(&back).unwrap().read_exact_at(&mut buf, 3 * GIB).unwrap();
    assert_eq!(buf, [7u8; 4]);
    // The next step reads none of it.
    episode.script("open('note.txt', 'w').write('next')");
    let (_, read) = episode.step();
    assert!(read < 1 << 20, "{kind:?}: the next step read {read} bytes");
}

#[test]
fn an_8_gib_sparse_file_stays_sparse_in_bubblewrap() {
    a_sparse_file_stays_sparse(Kind::Local);
}

#[test]
fn an_8_gib_sparse_file_stays_sparse_in_docker() {
    a_sparse_file_stays_sparse(Kind::Docker);
}

/// Rewrites `weights.bin` in place with byte `fill`, keeping its size and
/// setting its access and modification times back.
fn forge(fill: u8) -> String {
    format!(
        "import os; st = os.stat('weights.bin'); f = open('weights.bin', 'r+b'); \
         f.write(bytes([{fill}]) * st.st_size); f.close(); \
         os.utime('weights.bin', ns=(st.st_atime_ns, st.st_mtime_ns)); \
         assert os.stat('weights.bin').st_mtime_ns == st.st_mtime_ns"
    )
}

fn a_forged_rewrite_is_recorded(kind: Kind) {
    let Some(mut episode) = Episode::open(kind) else { return };
    episode.script("open('weights.bin', 'wb').write(b'\\1' * (1 << 20))");
    episode.step();
    for fill in [2u8, 3, 4] {
        episode.script(&forge(fill));
        episode.step();
        let want = blake3::hash(&vec![fill; 1 << 20]).to_hex().to_string();
        assert_eq!(episode.hash("weights.bin"), want, "{kind:?}: rewrite {fill} unseen");
    }
}

#[test]
fn a_rewrite_in_place_with_its_mtime_set_back_is_recorded_in_bubblewrap() {
    a_forged_rewrite_is_recorded(Kind::Local);
}

#[test]
fn a_rewrite_in_place_with_its_mtime_set_back_is_recorded_in_docker() {
    a_forged_rewrite_is_recorded(Kind::Docker);
}

fn deep_and_many(kind: Kind) {
    let Some(mut episode) = Episode::open(kind) else { return };
    episode.script(
        "import os\n\
         for d in range(10):\n    \
             os.makedirs(f'many/{d}')\n    \
             for f in range(1000):\n        \
                 open(f'many/{d}/{f}', 'w').write(f'{d} {f}')\n\
         for level in range(1000):\n    \
             os.mkdir('d')\n    \
             os.chdir('d')\n\
         open('deepest', 'w').write('x')\n",
    );
    let (manifest, _) = episode.step();
    let limits = Limits::default();
    assert_eq!(
        manifest.entries.keys().filter(|k| k.starts_with("many/")).count(),
        10 + 10_000
    );
    let deep = manifest
        .entries
        .keys()
        .filter(|k| k.split('/').all(|p| p == "d"))
        .count();
    assert_eq!(deep, limits.path_depth, "{kind:?}");
    assert_eq!(manifest.refused.len(), 1, "{kind:?}: {:?}", manifest.refused);
    assert!(manifest.refused[0].why.contains("deeper"));
    // A step after reads only what it changed.
    episode.script("open('many/7/7', 'w').write('changed')");
    let (after, read) = episode.step();
    assert!(read < 1 << 20, "{kind:?}: the next step read {read} bytes");
    assert_eq!(after.entries.len(), manifest.entries.len());
    let out = episode.ws.parent().unwrap().join("restored");
    snapshot::materialize_writable(&episode.snap, &after, &out).unwrap();
    assert_eq!(fs::read_to_string(out.join("many/7/7")).unwrap(), "changed");
    assert_eq!(fs::read_to_string(out.join("many/9/999")).unwrap(), "9 999");
}

#[test]
fn a_deep_tree_and_many_files_are_recorded_in_bubblewrap() {
    deep_and_many(Kind::Local);
}

#[test]
fn a_deep_tree_and_many_files_are_recorded_in_docker() {
    deep_and_many(Kind::Docker);
}

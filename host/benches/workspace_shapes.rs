//! What a step costs the host whatever a script left in the workspace, in
//! the local sandbox (bubblewrap) and in Docker: an 8 GiB sparse file,
//! 200,000 small files in 200 folders, a tree 1,000 folders deep, and a
//! 1 GiB file rewritten in place at each step with its modification time
//! set back.
//!
//! For each: the script that makes it (its own time, for scale), the
//! snapshot after its step (what the host adds to the step), and the
//! snapshot after a later step that changes one small file; for the 1 GiB
//! file, the median snapshot of 3 steps that each rewrite it. The step's
//! own start in each sandbox is `step_costs`'s figure. Target: every
//! snapshot ≤ 1 s. Run with `scripts/bench.sh` or `cargo bench --profile
//! dev -p mlrb-host --bench workspace_shapes [-- local|docker
//! sparse|files|deep|rewrite]` (Docker
//! needs `mlrb image build`; it is skipped, saying so, without it).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mlrb::limits::Limits;
use mlrb::record::snapshot::SnapshotStore;
use mlrb::record::walk::DirHandle;
use mlrb::sandbox::docker::DockerSandbox;
use mlrb::sandbox::image::ImageRecipe;
use mlrb::sandbox::local::LocalSandbox;
use mlrb::sandbox::{CommandLimits, EpisodeSandbox, EpisodeSetup, Exec, Mount, Sandbox};

const SPARSE: &str = "f = open('sparse.bin', 'wb'); f.truncate(8 << 30); f.seek(3 << 30); \
                      f.write(b'\\7' * 10000); f.close()";
const FILES: &str = "import os\nfor d in range(200):\n    os.makedirs(f'many/{d}')\n    \
                     for f in range(1000):\n        open(f'many/{d}/{f}', 'w').write(f'{d} {f}')\n";
const DEEP: &str =
    "import os\nfor i in range(1000):\n    os.mkdir('d')\n    os.chdir('d')\nopen('f', 'w').write('x')\n";
const BIG: &str = "f = open('weights.bin', 'wb')\nfor i in range(1024): f.write(bytes([i % 251 + 1]) * (1 << 20))\n";
const SMALL_CHANGE: &str = "open('note.txt', 'a').write('one more line\\n')";

/// Rewrites the 1 GiB file in place with `fill`, its times set back.
fn rewrite(fill: u8) -> String {
    format!(
        "import os\nst = os.stat('weights.bin')\nf = open('weights.bin', 'r+b')\n\
         for i in range(1024): f.write(bytes([{fill}, i % 251]) * (1 << 19))\n\
         f.close()\nos.utime('weights.bin', ns=(st.st_atime_ns, st.st_mtime_ns))\n"
    )
}

/// One figure of the table.
#[derive(serde::Serialize)]
struct Figure {
    sandbox: &'static str,
    shape: &'static str,
    script_s: f64,
    snapshot_ms: f64,
    written_mib: f64,
    next_step_ms: f64,
    /// For the small files: opening, reading and hashing them all, nothing
    /// written (what no snapshot can beat).
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_ms: Option<f64>,
}

struct Episode {
    tmp: tempfile::TempDir,
    sandbox: Box<dyn EpisodeSandbox>,
    store: SnapshotStore,
}

impl Episode {
    fn ws(&self) -> PathBuf {
        self.tmp.path().join("ws")
    }

    /// Runs `code` with python3 in the sandbox; how long it took.
    fn script(&self, runtime: &tokio::runtime::Runtime, code: &str) -> Duration {
        let exec = Exec {
            argv: vec!["python3".into(), "-c".into(), code.into()],
            env: Vec::new(),
            timeout: Duration::from_secs(600),
            log_prefix: None,
            stop: Default::default(),
        };
        let started = Instant::now();
        let outcome = runtime.block_on(self.sandbox.exec(exec)).unwrap();
        assert!(outcome.success(), "{}: {}", outcome.describe(), outcome.stderr.text);
        started.elapsed()
    }

    /// The snapshot after a step: milliseconds and MiB written.
    fn snapshot(&mut self) -> (f64, f64) {
        let root = DirHandle::open_root(&self.ws()).unwrap();
        let started = Instant::now();
        self.store.snapshot(&root, "step").unwrap().expect("a change");
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let written = self.store.last().unwrap().stats.written_bytes as f64 / (1 << 20) as f64;
        (ms, written)
    }
}

fn open(runtime: &tokio::runtime::Runtime, sandbox: &dyn Sandbox) -> Episode {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("train.py"), "print(0)\n").unwrap();
    let setup = EpisodeSetup {
        name: tmp.path().display().to_string(),
        mounts: vec![Mount::writable(&ws, "/workspace")],
        cwd: "/workspace".into(),
        network: mlrb::sandbox::Reach::Nothing,
        limits: CommandLimits::new(&Limits::default(), Duration::from_secs(600)),
        gpus: vec![],
        lifetime: Duration::from_secs(3600),
    };
    let sandbox = runtime.block_on(sandbox.open_episode(setup)).unwrap();
    let mut store = SnapshotStore::create(&tmp.path().join("snap"), &Limits::default()).unwrap();
    store.snapshot(&DirHandle::open_root(&ws).unwrap(), "start").unwrap();
    Episode { tmp, sandbox, store }
}

/// Milliseconds to open, read and hash every file under `dir` (one
/// thread, as the snapshot does), writing nothing.
fn read_floor(dir: &std::path::Path) -> f64 {
    let started = Instant::now();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                std::hint::black_box(blake3::hash(&std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    started.elapsed().as_secs_f64() * 1000.0
}

/// The step that makes a shape, then one that changes a small file.
fn shape(runtime: &tokio::runtime::Runtime, sandbox: &dyn Sandbox, name: &'static str, code: &str) -> Figure {
    let mut episode = open(runtime, sandbox);
    let script = episode.script(runtime, code);
    let floor_ms = (code == FILES).then(|| read_floor(&episode.ws().join("many")));
    let (snapshot_ms, written_mib) = episode.snapshot();
    episode.script(runtime, SMALL_CHANGE);
    let (next_step_ms, _) = episode.snapshot();
    runtime.block_on(episode.sandbox.close()).unwrap();
    Figure {
        sandbox: "",
        shape: name,
        script_s: script.as_secs_f64(),
        snapshot_ms,
        written_mib,
        next_step_ms,
        floor_ms,
    }
}

/// Three steps that each rewrite the 1 GiB file in place: medians.
fn rewritten(runtime: &tokio::runtime::Runtime, sandbox: &dyn Sandbox) -> Figure {
    let mut episode = open(runtime, sandbox);
    episode.script(runtime, BIG);
    episode.snapshot();
    let (mut scripts, mut snapshots, mut written) = (Vec::new(), Vec::new(), Vec::new());
    for fill in 1..=3u8 {
        scripts.push(episode.script(runtime, &rewrite(fill)).as_secs_f64());
        let (ms, mib) = episode.snapshot();
        snapshots.push(ms);
        written.push(mib);
    }
    episode.script(runtime, SMALL_CHANGE);
    let (next_step_ms, _) = episode.snapshot();
    runtime.block_on(episode.sandbox.close()).unwrap();
    Figure {
        sandbox: "",
        shape: "1 GiB rewritten in place, mtime set back (median of 3 steps)",
        script_s: median(&mut scripts),
        snapshot_ms: median(&mut snapshots),
        written_mib: median(&mut written),
        next_step_ms,
        floor_ms: None,
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

fn measure(
    runtime: &tokio::runtime::Runtime,
    name: &'static str,
    sandbox: &dyn Sandbox,
    wanted: &dyn Fn(&str) -> bool,
) -> Vec<Figure> {
    let shapes: [(&str, &'static str, &str); 4] = [
        ("sparse", "8 GiB sparse file", SPARSE),
        ("files", "200,000 small files", FILES),
        ("deep", "a tree 1,000 folders deep", DEEP),
        ("rewrite", "", ""),
    ];
    let mut figures = Vec::new();
    for (key, shape_name, code) in shapes.into_iter().filter(|(key, ..)| wanted(key)) {
        let mut figure = match key {
            "rewrite" => rewritten(runtime, sandbox),
            _ => shape(runtime, sandbox, shape_name, code),
        };
        figure.sandbox = name;
        println!(
            "{:<7} {:<62} script {:>7.2} s  snapshot after it {:>8.1} ms ({:>7.1} MiB written)  next step {:>6.1} ms",
            figure.sandbox, figure.shape, figure.script_s, figure.snapshot_ms, figure.written_mib, figure.next_step_ms
        );
        if let Some(floor) = figure.floor_ms {
            println!(
                "{:<7} {:<62} reading and hashing them, nothing written: {floor:.1} ms",
                "", ""
            );
        }
        figures.push(figure);
    }
    figures
}

fn main() {
    // `-- local|docker` picks a sandbox, `sparse|files|deep|rewrite` a
    // shape (cargo adds `--bench`); nothing picked runs them all.
    let parts: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let picked = |choices: &[&str], part: &str| {
        !parts.iter().any(|p| choices.contains(&p.as_str())) || parts.iter().any(|p| p == part)
    };
    let sandboxes = ["local", "docker"];
    let shapes = |shape: &str| picked(&["sparse", "files", "deep", "rewrite"], shape);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut figures = Vec::new();
    if picked(&sandboxes, "local") {
        let local = LocalSandbox::detect().expect("bubblewrap");
        figures.extend(measure(&runtime, "local", &local, &shapes));
    }
    if picked(&sandboxes, "docker") {
        match runtime.block_on(DockerSandbox::connect(&ImageRecipe::standard(false).tag())) {
            Ok(docker) => figures.extend(measure(&runtime, "docker", &docker, &shapes)),
            Err(e) => println!("docker: skipped ({e:#}); `mlrb image build` makes the image"),
        }
    }
    let worst = figures
        .iter()
        .map(|f| f.snapshot_ms.max(f.next_step_ms))
        .fold(0.0, f64::max);
    println!("slowest snapshot: {worst:.1} ms (target ≤ 1000 ms)");
    println!("{}", serde_json::json!({ "workspace_shapes": figures }));
}

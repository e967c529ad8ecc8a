//! What this machine offers mlrb: each part mlrb can use, whether it is
//! here, what its absence disables and the command that adds it
//! (`mlrb doctor`). Each part is found the way the code that uses it finds
//! it, so the answer is the one a run would get.

use serde::Serialize;

use crate::agent_build::toolchain;
use crate::sandbox::{cgroup, docker, gpu, image::ImageRecipe, local::LocalSandbox};

/// One part and what was found of it.
#[derive(Debug, Clone, Serialize)]
pub struct Part {
    /// Its name, as the table shows it.
    pub part: &'static str,
    /// Whether it is here and usable.
    pub present: bool,
    /// What was found (a version, a path) or why it is not usable.
    pub detail: String,
    /// What cannot be done without it.
    pub disables: &'static str,
    /// The command that adds it.
    pub add: &'static str,
    /// Whether mlrb's default path (`mlrb run`, the demo) needs it.
    pub required: bool,
}

/// A part found (`Ok(detail)`) or not (`Err(why)`).
fn part(name: &'static str, found: Result<String, String>, disables: &'static str, add: &'static str) -> Part {
    let present = found.is_ok();
    Part {
        part: name,
        present,
        detail: found.unwrap_or_else(|why| why),
        disables,
        add,
        required: false,
    }
}

/// Every part, in the order the table shows them.
pub async fn examine() -> Vec<Part> {
    let mut parts = vec![
        Part {
            required: true,
            ..part(
                "bubblewrap",
                LocalSandbox::detect()
                    .map(|s| s.version_text().to_string())
                    .map_err(|e| format!("{e:#}")),
                "the local sandbox (--sandbox local, the default): no script can run",
                "scripts/setup.sh (or: apt install bubblewrap)",
            )
        },
        part(
            "cgroups",
            cgroup::Cgroup::available()
                .map(|v| match v {
                    cgroup::Version::V1 => "cgroup v1, writable".to_string(),
                    cgroup::Version::V2 => "cgroup v2, writable".to_string(),
                })
                .ok_or_else(|| "no writable control group".to_string()),
            "exact memory and process limits in the local sandbox (rlimits stand in)",
            "run as root, or in a delegated cgroup v2 subtree (systemd-run --user --scope -p Delegate=yes)",
        ),
    ];
    parts.extend(docker_parts().await);
    parts.push(gpus());
    parts.extend(toolchains());
    parts.push(part(
        "local model",
        crate::llm::local::model_file()
            .map(|f| f.display().to_string())
            .map_err(|e| format!("{e:#}")),
        "the offline default model for agents' LLM calls (the research agent)",
        "scripts/setup.sh --with llm",
    ));
    parts.push(part(
        "slurm",
        on_path(&["sbatch"]),
        "benches on a Slurm cluster (mlrb bench --on slurm)",
        "scripts/setup.sh --with slurm (and a cluster to submit to)",
    ));
    parts.push(part(
        "chromium",
        on_path(&["chromium", "chromium-browser"]),
        "the browser tests of report.html and the trace viewer (the report opens in any browser)",
        "scripts/setup.sh --with browser",
    ));
    parts
}

/// The Docker engine and the two images the Docker sandbox runs.
async fn docker_parts() -> Vec<Part> {
    let engine = docker::connect().await;
    let image = |torch: bool| {
        let tag = ImageRecipe::standard(torch).tag();
        let engine = engine.as_ref().ok().map(|(d, _)| d.clone());
        async move {
            let Some(engine) = engine else {
                return Err("no Docker engine".to_string());
            };
            match engine.inspect_image(&tag).await {
                Ok(_) => Ok(tag),
                Err(_) => Err(format!("{tag} is not built")),
            }
        }
    };
    let (standard, torch) = (image(false).await, image(true).await);
    vec![
        part(
            "docker engine",
            engine
                .as_ref()
                .map(|(_, v)| format!("Docker {v}"))
                .map_err(|e| format!("{e:#}")),
            "the Docker sandbox (--sandbox docker)",
            "install Docker Engine and start it (systemctl start docker)",
        ),
        part(
            "docker image",
            standard,
            "the Docker sandbox's scripts",
            "mlrb image build (debootstrap: scripts/setup.sh --with docker)",
        ),
        part(
            "docker torch image",
            torch,
            "torch tasks in Docker (the ML Research Benchmark tasks)",
            "mlrb image build --with-torch",
        ),
    ]
}

/// Runs the GPU probe (`sandbox::gpu::probe`) in the local sandbox with
/// GPU `device` (`none`: without a GPU) and the Python environment
/// `python`; its outcome, whose stdout is the probe's JSON.
pub async fn gpu_probe(device: &str, python: Option<&std::path::Path>) -> anyhow::Result<crate::sandbox::Outcome> {
    use crate::sandbox::Sandbox;
    let mut sandbox = LocalSandbox::detect()?;
    if let Some(python) = python {
        sandbox = sandbox.with_python(crate::sandbox::python::PythonEnv::resolve(python)?);
    }
    let devices = match device {
        "none" => Vec::new(),
        device => vec![device.to_string()],
    };
    let workspace = tempfile::tempdir()?;
    sandbox.run(gpu::probe::command(devices, workspace.path())).await
}

/// The NVIDIA GPUs nvidia-smi lists.
fn gpus() -> Part {
    let host = gpu::GpuHost::from_env();
    let inventory = host.inventory();
    let found = match (&inventory.unavailable, inventory.devices.len()) {
        (Some(why), _) => Err(why.clone()),
        (None, 0) => Err("nvidia-smi lists no GPU".to_string()),
        (None, n) => Ok(format!("{n} GPU(s)")),
    };
    part(
        "gpus",
        found,
        "GPU tasks (--gpus)",
        "an NVIDIA GPU with its driver (nvidia-smi on PATH)",
    )
}

/// The toolchains `mlrb agent build` uses, one part per language.
fn toolchains() -> Vec<Part> {
    let tool = |names: &[&str], env: &str| {
        toolchain::find(names, env, "run scripts/setup.sh")
            .map(|p| p.display().to_string())
            .map_err(|e| format!("{e:#}"))
    };
    let rust = std::process::Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("rustup cannot be run ({e})"))
        .and_then(|o| {
            let listed = String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == "wasm32-wasip2");
            listed
                .then(|| "wasm32-wasip2".to_string())
                .ok_or_else(|| "the wasm32-wasip2 target is not installed".to_string())
        });
    let c = [
        tool(&["clang-14", "clang"], "MLRB_CLANG"),
        toolchain::wasi_sysroot()
            .map(|dir| dir.map_or("wasi-libc".to_string(), |d| format!("wasi-libc in {}", d.display())))
            .map_err(|e| format!("{e:#}")),
    ]
    .into_iter()
    .collect::<Result<Vec<String>, String>>()
    .map(|found| found.join(", "));
    vec![
        part(
            "rust agents",
            rust,
            "building Rust agents (mlrb agent build, the built-in agents)",
            "rustup target add wasm32-wasip2",
        ),
        part(
            "python agents",
            tool(&["componentize-py"], "MLRB_COMPONENTIZE_PY"),
            "building Python agents (mlrb agent build)",
            "scripts/setup.sh --with python",
        ),
        part(
            "c agents",
            c,
            "building C agents (mlrb agent build)",
            "scripts/setup.sh --with c",
        ),
    ]
}

/// The first of `names` on `PATH`.
fn on_path(names: &[&str]) -> Result<String, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
        .map(|found| found.display().to_string())
        .ok_or_else(|| format!("{} is not on PATH", names[0]))
}

//! One build recipe per language, each ending in a component (before its
//! closed imports are filled).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::Project;
use super::sdk::Sdk;
use super::toolchain::{find, run};

/// `cargo build --release --target wasm32-wasip2`; the `.wasm` cargo reports.
pub fn build_rust(project: &Project) -> Result<PathBuf> {
    let cargo = find(&["cargo"], "CARGO", "install Rust with rustup")?;
    let stdout = run(
        Command::new(cargo)
            .current_dir(&project.dir)
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            .args(["--message-format", "json-render-diagnostics"]),
        "cargo build",
    )?;
    // The last cdylib artifact that is a .wasm is the agent.
    let mut wasm = None;
    for line in stdout.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let is_cdylib = message["target"]["kind"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k == "cdylib"));
        if !is_cdylib {
            continue;
        }
        if let Some(files) = message["filenames"].as_array() {
            for file in files.iter().filter_map(|f| f.as_str()) {
                if file.ends_with(".wasm") {
                    wasm = Some(PathBuf::from(file));
                }
            }
        }
    }
    wasm.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: cargo built no .wasm; the agent crate needs `[lib] crate-type = [\"cdylib\"]`",
            project.dir.join("Cargo.toml").display()
        )
    })
}

/// componentize-py against the SDK's WIT, with the project and the SDK's
/// Python package on the module path.
pub fn build_python(project: &Project, sdk: &Sdk, work: &Path) -> Result<PathBuf> {
    let module = project.dir.join(format!("{}.py", project.entry));
    if !module.is_file() {
        bail!(
            "{}: no such module; name the module that defines WitWorld with `entry` in {}",
            module.display(),
            super::MANIFEST
        );
    }
    let componentize = find(
        &["componentize-py"],
        "MLRB_COMPONENTIZE_PY",
        "run scripts/setup.sh --with python, or `pip install componentize-py==0.25.1`",
    )?;
    let output = work.join("componentized.wasm");
    run(
        Command::new(componentize)
            .arg("--quiet")
            .arg("-d")
            .arg(sdk.wit())
            .args(["-w", "agent", "componentize"])
            .arg("-p")
            .arg(&project.dir)
            .arg("-p")
            .arg(sdk.python())
            .arg(&project.entry)
            .arg("-o")
            .arg(&output)
            // componentize-py would otherwise add the site-packages of
            // whatever virtualenv the caller happens to be in.
            .env_remove("VIRTUAL_ENV"),
        "componentize-py",
    )?;
    Ok(output)
}

/// The `--sysroot` for wasi-libc: `WASI_SYSROOT`, a wasi-sdk style
/// sysroot, or none where Debian's `wasi-libc` installs it multiarch
/// (`/usr/include/wasm32-wasi`), which Debian's clang finds by itself.
fn wasi_sysroot() -> Result<Option<PathBuf>> {
    if let Some(dir) = std::env::var_os("WASI_SYSROOT") {
        return Ok(Some(PathBuf::from(dir)));
    }
    for dir in ["/usr/share/wasi-sysroot", "/opt/wasi-sdk/share/wasi-sysroot"] {
        if Path::new(dir).is_dir() {
            return Ok(Some(PathBuf::from(dir)));
        }
    }
    if Path::new("/usr/include/wasm32-wasi").is_dir() {
        return Ok(None);
    }
    bail!("no wasi-libc found (run scripts/setup.sh --with c, install Debian's wasi-libc, or set WASI_SYSROOT)")
}

/// `wit-bindgen c`, clang for wasm32-wasi (a reactor: no `main`), then
/// `wasm-tools component new` with the WASI preview1 reactor adapter.
pub fn build_c(project: &Project, sdk: &Sdk, work: &Path) -> Result<PathBuf> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&project.dir)
        .with_context(|| format!("{}: cannot list", project.dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    if sources.is_empty() {
        bail!("{}: no .c file to build", project.dir.display());
    }
    let wit_bindgen = find(
        &["wit-bindgen"],
        "MLRB_WIT_BINDGEN",
        concat!(
            "run scripts/setup.sh --with c, or `cargo install wit-bindgen-cli@",
            env!("MLRB_WIT_BINDGEN_VERSION"),
            "`"
        ),
    )?;
    let wasm_tools = find(
        &["wasm-tools"],
        "MLRB_WASM_TOOLS",
        "run scripts/setup.sh --with c, or `cargo install wasm-tools@1.239.0`",
    )?;
    let clang = find(
        &["clang-14", "clang"],
        "MLRB_CLANG",
        "run scripts/setup.sh --with c, or install Debian's clang-14, lld-14, wasi-libc and libclang-rt-14-dev-wasm32",
    )?;
    let bindings = work.join("bindings");
    run(
        Command::new(wit_bindgen)
            .arg("c")
            .arg(sdk.wit())
            .args(["--world", "agent", "--out-dir"])
            .arg(&bindings),
        "wit-bindgen c",
    )?;
    let core = work.join("core.wasm");
    let mut compile = Command::new(clang);
    compile.args(["--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-Wall"]);
    if let Some(sysroot) = wasi_sysroot()? {
        compile.arg(format!("--sysroot={}", sysroot.display()));
    }
    run(
        compile
            .arg("-I")
            .arg(&bindings)
            .arg("-I")
            .arg(sdk.c())
            .args(&sources)
            .arg(bindings.join("agent.c"))
            .arg(bindings.join("agent_component_type.o"))
            .arg("-o")
            .arg(&core),
        "clang",
    )?;
    let adapter = work.join("wasi_snapshot_preview1.reactor.wasm");
    std::fs::write(
        &adapter,
        wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
    )?;
    let component = work.join("component.wasm");
    run(
        Command::new(wasm_tools)
            .args(["component", "new"])
            .arg(&core)
            .arg("--adapt")
            .arg(format!("wasi_snapshot_preview1={}", adapter.display()))
            .arg("-o")
            .arg(&component),
        "wasm-tools component new",
    )?;
    Ok(component)
}

//! One build recipe per language, each ending in a component (before its
//! closed imports are filled).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::Project;
use super::sdk::Sdk;
use super::toolchain::{find, run, wasi_sysroot};

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

/// The C bindings (wit-bindgen's C generator, in process), clang for
/// wasm32-wasi (a reactor: no `main`), then the core module made a component
/// with the WASI preview1 reactor adapter (wit-component, in process). Only
/// clang and wasi-libc come from the system.
pub fn build_c(project: &Project, sdk: &Sdk, work: &Path) -> Result<PathBuf> {
    let sources = c_sources(&project.dir)?;
    let clang = find(
        &["clang-14", "clang"],
        "MLRB_CLANG",
        "run scripts/setup.sh --with c, or install Debian's clang-14, lld-14, wasi-libc and libclang-rt-14-dev-wasm32",
    )?;
    let bindings = work.join("bindings");
    c_bindings(&sdk.wit(), &bindings)?;
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
    let component = work.join("component.wasm");
    std::fs::write(&component, componentize_core(&core)?)
        .with_context(|| format!("{}: cannot write", component.display()))?;
    Ok(component)
}

/// The project's `.c` files, sorted.
fn c_sources(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    if sources.is_empty() {
        bail!("{}: no .c file to build", dir.display());
    }
    Ok(sources)
}

/// What `wit-bindgen c <wit> --world agent --out-dir <out>` writes.
fn c_bindings(wit: &Path, out: &Path) -> Result<()> {
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve
        .push_path(wit)
        .with_context(|| format!("{}: reading mlrb's WIT", wit.display()))?;
    let world = resolve.select_world(&[package], Some("agent"))?;
    let mut files = wit_bindgen_core::Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)
        .context("generating the C bindings")?;
    std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    for (name, contents) in files.iter() {
        let path = out.join(name);
        std::fs::write(&path, contents).with_context(|| format!("{}: cannot write", path.display()))?;
    }
    Ok(())
}

/// What `wasm-tools component new <core> --adapt wasi_snapshot_preview1=...`
/// makes of a core module.
fn componentize_core(core: &Path) -> Result<Vec<u8>> {
    let module = std::fs::read(core).with_context(|| format!("{}: cannot read", core.display()))?;
    wit_component::ComponentEncoder::default()
        .module(&module)
        .context("reading the compiled module's component type")?
        .adapter(
            "wasi_snapshot_preview1",
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .context("the WASI preview1 adapter")?
        .validate(true)
        .encode()
        .context("making the compiled module a component")
}

//! `mlrb agent new` and `mlrb agent build`: agent projects in Rust, Python
//! and C, built into the one kind of `.wasm` component the host runs.
//!
//! A project is a folder with an optional `mlrb-agent.toml`:
//!
//! ```toml
//! [agent]
//! name = "my-agent"     # the .wasm's name (default: the folder's)
//! language = "python"   # rust | python | c (default: guessed from the files)
//! entry = "app"         # python: the module that defines WitWorld
//! ```

pub mod deny;
mod languages;
pub mod scaffold;
pub mod sdk;
pub mod toolchain;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The languages mlrb builds agents from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// Rust: a cargo crate.
    Rust,
    /// Python: the module named by `entry`.
    Python,
    /// C sources.
    C,
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::C => "c",
        })
    }
}

/// The optional project file in an agent's folder.
pub const MANIFEST: &str = "mlrb-agent.toml";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    agent: ManifestAgent,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestAgent {
    name: Option<String>,
    language: Option<Language>,
    entry: Option<String>,
}

/// An agent project, ready to build.
#[derive(Debug, Clone)]
pub struct Project {
    /// The project's folder (canonical).
    pub dir: PathBuf,
    /// The agent's name, which the built `.wasm` takes.
    pub name: String,
    /// The language its sources are in.
    pub language: Language,
    /// Python: the module defining `WitWorld`.
    pub entry: String,
}

impl Project {
    /// Reads `dir/mlrb-agent.toml` if there is one and fills the rest from
    /// the folder: its name, and the language its files are in.
    pub fn open(dir: &Path) -> Result<Project> {
        if !dir.is_dir() {
            bail!("{}: not a folder (an agent project is a folder)", dir.display());
        }
        let dir = dir
            .canonicalize()
            .with_context(|| format!("{}: cannot resolve", dir.display()))?;
        let manifest_path = dir.join(MANIFEST);
        let manifest: Manifest = if manifest_path.is_file() {
            let text = std::fs::read_to_string(&manifest_path)
                .with_context(|| format!("{}: cannot read", manifest_path.display()))?;
            toml::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {} (fields: name, language = rust|python|c, entry)",
                    manifest_path.display(),
                    e.message()
                )
            })?
        } else {
            Manifest::default()
        };
        let language = match manifest.agent.language {
            Some(language) => language,
            None => guess_language(&dir)?,
        };
        let name = manifest.agent.name.unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "agent".into())
        });
        Ok(Project {
            entry: manifest.agent.entry.unwrap_or_else(|| "app".into()),
            dir,
            name,
            language,
        })
    }

    /// Where the build writes the component unless told otherwise.
    pub fn default_output(&self) -> PathBuf {
        self.dir
            .join(format!("{}.wasm", crate::paths::safe_component(&self.name)))
    }
}

fn guess_language(dir: &Path) -> Result<Language> {
    if dir.join("Cargo.toml").is_file() {
        return Ok(Language::Rust);
    }
    if dir.join("app.py").is_file() {
        return Ok(Language::Python);
    }
    let has_c = std::fs::read_dir(dir)?
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "c"));
    if has_c {
        return Ok(Language::C);
    }
    bail!(
        "{}: cannot tell the agent's language (no Cargo.toml, app.py or .c file); add {MANIFEST} with `language = \"rust\"|\"python\"|\"c\"`",
        dir.display()
    )
}

/// Builds `project` into a component at `output` (default: the project's
/// `<name>.wasm`). The component never imports sockets or preopened
/// directories: where the language's runtime brings them, they are closed
/// (see [`deny`]).
pub fn build(project: &Project, output: Option<&Path>) -> Result<PathBuf> {
    let output = output
        .map(Path::to_path_buf)
        .unwrap_or_else(|| project.default_output());
    let sdk = sdk::materialize(&crate::paths::cache_dir())?;
    let work = tempfile::tempdir().context("cannot create a build folder")?;
    let raw = match project.language {
        Language::Rust => languages::build_rust(project)?,
        Language::Python => languages::build_python(project, &sdk, work.path())?,
        Language::C => languages::build_c(project, &sdk, work.path())?,
    };
    let bytes = std::fs::read(&raw).with_context(|| format!("{}: cannot read the build's output", raw.display()))?;
    let closed = deny::close_imports(&bytes).with_context(|| format!("{}", raw.display()))?;
    if let Some(parent) = output.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("{}: cannot create", parent.display()))?;
    }
    std::fs::write(&output, closed).with_context(|| format!("{}: cannot write", output.display()))?;
    Ok(output)
}

//! `mlrb agent new <name> --lang rust|python|c`: a buildable agent project
//! that starts as the baseline policy.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::Language;
use super::sdk::Sdk;

/// (path in the project, template) per language; `{{name}}`, `{{sdk}}`,
/// `{{language}}` and `{{file}}` are filled in.
fn templates(language: Language) -> Vec<(&'static str, &'static str)> {
    let mut files = vec![
        (super::MANIFEST, include_str!("../../templates/mlrb-agent.toml")),
        ("README.md", include_str!("../../templates/README.md")),
        (".gitignore", "/target\n*.wasm\n"),
    ];
    files.extend(match language {
        Language::Rust => vec![
            ("Cargo.toml", include_str!("../../templates/rust/Cargo.toml")),
            ("src/lib.rs", include_str!("../../templates/rust/src/lib.rs")),
        ],
        Language::Python => vec![("app.py", include_str!("../../templates/python/app.py"))],
        Language::C => vec![("agent.c", include_str!("../../templates/c/agent.c"))],
    });
    files
}

/// Whether `name` works as a crate, module and file name alike.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Creates the project `parent/<name>` (or `dir` itself when given) and
/// returns its folder. Refuses to write into a folder that is not empty.
pub fn create(dir: &Path, name: &str, language: Language, sdk: &Sdk) -> Result<PathBuf> {
    if !valid_name(name) {
        bail!("agent name {name:?}: use lowercase letters, digits, '-' and '_', starting with a letter");
    }
    if dir.exists() {
        let not_empty = std::fs::read_dir(dir)
            .with_context(|| format!("{}: cannot list", dir.display()))?
            .next()
            .is_some();
        if not_empty {
            bail!(
                "{}: already exists and is not empty; choose another name or --dir",
                dir.display()
            );
        }
    }
    let file = format!("{name}.wasm");
    for (path, template) in templates(language) {
        let text = template
            .replace("{{name}}", name)
            .replace("{{sdk}}", &sdk.root.display().to_string())
            .replace("{{language}}", &language.to_string())
            .replace("{{file}}", &file);
        let target = dir.join(path);
        std::fs::create_dir_all(target.parent().unwrap())
            .with_context(|| format!("{}: cannot create", target.display()))?;
        std::fs::write(&target, text).with_context(|| format!("{}: cannot write", target.display()))?;
    }
    Ok(dir.to_path_buf())
}

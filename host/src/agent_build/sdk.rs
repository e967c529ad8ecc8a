//! The SDKs this mlrb was built with, embedded so that `mlrb agent new`
//! and `mlrb agent build` work from any folder, offline, against exactly
//! the WIT this host implements. They are written once per content hash
//! under the cache (`sdk/<hash>/`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// (path inside the SDK folder, contents)
const FILES: &[(&str, &str)] = &[
    ("wit/mlrb-agent.wit", include_str!("../../../wit/mlrb-agent.wit")),
    ("rust/wit/mlrb-agent.wit", include_str!("../../../wit/mlrb-agent.wit")),
    ("rust/src/lib.rs", include_str!("../../../sdk/rust/src/lib.rs")),
    ("rust/src/actions.rs", include_str!("../../../sdk/rust/src/actions.rs")),
    ("rust/src/toolbox.rs", include_str!("../../../sdk/rust/src/toolbox.rs")),
    (
        "rust/src/mlagentbench-tools.json",
        include_str!("../../../sdk/mlagentbench-tools.json"),
    ),
    ("rust/Cargo.toml", RUST_MANIFEST),
    (
        "python/mlrb_sdk/__init__.py",
        include_str!("../../../sdk/python/mlrb_sdk/__init__.py"),
    ),
    (
        "python/mlrb_sdk/_core.py",
        include_str!("../../../sdk/python/mlrb_sdk/_core.py"),
    ),
    (
        "python/mlrb_sdk/workspace.py",
        include_str!("../../../sdk/python/mlrb_sdk/workspace.py"),
    ),
    (
        "python/mlrb_sdk/exec.py",
        include_str!("../../../sdk/python/mlrb_sdk/exec.py"),
    ),
    (
        "python/mlrb_sdk/episode.py",
        include_str!("../../../sdk/python/mlrb_sdk/episode.py"),
    ),
    (
        "python/mlrb_sdk/llm.py",
        include_str!("../../../sdk/python/mlrb_sdk/llm.py"),
    ),
    (
        "python/mlrb_sdk/actions.py",
        include_str!("../../../sdk/python/mlrb_sdk/actions.py"),
    ),
    (
        "python/mlrb_sdk/toolbox.py",
        include_str!("../../../sdk/python/mlrb_sdk/toolbox.py"),
    ),
    (
        "python/mlrb_sdk/mlagentbench-tools.json",
        include_str!("../../../sdk/mlagentbench-tools.json"),
    ),
    ("python/mlrb_sdk/py.typed", ""),
    ("c/mlrb_sdk.h", include_str!("../../../sdk/c/mlrb_sdk.h")),
    (
        "c/mlrb_mlagentbench_tools.h",
        include_str!("../../../sdk/c/mlrb_mlagentbench_tools.h"),
    ),
];

/// The Rust SDK's manifest outside mlrb's own workspace (`build.rs`
/// replaces what it inherits from the workspace with the values).
const RUST_MANIFEST: &str = include_str!(concat!(env!("OUT_DIR"), "/sdk-Cargo.toml"));

/// The SDK folder: `wit/`, `rust/` (a crate), `python/` (the `mlrb_sdk`
/// package) and `c/` (the helper header).
#[derive(Debug, Clone)]
pub struct Sdk {
    /// Where the SDK was written.
    pub root: PathBuf,
}

impl Sdk {
    /// `wit/`: the WIT contract.
    pub fn wit(&self) -> PathBuf {
        self.root.join("wit")
    }
    /// `python/`: the `mlrb_sdk` package.
    pub fn python(&self) -> PathBuf {
        self.root.join("python")
    }
    /// `c/`: the helper header.
    pub fn c(&self) -> PathBuf {
        self.root.join("c")
    }
}

/// Writes the embedded SDK under `cache` (once per content) and returns it.
pub fn materialize(cache: &Path) -> Result<Sdk> {
    let mut hasher = blake3::Hasher::new();
    for (path, contents) in FILES {
        hasher
            .update(path.as_bytes())
            .update(&[0])
            .update(contents.as_bytes())
            .update(&[0]);
    }
    let hash = hasher.finalize().to_hex();
    let root = cache.join("sdk").join(&hash[..16]);
    if root.join(".complete").is_file() {
        return Ok(Sdk { root });
    }
    let parent = cache.join("sdk");
    std::fs::create_dir_all(&parent).with_context(|| format!("{}: cannot create", parent.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(".staging-")
        .tempdir_in(&parent)
        .with_context(|| format!("{}: cannot write", parent.display()))?;
    for (path, contents) in FILES {
        let target = staging.path().join(path);
        std::fs::create_dir_all(target.parent().unwrap())?;
        std::fs::write(&target, contents)?;
    }
    std::fs::write(staging.path().join(".complete"), "")?;
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, &root) {
        // Another process got there first; its copy is identical.
        let _ = std::fs::remove_dir_all(&staged);
        if !root.join(".complete").is_file() {
            return Err(e).with_context(|| format!("{}: cannot write the SDK", root.display()));
        }
    }
    Ok(Sdk { root })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every file of the SDK folders is embedded, as it is on disk.
    #[test]
    fn the_embedded_sdk_is_the_sdk_in_the_repository() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        for (dir, ext, prefix) in [
            ("sdk/python/mlrb_sdk", "py", "python/mlrb_sdk"),
            ("sdk/rust/src", "rs", "rust/src"),
            ("sdk/c", "h", "c"),
        ] {
            for entry in std::fs::read_dir(repo.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|x| x != ext) {
                    continue;
                }
                let name = format!("{prefix}/{}", path.file_name().unwrap().to_string_lossy());
                let embedded = super::FILES.iter().find(|(p, _)| *p == name);
                let on_disk = std::fs::read_to_string(&path).unwrap();
                assert_eq!(
                    embedded.map(|(_, c)| *c),
                    Some(on_disk.as_str()),
                    "{name} is not embedded as it is"
                );
            }
        }
    }

    /// The C SDK's tool definitions are `sdk/mlagentbench-tools.json` as C
    /// literals. `MLRB_BLESS=1` rewrites the header after the JSON changed.
    #[test]
    fn the_c_tool_definitions_are_the_json_ones() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let json = std::fs::read_to_string(repo.join("sdk/mlagentbench-tools.json")).unwrap();
        let expected = c_tools_header(&json);
        let path = repo.join("sdk/c/mlrb_mlagentbench_tools.h");
        if std::env::var_os("MLRB_BLESS").is_some() {
            std::fs::write(&path, &expected).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == expected,
            "sdk/c/mlrb_mlagentbench_tools.h is stale: run `MLRB_BLESS=1 cargo test -p mlrb-host --lib the_c_tool_definitions`"
        );
    }

    fn c_tools_header(json: &str) -> String {
        let tools: Vec<serde_json::Value> = serde_json::from_str(json).unwrap();
        let mut out = String::from(
            "// mlrb_mlagentbench_tools.h: MLAgentBench's actions as tool definitions for\n\
             // mlrb:agent's llm interface; generated from sdk/mlagentbench-tools.json\n\
             // (the file the Rust and Python SDKs read), do not edit.\n\n\
             #ifndef MLRB_MLAGENTBENCH_TOOLS_H\n#define MLRB_MLAGENTBENCH_TOOLS_H\n\n\
             #include <stddef.h>\n\n\
             // A tool: its name for the model, MLAgentBench's action name, what it\n\
             // does, and the JSON Schema of its arguments.\n\
             typedef struct {\n    const char *name;\n    const char *action;\n    const char *description;\n    const char *parameters;\n} mlrb_tool_def_t;\n\n\
             static const mlrb_tool_def_t mlrb_mlagentbench_tools[] = {\n",
        );
        for tool in &tools {
            let field = |key: &str| c_literal(tool[key].as_str().unwrap());
            let schema = c_literal(&serde_json::to_string(&tool["parameters"]).unwrap());
            out.push_str(&format!(
                "    {{{}, {},\n     {},\n     {}}},\n",
                field("name"),
                field("action"),
                field("description"),
                schema
            ));
        }
        out.push_str(&format!(
            "}};\n\nenum {{ MLRB_MLAGENTBENCH_TOOL_COUNT = {} }};\n\n#endif\n",
            tools.len()
        ));
        out
    }

    /// A C string literal; bytes outside printable ASCII as octal escapes
    /// (three digits, so the next character cannot extend them).
    fn c_literal(text: &str) -> String {
        let mut out = String::from("\"");
        for byte in text.bytes() {
            match byte {
                b'"' => out.push_str("\\\""),
                b'\\' => out.push_str("\\\\"),
                b'?' => out.push_str("\\?"),
                0x20..=0x7e => out.push(byte as char),
                _ => out.push_str(&format!("\\{byte:03o}")),
            }
        }
        out.push('"');
        out
    }
}

//! The shape of the Python modules mlrb mounts for task scripts
//! (`host/python/*.py`): no function grows past a screen (80 lines, the rule
//! `architecture.rs` holds the Rust code to) and no module imports one that
//! imports it back. Python's own `ast` module reads the files, so these tests
//! run `python3`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

mod graph;

const LIMIT: usize = 80;

/// Reads the Python files given as arguments and prints, tab-separated,
/// `def <file> <qualified name> <lines>` for every function at any depth
/// (methods and nested functions included) and `import <module> <module>` for
/// every import, at any depth, of another module among the files.
const SCANNER: &str = r#"
import ast
import os
import sys

modules = {os.path.basename(p)[:-3]: p for p in sys.argv[1:]}


def functions(node, prefix, path):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = prefix + child.name
            if not isinstance(child, ast.ClassDef):
                print("def", path, name, child.end_lineno - child.lineno + 1, sep="\t")
            functions(child, name + ".", path)
        else:
            functions(child, prefix, path)


for module, path in sorted(modules.items()):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    functions(tree, "", path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [node.module]
        else:
            continue
        for target in targets:
            target = target.split(".")[0]
            if target in modules and target != module:
                print("import", module, target, sep="\t")
"#;

/// What the scanner found in a set of files.
#[derive(Default)]
struct Scan {
    /// (file name, qualified function name, lines)
    functions: Vec<(String, String, usize)>,
    /// module → the modules (among the files) it imports
    imports: BTreeMap<String, BTreeSet<String>>,
}

fn scan(files: &[PathBuf]) -> Scan {
    let output = Command::new("python3")
        .arg("-c")
        .arg(SCANNER)
        .args(files)
        .output()
        .expect("running python3");
    assert!(
        output.status.success(),
        "the scanner failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut found = Scan::default();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        match fields.as_slice() {
            ["def", path, name, lines] => {
                let file = Path::new(path).file_name().unwrap().to_string_lossy().into_owned();
                found.functions.push((file, name.to_string(), lines.parse().unwrap()));
            }
            ["import", module, target] => {
                found
                    .imports
                    .entry(module.to_string())
                    .or_default()
                    .insert(target.to_string());
            }
            _ => panic!("unexpected scanner line {line:?}"),
        }
    }
    found
}

/// `file: function (N lines)` for each function longer than `limit` lines.
fn long_functions(scan: &Scan, limit: usize) -> Vec<String> {
    scan.functions
        .iter()
        .filter(|(_, _, lines)| *lines > limit)
        .map(|(file, name, lines)| format!("{file}: {name} ({lines} lines)"))
        .collect()
}

/// The first import cycle among the modules, as `a → b → c` (c imports a).
fn import_cycle(scan: &Scan) -> Option<String> {
    graph::loops(&scan.imports).into_iter().next()
}

/// The `.py` files directly in `host/python` (build.rs embeds only those).
fn python_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    files.sort();
    files
}

/// Writes `name` (a file name) with `text` into `dir`.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A function `name` of exactly `lines` lines, indented by `indent`.
fn function(name: &str, lines: usize, indent: &str) -> String {
    let mut text = format!("{indent}def {name}():\n");
    for i in 1..lines {
        text.push_str(&format!("{indent}    x{i} = {i}\n"));
    }
    text
}

#[test]
fn no_python_function_is_longer_than_a_screen() {
    let files = python_files();
    assert!(files.iter().any(|p| p.ends_with("mlrb_llm_eval.py")), "{files:?}");
    let scan = scan(&files);
    assert!(scan.functions.len() > 100, "{} functions", scan.functions.len());
    let long = long_functions(&scan, LIMIT);
    assert!(long.is_empty(), "functions over {LIMIT} lines:\n{}", long.join("\n"));
}

#[test]
fn the_length_check_reports_a_long_function_and_not_a_short_one() {
    let tmp = tempfile::tempdir().unwrap();
    let source = [
        function("long_one", 90, ""),
        function("short_one", 10, ""),
        function("just_a_screen", LIMIT, ""),
        "class Box:\n".to_string(),
        function("method", 90, "    "),
    ]
    .join("\n");
    let path = write(tmp.path(), "mlrb_generated.py", &source);
    let scan = scan(&[path]);
    let lengths: BTreeMap<&str, usize> = scan.functions.iter().map(|(_, n, l)| (n.as_str(), *l)).collect();
    assert_eq!(lengths["long_one"], 90);
    assert_eq!(lengths["short_one"], 10);
    assert_eq!(
        long_functions(&scan, LIMIT),
        [
            "mlrb_generated.py: long_one (90 lines)",
            "mlrb_generated.py: Box.method (90 lines)"
        ]
    );
}

#[test]
fn python_modules_import_one_another_without_cycle() {
    let scan = scan(&python_files());
    // The entry point of the GPU tasks' evaluators re-exports its siblings.
    let entry = scan.imports.get("mlrb_llm_eval").cloned().unwrap_or_default();
    assert!(entry.contains("mlrb_llm_evaluate"), "{entry:?}");
    if let Some(cycle) = import_cycle(&scan) {
        panic!("import cycle among host/python's modules: {cycle}");
    }
}

#[test]
fn the_cycle_check_finds_a_made_up_cycle() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write(tmp.path(), "mlrb_a.py", "import mlrb_b\nimport json\n");
    let b = write(
        tmp.path(),
        "mlrb_b.py",
        "def f():\n    from mlrb_c import g\n    return g\n",
    );
    let c = write(tmp.path(), "mlrb_c.py", "import mlrb_a as A\n");
    let d = write(tmp.path(), "mlrb_d.py", "from mlrb_a import x\n");
    let cyclic = scan(&[a.clone(), b.clone(), c, d.clone()]);
    assert_eq!(import_cycle(&cyclic).as_deref(), Some("mlrb_a → mlrb_b → mlrb_c"));
    // Without mlrb_c the imports point one way.
    let acyclic = scan(&[a, b, d]);
    assert_eq!(acyclic.imports.len(), 2, "{:?}", acyclic.imports);
    assert_eq!(import_cycle(&acyclic), None);
}

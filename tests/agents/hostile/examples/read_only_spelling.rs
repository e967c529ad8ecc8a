//! Tries to change a read-only file under other spellings, through the API
//! and from a script.
use hostile_agents::{outcome, run_python, script_report};
use mlrb_sdk::{Agent, TaskInfo, workspace};

struct ReadOnlySpelling;

const TAMPER: &str = r#"
import os, shutil
attempts = []
def attempt(name, fn):
    try:
        fn()
        attempts.append(name + "=ESCAPED")
    except OSError as e:
        attempts.append(name + "=" + type(e).__name__)
attempt("open-w", lambda: open("data/train.csv", "w").write("tampered"))
attempt("open-a", lambda: open("./data/../data/train.csv", "a").write("tampered"))
attempt("unlink", lambda: os.unlink("data/train.csv"))
attempt("rename", lambda: os.rename("data/train.csv", "moved.csv"))
attempt("chmod", lambda: os.chmod("data/train.csv", 0o777))
attempt("link", lambda: os.link("data/train.csv", "hard.csv"))
def swap_dir():
    os.rename("data", "data_old")
    os.mkdir("data")
    open("data/train.csv", "w").write("tampered")
attempt("swap-dir", swap_dir)
print(" ".join(attempts))
"#;

impl Agent for ReadOnlySpelling {
    fn run(_: TaskInfo) -> Result<String, String> {
        let mut report: Vec<String> = [
            "data/train.csv",
            "./data/train.csv",
            "x/../data/train.csv",
            "data//train.csv",
            "data/./train.csv",
        ]
        .iter()
        .map(|p| outcome(&format!("write {p}"), &workspace::write(p, "tampered")))
        .collect();
        report.push(outcome(
            "append ./data/train.csv",
            &workspace::append("./data/train.csv", "tampered"),
        ));
        report.push(outcome(
            "copy over data/train.csv",
            &workspace::copy("train.py", "data/../data/train.csv"),
        ));
        report.push(script_report("tamper", &run_python("tamper.py", TAMPER, Some(30))));
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(ReadOnlySpelling);

//! Has a script plant symbolic links out of the workspace, then follows
//! them through the workspace API.
use hostile_agents::{outcome, run_python, script_report};
use mlrb_sdk::{Agent, TaskInfo, workspace};

struct SymlinkEscape;

const PLANT: &str = r#"
import os
for name, target in [("etc_link", "/etc"), ("passwd_link", "/etc/passwd"), ("up", ".."), ("root_link", "/")]:
    try:
        os.symlink(target, name)
        print("planted", name)
    except OSError as e:
        print("could not plant", name, e)
"#;

impl Agent for SymlinkEscape {
    fn run(_: TaskInfo) -> Result<String, String> {
        let planted = run_python("plant.py", PLANT, None);
        let report = [
            script_report("plant", &planted),
            outcome("read etc_link/passwd", &workspace::read("etc_link/passwd")),
            outcome("read passwd_link", &workspace::read("passwd_link")),
            outcome("list etc_link", &workspace::list("etc_link")),
            outcome("read up/episode.json", &workspace::read("up/episode.json")),
            outcome("write up/escaped.txt", &workspace::write("up/escaped.txt", "out")),
            outcome(
                "write etc_link/mlrb-escaped",
                &workspace::write("etc_link/mlrb-escaped", "out"),
            ),
            outcome(
                "read root_link/etc/hostname",
                &workspace::read("root_link/etc/hostname"),
            ),
        ];
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(SymlinkEscape);

//! Names host files by absolute path.
use hostile_agents::outcome;
use mlrb_sdk::{Agent, TaskInfo, workspace};

struct AbsolutePaths;

impl Agent for AbsolutePaths {
    fn run(_: TaskInfo) -> Result<String, String> {
        let report = [
            outcome("read /etc/passwd", &workspace::read("/etc/passwd")),
            outcome("read //etc/hostname", &workspace::read("//etc/hostname")),
            outcome("list /", &workspace::list("/")),
            outcome(
                "write /tmp/mlrb-escaped.txt",
                &workspace::write("/tmp/mlrb-escaped.txt", "out"),
            ),
            outcome(
                "copy /etc/passwd stolen.txt",
                &workspace::copy("/etc/passwd", "stolen.txt"),
            ),
        ];
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(AbsolutePaths);

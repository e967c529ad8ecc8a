//! Tries to fill the disk where the host does not count (a file tree more
//! than 256 folders deep), points inspect-lines at a 20 MiB line, and gives
//! up with an error message far larger than the host keeps.
use hostile_agents::{outcome, script_lines};
use mlrb_sdk::{Agent, TaskInfo, exec, workspace};

struct Disk;

impl Agent for Disk {
    fn run(_: TaskInfo) -> Result<String, String> {
        let report = [
            script_lines("deep", &exec::run("attacks/disk.py", &["deep"])),
            script_lines("sparse", &exec::run("attacks/disk.py", &["sparse"])),
            outcome(
                "inspect huge-line.txt",
                &workspace::inspect_lines("huge-line.txt", 1, 1),
            ),
            outcome(
                "write 300 levels deep",
                &workspace::write(&format!("{}f", "d/".repeat(300)), "x"),
            ),
        ];
        Err(format!("{}\n{}", report.join("\n"), "e".repeat(3 << 20)))
    }
}

mlrb_sdk::register_agent!(Disk);

//! Makes FIFOs, a socket, names that are not UTF-8, a very deep tree, a path
//! longer than the OS allows and sparse files, then points every tool call
//! at them and asks for a score.
use hostile_agents::{outcome, script_lines};
use mlrb_sdk::{Agent, TaskInfo, episode, exec, workspace};

struct SpecialFiles;

impl Agent for SpecialFiles {
    fn run(_: TaskInfo) -> Result<String, String> {
        let mut report = vec![script_lines("make", &exec::run("attacks/special_files.py", &[]))];
        report.extend([
            outcome("read fifo.txt", &workspace::read("fifo.txt")),
            outcome("write fifo.txt", &workspace::write("fifo.txt", "x")),
            outcome("append fifo.txt", &workspace::append("fifo.txt", "x")),
            outcome("inspect fifo.txt", &workspace::inspect_lines("fifo.txt", 1, 2)),
            outcome("copy fifo.txt", &workspace::copy("fifo.txt", "copy.txt")),
            outcome("copy onto fifo.txt", &workspace::copy("train.py", "fifo.txt")),
            outcome("undo fifo.txt", &workspace::undo("fifo.txt")),
            outcome("read sock.txt", &workspace::read("sock.txt")),
            outcome("write sock.txt", &workspace::write("sock.txt", "x")),
            outcome("run pipe.py", &exec::run("pipe.py", &[])),
            outcome("read a very long path", &workspace::read(&"n/".repeat(3000))),
        ]);
        let listed = workspace::list("").map(|entries| {
            entries
                .iter()
                .map(|e| format!("{}={:?}", e.path, e.kind))
                .collect::<Vec<_>>()
                .join(",")
        });
        report.push(format!("list: {listed:?}"));
        report.push(format!(
            "copy sparse.bin: {:?}",
            workspace::copy("sparse.bin", "sparse-copy.bin").map_err(|e| format!("{e:?}"))
        ));
        workspace::write("submission.csv", "id,label\n").map_err(|e| format!("{e:?}"))?;
        report.push(match episode::validate() {
            Ok(r) => format!("validate: valid={}", r.valid),
            Err(e) => format!("validate: error {e:?}"),
        });
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(SpecialFiles);

//! Oversized arguments of every kind, then an answer far larger than the
//! host keeps.
use hostile_agents::outcome;
use mlrb_sdk::{Agent, TaskInfo, exec, workspace};

struct Floods;

impl Agent for Floods {
    fn run(_: TaskInfo) -> Result<String, String> {
        let big = "a".repeat(1 << 20);
        let many: Vec<&str> = (0..300).map(|_| "x").collect();
        let medium = "m".repeat(40 << 10);
        let total: Vec<&str> = (0..10).map(|_| medium.as_str()).collect();
        let report = [
            outcome("one 1 MiB argument", &exec::run("train.py", &[&big])),
            outcome("300 arguments", &exec::run("train.py", &many)),
            outcome("400 KiB of arguments", &exec::run("train.py", &total)),
            outcome("a 5000-byte path", &workspace::read(&"p".repeat(5000))),
            outcome("write 20 MiB", &workspace::write("big.txt", &"w".repeat(20 << 20))),
        ];
        // The answer: the report, then 5 MiB more.
        Ok(format!("{}\n{}", report.join("\n"), "z".repeat(5 << 20)))
    }
}

mlrb_sdk::register_agent!(Floods);

//! Climbs out of the workspace with `..` in every spelling.
use hostile_agents::outcome;
use mlrb_sdk::{Agent, TaskInfo, workspace};

struct PathTraversal;

impl Agent for PathTraversal {
    fn run(_: TaskInfo) -> Result<String, String> {
        let mut report = vec![
            outcome("read ../episode.json", &workspace::read("../episode.json")),
            outcome(
                "read ../../../../etc/passwd",
                &workspace::read("../../../../etc/passwd"),
            ),
            outcome(
                "read data/../../events.jsonl",
                &workspace::read("data/../../events.jsonl"),
            ),
            outcome("list ..", &workspace::list("..")),
            outcome("list ./../..", &workspace::list("./../..")),
            outcome("write ../escaped.txt", &workspace::write("../escaped.txt", "out")),
            outcome(
                "copy train.py ../escaped.py",
                &workspace::copy("train.py", "../escaped.py"),
            ),
            outcome("inspect ../agent.log", &workspace::inspect_lines("../agent.log", 1, 5)),
        ];
        report.push(format!("inside still works: {}", workspace::read("train.py").is_ok()));
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(PathTraversal);

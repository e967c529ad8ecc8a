//! Writes notes of 60 KiB without end, hoping to fill the disk with trace.
use mlrb_sdk::{Agent, TaskInfo, episode, workspace};

struct NoteFlood;

impl Agent for NoteFlood {
    fn run(_: TaskInfo) -> Result<String, String> {
        workspace::write("submission.csv", "id,label\n").map_err(|e| format!("{e:?}"))?;
        let text = "n".repeat(60 << 10);
        for _ in 0..1_000_000 {
            episode::note(&text);
            let _ = episode::usage();
        }
        Ok("the host let a million notes through".into())
    }
}

mlrb_sdk::register_agent!(NoteFlood);

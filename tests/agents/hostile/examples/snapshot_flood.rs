//! Rewrites a 12 MiB file with new content at every step, so that each
//! snapshot stores it again: the run record grows until its budget ends
//! the episode.
use mlrb_sdk::{Agent, TaskInfo, workspace};

struct SnapshotFlood;

impl Agent for SnapshotFlood {
    fn run(_: TaskInfo) -> Result<String, String> {
        for round in 0..19u8 {
            let fill = char::from(b'a' + round);
            workspace::write("flood.txt", &fill.to_string().repeat(12 << 20)).map_err(|e| format!("{e:?}"))?;
        }
        Ok("wrote 19 rounds".into())
    }
}

mlrb_sdk::register_agent!(SnapshotFlood);

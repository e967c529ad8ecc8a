//! Takes twelve steps, each after reading the wall and monotonic clocks and
//! drawing from the runtime's randomness, and writes what it saw into the
//! workspace; every fourth step runs a script and keeps its output. Its
//! answer sums up everything it observed, so a replay that answered one
//! clock read, random draw or result differently would answer differently.
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use mlrb_sdk::{Agent, TaskInfo, episode, exec, workspace};

struct Observer;

const STEPS: u32 = 12;

impl Agent for Observer {
    fn run(_: TaskInfo) -> Result<String, String> {
        let start = Instant::now();
        let mut digest = RandomState::new().build_hasher();
        workspace::write("tick.py", "import random\nprint(random.random())\n").map_err(|e| format!("{e:?}"))?;
        for step in 1..=STEPS {
            let wall = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            let monotonic = start.elapsed().as_nanos();
            let mut draw = RandomState::new().build_hasher();
            draw.write_u32(step);
            let seen = format!(
                "step {step}: wall {wall} monotonic {monotonic} random {:x}\n",
                draw.finish()
            );
            let mut kept = seen.clone();
            if step % 4 == 0 {
                let ran = exec::run("tick.py", &[]).map_err(|e| format!("{e:?}"))?;
                kept.push_str(&ran.stdout);
            }
            workspace::write(&format!("seen/{step:02}.txt"), &kept).map_err(|e| format!("{e:?}"))?;
            digest.write(kept.as_bytes());
            if step % 6 == 0 {
                episode::note(&format!("{step} steps observed"));
            }
        }
        Ok(format!("observed {STEPS} steps: {:x}", digest.finish()))
    }
}

mlrb_sdk::register_agent!(Observer);

//! A long episode for the replay and fork benchmark: fifty steps, every
//! fifth a script that works for three seconds, the rest small writes.
use mlrb_sdk::{Agent, TaskInfo, exec, workspace};

struct LongEpisode;

const STEPS: u32 = 50;

impl Agent for LongEpisode {
    fn run(_: TaskInfo) -> Result<String, String> {
        let fail = |e| format!("{e:?}");
        workspace::write("work.py", "import time\ntime.sleep(3)\nprint('worked')\n").map_err(fail)?;
        let mut outputs = 0;
        for step in 2..=STEPS {
            if step % 5 == 0 {
                outputs += exec::run("work.py", &[]).map_err(fail)?.stdout.len();
            } else {
                workspace::write(&format!("log/{step:02}.txt"), &format!("step {step}\n")).map_err(fail)?;
            }
        }
        Ok(format!("{STEPS} steps, {outputs} bytes of script output"))
    }
}

mlrb_sdk::register_agent!(LongEpisode);

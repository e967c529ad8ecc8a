//! A 101-step episode for the resume benchmark: 99 small writes, then a
//! script that works for five seconds (step 100, where the benchmark kills
//! its host), then a last write.
use mlrb_sdk::{Agent, TaskInfo, exec, workspace};

struct HundredSteps;

impl Agent for HundredSteps {
    fn run(_: TaskInfo) -> Result<String, String> {
        let fail = |e| format!("{e:?}");
        workspace::write("work.py", "import time\ntime.sleep(5)\nprint('worked')\n").map_err(fail)?;
        for step in 2..=99 {
            workspace::write(&format!("log/{step:03}.txt"), &format!("step {step}\n")).map_err(fail)?;
        }
        let worked = exec::run("work.py", &[]).map_err(fail)?;
        workspace::write("done.txt", &worked.stdout).map_err(fail)?;
        Ok("101 steps".into())
    }
}

mlrb_sdk::register_agent!(HundredSteps);

//! Times `list-files` calls from inside the agent and answers with the
//! median and 90th percentile in nanoseconds: the full cost of a tool call
//! as an agent sees it.
use mlrb_sdk::{Agent, TaskInfo, episode, workspace};
use std::time::Instant;

struct ToolCallLatency;

impl Agent for ToolCallLatency {
    fn run(_: TaskInfo) -> Result<String, String> {
        let calls = episode::task().budget.max_steps as usize;
        let mut times = Vec::with_capacity(calls);
        for _ in 0..calls {
            let started = Instant::now();
            workspace::list("").map_err(|e| format!("{e:?}"))?;
            times.push(started.elapsed().as_nanos() as u64);
        }
        times.sort_unstable();
        Ok(format!(
            "calls={} median_ns={} p90_ns={}",
            times.len(),
            times[times.len() / 2],
            times[times.len() * 9 / 10]
        ))
    }
}

mlrb_sdk::register_agent!(ToolCallLatency);

//! Spins forever without calling the host.
use mlrb_sdk::{Agent, TaskInfo};

struct InfiniteLoop;

impl Agent for InfiniteLoop {
    fn run(_: TaskInfo) -> Result<String, String> {
        let mut x: u64 = 0;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
}

mlrb_sdk::register_agent!(InfiniteLoop);

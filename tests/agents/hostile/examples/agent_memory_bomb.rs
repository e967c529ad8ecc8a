//! Allocates until something stops it.
use mlrb_sdk::{Agent, TaskInfo};

struct AgentMemoryBomb;

impl Agent for AgentMemoryBomb {
    fn run(_: TaskInfo) -> Result<String, String> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 16 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}

mlrb_sdk::register_agent!(AgentMemoryBomb);

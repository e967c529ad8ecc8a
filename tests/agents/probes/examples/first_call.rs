//! Calls the host as its very first action, then returns: the host records
//! how long it took from instantiation to that call.
use mlrb_sdk::{Agent, TaskInfo, episode};

struct FirstCall;

impl Agent for FirstCall {
    fn run(_: TaskInfo) -> Result<String, String> {
        episode::note("first");
        Ok(String::new())
    }
}

mlrb_sdk::register_agent!(FirstCall);

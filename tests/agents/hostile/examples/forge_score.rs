//! Goes after the score of a task whose evaluator runs submitted code
//! (vectorize): a forward() that leaks the reference solution through its
//! exception's name, asked for a score; code that writes its own `ready`
//! and result on the channel; then a right, fast forward() whose module
//! forges the evaluator's result, hunts for the hidden files, the
//! evaluator's processes and its own result channel, leaves a daemon doing
//! it again and sleeps.
use mlrb_sdk::{Agent, TaskInfo, episode, workspace};

struct ForgeScore;

/// The payloads, shared with the Python agent of the same name.
const PAYLOADS: &str = include_str!("../../hostile-py/forge_payloads.py");

/// The payload `name` of [`PAYLOADS`], between its markers.
fn payload(name: &str) -> &'static str {
    let start = PAYLOADS
        .find(&format!("{name} = r\"\"\"\n"))
        .expect("a payload's start")
        + name.len()
        + 8;
    let end = PAYLOADS
        .find(&format!("\"\"\"  # end {name}"))
        .expect("a payload's end");
    &PAYLOADS[start..end]
}

fn validate(label: &str) -> String {
    match episode::validate() {
        Ok(r) => format!("{label}: valid={} score={:?} message={}", r.valid, r.score, r.message),
        Err(e) => format!("{label}: error {e:?}"),
    }
}

impl Agent for ForgeScore {
    fn run(_: TaskInfo) -> Result<String, String> {
        workspace::write("train.py", payload("LEAK")).map_err(|e| format!("{e:?}"))?;
        let leak = validate("leak");
        workspace::write("train.py", payload("PREWRITE")).map_err(|e| format!("{e:?}"))?;
        let prewrite = validate("prewrite");
        workspace::write("train.py", payload("FORGE")).map_err(|e| format!("{e:?}"))?;
        let forged = validate("forged");
        Ok(format!("{leak}\n{prewrite}\n{forged}"))
    }
}

mlrb_sdk::register_agent!(ForgeScore);

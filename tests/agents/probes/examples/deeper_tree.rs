//! Makes one edit a person can type at `mlrb human`'s prompt
//! (`sed -i 's/max_depth=8/max_depth=12/' train.py && python3 train.py`):
//! the starter's tree made deeper, train.py run, the result validated.
//! Its score is the person's to the last digit when their edits agree.
use mlrb_sdk::{Agent, TaskInfo, ToolErrorExt, episode, exec, workspace};

struct DeeperTree;

impl Agent for DeeperTree {
    fn run(_: TaskInfo) -> Result<String, String> {
        let starter = workspace::read("train.py").map_err(|e| e.message().to_string())?;
        if !starter.contains("max_depth=8") {
            return Err("train.py has no max_depth=8 to change".into());
        }
        let deeper = starter.replace("max_depth=8", "max_depth=12");
        workspace::write("train.py", &deeper).map_err(|e| e.message().to_string())?;
        let trained = exec::run("train.py", &[]).map_err(|e| e.message().to_string())?;
        let report = episode::validate().map_err(|e| e.message().to_string())?;
        Ok(format!(
            "train.py exit {:?}; valid={} public score {:?}",
            trained.exit_code, report.valid, report.score
        ))
    }
}

mlrb_sdk::register_agent!(DeeperTree);

//! The tasks a command names: by name or path, and the built-in tasks of
//! a suite (`--suite cpu`).

use anyhow::{Result, bail};

use super::Task;

/// The tasks named, and those of `suite`.
pub fn chosen(names: &[String], suite: Option<&str>) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    for name in names {
        tasks.push(super::resolve(name)?);
    }
    if let Some(suite) = suite {
        let dir = super::builtin_tasks_dir();
        let before = tasks.len();
        for loaded in super::list(&dir) {
            let loaded = loaded?;
            if loaded.spec.suite == suite {
                tasks.push(loaded);
            }
        }
        if tasks.len() == before {
            bail!(
                "--suite {suite}: no built-in task in {} belongs to this suite",
                dir.display()
            );
        }
    }
    if tasks.is_empty() {
        bail!("name the tasks to test, or pass --suite (e.g. --suite cpu)");
    }
    Ok(tasks)
}

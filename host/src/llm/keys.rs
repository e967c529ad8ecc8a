//! Provider keys: read from the environment or a `.env` file, held in a
//! type that never prints them, and scrubbed from anything a provider says
//! back before it reaches a trace, a log or the agent.

use std::path::{Path, PathBuf};

/// A key. Its `Debug` shows only that there is one.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// The key itself, for the request's header only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced.
    pub fn scrub(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_string();
        }
        text.replace(&self.0, "[key]")
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([key])")
    }
}

/// The `.env` files looked at, in order, after the environment: the
/// current folder's and the one beside the configuration file.
pub fn dotenv_files(config: Option<&Path>) -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from(".env")];
    if let Some(dir) = config.and_then(Path::parent) {
        let beside = dir.join(".env");
        if !files.contains(&beside) {
            files.push(beside);
        }
    }
    files
}

/// The value of `name` from the environment, else from the first `.env`
/// file that defines it. `.env` entries are read, never exported: scripts
/// and agents do not inherit them.
pub fn lookup(name: &str, dotenv: &[PathBuf]) -> Option<Secret> {
    if let Ok(value) = std::env::var(name)
        && !value.is_empty()
    {
        return Some(Secret(value));
    }
    for file in dotenv {
        let Ok(entries) = dotenvy::from_path_iter(file) else {
            continue;
        };
        for (key, value) in entries.flatten() {
            if key == name && !value.is_empty() {
                return Some(Secret(value));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_print_and_are_scrubbed() {
        let secret = Secret("sk-test-1234567890".into());
        assert_eq!(format!("{secret:?}"), "Secret([key])");
        assert_eq!(secret.scrub("bad key sk-test-1234567890!"), "bad key [key]!");
    }

    #[test]
    fn a_dotenv_file_supplies_keys_the_environment_lacks() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join(".env");
        std::fs::write(&file, "# keys\nMLRB_TEST_ONLY_KEY=from-dotenv\nOTHER=1\n").unwrap();
        let found = lookup("MLRB_TEST_ONLY_KEY", std::slice::from_ref(&file)).unwrap();
        assert_eq!(found.expose(), "from-dotenv");
        assert!(
            std::env::var("MLRB_TEST_ONLY_KEY").is_err(),
            "a .env entry leaked into the environment"
        );
        assert!(lookup("MLRB_TEST_ABSENT_KEY", &[file]).is_none());
    }
}

//! A Kaggle competition's files, fetched on the host through Kaggle's API
//! as `kaggle competitions download -c NAME` would (the same zip), with the
//! user's token: `KAGGLE_USERNAME` and `KAGGLE_KEY`, else `kaggle.json` in
//! `KAGGLE_CONFIG_DIR` or `~/.kaggle`. The endpoint is
//! `MLRB_KAGGLE_ENDPOINT` (default Kaggle's own).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{fetch, zip_listing};

/// Kaggle's API, unless `MLRB_KAGGLE_ENDPOINT` names another.
pub const DEFAULT_ENDPOINT: &str = "https://www.kaggle.com/api/v1";

/// The user's Kaggle token: (username, key).
fn token() -> Result<(String, String)> {
    if let (Ok(user), Ok(key)) = (std::env::var("KAGGLE_USERNAME"), std::env::var("KAGGLE_KEY")) {
        return Ok((user, key));
    }
    let dir = std::env::var_os("KAGGLE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kaggle")))
        .context("no Kaggle token: set KAGGLE_USERNAME and KAGGLE_KEY, or put kaggle.json in ~/.kaggle")?;
    let path = dir.join("kaggle.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        anyhow::anyhow!(
            "no Kaggle token ({}: {e}): download one from your Kaggle account's settings",
            path.display()
        )
    })?;
    #[derive(serde::Deserialize)]
    struct Token {
        username: String,
        key: String,
    }
    let token: Token =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not a Kaggle token ({e})", path.display()))?;
    Ok((token.username, token.key))
}

/// Downloads `competition`'s files into `dir` as `<competition>.zip` and
/// checks its listing; the zip's path. Errors are one line naming the
/// folder (`task`) and Kaggle's API.
pub async fn fetch(task: &str, competition: &str, dir: &Path) -> Result<PathBuf> {
    let endpoint = fetch::endpoint("MLRB_KAGGLE_ENDPOINT", DEFAULT_ENDPOINT);
    let source = format!("Kaggle's API ({endpoint}, competition {competition})");
    let fail = |e: anyhow::Error| anyhow::anyhow!("task {task}: {source}: {e:#}");
    let (user, key) = token().map_err(fail)?;
    let url = format!("{endpoint}/competitions/data/download-all/{competition}");
    let zip = dir.join(format!("{competition}.zip"));
    let max = fetch::max_bytes();
    let hint = |status: u16| match status {
        401 => Some(": the Kaggle token was refused".to_string()),
        403 => Some(format!(
            ": accept the competition's rules at https://www.kaggle.com/competitions/{competition}/rules with this account first"
        )),
        _ => None,
    };
    fetch::download(&url, Some((user.as_str(), key.as_str())), &zip, max, &hint)
        .await
        .map_err(fail)?;
    let (members, bytes) = zip_listing::check(&zip, max).map_err(|e| fail(e.context("refused its zip")))?;
    if members == 0 {
        return Err(fail(anyhow::anyhow!("its zip holds no files")));
    }
    tracing::info!(task, competition, members, bytes, "fetched the competition's files");
    Ok(zip)
}

//! A bench's outputs: `results.jsonl`, `summary.json` and `report.html`
//! written and read back; results of invalidated episodes marked stale.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use super::result_line::{ResultLine, smoke_of};
use super::{html, summary};

/// Marks the results whose episodes were invalidated; with `rerun`, sets
/// those episodes aside (`<seed>.stale-<n>`, kept as evidence) and drops
/// their results, so they run again.
pub(super) fn stale_results(dir: &Path, results: &mut BTreeMap<String, ResultLine>, rerun: bool) -> Result<()> {
    for result in results.values_mut() {
        result.stale = crate::episode::StaleMark::read(&dir.join(&result.dir)).map(|m| m.reason);
    }
    if !rerun {
        return Ok(());
    }
    let stale: Vec<String> = results
        .iter()
        .filter(|(_, r)| r.stale.is_some())
        .map(|(id, _)| id.clone())
        .collect();
    for id in stale {
        let episode = dir.join(&id);
        let aside = (1..)
            .map(|n| {
                episode.with_file_name(format!(
                    "{}.stale-{n}",
                    episode.file_name().unwrap_or_default().to_string_lossy()
                ))
            })
            .find(|p| !p.exists())
            .unwrap_or_default();
        std::fs::rename(&episode, &aside)
            .with_context(|| format!("setting the stale episode {} aside", episode.display()))?;
        results.remove(&id);
    }
    Ok(())
}

/// Writes `results.jsonl`, `summary.json` and `report.html` (atomically).
pub fn write_outputs(dir: &Path, results: &[ResultLine]) -> Result<()> {
    smoke_of(results, &dir.display().to_string())?;
    let mut lines = Vec::new();
    for result in results {
        lines.extend(serde_json::to_vec(result)?);
        lines.push(b'\n');
    }
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, dir.join(name))?;
        Ok(())
    };
    write("results.jsonl", &lines)?;
    let summary = summary::summarize(results);
    write("summary.json", &serde_json::to_vec_pretty(&summary)?)?;
    let title = format!(
        "mlrb bench {}",
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    write("report.html", html::render(&title, &summary, results).as_bytes())?;
    Ok(())
}

/// Reads `results.jsonl` of a run directory.
pub fn read_results(dir: &Path) -> Result<Vec<ResultLine>> {
    let path = dir.join("results.jsonl");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read ({e}): is this a bench run directory?", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{}: line {}", path.display(), i + 1)))
        .collect()
}

//! A published benchmark: a name and version, the plan each submission is
//! run on (tasks, seeds, limits, the models an agent may call and at what
//! budget), when the version closes (until then a submitter sees only the
//! public part's scores), the largest component taken and each
//! submitter's quota. Read from a TOML file:
//!
//! ```toml
//! name = "cpu-mini"
//! version = "2026-11"
//! closes = "2026-12-31T00:00:00Z"
//! max_agent_mb = 64
//! [plan]            # a bench plan without agents: tasks, seeds, limits, llm
//! tasks = ["digits"]
//! seeds = 3
//! [quota]
//! per_day = 5
//! ```

use std::path::Path;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::quota::Quota;
use crate::bench::Plan;

/// A published benchmark version.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Benchmark {
    /// Its name (what submitters submit to).
    pub name: String,
    /// Its version: results of different versions are never ranked together.
    pub version: String,
    /// When the version closes (RFC 3339); until then submitters see only
    /// the public part's scores. Never, without.
    #[serde(default)]
    pub closes: Option<String>,
    /// The largest component taken, in MiB.
    #[serde(default = "default_max_agent_mb")]
    pub max_agent_mb: u64,
    /// What each submission runs: the tasks, seeds, limits and model.
    pub plan: Plan,
    /// What each submitter may use.
    #[serde(default)]
    pub quota: Quota,
}

fn default_max_agent_mb() -> u64 {
    64
}

impl Benchmark {
    /// Reads and checks the benchmark at `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
        let mut table: toml::Table =
            toml::from_str(&text).map_err(|e| crate::task::spec::toml_error(path, &text, &e))?;
        let known = Plan::fields();
        if let Some(plan) = table.get_mut("plan").and_then(|p| p.as_table_mut()) {
            if let Some(unknown) = plan.keys().find(|key| !known.contains(key)) {
                bail!(
                    "{}: unknown field `plan.{unknown}`; a plan has: {}",
                    path.display(),
                    known.join(", ")
                );
            }
            // The submission is the plan's one agent.
            plan.entry("agents").or_insert_with(|| toml::Value::Array(Vec::new()));
        }
        let benchmark = Self::deserialize(table).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        benchmark
            .check()
            .map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))?;
        Ok(benchmark)
    }

    /// Refuses what could not be published.
    pub fn check(&self) -> Result<()> {
        for (field, value) in [("name", &self.name), ("version", &self.version)] {
            if let Some(why) = super::names::refused(field, value, 64) {
                bail!("{why} (it names folders and URLs)");
            }
        }
        if !self.plan.agents.is_empty() {
            bail!("`plan.agents`: a benchmark's plan names no agents; each submission is one");
        }
        if self.plan.tasks.is_empty() {
            bail!("`plan.tasks`: a benchmark runs at least one task");
        }
        if self.plan.smoke {
            bail!(
                "`plan.smoke`: the smoke profile's stand-in data measure nothing, so no benchmark runs on them; remove it"
            );
        }
        if let Some(closes) = &self.closes {
            closes_ms(closes)?;
        }
        self.plan.limits.check()
    }

    /// Whether the version is closed at `now_ms` (ms since the Unix epoch):
    /// then the private part's scores are shown to all.
    pub fn closed(&self, now_ms: i64) -> bool {
        self.closes
            .as_deref()
            .and_then(|c| closes_ms(c).ok())
            .is_some_and(|at| now_ms >= at)
    }

    /// The benchmark's id in URLs and folders: `<name>/<version>`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.name, self.version)
    }
}

fn closes_ms(text: &str) -> Result<i64> {
    let at = chrono::DateTime::parse_from_rfc3339(text).map_err(|e| {
        anyhow::anyhow!("`closes = \"{text}\"` is not an RFC 3339 time ({e}): e.g. 2026-12-31T00:00:00Z")
    })?;
    Ok(at.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("benchmark.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_benchmark_is_read_and_its_mistakes_named() {
        let good = "name = \"cpu-mini\"\nversion = \"2026-11\"\nclose = 1\n";
        let (_d, path) = write(good);
        let error = format!("{:#}", Benchmark::load(&path).unwrap_err());
        assert!(error.contains("benchmark.toml") && error.contains("close"), "{error}");
        let text = "name = \"cpu-mini\"\nversion = \"2026-11\"\ncloses = \"2026-12-31T00:00:00Z\"\n[plan]\ntasks = [\"digits\"]\nseeds = 3\n[quota]\nper_day = 2\n";
        let (_d, path) = write(text);
        let benchmark = Benchmark::load(&path).unwrap();
        assert_eq!(
            (benchmark.id().as_str(), benchmark.quota.per_day),
            ("cpu-mini/2026-11", 2)
        );
        let closes = chrono::DateTime::parse_from_rfc3339("2026-12-31T00:00:00Z")
            .unwrap()
            .timestamp_millis();
        assert!(!benchmark.closed(closes - 1) && benchmark.closed(closes));
        for (bad, named) in [
            ("[plan]\ntasks = [\"digits\"]\nagents = [\"a.wasm\"]\n", "plan.agents"),
            ("[plan]\ntasks = []\n", "plan.tasks"),
            (
                "[plan]\ntasks = [\"digits\"]\nsmoke = true\n",
                "`plan.smoke`: the smoke profile",
            ),
            ("closes = \"soon\"\n[plan]\ntasks = [\"digits\"]\n", "RFC 3339"),
            ("[plan]\ntasks = [\"digits\"]\nsede = 3\n", "plan.sede"),
        ] {
            let (_d, path) = write(&format!("name = \"b\"\nversion = \"1\"\n{bad}"));
            let error = format!("{:#}", Benchmark::load(&path).unwrap_err());
            assert!(error.contains(named), "{bad}: {error}");
        }
        let (_d, path) = write("name = \"../x\"\nversion = \"1\"\n[plan]\ntasks = [\"digits\"]\n");
        assert!(format!("{:#}", Benchmark::load(&path).unwrap_err()).contains("`name`"));
    }
}

//! Every limit an episode runs under, in one value: built once from the
//! task's budget and resources and the user's overrides, recorded as-is in
//! `episode.json`, and read by every layer (the agent's store, the
//! workspace, scripts, snapshots, the trace).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::network::{Network, Rule};

/// One `--network-allow` destination: a rule, or `none` (no network).
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkRule(pub Option<Rule>);

impl std::str::FromStr for NetworkRule {
    type Err = anyhow::Error;
    fn from_str(text: &str) -> anyhow::Result<Self> {
        match text.trim() {
            "none" => Ok(Self(None)),
            rule => rule.parse().map(|r| Self(Some(r))),
        }
    }
}

impl Serialize for NetworkRule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(rule) => rule.serialize(s),
            None => s.serialize_str("none"),
        }
    }
}

impl<'de> Deserialize<'de> for NetworkRule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// The limits of one episode. Field names are those `episode.json` has
/// always used; a record written by an older mlrb reads with defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Tool calls that count as steps.
    pub max_steps: u32,
    /// The episode's wall-clock budget.
    pub wall_seconds: u64,
    /// LLM tokens, input and output together (0: no limit).
    pub llm_tokens: u64,
    /// LLM spending at the configured prices (0: no limit).
    pub llm_cost_usd: f64,
    /// The agent's linear memory, all its memories together.
    pub agent_memory_bytes: usize,
    /// Bytes of the agent's stdout and stderr kept in agent.log.
    pub agent_log_bytes: u64,
    /// Bytes the agent's calls may add to the trace.
    pub trace_bytes: u64,
    /// Bytes of the final answer kept.
    pub answer_bytes: usize,
    /// The longest one script may run.
    pub script_timeout_seconds: u64,
    /// Memory one script may use, in bytes.
    pub script_memory_bytes: u64,
    /// Processes one script may have at once.
    pub script_max_processes: u32,
    /// CPUs one script may use.
    pub script_cpus: f64,
    /// Where scripts (and an agent's wasi:http) may connect.
    pub network: crate::network::Network,
    /// Requests the agent's wasi:http may send in the episode; past it
    /// each is refused.
    pub http_requests: u32,
    /// Bytes of one wasi:http response body the agent may receive; past it
    /// the body ends with an error.
    pub http_response_bytes: u64,
    /// Whether the task's preparation may reach the network (the user's
    /// `--network`; the agent's scripts never get it from this).
    pub prepare_network: bool,
    /// Bytes of each output stream handed back to the agent.
    pub output_cap: usize,
    /// Bytes a script may print before it is stopped.
    pub output_kill_bytes: u64,
    /// Bytes of each of a script's streams kept in its log file.
    pub script_log_bytes: u64,
    /// Arguments one script may be given.
    pub max_args: usize,
    /// Bytes of one argument.
    pub max_arg_bytes: usize,
    /// Bytes of all arguments together.
    pub max_total_arg_bytes: usize,
    /// Bytes the workspace's files may hold (apparent and on disk, each);
    /// also the largest file a script may write.
    pub workspace_bytes: u64,
    /// Files, folders and links the workspace may hold.
    pub workspace_files: u64,
    /// Bytes one `read-file` returns.
    pub read_bytes: u64,
    /// Bytes one `write-file` or `append-file` carries.
    pub write_bytes: u64,
    /// Entries one `list-files` returns.
    pub list_entries: usize,
    /// Lines one `inspect-lines` returns.
    pub inspect_lines: u32,
    /// Bytes of one workspace path.
    pub path_bytes: usize,
    /// Folders a workspace path may go deep.
    pub path_depth: usize,
    /// Bytes of earlier versions kept for `undo-edit`.
    pub history_bytes: u64,
    /// Bytes the workspace's snapshots may add to the run record in all;
    /// past it the episode ends as `trace-limit`.
    pub snapshot_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_steps: 50,
            wall_seconds: 1200,
            llm_tokens: 0,
            llm_cost_usd: 0.0,
            agent_memory_bytes: 1 << 30,
            agent_log_bytes: 4 << 20,
            trace_bytes: 256 << 20,
            answer_bytes: 1 << 20,
            script_timeout_seconds: 600,
            script_memory_bytes: 2 << 30,
            script_max_processes: 256,
            script_cpus: 2.0,
            network: Default::default(),
            http_requests: 100,
            http_response_bytes: 16 << 20,
            prepare_network: false,
            output_cap: 32 << 10,
            output_kill_bytes: 256 << 20,
            script_log_bytes: 8 << 20,
            max_args: 256,
            max_arg_bytes: 64 << 10,
            max_total_arg_bytes: 256 << 10,
            workspace_bytes: 10 << 30,
            workspace_files: 1_000_000,
            read_bytes: 1 << 20,
            write_bytes: 16 << 20,
            list_entries: 10_000,
            inspect_lines: 2_000,
            path_bytes: 1024,
            path_depth: 64,
            history_bytes: 1 << 30,
            snapshot_bytes: 3 * (10 << 30),
        }
    }
}

impl Limits {
    /// The wall-clock budget.
    pub fn wall(&self) -> Duration {
        Duration::from_secs(self.wall_seconds)
    }

    /// The longest one script may run.
    pub fn script_timeout(&self) -> Duration {
        Duration::from_secs(self.script_timeout_seconds)
    }

    /// Applies what the user asked to change.
    pub fn with(mut self, overrides: &Overrides) -> Self {
        let o = overrides;
        set(&mut self.max_steps, o.max_steps);
        set(&mut self.wall_seconds, o.wall_seconds);
        set(&mut self.llm_tokens, o.llm_tokens);
        set(&mut self.llm_cost_usd, o.llm_cost_usd);
        set(&mut self.agent_memory_bytes, o.agent_memory_mb.map(|mb| mb << 20));
        set(&mut self.trace_bytes, o.trace_mb.map(|mb| mb << 20));
        set(&mut self.script_cpus, o.cpus);
        set(&mut self.script_memory_bytes, o.memory_mb.map(|mb| mb << 20));
        set(&mut self.script_timeout_seconds, o.script_timeout);
        set(&mut self.prepare_network, o.network);
        set(&mut self.http_requests, o.http_requests);
        set(&mut self.http_response_bytes, o.http_response_mb.map(|mb| mb << 20));
        // Refused earlier (`task::overrides`) where it would widen.
        if let Some(narrowed) = o.narrowed_network(&self.network) {
            self.network = narrowed;
        }
        self
    }
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}

/// What `mlrb run` and `mlrb bench` options, or a bench plan, change of a
/// task's limits; the same names on the command line (`--max-steps`) and
/// in a plan (`max_steps = 3`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default)]
pub struct Overrides {
    /// Override the task's step budget.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// Override the task's wall-clock budget, in seconds.
    #[arg(long, value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<u64>,
    /// Override the task's LLM token budget (input and output; 0: no limit).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_tokens: Option<u64>,
    /// Override the task's LLM cost budget in USD (0: no limit).
    #[arg(long, value_name = "USD")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_cost_usd: Option<f64>,
    /// The agent's own memory limit, all its linear memories together [default: 1024].
    #[arg(long, value_name = "MiB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_memory_mb: Option<usize>,
    /// What the agent's calls may write to the trace; past it the episode
    /// ends as `trace-limit` [default: 256].
    #[arg(long, value_name = "MiB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_mb: Option<u64>,
    /// CPUs each script (and the task's preparation and evaluation) may use
    /// [default: the task's resources.cpus].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Memory each script may use [default: the task's resources.memory_mb].
    #[arg(long = "memory", value_name = "MiB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// The longest one script may run [default: the task's resources.script_timeout_seconds].
    #[arg(long, value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script_timeout: Option<u64>,
    /// Narrow the task's network grant to these destinations (host:port,
    /// `*.domain:port`; repeat or separate with commas; `none`: no network).
    #[arg(long = "network-allow", value_name = "HOST:PORT", value_delimiter = ',')]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_allow: Option<Vec<NetworkRule>>,
    /// Requests the agent's own wasi:http may send in the episode [default: 100].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_requests: Option<u32>,
    /// The largest wasi:http response body the agent may receive [default: 16].
    #[arg(long, value_name = "MiB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_response_mb: Option<u64>,
    /// Let the task's preparation (downloading its data) reach the network;
    /// the agent's scripts never get it from this.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// The name of the metric, for a task folder that does not declare one
    /// (an MLAgentBench folder mlrb does not know).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// Whether a higher or a lower score is better, for a task folder that
    /// does not declare it; without it such a folder's scores get no
    /// improvement or success.
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// The scores a valid submission can have (`LOW,HIGH`, inf allowed),
    /// for a task folder that does not declare them; anything else (such
    /// as an evaluator's 1e10 for "no submission") is an invalid one.
    #[arg(long, value_name = "LOW,HIGH")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<MetricRange>,
}

/// `LOW,HIGH`: the scores a valid submission can have.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MetricRange(pub [f64; 2]);

impl std::str::FromStr for MetricRange {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("`{text}` is not a range: give LOW,HIGH, e.g. 0,1 or 0,inf");
        let (low, high) = text.split_once(',').ok_or_else(bad)?;
        let low: f64 = low.trim().parse().map_err(|_| bad())?;
        let high: f64 = high.trim().parse().map_err(|_| bad())?;
        if low.is_nan() || high.is_nan() || low > high {
            return Err(format!("`{text}`: LOW must not be above HIGH"));
        }
        Ok(Self([low, high]))
    }
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// A higher score is better (accuracy).
    Higher,
    /// A lower score is better (error, time).
    Lower,
}

impl Overrides {
    /// These overrides, with those not given taken from `base` (the
    /// command line over a plan file).
    pub fn or(self, base: &Self) -> Self {
        Self {
            max_steps: self.max_steps.or(base.max_steps),
            wall_seconds: self.wall_seconds.or(base.wall_seconds),
            llm_tokens: self.llm_tokens.or(base.llm_tokens),
            llm_cost_usd: self.llm_cost_usd.or(base.llm_cost_usd),
            agent_memory_mb: self.agent_memory_mb.or(base.agent_memory_mb),
            trace_mb: self.trace_mb.or(base.trace_mb),
            cpus: self.cpus.or(base.cpus),
            memory_mb: self.memory_mb.or(base.memory_mb),
            script_timeout: self.script_timeout.or(base.script_timeout),
            network: self.network.or(base.network),
            network_allow: self.network_allow.or_else(|| base.network_allow.clone()),
            http_requests: self.http_requests.or(base.http_requests),
            http_response_mb: self.http_response_mb.or(base.http_response_mb),
            metric: self.metric.or_else(|| base.metric.clone()),
            direction: self.direction.or(base.direction),
            range: self.range.or(base.range),
        }
    }

    /// The task's grant `granted` narrowed by `network_allow`, if given and
    /// within it.
    pub fn narrowed_network(&self, granted: &Network) -> Option<Network> {
        self.narrow(granted).ok().flatten()
    }

    /// `granted` narrowed by `network_allow` (`None`: not narrowed); an
    /// error when it names what the task does not grant.
    pub fn narrow(&self, granted: &Network) -> anyhow::Result<Option<Network>> {
        let Some(rules) = &self.network_allow else {
            return Ok(None);
        };
        let allow = rules.iter().filter_map(|r| r.0.clone()).collect();
        let narrower = crate::network::AllowList {
            allow,
            ..Default::default()
        };
        granted
            .narrowed_by(&narrower, "network_allow (--network-allow)")
            .map(Some)
    }

    /// Refuses values no episode can run with, naming the option.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.max_steps == Some(0) {
            anyhow::bail!("max_steps (--max-steps) must be at least 1");
        }
        if self.wall_seconds == Some(0) {
            anyhow::bail!("wall_seconds (--wall-seconds) must be at least 1");
        }
        if self.cpus.is_some_and(|c| !(c > 0.0 && c.is_finite())) {
            anyhow::bail!("cpus (--cpus) must be a positive number");
        }
        if self.memory_mb.is_some_and(|m| m < 16) {
            anyhow::bail!("memory_mb (--memory) must be at least 16 MiB");
        }
        if self.script_timeout == Some(0) {
            anyhow::bail!("script_timeout (--script-timeout) must be at least 1 second");
        }
        if self.agent_memory_mb.is_some_and(|m| m < 16) {
            anyhow::bail!("agent_memory_mb (--agent-memory-mb) must be at least 16 MiB");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_change_only_what_they_name_and_old_records_read() {
        let base = Limits::default();
        let changed = base.clone().with(&Overrides {
            max_steps: Some(3),
            trace_mb: Some(8),
            cpus: Some(0.5),
            memory_mb: Some(300),
            script_timeout: Some(9),
            network: Some(true),
            ..Overrides::default()
        });
        assert_eq!(changed.max_steps, 3);
        assert_eq!(changed.trace_bytes, 8 << 20);
        assert_eq!(changed.wall_seconds, base.wall_seconds);
        assert_eq!(changed.script_cpus, 0.5);
        assert_eq!(changed.script_memory_bytes, 300 << 20);
        assert_eq!(changed.script_timeout_seconds, 9);
        assert!(
            changed.prepare_network && !changed.network.granted(),
            "--network is for preparation only"
        );
        // An episode.json of an older mlrb: the fields it had, no others.
        let old: Limits = serde_json::from_str(r#"{"max_steps": 7, "wall_seconds": 60, "network": true}"#).unwrap();
        assert_eq!((old.max_steps, old.wall_seconds), (7, 60));
        assert!(
            old.network.granted(),
            "`network: true` of an older record reads as any destination"
        );
        assert_eq!(old.workspace_files, Limits::default().workspace_files);
    }

    #[test]
    fn the_command_line_wins_over_the_plan_and_bad_values_are_refused() {
        let plan = Overrides {
            max_steps: Some(5),
            cpus: Some(1.0),
            ..Overrides::default()
        };
        let cli = Overrides {
            cpus: Some(2.0),
            ..Overrides::default()
        };
        let merged = cli.or(&plan);
        assert_eq!((merged.max_steps, merged.cpus), (Some(5), Some(2.0)));
        for (bad, named) in [
            (
                Overrides {
                    cpus: Some(0.0),
                    ..Overrides::default()
                },
                "--cpus",
            ),
            (
                Overrides {
                    memory_mb: Some(1),
                    ..Overrides::default()
                },
                "--memory",
            ),
            (
                Overrides {
                    script_timeout: Some(0),
                    ..Overrides::default()
                },
                "--script-timeout",
            ),
            (
                Overrides {
                    max_steps: Some(0),
                    ..Overrides::default()
                },
                "--max-steps",
            ),
        ] {
            let error = bad.check().unwrap_err().to_string();
            assert!(error.contains(named), "{error}");
        }
        assert!(merged.check().is_ok());
    }
}

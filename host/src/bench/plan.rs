//! What a bench runs (`Plan`: from plan.toml, the command line or both)
//! and the matrix of its episodes, task by agent by seed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::placement;
use crate::episode::{HostSetup, agent_name, episode_id};
use crate::limits::Overrides;
use crate::task;

/// An agent of the plan: a path, or a path and the name its results go by,
/// or a person whose episodes `mlrb human` recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AgentEntry {
    /// An agent component's path; its results go by the file's stem.
    Path(PathBuf),
    /// An agent component's path and the name its results go by.
    Named {
        /// The agent component's path.
        path: PathBuf,
        /// The name its results go by.
        name: String,
    },
    /// A person's episodes, recorded earlier by `mlrb human --name NAME`
    /// under the run folder `episodes` (`<task>/human-NAME/<seed>`): one
    /// per task and seed of the plan, taken into the bench as they are.
    /// Its results go by `human:NAME`.
    Human {
        /// The person's name.
        human: String,
        /// The run folder their episodes were recorded in.
        episodes: PathBuf,
    },
}

impl AgentEntry {
    /// The agent component's path.
    pub fn path(&self) -> &Path {
        match self {
            Self::Path(path) | Self::Named { path, .. } => path,
            Self::Human { episodes, .. } => episodes,
        }
    }

    /// For a person: their name and the run folder of their episodes.
    pub fn person(&self) -> Option<(&str, &Path)> {
        match self {
            Self::Human { human, episodes } => Some((human, episodes)),
            _ => None,
        }
    }
    /// The name the agent's results go by, made safe for a path component.
    pub fn name(&self) -> String {
        match self {
            Self::Named { name, .. } => crate::paths::safe_component(name),
            Self::Path(path) => agent_name(path),
            Self::Human { human, .. } => format!("human:{}", crate::paths::safe_component(human)),
        }
    }
}

/// Seeds: a count (`3` means 1, 2, 3) or an explicit list.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Seeds {
    /// Seeds 1 to n.
    Count(u64),
    /// These seeds.
    List(Vec<u64>),
}

impl Seeds {
    /// The seeds, in order.
    pub fn list(&self) -> Vec<u64> {
        match self {
            Self::Count(n) => (1..=*n).collect(),
            Self::List(list) => list.clone(),
        }
    }
}

/// What a bench runs: from `--plan plan.toml`, the command line, or both.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The agent components to run.
    pub agents: Vec<AgentEntry>,
    /// Built-in task names or task folder paths.
    pub tasks: Vec<String>,
    /// Seeds each agent runs each task with.
    #[serde(default = "default_seeds")]
    pub seeds: Seeds,
    /// Episodes run at once.
    #[serde(default = "one")]
    pub parallel: usize,
    /// CPU slots shared by running episodes; each takes its CPUs
    /// (`cpus`, else the task's `resources.cpus`, rounded up) [default: this machine's CPUs].
    #[serde(default)]
    pub cpu_slots: Option<u32>,
    /// Attempts after an infrastructure failure (never after the agent's own).
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// The sandbox, image, GPUs and model source (`sandbox = "docker"`, ...).
    #[serde(flatten)]
    pub host: HostSetup,
    /// What the plan changes of every task's limits (`max_steps = 3`, ...).
    #[serde(flatten)]
    pub limits: Overrides,
    /// Every task in its smoke profile (`--smoke`: CPU, offline, stand-in
    /// data and toy models); every result is marked smoke.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub smoke: bool,
    /// Where the episodes run [default: `slurm` with a `[slurm]` table, else `local`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<placement::On>,
    /// The queue server, when the bench runs on a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<placement::ClusterSetup>,
    /// The Slurm job array of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<placement::SlurmSetup>,
    /// The Kubernetes Job of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s: Option<placement::K8sSetup>,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            agents: Vec::new(),
            tasks: Vec::new(),
            seeds: default_seeds(),
            parallel: one(),
            cpu_slots: None,
            retries: default_retries(),
            host: HostSetup::default(),
            limits: Overrides::default(),
            smoke: false,
            on: None,
            cluster: None,
            slurm: None,
            k8s: None,
        }
    }
}

fn default_seeds() -> Seeds {
    Seeds::Count(1)
}
fn one() -> usize {
    1
}
fn default_retries() -> u32 {
    2
}

impl Plan {
    /// Reads a plan file, with one-line errors naming the file and field.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
        let table: toml::Table = toml::from_str(&text).map_err(|e| crate::task::spec::toml_error(path, &text, &e))?;
        let known = Self::fields();
        if let Some(unknown) = table.keys().find(|key| !known.contains(key)) {
            bail!(
                "{}: unknown field `{unknown}`; a plan has: {}",
                path.display(),
                known.join(", ")
            );
        }
        let plan: Self = toml::from_str(&text).map_err(|e| crate::task::spec::toml_error(path, &text, &e))?;
        Ok(plan)
    }

    /// The plan a bench saved in its run directory `dir` (`plan.json`).
    pub fn saved(dir: &Path) -> Result<Self> {
        let path = dir.join("plan.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("{}: cannot read ({e}): is this a bench run directory?", path.display()))?;
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not a bench plan: {e}", path.display()))
    }

    /// Refuses to resume this saved plan of `dir` as `smoke` says
    /// (`--resume --smoke`) where its bench ran otherwise.
    pub fn resumed_as(&self, dir: &Path, smoke: bool) -> Result<()> {
        if smoke && !self.smoke {
            bail!(
                "{}: its bench runs on real data, and smoke episodes never join it: resume it without --smoke",
                dir.display()
            );
        }
        Ok(())
    }

    /// The names a plan's fields go by, its own and those of the setup and
    /// limits it holds flattened.
    pub fn fields() -> Vec<String> {
        let mut names: Vec<String> = [
            "agents",
            "tasks",
            "seeds",
            "parallel",
            "cpu_slots",
            "retries",
            "smoke",
            "on",
            "cluster",
            "slurm",
            "k8s",
        ]
        .map(String::from)
        .to_vec();
        let all_set = |value: serde_json::Value| -> Vec<String> {
            value
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        };
        // Every field named, so none is skipped when serialised.
        let host = HostSetup {
            sandbox: Some(Default::default()),
            image: Some(String::new()),
            gpus: vec![String::new()],
            python: Some(PathBuf::new()),
            config: Some(PathBuf::new()),
            llm: Some(String::new()),
        };
        let limits = Overrides {
            max_steps: Some(0),
            wall_seconds: Some(0),
            llm_tokens: Some(0),
            llm_cost_usd: Some(0.0),
            agent_memory_mb: Some(0),
            trace_mb: Some(0),
            cpus: Some(0.0),
            memory_mb: Some(0),
            script_timeout: Some(0),
            network: Some(false),
            network_allow: Some(Vec::new()),
            http_requests: Some(0),
            http_response_mb: Some(0),
            metric: Some(String::new()),
            direction: Some(crate::limits::Direction::Higher),
            range: Some(crate::limits::MetricRange([0.0, 1.0])),
        };
        names.extend(all_set(serde_json::to_value(host).unwrap_or_default()));
        names.extend(all_set(serde_json::to_value(limits).unwrap_or_default()));
        names
    }

    /// Where the episodes run: `on`, else Slurm when the plan has `[slurm]`.
    pub fn placement(&self) -> placement::On {
        match (self.on, &self.slurm) {
            (Some(on), _) => on,
            (None, Some(_)) => placement::On::Slurm,
            (None, None) => placement::On::Local,
        }
    }

    /// Refuses a plan that cannot run, saying what to fix.
    pub fn check(&self) -> Result<()> {
        if self.agents.is_empty() {
            bail!("the plan names no agent: pass --agent FILE.wasm (repeatable) or `agents` in the plan");
        }
        if self.tasks.is_empty() {
            bail!("the plan names no task: pass --task NAME (repeatable) or `tasks` in the plan");
        }
        if self.seeds.list().is_empty() {
            bail!("the plan has no seeds: `seeds` must be a count of at least 1 or a list");
        }
        if self.parallel == 0 {
            bail!("`parallel` (-j) must be at least 1");
        }
        self.limits.check()?;
        if self.smoke {
            for name in &self.tasks {
                task::smoke::check(&task::resolve(name)?, &self.limits)?;
            }
        }
        if self.host.llm.as_deref().is_some_and(|l| l.starts_with("replay:")) {
            bail!(
                "`llm = \"replay:...\"` answers one recorded episode: replay it with `mlrb run --llm replay:<episode-dir>`"
            );
        }
        if let Some((name, _)) = self.agents.iter().find_map(AgentEntry::person)
            && self.smoke
        {
            bail!("agent human:{name}: a person's episodes ran on real data, and a smoke bench never mixes them in");
        }
        if let Some((name, _)) = self.agents.iter().find_map(AgentEntry::person)
            && self.placement() != placement::On::Local
        {
            bail!("agent human:{name}: a person's episodes join only a bench on this host (`on = \"local\"`)");
        }
        let mut names = BTreeMap::new();
        for agent in &self.agents {
            if let Some(other) = names.insert(agent.name(), agent.path()) {
                bail!(
                    "agents {} and {} would both be named `{}`: give one a name (`{{ path = \"...\", name = \"...\" }}` in the plan)",
                    other.display(),
                    agent.path().display(),
                    agent.name()
                );
            }
        }
        Ok(())
    }
}

/// One episode of the matrix.
#[derive(Debug, Clone)]
pub(super) struct Cell {
    pub(super) id: String,
    pub(super) task: usize,
    pub(super) agent: usize,
    pub(super) seed: u64,
}

/// One episode of a plan by name: what a queue hands out with its id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSpec {
    /// The task's name.
    pub task: String,
    /// The agent's name in the run.
    pub agent: String,
    /// The seed.
    pub seed: u64,
}

/// The episodes of a plan, task by agent by seed, with their ids: known
/// without opening a sandbox (the tasks are only read).
pub fn plan_episodes(plan: &Plan) -> Result<Vec<(String, EpisodeSpec)>> {
    let tasks: Vec<String> = plan
        .tasks
        .iter()
        .map(|t| Ok(task::resolve(t)?.spec.name))
        .collect::<Result<_>>()?;
    let agents: Vec<String> = plan.agents.iter().map(AgentEntry::name).collect();
    Ok(matrix(&tasks, &agents, &plan.seeds.list())
        .into_iter()
        .map(|c| {
            let spec = EpisodeSpec {
                task: tasks[c.task].clone(),
                agent: agents[c.agent].clone(),
                seed: c.seed,
            };
            (c.id, spec)
        })
        .collect())
}

/// Every cell of tasks × agents × seeds, in run order.
pub(super) fn matrix(tasks: &[String], agents: &[String], seeds: &[u64]) -> Vec<Cell> {
    let mut cells = Vec::new();
    for (t, task) in tasks.iter().enumerate() {
        for (a, agent) in agents.iter().enumerate() {
            for &seed in seeds {
                cells.push(Cell {
                    id: episode_id(task, agent, seed),
                    task: t,
                    agent: a,
                    seed,
                });
            }
        }
    }
    cells
}

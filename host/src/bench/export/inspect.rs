//! An agent's episodes as an Inspect AI evaluation log (the `.json` log
//! format, version 2, that `inspect_ai.log.read_eval_log` reads and
//! `inspect view` opens): one sample per episode, the task as the sample
//! and its seeds as epochs, with the agent's host calls as tool calls, its
//! answer, its scores and its model usage.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::inspect_events::error_type;
use super::transcript::{Transcript, result_text};
use super::{AgentRun, Episode};
use crate::bench::across::{AcrossTasks, Aggregate};
use crate::bench::ranked;
use crate::episode::EndReason;

/// The log format version written (Inspect's `EvalLog.version`).
const LOG_VERSION: u32 = 2;

/// The top level of a log, in the order Inspect's streaming header reader
/// needs: every header field before `samples`.
#[derive(serde::Serialize)]
pub struct Log {
    version: u32,
    status: &'static str,
    /// The evaluation's spec (`EvalSpec`).
    pub eval: Value,
    plan: Value,
    results: Value,
    stats: Value,
    /// One per episode.
    pub samples: Vec<Value>,
}

/// The evaluation log of `run`'s agent.
pub fn log(run: &AgentRun) -> Log {
    let created = run.episodes.iter().filter_map(started_at).min().unwrap_or_default();
    let completed = run.episodes.iter().filter_map(ended_at).max().unwrap_or_default();
    let usage = total_usage(run);
    // The agent is the model under evaluation; the LLMs it called are its
    // model usage.
    let llms: Vec<&String> = usage.keys().collect();
    let tasks: Vec<&str> = run.tasks();
    let samples: Vec<Value> = run.episodes.iter().map(|e| sample(run, e)).collect();
    Log {
        version: LOG_VERSION,
        status: "success",
        eval: json!({
            "eval_id": run.id("inspect"),
            "run_id": run.run_name,
            "created": created,
            "task": format!("mlrb/{}", run.run_name),
            "task_id": run.id("task"),
            "task_version": 0,
            "solver": solver(run),
            "tags": tags(run),
            "dataset": {"name": run.run_name, "location": run.run_dir, "samples": tasks.len(), "sample_ids": tasks},
            "model": model_name(run),
            "model_args": model_args(run, &llms),
            "config": {"epochs": run.most_seeds(), "epochs_reducer": ["mean"]},
            "packages": {"mlrb": env!("CARGO_PKG_VERSION")},
            "metadata": {"mlrb_run": run.run_dir, "agent": run.agent, "agent_sha256": run.agent_sha256(),
                         "participant": if run.person().is_some() { "human" } else { "agent" }},
        }),
        plan: json!({"name": "plan", "steps": [{"solver": solver(run), "params": {}}]}),
        results: results(run, samples.len()),
        stats: json!({"started_at": created, "completed_at": completed, "model_usage": usage}),
        samples,
    }
}

/// The agent as Inspect's model: `mlrb/<agent>`; a person, whom no model
/// stands for, as `none/human`, and their name in the model's arguments.
fn model_name(run: &AgentRun) -> String {
    match run.person() {
        Some(_) => "none/human".into(),
        None => format!("mlrb/{}", run.agent),
    }
}

/// The solver: the agent, or Inspect's own name for a person at a terminal.
fn solver(run: &AgentRun) -> String {
    match run.person() {
        Some(_) => "human_agent".into(),
        None => run.agent.clone(),
    }
}

fn tags(run: &AgentRun) -> Value {
    match run.person() {
        Some(_) => json!(["mlrb", "human-baseline"]),
        None => json!(["mlrb"]),
    }
}

fn model_args(run: &AgentRun, llms: &[&String]) -> Value {
    match run.person() {
        Some(name) => json!({"person": name, "agent": run.agent, "participant": "human"}),
        None => json!({"agent": run.agent, "agent_sha256": run.agent_sha256(), "llm_models": llms}),
    }
}

fn started_at(e: &Episode) -> Option<String> {
    e.transcript.as_ref().map(|t| t.record.started_at.clone())
}

fn ended_at(e: &Episode) -> Option<String> {
    e.transcript.as_ref().and_then(|t| t.record.ended_at.clone())
}

fn usage_json(input: u64, output: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": output, "total_tokens": input + output})
}

fn sample_usage(t: &Transcript) -> BTreeMap<String, Value> {
    t.usage
        .iter()
        .map(|(model, u)| (model.clone(), usage_json(u.input_tokens, u.output_tokens)))
        .collect()
}

fn total_usage(run: &AgentRun) -> BTreeMap<String, Value> {
    let mut totals: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for t in run.episodes.iter().filter_map(|e| e.transcript.as_ref()) {
        for (model, u) in &t.usage {
            let entry = totals.entry(model.clone()).or_default();
            entry.0 += u.input_tokens;
            entry.1 += u.output_tokens;
        }
    }
    totals.into_iter().map(|(m, (i, o))| (m, usage_json(i, o))).collect()
}

/// The run's scores per scorer, the headline first: the task's own score
/// (the mean of the valid seeds) where the run has one task, else the
/// normalised score; each a mean and its standard error (clustered by task
/// across tasks), with the interval in the scorer's metadata.
fn results(run: &AgentRun, total: usize) -> Value {
    let a: &AcrossTasks = &run.across;
    let scored = run.episodes.iter().filter(|e| ranked::counted(&e.result)).count();
    let entry = |name: &str, aggregate: Option<&Aggregate>| {
        aggregate.map(|g| {
            let c = &g.clustered;
            let meta = json!({"stderr": "clustered by task (CR1)", "tasks": c.clusters,
                              "interval": interval(c.interval, "95 % t, tasks - 1 df")});
            scorer(name, c.mean, c.se, c.n, total, meta)
        })
    };
    let task_score = match run.epochs.as_slice() {
        [e] => e.score.as_ref().map(|s| {
            let meta = json!({"metric": e.metric, "direction": crate::format::direction(e.higher_is_better),
                              "stderr": "sample sd / sqrt(valid seeds)",
                              "interval": interval(s.interval, "95 % t, valid seeds - 1 df")});
            scorer("score", s.mean, s.se, s.n, total, meta)
        }),
        _ => None,
    };
    let scores: Vec<Value> = [
        task_score,
        entry("normalized", a.normalized.as_ref()),
        entry("success", a.success.as_ref()),
        entry("improvement", a.improvement.as_ref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    json!({"total_samples": total, "completed_samples": scored, "scores": scores})
}

/// One `EvalScore`: the mean (the headline `inspect view` shows) and its
/// standard error.
fn scorer(name: &str, mean: f64, se: Option<f64>, n: usize, total: usize, metadata: Value) -> Value {
    let mut metrics = serde_json::Map::new();
    metrics.insert("mean".into(), json!({"name": "mean", "value": mean}));
    if let Some(se) = se {
        metrics.insert("stderr".into(), json!({"name": "stderr", "value": se}));
    }
    json!({"name": name, "scorer": name, "reducer": "mean", "scored_samples": n,
           "unscored_samples": total.saturating_sub(n), "metadata": metadata, "metrics": metrics})
}

fn interval(i: Option<crate::stats::Interval>, method: &str) -> Value {
    i.map_or(
        Value::Null,
        |i| json!({"lower": i.lower, "upper": i.upper, "level": i.level, "method": method}),
    )
}

/// One episode as a sample.
fn sample(run: &AgentRun, e: &Episode) -> Value {
    let r = &e.result;
    let mut sample = json!({
        "id": r.task,
        "epoch": run.epoch(r),
        "input": e.transcript.as_ref().map_or(String::new(), |t| t.prompt.clone()),
        "target": target(e),
        "scores": scores(e),
        "metadata": {"episode": r.id, "seed": r.seed, "dir": r.dir, "metric": r.metric,
                     "higher_is_better": r.higher_is_better, "valid": r.valid,
                     "end_reason": r.end_reason.map(|x| x.name()), "steps": r.steps,
                     "infra_error": r.infra_error, "stale": r.stale},
        "uuid": run.id(&r.id),
    });
    let Some(t) = &e.transcript else {
        sample["error"] = json!({"message": r.infra_error.clone().unwrap_or_else(|| "no episode records".into()),
                                  "traceback": "", "traceback_ansi": ""});
        return sample;
    };
    let messages = messages(t);
    let usage = sample_usage(t);
    let model = usage.keys().next().cloned().unwrap_or_default();
    let end = t.record.end.as_ref();
    sample["messages"] = json!(messages);
    sample["events"] = json!(super::inspect_events::events(t, &sample["scores"], &target(e)));
    sample["output"] = json!({"model": model, "completion": t.answer.clone().unwrap_or_default()});
    sample["model_usage"] = json!(usage);
    sample["started_at"] = json!(t.record.started_at);
    sample["completed_at"] = json!(t.record.ended_at);
    sample["total_time"] = json!(r.wall_ms as f64 / 1000.0);
    sample["working_time"] = json!((r.wall_ms as f64 - end.map_or(0.0, |e| e.llm.waiting_ms)).max(0.0) / 1000.0);
    if let Some(limit) = limit(t) {
        sample["limit"] = limit;
    }
    sample
}

/// What the sample is scored against: the task's metric and its scale.
fn target(e: &Episode) -> String {
    use crate::format::number;
    let r = &e.result;
    format!(
        "{} ({}): starter {}, reference {}",
        r.metric,
        crate::format::direction(r.higher_is_better),
        number(r.baseline),
        number(r.reference)
    )
}

/// One scorer per figure: the task's own score (valid submissions), the
/// normalised score, the improvement and success (an agent failure counts
/// as the starter and as a failure, said in the explanation).
fn scores(e: &Episode) -> Value {
    let r = &e.result;
    if !ranked::counted(r) {
        return Value::Null;
    }
    let failed = ranked::agent_failure(r);
    let why = match failed {
        true => "the submission is invalid: an agent failure, counted as the starter's score and as no success",
        false => "the task's evaluator scored the final workspace",
    };
    let mut scores = serde_json::Map::new();
    let mut put = |name: &str, value: Option<f64>| {
        if let Some(value) = value {
            scores.insert(name.into(), json!({"value": value, "explanation": why}));
        }
    };
    put("score", ranked::score(r));
    put("normalized", ranked::normalized(r));
    put("improvement", ranked::improvement(r));
    put("success", ranked::success(r).map(|s| f64::from(u8::from(s))));
    Value::Object(scores)
}

/// The limit that ended an episode, in Inspect's terms.
fn limit(t: &Transcript) -> Option<Value> {
    let end = t.record.end.as_ref()?;
    let limits = &t.record.limits;
    let (kind, value) = match end.reason {
        EndReason::StepBudget => ("turn", f64::from(limits.max_steps)),
        EndReason::Timeout => ("time", limits.wall_seconds as f64),
        EndReason::MemoryLimit => ("custom", limits.agent_memory_bytes as f64),
        EndReason::TraceLimit => ("custom", limits.trace_bytes as f64),
        _ => return None,
    };
    Some(json!({"type": kind, "limit": value}))
}

/// The conversation: the task, each host call as an assistant's tool call
/// and its result, and the agent's answer (or why it ended).
fn messages(t: &Transcript) -> Vec<Value> {
    let mut messages = vec![json!({"role": "user", "content": t.prompt, "source": "input"})];
    for call in &t.calls {
        messages.push(json!({"role": "assistant", "content": "", "source": "generate",
                             "tool_calls": [{"id": call.id, "function": call.function, "arguments": call.arguments, "type": "function"}]}));
        let mut tool =
            json!({"role": "tool", "content": result_text(call), "tool_call_id": call.id, "function": call.function});
        if call.error.is_some() {
            tool["error"] = json!({"type": error_type(call), "message": result_text(call)});
        }
        messages.push(tool);
    }
    let ending = t
        .record
        .end
        .as_ref()
        .map_or("the episode has no end record".to_string(), |e| {
            format!(
                "ended: {}{}",
                e.reason.name(),
                if e.detail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", e.detail)
                }
            )
        });
    let content = match &t.answer {
        Some(answer) => answer.clone(),
        None => ending,
    };
    messages.push(json!({"role": "assistant", "content": content, "source": "generate"}));
    messages
}

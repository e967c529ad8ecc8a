//! An agent's results as Every Eval Ever records (schema 0.3.0): the
//! aggregate record, one evaluation result per task (the mean of the valid
//! seeds, the success rate) and across tasks (normalised score, its IQM,
//! success) with their uncertainty; and the instance-level JSONL, one line
//! per counted episode with its transcript.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use sha2::Digest;

use super::transcript::result_text;
use super::{AgentRun, Episode, Source, strings};
use crate::bench::across::Aggregate;
use crate::bench::epochs::EpochStats;
use crate::bench::ranked;
use crate::stats::{Bootstrap, Interval};

/// The EEE schema version the records follow.
pub const SCHEMA_VERSION: &str = "0.3.0";

/// Writes `<uuid>.json` and `<uuid>_samples.jsonl` for `run`'s agent
/// where EEE's datastore keeps them: `out/data/<collection>/<developer>/<model>/`.
pub fn write(run: &AgentRun, out: &Path, source: &Source) -> Result<Vec<PathBuf>> {
    let safe = crate::paths::safe_component;
    let relative = format!(
        "data/{}/{}/{}",
        safe(&format!("mlrb-{}", run.run_name)),
        developer(run),
        safe(&run.agent)
    );
    let dir = out.join(&relative);
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let uuid = uuid(run);
    let retrieved = chrono::Utc::now().timestamp().to_string();
    let evaluation_id = format!("mlrb-{}/{}/{retrieved}", run.run_name, model_id(run));
    let lines: Vec<String> = run
        .episodes
        .iter()
        .filter(|e| ranked::counted(&e.result))
        .map(|e| instance(run, e, &evaluation_id).to_string())
        .collect();
    let jsonl = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    let samples = dir.join(format!("{uuid}_samples.jsonl"));
    std::fs::write(&samples, &jsonl).with_context(|| format!("{}: cannot write", samples.display()))?;
    let mut record = aggregate(run, source, &evaluation_id, &retrieved);
    record["detailed_evaluation_results"] = json!({
        "format": "jsonl",
        "file_path": format!("{relative}/{uuid}_samples.jsonl"),
        "hash_algorithm": "sha256",
        "checksum": hex::encode(sha2::Sha256::digest(jsonl.as_bytes())),
        "total_rows": lines.len(),
    });
    let path = dir.join(format!("{uuid}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&record)?)
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(vec![path, samples])
}

/// The developer EEE files an mlrb agent under.
const DEVELOPER: &str = "mlrb-agent";
/// What EEE files a person's episodes under: a human baseline, no model.
const PERSON: &str = "human";

fn developer(run: &AgentRun) -> &'static str {
    match run.person() {
        Some(_) => PERSON,
        None => DEVELOPER,
    }
}

/// A version-4-shaped UUID, stable for the run and agent.
fn uuid(run: &AgentRun) -> String {
    let hex = blake3::hash(format!("{}\n{}", run.run_dir, run.agent).as_bytes()).to_hex();
    let variant = ["8", "9", "a", "b"][usize::from(hex.as_bytes()[16]) % 4];
    format!(
        "{}-{}-4{}-{variant}{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// The agent as EEE's model: `mlrb-agent/<agent>`; a person as
/// `human/<name>`.
fn model_id(run: &AgentRun) -> String {
    match run.person() {
        Some(name) => format!("{PERSON}/{name}"),
        None => format!("{DEVELOPER}/{}", run.agent),
    }
}

/// What `model_info` says beyond the name and id: an agent's component and
/// the models it called; of a person, that it is one and no model.
fn model_details(run: &AgentRun) -> std::collections::BTreeMap<String, String> {
    match run.person() {
        Some(name) => strings(&[
            ("participant_type", "human".into()),
            ("person", name),
            ("human_baseline", "true".into()),
            ("agent", run.agent.clone()),
            ("llm_models", String::new()),
        ]),
        None => strings(&[
            ("deployment_type", "unknown".into()),
            ("model_availability", "unknown".into()),
            ("agent", run.agent.clone()),
            ("agent_sha256", run.agent_sha256()),
            ("llm_models", models(run)),
        ]),
    }
}

/// The models the agent called, by tokens used (most first).
fn models(run: &AgentRun) -> String {
    let mut tokens: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for t in run.episodes.iter().filter_map(|e| e.transcript.as_ref()) {
        for (model, u) in &t.usage {
            *tokens.entry(model).or_default() += u.input_tokens + u.output_tokens;
        }
    }
    let mut by_use: Vec<(&str, u64)> = tokens.into_iter().collect();
    by_use.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    by_use.iter().map(|(m, _)| *m).collect::<Vec<_>>().join(", ")
}

fn aggregate(run: &AgentRun, source: &Source, evaluation_id: &str, retrieved: &str) -> Value {
    let first = run
        .episodes
        .iter()
        .filter_map(|e| e.transcript.as_ref())
        .map(|t| &t.record)
        .next();
    let started = first.map(|r| r.started_at.clone()).unwrap_or_default();
    let mut results: Vec<Value> = run.epochs.iter().flat_map(|e| task_results(run, e, &started)).collect();
    results.extend(across_results(run, &started));
    json!({
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "evaluation_timestamp": started,
        "retrieved_timestamp": retrieved,
        "source_metadata": {
            "source_name": format!("mlrb bench {}", run.run_name),
            "source_type": "evaluation_run",
            "source_organization_name": source.organization,
            "evaluator_relationship": source.relationship,
        },
        "eval_library": {"name": "mlrb", "version": env!("CARGO_PKG_VERSION")},
        "model_info": {
            "name": run.agent,
            "id": model_id(run),
            "inference_platform": first.map_or(String::new(), |r| r.llm.clone()),
            "additional_details": model_details(run),
        },
        "evaluation_results": results,
    })
}

fn interval_json(i: Option<Interval>, method: &str) -> Option<Value> {
    i.map(|i| json!({"lower": i.lower, "upper": i.upper, "confidence_level": i.level, "method": method}))
}

/// Per task: the mean of the valid seeds' scores and the success rate.
fn task_results(run: &AgentRun, e: &EpochStats, started: &str) -> Vec<Value> {
    let source = json!({"dataset_name": e.task, "source_type": "other",
                        "additional_details": strings(&[("mlrb_task", e.task.clone())])});
    let config = |id: &str, name: &str, lower: bool, description: String, range: (Value, Value)| {
        json!({"metric_id": id, "metric_name": name, "metric_kind": name, "lower_is_better": lower,
               "score_type": "continuous", "min_score": range.0, "max_score": range.1,
               "evaluation_description": description})
    };
    let mut out = Vec::new();
    // The schema requires a direction: a metric whose direction nobody
    // knows has no score result rather than a made-up one.
    if let (Some(score), Some(higher)) = (&e.score, e.higher_is_better) {
        let mut uncertainty = json!({"num_samples": score.n});
        if let Some(se) = score.se {
            uncertainty["standard_error"] = json!({"value": se, "method": "analytic: sample sd / sqrt(valid seeds)"});
        }
        if let Some(ci) = interval_json(score.interval, "t, valid seeds - 1 degrees of freedom") {
            uncertainty["confidence_interval"] = ci;
        }
        out.push(json!({
            "evaluation_result_id": format!("{}/score", e.task),
            "evaluation_name": e.task,
            "source_data": source,
            "evaluation_timestamp": started,
            "metric_config": config(&format!("mlrb.{}.{}", e.task, e.metric), &e.metric, !higher,
                format!("the task's {} of the agent's final workspace; reducer: mean over the valid seeds ({} of {}; agent failures {})", e.metric, e.valid, e.n, e.agent_failures),
                unbounded()),
            "score_details": {"score": score.mean, "uncertainty": uncertainty, "details": details(e)},
            "generation_config": generation(run, e),
        }));
    }
    if e.judged > 0 {
        let rate = e.successes as f64 / e.judged as f64;
        out.push(json!({
            "evaluation_result_id": format!("{}/success", e.task),
            "evaluation_name": e.task,
            "source_data": source,
            "evaluation_timestamp": started,
            "metric_config": config("success_rate", "success rate", false,
                "share of seeds more than 10 % better than the starter; an agent failure fails".into(), (json!(0.0), json!(1.0))),
            "score_details": {"score": rate, "uncertainty": rate_uncertainty(e), "details": details(e)},
            "generation_config": generation(run, e),
        }));
    }
    out
}

/// A task's success rate's uncertainty: Wilson's interval over its seeds.
fn rate_uncertainty(e: &EpochStats) -> Value {
    let mut uncertainty = json!({"num_samples": e.judged});
    if let Some(ci) = interval_json(e.success.map(|r| r.interval), "Wilson score interval over the seeds") {
        uncertainty["confidence_interval"] = ci;
    }
    uncertainty
}

fn details(e: &EpochStats) -> Value {
    use crate::format::number;
    json!(strings(&[
        ("seeds", e.n.to_string()),
        ("valid", e.valid.to_string()),
        ("agent_failures", e.agent_failures.to_string()),
        ("infra_failures_left_out", e.infra_failures.to_string()),
        ("starter_score", number(e.baseline).to_string()),
        (
            "starter_source",
            e.baseline_source
                .clone()
                .unwrap_or_else(|| "task.toml metric.baseline".into())
        ),
        ("reference_score", number(e.reference).to_string()),
        ("pass_at_k", format!("{:?}", e.pass_at_k)),
    ]))
}

/// How the agent ran the task: its tools (the host's interfaces) and limits.
fn generation(run: &AgentRun, e: &EpochStats) -> Value {
    let record = run
        .episodes
        .iter()
        .filter(|x| x.result.task == e.task)
        .find_map(|x| x.transcript.as_ref().map(|t| &t.record));
    let mut tools: Vec<&str> = run
        .episodes
        .iter()
        .filter_map(|x| x.transcript.as_ref())
        .flat_map(|t| t.calls.iter().map(|c| c.function.as_str()))
        .collect();
    tools.sort();
    tools.dedup();
    let mut args = json!({"agentic_eval_config": {"available_tools": tools.iter().map(|t| json!({"name": t})).collect::<Vec<_>>()},
                          "max_attempts": 1});
    if let Some(r) = record {
        args["eval_limits"] = json!({"time_limit": r.limits.wall_seconds, "message_limit": r.limits.max_steps});
        args["sandbox"] = json!({"type": r.host.sandbox});
    }
    json!({"generation_args": args})
}

/// Across tasks: the normalised score, its IQM, and the success rate.
fn across_results(run: &AgentRun, started: &str) -> Vec<Value> {
    let a = &run.across;
    let tasks = run.tasks().join(", ");
    let source = json!({"dataset_name": format!("mlrb {}", run.run_name), "source_type": "other",
                        "additional_details": strings(&[("tasks", tasks)])});
    let boot = Bootstrap::default();
    let entry = |id: &str, name: &str, description: &str, g: &Aggregate, range: (Value, Value)| {
        let c = &g.clustered;
        let mut uncertainty = json!({"num_samples": c.n, "num_bootstrap_samples": boot.resamples});
        if let Some(se) = c.se {
            uncertainty["standard_error"] = json!({"value": se, "method": "clustered by task (CR1)"});
        }
        let ci = match g.rate {
            Some(rate) => interval_json(
                Some(rate.interval),
                "Wilson at the design-effect-adjusted sample size, clustered by task",
            ),
            None => interval_json(c.interval, "t, tasks - 1 degrees of freedom, clustered by task"),
        };
        if let Some(ci) = ci {
            uncertainty["confidence_interval"] = ci;
        }
        json!({
            "evaluation_result_id": id, "evaluation_name": format!("mlrb {} (across tasks)", run.run_name),
            "source_data": source, "evaluation_timestamp": started,
            "metric_config": {"metric_id": id, "metric_name": name, "metric_kind": name, "lower_is_better": false,
                              "score_type": "continuous", "min_score": range.0, "max_score": range.1,
                              "evaluation_description": description},
            "score_details": {"score": c.mean, "uncertainty": uncertainty, "details": strings(&[
                ("tasks", c.clusters.to_string()),
                ("bootstrap_interval", g.bootstrap.map_or("n/a".into(), |b| format!("[{}, {}]", b.lower, b.upper))),
                ("naive_standard_error", c.naive_se.map_or("n/a".into(), |s| s.to_string())),
            ])},
        })
    };
    let mut out = Vec::new();
    if let Some(g) = &a.normalized {
        out.push(entry(
            "mlrb.normalized",
            "normalised score",
            "per task (score - starter) / (reference - starter), an agent failure 0; mean over every episode",
            g,
            unbounded(),
        ));
    }
    if let Some(g) = &a.success {
        out.push(entry(
            "mlrb.success_rate",
            "success rate",
            "more than 10 % better than the starter; mean over every episode",
            g,
            (json!(0.0), json!(1.0)),
        ));
    }
    if let Some(iqm) = &a.iqm {
        let mut u = json!({"num_bootstrap_samples": boot.resamples});
        if let Some(ci) = interval_json(iqm.bootstrap, "two-level bootstrap (tasks, then seeds), percentile") {
            u["confidence_interval"] = ci;
        }
        out.push(json!({
            "evaluation_result_id": "mlrb.normalized_iqm", "evaluation_name": format!("mlrb {} (across tasks)", run.run_name),
            "source_data": source, "evaluation_timestamp": started,
            "metric_config": {"metric_id": "mlrb.normalized_iqm", "metric_name": "normalised score IQM", "metric_kind": "iqm",
                              "lower_is_better": false, "score_type": "continuous",
                              "min_score": unbounded().0, "max_score": unbounded().1,
                              "evaluation_description": "interquartile mean of every episode's normalised score (rliable)"},
            "score_details": {"score": iqm.value, "uncertainty": u},
        }));
    }
    out
}

/// A scale open at both ends: the normalised score passes 1 and falls
/// below 0, and a task's metric declares no bounds to its record (EEE
/// requires bounds on a continuous metric, and takes these as "none").
fn unbounded() -> (Value, Value) {
    (json!("-Infinity"), json!("Infinity"))
}

/// One counted episode as an instance-level record.
fn instance(run: &AgentRun, e: &Episode, evaluation_id: &str) -> Value {
    let r = &e.result;
    let t = e.transcript.as_ref();
    let messages = t.map(messages).unwrap_or_default();
    let last = messages.len().saturating_sub(1);
    let (score, score_is) = match (ranked::normalized(r), ranked::score(r)) {
        (Some(n), _) => (n, "normalised score"),
        (None, Some(s)) => (s, "the task's score"),
        (None, None) => (0.0, "none: invalid submission"),
    };
    json!({
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "model_id": model_id(run),
        "evaluation_name": r.task,
        "evaluation_result_id": format!("{}/score", r.task),
        "sample_id": format!("{}/seed-{}", r.task, r.seed),
        "interaction_type": "agentic",
        "input": {"raw": t.map_or(String::new(), |t| t.prompt.clone()),
                  "reference": r.reference.map(|x| x.to_string()).into_iter().collect::<Vec<_>>()},
        "output": null,
        "messages": messages,
        "answer_attribution": [{"turn_idx": last, "source": format!("messages[{last}].content"),
            "extracted_value": t.and_then(|t| t.answer.clone()).unwrap_or_default(),
            "extraction_method": "custom: the task's evaluator scores the final workspace", "is_terminal": true}],
        "evaluation": {"score": score, "is_correct": ranked::success(r).unwrap_or(false),
                       "num_turns": messages.len(), "tool_calls_count": t.map_or(0, |t| t.calls.len())},
        "token_usage": {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens, "total_tokens": ranked::tokens(r)},
        "performance": {"latency_ms": r.wall_ms as f64},
        "error": (!r.valid).then(|| format!("invalid submission; ended: {}", r.end_reason.map_or("unknown".into(), |x| x.name()))),
        "metadata": strings(&[
            ("episode", r.id.clone()),
            ("seed", r.seed.to_string()),
            ("score_is", score_is.into()),
            ("task_score", crate::format::number(ranked::score(r)).to_string()),
            ("valid", r.valid.to_string()),
            ("steps", r.steps.to_string()),
        ]),
    })
}

/// The transcript in EEE's message form (tool arguments as strings).
fn messages(t: &super::transcript::Transcript) -> Vec<Value> {
    let mut out = vec![json!({"turn_idx": 0, "role": "user", "content": t.prompt})];
    for call in &t.calls {
        let arguments: serde_json::Map<String, Value> = call
            .arguments
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    Value::String(v.as_str().map_or_else(|| v.to_string(), String::from)),
                )
            })
            .collect();
        let n = out.len();
        out.push(json!({"turn_idx": n, "role": "assistant", "content": null,
                        "tool_calls": [{"id": call.id, "name": call.function, "arguments": arguments}]}));
        out.push(json!({"turn_idx": n + 1, "role": "tool", "content": result_text(call), "tool_call_id": [call.id]}));
    }
    let n = out.len();
    out.push(json!({"turn_idx": n, "role": "assistant", "content": t.answer}));
    out
}

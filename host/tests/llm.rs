//! The llm capability against a real HTTP test double on loopback that
//! speaks both wire formats: answers reach the agent, both sides are
//! recorded, faults become typed errors, budgets hold, keys never leak, and
//! a recorded episode replays offline.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::llm_server::{LlmServer, Reply};
use serde_json::{Value, json};

const KEY: &str = "sk-mlrb-test-0123456789-SECRET-abcdef";

struct Episode {
    _tmp: tempfile::TempDir,
    out: PathBuf,
    finished: common::Finished,
}

impl Episode {
    fn lines(&self) -> Vec<String> {
        self.finished.answer().lines().map(String::from).collect()
    }
    fn llm_events(&self) -> Vec<Value> {
        self.finished
            .events()
            .into_iter()
            .filter(|e| e["interface"] == "llm")
            .collect()
    }
    fn llm_totals(&self) -> &Value {
        &self.finished.json["episode"]["end"]["llm"]
    }
}

/// Runs `agent` (a probe) on the hostile fixture task with `config` as its
/// mlrb.toml and the key in the environment.
fn run(agent: &str, config: &str, extra: &[&str]) -> Episode {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let config_path = tmp.path().join("mlrb.toml");
    std::fs::write(&config_path, config).unwrap();
    let out = tmp.path().join("runs");
    let mut args = vec!["--config", config_path.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let mut command = common::run_command(&common::agent(agent), task.to_str().unwrap(), &out, &args);
    command.env("MLRB_TEST_LLM_KEY", KEY);
    let finished = common::finish(command);
    Episode {
        _tmp: tmp,
        out,
        finished,
    }
}

/// One episode of `agent` on the built-in digits task, its model `server`
/// speaking `api`; the folder it ran in lives as long as the first value.
fn on_digits(agent: &Path, server: &LlmServer, api: &str) -> (tempfile::TempDir, common::Finished) {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("mlrb.toml");
    std::fs::write(&config, server.config(api, "")).unwrap();
    let mut command = common::run_command(
        agent,
        "digits",
        &tmp.path().join("runs"),
        &["--config", config.to_str().unwrap(), "--json"],
    );
    command.env("MLRB_TEST_LLM_KEY", KEY);
    let finished = common::finish(command);
    (tmp, finished)
}

/// The research agent's scripted digits episode ended as scripted: its
/// final answer submitted, train.py rewritten into the task's reference
/// model, and the score a success.
fn submitted_the_reference(finished: &common::Finished, api: &str, reference: &str) {
    assert_eq!(finished.end_reason(), "completed", "{api}: {}", finished.json);
    assert_eq!(finished.answer(), "Replaced the decision tree with an RBF-kernel SVM.");
    let score = &finished.json["score"];
    assert_eq!(score["success"], true, "{api}: {score}");
    let train = std::fs::read_to_string(finished.dir.join("workspace/train.py")).unwrap();
    assert_eq!(train, reference, "{api}");
}

fn texts(n: usize) -> Vec<Reply> {
    (1..=n).map(|i| Reply::Text(format!("answer number {i}"))).collect()
}

#[test]
fn both_wire_formats_answer_the_agent_and_both_sides_are_recorded() {
    for api in ["openai", "anthropic"] {
        let server = LlmServer::start(texts(5));
        let episode = run("llm_caller", &server.config(api, ""), &[]);
        assert_eq!(
            episode.finished.end_reason(),
            "completed",
            "{api}: {}",
            episode.finished.json
        );
        let lines = episode.lines();
        assert!(
            lines[0].starts_with("call 1: ok answer number 1 (") && lines[0].ends_with(", stop)"),
            "{api}: {lines:?}"
        );
        assert!(lines[4].starts_with("call 5: ok answer number 5"), "{api}: {lines:?}");

        // What the provider saw: its own format, the key in its own header.
        let received = server.received();
        assert_eq!(received.len(), 5, "{api}");
        let first = &received[0];
        if api == "openai" {
            assert_eq!(first.path, "/v1/chat/completions");
            assert_eq!(first.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
            assert_eq!(first.body["messages"][0]["role"], "system");
            assert_eq!(first.body["messages"][1]["content"], "one");
            assert_eq!(first.body["stop"][0], "STOP");
        } else {
            assert_eq!(first.path, "/v1/messages");
            assert_eq!(first.header("x-api-key"), Some(KEY));
            assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(first.body["system"], "You are a test double's audience.");
            assert_eq!(first.body["messages"][0]["content"], "one");
            assert_eq!(first.body["stop_sequences"][0], "STOP");
        }
        assert_eq!(first.body["model"], "scripted-1");
        assert_eq!(first.body["max_tokens"], 64);

        // The trace has both sides; the totals add up and cost is priced.
        let events = episode.llm_events();
        assert_eq!(events.len(), 5, "{api}");
        assert_eq!(events[0]["args"]["messages"][1]["content"], "one");
        assert_eq!(events[0]["result"]["ok"]["text"], "answer number 1");
        assert_eq!(events[0]["llm"]["stats"]["attempts"], 1);
        assert_eq!(events[0]["llm"]["stats"]["statuses"][0], 200);
        assert!(events.iter().all(|e| e["step"].is_null()), "an llm call is not a step");
        let totals = episode.llm_totals();
        assert_eq!(totals["calls"], 5);
        let (input, output) = (
            totals["input_tokens"].as_u64().unwrap(),
            totals["output_tokens"].as_u64().unwrap(),
        );
        assert_eq!(output, 15, "three words per answer: {totals}");
        let cost = totals["cost_usd"].as_f64().unwrap();
        let expected = (input as f64 * 1000.0 + output as f64 * 2000.0) / 1e6;
        assert!((cost - expected).abs() < 1e-9, "{cost} vs {expected}");
        let answers = std::fs::read_to_string(episode.finished.dir.join("workspace/answers.txt")).unwrap();
        assert_eq!(answers.lines().count(), 5);
    }
}

#[test]
fn rate_limits_are_waited_out_as_retry_after_says_and_counted_apart() {
    let server = LlmServer::start(vec![
        Reply::Status {
            code: 429,
            retry_after: Some("1".into()),
            body: "slow down".into(),
        },
        Reply::Status {
            code: 503,
            retry_after: None,
            body: "overloaded".into(),
        },
        Reply::Text("finally".into()),
    ]);
    let episode = run("llm_caller", &server.config("openai", "max_retries = 3"), &[]);
    let lines = episode.lines();
    assert!(lines[0].starts_with("call 1: ok finally"), "{lines:?}");
    let stats = &episode.llm_events()[0]["llm"]["stats"];
    assert_eq!(stats["attempts"], 3, "{stats}");
    assert_eq!(stats["statuses"], serde_json::json!([429, 503, 200]));
    // 1 s as asked, then the 1 s backoff of a second attempt.
    let backoff = stats["backoff_ms"].as_f64().unwrap();
    assert!((1900.0..4000.0).contains(&backoff), "{stats}");
    assert!(episode.llm_totals()["waiting_ms"].as_f64().unwrap() >= 1900.0);
    assert!(stats["provider_ms"].as_f64().unwrap() < 1000.0, "{stats}");
}

#[test]
fn faults_become_typed_errors_and_the_episode_goes_on() {
    let server = LlmServer::start(vec![
        // call 1: 500 until the retries run out
        Reply::Status {
            code: 500,
            retry_after: None,
            body: "boom".into(),
        },
        Reply::Status {
            code: 500,
            retry_after: None,
            body: "boom".into(),
        },
        // call 2: malformed JSON
        Reply::Raw("{\"choices\": [ not json".into()),
        // call 3: hangs past the request timeout, twice
        Reply::Hang,
        Reply::Hang,
        // call 4: refused
        Reply::Refuse,
        // call 5: a bad request
        Reply::Status {
            code: 400,
            retry_after: None,
            body: "max_tokens too large".into(),
        },
    ]);
    let config = server.config(
        "openai",
        "max_retries = 1\ntimeout_seconds = 2\nmax_backoff_seconds = 1",
    );
    let started = std::time::Instant::now();
    let episode = run("llm_caller", &config, &[]);
    assert_eq!(episode.finished.end_reason(), "completed", "{}", episode.finished.json);
    let lines = episode.lines();
    assert!(
        lines[0].starts_with("call 1: provider: provider test: HTTP 500: boom (2 attempt(s))"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("call 2: provider: provider test: the answer is not JSON"),
        "{lines:?}"
    );
    assert!(
        lines[2].starts_with("call 3: timeout: provider test: no answer within 2 s"),
        "{lines:?}"
    );
    assert!(lines[3].starts_with("call 4: refused:"), "{lines:?}");
    assert!(
        lines[4].starts_with(
            "call 5: invalid-request: provider test rejected the request (HTTP 400): max_tokens too large"
        ),
        "{lines:?}"
    );
    // The hang cost two timeouts and a backoff, not the episode.
    assert!(started.elapsed() < Duration::from_secs(30));
    let events = episode.llm_events();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["result"]["error"]["kind"].as_str().unwrap_or("ok"))
        .collect();
    assert_eq!(kinds, ["provider", "provider", "timeout", "refused", "invalid-request"]);
    assert_eq!(events[2]["llm"]["stats"]["statuses"], serde_json::json!([0, 0]));
    assert_eq!(episode.llm_totals()["calls"], 5);
    assert_eq!(episode.llm_totals()["output_tokens"], 0);
}

#[test]
fn the_token_and_cost_budgets_hold() {
    // Each call: about 8 prompt words + 3 answer words.
    let server = LlmServer::start(texts(5));
    let episode = run("llm_caller", &server.config("openai", ""), &["--llm-tokens", "15"]);
    let lines = episode.lines();
    assert!(lines[0].starts_with("call 1: ok"), "{lines:?}");
    assert!(lines[1].starts_with("call 2: ok"), "{lines:?}");
    assert!(
        lines[2].starts_with("call 3: budget-exhausted: all 15 LLM tokens"),
        "{lines:?}"
    );
    assert!(lines[3].starts_with("call 4: budget-exhausted"), "{lines:?}");
    assert!(
        lines[4].starts_with("script env:"),
        "the agent stopped asking: {lines:?}"
    );
    assert_eq!(server.received().len(), 2, "a refused call never reaches the provider");
    assert_eq!(episode.finished.json["episode"]["limits"]["llm_tokens"], 15);

    let server = LlmServer::start(texts(5));
    // $1000/M input tokens: one call costs about a cent.
    let episode = run("llm_caller", &server.config("openai", ""), &["--llm-cost-usd", "0.005"]);
    let lines = episode.lines();
    assert!(lines[0].starts_with("call 1: ok"), "{lines:?}");
    assert!(
        lines[1].starts_with("call 2: budget-exhausted: the LLM budget of $0.0050 is spent"),
        "{lines:?}"
    );
    assert_eq!(server.received().len(), 1);
}

#[test]
fn without_a_configured_model_calls_are_unavailable() {
    let episode = run("llm_caller", "# no [llm] here\n", &["--llm", "none"]);
    assert_eq!(episode.finished.end_reason(), "completed");
    let lines = episode.lines();
    assert!(
        lines[0].starts_with("call 1: unavailable: this host has no model configured"),
        "{lines:?}"
    );
    assert_eq!(episode.finished.json["episode"]["llm"], "none");
}

#[test]
fn an_unknown_alias_or_a_missing_key_is_a_clear_error() {
    let server = LlmServer::start(texts(5));
    let config = server
        .config("openai", "")
        .replace("[llm.models.main]", "[llm.models.other]");
    let episode = run("llm_caller", &config, &[]);
    let lines = episode.lines();
    assert!(
        lines[0].contains("invalid-request: no model alias \"main\" (this host has: other)"),
        "{lines:?}"
    );

    let config = server
        .config("openai", "")
        .replace("MLRB_TEST_LLM_KEY", "MLRB_TEST_UNSET_KEY");
    let episode = run("llm_caller", &config, &[]);
    let lines = episode.lines();
    assert!(
        lines[0].contains("unavailable: provider test: no key (set MLRB_TEST_UNSET_KEY"),
        "{lines:?}"
    );
    assert!(server.received().is_empty());
}

fn bad_config(config: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("mlrb.toml");
    std::fs::write(&path, config).unwrap();
    let output = common::run_command(&common::agent("llm_caller"), "digits", &tmp.path().join("runs"), &[])
        .args(["--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("mlrb.toml"), "{stderr}");
    stderr
}

#[test]
fn a_bad_configuration_is_refused_in_one_line() {
    let err = bad_config("[llm.providers.x]\napi = \"grpc\"\nbase_url = \"http://h\"\n");
    assert!(err.contains("grpc") && err.contains("line 2"), "{err}");
    let err = bad_config("[llm.models.main]\nprovider = \"nowhere\"\nmodel = \"m\"\n");
    assert!(
        err.contains("llm.models.main.provider") && err.contains("nowhere"),
        "{err}"
    );
    let err = bad_config("[llm.providers.x]\napi = \"openai\"\nbase_url = \"ftp://h\"\n");
    assert!(err.contains("llm.providers.x.base_url"), "{err}");
    let err = bad_config("[llm]\ntimout_seconds = 3\n");
    assert!(err.contains("timout_seconds"), "{err}");
}

#[test]
fn no_key_reaches_the_run_directory_the_log_or_a_script() {
    // The provider rejects the key and quotes it back, as some do.
    let server = LlmServer::start(vec![
        Reply::Text("fine".into()),
        Reply::Status {
            code: 401,
            retry_after: None,
            body: format!("Incorrect API key provided: {KEY}"),
        },
    ]);
    let episode = run("llm_caller", &server.config("anthropic", ""), &["-vv"]);
    let lines = episode.lines();
    assert!(lines[0].starts_with("call 1: ok fine"), "{lines:?}");
    assert!(
        lines[1].starts_with("call 2: provider: provider test answered HTTP 401: Incorrect API key provided: [key]"),
        "{lines:?}"
    );
    // The script saw an environment, and no key in it.
    let env_line = lines.iter().find(|l| l.starts_with("script env:")).unwrap();
    assert!(env_line.contains("PATH="), "{env_line}");
    assert!(
        !env_line.contains("MLRB_TEST_LLM_KEY") && !env_line.contains(KEY),
        "{env_line}"
    );
    // Nothing on disk, and nothing the host logged at -vv, holds it.
    let leaks = common::files_containing(&episode.out, KEY);
    assert!(leaks.is_empty(), "the key leaked into {leaks:?}");
    let stderr = String::from_utf8_lossy(&episode.finished.output.stderr);
    assert!(!stderr.contains(KEY), "the key is in the host's log");
    assert!(
        server.received()[0].header("x-api-key") == Some(KEY),
        "the provider did get it"
    );
}

#[test]
fn a_key_can_come_from_a_dotenv_file_beside_the_configuration() {
    let server = LlmServer::start(texts(5));
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    std::fs::write(tmp.path().join("mlrb.toml"), server.config("openai", "")).unwrap();
    std::fs::write(tmp.path().join(".env"), format!("MLRB_TEST_LLM_KEY={KEY}\n")).unwrap();
    let out = tmp.path().join("runs");
    let mut command = common::run_command(
        &common::agent("llm_caller"),
        task.to_str().unwrap(),
        &out,
        &["--config", tmp.path().join("mlrb.toml").to_str().unwrap(), "--json"],
    );
    command.env_remove("MLRB_TEST_LLM_KEY");
    let finished = common::finish(command);
    assert!(finished.answer().starts_with("call 1: ok"), "{}", finished.answer());
    assert_eq!(
        server.received()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(common::files_containing(&out, KEY).is_empty());
    assert!(!finished.answer().contains(KEY), "a script saw the .env key");
}

#[test]
fn a_recorded_episode_replays_offline_and_a_changed_agent_fails_at_its_first_new_request() {
    let server = LlmServer::start(texts(5));
    let recorded = run("llm_caller", &server.config("anthropic", ""), &[]);
    let task = recorded.finished.json["episode"]["task"]["root"]
        .as_str()
        .unwrap()
        .to_string();
    let replay_from = format!("replay:{}", recorded.finished.dir.display());

    // No configuration, no key, no server: the recording answers.
    let replay = |agent: &str, out: &Path| {
        let mut command = common::run_command(
            &common::agent(agent),
            &task,
            out,
            &["--llm", &replay_from, "--json", "--config", "/nonexistent/mlrb.toml"],
        );
        command.env_remove("MLRB_TEST_LLM_KEY");
        common::finish(command)
    };
    let tmp = tempfile::tempdir().unwrap();
    let again = replay("llm_caller", &tmp.path().join("same"));
    assert_eq!(again.end_reason(), "completed", "{}", again.json);
    assert_eq!(again.answer(), recorded.finished.answer());
    assert_eq!(
        std::fs::read_to_string(again.dir.join("workspace/answers.txt")).unwrap(),
        std::fs::read_to_string(recorded.finished.dir.join("workspace/answers.txt")).unwrap()
    );
    assert_eq!(again.json["score"]["score"], recorded.finished.json["score"]["score"]);
    assert_eq!(
        again.json["episode"]["end"]["llm"]["input_tokens"],
        recorded.llm_totals()["input_tokens"]
    );
    assert!(again.json["episode"]["llm"].as_str().unwrap().starts_with("replay of "));
    assert_eq!(server.received().len(), 5, "the replay called the provider");

    let changed = replay("llm_caller_changed", &tmp.path().join("changed"));
    assert_eq!(changed.end_reason(), "replay-diverged", "{}", changed.json);
    let detail = changed.json["episode"]["end"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("request 2 differs from the recording") && detail.contains("message 2 differs at character 3"),
        "{detail}"
    );
    // Its records and final snapshot are still there.
    assert!(changed.dir.join("score.json").is_file());
}

fn step(thought: &str, action: &str, input: &str) -> Reply {
    Reply::Text(format!(
        "Reflection: Nothing to reflect on yet.\nResearch Plan and Status: 1. Understand train.py. 2. Improve the model. 3. Submit.\n\
         Fact Check: none\nThought: {thought}\nAction: {action}\nAction Input: {input}"
    ))
}

#[test]
fn the_research_agent_reads_edits_runs_and_submits_a_better_model() {
    research_episode(&common::agent("research-agent-prompt"), &["openai", "anthropic"]);
}

#[test]
fn the_research_agent_does_the_same_by_tool_calls_and_malformed_calls_are_typed_errors() {
    tool_calling_episode(&common::agent("research-agent"), &["openai", "anthropic"]);
}

#[test]
fn the_python_research_agent_does_the_same_by_tool_calls() {
    tool_calling_episode(&common::built_agent("plugins/research-agent-py", None), &["anthropic"]);
}

/// The research agent on digits by tool calling, against a script: it
/// reads the starter, gets two malformed calls (arguments that are not
/// JSON, arguments of the wrong type) as typed errors and goes on, gets
/// the edit as a streamed call with its arguments split, runs the edited
/// script and submits.
fn tool_calling_episode(agent: &Path, apis: &[&str]) {
    let reference =
        std::fs::read_to_string(common::workspace_root().join("tasks/digits/scripts/reference/train.py")).unwrap();
    let edit = r#"{"script_name": "train.py", "edit_instruction": "Replace the decision tree with an RBF SVM on pixels scaled to [0, 1].", "save_name": "train.py"}"#;
    for &api in apis {
        let server = LlmServer::start(vec![
            Reply::call(
                "understand_file",
                r#"{"file_name": "train.py", "things_to_look_for": "the model and how submission.csv is written"}"#,
            ),
            Reply::Text("It trains a DecisionTreeClassifier(max_depth=8) and writes submission.csv.".into()),
            Reply::call("edit_script", r#"{"script_name": "train.py", "edit_instruction": "#),
            Reply::call(
                "edit_script",
                r#"{"script_name": 5, "edit_instruction": "x", "save_name": "train.py"}"#,
            ),
            Reply::StreamedCall {
                name: "edit_script".into(),
                pieces: vec![edit[..20].into(), edit[20..61].into(), edit[61..].into()],
            },
            Reply::Text(format!("Here is the edited script:\n```python\n{reference}```\n")),
            Reply::call("execute_script", r#"{"script_name": "train.py"}"#),
            Reply::call(
                "final_answer",
                r#"{"final_answer": "Replaced the decision tree with an RBF-kernel SVM."}"#,
            ),
        ]);
        let (_tmp, finished) = on_digits(agent, &server, api);
        submitted_the_reference(&finished, api, &reference);
        // Every answer is in the trace; the two malformed calls are typed
        // errors that keep what came back.
        let events = finished.events();
        let completions: Vec<&Value> = events.iter().filter(|e| e["function"] == "complete").collect();
        assert_eq!(completions.len(), 8, "{api}");
        let malformed: Vec<&Value> = completions
            .iter()
            .filter(|e| e["result"]["error"]["kind"] == "malformed-answer")
            .copied()
            .collect();
        assert_eq!(malformed.len(), 2, "{api}: {completions:?}");
        let first = malformed[0]["result"]["error"]["message"].as_str().unwrap();
        assert!(first.contains("edit_script") && first.contains("not JSON"), "{first}");
        let second = malformed[1]["result"]["error"]["message"].as_str().unwrap();
        assert!(second.contains("do not match the schema at /script_name"), "{second}");
        assert_eq!(malformed[1]["result"]["answer"]["tool_calls"][0]["name"], "edit_script");
        // The streamed call arrived whole.
        let streamed = &completions[4]["result"]["ok"]["tool_calls"][0];
        assert_eq!(streamed["name"], "edit_script", "{api}: {streamed}");
        assert_eq!(
            serde_json::from_str::<Value>(streamed["arguments"].as_str().unwrap()).unwrap(),
            serde_json::from_str::<Value>(edit).unwrap()
        );
        // Malformed answers are paid for too.
        let spent = finished.json["episode"]["end"]["llm"]["output_tokens"]
            .as_u64()
            .unwrap();
        let answered: u64 = completions
            .iter()
            .map(|e| {
                let answer = if e["result"]["ok"].is_object() {
                    &e["result"]["ok"]
                } else {
                    &e["result"]["answer"]
                };
                answer["output_tokens"].as_u64().unwrap_or(0)
            })
            .sum();
        assert_eq!(spent, answered, "{api}");
        // The requests offered the tools, required a call, and carried each call's result back.
        let received = server.received();
        let offered = |i: usize| -> Vec<String> {
            let tools = received[i].body["tools"].as_array().unwrap();
            let name = |t: &Value| {
                if api == "anthropic" {
                    t["name"].clone()
                } else {
                    t["function"]["name"].clone()
                }
            };
            tools.iter().map(|t| name(t).as_str().unwrap().to_string()).collect()
        };
        // At first nothing to undo and no change to submit; after the
        // edit, undo and a run; after the run, the final answer but no
        // second run of the unchanged script.
        let has = |tools: &[String], name: &str| tools.iter().any(|t| t == name);
        let first = offered(0);
        assert_eq!(first.len(), 7, "{api}: {first:?}");
        assert!(has(&first, "execute_script") && !has(&first, "undo_edit_script") && !has(&first, "final_answer"));
        let after_edit = offered(6);
        assert!(
            has(&after_edit, "undo_edit_script") && !has(&after_edit, "final_answer"),
            "{after_edit:?}"
        );
        let after_run = offered(7);
        assert!(
            has(&after_run, "final_answer") && !has(&after_run, "execute_script"),
            "{api}: {after_run:?}"
        );
        let choice = if api == "anthropic" {
            json!({"type": "any"})
        } else {
            json!("required")
        };
        assert_eq!(received[0].body["tool_choice"], choice, "{api}");
        let last = received.last().unwrap().body["messages"].to_string();
        let result_carried = if api == "anthropic" {
            last.contains("tool_result") && last.contains("tool_use_id")
        } else {
            last.contains(r#""role":"tool""#) && last.contains("tool_call_id")
        };
        assert!(result_carried, "{api}: {last}");
        assert!(last.contains("The script has been executed"), "{api}: {last}");
    }
}

/// The research agent on digits against a script: it reads the starter
/// code, has the model rewrite train.py into the task's reference model,
/// runs it (after one malformed answer, asked again) and submits.
fn research_episode(agent: &Path, apis: &[&str]) {
    let reference =
        std::fs::read_to_string(common::workspace_root().join("tasks/digits/scripts/reference/train.py")).unwrap();
    for &api in apis {
        let server = LlmServer::start(vec![
            step(
                "Read the starter code first.",
                "Understand File",
                r#"{"file_name": "train.py", "things_to_look_for": "the model and how submission.csv is written"}"#,
            ),
            Reply::Text(
                "It trains a DecisionTreeClassifier(max_depth=8) and writes submission.csv with id,label.".into(),
            ),
            step(
                "A kernel SVM should do much better on 8x8 digits.",
                "Edit Script (AI)",
                r#"{"script_name": "train.py", "edit_instruction": "Replace the decision tree with an RBF SVM on pixels scaled to [0, 1].", "save_name": "train.py"}"#,
            ),
            Reply::Text(format!("Here is the edited script:\n```python\n{reference}```\n")),
            // A malformed answer: asked again.
            Reply::Text("I think we should run it now.".into()),
            step(
                "Run the edited script.",
                "Execute Script",
                r#"{"script_name": "train.py"}"#,
            ),
            step(
                "The validation accuracy went up; submit.",
                "Final Answer",
                r#"{"final_answer": "Replaced the decision tree with an RBF-kernel SVM."}"#,
            ),
        ]);
        let (_tmp, finished) = on_digits(agent, &server, api);
        submitted_the_reference(&finished, api, &reference);
        let score = &finished.json["score"];
        assert!(
            score["score"].as_f64().unwrap() > score["baseline"].as_f64().unwrap() + 0.1,
            "{api}: {score}"
        );
        // The edit landed, with a backup; the starter is what was backed up.
        let workspace = finished.dir.join("workspace");
        let backup = std::fs::read_to_string(workspace.join("backup/train.py_0")).unwrap();
        assert!(backup.contains("DecisionTreeClassifier(max_depth=8"), "{backup}");
        // Seven model calls (one malformed answer asked again), one script run.
        let events = finished.events();
        let calls: Vec<&str> = events.iter().filter_map(|e| e["function"].as_str()).collect();
        assert_eq!(calls.iter().filter(|c| **c == "complete").count(), 7, "{calls:?}");
        assert_eq!(calls.iter().filter(|c| **c == "execute-script").count(), 1, "{calls:?}");
        // The prompt is MLAgentBench's, with the research problem; the retry says what was wrong.
        let received = server.received();
        let first_prompt = received[0].body["messages"].to_string();
        assert!(
            first_prompt.contains("Research Problem:") && first_prompt.contains("Edit Script (AI)"),
            "{first_prompt}"
        );
        let retry = received[5].body["messages"].to_string();
        assert!(retry.contains("not in the required format"), "{retry}");
        // The research log is in the trace.
        let notes: Vec<&str> = events
            .iter()
            .filter(|e| e["function"] == "note")
            .filter_map(|e| e["args"]["text"].as_str())
            .collect();
        assert!(
            notes.iter().any(|n| n.starts_with("Step 1: Understand File")),
            "{notes:?}"
        );
    }
}

/// `mlrb bench -j 2` of llm_caller over two seeds against a server that
/// takes 300 ms per answer, with the provider limited to `limit` requests
/// in flight; the most requests the server saw at once, and the longest
/// an episode's call waited for a slot.
fn concurrent_bench(limit: usize) -> (usize, f64) {
    let server = LlmServer::start(
        (0..10)
            .map(|i| Reply::Slow(Duration::from_millis(300), format!("slow {i}")))
            .collect(),
    );
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let config = tmp.path().join("mlrb.toml");
    std::fs::write(
        &config,
        server
            .config("openai", "")
            .replace("max_concurrency = 2", &format!("max_concurrency = {limit}")),
    )
    .unwrap();
    let output = common::mlrb()
        .env("MLRB_TEST_LLM_KEY", KEY)
        .args([
            "bench",
            "--quiet",
            "--run-name",
            "c",
            "-j",
            "2",
            "--seeds",
            "2",
            "--out",
        ])
        .arg(tmp.path().join("runs"))
        .arg("--agent")
        .arg(common::agent("llm_caller"))
        .args(["--task", task.to_str().unwrap(), "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut queued: f64 = 0.0;
    for events in walk(&tmp.path().join("runs/c"), "events.jsonl") {
        for line in std::fs::read_to_string(events).unwrap().lines() {
            let event: Value = serde_json::from_str(line).unwrap();
            if let Some(ms) = event["llm"]["stats"]["queued_ms"].as_f64() {
                queued = queued.max(ms);
            }
        }
    }
    assert_eq!(server.received().len(), 10, "both episodes asked all five questions");
    // The bench's results carry each episode's tokens and cost.
    let results = std::fs::read_to_string(tmp.path().join("runs/c/results.jsonl")).unwrap();
    for line in results.lines() {
        let result: Value = serde_json::from_str(line).unwrap();
        assert_eq!(result["output_tokens"], 10, "two words per answer: {result}");
        assert!(result["cost_usd"].as_f64().unwrap() > 0.0, "{result}");
    }
    (server.most_at_once(), queued)
}

/// Every file called `name` under `dir`.
fn walk(dir: &Path, name: &str) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name() == name)
        .map(|e| e.into_path())
        .collect()
}

#[test]
fn the_provider_limit_holds_across_the_episodes_of_one_host() {
    let (most, queued) = concurrent_bench(1);
    assert_eq!(most, 1, "two requests reached a provider limited to one");
    assert!(queued > 100.0, "no call ever waited for the slot: {queued} ms");
    // The control: with room for two, the two episodes do overlap.
    let (most, _) = concurrent_bench(2);
    assert_eq!(
        most, 2,
        "the episodes never overlapped, so the limit above proved nothing"
    );
}

#[test]
fn a_long_observation_is_summarised_before_the_model_sees_it() {
    let server = LlmServer::start(vec![
        step(
            "Write a noisy script.",
            "Edit Script (AI)",
            r#"{"script_name": "noisy.py", "edit_instruction": "print a lot", "save_name": "noisy.py"}"#,
        ),
        Reply::Text("```python\nprint('x' * 15000)\n```".into()),
        step("Run it.", "Execute Script", r#"{"script_name": "noisy.py"}"#),
        // Two chunks of at most 10 000 characters, one summary each.
        Reply::Text("[Observation]: the first part is all x".into()),
        Reply::Text("[Observation]: the rest is x too".into()),
        step("Done.", "Final Answer", r#"{"final_answer": "it printed x"}"#),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    std::fs::write(tmp.path().join("mlrb.toml"), server.config("openai", "")).unwrap();
    let mut command = common::run_command(
        &common::agent("research-agent-prompt"),
        task.to_str().unwrap(),
        &tmp.path().join("runs"),
        &["--config", tmp.path().join("mlrb.toml").to_str().unwrap(), "--json"],
    );
    command.env("MLRB_TEST_LLM_KEY", KEY);
    let finished = common::finish(command);
    assert_eq!(finished.answer(), "it printed x", "{}", finished.json);
    let received = server.received();
    assert_eq!(received.len(), 6);
    let summary_request = received[3].body["messages"].to_string();
    assert!(
        summary_request.contains("The full observation is too long"),
        "{summary_request}"
    );
    // The step after sees the summaries, not fifteen thousand x's.
    let last_prompt = received[5].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        last_prompt.contains("the first part is all x\n[Observation]: the rest is x too"),
        "{last_prompt}"
    );
    assert!(
        !last_prompt.contains(&"x".repeat(1000)),
        "the raw observation reached the model"
    );
}

#[test]
fn retry_waits_are_capped_and_never_pass_the_deadline() {
    // A provider asking for an hour is waited on for max_backoff_seconds.
    let server = LlmServer::start(vec![
        Reply::Status {
            code: 429,
            retry_after: Some("3600".into()),
            body: "come back in an hour".into(),
        },
        Reply::Text("after the cap".into()),
    ]);
    let episode = run(
        "llm_caller",
        &server.config("openai", "max_retries = 2\nmax_backoff_seconds = 1"),
        &[],
    );
    assert!(
        episode.lines()[0].starts_with("call 1: ok after the cap"),
        "{:?}",
        episode.lines()
    );
    let backoff = episode.llm_events()[0]["llm"]["stats"]["backoff_ms"].as_f64().unwrap();
    assert!((900.0..3000.0).contains(&backoff), "waited {backoff} ms");

    // A wait that would outlast the episode is not made: a timeout at once.
    let server = LlmServer::start(vec![Reply::Status {
        code: 429,
        retry_after: Some("30".into()),
        body: "slow down".into(),
    }]);
    let started = std::time::Instant::now();
    let episode = run("llm_caller", &server.config("openai", ""), &["--wall-seconds", "10"]);
    let lines = episode.lines();
    assert!(
        lines[0].starts_with("call 1: timeout: provider test: HTTP 429: slow down; waiting 30.0 s to retry would pass the episode's deadline"),
        "{lines:?}"
    );
    let stats = &episode.llm_events()[0]["llm"]["stats"];
    assert_eq!(stats["statuses"], serde_json::json!([429]), "{stats}");
    assert!(started.elapsed() < Duration::from_secs(30), "the host waited anyway");
}

/// An agent built against the previous contract (`wit/0.2.0`) still runs:
/// every interface answers it, its model call included, and the record says
/// which contract it was built for.
#[test]
fn an_agent_of_the_previous_contract_still_runs() {
    let server = LlmServer::start(vec![Reply::Text("hello there".into())]);
    let episode = run("legacy-agent", &server.config("openai", ""), &[]);
    let lines = episode.lines();
    assert_eq!(episode.finished.end_reason(), "completed", "{}", episode.finished.json);
    assert!(lines.contains(&"write true".to_string()), "{lines:?}");
    assert!(lines.contains(&"exec Some(0) legacy ran".to_string()), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.starts_with("list ") && l != "list 0"),
        "{lines:?}"
    );
    assert!(lines.contains(&"steps 3".to_string()), "{lines:?}");
    assert!(lines.contains(&"llm hello there (stop)".to_string()), "{lines:?}");
    // Its request went out as any other: no tools, recorded with both sides.
    let request = &server.received()[0].body;
    assert!(request.get("tools").is_none(), "{request}");
    let events = episode.llm_events();
    assert_eq!(events[0]["result"]["ok"]["text"], "hello there");
    let agent = &episode.finished.json["episode"]["agent"];
    assert_eq!(agent["wit"], "mlrb:agent@0.2.0", "{agent}");
}

/// A C agent's tool-calling loop on `mlrb_sdk.h`: MLAgentBench's tools from
/// the SDK's header, a required call, the calls' results carried back, a
/// malformed call answered as a typed error, and arguments read with JSON
/// escapes and other keys before the one wanted.
#[test]
fn a_c_agent_calls_tools_through_the_sdk() {
    let agent = common::built_agent("tests/agents/tools-c", None);
    let edit = r#"{"script_name": "train.py", "edit_instruction": "use {braces}, [brackets] and \"quotes\"", "save_name": "b\u00e4se.py"}"#;
    for api in ["openai", "anthropic"] {
        let server = LlmServer::start(vec![
            Reply::call("list_files", r#"{"dir_path": "."}"#),
            Reply::call("list_files", r#"{"dir_path": 7}"#),
            Reply::call("edit_script", edit),
            Reply::call(
                "final_answer",
                r#"{"final_answer": "caf\u00e9 \ud83d\ude00 \"done\"\n"}"#,
            ),
        ]);
        let (_tmp, finished) = on_digits(&agent, &server, api);
        assert_eq!(finished.end_reason(), "completed", "{api}: {}", finished.json);
        assert_eq!(finished.answer(), "caf\u{e9} \u{1f600} \"done\"\n", "{api}");
        let received = server.received();
        assert_eq!(received.len(), 4, "{api}");
        let first = &received[0].body;
        assert_eq!(first["tools"].as_array().unwrap().len(), 9, "{api}: {first}");
        let choice = if api == "anthropic" {
            json!({"type": "any"})
        } else {
            json!("required")
        };
        assert_eq!(first["tool_choice"], choice, "{api}");
        // The listing went back as the first call's result; the malformed
        // call was not carried into the conversation.
        let second = received[1].body["messages"].to_string();
        assert!(second.contains(r"data_description.txt\ntrain.py"), "{api}: {second}");
        let third = received[2].body["messages"].to_string();
        assert_eq!(third.matches("list_files").count(), 1, "{api}: {third}");
        let last = received[3].body["messages"].to_string();
        assert!(
            last.contains("does not carry out edit_script (save_name: b\u{e4}se.py)"),
            "{api}: {last}"
        );
        let notes = std::fs::read_to_string(finished.dir.join("events.jsonl")).unwrap();
        assert!(notes.contains("turn 1: malformed-answer"), "{api}");
    }
}

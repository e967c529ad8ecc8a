//! The research agent against the real local model (SmolLM2-135M-Instruct
//! under llama-cpp-python's server, started on demand by the host): not
//! scripted, so its answers are poor, but the episode must end cleanly with
//! a recorded reason and a score.

mod common;

/// False (and says so) when the local model is not installed; under CI the
/// test fails instead, since setup installs it.
fn local_model_installed() -> bool {
    if mlrb::llm::local::installed() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the local model is not installed; scripts/setup.sh installs it"
    );
    eprintln!("skipped: the local model is not installed (scripts/setup.sh installs it)");
    false
}

#[test]
fn the_research_agent_finishes_an_episode_against_the_local_model() {
    if !local_model_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Two steps and a token budget keep a CPU-bound model's episode short.
    let finished = common::run_episode(
        &common::agent("research-agent-prompt"),
        "digits",
        tmp.path(),
        &[
            "--llm",
            "local",
            "--max-steps",
            "2",
            "--llm-tokens",
            "12000",
            "--wall-seconds",
            "900",
        ],
    );
    let json = &finished.json;
    assert_eq!(json["episode"]["llm"], "local (smollm2-135m-instruct)", "{json}");
    let reason = finished.end_reason();
    assert!(["completed", "step-budget", "timeout"].contains(&reason), "{json}");
    assert!(finished.dir.join("score.json").is_file());
    assert!(json["score"].is_object(), "{json}");
    // The model was really asked, and really answered.
    let events = finished.events();
    let answered = events
        .iter()
        .filter(|e| e["interface"] == "llm" && e["llm"]["source"] == "local")
        .filter(|e| e["result"]["ok"]["text"].is_string())
        .count();
    assert!(answered >= 1, "no completion from the local model: {json}");
    assert!(
        json["episode"]["end"]["llm"]["output_tokens"].as_u64().unwrap() > 0,
        "{json}"
    );
}

/// Tool calling with the local model: the host turns the tools into a JSON
/// Schema that constrains llama.cpp's decoding, so even the 135M model can
/// only answer with a call of an offered tool whose arguments fit its schema.
/// The host checks every answer against the schemas (a misfit would be a
/// recorded `malformed-answer`), so each tool request must have answered ok.
#[test]
fn every_local_model_answer_to_a_tool_request_is_a_well_formed_call() {
    if !local_model_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let finished = common::run_episode(
        &common::agent("research-agent"),
        "digits",
        tmp.path(),
        &["--llm", "local", "--max-steps", "4", "--wall-seconds", "900"],
    );
    let json = &finished.json;
    assert!(json["score"].is_object(), "{json}");
    let events = finished.events();
    let asked: Vec<_> = events
        .iter()
        .filter(|e| e["interface"] == "llm" && e["args"]["tools"].is_array())
        .collect();
    assert!(
        !asked.is_empty(),
        "the agent never asked the model for a tool call: {json}"
    );
    for event in &asked {
        let calls = event["result"]["ok"]["tool_calls"]
            .as_array()
            .unwrap_or_else(|| panic!("not a well-formed call: {}", event["result"]));
        assert!(
            !calls.is_empty(),
            "a required tool call is missing: {}",
            event["result"]
        );
        let offered: Vec<&str> = event["args"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        for call in calls {
            let name = call["name"].as_str().unwrap();
            assert!(offered.contains(&name), "{name} was not offered: {offered:?}");
            let arguments: serde_json::Value = serde_json::from_str(call["arguments"].as_str().unwrap())
                .unwrap_or_else(|e| panic!("arguments of {name} are not JSON ({e}): {call}"));
            assert!(arguments.is_object(), "{call}");
        }
    }
}

/// The pids of llama_cpp.server processes (the server itself, not the
/// wrapper that runs it) descending from `ancestor`.
fn local_servers_under(ancestor: u32) -> Vec<u32> {
    common::processes_under(ancestor, 4, |args| {
        args.iter().any(|a| *a == b"llama_cpp.server") && !args.iter().any(|a| *a == b"-c")
    })
}

/// A local model server that dies (here: killed; in the wild, a request
/// that crashes llama.cpp) is started again at the next request, so one
/// episode cannot take the model away from the rest of the host's.
#[test]
fn a_local_model_server_that_dies_is_started_again() {
    if !local_model_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let mut command = common::run_command(
        &common::agent("llm_survivor"),
        "digits",
        &out,
        &["--llm", "local", "--json", "--wall-seconds", "600"],
    );
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let answered = |out: &std::path::Path| {
        walkdir::WalkDir::new(out)
            .into_iter()
            .flatten()
            .filter(|e| e.file_name() == "events.jsonl")
            .any(|e| {
                std::fs::read_to_string(e.path())
                    .unwrap_or_default()
                    .contains("\"interface\":\"llm\"")
            })
    };
    while !answered(&out) {
        assert!(
            started.elapsed().as_secs() < 300,
            "no answer from the local model in 300 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let first = local_servers_under(child.id());
    assert_eq!(first.len(), 1, "{first:?}");
    unsafe { libc::kill(first[0] as i32, libc::SIGKILL) };
    let finished = common::finished(child.wait_with_output().unwrap());
    let answer = finished.answer();
    let lines: Vec<&str> = answer.lines().collect();
    assert_eq!(lines.len(), 60, "{answer}");
    // Some call failed when the server died, and a later one was answered.
    let failed = lines
        .iter()
        .position(|l| *l != "ok")
        .expect("no call failed: the kill came too late");
    assert!(
        lines[failed..].contains(&"ok"),
        "no call was answered after the server died: {lines:?}"
    );
}

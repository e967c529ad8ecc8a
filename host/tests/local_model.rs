//! The research agent against the real local model (SmolLM2-135M-Instruct
//! under llama-cpp-python's server, started on demand by the host): not
//! scripted, so its answers are poor, but the episode must end cleanly with
//! a recorded reason and a score.

mod common;

#[test]
fn the_research_agent_finishes_an_episode_against_the_local_model() {
    if !mlrb::llm::local::installed() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the local model is not installed; scripts/setup.sh installs it"
        );
        eprintln!("skipped: the local model is not installed (scripts/setup.sh installs it)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Two steps and a token budget keep a CPU-bound model's episode short.
    let finished = common::run_episode(
        &common::agent("research-agent"),
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

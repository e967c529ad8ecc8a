//! The host's overhead per LLM call, apart from the provider's time:
//! 200 calls of a probe agent against a loopback server that answers at
//! once, in both wire formats. For each call, the host's time is the
//! call's duration in the trace minus the time its HTTP request was in
//! flight (which covers loopback and the server). Also the whole round
//! trip as the trace records it.
//!
//! Run with `scripts/bench.sh` (it builds the probe agents).

mod common;

#[path = "../tests/common/llm_server.rs"]
#[allow(dead_code)]
mod llm_server;

use std::sync::Arc;

use mlrb::episode::{EpisodeRequest, Runner};
use mlrb::llm::LlmSource;
use mlrb::sandbox::local::LocalSandbox;
use mlrb::task::overrides::Configured;

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[((values.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let probe = common::probes().join("llm_latency.wasm");
    assert!(probe.is_file(), "build the probes first: scripts/bench.sh does");
    let task = common::fixture_task();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for api in ["openai", "anthropic"] {
        let server = llm_server::LlmServer::start(Vec::new());
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("mlrb.toml");
        std::fs::write(&config, server.config(api, "")).unwrap();
        // SAFETY: set before any thread of this process reads the environment.
        unsafe { std::env::set_var("MLRB_TEST_LLM_KEY", "bench-key") };
        let source = LlmSource::open(None, Some(&config)).unwrap();
        let host = Runner::new(&tmp.path().join("cache"), Arc::new(LocalSandbox::detect().unwrap()))
            .unwrap()
            .with_llm(source);
        let dir = tmp.path().join("episode");
        runtime.block_on(async {
            let agent = host.load_agent(&probe).await.unwrap();
            let spec = EpisodeRequest::new(agent.clone(), Configured::unchanged(task.clone()), 0, dir.clone());
            let (record, _) = host.run_episode(&spec, std::future::pending()).await.unwrap();
            let end = record.end.unwrap();
            assert_eq!(end.answer.as_deref(), Some("200 calls"), "{}", end.detail);
        });
        let (mut overhead, mut total) = (Vec::new(), Vec::new());
        for line in std::fs::read_to_string(dir.join("events.jsonl")).unwrap().lines() {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            if event["interface"] != "llm" {
                continue;
            }
            let duration_us = event["duration_us"].as_f64().unwrap();
            let provider_us = event["llm"]["stats"]["provider_ms"].as_f64().unwrap() * 1000.0;
            overhead.push(duration_us - provider_us);
            total.push(duration_us);
        }
        println!(
            "{api}: {} calls; host overhead per call (excluding the provider's time): median {:.0} µs, p90 {:.0} µs (target ≤ 200 µs); whole call on loopback: median {:.0} µs",
            overhead.len(),
            percentile(&mut overhead, 0.5),
            percentile(&mut overhead, 0.9),
            percentile(&mut total, 0.5)
        );
    }
}

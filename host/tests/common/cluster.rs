//! Helpers for the cluster tests: a slow copy of the hostile fixture task,
//! a served bench started as a process, and its URL and token read back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The hostile fixture task whose train.py takes `seconds`: episodes long
/// enough to be stopped in the middle.
pub fn slow_task(dir: &Path, seconds: u32) -> PathBuf {
    let train = format!(
        "import time\ntime.sleep({seconds})\nwith open(\"submission.csv\", \"w\") as f:\n    f.write(\"id,label\\n1,0\\n\")\n"
    );
    super::hostile_task(dir, &[("train.py", &train)])
}

/// A plan file for `agents` on `task` over `seeds`, with `extra` TOML after.
pub fn plan(dir: &Path, agents: &[PathBuf], task: &Path, seeds: u32, extra: &str) -> PathBuf {
    let agents: Vec<String> = agents
        .iter()
        .map(|a| format!("{:?}", a.display().to_string()))
        .collect();
    let text = format!(
        "agents = [{}]\ntasks = [{:?}]\nseeds = {seeds}\nretries = 0\n{extra}\n",
        agents.join(", "),
        task.display().to_string()
    );
    let path = dir.join("plan.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Waits for a served run's `cluster/server.json`; returns its URL and token.
pub fn served(run: &Path, bench: &mut Child) -> (String, String) {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(run.join("cluster/server.json"))
            && let Ok(served) = serde_json::from_str::<Value>(&text)
        {
            let token = std::fs::read_to_string(run.join("cluster/token")).unwrap();
            return (served["url"].as_str().unwrap().to_string(), token.trim().to_string());
        }
        if let Some(status) = bench.try_wait().unwrap() {
            panic!("the bench ended before serving: {status}");
        }
        assert!(started.elapsed() < Duration::from_secs(120), "never served");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An `mlrb worker` for the run at `url`, its token from the run's file.
pub fn worker(url: &str, run: &Path, name: &str) -> Command {
    let mut command = super::mlrb();
    command
        .args(["worker", "--server", url, "--token-file"])
        .arg(run.join("cluster/token"))
        .args(["--parallel", "1", "--name", name, "--json", "--grace", "30"]);
    command
}

/// A raw HTTP/1.1 request; returns the status and body.
pub fn request(url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    use std::io::Write;
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // The server may refuse before reading it all.
    let _ = stream.write_all(body);
    answer(stream)
}

/// Reads a raw HTTP/1.1 answer to its end; returns the status and body.
pub fn answer(mut stream: std::net::TcpStream) -> (u16, String) {
    use std::io::Read;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let code = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, answer.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
}

/// The run's queue counts (`GET /v1/status`).
pub fn status(url: &str, token: &str) -> Value {
    let (code, body) = request(
        url,
        "GET",
        "/v1/status",
        &[("Authorization", &format!("Bearer {token}"))],
        b"",
    );
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap_or_else(|_| panic!("not a status: {body}"))
}

/// Waits until `check` holds of the run's status.
pub fn wait_for(url: &str, token: &str, what: &str, check: impl Fn(&Value) -> bool) {
    let started = Instant::now();
    loop {
        let status = status(url, token);
        if check(&status) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(180), "never {what}: {status}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The results of a run, as (id, score, valid, end reason).
pub fn outcomes(run: &Path) -> Vec<(Value, Value, Value, Value)> {
    std::fs::read_to_string(run.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|r| {
            (
                r["id"].clone(),
                r["score"].clone(),
                r["valid"].clone(),
                r["end_reason"].clone(),
            )
        })
        .collect()
}

/// How many `done` lines the run's journal has for each episode.
pub fn done_lines(run: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut done = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(run.join("journal.jsonl")).unwrap().lines() {
        if let Ok(entry) = serde_json::from_str::<Value>(line)
            && entry["event"] == "done"
        {
            *done.entry(entry["id"].as_str().unwrap().to_string()).or_insert(0) += 1;
        }
    }
    done
}

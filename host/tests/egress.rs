//! Network as a capability, for scripts: a task grants an allow-list, the
//! episode's scripts reach the network only through its egress proxy (in
//! both sandboxes), every way around it fails, and every connection is in
//! the trace and the report. The proxy's own rules (caps, stalls, methods)
//! are tested beside it (`sandbox/egress/proxy/tests.rs`).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

/// A loopback server answering every request with `body` (or a redirect),
/// counting the connections it got.
struct Server {
    port: u16,
    hits: Arc<AtomicU32>,
}

fn server(body: &'static str, redirect: Option<String>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicU32::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::Relaxed);
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let status = match &redirect {
                Some(to) => format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\n"),
                None => "HTTP/1.1 200 OK\r\n".into(),
            };
            let _ = write!(
                stream,
                "{status}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Server { port, hits }
}

struct World {
    allowed: Server,
    denied: Server,
    redirect: Server,
    /// Stands for the host's own loopback services (the LLM proxy, the viewer).
    service: Server,
}

fn world() -> World {
    let denied = server("secret from denied", None);
    let redirect = server("", Some(format!("http://denied.test:{}/", denied.port)));
    World {
        allowed: server("hello from allowed", None),
        denied,
        redirect,
        service: server("host service", None),
    }
}

/// A copy of the hostile fixture whose starter is the egress probe, with
/// `network` granted as given.
fn probe_task(dir: &Path, world: &World, network: &str) -> PathBuf {
    let ports = serde_json::json!({
        "allowed": world.allowed.port,
        "denied": world.denied.port,
        "redirect": world.redirect.port,
        "service": world.service.port,
    });
    let probe = std::fs::read_to_string(common::workspace_root().join("tests/fixtures/egress/probe.py")).unwrap();
    let task = common::hostile_task(dir, &[("egress.json", &ports.to_string()), ("train.py", &probe)]);
    common::edit_task_toml(&task, "pids = 64", &format!("pids = 64\nnetwork = {network}"));
    task
}

fn grant(world: &World) -> String {
    format!(
        "{{ allow = [\"allowed.test:{}\", \"allowed.test:{}\"] }}",
        world.allowed.port, world.redirect.port
    )
}

/// Runs the baseline (which runs the starter) on `task`; the probe's lines.
fn run_probe(task: &Path, out: &Path, extra: &[&str]) -> (common::Finished, String) {
    let mut command = common::run_command(&common::agent("baseline"), task.to_str().unwrap(), out, extra);
    command
        .arg("--json")
        .env("MLRB_EGRESS_HOSTS", "allowed.test=127.0.0.1,denied.test=127.0.0.1");
    let finished = common::finish(command);
    let stdout = finished.script_results()[0]["stdout"]
        .as_str()
        .unwrap_or("")
        .to_string();
    (finished, stdout)
}

fn line<'a>(lines: &'a str, name: &str) -> &'a str {
    lines
        .lines()
        .find(|l| l.starts_with(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{lines}"))
}

fn scripts_reach_only_the_grant(sandbox: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let world = world();
    let task = probe_task(tmp.path(), &world, &grant(&world));
    let (finished, lines) = run_probe(&task, &tmp.path().join("runs"), &["--sandbox", sandbox]);
    assert!(!lines.contains("ESCAPED"), "{sandbox}: a way out:\n{lines}");
    assert!(line(&lines, "allowed").contains("ok 200 hello from allowed"), "{lines}");
    for (name, why) in [
        ("denied-host", "denied.test"),
        ("denied-port", &format!("allowed.test:{}", world.denied.port)),
        ("raw-ip", "127.0.0.1"),
        ("loopback-service", "localhost"),
        ("docker-api", "172.17.0.1:2375"),
        ("random-name", "r4nd0m-x9q2.example"),
        ("redirect", "denied.test"),
    ] {
        let said = line(&lines, name);
        assert!(
            said.contains("refused 403") && said.contains(why) && said.contains("not in the task's network grant"),
            "{sandbox}: {said}"
        );
    }
    for name in ["direct-allowed", "direct-service", "docker-socket", "dns"] {
        assert!(line(&lines, name).contains("blocked"), "{sandbox}: {lines}");
    }
    let smuggled = line(&lines, "smuggled");
    assert!(
        smuggled.contains("200") && smuggled.contains("hello from allowed"),
        "{sandbox}: {smuggled}"
    );
    assert_eq!(
        world.denied.hits.load(Ordering::Relaxed),
        0,
        "{sandbox}: the denied server was reached"
    );
    assert_eq!(
        world.service.hits.load(Ordering::Relaxed),
        0,
        "{sandbox}: a host service was reached"
    );
    // The redirect itself was fetched; following it was refused.
    assert_eq!(world.redirect.hits.load(Ordering::Relaxed), 1);
    assert_eq!(finished.json["score"]["valid"], true, "{}", finished.json);

    // Every connection is in the trace: where, allowed or not, why, bytes.
    let connections: Vec<Value> = finished
        .events()
        .into_iter()
        .filter(|e| e["interface"] == "host" && e["function"] == "egress")
        .flat_map(|e| e["args"]["connections"].as_array().cloned().unwrap_or_default())
        .collect();
    let allowed: Vec<&Value> = connections.iter().filter(|c| c["allowed"] == true).collect();
    let refused: Vec<&Value> = connections.iter().filter(|c| c["allowed"] == false).collect();
    assert_eq!(refused.len(), 7, "{connections:#?}");
    assert!(
        refused
            .iter()
            .all(|c| c["reason"].as_str().is_some_and(|r| !r.is_empty()))
    );
    let tunnel = allowed
        .iter()
        .find(|c| c["method"] == "CONNECT")
        .unwrap_or_else(|| panic!("no tunnel recorded: {connections:#?}"));
    assert!(tunnel["bytes_out"].as_u64().unwrap() > 0 && tunnel["bytes_in"].as_u64().unwrap() > 0);
    assert!(
        allowed
            .iter()
            .any(|c| c["method"] == "GET" && c["destination"] == format!("allowed.test:{}", world.allowed.port))
    );
    assert_eq!(
        finished.json["episode"]["limits"]["network"]["allow"][0],
        format!("allowed.test:{}", world.allowed.port)
    );
}

#[test]
fn a_script_in_bubblewrap_reaches_only_what_the_task_grants() {
    scripts_reach_only_the_grant("local");
}

#[test]
fn a_script_in_docker_reaches_only_what_the_task_grants() {
    if !common::docker_ready() {
        return;
    }
    scripts_reach_only_the_grant("docker");
}

#[test]
fn without_a_grant_scripts_have_no_way_out_and_a_run_can_only_narrow_it() {
    let tmp = tempfile::tempdir().unwrap();
    let world = world();
    let task = probe_task(tmp.path(), &world, "false");
    let (finished, lines) = run_probe(&task, &tmp.path().join("runs"), &[]);
    assert!(!lines.contains("ESCAPED"), "{lines}");
    assert!(line(&lines, "allowed").contains("error"), "no proxy to reach: {lines}");
    assert_eq!(world.allowed.hits.load(Ordering::Relaxed), 0);
    assert!(finished.events().iter().all(|e| e["function"] != "egress"));

    // A run may narrow the grant (here to nothing but the allowed port) ...
    let task = probe_task(&tmp.path().join("narrow"), &world, &grant(&world));
    let only = format!("allowed.test:{}", world.allowed.port);
    let (_, lines) = run_probe(&task, &tmp.path().join("runs-narrow"), &["--network-allow", &only]);
    assert!(line(&lines, "allowed").contains("ok 200"), "{lines}");
    assert!(line(&lines, "redirect").contains("refused 403"), "{lines}");
    // ... and never widen it, which is refused before anything runs.
    let output = common::run_command(
        &common::agent("baseline"),
        task.to_str().unwrap(),
        &tmp.path().join("runs-wide"),
        &["--network-allow", "evil.example:443"],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`evil.example:443` is not granted by the task") && stderr.contains("--network-allow"),
        "{stderr}"
    );
    assert!(!tmp.path().join("runs-wide").exists(), "a refused run left a folder");
    // A malformed name map is refused before anything runs, with its fix.
    let output = common::run_command(
        &common::agent("baseline"),
        task.to_str().unwrap(),
        &tmp.path().join("runs-badmap"),
        &[],
    )
    .env("MLRB_EGRESS_HOSTS", "mirror.internal=10.0.0.5,mirror.internal")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("MLRB_EGRESS_HOSTS: `mirror.internal` is not name=address") && stderr.lines().count() == 1,
        "{stderr}"
    );
    assert!(!tmp.path().join("runs-badmap").exists(), "a refused run left a folder");
}

#[test]
fn tasks_show_prints_the_grant_and_a_bad_grant_names_its_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let world = world();
    let task = probe_task(tmp.path(), &world, &grant(&world).replace(" }", ", egress_mb = 5 }"));
    let output = common::mlrb().args(["tasks", "show"]).arg(&task).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("network: allowed.test:{}", world.allowed.port)) && stdout.contains("5 MiB out"),
        "{stdout}"
    );
    let bad = probe_task(&tmp.path().join("bad"), &world, "{ allow = [\"allowed.test\"] }");
    let output = common::mlrb().args(["tasks", "show"]).arg(&bad).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("task.toml") && stderr.contains("host:port"), "{stderr}");
}

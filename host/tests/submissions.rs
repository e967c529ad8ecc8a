//! The submission service end to end, through the real `mlrb` binary and
//! real HTTP on loopback: two submitters, a baseline run by the service's
//! own runner, a component the host refuses, a submitter trying to read
//! another's records, quotas that count a refused submission, results
//! hidden until the version closes, signed records that `mlrb verify`
//! accepts; and hostile uploads that each get a clear 4xx and leave the
//! service and its database intact, SIGKILL mid-upload included.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{answer, request};
use serde_json::Value;

/// A closing time far ahead: the version stays open.
const OPEN_UNTIL: &str = "2099-01-01T00:00:00Z";
/// A quota no test of uploads runs into.
const UNLIMITED: &str = "per_day = 100\nin_flight = 100\ncooldown_seconds = 0";

/// A service folder with one benchmark (digits, one seed, a short episode).
fn service_folder(dir: &Path, closes: &str, quota: &str) -> PathBuf {
    let service = dir.join("service");
    let made = common::mlrb()
        .args(["submissions", "init"])
        .arg(&service)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    publish(&service, closes, quota);
    service
}

fn publish(service: &Path, closes: &str, quota: &str) {
    let toml = format!(
        "name = \"cpu-mini\"\nversion = \"1\"\ncloses = \"{closes}\"\nmax_agent_mb = 16\n[plan]\ntasks = [\"digits\"]\nseeds = 1\nretries = 0\n[quota]\n{quota}\n"
    );
    std::fs::write(service.join("benchmarks/cpu-mini.toml"), toml).unwrap();
}

fn add_submitter(service: &Path, name: &str) -> String {
    let out = common::mlrb()
        .args(["submissions", "add-submitter"])
        .arg(service)
        .arg(name)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `mlrb serve --submissions` as a process, and its URL.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(service: &Path, extra: &[&str]) -> Self {
        let mut child = common::mlrb()
            .args(["serve", "--submissions"])
            .arg(service)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        let url = loop {
            let text = String::from_utf8_lossy(&seen).into_owned();
            if let Some(line) = text.lines().find(|l| l.starts_with("serving submissions"))
                && text.ends_with('\n')
            {
                break line.rsplit(' ').next().unwrap().trim_end_matches('/').to_string();
            }
            match stderr.read(&mut byte) {
                Ok(1) => seen.push(byte[0]),
                _ => panic!("the service ended before serving: {text}"),
            }
        };
        // Drain the rest so the service never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Self { child, url }
    }

    fn stop(mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let started = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(started.elapsed() < Duration::from_secs(60), "the service did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn get(url: &str, path: &str, token: &str) -> (u16, Value) {
    let (code, body) = request(url, "GET", path, &[("Authorization", &bearer(token))], b"");
    (code, serde_json::from_str(&body).unwrap_or(Value::String(body)))
}

fn upload(url: &str, token: &str, agent: &Path, name: &str) -> (u16, Value) {
    let bytes = std::fs::read(agent).unwrap();
    let path = format!("/v1/submissions?benchmark=cpu-mini/1&agent={name}");
    let headers = [
        ("Authorization", bearer(token)),
        ("Content-Type", "application/wasm".into()),
    ];
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, body) = request(url, "POST", &path, &headers, &bytes);
    (code, serde_json::from_str(&body).unwrap_or(Value::String(body)))
}

/// Waits until submission `id` is in a state none of `passing` names.
fn settled(url: &str, token: &str, id: i64) -> Value {
    let started = Instant::now();
    loop {
        let (code, status) = get(url, &format!("/v1/submissions/{id}"), token);
        assert_eq!(code, 200, "{status}");
        let state = status["submission"]["state"].as_str().unwrap().to_string();
        if !["queued", "running", "scoring"].contains(&state.as_str()) {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "submission {id} never settled: {status}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn tar_names(bytes: &[u8]) -> Vec<String> {
    let mut archive = tar::Archive::new(bytes);
    archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect()
}

#[test]
fn strangers_submit_and_see_only_their_own_public_results_until_the_close() {
    let dir = tempfile::tempdir().unwrap();
    let service = service_folder(dir.path(), OPEN_UNTIL, "per_day = 2\ncooldown_seconds = 0");
    let alice = add_submitter(&service, "alice");
    let bob = add_submitter(&service, "bob");
    let carol = add_submitter(&service, "carol");
    let served = Served::start(&service, &[]);
    let url = served.url.clone();

    // Alice's baseline is queued and run by the service's runner.
    let (code, made) = upload(&url, &alice, &common::agent("baseline"), "baseline");
    assert_eq!(code, 201, "{made}");
    let alices = made["id"].as_i64().unwrap();
    // Bob's component asks for sockets and preopens: refused with the reason, and counted.
    let (code, refused) = upload(&url, &bob, &common::agent("agent_ambient"), "ambient");
    assert_eq!(code, 422, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("wasi:sockets"), "{refused}");
    let bobs_refused = refused["submission"]["id"].as_i64().unwrap();
    let (code, bobs) = upload(&url, &bob, &common::agent("baseline"), "copycat");
    assert_eq!(code, 201, "{bobs}");
    let (code, over) = upload(&url, &bob, &common::agent("baseline"), "third");
    assert_eq!(code, 429, "the refused submission counts against the quota: {over}");
    assert!(over["error"].as_str().unwrap().contains("quota"), "{over}");

    // Carol's agent climbs out of the workspace: run, flagged, held.
    let (code, made) = upload(&url, &carol, &common::agent("path_traversal"), "climber");
    assert_eq!(code, 201, "{made}");
    let carols = made["id"].as_i64().unwrap();

    // Each token sees its own, never the other's, whatever the id.
    for path in [
        format!("/v1/submissions/{alices}"),
        format!("/v1/submissions/{alices}/records"),
    ] {
        let (code, body) = get(&url, &path, &bob);
        assert_eq!(code, 404, "bob read alice's {path}: {body}");
    }
    let (_, bobs_list) = get(&url, "/v1/submissions", &bob);
    let ids: Vec<i64> = bobs_list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_i64().unwrap())
        .collect();
    assert!(ids.contains(&bobs_refused) && !ids.contains(&alices), "{bobs_list}");

    // While open: the public part only, in the status, the records and the board.
    let status = settled(&url, &alice, alices);
    assert_eq!(status["submission"]["state"], "ranked", "{status}");
    assert_eq!(status["part"], "public");
    assert_eq!(status["verdict"]["verify"], "verified", "{status}");
    for result in status["results"].as_array().unwrap() {
        for private in ["score", "improvement", "normalized", "success", "best_score"] {
            assert!(
                result.get(private).is_none(),
                "{private} shown before the close: {result}"
            );
        }
    }
    let token_file = dir.path().join("alice.token");
    std::fs::write(&token_file, &alice).unwrap();
    let open_names = tar_names(&download(&url, &token_file, alices, &dir.path().join("open.tar")));
    assert!(open_names.iter().any(|n| n.ends_with("events.jsonl")), "{open_names:?}");
    for hidden in [
        "score.json",
        "eval.stdout",
        "results.jsonl",
        "summary.json",
        "SIGNATURE.json",
    ] {
        assert!(
            !open_names.iter().any(|n| n.ends_with(hidden)),
            "{hidden} before the close: {open_names:?}"
        );
    }
    let (code, _) = request(&url, "GET", &format!("/records/{alices}"), &[], b"");
    assert_eq!(code, 404, "records public before the close");
    let (code, _) = request(&url, "GET", &format!("/view/{alices}/"), &[], b"");
    assert_eq!(code, 404, "the trace viewer public before the close");
    let held = settled(&url, &carol, carols);
    assert_eq!(held["submission"]["state"], "held", "{held}");
    assert!(held["verdict"]["review_flags"].as_u64().unwrap() > 0, "{held}");
    assert!(
        held["submission"]["reason"].as_str().unwrap().contains("review"),
        "{held}"
    );
    let (code, board) = get_json(&url, "/leaderboard/cpu-mini/1");
    assert_eq!(code, 200, "{board}");
    assert_eq!(board["part"], "public", "{board}");
    let row = |id: i64| {
        board["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    // The baseline never calls validate(): no public score, so no provisional rank.
    assert!(
        row(alices)["rank"].is_null() && row(alices)["score"].is_null(),
        "{board}"
    );
    assert_eq!(row(alices)["agent"], "baseline", "{board}");
    assert_eq!(row(alices)["verify"]["status"], "verified", "{board}");
    assert!(
        row(carols)["rank"].is_null() && row(carols)["review_flags"].as_u64() > Some(0),
        "{board}"
    );
    organise(&service, &url, &carol, carols);
    let text = board.to_string();
    let private_score = read_private_score(&service, alices);
    assert!(
        !text.contains(&private_score.to_string()),
        "the board shows the private score: {text}"
    );
    served.stop();

    // Closed: the private part for all, signed records that verify.
    publish(&service, "2000-01-01T00:00:00Z", "per_day = 2\ncooldown_seconds = 0");
    let served = Served::start(&service, &[]);
    let url = served.url.clone();
    let status = settled(&url, &alice, alices);
    assert_eq!(status["part"], "private");
    // A closed version takes no upload, and nobody withdraws another's.
    let (code, late) = upload(&url, &bob, &common::agent("baseline"), "late");
    assert_eq!(code, 409, "{late}");
    assert!(late["error"].as_str().unwrap().contains("closed"), "{late}");
    let (code, _) = request(
        &url,
        "POST",
        &format!("/v1/submissions/{alices}/withdraw"),
        &[("Authorization", &bearer(&bob))],
        b"",
    );
    assert_eq!(code, 404);
    assert!(status["results"][0]["score"].as_f64().is_some(), "{status}");
    let (code, board) = get_json(&url, "/leaderboard/cpu-mini/1");
    assert_eq!(code, 200);
    assert_eq!(board["part"], "private", "{board}");
    let alices_row = board["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == alices)
        .unwrap();
    assert_eq!(alices_row["rank"], 1, "{board}");
    let mean = alices_row["score"]["mean"].as_f64().unwrap();
    assert!((mean - read_private_score(&service, alices)).abs() < 1e-9, "{board}");
    let (code, page) = request(&url, "GET", "/leaderboard/cpu-mini/1", &[("Accept", "text/html")], b"");
    assert_eq!(code, 200);
    assert!(
        page.contains("<table") && page.contains(&format!("href=\"/records/{alices}\"")),
        "{page}"
    );
    let out = dir.path().join("alice.tar");
    download(&url, &token_file, alices, &out);
    let (code, _) = request(&url, "GET", &format!("/records/{alices}"), &[], b"");
    assert_eq!(code, 200, "a ranked submission's records are public after the close");
    let (code, viewer) = request(&url, "GET", &format!("/view/{alices}/"), &[], b"");
    assert_eq!(code, 200, "{viewer}");
    assert!(viewer.contains(&format!("href=\"/view/{alices}/e/")), "{viewer}");
    let names = tar_names(&std::fs::read(&out).unwrap());
    assert!(names.iter().any(|n| n.ends_with("score.json")), "{names:?}");
    let unpacked = dir.path().join("unpacked");
    tar::Archive::new(std::fs::File::open(&out).unwrap())
        .unpack(&unpacked)
        .unwrap();
    common::service::assert_verifies(&unpacked.join(format!("submission-{alices}")), &service);
    served.stop();
}

/// An organiser releases the held submission, then invalidates it, and
/// cannot make a withdrawn one ranked; each change is in the audit log.
fn organise(service: &Path, url: &str, token: &str, id: i64) {
    let act = |verb: &str| {
        common::mlrb()
            .args(["submissions", verb])
            .arg(service)
            .arg(id.to_string())
            .args(["--why", "reviewed"])
            .output()
            .unwrap()
    };
    assert!(act("release").status.success());
    assert_eq!(
        get(url, &format!("/v1/submissions/{id}"), token).1["submission"]["state"],
        "ranked"
    );
    assert!(act("invalidate").status.success());
    let (_, board) = get_json(url, "/leaderboard/cpu-mini/1");
    assert!(
        board["rows"].as_array().unwrap().iter().all(|r| r["id"] != id),
        "{board}"
    );
    let refused = act("release");
    assert!(!refused.status.success(), "an invalidated submission was ranked");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot become ranked"));
    let audit = common::mlrb()
        .args(["submissions", "audit"])
        .arg(service)
        .arg("--json")
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&audit.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_organiser = lines
        .iter()
        .filter(|l| l["subject"] == format!("submission:{id}") && l["actor"] == "admin:local")
        .count();
    assert_eq!(by_organiser, 2, "{lines:?}");
}

/// `mlrb submissions download` of submission `id` to `out`; its bytes.
fn download(url: &str, token_file: &Path, id: i64, out: &Path) -> Vec<u8> {
    let downloaded = common::mlrb()
        .args(["submissions", "download", "--server", url, "--token-file"])
        .arg(token_file)
        .arg(id.to_string())
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        downloaded.status.success(),
        "{}",
        String::from_utf8_lossy(&downloaded.stderr)
    );
    std::fs::read(out).unwrap()
}

fn get_json(url: &str, path: &str) -> (u16, Value) {
    let (code, body) = request(url, "GET", path, &[("Accept", "application/json")], b"");
    (code, serde_json::from_str(&body).unwrap_or(Value::String(body)))
}

fn read_private_score(service: &Path, id: i64) -> f64 {
    let results = std::fs::read_to_string(service.join(format!("runs/{id}/results.jsonl"))).unwrap();
    let line: Value = serde_json::from_str(results.lines().next().unwrap()).unwrap();
    line["score"].as_f64().unwrap()
}

/// The database is whole and the service still answers.
fn intact(service: &Path, url: &str, token: &str) {
    let db = rusqlite::Connection::open(service.join("service.sqlite")).unwrap();
    let check: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let (code, list) = get(url, "/v1/submissions", token);
    assert_eq!(code, 200, "{list}");
}

#[test]
fn malformed_uploads_get_a_clear_4xx_and_leave_the_service_intact() {
    let dir = tempfile::tempdir().unwrap();
    let service = service_folder(dir.path(), OPEN_UNTIL, UNLIMITED);
    let alice = add_submitter(&service, "alice");
    let served = Served::start(&service, &["--rate", "1000", "--burst", "1000"]);
    let url = served.url.clone();
    let auth = bearer(&alice);
    let wasm = [("Authorization", auth.as_str()), ("Content-Type", "application/wasm")];
    let path = "/v1/submissions?benchmark=cpu-mini/1&agent=x";

    // A truncated component: read, checked, refused with why.
    let baseline = std::fs::read(common::agent("baseline")).unwrap();
    let (code, body) = request(&url, "POST", path, &wasm, &baseline[..baseline.len() / 2]);
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("not a WebAssembly component"), "{body}");
    // A 10 GB declared length: refused before a byte is read.
    let (code, body) = declared_length(&url, path, &auth, 10 << 30);
    assert_eq!(code, 413, "{body}");
    // Over the cap while streaming, with no length declared up front.
    let (code, body) = chunked(&url, path, &auth, 17 << 20);
    assert_eq!(code, 413, "{body}");
    // A wrong content type, no token, a made-up token, a revoked one.
    let (code, body) = request(
        &url,
        "POST",
        path,
        &[("Authorization", &auth), ("Content-Type", "text/plain")],
        b"x",
    );
    assert_eq!(code, 415, "{body}");
    let (code, _) = request(&url, "POST", path, &[("Content-Type", "application/wasm")], &baseline);
    assert_eq!(code, 401);
    // The last character changed, whatever it was: a real id with a wrong secret.
    let forged = other_last_char(&alice);
    let (code, body) = get(&url, "/v1/submissions", &forged);
    assert_eq!(code, 401, "{body}");
    let carol = add_submitter(&service, "carol");
    let id = carol.trim_start_matches("mlrbs_").split('_').next().unwrap();
    let revoked = common::mlrb()
        .args(["submissions", "revoke"])
        .arg(&service)
        .arg(id)
        .output()
        .unwrap();
    assert!(revoked.status.success());
    let (code, body) = get(&url, "/v1/submissions", &carol);
    assert_eq!(code, 401, "{body}");
    assert!(body.to_string().contains("revoked"), "{body}");
    // An unknown benchmark, an id that is not a number.
    let (code, _) = request(&url, "POST", "/v1/submissions?benchmark=nope/1", &wasm, &baseline);
    assert_eq!(code, 404);
    let (code, _) = get(&url, "/v1/submissions/../../etc", &alice);
    assert_eq!(code, 404);
    intact(&service, &url, &alice);
    served.stop();

    // A thousand uploads in a second from one address: most refused at
    // once with 429, before any token is checked.
    let served = Served::start(&service, &[]);
    let url = served.url.clone();
    let started = Instant::now();
    let codes: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    (0..125)
                        .map(|_| declared_length(&url, path, &auth, 100).0)
                        .collect::<Vec<u16>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let limited = codes.iter().filter(|&&c| c == 429).count();
    assert!(codes.iter().all(|&c| (400..500).contains(&c)), "{codes:?}");
    // The default rate: a burst of 30, then 5 a second for as long as the
    // flood took (a busy machine may take more than a second to send it).
    let admitted = 30 + (5.0 * started.elapsed().as_secs_f64()).ceil() as usize;
    assert!(
        limited >= 1000 - admitted,
        "{limited} of 1000 were rate-limited (in {:?})",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_secs(8));
    intact(&service, &url, &alice);
    served.stop();
}

/// A POST that declares `length` bytes and sends a few.
fn declared_length(url: &str, path: &str, auth: &str, length: u64) -> (u16, String) {
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: {auth}\r\nContent-Type: application/wasm\r\nContent-Length: {length}\r\n\r\n\0asm"
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Write);
    answer(stream)
}

/// A chunked POST of `total` zero bytes, stopping when the service answers.
fn chunked(url: &str, path: &str, auth: &str, total: usize) -> (u16, String) {
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: {auth}\r\nContent-Type: application/wasm\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..total / chunk.len() {
        let frame = [
            format!("{:x}\r\n", chunk.len()).into_bytes(),
            chunk.clone(),
            b"\r\n".to_vec(),
        ]
        .concat();
        if stream.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    answer(stream)
}

#[test]
fn the_database_survives_a_service_killed_mid_upload() {
    let dir = tempfile::tempdir().unwrap();
    let service = service_folder(dir.path(), OPEN_UNTIL, UNLIMITED);
    let alice = add_submitter(&service, "alice");
    let mut served = Served::start(&service, &[]);
    let url = served.url.clone();
    // Half an upload in flight, then SIGKILL.
    let address = url.trim_start_matches("http://").to_string();
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    let head = format!(
        "POST /v1/submissions?benchmark=cpu-mini/1&agent=x HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {alice}\r\nContent-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
        8 << 20
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&vec![0u8; 4 << 20]).unwrap();
    let started = Instant::now();
    while std::fs::read_dir(service.join("staging")).unwrap().count() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the upload was not streaming to staging"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    drop(stream);
    let served = Served::start(&service, &[]);
    intact(&service, &served.url, &alice);
    assert_eq!(
        std::fs::read_dir(service.join("staging")).unwrap().count(),
        0,
        "a cut-off upload was left"
    );
    let (_, list) = get(&served.url, "/v1/submissions", &alice);
    assert_eq!(
        list.as_array().unwrap().len(),
        0,
        "a cut-off upload was recorded: {list}"
    );
    let (code, made) = upload(&served.url, &alice, &common::agent("baseline"), "after");
    assert_eq!(code, 201, "{made}");
    served.stop();
}

/// `token` with its last character replaced by a different one.
fn other_last_char(token: &str) -> String {
    let (head, last) = token.split_at(token.len() - 1);
    format!("{head}{}", if last == "0" { "1" } else { "0" })
}

//! What the submission service shows of a run, through the real `mlrb
//! serve --submissions` on loopback: a workspace left hostile by its
//! scripts (a FIFO, a socket, names not UTF-8 or with a newline or longer
//! than a tar header holds, a sparse file of 2 GiB, links out) still
//! packs, its public archive unpacks with `tar` inside its folder only and
//! verifies with `mlrb verify`; a status never shows the private part's
//! verdict before the close; names that would be other folders are
//! refused; every HTML page carries its Content-Security-Policy as a
//! header; a submission withdrawn while it runs is stopped and not charged.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::service::{self, CLOSED, OPEN_UNTIL, Served, exchange};
use serde_json::Value;

/// The hostile fixture task whose train.py leaves its workspace hostile.
fn hostile_workspace_task(dir: &Path) -> PathBuf {
    let train = r#"import os, socket
os.mkfifo("a-fifo")
s = socket.socket(socket.AF_UNIX)
s.bind("a-socket")
with open(b"not-utf8-\xff\xfe", "w") as f:
    f.write("x")
with open("a\nnewline", "w") as f:
    f.write("x")
deep = "/".join(["d" * 100] * 4)
os.makedirs(deep)
with open(os.path.join(deep, "n" * 200), "w") as f:
    f.write("x")
with open("sparse", "wb") as f:
    f.seek((2 << 30) - 5)
    f.write(b"tail\n")
os.symlink("/etc/passwd", "link-out")
os.symlink("a-fifo", "link-to-fifo")
with open("submission.csv", "w") as f:
    f.write("id,label\n1,0\n")
"#;
    common::hostile_task(dir, &[("train.py", train)])
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn get_json(url: &str, path: &str, token: &str) -> (u16, Value) {
    let (code, _, body) = exchange(url, "GET", path, &[("Authorization", &bearer(token))], b"");
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn upload(url: &str, token: &str, name: &str) -> (u16, Value) {
    let agent = std::fs::read(common::agent("baseline")).unwrap();
    let path = format!("/v1/submissions?benchmark=cpu-mini/1&agent={name}");
    let auth = bearer(token);
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/wasm")];
    let (code, _, body) = exchange(url, "POST", &path, &headers, &agent);
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// Waits until submission `id` is in none of `passing`.
fn settled(url: &str, token: &str, id: i64, passing: &[&str]) -> Value {
    let started = Instant::now();
    loop {
        let (code, status) = get_json(url, &format!("/v1/submissions/{id}"), token);
        assert_eq!(code, 200, "{status}");
        if !passing.contains(&status["submission"]["state"].as_str().unwrap_or("")) {
            return status;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "never settled: {status}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every entry of a tar archive: its path, and its kind.
fn entries(tar: &[u8]) -> Vec<(PathBuf, tar::EntryType)> {
    let mut archive = tar::Archive::new(tar);
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.path().unwrap().into_owned(), e.header().entry_type())
        })
        .collect()
}

/// Nothing in `tar` can write outside the folder it is unpacked in: no
/// root, no `..`, no hard link, no device, no entry beneath a link.
fn stays_inside(tar: &[u8]) {
    let all = entries(tar);
    let links: Vec<&PathBuf> = all.iter().filter(|(_, k)| k.is_symlink()).map(|(p, _)| p).collect();
    for (path, kind) in &all {
        assert!(
            path.components().all(|c| matches!(c, std::path::Component::Normal(_))),
            "{path:?}"
        );
        assert!(
            kind.is_file() || kind.is_dir() || kind.is_symlink() || kind.is_gnu_sparse() || kind.is_gnu_longname(),
            "{path:?}: {kind:?}"
        );
        assert!(
            !links.iter().any(|l| path.starts_with(l) && path != *l),
            "{path:?} beneath a link"
        );
    }
}

#[test]
fn a_hostile_workspace_packs_unpacks_inside_its_folder_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let task = hostile_workspace_task(dir.path());
    let task = task.display().to_string();
    let service = service::folder(dir.path(), &task, OPEN_UNTIL);
    let alice = service::submitter(&service, "alice");
    let served = Served::start(&service, 65536, &[]);
    let url = served.url();
    let (code, made) = upload(&url, &alice, "baseline");
    assert_eq!(code, 201, "{made}");
    let id = made["id"].as_i64().unwrap();
    let status = settled(&url, &alice, id, &["queued", "running", "scoring"]);
    // Before the close, not even whether the final submission was valid.
    for result in status["results"].as_array().unwrap() {
        assert!(result.get("valid").is_none(), "the private verdict shown: {result}");
    }
    let (code, _, own) = exchange(
        &url,
        "GET",
        &format!("/v1/submissions/{id}/records"),
        &[("Authorization", &bearer(&alice))],
        b"",
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&own));
    stays_inside(&own);
    // An organiser ranks it whatever the scan said of the special files.
    if status["submission"]["state"] == "held" {
        let released = common::mlrb()
            .args(["submissions", "release"])
            .arg(&service)
            .arg(id.to_string())
            .args(["--why", "reviewed"])
            .output()
            .unwrap();
        assert!(
            released.status.success(),
            "{}",
            String::from_utf8_lossy(&released.stderr)
        );
    }
    served.stop();

    service::publish(&service, &task, CLOSED);
    let served = Served::start(&service, 65536, &[]);
    let url = served.url();
    let (code, _, public) = exchange(&url, "GET", &format!("/records/{id}"), &[], b"");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&public));
    stays_inside(&public);
    let names: Vec<String> = entries(&public)
        .iter()
        .map(|(p, _)| p.to_string_lossy().into_owned())
        .collect();
    let note = format!("submission-{id}.left-out.txt");
    assert!(names.contains(&note), "{names:?}");
    for made in ["a\nnewline", "link-out", "sparse", "not-utf8-"] {
        assert!(names.iter().any(|n| n.contains(made)), "{made} not packed: {names:?}");
    }
    assert!(
        public.len() < 256 << 20,
        "the sparse file was packed whole ({} bytes)",
        public.len()
    );
    let archive = dir.path().join("public.tar");
    std::fs::write(&archive, &public).unwrap();
    let unpacked = dir.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let untar = std::process::Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked)
        .output()
        .unwrap();
    assert!(untar.status.success(), "{}", String::from_utf8_lossy(&untar.stderr));
    let left_out = std::fs::read_to_string(unpacked.join(&note)).unwrap();
    assert!(
        left_out.contains("a FIFO") && left_out.contains("a socket"),
        "{left_out}"
    );
    service::assert_verifies(&unpacked.join(format!("submission-{id}")), &service);
    // `mlrb verify` takes the archive itself, unpacked where nothing leaves.
    service::assert_verifies(&archive, &service);
    pages_carry_their_policy(&url, id);
}

/// Every HTML page of the service, its trace viewer's included, has a
/// Content-Security-Policy header.
fn pages_carry_their_policy(url: &str, id: i64) {
    let (_, viewer, _) = exchange(url, "GET", &format!("/view/{id}/"), &[], b"");
    let (_, _, index) = exchange(url, "GET", &format!("/view/{id}/"), &[], b"");
    let index = String::from_utf8_lossy(&index).into_owned();
    let episode = service::link_in(&index, |h| h.contains("/e/"));
    let mut pages = vec![
        "/".to_string(),
        "/leaderboard/cpu-mini/1".into(),
        format!("/view/{id}/"),
        episode.clone(),
        format!("{episode}/diff?a=0&b=1"),
        format!("/view/{id}/no-such-page"),
    ];
    pages.dedup();
    for page in pages {
        let (code, head, _) = exchange(url, "GET", &page, &[("Accept", "text/html")], b"");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-security-policy: default-src 'none'"),
            "{page} ({code}): no policy header in {head}"
        );
    }
    assert!(viewer.contains("200"), "{viewer}");
}

#[test]
fn the_trace_viewer_pages_carry_their_policy_as_a_header() {
    let dir = tempfile::tempdir().unwrap();
    let task = common::hostile_task(dir.path(), &[]);
    let out = dir.path().join("run");
    let finished = common::run_episode(&common::agent("baseline"), &task.display().to_string(), &out, &[]);
    let served = common::viewer::serve(&finished.dir);
    let url = served.url.trim_end_matches('/').to_string();
    for page in ["/", "/no-such-page", "/e/./diff?a=0&b=1"] {
        let (code, head, _) = exchange(&url, "GET", page, &[], b"");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-security-policy: default-src 'none'"),
            "{page} ({code}): no policy header in {head}"
        );
    }
}

#[test]
fn names_that_are_not_one_plain_folder_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let service = service::folder(dir.path(), "digits", OPEN_UNTIL);
    let alice = service::submitter(&service, "alice");
    let served = Served::start(&service, 65536, &[]);
    let url = served.url();
    for bad in ["..", ".", "%2E%2E", "a%2Fb", "a%00b", "a%0Ab", "", ".hidden"] {
        let (code, body) = upload(&url, &alice, bad);
        assert_eq!(code, 400, "{bad}: {body}");
        assert!(
            body["error"].as_str().unwrap_or("").contains("`agent`"),
            "{bad}: {body}"
        );
    }
    let (code, list) = get_json(&url, "/v1/submissions", &alice);
    assert_eq!(code, 200);
    assert_eq!(
        list.as_array().map(Vec::len),
        Some(0),
        "a refused name was recorded: {list}"
    );
}

#[test]
fn a_submission_withdrawn_while_it_runs_is_stopped_and_not_charged() {
    let dir = tempfile::tempdir().unwrap();
    let task = common::cluster::slow_task(dir.path(), 15);
    let task = task.display().to_string();
    let service = service::folder(dir.path(), &task, OPEN_UNTIL);
    let alice = service::submitter(&service, "alice");
    let served = Served::start(&service, 65536, &[]);
    let url = served.url();
    let (code, made) = upload(&url, &alice, "slow");
    assert_eq!(code, 201, "{made}");
    let id = made["id"].as_i64().unwrap();
    let started = Instant::now();
    while !service.join(format!("runs/{id}/journal.jsonl")).exists() {
        assert!(started.elapsed() < Duration::from_secs(300), "never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, _, body) = exchange(
        &url,
        "POST",
        &format!("/v1/submissions/{id}/withdraw"),
        &[("Authorization", &bearer(&alice))],
        b"",
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    // The runner is free again: the next submission runs.
    let (code, next) = upload(&url, &alice, "next");
    assert_eq!(code, 201, "{next}");
    let next = next["id"].as_i64().unwrap();
    let started = Instant::now();
    while !service.join(format!("runs/{next}/journal.jsonl")).exists() {
        assert!(started.elapsed() < Duration::from_secs(300), "the runner stayed busy");
        std::thread::sleep(Duration::from_millis(100));
    }
    let db = rusqlite::Connection::open(service.join("service.sqlite")).unwrap();
    let (state, seconds): (String, f64) = db
        .query_row(
            "SELECT state, agent_seconds FROM submissions WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (state.as_str(), seconds),
        ("withdrawn", 0.0),
        "charged after its withdrawal"
    );
    let results = std::fs::read_to_string(service.join(format!("runs/{id}/results.jsonl"))).unwrap_or_default();
    assert!(results.trim().is_empty(), "it ran to the end: {results}");
}

//! A result the queue server answered is never lost with its folder, even
//! when the server is killed (SIGKILL) before the folder is in place: the
//! server started again places it. Its folder cannot be placed here (a
//! file stands where the episode's folders go) until the server is killed,
//! so every acknowledged upload is still waiting then. A kept upload
//! damaged meanwhile is set aside, its result kept; a duplicate report
//! keeps nothing; a renewal racing the report is answered either way.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{done_lines, plan, request, served, slow_task};
use mlrb::bench::result_line::ResultLine;
use serde_json::Value;

fn bench(args: &[&str], path: &Path, tail: &[&str]) -> Child {
    common::mlrb()
        .args(args)
        .arg(path)
        .args(tail)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// An upload of `episode`'s result (with `note`) and a folder whose
/// episode.json says `note`.
fn upload(tmp: &Path, episode: &str, note: &str) -> Vec<u8> {
    let folder = tmp.join(format!("folder-{note}"));
    std::fs::create_dir_all(folder.join("workspace")).unwrap();
    std::fs::write(folder.join("episode.json"), format!("{{\"note\":\"{note}\"}}")).unwrap();
    std::fs::write(folder.join("workspace/out.txt"), note.repeat(100)).unwrap();
    let seed = episode.rsplit('/').next().unwrap().parse().unwrap();
    let result = ResultLine::infra_failed(episode, "hostile", "baseline", seed, episode, 1, note);
    let mut body = Vec::new();
    mlrb::cluster::upload::pack(Some(&result), Some(&folder), &mut body).unwrap();
    body
}

/// The `.tar` files kept under the run's `cluster/unplaced/`.
fn kept(run: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(run.join("cluster/unplaced"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tar"))
        .collect();
    names.sort();
    names
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the resumed bench never ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn answered_results_survive_a_killed_server_and_a_damaged_upload_is_set_aside() {
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_task(tmp.path(), 0);
    let extra = "[cluster]\nlisten = \"127.0.0.1:0\"\nlease_seconds = 600\n";
    let plan_path = plan(tmp.path(), &[common::agent("baseline")], &task, 2, extra);
    let run = tmp.path().join("kept");
    let out = tmp.path().display().to_string();
    let args = ["bench", "--quiet", "--json", "--on", "server", "--plan"];
    let mut server = bench(&args, &plan_path, &["--out", &out, "--run-name", "kept"]);
    let (url, token) = served(&run, &mut server);
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());
    let lease = || {
        let (code, body) = request(&url, "POST", "/v1/lease", &[auth], br#"{"worker":"w"}"#);
        assert_eq!(code, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        let lease = &answer["lease"];
        (
            lease["episode"].as_str().unwrap().to_string(),
            lease["token"].as_str().unwrap().to_string(),
        )
    };
    let ((a, a_lease), (b, b_lease)) = (lease(), lease());
    // A file where the episodes' folders go: none can be placed.
    let blocker = run.join(a.split('/').next().unwrap());
    std::fs::write(&blocker, b"").unwrap();
    let report = |episode: &str, lease: &str, body: &[u8]| {
        let hash = blake3::hash(body).to_hex().to_string();
        let headers = [
            auth,
            ("x-mlrb-episode", episode),
            ("x-mlrb-lease", lease),
            ("x-mlrb-blake3", &hash),
        ];
        request(&url, "POST", "/v1/report", &headers, body)
    };
    let (a_body, b_body) = (upload(tmp.path(), &a, "a"), upload(tmp.path(), &b, "b"));

    // A renewal racing the report: held before, refused after, never an error.
    let (renewed, reported) = std::thread::scope(|s| {
        let renew = s.spawn(|| {
            let body = serde_json::json!({ "token": a_lease }).to_string();
            request(&url, "POST", "/v1/renew", &[auth], body.as_bytes())
        });
        let reported = report(&a, &a_lease, &a_body);
        (renew.join().unwrap(), reported)
    });
    assert!(matches!(renewed.0, 200 | 409), "{renewed:?}");
    assert_eq!(
        (reported.0, reported.1.contains("recorded")),
        (200, true),
        "{reported:?}"
    );
    let (code, body) = report(&b, &b_lease, &b_body);
    assert_eq!((code, body.contains("recorded")), (200, true), "{body}");
    // Again while A's folder waits to be placed: a duplicate, nothing kept.
    let (code, body) = report(&a, &a_lease, &a_body);
    assert_eq!((code, body.contains("duplicate")), (200, true), "{body}");
    let (code, body) = report(&a, &a_lease, &upload(tmp.path(), &a, "other"));
    assert_eq!(code, 409, "{body}");
    let body = serde_json::json!({ "token": a_lease }).to_string();
    assert_eq!(request(&url, "POST", "/v1/renew", &[auth], body.as_bytes()).0, 409);
    assert_eq!(kept(&run).len(), 2, "one upload kept for each recorded result");
    assert!(!run.join(&a).exists() && !run.join(&b).exists());

    server.kill().unwrap();
    server.wait().unwrap();
    let db = rusqlite::Connection::open(run.join("cluster/queue.sqlite")).unwrap();
    let b_kept: String = db
        .query_row("SELECT upload FROM unplaced WHERE episode = ?1", [&b], |r| r.get(0))
        .unwrap();
    drop(db);
    let mut damaged = std::fs::read(run.join("cluster/unplaced").join(&b_kept)).unwrap();
    damaged[700] ^= 1;
    std::fs::write(run.join("cluster/unplaced").join(&b_kept), damaged).unwrap();
    // An upload kept but never recorded (killed between the two).
    std::fs::write(run.join("cluster/unplaced/0000.1111.tar"), b"never answered").unwrap();
    std::fs::remove_file(&blocker).unwrap();

    let mut resumed = bench(&["bench", "--quiet", "--json", "--resume"], &run, &[]);
    assert!(wait_exit(&mut resumed).success());
    let placed = std::fs::read_to_string(run.join(&a).join("episode.json")).unwrap();
    assert!(placed.contains("\"a\""), "{placed}");
    assert_eq!(
        std::fs::read_to_string(run.join(&a).join("workspace/out.txt")).unwrap(),
        "a".repeat(100)
    );
    assert!(!run.join(&b).exists(), "a damaged upload was placed");
    assert!(run.join("cluster/unplaced/damaged").join(&b_kept).is_file());
    assert_eq!(kept(&run), Vec::<String>::new(), "kept uploads left behind");
    let db = rusqlite::Connection::open(run.join("cluster/queue.sqlite")).unwrap();
    let noted: i64 = db.query_row("SELECT COUNT(*) FROM unplaced", [], |r| r.get(0)).unwrap();
    assert_eq!(noted, 0);
    let done = done_lines(&run);
    assert_eq!(done.len(), 2, "{done:?}");
    assert!(done.values().all(|&n| n == 1), "{done:?}");
    let results = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    assert!(results.contains(&a) && results.contains(&b), "{results}");
}

//! A bench served to workers (`mlrb bench --on server`, `mlrb worker`):
//! the same results as the same bench run locally while workers are told
//! to stop (SIGTERM) and killed (SIGKILL) mid-episode; and the queue's
//! refusals of every request it must not take.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{done_lines, outcomes, plan, request, served, slow_task, status, wait_for, worker};
use serde_json::Value;

fn local_reference(tmp: &Path, plan_path: &Path) -> std::path::PathBuf {
    let output = common::mlrb()
        .args(["bench", "--quiet", "--on", "local", "--plan"])
        .arg(plan_path)
        .arg("--out")
        .arg(tmp)
        .args(["--run-name", "local"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    tmp.join("local")
}

fn serve(tmp: &Path, plan_path: &Path, name: &str) -> Child {
    common::mlrb()
        .args(["bench", "--quiet", "--json", "--on", "server", "--plan"])
        .arg(plan_path)
        .arg("--out")
        .arg(tmp)
        .args(["--run-name", name])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(started.elapsed() < within, "did not exit within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn worker_json(child: Child) -> Value {
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn workers_stopped_and_killed_mid_episode_lose_nothing_and_duplicate_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_task(tmp.path(), 3);
    let agents = [common::agent("baseline"), common::agent("validator")];
    let extra = "[cluster]\nlisten = \"127.0.0.1:0\"\nlease_seconds = 3\n";
    let plan_path = plan(tmp.path(), &agents, &task, 2, extra);
    let reference = outcomes(&local_reference(tmp.path(), &plan_path));
    assert_eq!(reference.len(), 4);

    let run = tmp.path().join("served");
    let mut bench = serve(tmp.path(), &plan_path, "served");
    let (url, token) = served(&run, &mut bench);

    // SIGTERM mid-episode: the worker ends it and gives the lease back.
    let stopped = worker(&url, &run, "stopped").stdout(Stdio::piped()).spawn().unwrap();
    wait_for(&url, &token, "leased", |s| s["leased"] == 1);
    // Into its 3 s script, past its first recorded call.
    std::thread::sleep(Duration::from_secs(2));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(stopped.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let stopped = worker_json(stopped);
    assert_eq!(stopped["released"], 1, "{stopped}");
    assert_eq!(stopped["suspended"], 1, "its records went up to be resumed: {stopped}");
    assert_eq!(stopped["stopped"], "told to stop");
    let after_stop = status(&url, &token);
    assert_eq!(
        (after_stop["leased"].as_u64(), after_stop["done"].as_u64()),
        (Some(0), Some(0)),
        "given back at once"
    );

    // SIGKILL mid-episode: its lease expires and another worker redoes it.
    let mut killed = worker(&url, &run, "killed").spawn().unwrap();
    wait_for(&url, &token, "leased again", |s| s["leased"] == 1);
    std::thread::sleep(Duration::from_secs(1));
    killed.kill().unwrap();
    killed.wait().unwrap();

    let a = worker(&url, &run, "a").stdout(Stdio::piped()).spawn().unwrap();
    let b = worker(&url, &run, "b").stdout(Stdio::piped()).spawn().unwrap();
    let (a, b) = (worker_json(a), worker_json(b));
    assert_eq!(
        a["reported"].as_u64().unwrap() + b["reported"].as_u64().unwrap(),
        4,
        "{a} {b}"
    );
    // The suspended episode (its next holder killed) went on from its records.
    assert!(
        a["resumed"].as_u64().unwrap() + b["resumed"].as_u64().unwrap() >= 1,
        "{a} {b}"
    );
    let status = wait_exit(&mut bench, Duration::from_secs(60));
    assert!(status.success());
    assert!(
        a["uploaded_bytes"].as_u64().unwrap() + b["uploaded_bytes"].as_u64().unwrap() > 8 << 10,
        "{a} {b}"
    );

    assert_eq!(
        outcomes(&run),
        reference,
        "served results differ from the local bench's"
    );
    assert!(done_lines(&run).values().all(|&n| n == 1), "{:?}", done_lines(&run));
    assert_eq!(done_lines(&run).len(), 4);
    for (id, ..) in outcomes(&run) {
        let record: Value = serde_json::from_str(
            &std::fs::read_to_string(run.join(id.as_str().unwrap()).join("episode.json")).unwrap(),
        )
        .unwrap();
        assert!(record["end"].is_object(), "{id}: uploaded without its end");
    }
    for file in ["summary.json", "report.html"] {
        assert!(run.join(file).is_file(), "{file} missing");
    }
    let db = rusqlite::Connection::open(run.join("cluster/queue.sqlite")).unwrap();
    let leases: i64 = db.query_row("SELECT COUNT(*) FROM leases", [], |r| r.get(0)).unwrap();
    assert!(
        leases >= 6,
        "the stopped and the killed episodes were leased again: {leases}"
    );
    // The token is in its file only: not in the plan, journal or output.
    for file in ["plan.json", "journal.jsonl", "results.jsonl", "cluster/server.json"] {
        let text = std::fs::read_to_string(run.join(file)).unwrap();
        assert!(!text.contains(&token), "{file} holds the token");
    }
    let mode = std::fs::metadata(run.join("cluster/token")).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
}

/// Suspending an episode and fetching suspended records: refused without
/// the lease held, with a result in the upload, with no records to go on
/// from; nothing is kept.
fn suspensions_refused(
    url: &str,
    auth: (&str, &str),
    (episode, lease): (&str, &str),
    foreign: &str,
    with_result: &[u8],
) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), "no records here").unwrap();
    let mut empty = Vec::new();
    mlrb::cluster::upload::pack(None, Some(tmp.path()), &mut empty).unwrap();
    let hash = |bytes: &[u8]| blake3::hash(bytes).to_hex().to_string();
    let suspend = |lease: &str, body: &[u8]| {
        let headers = [
            auth,
            ("x-mlrb-episode", episode),
            ("x-mlrb-lease", lease),
            ("x-mlrb-blake3", &hash(body)),
        ];
        request(url, "POST", "/v1/suspend", &headers, body)
    };
    let fetch = |lease: &str| {
        request(
            url,
            "GET",
            "/v1/partial",
            &[auth, ("x-mlrb-episode", episode), ("x-mlrb-lease", lease)],
            b"",
        )
    };
    let refusals: Vec<(&str, (u16, String), u16, &str)> = vec![
        (
            "suspend under a foreign lease",
            suspend(foreign, &empty),
            403,
            "never given",
        ),
        ("suspend with a result", suspend(lease, with_result), 400, "no result"),
        (
            "suspend with nothing to go on from",
            suspend(lease, &empty),
            422,
            "no records",
        ),
        (
            "fetch without headers",
            request(url, "GET", "/v1/partial", &[auth], b""),
            400,
            "headers",
        ),
        ("fetch under a foreign lease", fetch(foreign), 409, "not the one"),
        ("fetch with nothing kept", fetch(lease), 404, "no suspended records"),
    ];
    for (what, (code, body), expected, reason) in refusals {
        assert_eq!(code, expected, "{what}: {body}");
        assert!(body.contains(reason), "{what}: {body}");
    }
}

fn archive(result: &mlrb::bench::result_line::ResultLine, folder: Option<&Path>) -> Vec<u8> {
    let mut body = Vec::new();
    mlrb::cluster::upload::pack(Some(result), folder, &mut body).unwrap();
    body
}

#[test]
fn the_queue_refuses_bad_requests_with_a_reason_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_task(tmp.path(), 0);
    let extra = "[cluster]\nlisten = \"127.0.0.1:0\"\nmax_upload_mb = 1\n";
    let plan_path = plan(tmp.path(), &[common::agent("baseline")], &task, 2, extra);
    let run = tmp.path().join("guarded");
    let mut bench = serve(tmp.path(), &plan_path, "guarded");
    let (url, token) = served(&run, &mut bench);
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());

    for headers in [
        vec![],
        vec![("Authorization", "Bearer not-this-run")],
        vec![("Authorization", token.as_str())],
    ] {
        let (code, body) = request(&url, "POST", "/v1/lease", &headers, br#"{"worker":"x"}"#);
        assert_eq!(code, 401, "{body}");
        assert!(body.contains("token"), "{body}");
    }
    let (code, body) = request(&url, "POST", "/v1/lease", &[auth], b"{not json");
    assert_eq!(code, 400, "{body}");
    let (code, body) = request(&url, "POST", "/v1/lease", &[auth], &vec![b' '; 100_000]);
    assert_eq!(code, 413, "{body}");
    let (code, body) = request(&url, "GET", "/v1/agents/7", &[auth], b"");
    assert_eq!(code, 404, "{body}");

    let (code, body) = request(&url, "POST", "/v1/lease", &[auth], br#"{"worker":"w"}"#);
    assert_eq!(code, 200, "{body}");
    let lease: Value = serde_json::from_str(&body).unwrap();
    let (episode, lease_token) = (
        lease["lease"]["episode"].as_str().unwrap().to_string(),
        lease["lease"]["token"].as_str().unwrap().to_string(),
    );
    let (_, other) = request(&url, "POST", "/v1/lease", &[auth], br#"{"worker":"w"}"#);
    let other: Value = serde_json::from_str(&other).unwrap();
    let other_episode = other["lease"]["episode"].as_str().unwrap().to_string();

    let seed = if episode.ends_with("/1") { 1 } else { 2 };
    let good =
        mlrb::bench::result_line::ResultLine::infra_failed(&episode, "hostile", "baseline", seed, &episode, 1, "x");
    let body_of = |result: &mlrb::bench::result_line::ResultLine| archive(result, None);
    let hash = |bytes: &[u8]| blake3::hash(bytes).to_hex().to_string();
    let upload = |episode: &str, lease: &str, claimed: &str, body: &[u8]| {
        request(
            &url,
            "POST",
            "/v1/report",
            &[
                auth,
                ("x-mlrb-episode", episode),
                ("x-mlrb-lease", lease),
                ("x-mlrb-blake3", claimed),
            ],
            body,
        )
    };
    let good_body = body_of(&good);
    let mut damaged = good_body.clone();
    damaged[600] ^= 1;
    let big = vec![0u8; 2 << 20];
    let escaping = {
        let mut tar = tar::Builder::new(Vec::new());
        let line = serde_json::to_vec(&good).unwrap();
        let mut header = tar::Header::new_gnu();
        header.set_size(line.len() as u64);
        header.set_cksum();
        tar.append_data(&mut header, "result.json", line.as_slice()).unwrap();
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..20].copy_from_slice(b"episode/../../../esc");
        header.set_size(1);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        tar.append(&header, b"x".as_slice()).unwrap();
        tar.into_inner().unwrap()
    };
    let elsewhere = body_of(&mlrb::bench::result_line::ResultLine::infra_failed(
        &other_episode,
        "hostile",
        "baseline",
        1,
        &other_episode,
        1,
        "x",
    ));
    let refusals: Vec<(&str, (u16, String), u16, &str)> = vec![
        (
            "no headers",
            request(&url, "POST", "/v1/report", &[auth], &good_body),
            400,
            "headers",
        ),
        (
            "foreign lease",
            upload(
                &episode,
                other["lease"]["token"].as_str().unwrap(),
                &hash(&good_body),
                &good_body,
            ),
            403,
            "never given",
        ),
        (
            "no such episode",
            upload("nope/x/1", &lease_token, &hash(&good_body), &good_body),
            404,
            "no such episode",
        ),
        (
            "damaged",
            upload(&episode, &lease_token, &hash(&good_body), &damaged),
            400,
            "blake3",
        ),
        (
            "over the cap",
            upload(&episode, &lease_token, &hash(&big), &big),
            413,
            "cap",
        ),
        (
            "escaping path",
            upload(&episode, &lease_token, &hash(&escaping), &escaping),
            400,
            "outside the archive",
        ),
        (
            "another episode's result",
            upload(&episode, &lease_token, &hash(&elsewhere), &elsewhere),
            400,
            "not",
        ),
    ];
    for (what, (code, body), expected, reason) in refusals {
        assert_eq!(code, expected, "{what}: {body}");
        assert!(body.contains(reason), "{what}: {body}");
    }
    suspensions_refused(
        &url,
        auth,
        (&episode, &lease_token),
        other["lease"]["token"].as_str().unwrap(),
        &good_body,
    );
    assert!(!run.join("cluster/partial").exists(), "a refused suspension was kept");
    let counts = status(&url, &token);
    assert_eq!(
        (counts["done"].as_u64(), counts["leased"].as_u64()),
        (Some(0), Some(2)),
        "{counts}"
    );
    assert!(!tmp.path().join("esc").exists() && !run.join("esc").exists());
    let staged: Vec<_> = std::fs::read_dir(run.join("cluster/staging"))
        .map(|d| d.count())
        .into_iter()
        .collect();
    assert!(staged.iter().all(|&n| n == 0), "refused uploads left files: {staged:?}");

    // The good upload is recorded once; again it is a duplicate; another
    // result for the done episode is refused.
    let (code, body) = upload(&episode, &lease_token, &hash(&good_body), &good_body);
    assert_eq!((code, body.contains("recorded")), (200, true), "{body}");
    let (code, body) = upload(&episode, &lease_token, &hash(&good_body), &good_body);
    assert_eq!((code, body.contains("duplicate")), (200, true), "{body}");
    let mut changed = good.clone();
    changed.infra_error = Some("another".into());
    let changed = body_of(&changed);
    let (code, body) = upload(&episode, &lease_token, &hash(&changed), &changed);
    assert_eq!(code, 409, "{body}");
    assert_eq!(status(&url, &token)["done"], 1);

    bench.kill().unwrap();
    let output = bench.wait_with_output().unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!printed.contains(&token), "the server printed its token");
}

#[test]
fn on_a_shared_filesystem_a_killed_workers_episode_goes_on_from_its_records() {
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_task(tmp.path(), 3);
    let extra = "[cluster]\nlisten = \"127.0.0.1:0\"\nshared_filesystem = true\nlease_seconds = 2\n";
    let plan_path = plan(tmp.path(), &[common::agent("validator")], &task, 1, extra);
    let reference = outcomes(&local_reference(tmp.path(), &plan_path));
    let run = tmp.path().join("shared");
    let mut bench = serve(tmp.path(), &plan_path, "shared");
    let (url, token) = served(&run, &mut bench);

    // SIGKILL while its script runs, after its first validation was recorded.
    let mut killed = worker(&url, &run, "killed").spawn().unwrap();
    wait_for(&url, &token, "leased", |s| s["leased"] == 1);
    let recorded = || {
        walkdir::WalkDir::new(run.join("cluster/work"))
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name() == "events.jsonl")
            .any(|e| {
                std::fs::read_to_string(e.path())
                    .unwrap_or_default()
                    .contains("\"function\":\"validate\"")
            })
    };
    let started = std::time::Instant::now();
    while !recorded() {
        assert!(started.elapsed() < Duration::from_secs(60), "no validation recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.kill().unwrap();
    killed.wait().unwrap();
    wait_for(&url, &token, "the dead worker's lease expired", |s| s["leased"] == 0);

    let next = worker_json(worker(&url, &run, "next").stdout(Stdio::piped()).spawn().unwrap());
    assert_eq!(
        (next["reported"].as_u64(), next["resumed"].as_u64()),
        (Some(1), Some(1)),
        "{next}"
    );
    assert!(wait_exit(&mut bench, Duration::from_secs(60)).success());
    assert_eq!(outcomes(&run), reference, "the resumed result differs");
    let db = rusqlite::Connection::open(run.join("cluster/queue.sqlite")).unwrap();
    let after: i64 = db
        .query_row("SELECT MAX(after_step) FROM resumes", [], |r| r.get(0))
        .unwrap();
    assert!(after >= 1, "resumed after step {after}");
    let episode = walkdir::WalkDir::new(&run)
        .into_iter()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name() == "episode.json" && !e.path().to_string_lossy().contains("/cluster/"))
        .map(|e| e.path().parent().unwrap().to_path_buf())
        .unwrap();
    let events = common::read_events(&episode);
    assert_eq!(events.iter().filter(|e| e["function"] == "resume").count(), 1);
    let validations = events.iter().filter(|e| e["function"] == "validate").count();
    assert_eq!(validations, 4, "each validation recorded once");
}

#[test]
fn on_a_shared_filesystem_workers_upload_only_results_and_staged_paths_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_task(tmp.path(), 0);
    let extra = "[cluster]\nlisten = \"127.0.0.1:0\"\nshared_filesystem = true\n";
    let plan_path = plan(tmp.path(), &[common::agent("baseline")], &task, 2, extra);
    let run = tmp.path().join("shared");
    let mut bench = serve(tmp.path(), &plan_path, "shared");
    let (url, token) = served(&run, &mut bench);
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());

    // A worker naming a folder that is not its episode's under cluster/work is refused.
    let (_, body) = request(&url, "POST", "/v1/lease", &[auth], br#"{"worker":"w"}"#);
    let lease: Value = serde_json::from_str(&body).unwrap();
    let (episode, lease_token) = (
        lease["lease"]["episode"].as_str().unwrap().to_string(),
        lease["lease"]["token"].as_str().unwrap().to_string(),
    );
    std::fs::create_dir_all(run.join("cluster/work/w")).unwrap();
    std::os::unix::fs::symlink(tmp.path(), run.join("cluster/work/link")).unwrap();
    let result =
        mlrb::bench::result_line::ResultLine::infra_failed(&episode, "hostile", "baseline", 1, &episode, 1, "x");
    let only_result = archive(&result, None);
    let hash = blake3::hash(&only_result).to_hex().to_string();
    for (staged, why) in [
        (format!("cluster/work/../../{episode}"), "not this episode's folder"),
        (format!("cluster/work/w/{episode}"), "No such file"),
        (format!("cluster/work/link/{episode}"), "symbolic link"),
        ("plan.json".to_string(), "not this episode's folder"),
    ] {
        if why == "symbolic link" {
            std::fs::create_dir_all(tmp.path().join(&episode)).unwrap();
        }
        let headers = [
            auth,
            ("x-mlrb-episode", episode.as_str()),
            ("x-mlrb-lease", lease_token.as_str()),
            ("x-mlrb-blake3", hash.as_str()),
            ("x-mlrb-staged", staged.as_str()),
        ];
        let (code, body) = request(&url, "POST", "/v1/report", &headers, &only_result);
        assert_eq!(code, 400, "{staged}: {body}");
        assert!(body.contains(why), "{staged}: {body}");
    }
    assert_eq!(status(&url, &token)["done"], 0);
    let (code, _) = request(
        &url,
        "POST",
        "/v1/release",
        &[auth],
        format!("{{\"token\":\"{lease_token}\"}}").as_bytes(),
    );
    assert_eq!(code, 200);

    let worker = worker_json(worker(&url, &run, "shared").stdout(Stdio::piped()).spawn().unwrap());
    assert_eq!(worker["reported"], 2, "{worker}");
    // Two result lines in their archives; an episode's folder alone is more.
    assert!(worker["uploaded_bytes"].as_u64().unwrap() < 8 << 10, "{worker}");
    assert!(wait_exit(&mut bench, Duration::from_secs(60)).success());
    let results = outcomes(&run);
    assert_eq!(results.len(), 2);
    for (id, score, ..) in &results {
        assert_eq!(score, &serde_json::json!(1.0), "{id}");
        assert!(
            run.join(id.as_str().unwrap()).join("episode.json").is_file(),
            "{id}: not moved into the run"
        );
    }
    let left: Vec<_> = walkdir::WalkDir::new(run.join("cluster/work"))
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name() == "episode.json")
        .collect();
    assert!(left.is_empty(), "episodes left in cluster/work: {left:?}");
}

#[test]
fn a_worker_short_of_time_leases_nothing_and_an_episode_leased_too_often_is_given_up() {
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_task(tmp.path(), 0);
    let extra = "[cluster]\nlisten = \"127.0.0.1:0\"\nlease_seconds = 1\nmax_leases = 2\n";
    let plan_path = plan(tmp.path(), &[common::agent("baseline")], &task, 2, extra);
    let run = tmp.path().join("limits");
    let mut bench = serve(tmp.path(), &plan_path, "limits");
    let (url, token) = served(&run, &mut bench);

    // The task's budget is 120 s: a worker with 30 s left takes nothing.
    let short = worker(&url, &run, "short")
        .args(["--time-limit", "30"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let short = worker_json(short);
    assert_eq!(short["stopped"], "too little time left for another episode", "{short}");
    assert_eq!(status(&url, &token)["pending"], 2);

    // A worker that dies on its episode every time: leased twice, then
    // recorded as an infrastructure failure, and the next episode handed out.
    let bearer = format!("Bearer {token}");
    let lease = |worker: &str| {
        let (code, body) = request(
            &url,
            "POST",
            "/v1/lease",
            &[("Authorization", bearer.as_str())],
            format!("{{\"worker\":\"{worker}\"}}").as_bytes(),
        );
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()
    };
    let first = lease("dies-1");
    std::thread::sleep(Duration::from_millis(1100));
    let second = lease("dies-2");
    assert_eq!(second["lease"]["episode"], first["lease"]["episode"]);
    assert_eq!(second["lease"]["attempt"], 2);
    std::thread::sleep(Duration::from_millis(1100));
    let third = lease("next");
    assert_ne!(third["lease"]["episode"], first["lease"]["episode"], "{third}");
    assert_eq!(status(&url, &token)["done"], 1);
    bench.kill().unwrap();
    bench.wait().unwrap();
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    assert!(journal.contains("leased 2 times and never reported"), "{journal}");
}

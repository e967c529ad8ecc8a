//! A person's episodes (`mlrb human`, driven through a real pty) beside
//! agents everywhere results go: `mlrb compare` pairs an agent against
//! `human:NAME` from a bench that took the episodes in, `mlrb export`
//! marks the person as a person (not a model), and the submission service
//! takes the run as an organiser's reference row (`mlrb submissions
//! reference`), served on loopback: marked a person's, never ranked,
//! audited; and refused, in one line and with nothing kept, for a name
//! that is not plain, an episode of another task or seed, one not ended
//! and scored, one of another task version, one under looser limits than
//! the benchmark's, records that do not verify. Once the version closes
//! its trace and records are public; an organiser can remove it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::human::PROMPT;
use common::pty::Pty;
use common::service;
use serde_json::Value;

/// Records ada's episode of digits with `seed` under `out/t`: the starter
/// trained, validated, submitted. Returns the run folder.
fn record(out: &Path, seed: &str) -> PathBuf {
    let mut pty = session(out, "t", seed, &[]);
    common::human::deeper_tree_and_submit(&mut pty);
    out.join("t")
}

/// `mlrb human` for ada on digits under `out/run` with `seed` and `extra`
/// options, at its first prompt.
fn session(out: &Path, run: &str, seed: &str, extra: &[&str]) -> Pty {
    let mut command: Command = common::mlrb();
    command
        .args([
            "human",
            "--task",
            "digits",
            "--name",
            "ada",
            "--run-name",
            run,
            "--seed",
            seed,
        ])
        .args(extra)
        .arg("--out")
        .arg(out);
    let mut pty = Pty::spawn(command);
    pty.expect(PROMPT);
    pty
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Runs `mlrb ARGS`: success, stdout, stderr.
fn mlrb(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    let output = common::mlrb().args(args).output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).trim().to_string(),
    )
}

macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$(std::ffi::OsStr::new($a)),*] };
}

#[test]
fn compare_pairs_an_agent_against_the_person_and_exports_mark_a_person() {
    let tmp = tempfile::tempdir().unwrap();
    let episodes = record(tmp.path(), "1");
    let plan = tmp.path().join("plan.toml");
    let baseline = common::agent("baseline");
    std::fs::write(
        &plan,
        format!("agents = [{baseline:?}, {{ human = \"ada\", episodes = {episodes:?} }}]\ntasks = [\"digits\"]\nseeds = [1]\n"),
    )
    .unwrap();
    let out = tmp.path().to_str().unwrap();
    let (ok, _, err) = mlrb(args![
        "bench",
        "--quiet",
        "--run-name",
        "b",
        "--out",
        out,
        "--plan",
        plan.to_str().unwrap()
    ]);
    assert!(ok, "{err}");
    let run = tmp.path().join("b");
    let run = run.to_str().unwrap();

    // The person is A (the human baseline), the agent B.
    let (ok, json, err) = mlrb(args!["compare", run, "--agents", "human:ada", "baseline", "--json"]);
    assert!(ok, "{err}");
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (json["a"]["agent"].as_str(), json["b"]["agent"].as_str()),
        (Some("human:ada"), Some("baseline"))
    );
    assert_eq!(json["tasks"][0]["paired"]["pairs"], 1, "{json}");
    assert!(json["unpaired"].as_array().unwrap().is_empty());
    // The person scored more than the starter the baseline submits: B − A < 0.
    assert!(json["tasks"][0]["paired"]["mean"].as_f64().unwrap() < 0.0, "{json}");
    let (ok, text, _) = mlrb(args!["compare", run, "--agents", "human:ada", "baseline"]);
    assert!(ok && text.contains("human:ada"), "{text}");
    // Across two runs: the person's bench against a run of the agent alone (seed 1).
    let (ok, _, err) = mlrb(args![
        "bench",
        "--quiet",
        "--run-name",
        "solo",
        "--seeds",
        "1",
        "--out",
        out,
        "--agent",
        common::agent("baseline").to_str().unwrap(),
        "--task",
        "digits"
    ]);
    assert!(ok, "{err}");
    let solo = tmp.path().join("solo");
    let (ok, json, err) = mlrb(args![
        "compare",
        run,
        solo.to_str().unwrap(),
        "--agents",
        "human:ada",
        "baseline",
        "--json"
    ]);
    assert!(ok, "{err}");
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["a"]["agent"], "human:ada");

    // Inspect: no model stands for the person; the agent stays a model.
    let inspect = tmp.path().join("inspect");
    let (ok, _, err) = mlrb(args![
        "export",
        run,
        "--format",
        "inspect",
        "--out",
        inspect.to_str().unwrap()
    ]);
    assert!(ok, "{err}");
    let logs: Vec<Value> = std::fs::read_dir(&inspect)
        .unwrap()
        .map(|e| read_json(&e.unwrap().path()))
        .collect();
    let person = logs
        .iter()
        .find(|l| l["eval"]["model_args"]["person"] == "ada")
        .expect("the person's log");
    assert_eq!(person["eval"]["model"], "none/human");
    assert_eq!(person["eval"]["solver"], "human_agent");
    assert_eq!(person["eval"]["metadata"]["participant"], "human");
    let agent = logs
        .iter()
        .find(|l| l["eval"]["model_args"]["person"].is_null())
        .expect("the agent's log");
    assert_eq!(agent["eval"]["model"], "mlrb/baseline");
    assert_eq!(agent["eval"]["metadata"]["participant"], "agent");

    // Every Eval Ever: the person filed under `human`, not as an agent's model.
    let eee = tmp.path().join("eee");
    let (ok, _, err) = mlrb(args!["export", run, "--format", "eee", "--out", eee.to_str().unwrap()]);
    assert!(ok, "{err}");
    let folder = eee.join("data/mlrb-b/human/human_ada");
    let folder = if folder.is_dir() {
        folder
    } else {
        eee.join("data/mlrb-b/human/human:ada")
    };
    let record = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    let record = read_json(&record);
    assert_eq!(record["model_info"]["id"], "human/ada");
    let details = &record["model_info"]["additional_details"];
    assert_eq!(
        (details["participant_type"].as_str(), details["person"].as_str()),
        (Some("human"), Some("ada"))
    );
    assert!(details["agent_sha256"].is_null(), "no component: {details}");
}

/// `mlrb submissions reference` with `episodes` and `name`.
fn reference(service: &Path, benchmark: &str, episodes: &Path, name: &str) -> (bool, String, String) {
    mlrb(args![
        "submissions",
        "reference",
        service.to_str().unwrap(),
        "--benchmark",
        benchmark,
        "--episodes",
        episodes.to_str().unwrap(),
        "--name",
        name
    ])
}

/// A copy of the run folder `from` (with every episode in it) at `to`.
fn copy(from: &Path, to: &Path) -> PathBuf {
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
    assert!(status.success());
    to.to_path_buf()
}

fn audit(service: &Path) -> String {
    let (ok, log, err) = mlrb(args!["submissions", "audit", service.to_str().unwrap()]);
    assert!(ok, "{err}");
    log
}

#[test]
fn a_persons_run_is_a_reference_row_of_the_board_and_hostile_ones_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    // The benchmark runs seed 1 (`seeds = 1`) of digits.
    let episodes = record(tmp.path(), "1");
    let service = service::folder(tmp.path(), "digits", service::OPEN_UNTIL);
    let refused = |episodes: &Path, name: &str, benchmark: &str, says: &str| {
        let (ok, out, err) = reference(&service, benchmark, episodes, name);
        assert!(!ok, "taken: {out}");
        assert!(err.contains(says) && err.lines().count() == 1, "{says}: {err}");
        assert!(!audit(&service).contains("added-reference"), "nothing added for {says}");
        assert!(
            !service.join("references/cpu-mini/1/ada").exists(),
            "nothing kept for {says}"
        );
    };
    refused(&episodes, "../x", "cpu-mini/1", "`--name`");
    refused(&episodes, "ada", "cpu-mini/9", "not published");
    // An episode of a task the benchmark does not have.
    let other = copy(&episodes, &tmp.path().join("other-task"));
    std::fs::rename(other.join("digits"), other.join("spaceship")).unwrap();
    refused(&other, "ada", "cpu-mini/1", "does not have");
    // A seed the benchmark does not run.
    let seed = copy(&episodes, &tmp.path().join("other-seed"));
    std::fs::rename(seed.join("digits/human-ada/1"), seed.join("digits/human-ada/7")).unwrap();
    refused(&seed, "ada", "cpu-mini/1", "seed 7");
    // Not ended and scored.
    let unscored = copy(&episodes, &tmp.path().join("unscored"));
    std::fs::remove_file(unscored.join("digits/human-ada/1/score.json")).unwrap();
    refused(&unscored, "ada", "cpu-mini/1", "not ended and been scored");
    // Recorded on another version of the task.
    let version = copy(&episodes, &tmp.path().join("other-version"));
    let path = version.join("digits/human-ada/1/episode.json");
    let mut record = read_json(&path);
    record["task"]["content_hash"] = Value::String("0".repeat(64));
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    refused(&version, "ada", "cpu-mini/1", "another version of task digits");
    // A score that is not what the evaluator gives: the re-scoring refuses it.
    let forged = copy(&episodes, &tmp.path().join("forged"));
    let path = forged.join("digits/human-ada/1/score.json");
    let mut score = read_json(&path);
    score["score"] = Value::from(0.999_9);
    std::fs::write(&path, serde_json::to_vec(&score).unwrap()).unwrap();
    refused(&forged, "ada", "cpu-mini/1", "do not verify");

    let (ok, out, err) = reference(&service, "cpu-mini/1", &episodes, "ada");
    assert!(ok, "{err}");
    assert!(out.contains("human:ada") && out.contains("reference"), "{out}");
    let (ok, _, err) = reference(&service, "cpu-mini/1", &episodes, "ada");
    assert!(!ok && err.contains("already has a reference"), "{err}");
    let log = audit(&service);
    assert_eq!(log.matches("added-reference").count(), 1, "{log}");
    assert!(log.contains("reference:1") && log.contains("human:ada"), "{log}");

    // Served: the person apart from the (empty) ranking, marked a person's.
    let served = service::Served::start(&service, 1024, &[]);
    let board = board_json(&served);
    assert!(
        board["rows"].as_array().unwrap().is_empty(),
        "not a submission: {board}"
    );
    let row = &board["references"][0];
    assert_eq!(
        (row["person"].as_str(), row["agent"].as_str()),
        (Some("ada"), Some("human:ada"))
    );
    assert_eq!(
        (row["state"].as_str(), row["rank"].is_null()),
        (Some("reference (a person)"), true)
    );
    assert_eq!(row["verify"]["status"], "verified");
    assert!(
        row["score"]["mean"].as_f64().is_some(),
        "the public part's score: {row}"
    );
    let (status, _, page) = service::exchange(&served.url(), "GET", "/leaderboard/cpu-mini/1", &[], b"");
    let page = String::from_utf8_lossy(&page);
    assert_eq!(status, 200);
    assert!(
        page.contains("id=\"references\"") && page.contains("a person: reference, not ranked"),
        "{page}"
    );
    assert!(page.contains("no ranked submissions yet"), "{page}");
    // No submitter's entry: a submitter sees none of theirs.
    let token = service::submitter(&service, "alice");
    let (status, _, body) = service::exchange(
        &served.url(),
        "GET",
        "/v1/submissions",
        &[("Authorization", &format!("Bearer {token}"))],
        b"",
    );
    assert_eq!(status, 200);
    let mine: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        mine.as_array().is_some_and(|a| a.is_empty()) || mine["submissions"].as_array().is_some_and(|a| a.is_empty()),
        "{mine}"
    );
    served.stop();

    // Once the version closes: the private part's score, still never ranked.
    service::publish(&service, "digits", service::CLOSED);
    let served = service::Served::start(&service, 1024, &[]);
    let board = board_json(&served);
    let row = &board["references"][0];
    assert_eq!((board["part"].as_str(), row["rank"].is_null()), (Some("private"), true));
    let scored = read_json(&episodes.join("digits/human-ada/1/score.json"));
    assert_eq!(row["score"]["mean"].as_f64(), scored["score"].as_f64(), "{row}");
    assert!(row["normalized"]["mean"].as_f64().is_some(), "{row}");
    served.stop();
}

/// The served board of cpu-mini/1 as JSON.
fn board_json(served: &service::Served) -> Value {
    let (status, _, body) = service::exchange(
        &served.url(),
        "GET",
        "/leaderboard/cpu-mini/1",
        &[("Accept", "application/json")],
        b"",
    );
    assert_eq!(status, 200);
    serde_json::from_slice(&body).unwrap()
}

/// Sets `field` (a JSON pointer) of `dir/digits/human-ada/1/episode.json`.
fn edit_episode(run: &Path, pointer: &str, value: Value) {
    let path = run.join("digits/human-ada/1/episode.json");
    let mut record = read_json(&path);
    *record.pointer_mut(pointer).unwrap() = value;
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
}

/// A session of seed 1 with `extra` options under `out/run`, submitted at once.
fn submitted_at_once(out: &Path, run: &str, extra: &[&str]) -> PathBuf {
    let mut pty = session(out, run, "1", extra);
    pty.type_line("task submit");
    pty.expect("scoring the final workspace");
    pty.wait();
    let dir = out.join(run);
    assert!(dir.join("digits/human-ada/1/score.json").is_file(), "{}", pty.screen());
    dir
}

#[test]
fn a_reference_must_have_run_under_the_benchmarks_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let service = service::folder(tmp.path(), "digits", service::OPEN_UNTIL);
    let refused = |episodes: &Path, says: &[&str]| {
        let (ok, out, err) = reference(&service, "cpu-mini/1", episodes, "ada");
        assert!(!ok, "taken: {out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        for said in says {
            assert!(err.contains(said), "{said}: {err}");
        }
        assert!(!audit(&service).contains("added-reference"), "nothing added: {err}");
        assert!(
            !service.join("references/cpu-mini/1/ada").exists(),
            "nothing kept: {err}"
        );
    };
    // A longer wall clock than the benchmark's (digits: 1200 s), by `mlrb human`'s option.
    let long = submitted_at_once(tmp.path(), "long", &["--wall-seconds", "5000"]);
    refused(
        &long,
        &[
            "digits/human-ada/1: not under the limits benchmark cpu-mini/1 gives task digits",
            "limits.wall_seconds: recorded 5000, required at most 1200",
            "--wall-seconds 1200",
        ],
    );
    // The record changed to show the benchmark's: the hash chain bound 5000 at the start.
    let edited = copy(&long, &tmp.path().join("edited"));
    edit_episode(&edited, "/limits/wall_seconds", Value::from(1200));
    refused(
        &edited,
        &[
            "do not verify",
            "limits.wall_seconds is 1200, the hash chain bound 5000",
        ],
    );
    let verify = common::mlrb()
        .arg("verify")
        .arg(edited.join("digits/human-ada/1"))
        .output()
        .unwrap();
    assert!(!verify.status.success(), "mlrb verify refuses it too");
    // More steps than the benchmark's, written into the record: the limits refuse it first.
    edit_episode(&edited, "/limits/max_steps", Value::from(500));
    refused(&edited, &["limits.max_steps: recorded 500, required at most 50"]);
    // Another sandbox, with a terminal's escape and a new line in what is recorded.
    let sandbox = copy(&long, &tmp.path().join("sandbox"));
    edit_episode(&sandbox, "/limits/wall_seconds", Value::from(1200));
    edit_episode(&sandbox, "/host/sandbox", Value::from("docker\u{1b}[2J\nforged"));
    refused(&sandbox, &["host.sandbox: recorded docker", "required local"]);
    // A network grant digits does not give.
    let network = copy(&long, &tmp.path().join("network"));
    edit_episode(&network, "/limits/wall_seconds", Value::from(1200));
    edit_episode(&network, "/limits/network", Value::from(true));
    refused(&network, &["limits.network: recorded", "required at most none"]);

    // Tighter limits than the benchmark's gave no advantage: taken.
    let tight = submitted_at_once(tmp.path(), "tight", &["--max-steps", "40", "--wall-seconds", "600"]);
    let (ok, _, err) = reference(&service, "cpu-mini/1", &tight, "ada");
    assert!(ok, "{err}");
    assert_eq!(audit(&service).matches("added-reference").count(), 1);
}

#[test]
fn a_references_trace_is_public_once_closed_and_an_organiser_can_remove_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut pty = session(tmp.path(), "t", "1", &[]);
    // What a person types reaches the page only escaped.
    pty.type_line("echo '<script>alert(1)</script>' > notes.txt && cat notes.txt");
    pty.expect(PROMPT);
    pty.type_line("sed -i 's/max_depth=8/max_depth=12/' train.py && python3 train.py");
    pty.expect("wrote submission.csv");
    pty.expect(PROMPT);
    pty.type_line("task submit");
    pty.expect("scoring the final workspace");
    assert!(pty.wait().success(), "{}", pty.screen());
    let episodes = tmp.path().join("t");
    let service = service::folder(tmp.path(), "digits", service::OPEN_UNTIL);
    let (ok, _, err) = reference(&service, "cpu-mini/1", &episodes, "ada");
    assert!(ok, "{err}");
    let get = |served: &service::Served, path: &str| {
        let (status, _, body) = service::exchange(&served.url(), "GET", path, &[], b"");
        (status, body)
    };

    // Open: neither trace nor records, though the board links where they will be.
    let served = service::Served::start(&service, 1024, &[]);
    let row = board_json(&served)["references"][0].clone();
    assert_eq!(
        (row["records"].as_str(), row["trace"].as_str()),
        (Some("/records/reference/1"), Some("/view/reference/1/"))
    );
    for path in ["/view/reference/1/", "/records/reference/1", "/view/1/", "/records/1"] {
        assert_eq!(get(&served, path).0, 404, "{path} while open");
    }
    served.stop();

    // Closed: the trace viewer and the signed records, as a submission's.
    service::publish(&service, "digits", service::CLOSED);
    let served = service::Served::start(&service, 1024, &[]);
    let (status, index) = get(&served, "/view/reference/1/");
    let index = String::from_utf8_lossy(&index).into_owned();
    assert_eq!(status, 200, "{index}");
    let link = service::link_in(&index, |l| l.starts_with("/view/reference/1/e/"));
    let (status, page) = get(&served, &link);
    let page = String::from_utf8_lossy(&page);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("human:ada") && page.contains("python3 train.py"),
        "{page}"
    );
    assert!(page.contains("&lt;script&gt;") && !page.contains("<script>"), "{page}");
    for path in [
        "/view/reference/2/",
        "/view/reference/x/",
        "/view/reference/1/e/..%2F..%2F..%2Fservice.key",
        "/records/reference/-1",
        "/records/reference/1%2F..",
    ] {
        assert_eq!(get(&served, path).0, 404, "{path}");
    }
    let (status, tar) = get(&served, "/records/reference/1");
    assert_eq!(status, 200);
    let archive = tmp.path().join("reference.tar");
    std::fs::write(&archive, &tar).unwrap();
    let unpacked = tmp.path().join("unpacked");
    tar::Archive::new(std::fs::File::open(&archive).unwrap())
        .unpack(&unpacked)
        .unwrap();
    let episode = unpacked.join("reference-1/digits/human:ada/1");
    for file in ["events.jsonl", "transcript.txt", "score.json"] {
        assert!(episode.join(file).is_file(), "{file} in {}", episode.display());
    }
    service::assert_verifies(&unpacked.join("reference-1"), &service);

    // Removed while served: off every board, trace and archive, and audited.
    let remove = |name: &str| {
        mlrb(args![
            "submissions",
            "reference",
            service.to_str().unwrap(),
            "--benchmark",
            "cpu-mini/1",
            "--remove",
            name
        ])
    };
    for (name, says) in [
        ("bob", "has no reference of bob (its references: ada)"),
        ("../ada", "`--remove`"),
    ] {
        let (ok, _, err) = remove(name);
        assert!(!ok && err.contains(says) && err.lines().count() == 1, "{err}");
    }
    assert!(!audit(&service).contains("removed-reference"));
    let (ok, out, err) = remove("ada");
    assert!(ok && out.contains("removed human:ada"), "{err}");
    let log = audit(&service);
    assert_eq!(log.matches("removed-reference").count(), 1, "{log}");
    assert!(log.contains("reference:1"), "{log}");
    let board = board_json(&served);
    assert!(board["references"].as_array().unwrap().is_empty(), "{board}");
    let (_, page) = get(&served, "/leaderboard/cpu-mini/1");
    assert!(!String::from_utf8_lossy(&page).contains("human:ada"));
    for path in ["/view/reference/1/", link.as_str(), "/records/reference/1"] {
        assert_eq!(get(&served, path).0, 404, "{path} once removed");
    }
    assert!(!service.join("references/cpu-mini/1/ada").exists());
    served.stop();
    let (ok, _, err) = remove("ada");
    assert!(
        !ok && err.contains("has no reference of ada (its references: none)"),
        "{err}"
    );
    // The name is free again; the id is not: the audit log and old links name it.
    let (ok, out, err) = reference(&service, "cpu-mini/1", &episodes, "ada");
    assert!(ok && out.contains("as reference 2"), "{out}{err}");
}

//! `mlrb human` driven through a real pseudo-terminal, as a person would
//! drive it: typing command lines, `task` commands and here-documents, and
//! reading the screen. The episode it leaves is recorded and scored like an
//! agent's (to the last digit of an agent's score that makes the same
//! edit), `mlrb verify` re-scores it, its time limit ends it, a paused
//! session goes on where it stopped (not under limits changed meanwhile),
//! and the shell cannot leave the sandbox.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::human::PROMPT;
use common::pty::Pty;
use serde_json::Value;

/// `mlrb human` on `task` for `name`, recorded under `out`, on a pty.
fn human(task: &str, out: &Path, extra: &[&str]) -> Pty {
    let mut command: Command = common::mlrb();
    command
        .args(["human", "--task", task, "--name", "ada", "--run-name", "t", "--out"])
        .arg(out)
        .args(extra);
    Pty::spawn(command)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn commands(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["interface"] == "shell" && e["function"] == "command")
        .collect()
}

#[test]
fn a_person_edits_runs_validates_and_submits_and_is_scored_like_an_agent() {
    let out = tempfile::tempdir().unwrap();
    let mut pty = human("digits", out.path(), &[]);
    pty.expect("Improve the test accuracy");
    pty.expect(PROMPT);
    pty.type_line("sed -i 's/max_depth=8/max_depth=12/' train.py");
    pty.expect(PROMPT);
    // A here-document over several lines is one command.
    pty.type_line("cat > notes.txt <<'EOF'");
    pty.type_line("deeper tree");
    pty.type_line("EOF");
    pty.expect(PROMPT);
    pty.type_line("grep -c max_depth=12 train.py && cat notes.txt");
    pty.expect("deeper tree");
    pty.expect(PROMPT);
    pty.type_line("python3 train.py");
    pty.expect("wrote submission.csv with 450 rows");
    pty.expect(PROMPT);
    pty.type_line("printf no-newline; false");
    pty.expect("no-newline\r\n[exit 1]");
    pty.expect(PROMPT);
    pty.type_line("task validate");
    let validated = pty.expect(PROMPT);
    assert!(validated.contains("valid submission; accuracy"), "{validated}");
    pty.type_line("task status");
    let status = pty.expect("validations: 1 of");
    assert!(status.contains("steps: 6 of 50 used"), "{status}");
    pty.type_line("task submit");
    pty.expect("scoring the final workspace");
    assert!(pty.wait().success(), "{}", pty.screen());
    // What the session showed fits its terminal of 100 columns.
    let screen = pty.screen();
    let wide: Vec<&str> = screen.lines().filter(|l| l.trim_end().chars().count() > 100).collect();
    assert!(wide.is_empty(), "lines over 100 columns: {wide:#?}");

    let dir = out.path().join("t/digits/human-ada/0");
    let episode = read_json(&dir.join("episode.json"));
    assert_eq!(episode["person"]["name"], "ada");
    assert_eq!(episode["agent"]["path"], "human:ada");
    assert_eq!(episode["end"]["reason"], "completed");
    assert_eq!(episode["end"]["steps"], 6);
    let score = read_json(&dir.join("score.json"));
    let scored = score["score"].as_f64().expect("a score");
    assert_eq!(score["valid"], true);
    // The deeper tree is another model than the starter's.
    assert_ne!(scored, score["baseline"].as_f64().unwrap());

    let events = common::read_events(&dir);
    let lines = commands(&events);
    assert_eq!(lines.len(), 5, "{lines:?}");
    let train = lines.iter().find(|e| e["args"]["line"] == "python3 train.py").unwrap();
    assert_eq!(train["result"]["ok"]["exit_code"], 0);
    assert!(train["result"]["ok"]["stdout_bytes"].as_u64().unwrap() > 0);
    assert!(train["step"].as_u64().is_some() && train["snapshot"].as_u64().is_some());
    let edit = lines[0];
    assert!(
        edit["snapshot"].as_u64().is_some(),
        "the edit changed the workspace: {edit}"
    );
    assert_eq!(lines[4]["result"]["ok"]["exit_code"], 1);
    let validations = episode["end"]["validations"].as_array().unwrap();
    assert_eq!(validations.len(), 1);
    let transcript = std::fs::read_to_string(dir.join("transcript.txt")).unwrap();
    assert!(transcript.contains("python3 train.py") && transcript.contains("wrote submission.csv"));

    // The same evaluator again, from the final snapshot: the same score.
    let verify = common::mlrb().arg("verify").arg(&dir).output().unwrap();
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    // The trace viewer shows it: the person, each command line.
    let served = common::viewer::serve(&dir);
    let (status, page) = common::viewer::http_get(&served.url);
    assert!(status.contains("200"), "{status}");
    assert!(
        page.contains("human:ada") && page.contains("python3 train.py"),
        "{page}"
    );
    drop(served);
    let scan = common::mlrb().args(["scan", "--json"]).arg(&dir).output().unwrap();
    let flags: Value = serde_json::from_slice(&scan.stdout).expect("scan's JSON");
    assert!(scan.status.success(), "nothing for review: {flags}");

    // A bench plan takes the episode in as agent human:ada, scored as
    // recorded, beside an agent that runs.
    let plan = out.path().join("plan.toml");
    let episodes = out.path().join("t");
    let baseline = common::agent("baseline");
    let text = format!(
        "agents = [{baseline:?}, {{ human = \"ada\", episodes = {episodes:?} }}]\ntasks = [\"digits\"]\nseeds = [0]\n"
    );
    std::fs::write(&plan, text).unwrap();
    let bench = common::mlrb()
        .args(["bench", "--quiet", "--run-name", "b", "--out"])
        .arg(out.path())
        .arg("--plan")
        .arg(&plan)
        .output()
        .unwrap();
    assert!(bench.status.success(), "{}", String::from_utf8_lossy(&bench.stderr));
    let results = std::fs::read_to_string(out.path().join("b/results.jsonl")).unwrap();
    let lines: Vec<Value> = results.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let person = lines
        .iter()
        .find(|l| l["agent"] == "human:ada")
        .expect("the person's result");
    assert_eq!(person["score"].as_f64(), Some(scored));
    let agent = lines
        .iter()
        .find(|l| l["agent"] == "baseline")
        .expect("the agent's result");
    assert_eq!(
        agent["score"].as_f64(),
        score["baseline"].as_f64(),
        "the starter, unchanged"
    );
    let report = common::mlrb().arg("report").arg(out.path().join("b")).output().unwrap();
    assert!(String::from_utf8_lossy(&report.stdout).contains("human:ada"));
    // The bench's records hold together, the person's episode re-scored with the agent's.
    let verified = common::mlrb().arg("verify").arg(out.path().join("b")).output().unwrap();
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
    assert!(out.path().join("b/digits/human:ada/0/score.json").is_file());
    // A seed the person never worked on is refused by name.
    std::fs::write(&plan, std::fs::read_to_string(&plan).unwrap().replace("[0]", "[0, 5]")).unwrap();
    let missing = common::mlrb()
        .args(["bench", "--quiet", "--run-name", "c", "--out"])
        .arg(out.path())
        .arg("--plan")
        .arg(&plan)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success() && stderr.contains("seed 5"), "{stderr}");
}

#[test]
fn a_persons_score_is_an_agents_that_makes_the_same_edit() {
    let out = tempfile::tempdir().unwrap();
    let mut pty = human("digits", out.path(), &["--seed", "3"]);
    pty.expect(PROMPT);
    common::human::deeper_tree_and_submit(&mut pty);
    let person = out.path().join("t/digits/human-ada/3");

    // An agent that writes the same train.py and runs it, on the same task and seed.
    let agent = common::agent("deeper_tree");
    let ran = common::run_episode(&agent, "digits", &out.path().join("a"), &["--seed", "3"]);
    assert_eq!(ran.end_reason(), "completed", "{}", ran.answer());

    let file = |dir: &Path, name: &str| std::fs::read(dir.join("workspace").join(name)).unwrap();
    assert_eq!(file(&person, "train.py"), file(&ran.dir, "train.py"), "the same edit");
    assert_eq!(file(&person, "submission.csv"), file(&ran.dir, "submission.csv"));
    let (a, b) = (
        read_json(&person.join("score.json")),
        read_json(&ran.dir.join("score.json")),
    );
    assert_eq!((a["valid"].as_bool(), b["valid"].as_bool()), (Some(true), Some(true)));
    // The final score is the private part's (validations told the public one's).
    assert!(a["public"].is_object() && b["public"].is_object(), "{a} {b}");
    assert_eq!(
        (&a["normalized"], &a["improvement"]),
        (&b["normalized"], &b["improvement"])
    );
    let scored = a["score"].as_f64().expect("the person's score");
    assert_eq!(scored.to_bits(), b["score"].as_f64().unwrap().to_bits(), "{a} {b}");
    assert_ne!(Some(scored), a["baseline"].as_f64(), "the edit changed the model");
    // Each told the same public score by its validation.
    let told = |dir: &Path| read_json(&dir.join("episode.json"))["end"]["validations"][0]["score"].clone();
    assert_eq!(told(&person), told(&ran.dir));
}

#[test]
fn the_time_limit_warns_then_ends_the_session_and_scores_what_is_there() {
    let out = tempfile::tempdir().unwrap();
    let mut pty = human("digits", out.path(), &["--wall-seconds", "10"]);
    pty.expect(PROMPT);
    pty.type_line("sleep 60");
    pty.expect("of wall-clock time left");
    pty.expect("the wall-clock budget ran out");
    pty.wait();
    let dir = out.path().join("t/digits/human-ada/0");
    let episode = read_json(&dir.join("episode.json"));
    assert_eq!(episode["end"]["reason"], "timeout", "{}", pty.screen());
    let events = common::read_events(&dir);
    let sleep = commands(&events)[0];
    assert_eq!(sleep["result"]["ok"]["termination"], "timed-out", "{sleep}");
    // Nothing was submitted: scored all the same, as invalid.
    let score = read_json(&dir.join("score.json"));
    assert_eq!(score["valid"], false);
}

#[test]
fn ctrl_c_stops_the_command_running_and_the_step_budget_holds() {
    let out = tempfile::tempdir().unwrap();
    let mut pty = human("digits", out.path(), &["--max-steps", "2"]);
    pty.expect(PROMPT);
    pty.type_line("echo started; sleep 300");
    // Ctrl-C goes to the terminal's foreground, mlrb, which stops the
    // command running only.
    pty.expect("\nstarted");
    pty.type_raw(b"\x03");
    pty.expect("interrupted (Ctrl-C)");
    pty.expect(PROMPT);
    pty.type_line("echo second");
    pty.expect(PROMPT);
    pty.type_line("echo third");
    let refused = pty.expect(PROMPT);
    // Wrapped to the terminal: read as words.
    let words = refused.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("budget exhausted") && words.contains("task submit"),
        "{refused}"
    );
    pty.type_line("task submit");
    assert!(pty.wait().success(), "{}", pty.screen());
    let dir = out.path().join("t/digits/human-ada/0");
    let events = common::read_events(&dir);
    let lines = commands(&events);
    assert_eq!(
        lines[0]["result"]["ok"]["note"], "killed: interrupted (Ctrl-C)",
        "{}",
        lines[0]
    );
    // The third line was refused, not run: no step, an error recorded.
    assert!(lines[2]["step"].is_null() && lines[2]["result"]["error"]["kind"] == "budget-exhausted");
    let episode = read_json(&dir.join("episode.json"));
    assert_eq!(episode["end"]["steps"], 2);
}

#[test]
fn a_paused_session_goes_on_where_it_stopped_without_charging_the_pause() {
    let out = tempfile::tempdir().unwrap();
    let mut pty = human("digits", out.path(), &[]);
    pty.expect(PROMPT);
    pty.type_line("echo first > kept.txt");
    pty.expect(PROMPT);
    pty.type_line("task pause");
    pty.expect("mlrb human --resume");
    assert!(pty.wait().success());
    let dir = out.path().join("t/digits/human-ada/0");
    let paused = read_json(&dir.join("episode.json"));
    assert!(paused["person"]["paused_at"].is_string(), "{paused}");
    assert!(paused["end"].is_null());
    let charged = common::read_events(&dir).last().unwrap()["t_ms"].as_f64().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));

    let mut command = common::mlrb();
    command.args(["human", "--resume"]).arg(&dir);
    let mut pty = Pty::spawn(command);
    pty.expect("going on with task digits");
    pty.expect(PROMPT);
    pty.type_line("cat kept.txt");
    pty.expect("first");
    pty.type_line("task submit");
    assert!(pty.wait().success(), "{}", pty.screen());

    let episode = read_json(&dir.join("episode.json"));
    assert_eq!(episode["end"]["reason"], "completed");
    let resume = &episode["resumes"][0];
    assert_eq!(resume["why"], "paused");
    assert_eq!(resume["charged_ms"].as_f64().unwrap() as u64, charged as u64);
    assert!(resume["uncharged_ms"].as_u64().unwrap() >= 3000, "{resume}");
    // The trace goes on in one hash chain: verify checks it and re-scores.
    let verify = common::mlrb().args(["verify"]).arg(&dir).output().unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
    // An ended session cannot be resumed.
    let again = common::mlrb().args(["human", "--resume"]).arg(&dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success() && stderr.contains("already ended"), "{stderr}");
}

#[test]
fn a_paused_session_whose_limits_were_changed_does_not_go_on() {
    let out = tempfile::tempdir().unwrap();
    let mut pty = human("digits", out.path(), &[]);
    pty.expect(PROMPT);
    pty.type_line("task pause");
    pty.expect("mlrb human --resume");
    assert!(pty.wait().success());
    let dir = out.path().join("t/digits/human-ada/0");
    let path = dir.join("episode.json");
    let mut record = read_json(&path);
    assert_eq!(record["limits"]["wall_seconds"], 1200);
    record["limits"]["wall_seconds"] = Value::from(86_400);
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    let again = common::mlrb().args(["human", "--resume"]).arg(&dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success(), "{stderr}");
    assert!(
        stderr.contains("limits.wall_seconds is 86400, the hash chain bound 1200")
            && stderr.trim().lines().count() == 1,
        "{stderr}"
    );
    assert_eq!(read_json(&path)["resumes"], Value::Null, "nothing went on");
}

#[test]
fn a_session_whose_host_died_goes_on_from_its_last_command() {
    let out = tempfile::tempdir().unwrap();
    let mut pty = human("digits", out.path(), &[]);
    pty.expect(PROMPT);
    pty.type_line("echo kept > kept.txt");
    pty.expect(PROMPT);
    pty.kill();
    let dir = out.path().join("t/digits/human-ada/0");
    // Killed while writing a line: half of it.
    let mut events = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("events.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut events, b"{\"prev\":\"torn").unwrap();
    drop(events);

    let mut command = common::mlrb();
    command.args(["human", "--resume"]).arg(&dir);
    let mut pty = Pty::spawn(command);
    pty.expect(PROMPT);
    pty.type_line("cat kept.txt");
    pty.expect("\nkept");
    pty.type_line("task submit");
    assert!(pty.wait().success(), "{}", pty.screen());
    let episode = read_json(&dir.join("episode.json"));
    assert_eq!(episode["resumes"][0]["why"], "host killed");
    assert_eq!(episode["end"]["steps"], 2);
    let verify = common::mlrb().args(["verify"]).arg(&dir).output().unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
}

/// A file outside the workspace only the host may read, and where the
/// hostile task's hidden answers lie on the host.
fn host_secrets(tmp: &Path) -> (PathBuf, String, Vec<PathBuf>) {
    let outside = tmp.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let secret = format!("HOST-ONLY-{}", std::process::id());
    std::fs::write(outside.join("secret.txt"), &secret).unwrap();
    let hidden = common::files_containing(&common::cache_dir(), &common::hidden_token());
    (outside.join("secret.txt"), secret, hidden)
}

fn cannot_leave(sandbox: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let out = tmp.path().join("runs");
    let mut pty = human(task.to_str().unwrap(), &out, &["--sandbox", sandbox]);
    pty.expect(PROMPT);
    // Prepared by now: the hidden answers are in the host's cache.
    let (secret_path, secret, hidden) = host_secrets(tmp.path());
    assert!(!hidden.is_empty(), "the fixture's hidden answers were not prepared");
    pty.type_line(&format!("cat {}", secret_path.display()));
    pty.expect("No such file");
    pty.expect(PROMPT);
    for path in &hidden {
        pty.type_line(&format!(
            "cat {} ; ls {}",
            path.display(),
            path.parent().unwrap().display()
        ));
        pty.expect(PROMPT);
    }
    // Nowhere in the sandbox's own view of the file system either.
    pty.type_line("grep -rls SECRET- /workspace /tmp /mlrb /run /home /root 2>/dev/null; echo searched-$((6*7))");
    pty.expect("searched-42");
    pty.type_line("task submit");
    pty.wait();
    let screen = pty.screen();
    eprintln!("{screen}");
    let episode = read_json(&out.join("t/hostile/human-ada/0/episode.json"));
    let ran_in = episode["host"]["sandbox"].as_str().unwrap();
    assert!(ran_in.starts_with(sandbox), "{ran_in}");
    // What was tried is there for a reviewer: the line that searched /mlrb.
    let scan = common::mlrb().arg("scan").arg(out.join("t")).output().unwrap();
    let said = String::from_utf8_lossy(&scan.stdout);
    assert!(
        !scan.status.success() && said.contains("a command line names"),
        "{said}"
    );
    assert!(!screen.contains(&secret), "the host's file was read:\n{screen}");
    assert!(
        !screen.contains(&common::hidden_token()),
        "the hidden answers leaked:\n{screen}"
    );
}

#[test]
fn the_persons_shell_cannot_leave_the_local_sandbox() {
    cannot_leave("local");
}

#[test]
fn the_persons_shell_cannot_leave_the_docker_sandbox() {
    if !common::docker_ready() {
        return;
    }
    cannot_leave("docker");
}

#[test]
fn bad_input_is_one_line_naming_what_to_fix() {
    let out = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = common::mlrb()
            .arg("human")
            .args(args)
            .arg("--out")
            .arg(out.path())
            .output()
            .unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).trim().to_string()
    };
    let name = run(&["--task", "digits", "--name", "../x"]);
    assert!(name.contains("--name") && name.lines().count() == 1, "{name}");
    let task = run(&["--task", "no-such-task", "--name", "ada"]);
    assert!(task.contains("no-such-task"), "{task}");
    let resume = run(&["--resume", out.path().to_str().unwrap()]);
    assert!(resume.contains("episode.json"), "{resume}");
}

//! Containment under attack: hostile agents (Rust and Python, in both
//! sandboxes) that go after the recorder, the sandbox's supervisor, the
//! host's deadlines, its disk and its caches. Each test asserts what must
//! hold whatever the agent did: nothing from outside the workspace in the
//! run record, the episode ended with its reason and a score (or a recorded
//! invalid submission), the host still answering, the caches unchanged.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where an attack runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sandbox {
    Local,
    Docker,
}

impl Sandbox {
    fn args(self) -> &'static [&'static str] {
        match self {
            Sandbox::Local => &[],
            Sandbox::Docker => &["--sandbox", "docker"],
        }
    }

    /// False (skipped, visibly) where Docker cannot run; CI requires it.
    fn ready(self) -> bool {
        self == Sandbox::Local || common::docker_ready()
    }
}

/// A finished hostile episode and the temp dir holding its task and runs.
struct Attack {
    tmp: tempfile::TempDir,
    finished: common::Finished,
}

impl Attack {
    /// An attack on the hostile task with `[resources]` extended by `resources`.
    fn with_resources(agent: &Path, sandbox: Sandbox, resources: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let task = common::hostile_task(tmp.path(), &[]);
        common::edit_task_toml(&task, "[resources]\n", &format!("[resources]\n{resources}\n"));
        let finished = common::run_episode(agent, task.to_str().unwrap(), &tmp.path().join("runs"), sandbox.args());
        Attack { tmp, finished }
    }

    fn run(agent: &Path, sandbox: Sandbox, extra_env: &[(&str, &str)], extra: &[&str]) -> Self {
        let args: Vec<&str> = sandbox.args().iter().chain(extra).copied().collect();
        let (tmp, finished) = common::run_on_hostile_task_with(agent, extra_env, &args);
        Attack { tmp, finished }
    }

    fn rust(name: &str, sandbox: Sandbox) -> Self {
        Self::run(&common::agent(name), sandbox, &[], &[])
    }

    fn python(name: &str, sandbox: Sandbox) -> Self {
        Self::run(
            &common::built_agent("tests/agents/hostile-py", Some(name)),
            sandbox,
            &[],
            &[],
        )
    }

    fn answer(&self) -> String {
        self.finished.answer()
    }

    /// The episode ended as `reason`, was scored (validly or not, by the
    /// evaluator, never as an infrastructure failure), and no byte of the
    /// hidden answers reached the run record.
    fn assert_ended_and_scored(&self, reason: &str) {
        assert_eq!(self.finished.end_reason(), reason, "{}", self.answer());
        let score = &self.finished.json["score"];
        assert_eq!(score["evaluator_failed"], false, "{score}");
        assert!(score["valid"].is_boolean(), "{score}");
        assert!(self.finished.json["episode"]["end"]["final_snapshot"].is_u64());
        let leaks = common::files_containing(self.tmp.path().join("runs").as_path(), &common::hidden_token());
        assert!(leaks.is_empty(), "the hidden answers leaked into {leaks:?}");
    }

    fn assert_nothing_escaped(&self) {
        let answer = self.answer();
        assert!(!answer.contains("ESCAPED"), "an attempt succeeded:\n{answer}");
    }

    fn line(&self, prefix: &str) -> String {
        let answer = self.answer();
        answer
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{answer}"))
            .to_string()
    }
}

// ---------------------------------------------------------------------------
// The sandbox's supervisor is out of reach.

fn check_supervisor(attack: Attack) {
    attack.assert_ended_and_scored("completed");
    attack.assert_nothing_escaped();
    for attempt in [
        "supervisor> ptrace attach 1: denied",
        "supervisor> ptrace attach own child: denied",
        "supervisor> pidfd_getfd 1 1: denied",
        "supervisor> write /proc/1/fd/1: denied",
        "supervisor> read /proc/1/environ: denied",
        "supervisor> process_vm_readv 1: denied",
        "supervisor> unshare user namespace: denied",
        "supervisor> mount tmpfs: denied",
        "supervisor> bpf: denied",
        "supervisor> io_uring_setup: denied",
    ] {
        assert!(
            attack.answer().contains(attempt),
            "missing `{attempt}`:\n{}",
            attack.answer()
        );
    }
    // The host is invisible, the environment is the sandbox's, and what
    // scripts need (threads, processes) still works, in the same episode.
    let visible: u32 = attack.line("supervisor> visible pids: ")["supervisor> visible pids: ".len()..]
        .parse()
        .unwrap();
    assert!(visible <= 6, "{visible} pids visible");
    // (USER and LOGNAME are the sandbox's own: its user, `mlrb`.)
    let environment = attack.line("supervisor> environment: ");
    for secret in ["KEY", "TOKEN", "CARGO", "MLRB", "SUDO", "SSH"] {
        assert!(!environment.contains(secret), "{environment}");
    }
    assert!(attack.answer().contains("supervisor> threads still work: True"));
    assert!(attack.answer().contains("supervisor> subprocess still works: yes"));
    assert!(
        attack.line("after: ").to_lowercase().contains("exited"),
        "{}",
        attack.answer()
    );
}

#[test]
fn the_supervisor_is_out_of_reach_in_bubblewrap() {
    check_supervisor(Attack::rust("supervisor", Sandbox::Local));
}

#[test]
fn the_supervisor_is_out_of_reach_in_docker() {
    if Sandbox::Docker.ready() {
        check_supervisor(Attack::rust("supervisor", Sandbox::Docker));
    }
}

#[test]
fn the_supervisor_is_out_of_reach_of_a_python_agent() {
    check_supervisor(Attack::python("supervisor", Sandbox::Local));
}

#[test]
fn the_supervisor_is_out_of_reach_of_a_python_agent_in_docker() {
    if Sandbox::Docker.ready() {
        check_supervisor(Attack::python("supervisor", Sandbox::Docker));
    }
}

// ---------------------------------------------------------------------------
// The launcher, whose word the host records, is out of the scripts' reach.

fn check_launcher(attack: Attack, sandbox: Sandbox) {
    attack.assert_ended_and_scored("completed");
    attack.assert_nothing_escaped();
    let answer = attack.answer();
    // The script that attacked it was still told apart from what it did, and
    // the next one's status is its own: the launcher was neither stopped,
    // killed nor taken over.
    for line in ["launcher> attacks done", "control> control ran"] {
        assert!(answer.contains(line), "missing `{line}`:\n{answer}");
    }
    // Rust agents print `exit=Some(7)`, Python ones `exit=7`.
    let exit = |prefix: &str| {
        let line = attack.line(prefix).to_lowercase();
        let code = line.rsplit("exit=").next().unwrap_or_default().to_string();
        code.trim_start_matches("some(").trim_end_matches(')').to_string()
    };
    assert_eq!(exit("launcher: termination="), "0", "{answer}");
    assert_eq!(exit("control: termination="), "7", "{answer}");
    // It was the launcher that started them: the namespace's init under
    // bubblewrap, root in a container.
    let who = attack.line("launcher> launcher: ");
    match sandbox {
        Sandbox::Local => assert!(who.contains("pid 1 "), "{who}"),
        Sandbox::Docker => assert!(who.ends_with("uid 0"), "{who}"),
    }
    for attempt in [
        "open launcher mem rw: denied",
        "process_vm_writev launcher: denied",
        "ptrace attach launcher: denied",
        "ptrace seize launcher: denied",
        "list launcher fds: denied",
        "read launcher environ: denied",
        "launcher threads: denied",
    ] {
        assert!(answer.contains(attempt), "missing `{attempt}`:\n{answer}");
    }
}

#[test]
fn the_launcher_is_out_of_reach_in_bubblewrap() {
    check_launcher(Attack::rust("launcher", Sandbox::Local), Sandbox::Local);
}

#[test]
fn the_launcher_is_out_of_reach_in_docker() {
    if Sandbox::Docker.ready() {
        check_launcher(Attack::rust("launcher", Sandbox::Docker), Sandbox::Docker);
    }
}

#[test]
fn the_launcher_is_out_of_reach_of_a_python_agent() {
    check_launcher(Attack::python("launcher", Sandbox::Local), Sandbox::Local);
}

#[test]
fn the_launcher_is_out_of_reach_of_a_python_agent_in_docker() {
    if Sandbox::Docker.ready() {
        check_launcher(Attack::python("launcher", Sandbox::Docker), Sandbox::Docker);
    }
}

// ---------------------------------------------------------------------------
// Scoring that runs submitted code cannot be forged, nor leak through its
// messages.

/// Every `.stderr` log under `dir`, with its text.
fn stderr_logs(dir: &Path) -> Vec<(PathBuf, String)> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "stderr"))
        .map(|e| {
            (
                e.path().to_path_buf(),
                std::fs::read_to_string(e.path()).unwrap_or_default(),
            )
        })
        .collect()
}

/// The CPU work the forging payloads do at import (forge_payloads.py).
const SLOW_IMPORT_S: f64 = 0.4;
/// The least ratio that work gives against the unmodified forward(),
/// timed beside it, whose call uses well under 2 s of CPU.
const SLOW_IMPORT_RATIO: f64 = SLOW_IMPORT_S / 2.0;

/// Whether a validation line says a valid score of at least `ratio`.
fn timed_at_least(line: &str, ratio: f64) -> bool {
    let score = line.split("score=").nth(1).unwrap_or_default();
    let number: String = score
        .trim_start_matches("Some(")
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '-'))
        .collect();
    line.contains("valid=true") && number.parse::<f64>().is_ok_and(|s| s >= ratio)
}

fn check_forged_score(agent: &Path, sandbox: Sandbox) {
    let tmp = tempfile::tempdir().unwrap();
    let finished = common::run_episode(agent, "vectorize", &tmp.path().join("runs"), sandbox.args());
    // Python agents print True/False.
    let answer = finished.answer().replace("=True", "=true").replace("=False", "=false");
    // The name the submission gave its exception (the reference solution's
    // text, if it could read it) is not what the agent is told.
    let leak = answer.lines().find(|l| l.starts_with("leak:")).unwrap_or_default();
    assert!(leak.contains("valid=false"), "{answer}");
    assert!(
        leak.ends_with("invalid submission: the submitted code raised an error or crashed when the evaluator ran it"),
        "{answer}"
    );
    // Code that writes its own `ready` and result after 0.4 s of work is
    // refused or timed with that work, never faster.
    let prewrite = answer.lines().find(|l| l.starts_with("prewrite:")).unwrap_or_default();
    assert!(
        prewrite.contains("valid=false") || timed_at_least(prewrite, SLOW_IMPORT_RATIO),
        "{answer}"
    );
    // Scored as what it is: valid, and its import's 0.4 s of CPU work
    // counted, though done in a thread and in a grandchild that left its
    // session and was gone before the result (the run's control group holds
    // them all), and though the channel cannot start the clock late.
    assert!(answer.contains("forged: valid=true"), "{answer}");
    let score = &finished.json["score"];
    assert_eq!(score["valid"], true, "{score}");
    let cpu = score["measures"]["cpu_seconds"].as_f64().unwrap_or_default();
    assert!(cpu >= SLOW_IMPORT_S, "hidden work went uncounted: {score}");
    let ratio = score["score"].as_f64().unwrap();
    assert!(ratio >= SLOW_IMPORT_RATIO, "a forged time was recorded: {score}");
    assert!(score["spread"]["low"].as_f64().unwrap() <= ratio, "{score}");
    // A run that spoiled its own channel (the pre-writing train.py) is
    // stopped at once, never held by its waiting harness until its timeout.
    let runs = walkdir::WalkDir::new(&finished.dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with("-runs.jsonl"));
    for path in runs.map(|e| e.path().to_path_buf()) {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("\"timed-out\""), "{}: {text}", path.display());
    }
    // What the submitted code found, from every run of it: no result to
    // forge, no hidden file, no evaluator, and its daemon gone with it.
    let logs = stderr_logs(&finished.dir);
    let attacks: Vec<&(PathBuf, String)> = logs.iter().filter(|(_, t)| t.contains("forge> ")).collect();
    assert!(!attacks.is_empty(), "the submitted code never ran: {logs:?}");
    for (path, text) in &logs {
        assert!(!text.contains("ESCAPED"), "{}: {text}", path.display());
        assert!(
            !text.contains("/mlrb/out/result.json: written"),
            "{}: {text}",
            path.display()
        );
    }
}

#[test]
fn a_score_cannot_be_forged_by_the_code_it_times_in_bubblewrap() {
    check_forged_score(&common::agent("forge_score"), Sandbox::Local);
}

#[test]
fn a_score_cannot_be_forged_by_the_code_it_times_in_docker() {
    if Sandbox::Docker.ready() {
        check_forged_score(&common::agent("forge_score"), Sandbox::Docker);
    }
}

#[test]
fn a_python_agent_cannot_forge_a_score_by_the_code_it_times() {
    let agent = common::built_agent("tests/agents/hostile-py", Some("forge_score"));
    check_forged_score(&agent, Sandbox::Local);
}

#[test]
fn a_python_agent_cannot_forge_a_score_by_the_code_it_times_in_docker() {
    if Sandbox::Docker.ready() {
        let agent = common::built_agent("tests/agents/hostile-py", Some("forge_score"));
        check_forged_score(&agent, Sandbox::Docker);
    }
}

// ---------------------------------------------------------------------------
// No agent process outlives its call.

fn check_background(attack: Attack) {
    attack.assert_ended_and_scored("completed");
    assert!(
        attack.answer().contains("returned> daemon started"),
        "{}",
        attack.answer()
    );
    assert!(
        attack.line("after return> heartbeat: ").contains("stopped"),
        "{}",
        attack.answer()
    );
    assert!(
        attack
            .line("hung: ")
            .to_lowercase()
            .replace("_", "")
            .contains("timedout"),
        "{}",
        attack.answer()
    );
    assert!(
        attack.line("after timeout> heartbeat: ").contains("stopped"),
        "{}",
        attack.answer()
    );
    // A daemon that kills whatever the host starts to end it, and one behind
    // a script that leaves no process free to start: both gone all the same.
    for after in ["after killer> heartbeat: ", "after saturate> heartbeat: "] {
        assert!(attack.line(after).contains("stopped"), "{}", attack.answer());
    }
    // And nothing writes the workspace after the episode either.
    let beat = attack.finished.dir.join("workspace/heartbeat.txt");
    let size = std::fs::metadata(&beat).unwrap().len();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(std::fs::metadata(&beat).unwrap().len(), size);
}

#[test]
fn no_process_outlives_its_script_in_bubblewrap() {
    check_background(Attack::rust("background", Sandbox::Local));
}

#[test]
fn no_process_outlives_its_script_in_docker() {
    if Sandbox::Docker.ready() {
        check_background(Attack::rust("background", Sandbox::Docker));
    }
}

#[test]
fn no_process_outlives_a_python_agents_script() {
    check_background(Attack::python("background", Sandbox::Local));
}

#[test]
fn no_process_outlives_a_python_agents_script_in_docker() {
    if Sandbox::Docker.ready() {
        check_background(Attack::python("background", Sandbox::Docker));
    }
}

// ---------------------------------------------------------------------------
// Special files and odd names never stall or break the host.

fn check_special_files(attack: Attack) {
    attack.assert_ended_and_scored("completed");
    assert!(
        attack.answer().contains("make> special files made"),
        "{}",
        attack.answer()
    );
    // A sparse file past the file-size cap cannot even be made.
    assert!(
        attack.answer().contains("make> sparse 1 TiB: refused"),
        "{}",
        attack.answer()
    );
    for call in [
        "read fifo.txt",
        "write fifo.txt",
        "append fifo.txt",
        "inspect fifo.txt",
        "copy fifo.txt",
        "copy onto fifo.txt",
        "read sock.txt",
        "write sock.txt",
        "run pipe.py",
        "read a very long path",
    ] {
        let line = attack.line(&format!("{call}: "));
        assert!(line.contains("refused (invalid-argument"), "{line}");
    }
    assert!(attack.line("read fifo.txt: ").contains("FIFO"));
    assert!(attack.line("read sock.txt: ").contains("socket"));
    assert!(attack.answer().contains("copy sparse.bin: Ok(())"));
    assert!(attack.answer().contains("validate: valid=true"), "{}", attack.answer());
    assert_eq!(attack.finished.json["score"]["valid"], true);

    // The final snapshot records each odd entry as refused, with why, and
    // the two names a lossy conversion would merge as two entries.
    let dir = attack.finished.dir.join("snapshots");
    let manifest = mlrb::record::snapshot::latest_manifest(&dir).unwrap();
    let why = |path: &str| {
        manifest
            .refused_why(path)
            .unwrap_or_else(|| panic!("{path} not refused"))
            .to_string()
    };
    assert!(why("fifo.txt").contains("FIFO"));
    assert!(why("sock.txt").contains("socket"));
    let odd: Vec<_> = manifest.refused.iter().filter(|r| r.path_hex.is_some()).collect();
    assert_eq!(odd.len(), 2, "{odd:#?}");
    assert_ne!(odd[0].path_hex, odd[1].path_hex);
    assert!(
        manifest.refused.iter().any(|r| r.why.contains("deeper than")),
        "{:#?}",
        manifest.refused
    );
    assert!(
        manifest.refused.iter().any(|r| r.why.contains("longer than")),
        "{:#?}",
        manifest.refused
    );
    assert!(manifest.entries.contains_key("sparse.bin"));
    // And the trace says so, when it happened.
    let events = attack.finished.events();
    let refused = events
        .iter()
        .find(|e| e["function"] == "snapshot-refused")
        .expect("a snapshot-refused event");
    assert!(refused["args"]["refused"].as_u64().unwrap() >= 6, "{refused}");
    // Copies of a sparse file stay sparse, in the workspace and the store.
    use std::os::unix::fs::MetadataExt;
    let copy = std::fs::metadata(attack.finished.dir.join("workspace/sparse-copy.bin")).unwrap();
    assert_eq!(copy.len(), 8 << 20);
    assert!(copy.blocks() * 512 < 1 << 20, "the copy takes {} blocks", copy.blocks());
    let store: u64 = walk_sizes(&dir.join("objects"))
        .values()
        .map(|(_, allocated)| allocated)
        .sum();
    assert!(
        store < 4 << 20,
        "the snapshot store takes {store} bytes for an 8 MiB sparse file"
    );
}

/// Apparent and allocated size of every file under `dir`.
fn walk_sizes(dir: &Path) -> BTreeMap<PathBuf, (u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let meta = e.metadata().unwrap();
            (e.path().to_path_buf(), (meta.len(), meta.blocks() * 512))
        })
        .collect()
}

#[test]
fn special_files_never_stall_the_host_in_bubblewrap() {
    check_special_files(Attack::rust("special_files", Sandbox::Local));
}

#[test]
fn special_files_never_stall_the_host_in_docker() {
    if Sandbox::Docker.ready() {
        check_special_files(Attack::rust("special_files", Sandbox::Docker));
    }
}

#[test]
fn special_files_never_stall_the_host_for_a_python_agent() {
    check_special_files(Attack::python("special_files", Sandbox::Local));
}

#[test]
fn special_files_never_stall_the_host_for_a_python_agent_in_docker() {
    if Sandbox::Docker.ready() {
        check_special_files(Attack::python("special_files", Sandbox::Docker));
    }
}

// ---------------------------------------------------------------------------
// Every resource has a cap, recorded when hit.

fn check_floods(attack: Attack) {
    attack.assert_ended_and_scored("completed");
    for (call, kind) in [
        ("one 1 MiB argument", "too-large"),
        ("300 arguments", "invalid-argument"),
        ("400 KiB of arguments", "too-large"),
        ("a 5000-byte path", "invalid-argument"),
        ("write 20 MiB", "too-large"),
    ] {
        let line = attack.line(&format!("{call}: "));
        assert!(line.contains(&format!("refused ({kind}")), "{line}");
    }
    // No script ran for an over-long argument list: it is the call's error.
    assert!(attack.finished.script_results().iter().all(|r| r.is_null()));
    // The answer is kept up to the cap, with its real length and hash.
    let end = &attack.finished.json["episode"]["end"];
    assert_eq!(end["answer"].as_str().unwrap().len(), 1 << 20);
    assert!(end["answer_cut"]["bytes"].as_u64().unwrap() > 5 << 20);
    assert_eq!(end["answer_cut"]["blake3"].as_str().unwrap().len(), 64);
}

#[test]
fn oversized_arguments_and_answers_get_typed_errors() {
    check_floods(Attack::rust("floods", Sandbox::Local));
}

#[test]
fn oversized_arguments_and_answers_from_python_get_typed_errors() {
    check_floods(Attack::python("floods", Sandbox::Local));
}

fn check_disk(attack: Attack) {
    attack.assert_ended_and_scored("agent-error");
    let end = &attack.finished.json["episode"]["end"];
    let detail = end["detail"].as_str().unwrap();
    // The agent's error message is kept up to the cap, with its length and hash.
    assert_eq!(detail.len(), 1 << 20);
    assert!(
        end["detail_cut"]["bytes"].as_u64().unwrap() > 3 << 20,
        "{}",
        end["detail_cut"]
    );
    let line = |prefix: &str| {
        detail
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {}", &detail[..2000.min(detail.len())]))
            .to_string()
    };
    // Growth the count cannot see stops the script: it never gets to the end.
    let deep = line("deep: termination");
    assert!(!deep.contains("exited"), "{deep}");
    assert!(
        !detail.contains("deep> still running"),
        "the script kept writing where nothing counts"
    );
    let events = std::fs::read_to_string(attack.finished.dir.join("events.jsonl")).unwrap();
    assert!(events.contains("cannot be counted"), "the reason is not recorded");
    // A line of 20 MiB is refused, not read into the host's memory.
    let inspect = line("inspect huge-line.txt: ");
    assert!(inspect.contains("refused (too-large"), "{inspect}");
    let deep_write = line("write 300 levels deep: ");
    assert!(
        deep_write.contains("refused (invalid-argument") && deep_write.contains("levels deep"),
        "{deep_write}"
    );
}

const SMALL_WORKSPACE: &str = "workspace_mb = 24";

#[test]
fn growth_the_host_cannot_count_is_stopped_in_bubblewrap() {
    check_disk(Attack::with_resources(
        &common::agent("disk"),
        Sandbox::Local,
        SMALL_WORKSPACE,
    ));
}

#[test]
fn growth_the_host_cannot_count_is_stopped_in_docker() {
    if !Sandbox::Docker.ready() {
        return;
    }
    check_disk(Attack::with_resources(
        &common::agent("disk"),
        Sandbox::Docker,
        SMALL_WORKSPACE,
    ));
}

#[test]
fn growth_the_host_cannot_count_is_stopped_for_a_python_agent() {
    let agent = common::built_agent("tests/agents/hostile-py", Some("disk"));
    check_disk(Attack::with_resources(&agent, Sandbox::Local, SMALL_WORKSPACE));
}

fn check_snapshot_flood(attack: Attack) {
    attack.assert_ended_and_scored("trace-limit");
    let detail = attack.finished.json["episode"]["end"]["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(detail.contains("snapshots wrote"), "{detail}");
    // The budget is three workspaces (72 MiB): at most one snapshot past it.
    let objects = attack.finished.dir.join("snapshots/objects");
    let packs = attack.finished.dir.join("snapshots/packs");
    let stored: u64 = walkdir::WalkDir::new(&objects)
        .into_iter()
        .chain(walkdir::WalkDir::new(&packs))
        .filter_map(|e| e.ok())
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    assert!(stored <= (72 + 13) << 20, "{} MiB of snapshot objects", stored >> 20);
    assert!(attack.finished.json["episode"]["end"]["steps"].as_u64().unwrap() < 19);
}

#[test]
fn snapshots_end_at_their_byte_budget() {
    check_snapshot_flood(Attack::with_resources(
        &common::agent("snapshot_flood"),
        Sandbox::Local,
        SMALL_WORKSPACE,
    ));
}

#[test]
fn snapshots_of_a_python_agent_end_at_their_byte_budget() {
    let agent = common::built_agent("tests/agents/hostile-py", Some("snapshot_flood"));
    check_snapshot_flood(Attack::with_resources(&agent, Sandbox::Local, SMALL_WORKSPACE));
}

fn check_note_flood(attack: Attack) {
    attack.assert_ended_and_scored("trace-limit");
    let detail = attack.finished.json["episode"]["end"]["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(detail.contains("8 MiB"), "{detail}");
    let trace = std::fs::metadata(attack.finished.dir.join("events.jsonl"))
        .unwrap()
        .len();
    assert!(trace < 10 << 20, "the trace grew to {trace} bytes");
    // The submission made before the flood is still scored.
    assert_eq!(attack.finished.json["score"]["valid"], true);
}

#[test]
fn a_flood_of_notes_ends_at_the_trace_budget() {
    check_note_flood(Attack::run(
        &common::agent("note_flood"),
        Sandbox::Local,
        &[],
        &["--trace-mb", "8"],
    ));
}

#[test]
fn a_flood_of_notes_from_python_ends_at_the_trace_budget() {
    let agent = common::built_agent("tests/agents/hostile-py", Some("note_flood"));
    check_note_flood(Attack::run(&agent, Sandbox::Local, &[], &["--trace-mb", "8"]));
}

// ---------------------------------------------------------------------------
// The recorder never follows anything the agent made.

fn check_swap_race(sandbox: Sandbox) {
    // A secret of the host, outside every workspace: the swapper links to it.
    let secrets = tempfile::tempdir().unwrap();
    let secret = secrets.path().join("host-secret.txt");
    let token = format!("HOSTSECRET-{}", std::process::id());
    std::fs::write(&secret, &token).unwrap();
    let secret_path = secret.display().to_string();
    let attack = Attack::run(
        &common::agent("swap_race"),
        sandbox,
        &[("secret_path.txt", &secret_path)],
        &[],
    );
    attack.assert_ended_and_scored("completed");
    assert!(
        attack.answer().contains("swapper> swapper started"),
        "{}",
        attack.answer()
    );
    let runs = attack.tmp.path().join("runs");
    for needle in [token.as_str(), "root:", "ANTHROPIC", "CARGO_HOME="] {
        let leaks = common::files_containing(&runs, needle);
        let leaks: Vec<_> = leaks.iter().filter(|p| !p.ends_with("secret_path.txt")).collect();
        assert!(leaks.is_empty(), "`{needle}` leaked into {leaks:?}");
    }
}

#[test]
fn a_swapping_script_gets_nothing_from_outside_into_the_record_in_bubblewrap() {
    check_swap_race(Sandbox::Local);
}

#[test]
fn a_swapping_script_gets_nothing_from_outside_into_the_record_in_docker() {
    if Sandbox::Docker.ready() {
        check_swap_race(Sandbox::Docker);
    }
}

// ---------------------------------------------------------------------------
// Shared caches are immutable to episodes.

/// Every entry of a tree: kind, mode, owner, times, links, size and content hash.
fn fingerprint(dir: &Path) -> BTreeMap<String, String> {
    use std::os::unix::fs::MetadataExt;
    walkdir::WalkDir::new(dir)
        .follow_links(false)
        .into_iter()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            let content = if meta.is_file() {
                blake3::hash(&std::fs::read(e.path()).unwrap()).to_hex().to_string()
            } else {
                String::new()
            };
            let print = format!(
                "{:?} {:o} {}:{} mtime={}.{} ctime={}.{} nlink={} size={} {content}",
                meta.file_type(),
                meta.mode(),
                meta.uid(),
                meta.gid(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec(),
                meta.nlink(),
                meta.len()
            );
            (e.path().strip_prefix(dir).unwrap().display().to_string(), print)
        })
        .collect()
}

fn check_cache(sandbox: Sandbox) {
    let first = Attack::rust("tamper", sandbox);
    first.assert_ended_and_scored("completed");
    let key = first.finished.json["episode"]["task"]["prepare_key"]
        .as_str()
        .unwrap()
        .to_string();
    let prepared = common::cache_dir().join("prepared").join(&key);
    let before = fingerprint(&prepared);
    assert!(before.len() > 3, "{before:?}");
    let attack = Attack::rust("tamper", sandbox);
    attack.assert_ended_and_scored("completed");
    attack.assert_nothing_escaped();
    assert!(
        attack.answer().contains("tamper> chmod data/train.csv: denied"),
        "{}",
        attack.answer()
    );
    assert_eq!(fingerprint(&prepared), before, "the prepare cache changed");
    // Read-only data in the workspace is a copy, never the cache's inode.
    use std::os::unix::fs::MetadataExt;
    let in_workspace = std::fs::metadata(attack.finished.dir.join("workspace/data/extra.csv")).unwrap();
    let in_cache = std::fs::metadata(prepared.join("public/data/extra.csv")).unwrap();
    assert_ne!(in_workspace.ino(), in_cache.ino());
    assert_eq!(in_cache.mode() & 0o222, 0, "cached files are read-only");
}

#[test]
fn the_prepare_cache_is_unchanged_after_a_hostile_run_in_bubblewrap() {
    check_cache(Sandbox::Local);
}

#[test]
fn the_prepare_cache_is_unchanged_after_a_hostile_run_in_docker() {
    if Sandbox::Docker.ready() {
        check_cache(Sandbox::Docker);
    }
}

// ---------------------------------------------------------------------------
// Nothing is left behind after the host is killed.

/// Control groups named for a host process.
fn cgroups_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("mlrb-{pid}.");
    walkdir::WalkDir::new("/sys/fs/cgroup")
        .max_depth(5)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_dir() && e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.into_path())
        .collect()
}

fn containers_of(pid: u32) -> Vec<String> {
    let output = std::process::Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=mlrb.managed=1",
            "--format",
            "{{.ID}} {{.Label \"mlrb.host\"}}",
        ])
        .output()
        .unwrap();
    let owner = format!("{pid}.");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.split_once(' ').is_some_and(|(_, host)| host.starts_with(&owner)))
        .map(|l| l.split(' ').next().unwrap_or_default().to_string())
        .collect()
}

fn heartbeat_size(workspace: &Path) -> u64 {
    std::fs::metadata(workspace.join("heartbeat.txt"))
        .map(|m| m.len())
        .unwrap_or(0)
}

fn check_host_killed(sandbox: Sandbox) {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let out = tmp.path().join("runs");
    let mut command = common::run_command(&common::agent("hang"), task.to_str().unwrap(), &out, sandbox.args());
    let mut host = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let dir = out.join("t/hostile/hang/0");
    let workspace = dir.join("workspace");
    let started = Instant::now();
    while heartbeat_size(&workspace) < 10 {
        assert!(started.elapsed() < Duration::from_secs(60), "the script never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = host.id();
    host.kill().unwrap();
    host.wait().unwrap();

    let record = mlrb::episode::EpisodeRecord::read(&dir).unwrap();
    assert_eq!(record.status(), "host killed");

    // The next start of a host cleans up what the killed one left.
    let next = Attack::rust("supervisor", sandbox);
    next.assert_ended_and_scored("completed");
    let settled = heartbeat_size(&workspace);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        heartbeat_size(&workspace),
        settled,
        "the killed host's script still runs"
    );
    assert!(cgroups_of(pid).is_empty(), "left behind: {:?}", cgroups_of(pid));
    if sandbox == Sandbox::Docker {
        assert!(containers_of(pid).is_empty(), "left behind: {:?}", containers_of(pid));
    }
}

#[test]
fn a_host_killed_mid_script_leaves_nothing_running_in_bubblewrap() {
    check_host_killed(Sandbox::Local);
}

#[test]
fn a_host_killed_mid_script_leaves_nothing_running_in_docker() {
    if Sandbox::Docker.ready() {
        check_host_killed(Sandbox::Docker);
    }
}

#[test]
fn the_local_model_server_dies_with_the_host_that_started_it() {
    if !mlrb::llm::local::installed() {
        assert!(
            std::env::var("CI").is_ok_and(|v| v != "true") || std::env::var("CI").is_err(),
            "the local model must be installed in CI (scripts/setup.sh)"
        );
        eprintln!("SKIPPED: the local model is not installed here");
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut host = common::mlrb()
        .args(["llm", "serve", "--port", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the server never answered"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    host.kill().unwrap();
    host.wait().unwrap();
    let killed = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "the model server outlived the host that started it"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

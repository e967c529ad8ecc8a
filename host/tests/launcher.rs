//! An episode's scripts start through a launcher inside its sandbox (one
//! bubblewrap, or one container, per episode), out of the scripts' reach:
//! the pid namespace's init under bubblewrap (hidden in /proc), root in a
//! container where scripts run as another user. These tests try to kill
//! and stop it and leave processes behind, in both sandboxes, and check
//! that each script still gets its own status, output, environment and a
//! clean sandbox, and that what the host cannot vouch for is ended.

mod common;

use std::time::Duration;

use mlrb::sandbox::docker::DockerSandbox;
use mlrb::sandbox::image::ImageRecipe;
use mlrb::sandbox::local::LocalSandbox;
use mlrb::sandbox::{Command, CommandLimits, EpisodeSandbox, EpisodeSetup, Exec, Mount, Outcome, Sandbox, Termination};

/// Prints the descriptors of the process that runs it.
const LIST_FDS: &str = "import os\nfor n in os.listdir('/proc/self/fd'):\n    try:\n        print(n + '=' + os.readlink('/proc/self/fd/' + n))\n    except OSError:\n        pass\n";

/// The descriptors a script holds, as `N=target`, from `argv`'s output.
fn held(outcome: &Outcome) -> Vec<String> {
    assert!(outcome.success(), "{}", outcome.describe());
    outcome.stdout.text.split_whitespace().map(String::from).collect()
}

struct Episode {
    runtime: tokio::runtime::Runtime,
    episode: Box<dyn EpisodeSandbox>,
    _workspace: tempfile::TempDir,
}

impl Episode {
    fn open(sandbox: impl FnOnce(&tokio::runtime::Runtime) -> Option<Box<dyn Sandbox>>) -> Option<Self> {
        Self::open_for(sandbox, Duration::from_secs(600))
    }

    /// [`Episode::open`] with the sandbox's `lifetime` (in the launcher's
    /// command line: a test can tell its launcher from others' by it).
    fn open_for(
        sandbox: impl FnOnce(&tokio::runtime::Runtime) -> Option<Box<dyn Sandbox>>,
        lifetime: Duration,
    ) -> Option<Self> {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let sandbox = sandbox(&runtime)?;
        let workspace = tempfile::tempdir().unwrap();
        let setup = EpisodeSetup {
            name: workspace.path().display().to_string(),
            mounts: vec![Mount::writable(workspace.path(), "/workspace")],
            cwd: "/workspace".into(),
            network: mlrb::sandbox::Reach::Nothing,
            limits: CommandLimits::new(&mlrb::limits::Limits::default(), Duration::from_secs(60)),
            gpus: vec![],
            lifetime,
        };
        let episode = runtime.block_on(sandbox.open_episode(setup)).unwrap();
        Some(Self {
            runtime,
            episode,
            _workspace: workspace,
        })
    }

    fn local() -> Self {
        Self::open(|_| Some(Box::new(LocalSandbox::detect().expect("bubblewrap")))).unwrap()
    }

    /// None (the test says it is skipped) only where no Docker engine is
    /// reachable outside CI.
    fn docker() -> Option<Self> {
        Self::docker_for(Duration::from_secs(600))
    }

    fn docker_for(lifetime: Duration) -> Option<Self> {
        if !common::docker_ready() {
            return None;
        }
        Self::open_for(
            |runtime| {
                let sandbox = runtime
                    .block_on(DockerSandbox::connect(&ImageRecipe::standard(false).tag()))
                    .unwrap();
                Some(Box::new(sandbox))
            },
            lifetime,
        )
    }

    fn exec(&self, argv: &[&str], env: &[(&str, &str)], timeout: Duration) -> Outcome {
        let exec = Exec {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            timeout,
            log_prefix: None,
            stop: Default::default(),
        };
        self.runtime.block_on(self.episode.exec(exec)).unwrap()
    }

    fn run(&self, argv: &[&str], timeout: Duration) -> Outcome {
        self.exec(argv, &[], timeout)
    }

    fn sh_with(&self, script: &str, env: &[(&str, &str)], timeout: Duration) -> Outcome {
        self.exec(&["sh", "-c", script], env, timeout)
    }

    fn sh(&self, script: &str) -> Outcome {
        self.sh_with(script, &[], Duration::from_secs(60))
    }

    /// Which process started a script (its pid namespace, pid and start
    /// time), after checking that it is a launcher: one whose command line
    /// says so, or, under bubblewrap, the pid namespace's init, whose
    /// `/proc` entry is hidden from scripts (an empty folder).
    fn launcher_pid(&self) -> String {
        let outcome = self.sh(
            r#"echo $(readlink /proc/self/ns/pid) $PPID $(cut -d' ' -f22 /proc/$PPID/stat 2>/dev/null || echo hidden); if [ "$PPID" = 1 ] && [ -z "$(ls -A /proc/1)" ]; then echo hidden-init; else tr '\0' ' ' < /proc/$PPID/cmdline; fi"#,
        );
        assert!(outcome.success(), "{}: {}", outcome.describe(), outcome.stderr.text);
        let stdout = outcome.stdout.text.clone();
        let (pid, cmdline) = stdout.split_once('\n').unwrap();
        assert!(
            cmdline.starts_with("python3 -I -S -c ") || cmdline.trim() == "hidden-init",
            "the script was not started by the episode's launcher: its parent is {cmdline:?}"
        );
        pid.to_string()
    }

    fn close(self) {
        self.runtime.block_on(self.episode.close()).unwrap();
    }
}

fn check_status_output_environment(episode: Episode) {
    let launcher = episode.launcher_pid();
    let outcome = episode.sh_with(
        r#"echo "$GREETING"; pwd; echo oops >&2; grep -E "^Sig(Ign|Blk):" /proc/self/status; exit 3"#,
        &[("GREETING", "hello from the host")],
        Duration::from_secs(60),
    );
    assert_eq!(outcome.termination, Termination::Exited, "{}", outcome.describe());
    assert_eq!(outcome.exit_code, Some(3));
    let stdout = outcome.stdout.text.clone();
    assert!(stdout.starts_with("hello from the host\n/workspace\n"), "{stdout}");
    // A script starts with the default handling of the signals Python (the
    // launcher) ignores: SIGPIPE and SIGXFSZ; and with none blocked.
    let mask = |name: &str| {
        let line = stdout.lines().find_map(|l| l.strip_prefix(name)).unwrap();
        u64::from_str_radix(line.trim(), 16).unwrap()
    };
    for signal in [libc::SIGPIPE, libc::SIGXFSZ] {
        assert_eq!(
            mask("SigIgn:") & (1 << (signal - 1)),
            0,
            "signal {signal} is ignored: {stdout}"
        );
    }
    assert_eq!(mask("SigBlk:"), 0, "{stdout}");
    assert_eq!(outcome.stderr.text.clone(), "oops\n");

    let killed = episode.sh("kill -TERM $$");
    assert_eq!(killed.termination, Termination::Killed, "{}", killed.describe());
    assert_eq!(killed.signal, Some(15));

    // A script holds nothing of its launcher's: no socket, only its three streams.
    let held = held(&episode.run(&["python3", "-c", LIST_FDS], Duration::from_secs(60)));
    assert!(
        !held.iter().any(|fd| fd.contains("socket:")),
        "a script holds a socket: {held:?}"
    );
    assert_eq!(held.len(), 3, "a script holds more than its three streams: {held:?}");

    let missing = episode.sh_with("exec /no/such/program", &[], Duration::from_secs(60));
    assert_eq!(missing.exit_code, Some(127), "{}", missing.describe());
    let unknown = episode.run(&["no-such-program-anywhere"], Duration::from_secs(60));
    assert_eq!(unknown.exit_code, Some(127), "{}", unknown.describe());
    assert!(
        unknown.stderr.text.contains("no-such-program-anywhere"),
        "{}",
        unknown.stderr.text
    );
    // None of this ended the launcher: the same one starts the next script.
    assert_eq!(episode.launcher_pid(), launcher);

    // Arguments past what a launcher request carries (256 KiB) still reach
    // the script, through a sandbox of its own.
    let big = "x".repeat(100_000);
    let count = "import sys; print(sum(len(a) for a in sys.argv[1:]))";
    let large = episode.run(&["python3", "-c", count, &big, &big, &big], Duration::from_secs(60));
    assert!(large.success(), "{}", large.describe());
    assert_eq!(large.stdout.text.trim(), "300000");
    episode.close();
}

#[test]
fn launched_scripts_keep_their_status_output_and_environment_in_bubblewrap() {
    check_status_output_environment(Episode::local());
}

#[test]
fn launched_scripts_keep_their_status_output_and_environment_in_docker() {
    if let Some(episode) = Episode::docker() {
        check_status_output_environment(episode);
    }
}

fn check_launcher_killed(episode: Episode) {
    let first = episode.launcher_pid();
    // The script tries to kill the process that started it, and everything
    // else it can: the launcher is out of its reach (the namespace's init
    // under bubblewrap, another user in a container), and the script ends
    // as it would have.
    let outcome = episode.sh("kill -KILL $PPID; kill -KILL -1; sleep 1; echo survived; exit 4");
    assert_eq!(outcome.exit_code, Some(4), "{}", outcome.describe());
    assert_eq!(outcome.stdout.text.clone(), "survived\n");
    assert_eq!(episode.launcher_pid(), first, "a script ended its launcher");
    // Nor can it stop the launcher: the script ends and the same launcher
    // starts the next one.
    let stopped = episode.sh_with("kill -STOP $PPID; echo tried", &[], Duration::from_secs(20));
    assert!(stopped.success(), "{}", stopped.describe());
    assert_eq!(episode.launcher_pid(), first, "a script stopped its launcher");
    let after = episode.sh("echo still here; exit 4");
    assert_eq!(after.exit_code, Some(4), "{}", after.describe());
    episode.close();
}

#[test]
fn a_script_that_kills_or_stops_its_launcher_breaks_nothing_in_bubblewrap() {
    check_launcher_killed(Episode::local());
}

#[test]
fn a_script_that_kills_or_stops_its_launcher_breaks_nothing_in_docker() {
    if let Some(episode) = Episode::docker() {
        check_launcher_killed(episode);
    }
}

fn check_leftovers(episode: Episode) {
    let marker = format!("{}", 100_000 + std::process::id() % 800_000);
    let launcher = episode.launcher_pid();
    // In the background, in a session of its own, and holding the output.
    let outcome = episode.sh(&format!(
        "sleep {marker} & setsid sleep {marker} & (trap '' TERM HUP; exec sleep {marker}) & echo started"
    ));
    assert!(outcome.success(), "{}", outcome.describe());
    assert_eq!(outcome.stdout.text.clone(), "started\n");
    common::assert_no_process(&format!("sleep {marker}"));
    let none_left = episode.sh(&format!(
        "! for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null | grep -q 'slee[p] {marker}'"
    ));
    assert!(none_left.success(), "{}", none_left.stdout.text.clone());
    // The launcher swept them; it was not replaced.
    assert_eq!(episode.launcher_pid(), launcher);

    // A script past its timeout is ended with everything it started.
    let timed_out = episode.sh_with(&format!("sleep {marker} & sleep {marker}"), &[], Duration::from_secs(1));
    assert_eq!(timed_out.termination, Termination::TimedOut, "{}", timed_out.describe());
    common::assert_no_process(&format!("sleep {marker}"));
    let after = episode.sh("echo fine");
    assert!(after.success(), "{}", after.describe());
    assert_eq!(after.stdout.text.clone(), "fine\n");
    episode.close();
}

#[test]
fn nothing_a_launched_script_started_outlives_it_in_bubblewrap() {
    check_leftovers(Episode::local());
}

#[test]
fn nothing_a_launched_script_started_outlives_it_in_docker() {
    if let Some(episode) = Episode::docker() {
        check_leftovers(episode);
    }
}

#[test]
fn a_container_script_can_neither_reach_nor_replace_the_launchers_socket() {
    let Some(episode) = Episode::docker() else {
        return;
    };
    episode.launcher_pid();
    // The socket is gone once the launcher has connected; what is left is
    // the host's lifeline (a listener that never accepts: a script that
    // connects to it learns and changes nothing), and the folder is
    // read-only: neither can be replaced or removed.
    let outcome = episode.sh(
        "ls -A /run/mlrb; touch /run/mlrb/launch.sock 2>/dev/null && echo planted; \
         rm -f /run/mlrb/host 2>/dev/null; ls -A /run/mlrb",
    );
    assert!(outcome.success(), "{}", outcome.describe());
    assert_eq!(
        outcome.stdout.text.clone(),
        "host\nhost\n",
        "the launcher's folder holds more than the lifeline, or is writable"
    );
    episode.close();
}

#[test]
fn no_descriptor_of_the_host_reaches_a_script_in_bubblewrap() {
    // A descriptor this process holds without close-on-exec, as a shell or
    // a jobserver would leave one.
    let mut leaked = [0; 2];
    // SAFETY: pipe(2) into a local array.
    assert_eq!(unsafe { libc::pipe(leaked.as_mut_ptr()) }, 0);
    let episode = Episode::local();
    let launched = held(&episode.run(&["python3", "-c", LIST_FDS], Duration::from_secs(60)));
    assert_eq!(
        launched.len(),
        3,
        "a launched script holds more than its streams: {launched:?}"
    );
    // A task step runs in a sandbox of its own, started by this host.
    let sandbox = LocalSandbox::detect().expect("bubblewrap");
    let workspace = tempfile::tempdir().unwrap();
    let step = Command {
        argv: ["python3", "-c", LIST_FDS].map(String::from).to_vec(),
        cwd: "/workspace".into(),
        mounts: vec![Mount::writable(workspace.path(), "/workspace")],
        env: Vec::new(),
        network: mlrb::sandbox::Reach::Nothing,
        limits: CommandLimits::new(&mlrb::limits::Limits::default(), Duration::from_secs(60)),
        gpus: vec![],
        log_prefix: None,
        stop: Default::default(),
        meter: Default::default(),
    };
    let alone = held(&episode.runtime.block_on(sandbox.run(step)).unwrap());
    assert_eq!(alone.len(), 3, "a task step holds more than its streams: {alone:?}");
    episode.close();
    // SAFETY: closing the two descriptors made above.
    unsafe {
        libc::close(leaked[0]);
        libc::close(leaked[1]);
    }
}

/// The launchers (python3 -I -S -c ...) below this test's process.
fn launchers_below_us() -> Vec<u32> {
    common::processes_under(std::process::id(), 8, is_launcher)
}

/// Whether a command line is a launcher's (`python3 -I -S -c SOURCE ...`).
fn is_launcher(args: &[&[u8]]) -> bool {
    args.len() > 4 && args[..4] == [&b"python3"[..], b"-I", b"-S", b"-c"]
}

/// An episode's launcher starts when the episode opens, not at its first
/// script, and the first script runs through that one launcher.
#[test]
fn the_launcher_starts_when_the_episode_opens_in_bubblewrap() {
    let episode = Episode::local();
    let waited = std::time::Instant::now();
    let started = loop {
        let found = launchers_below_us();
        if !found.is_empty() || waited.elapsed() > Duration::from_secs(30) {
            break found;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(started.len(), 1, "one launcher before any script: {started:?}");
    episode.launcher_pid();
    assert_eq!(
        launchers_below_us(),
        started,
        "the first script used the launcher started at open"
    );
    episode.close();
    assert!(launchers_below_us().is_empty(), "closed: no launcher left");
}

/// The launchers on this host whose command line carries `lifetime`
/// seconds (a container's are not this process's children).
fn launchers_living(lifetime: u64) -> Vec<u32> {
    let lifetime = lifetime.to_string();
    let is_ours = |args: &[&[u8]]| is_launcher(args) && args.get(7) == Some(&lifetime.as_bytes());
    common::processes_under(1, 64, is_ours)
}

/// In Docker too, the launcher starts when the episode's container does,
/// and the first script runs through it.
#[test]
fn the_launcher_starts_when_the_episode_opens_in_docker() {
    // A lifetime no other test gives, to tell this episode's launcher.
    let lifetime = 4_321;
    let Some(episode) = Episode::docker_for(Duration::from_secs(lifetime)) else {
        return;
    };
    let waited = std::time::Instant::now();
    let started = loop {
        let found = launchers_living(lifetime);
        if !found.is_empty() || waited.elapsed() > Duration::from_secs(30) {
            break found;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(started.len(), 1, "one launcher before any script: {started:?}");
    episode.launcher_pid();
    assert_eq!(launchers_living(lifetime), started, "the first script used it");
    episode.close();
    assert!(launchers_living(lifetime).is_empty(), "closed: no launcher left");
}

//! What a GPU script needs of its sandbox, proven without a GPU: a user
//! with a name (torch asks for it as it imports `torch._dynamo`), and,
//! where no control group can hold a script, limits that stand in for one
//! without stopping what CUDA does as it initialises: reserve far more
//! address space than it uses, and start threads however many processes
//! the host's user runs elsewhere.

mod common;

use std::path::Path;
use std::time::Duration;

use mlrb::sandbox::docker::DockerSandbox;
use mlrb::sandbox::image::ImageRecipe;
use mlrb::sandbox::local::LocalSandbox;
use mlrb::sandbox::python::PythonEnv;
use mlrb::sandbox::{Command, CommandLimits, Mount, Outcome, Reach, Sandbox, Termination};

/// Who the script is, by every name a library may ask.
const WHOAMI: &str = "import getpass, grp, os, pwd
me = pwd.getpwuid(os.getuid())
print(getpass.getuser(), os.environ['USER'], os.environ['LOGNAME'], os.environ['HOME'], me.pw_dir,
      grp.getgrgid(os.getgid()).gr_name)
print(len(open('/etc/passwd').read().splitlines()))
";

/// What CUDA's initialisation does to the address space: reserve 256 GiB
/// (`PROT_NONE`, no reserve), then map and touch 64 MiB of it.
const RESERVE: &str = "import ctypes, ctypes.util
libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
PRIVATE, ANONYMOUS, NORESERVE, FIXED = 0x02, 0x20, 0x4000, 0x10
base = libc.mmap(None, 256 << 30, 0, PRIVATE | ANONYMOUS | NORESERVE, -1, 0)
if base in (None, ctypes.c_void_p(-1).value):
    raise SystemExit('reserving 256 GiB failed: errno %d' % ctypes.get_errno())
used = libc.mmap(base, 64 << 20, 3, PRIVATE | ANONYMOUS | FIXED, -1, 0)
if used != base:
    raise SystemExit('mapping 64 MiB of it failed: errno %d' % ctypes.get_errno())
ctypes.memset(base, 1, 64 << 20)
print('reserved and touched')
";

/// Allocates (and touches) 64 MiB at a time until 2 GiB, or until refused.
const ALLOCATE: &str = "held = []
for _ in range(32):
    held.append(bytearray(64 << 20))
print('allocated 2 GiB')
";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

fn limits(memory_bytes: u64, max_processes: u32) -> CommandLimits {
    CommandLimits {
        memory_bytes,
        max_processes,
        ..CommandLimits::new(&mlrb::limits::Limits::default(), Duration::from_secs(120))
    }
}

fn command(argv: &[&str], workspace: &Path, limits: CommandLimits) -> Command {
    Command {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        cwd: "/workspace".into(),
        mounts: vec![Mount::writable(workspace, "/workspace")],
        env: vec![],
        network: Reach::Nothing,
        limits,
        gpus: vec![],
        log_prefix: None,
        stop: Default::default(),
        meter: Default::default(),
    }
}

fn run(sandbox: &dyn Sandbox, argv: &[&str], limits: CommandLimits) -> Outcome {
    let workspace = tempfile::tempdir().unwrap();
    runtime()
        .block_on(sandbox.run(command(argv, workspace.path(), limits)))
        .unwrap()
}

fn python(sandbox: &dyn Sandbox, script: &str, limits: CommandLimits) -> Outcome {
    run(sandbox, &["python3", "-c", script], limits)
}

fn assert_named(outcome: &Outcome) {
    assert!(outcome.success(), "{}: {}", outcome.describe(), outcome.stderr.text);
    let lines: Vec<&str> = outcome.stdout.text.lines().collect();
    assert_eq!(lines[0], "mlrb mlrb mlrb /tmp /tmp mlrb", "{}", outcome.stdout.text);
    // Root, the script user and nobody: never the host's users.
    assert_eq!(lines[1], "3", "{}", outcome.stdout.text);
}

#[test]
fn a_script_in_bubblewrap_has_a_user_name_and_home() {
    let sandbox = LocalSandbox::detect().expect("bubblewrap");
    assert_named(&python(&sandbox, WHOAMI, limits(2 << 30, 256)));
    let fallback = sandbox.without_control_groups();
    assert_named(&python(&fallback, WHOAMI, limits(2 << 30, 256)));
}

#[test]
fn a_script_in_docker_has_a_user_name_and_home() {
    if !common::docker_ready() {
        return;
    }
    let sandbox = runtime()
        .block_on(DockerSandbox::connect(&ImageRecipe::standard(false).tag()))
        .unwrap();
    assert_named(&python(&sandbox, WHOAMI, limits(2 << 30, 256)));
}

/// torch asks who runs it as it imports `torch._dynamo` (transformers
/// imports it): without a passwd entry or USER, the import fails half way.
#[test]
fn torch_dynamo_imports_in_bubblewrap_without_a_control_group() {
    let Some(venv) = common::torch_venv() else { return };
    let sandbox = LocalSandbox::detect()
        .expect("bubblewrap")
        .with_python(PythonEnv::resolve(&venv).unwrap())
        .without_control_groups();
    let script =
        "import getpass; print(getpass.getuser()); import torch._dynamo, torch; print(torch.cuda.is_available())";
    let outcome = python(&sandbox, script, limits(8 << 30, 256));
    assert!(outcome.success(), "{}: {}", outcome.describe(), outcome.stderr.text);
    assert_eq!(outcome.stdout.text, "mlrb\nFalse\n");
}

/// The memory limit without a control group never stops what CUDA does
/// first: reserve address space it does not use (cuInit failed with "out
/// of memory" under an address-space cap of 8 GiB).
#[test]
fn a_script_reserves_256_gib_under_the_fallback_memory_limit() {
    let sandbox = LocalSandbox::detect().expect("bubblewrap").without_control_groups();
    let outcome = python(&sandbox, RESERVE, limits(8 << 30, 256));
    assert!(outcome.success(), "{}: {}", outcome.describe(), outcome.stderr.text);
    assert_eq!(outcome.stdout.text, "reserved and touched\n");
}

/// ... and still stops a script that really allocates more than it may.
#[test]
fn the_fallback_memory_limit_stops_a_script_that_allocates_too_much() {
    let sandbox = LocalSandbox::detect().expect("bubblewrap").without_control_groups();
    let outcome = python(&sandbox, ALLOCATE, limits(512 << 20, 256));
    assert_eq!(outcome.termination, Termination::OutOfMemory, "{}", outcome.describe());
    assert!(outcome.stderr.text.contains("MemoryError"), "{}", outcome.stderr.text);
    let within = python(&sandbox, ALLOCATE, limits(4 << 30, 256));
    assert!(within.success(), "{}: {}", within.describe(), within.stderr.text);
}

/// Four workers, each holding 256 MiB (written, so resident) for three
/// seconds: each is under a per-process limit of 512 MiB, together they
/// are at twice it.
const WORKERS: &str = "import os, time
workers = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        held = b'\\x01' * (256 << 20)
        time.sleep(3)
        os._exit(0)
    workers.append(pid)
print(all(os.waitpid(w, 0)[1] == 0 for w in workers))
";

/// `RLIMIT_DATA` holds each process; without a control group the host adds
/// up the sandbox's processes and stops them together past the limit.
#[test]
fn workers_together_stay_under_the_memory_limit_without_a_control_group() {
    let sandbox = LocalSandbox::detect().expect("bubblewrap").without_control_groups();
    let outcome = python(&sandbox, WORKERS, limits(512 << 20, 256));
    assert_eq!(
        outcome.termination,
        Termination::OutOfMemory,
        "{}: {}",
        outcome.describe(),
        outcome.stderr.text
    );
    let roomy = python(&sandbox, WORKERS, limits(2 << 30, 256));
    assert!(roomy.success(), "{}: {}", roomy.describe(), roomy.stderr.text);
    assert_eq!(roomy.stdout.text, "True\n");
}

/// Fills `/tmp`, `/dev/shm` and `/dev` 16 MiB at a time up to 512 MiB each,
/// says how each ended and removes what it wrote; then takes a POSIX
/// semaphore (in `/dev/shm`).
const FILL_MEMORY_FILESYSTEMS: &str = "import errno, os
def fill(path):
    try:
        with open(path, 'wb') as f:
            for _ in range(32):
                f.write(bytes(16 << 20))
                f.flush()
        return 'filled'
    except OSError as error:
        return errno.errorcode[error.errno]
    finally:
        if os.path.exists(path):
            os.remove(path)
print(fill('/tmp/fill'), fill('/dev/shm/fill'), fill('/dev/fill'))
import multiprocessing
with multiprocessing.Lock():
    print('semaphore')
";

/// A tmpfs is memory, and without a control group nothing charges it to
/// the script: an unsized `/tmp` or `/dev` took up to half the host's
/// memory. Each holds no more than the script's memory limit, `/dev` none.
#[test]
fn memory_filesystems_hold_no_more_than_the_memory_limit_without_a_control_group() {
    let sandbox = LocalSandbox::detect().expect("bubblewrap").without_control_groups();
    let outcome = python(&sandbox, FILL_MEMORY_FILESYSTEMS, limits(256 << 20, 256));
    assert!(outcome.success(), "{}: {}", outcome.describe(), outcome.stderr.text);
    assert_eq!(outcome.stdout.text, "ENOSPC ENOSPC EROFS\nsemaphore\n");
    // Under the limit, both are there to use.
    let roomy = python(&sandbox, FILL_MEMORY_FILESYSTEMS, limits(2 << 30, 256));
    assert!(roomy.success(), "{}: {}", roomy.describe(), roomy.stderr.text);
    assert_eq!(roomy.stdout.text, "filled filled EROFS\nsemaphore\n");
}

/// The user the thread test runs its host as, and the processes it gives
/// that user outside the sandbox (another job of the same user).
const OTHER_USER: &str = "65534";
const OTHER_PROCESSES: usize = 40;

/// CUDA and torch start threads as they initialise. Without a control
/// group the process limit must count the sandbox's threads, not every
/// process of the host's user: run as a user that already has 40
/// processes elsewhere, a script under a limit of 64 still starts 32
/// threads. (Root is exempt from the limit, so the host runs as nobody.)
#[test]
fn threads_count_against_the_sandbox_not_the_host_user() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: running as another user needs root");
        return;
    }
    let others: Vec<std::process::Child> = (0..OTHER_PROCESSES)
        .map(|_| {
            std::process::Command::new("setpriv")
                .args([
                    "--reuid",
                    OTHER_USER,
                    "--regid",
                    OTHER_USER,
                    "--clear-groups",
                    "sleep",
                    "300",
                ])
                .spawn()
                .unwrap()
        })
        .collect();
    let child = std::process::Command::new("setpriv")
        .args(["--reuid", OTHER_USER, "--regid", OTHER_USER, "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args(["threads_as_another_user", "--exact", "--ignored", "--nocapture"])
        .env("MLRB_THREADS_CHILD", "1")
        .output()
        .unwrap();
    for mut other in others {
        let _ = other.kill();
        let _ = other.wait();
    }
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && stdout.contains("threads started: 32"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
}

/// The half of the thread test that runs as the other user.
#[test]
#[ignore = "run by threads_count_against_the_sandbox_not_the_host_user as another user"]
fn threads_as_another_user() {
    assert_eq!(std::env::var("MLRB_THREADS_CHILD").as_deref(), Ok("1"));
    let sandbox = LocalSandbox::detect().expect("bubblewrap").without_control_groups();
    let script = "import threading
stop = threading.Event()
started = 0
for _ in range(32):
    try:
        threading.Thread(target=stop.wait).start()
    except RuntimeError as error:
        print('thread failed:', error)
        break
    started += 1
print('threads started:', started)
stop.set()
";
    let outcome = python(&sandbox, script, limits(2 << 30, 64));
    println!("{}{}", outcome.stdout.text, outcome.stderr.text);
}

//! A one-node Slurm cluster on this machine, for the tests that submit to a
//! real Slurm: munged, slurmctld and slurmd started by hand (no systemd)
//! from a config written here, with requeue and scheduling made fast.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running cluster; stopped (its jobs cancelled) when dropped.
pub struct Cluster {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts munged if it is not running. Clusters of tests running at once
/// share one munged: the first to get the lock starts it, the others find
/// it working.
fn munge() -> Result<(), String> {
    let works = || {
        Command::new("sh")
            .args(["-c", "munge -n | unmunge"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let lock = std::fs::File::create(std::env::temp_dir().join("mlrb-test-munged.lock"))
        .map_err(|e| format!("the munged lock: {e}"))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| format!("locking the munged lock: {e}"))?;
    if works() {
        return Ok(());
    }
    let _ = std::fs::create_dir_all("/run/munge");
    let _ = Command::new("chown").args(["munge:munge", "/run/munge"]).status();
    let started = Command::new("runuser")
        .args(["-u", "munge", "--", "/usr/sbin/munged"])
        .status()
        .map_err(|e| format!("starting munged: {e}"))?;
    // munged answers a moment after it forks into the background.
    let answering = (0..50).any(|_| {
        let answers = works();
        if !answers {
            std::thread::sleep(Duration::from_millis(100));
        }
        answers
    });
    if !started.success() || !answering {
        return Err("munged did not start (is /etc/munge/munge.key there?)".into());
    }
    Ok(())
}

impl Cluster {
    /// Starts the cluster, or says why it cannot run here.
    pub fn start() -> Result<Self, String> {
        for program in ["slurmctld", "slurmd", "sbatch", "munged"] {
            if !have(program) {
                return Err(format!(
                    "`{program}` is not installed (scripts/setup.sh installs Slurm)"
                ));
            }
        }
        if !rustix::process::geteuid().is_root() {
            return Err("a one-node Slurm needs root here".into());
        }
        munge()?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let d = dir.path();
        for sub in ["state", "spool"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let conf = format!(
            "ClusterName=mlrbtest\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={ctld}\nSlurmdPort={slurmd}\n\
             SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n\
             AuthInfo=cred_expire=5\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\nJobCompType=jobcomp/filetxt\nJobCompLoc={d}/jobcomp.txt\n\
             AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none\n\
             MpiDefault=none\nReturnToService=2\nSlurmctldTimeout=10\nSlurmdTimeout=10\nInactiveLimit=0\n\
             MinJobAge=600\nKillWait=15\nSchedulerParameters=sched_interval=1,defer_batch=0\nMessageTimeout=5\n\
             NodeName=mlrbnode NodeAddr=127.0.0.1 NodeHostname={host} CPUs={cpus} State=UNKNOWN\n\
             PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            ctld = free_port(),
            slurmd = free_port(),
            d = d.display(),
            host = host.trim(),
        );
        let conf_path = d.join("slurm.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let log = |name: &str| std::fs::File::create(d.join(name)).unwrap();
        let daemon = |program: &str, extra: &[&str], name: &str| {
            Command::new(program)
                .arg("-D")
                .arg("-f")
                .arg(&conf_path)
                .args(extra)
                .env("SLURM_CONF", &conf_path)
                .stdout(log(name))
                .stderr(log(name))
                .spawn()
                .map_err(|e| format!("starting {program}: {e}"))
        };
        let ctld = daemon("slurmctld", &["-i"], "slurmctld.log")?;
        let node = daemon("slurmd", &["-N", "mlrbnode"], "slurmd.log")?;
        let cluster = Self {
            dir,
            daemons: vec![ctld, node],
        };
        cluster.wait_idle()?;
        Ok(cluster)
    }

    fn wait_idle(&self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let out = self.command("sinfo").args(["--noheader", "--format=%t"]).output();
            if let Ok(out) = out
                && String::from_utf8_lossy(&out.stdout).trim() == "idle"
            {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(30) {
                let log = std::fs::read_to_string(self.dir.path().join("slurmctld.log")).unwrap_or_default();
                return Err(format!("the node never became idle; slurmctld said:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The config file, for SLURM_CONF.
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// A Slurm command (or mlrb) run against this cluster.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.env("SLURM_CONF", self.conf());
        command
    }

    /// `squeue` lines `id|state` of every job, ended ones included.
    pub fn jobs(&self) -> Vec<(String, String)> {
        let out = self
            .command("squeue")
            .args(["--noheader", "--array", "--states=all", "--format=%i|%T"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().split_once('|'))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// Where the daemons' logs are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.command("scancel").args(["--user", "root"]).status();
        std::thread::sleep(Duration::from_millis(500));
        for daemon in &mut self.daemons {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
    }
}

/// The cluster, or a visible skip (a failure under CI=true).
pub fn cluster_or_skip(test: &str) -> Option<Cluster> {
    match Cluster::start() {
        Ok(cluster) => Some(cluster),
        Err(why) if std::env::var("CI").as_deref() == Ok("true") => panic!("{test}: Slurm cannot start here: {why}"),
        Err(why) => {
            eprintln!("SKIPPED {test}: Slurm cannot start here: {why}");
            None
        }
    }
}

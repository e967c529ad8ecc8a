//! A host with fake NVIDIA GPUs for the tests of GPU passthrough: device
//! nodes made with mknod in a scratch `/dev`-like folder, the driver's
//! procfs entries and a library folder, and an nvidia-smi first on PATH;
//! and a task whose scripts report what they see of them.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A fake host with two GPUs (nvidia-smi index 0 and 1, device minors 0
/// and 1), the driver's control nodes but `nvidia-modeset`, and a driver
/// library folder outside `/usr`.
pub struct FakeGpus {
    dir: tempfile::TempDir,
}

/// What a script printed of what it sees (see [`PROBE`]).
const PROBE: &str = r#"
import json, os, stat, sys, time
time.sleep(float(os.environ.get("PROBE_SLEEP", "0")))
nodes = {}
for name in ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"]:
    path = "/dev/" + name
    nodes[name] = os.path.exists(path) and stat.S_ISCHR(os.stat(path).st_mode)
libs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
lib = next((d + "/libcuda.so.1" for d in libs if os.path.exists(d + "/libcuda.so.1")), None)
writable = None
if lib:
    try:
        open(lib, "a").close()
        writable = True
    except OSError:
        writable = False
# What CUDA's driver reads of sysfs as it initialises: whether the module is
# loaded, and which PCI devices are NVIDIA's (vendor 0x10de).
def initstate():
    try:
        return open("/sys/module/nvidia/initstate").read().strip()
    except OSError as error:
        return "missing: %s" % error
def nvidia_pci():
    try:
        root = "/sys/bus/pci/devices/"
        return sorted(d for d in os.listdir(root) if open(root + d + "/vendor").read().strip() == "0x10de")
    except OSError as error:
        return "missing: %s" % error
seen = {"nodes": nodes, "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "initstate": initstate(), "nvidia_pci": nvidia_pci(),
        "nvidia": os.environ.get("NVIDIA_VISIBLE_DEVICES"), "lib": lib, "lib_writable": writable,
        "python": sys.executable}
print("GPUPROBE " + json.dumps(seen), file=sys.stderr if "eval" in sys.argv[0] else sys.stdout)
"#;

impl FakeGpus {
    /// The fake host; `nvidia_smi`: whether its nvidia-smi lists the GPUs
    /// (else it fails, as on a host whose driver is not answering). None,
    /// with the reason printed, where mknod is not permitted.
    pub fn new(nvidia_smi: bool) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        for name in ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] {
            if let Err(error) = mknod(&dev.join(name)) {
                let why = format!("mknod of a character device is not permitted here ({error})");
                assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
                eprintln!("SKIPPED: {why}");
                return None;
            }
        }
        for (bus, minor) in [("0000:17:00.0", 0), ("0000:65:00.0", 1)] {
            let gpu = dir.path().join("proc/gpus").join(bus);
            std::fs::create_dir_all(&gpu).unwrap();
            std::fs::write(
                gpu.join("information"),
                format!("Model: \t Fake\nDevice Minor: \t {minor}\n"),
            )
            .unwrap();
        }
        fake_sysfs(&dir.path().join("sys"));
        std::fs::create_dir_all(dir.path().join("driver")).unwrap();
        std::fs::write(dir.path().join("driver/libcuda.so.1"), "not a library").unwrap();
        let listing = "echo '0, GPU-00000000-fake, 81559, 00000000:17:00.0'\necho '1, GPU-11111111-fake, 81559, 00000000:65:00.0'";
        let body = if nvidia_smi {
            listing
        } else {
            "echo 'NVIDIA-SMI has failed' >&2\nexit 9"
        };
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("nvidia-smi"), format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(bin.join("nvidia-smi"), std::fs::Permissions::from_mode(0o755)).unwrap();
        Some(Self { dir })
    }

    /// The driver library folder.
    pub fn driver(&self) -> PathBuf {
        self.dir.path().join("driver")
    }

    /// `command` pointed at this fake host.
    pub fn apply<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .env("MLRB_GPU_DEV_DIR", self.dir.path().join("dev"))
            .env("MLRB_GPU_PROC_DIR", self.dir.path().join("proc"))
            .env("MLRB_GPU_SYS_DIR", self.dir.path().join("sys"))
            .env("MLRB_GPU_DRIVER_LIBS", self.driver())
            .env("PATH", path)
    }
}

/// A sysfs with what CUDA's driver reads of it: the module's initstate,
/// and the two GPUs as PCI devices, linked from `bus/pci/devices` as the
/// kernel links them.
fn fake_sysfs(sys: &Path) {
    let module = sys.join("module/nvidia");
    std::fs::create_dir_all(&module).unwrap();
    std::fs::write(module.join("initstate"), "live\n").unwrap();
    std::fs::create_dir_all(sys.join("bus/pci/devices")).unwrap();
    for bus in ["0000:17:00.0", "0000:65:00.0"] {
        let device = sys.join("devices/pci0000:00").join(bus);
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(device.join("vendor"), "0x10de\n").unwrap();
        let link = format!("../../../devices/pci0000:00/{bus}");
        std::os::unix::fs::symlink(link, sys.join("bus/pci/devices").join(bus)).unwrap();
    }
}

/// A character device at `path` with /dev/null's numbers.
fn mknod(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata("/dev/null")?.rdev();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rdev,
    )?;
    Ok(())
}

/// A copy of the hostile fixture task that needs one GPU and whose
/// starter and evaluator report what they see.
pub fn gpu_task(dir: &Path, sleep: u32) -> PathBuf {
    let train = format!(
        "import os\nos.environ['PROBE_SLEEP'] = '{sleep}'\n{PROBE}\nopen('submission.csv', 'w').write('id,label\\n1,0\\n')\n"
    );
    let task = super::hostile_task(dir, &[("train.py", &train)]);
    super::edit_task_toml(&task, "[resources]\n", "[resources]\ngpus = 1\n");
    let eval = format!("{PROBE}\nprint(json.dumps({{\"score\": 1.0}}))\n");
    std::fs::write(task.join("scripts/eval.py"), eval).unwrap();
    task
}

/// Every probe line printed under `dir`, parsed.
pub fn probes(dir: &Path) -> Vec<Value> {
    let mut seen = Vec::new();
    for file in super::files_containing(dir, "GPUPROBE ") {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for line in text.lines().filter_map(|l| l.strip_prefix("GPUPROBE ")) {
            seen.push(serde_json::from_str(line).unwrap());
        }
    }
    seen
}

/// The GPU nodes a probe saw.
pub fn gpus_seen(probe: &Value) -> Vec<String> {
    ["nvidia0", "nvidia1"]
        .into_iter()
        .filter(|n| probe["nodes"][*n] == true)
        .map(String::from)
        .collect()
}

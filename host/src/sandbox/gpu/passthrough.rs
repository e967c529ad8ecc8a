//! How the local sandbox gives a command the GPUs its episode leased:
//! their device nodes and the driver's control nodes bound into the
//! sandbox's otherwise minimal `/dev`, the driver's user-space libraries
//! read-only, the parts of `/sys` the driver reads as CUDA initialises,
//! read-only, and the variables CUDA reads. A GPU not leased has no node
//! inside, so nothing there can open it, whatever the variables say.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Result, bail};

use super::inventory::Inventory;

/// Nodes every CUDA program needs beside its GPUs' own; `nvidiactl` is
/// required, the others are bound where the host has them.
const CONTROL_NODES: &[&str] = &["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"];

/// The driver's kernel modules, whose `/sys/module` entries CUDA reads
/// (`nvidia/initstate` says the driver is loaded; without it cuInit fails
/// with CUDA_ERROR_OPERATING_SYSTEM, as it does without `/sys` at all).
const MODULES: &[&str] = &["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"];

/// Folders of `/sys/devices/system` CUDA reads for CPU and NUMA topology.
const SYSTEM_TOPOLOGY: &[&str] = &["devices/system/cpu", "devices/system/node"];

/// Libraries whose folders are the driver's user-space side.
const DRIVER_LIBRARIES: &[&str] = &["libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"];

/// Where this host keeps what GPU passthrough needs; each may be moved by
/// a variable (tests point them at scratch folders of fake nodes).
#[derive(Debug, Default)]
pub struct GpuHost {
    /// The folder of the NVIDIA device nodes (`MLRB_GPU_DEV_DIR`, default `/dev`).
    pub dev_dir: PathBuf,
    /// The driver's procfs folder (`MLRB_GPU_PROC_DIR`, default `/proc/driver/nvidia`).
    pub proc_dir: PathBuf,
    /// The host's sysfs (`MLRB_GPU_SYS_DIR`, default `/sys`).
    pub sys_dir: PathBuf,
    /// Folders of the driver's libraries (`MLRB_GPU_DRIVER_LIBS`, `:`-separated),
    /// else found in the loader's cache and the host's `LD_LIBRARY_PATH`.
    driver_dirs: Option<Vec<PathBuf>>,
    found_dirs: OnceLock<Vec<PathBuf>>,
    inventory: OnceLock<Inventory>,
}

/// What one command with GPUs gets in the local sandbox.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Passthrough {
    /// Device nodes on the host, each bound at `/dev/<its name>`.
    pub nodes: Vec<PathBuf>,
    /// Library folders outside the system folders every sandbox sees,
    /// bound read-only at their own path.
    pub libraries: Vec<PathBuf>,
    /// Variables the command starts with.
    pub env: Vec<(String, String)>,
    /// Parts of the host's sysfs, each bound read-only at its guest path
    /// (under `/sys`): the driver's modules, the PCI devices (the GPUs'
    /// among them) and the CPU and NUMA topology.
    pub sysfs: Vec<(PathBuf, PathBuf)>,
}

impl GpuHost {
    /// The host's settings, from the environment.
    pub fn from_env() -> Self {
        let path =
            |name: &str, default: &str| std::env::var_os(name).map_or_else(|| PathBuf::from(default), PathBuf::from);
        Self {
            dev_dir: path("MLRB_GPU_DEV_DIR", "/dev"),
            proc_dir: path("MLRB_GPU_PROC_DIR", "/proc/driver/nvidia"),
            sys_dir: path("MLRB_GPU_SYS_DIR", "/sys"),
            driver_dirs: std::env::var_os("MLRB_GPU_DRIVER_LIBS").map(|v| std::env::split_paths(&v).collect()),
            ..Self::default()
        }
    }

    /// What nvidia-smi says of this host's GPUs (asked once).
    pub fn inventory(&self) -> &Inventory {
        self.inventory.get_or_init(|| Inventory::probe(&self.proc_dir))
    }

    /// The passthrough of `devices` (pool ids: nvidia-smi indexes or
    /// UUIDs), or, in one line, why this host cannot give them.
    pub fn passthrough(&self, devices: &[String]) -> Result<Passthrough> {
        // The driver's nodes first: without them, no GPU of this host is usable.
        let mut control = Vec::new();
        for name in CONTROL_NODES {
            control.extend(self.node(name, *name == "nvidiactl", "control")?);
        }
        let mut nodes = Vec::new();
        for id in devices {
            let minor = self.minor(id)?;
            nodes.extend(self.node(&format!("nvidia{minor}"), true, id)?);
        }
        nodes.extend(control);
        let dirs = self.driver_dirs();
        let libraries = dirs
            .iter()
            .filter(|dir| !super::super::HOST_SYSTEM_DIRS.iter().any(|root| dir.starts_with(root)))
            .cloned()
            .collect();
        let mut env = vec![
            ("CUDA_VISIBLE_DEVICES".to_string(), self.cuda_visible(devices)),
            ("NVIDIA_VISIBLE_DEVICES".to_string(), devices.join(",")),
        ];
        if !dirs.is_empty() {
            let joined = std::env::join_paths(dirs).map_err(|e| anyhow::anyhow!("driver library folders: {e}"))?;
            env.push(("LD_LIBRARY_PATH".into(), joined.to_string_lossy().into_owned()));
        }
        Ok(Passthrough {
            nodes,
            libraries,
            env,
            sysfs: self.sysfs(),
        })
    }

    /// The parts of sysfs CUDA reads as it initialises, where the host has
    /// them: (host path, path inside).
    fn sysfs(&self) -> Vec<(PathBuf, PathBuf)> {
        let guest = Path::new("/sys");
        let mut parts: Vec<PathBuf> = MODULES.iter().map(|m| Path::new("module").join(m)).collect();
        parts.push("bus/pci".into());
        // The PCI devices themselves, where `bus/pci/devices`' links point.
        let devices = std::fs::read_dir(self.sys_dir.join("devices"))
            .into_iter()
            .flatten()
            .flatten();
        let mut roots: Vec<PathBuf> = devices
            .map(|entry| entry.file_name())
            .filter(|name| name.to_string_lossy().starts_with("pci"))
            .map(|name| Path::new("devices").join(name))
            .collect();
        roots.sort();
        parts.extend(roots);
        parts.extend(SYSTEM_TOPOLOGY.iter().map(PathBuf::from));
        parts
            .into_iter()
            .filter(|part| self.sys_dir.join(part).is_dir())
            .map(|part| (self.sys_dir.join(&part), guest.join(&part)))
            .collect()
    }

    /// What CUDA_VISIBLE_DEVICES names. CUDA numbers the devices it can
    /// open from 0, and inside the sandbox only the leased nodes exist, so
    /// the host's index of a leased GPU (`1`) would name no device there:
    /// its UUID names it whatever the numbering, and where nvidia-smi gave
    /// none, the ordinals 0..n-1 are the leased devices, the only ones CUDA
    /// can enumerate.
    fn cuda_visible(&self, devices: &[String]) -> String {
        let inventory = self.inventory();
        let uuids: Option<Vec<&str>> = devices
            .iter()
            .map(|id| {
                inventory
                    .find(id)
                    .map(|d| d.uuid.as_str())
                    .filter(|u| u.starts_with("GPU-"))
            })
            .collect();
        match uuids {
            Some(uuids) => uuids.join(","),
            None => (0..devices.len()).map(|i| i.to_string()).collect::<Vec<_>>().join(","),
        }
    }

    /// The device minor of pool id `id`: the driver's, where nvidia-smi
    /// and procfs say it; else an index is taken as the minor.
    fn minor(&self, id: &str) -> Result<u32> {
        let inventory = self.inventory();
        if let Some(minor) = inventory.find(id).and_then(|d| d.minor) {
            return Ok(minor);
        }
        match id.parse() {
            Ok(index) => Ok(index),
            Err(_) => bail!(
                "GPU {id}: no GPU of this UUID is known here ({}), so its device node cannot be found",
                inventory
                    .unavailable
                    .clone()
                    .unwrap_or_else(|| "nvidia-smi does not list it".into())
            ),
        }
    }

    /// The device node `name` in the device folder: none where it is
    /// absent and not `required`, an error naming it where it is required
    /// or is not a character device.
    fn node(&self, name: &str, required: bool, gpu: &str) -> Result<Option<PathBuf>> {
        let path = self.dev_dir.join(name);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.file_type().is_char_device() => Ok(Some(path)),
            Ok(_) => bail!("{} is not a character device", path.display()),
            Err(_) if !required => Ok(None),
            Err(_) if gpu == "control" => bail!(
                "{} does not exist: no NVIDIA driver is loaded on this host",
                path.display()
            ),
            Err(_) => bail!(
                "GPU {gpu}: {} does not exist: this host has no such NVIDIA GPU",
                path.display()
            ),
        }
    }

    /// The driver's library folders, as set or as found (once).
    fn driver_dirs(&self) -> &[PathBuf] {
        if let Some(dirs) = &self.driver_dirs {
            return dirs;
        }
        self.found_dirs.get_or_init(find_driver_dirs)
    }
}

/// The folders holding the driver's libraries: where the loader's cache
/// (`ldconfig -p`) and the host's `LD_LIBRARY_PATH` find them.
fn find_driver_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut add = |dir: &Path| {
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_path_buf());
        }
    };
    for ldconfig in ["/sbin/ldconfig", "/usr/sbin/ldconfig"] {
        let Ok(output) = std::process::Command::new(ldconfig).arg("-p").output() else {
            continue;
        };
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or_default();
            let Some((_, path)) = line.split_once(" => ") else {
                continue;
            };
            if DRIVER_LIBRARIES.contains(&name)
                && let Some(dir) = Path::new(path.trim()).parent()
            {
                add(dir);
            }
        }
        break;
    }
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        for dir in std::env::split_paths(&paths) {
            if DRIVER_LIBRARIES.iter().any(|lib| dir.join(lib).exists()) {
                add(&dir);
            }
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_with(dev: &Path, inventory: Inventory) -> GpuHost {
        let host = GpuHost {
            dev_dir: dev.to_path_buf(),
            driver_dirs: Some(vec!["/usr/lib/x86_64-linux-gnu".into(), "/opt/driver/lib".into()]),
            ..GpuHost::default()
        };
        host.inventory.set(inventory).unwrap();
        host
    }

    /// A character device node at `path` (a copy of /dev/null's numbers).
    fn mknod(path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let rdev = std::fs::metadata("/dev/null").unwrap().rdev();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o666),
            rdev,
        )
        .is_ok()
    }

    #[test]
    fn a_lease_gets_its_nodes_the_control_nodes_and_variables_that_name_it_inside() {
        let dev = tempfile::tempdir().unwrap();
        for name in ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"] {
            if !mknod(&dev.path().join(name)) {
                eprintln!("skipped: mknod needs privileges here");
                assert!(std::env::var("CI").as_deref() != Ok("true"), "mknod failed under CI");
                return;
            }
        }
        let none = Inventory {
            unavailable: Some("nvidia-smi cannot be run".into()),
            ..Inventory::default()
        };
        let passthrough = host_with(dev.path(), none).passthrough(&["1".into()]).unwrap();
        let names: Vec<_> = passthrough
            .nodes
            .iter()
            .map(|n| n.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["nvidia1", "nvidiactl", "nvidia-uvm"]);
        assert_eq!(
            passthrough.libraries,
            [PathBuf::from("/opt/driver/lib")],
            "/usr is seen anyway"
        );
        let env = |name: &str| passthrough.env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        assert_eq!(
            env("CUDA_VISIBLE_DEVICES").as_deref(),
            Some("0"),
            "the one device CUDA sees"
        );
        assert_eq!(env("NVIDIA_VISIBLE_DEVICES").as_deref(), Some("1"));

        // nvidia-smi's index 1 is the driver's minor 0, with a UUID.
        let listed = Inventory {
            devices: vec![super::super::Device {
                index: "1".into(),
                uuid: "GPU-1111".into(),
                memory_mib: Some(1024.0),
                minor: Some(0),
            }],
            unavailable: None,
        };
        let host = host_with(dev.path(), listed);
        let passthrough = host.passthrough(&["1".into()]).unwrap();
        assert_eq!(passthrough.nodes[0], dev.path().join("nvidia0"));
        assert!(
            passthrough
                .env
                .contains(&("CUDA_VISIBLE_DEVICES".into(), "GPU-1111".into()))
        );
        let error = host.passthrough(&["GPU-9999".into()]).unwrap_err().to_string();
        assert!(
            error.contains("GPU GPU-9999") && error.contains("nvidia-smi does not list it"),
            "{error}"
        );
        let error = host.passthrough(&["7".into()]).unwrap_err().to_string();
        assert!(
            error.contains("GPU 7:") && error.contains("nvidia7 does not exist"),
            "{error}"
        );
        std::fs::remove_file(dev.path().join("nvidiactl")).unwrap();
        let error = host.passthrough(&["1".into()]).unwrap_err().to_string();
        assert!(error.contains("nvidiactl does not exist: no NVIDIA driver"), "{error}");
        std::fs::write(dev.path().join("nvidiactl"), "").unwrap();
        let error = host.passthrough(&["1".into()]).unwrap_err().to_string();
        assert!(error.contains("not a character device"), "{error}");
    }

    /// What the driver reads of sysfs is bound at its place under `/sys`,
    /// where the host has it; nothing else of sysfs is.
    #[test]
    fn the_driver_s_parts_of_sysfs_are_bound_where_the_host_has_them() {
        let sys = tempfile::tempdir().unwrap();
        for dir in [
            "module/nvidia",
            "module/nvidia_uvm",
            "module/ext4",
            "bus/pci/devices",
            "devices/pci0000:00/0000:17:00.0",
            "devices/virtual/net",
            "devices/system/cpu",
        ] {
            std::fs::create_dir_all(sys.path().join(dir)).unwrap();
        }
        let host = GpuHost {
            sys_dir: sys.path().to_path_buf(),
            ..GpuHost::default()
        };
        let guests: Vec<String> = host
            .sysfs()
            .iter()
            .map(|(from, to)| {
                assert_eq!(from, &sys.path().join(to.strip_prefix("/sys").unwrap()));
                to.display().to_string()
            })
            .collect();
        assert_eq!(
            guests,
            [
                "/sys/module/nvidia",
                "/sys/module/nvidia_uvm",
                "/sys/bus/pci",
                "/sys/devices/pci0000:00",
                "/sys/devices/system/cpu"
            ]
        );
    }
}

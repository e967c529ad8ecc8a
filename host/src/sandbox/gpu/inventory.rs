//! What this host's NVIDIA driver says of its GPUs: nvidia-smi's index,
//! UUID, memory and PCI address of each, and the minor number of its
//! device node (`/dev/nvidia<minor>`), which the driver assigns in its own
//! order: nvidia-smi's index 3 may well be `/dev/nvidia0`.

use std::path::Path;

/// One GPU as the driver describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// nvidia-smi's index (what `--gpus 0,1` and Docker name a device by).
    pub index: String,
    /// Its UUID (`GPU-…`).
    pub uuid: String,
    /// Its memory, in MiB.
    pub memory_mib: Option<f64>,
    /// The minor number of its device node, where the driver's
    /// `gpus/<PCI address>/information` says it.
    pub minor: Option<u32>,
}

/// The GPUs nvidia-smi lists, or why none could be listed.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Every GPU listed, in nvidia-smi's order.
    pub devices: Vec<Device>,
    /// Why nothing was listed (nvidia-smi missing or failing), if so.
    pub unavailable: Option<String>,
}

/// What nvidia-smi is asked, one GPU a line.
const QUERY: &str = "--query-gpu=index,uuid,memory.total,pci.bus_id";

impl Inventory {
    /// Asks the `nvidia-smi` on this host's PATH; `proc_dir` is the
    /// driver's folder in procfs (`/proc/driver/nvidia`), where each GPU's
    /// device minor is read.
    pub fn probe(proc_dir: &Path) -> Self {
        let output = std::process::Command::new("nvidia-smi")
            .args([QUERY, "--format=csv,noheader,nounits"])
            .stdin(std::process::Stdio::null())
            .output();
        let unavailable = |why: String| Self {
            devices: Vec::new(),
            unavailable: Some(why),
        };
        match output {
            Err(error) => unavailable(format!("nvidia-smi cannot be run ({error})")),
            Ok(output) if !output.status.success() => unavailable(format!(
                "nvidia-smi failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )),
            Ok(output) => Self {
                devices: parse(&String::from_utf8_lossy(&output.stdout), proc_dir),
                unavailable: None,
            },
        }
    }

    /// The GPU a pool's device id names: by index or by UUID.
    pub fn find(&self, id: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.index == id || d.uuid == id)
    }
}

/// nvidia-smi's CSV lines (`index, uuid, MiB, PCI address`) as devices.
fn parse(text: &str, proc_dir: &Path) -> Vec<Device> {
    let mut devices = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [index, uuid, mib, bus] = fields[..] else { continue };
        devices.push(Device {
            index: index.to_string(),
            uuid: uuid.to_string(),
            memory_mib: mib.parse().ok(),
            minor: device_minor(proc_dir, bus),
        });
    }
    devices
}

/// The minor number the driver gave the GPU at PCI address `bus`
/// (nvidia-smi writes `00000000:17:00.0`; procfs names it `0000:17:00.0`).
fn device_minor(proc_dir: &Path, bus: &str) -> Option<u32> {
    let (domain, rest) = bus.split_once(':')?;
    let domain = &domain[domain.len().saturating_sub(4)..];
    let name = format!("{domain}:{rest}").to_ascii_lowercase();
    let text = std::fs::read_to_string(proc_dir.join("gpus").join(name).join("information")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("Device Minor:"))
        .and_then(|minor| minor.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_minor_comes_from_the_driver_not_the_index() {
        let proc = tempfile::tempdir().unwrap();
        let gpu = proc.path().join("gpus/0000:c1:00.0");
        std::fs::create_dir_all(&gpu).unwrap();
        std::fs::write(
            gpu.join("information"),
            "Model: \t X\nDevice Minor: \t 0\nBus Type: PCIe\n",
        )
        .unwrap();
        let text = "3, GPU-aaaa, 81559, 00000000:C1:00.0\n0, GPU-bbbb, 81559, 00000000:17:00.0\nnot a line\n";
        let devices = parse(text, proc.path());
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[0].minor, Some(0), "index 3 is /dev/nvidia0 here");
        assert_eq!(devices[0].memory_mib, Some(81559.0));
        assert_eq!(devices[1].minor, None, "no procfs entry: unknown, not guessed");
        let inventory = Inventory {
            devices,
            unavailable: None,
        };
        assert_eq!(inventory.find("GPU-bbbb").map(|d| d.index.as_str()), Some("0"));
        assert_eq!(inventory.find("3").map(|d| d.uuid.as_str()), Some("GPU-aaaa"));
        assert!(inventory.find("1").is_none());
    }
}

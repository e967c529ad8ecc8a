//! The GPUs a host may hand out (`--gpus 0,1,...`) and the leases that
//! give an episode specific devices: two leases never share a device.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use anyhow::{Result, bail};

/// The GPUs this host may hand out, and which of them are free.
#[derive(Debug, Clone, Default)]
pub struct GpuPool {
    all: Vec<String>,
    free: Arc<Mutex<BTreeSet<String>>>,
}

/// Devices held by one episode; they return to the pool when dropped.
#[derive(Debug)]
pub struct GpuLease {
    devices: Vec<String>,
    pool: Arc<Mutex<BTreeSet<String>>>,
}

impl GpuPool {
    /// A pool of the given device ids (`--gpus 0,1` gives "0" and "1").
    pub fn new(devices: &[String]) -> Result<Self> {
        let mut unique = BTreeSet::new();
        for device in devices {
            let device = device.trim();
            if device.is_empty() || !device.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                bail!("--gpus: `{device}` is not a device id (use indexes such as 0,1 or GPU UUIDs)");
            }
            if !unique.insert(device.to_string()) {
                bail!("--gpus: device {device} is listed twice");
            }
        }
        Ok(Self {
            all: unique.iter().cloned().collect(),
            free: Arc::new(Mutex::new(unique)),
        })
    }

    /// How many devices the pool holds.
    pub fn size(&self) -> usize {
        self.all.len()
    }

    /// Every device of the pool, free or not.
    pub fn devices(&self) -> &[String] {
        &self.all
    }

    /// Takes `count` free devices, or says why it cannot.
    pub fn acquire(&self, count: u32) -> Result<GpuLease> {
        let count = count as usize;
        if count > self.all.len() {
            bail!(
                "the task needs {count} GPU(s) and this host was given {} (--gpus {}): nothing was started",
                self.all.len(),
                if self.all.is_empty() {
                    "none".to_string()
                } else {
                    self.all.join(",")
                }
            );
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < count {
            bail!(
                "the task needs {count} GPU(s) and only {} of {} are free now",
                free.len(),
                self.all.len()
            );
        }
        let devices: Vec<String> = free.iter().take(count).cloned().collect();
        for device in &devices {
            free.remove(device);
        }
        Ok(GpuLease {
            devices,
            pool: self.free.clone(),
        })
    }
}

impl GpuLease {
    /// The device ids this lease holds.
    pub fn devices(&self) -> &[String] {
        &self.devices
    }
}

impl Drop for GpuLease {
    fn drop(&mut self) {
        let mut free = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        free.extend(self.devices.drain(..));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(ids: &[&str]) -> GpuPool {
        GpuPool::new(&ids.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn concurrent_leases_never_share_a_device() {
        let pool = pool(&["0", "1", "2", "3"]);
        let a = pool.acquire(2).unwrap();
        let b = pool.acquire(2).unwrap();
        let mut all: Vec<&String> = a.devices().iter().chain(b.devices()).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 4);
        assert!(
            pool.acquire(1)
                .unwrap_err()
                .to_string()
                .contains("only 0 of 4 are free")
        );
        drop(a);
        let c = pool.acquire(2).unwrap();
        assert!(c.devices().iter().all(|d| !b.devices().contains(d)));
    }

    #[test]
    fn asking_for_more_than_the_host_has_is_refused_up_front() {
        let err = pool(&["0"]).acquire(2).unwrap_err().to_string();
        assert!(err.contains("needs 2 GPU(s)") && err.contains("--gpus 0"), "{err}");
        let err = GpuPool::default().acquire(1).unwrap_err().to_string();
        assert!(err.contains("--gpus none"), "{err}");
        assert!(GpuPool::new(&["0".into(), "0".into()]).is_err());
        assert!(GpuPool::new(&["0;rm".into()]).is_err());
    }

    #[test]
    fn many_threads_never_hand_out_a_device_twice() {
        let pool = pool(&["0", "1", "2"]);
        let held = Arc::new(Mutex::new(BTreeSet::new()));
        std::thread::scope(|scope| {
            for _ in 0..8 {
                let (pool, held) = (pool.clone(), held.clone());
                scope.spawn(move || {
                    for _ in 0..200 {
                        if let Ok(lease) = pool.acquire(1) {
                            let device = lease.devices()[0].clone();
                            assert!(held.lock().unwrap().insert(device.clone()), "{device} handed out twice");
                            std::thread::yield_now();
                            held.lock().unwrap().remove(&device);
                        }
                    }
                });
            }
        });
    }
}

//! A container's configuration: its command (the watch on the lifeline,
//! and the egress relay), mounts, limits, users, capabilities, seccomp
//! profile, network, GPUs and labels.

use std::collections::HashMap;

use bollard::models::{
    ContainerCreateBody, DeviceRequest, HostConfig, Mount as DockerMount, MountType, ResourcesUlimits,
};

use super::labels::{LABEL_EPISODE, LABEL_HOST, LABEL_MANAGED};
use super::launch_dir::{LAUNCH_DIR, LIFELINE, WATCH};
use super::users::{INIT_USER, RELAY_USER};
use crate::sandbox::egress::gateway;
use crate::sandbox::{EpisodeSetup, Mount, Reach};

/// How many CPUs this host has.
fn host_cpus() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// What a container is made of: mounts, limits, no network unless granted,
/// read-only root, private /tmp, a plain user, no capabilities, labels.
pub fn container_body(image: &str, setup: &EpisodeSetup, role: &str) -> ContainerCreateBody {
    let labels = HashMap::from([
        (LABEL_MANAGED.to_string(), "1".to_string()),
        (LABEL_EPISODE.to_string(), setup.name.clone()),
        (LABEL_HOST.to_string(), crate::process::current_token()),
        ("mlrb.role".to_string(), role.to_string()),
    ]);
    let env = crate::sandbox::script_environment(setup.limits.cpus)
        .into_iter()
        .chain(setup.network.environment())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let lifetime = setup.lifetime.as_secs().max(1).to_string();
    // The container ends when this host's lifeline closes (the host ended,
    // however) or its time is up. Behind a proxy, its main process (not the
    // sandbox user's, so no script can end it) also relays the scripts'
    // proxy port to the proxy's socket until then.
    let watch = format!("exec timeout \"$1\" python3 -I -S -c \"$2\" {LAUNCH_DIR}/{LIFELINE}");
    let script = match setup.network {
        Reach::Proxy(_) => format!(
            "setpriv --reuid={RELAY_USER} --regid={RELAY_USER} --clear-groups python3 -I -S -c \"$0\" serve \"$1\" & {watch}"
        ),
        _ => watch,
    };
    let cmd = vec![
        "sh".into(),
        "-c".into(),
        script,
        gateway::FORWARDER.into(),
        lifetime,
        WATCH.into(),
    ];
    ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(cmd),
        user: Some(INIT_USER.into()),
        working_dir: Some(setup.cwd.to_string_lossy().into_owned()),
        env: Some(env),
        labels: Some(labels),
        network_disabled: Some(setup.network == Reach::Nothing),
        host_config: Some(host_config(setup)),
        ..Default::default()
    }
}

/// Mounts, limits and lock-down of a container.
fn host_config(setup: &EpisodeSetup) -> HostConfig {
    let socket = match &setup.network {
        Reach::Proxy(socket) => Some(Mount::writable(socket, gateway::GUEST_SOCKET)),
        _ => None,
    };
    let mounts = setup
        .mounts
        .iter()
        .chain(&socket)
        .map(|m| DockerMount {
            target: Some(m.guest.to_string_lossy().into_owned()),
            source: Some(
                std::path::absolute(&m.host)
                    .unwrap_or_else(|_| m.host.clone())
                    .to_string_lossy()
                    .into_owned(),
            ),
            typ: Some(MountType::BIND),
            read_only: Some(!m.writable),
            ..Default::default()
        })
        .collect();
    // Specific devices, never a count: the pool has made sure no other
    // episode holds them.
    let device_requests = (!setup.gpus.is_empty()).then(|| {
        vec![DeviceRequest {
            driver: Some("nvidia".into()),
            device_ids: Some(setup.gpus.clone()),
            capabilities: Some(vec![vec!["gpu".into()]]),
            ..Default::default()
        }]
    });
    // The same as every local command's (`limits::always`); memory and
    // processes are the container's control group's.
    let ulimits: Vec<ResourcesUlimits> = crate::sandbox::limits::always(&setup.limits)
        .into_iter()
        .map(|limit| ResourcesUlimits {
            name: Some(limit.name.into()),
            soft: Some(limit.value as i64),
            hard: Some(limit.value as i64),
        })
        .collect();
    HostConfig {
        mounts: Some(mounts),
        readonly_rootfs: Some(true),
        tmpfs: Some(HashMap::from([(
            "/tmp".to_string(),
            "rw,nosuid,nodev,size=1g,mode=1777".to_string(),
        )])),
        network_mode: Some(if setup.network == Reach::Host { "bridge" } else { "none" }.into()),
        memory: Some(setup.limits.memory_bytes as i64),
        memory_swap: Some(setup.limits.memory_bytes as i64),
        pids_limit: Some(setup.limits.max_processes as i64),
        // The engine refuses a quota above the host's CPUs; that many is
        // all a task could get there anyway.
        nano_cpus: Some((setup.limits.cpus.min(host_cpus()) * 1e9) as i64),
        cap_drop: Some(vec!["ALL".into()]),
        // Only for the launcher (root): scripts run as a plain user and
        // get none (no-new-privileges, no setuid program can give them).
        cap_add: Some(vec!["SETUID".into(), "SETGID".into()]),
        security_opt: Some(vec![
            "no-new-privileges".into(),
            format!("seccomp={}", crate::sandbox::seccomp::docker_profile()),
        ]),
        init: Some(true),
        ulimits: Some(ulimits),
        device_requests,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sandbox::docker::users::SANDBOX_USER;

    /// A task asking for more CPUs than the host has gets the host's, not
    /// a container the engine refuses.
    #[test]
    fn a_cpu_quota_above_the_host_is_capped_at_its_cpus() {
        let setup = EpisodeSetup {
            name: "/runs/r/t/a/0".into(),
            mounts: Vec::new(),
            cwd: "/workspace".into(),
            network: Reach::Nothing,
            limits: crate::sandbox::CommandLimits {
                cpus: 1000.0,
                ..crate::sandbox::CommandLimits::new(&crate::limits::Limits::default(), Duration::from_secs(600))
            },
            gpus: Vec::new(),
            lifetime: Duration::from_secs(3600),
        };
        let host = container_body("mlrb-runtime:abc", &setup, "episode")
            .host_config
            .unwrap();
        assert_eq!(host.nano_cpus, Some((host_cpus() * 1e9) as i64));
        assert!(host_cpus() < 1000.0);
    }

    #[test]
    fn the_container_configuration_is_locked_down_and_names_its_gpus() {
        let setup = EpisodeSetup {
            name: "/runs/r/digits/baseline/0".into(),
            mounts: vec![
                Mount::writable("/runs/ws", "/workspace"),
                Mount::read_only("/runs/ws/data/train.csv", "/workspace/data/train.csv"),
            ],
            cwd: "/workspace".into(),
            network: Reach::Nothing,
            limits: crate::sandbox::CommandLimits {
                cpus: 1.5,
                max_file_bytes: 1 << 30,
                ..crate::sandbox::CommandLimits::new(&crate::limits::Limits::default(), Duration::from_secs(600))
            },
            gpus: vec!["1".into(), "3".into()],
            lifetime: Duration::from_secs(3600),
        };
        let body = container_body("mlrb-runtime:abc", &setup, "episode");
        assert_eq!(body.image.as_deref(), Some("mlrb-runtime:abc"));
        // The init runs as a user no script runs as; scripts are execs as 1000.
        assert_eq!(body.user.as_deref(), Some(INIT_USER));
        assert_ne!(INIT_USER, SANDBOX_USER);
        assert_eq!(body.network_disabled, Some(true));
        let labels = body.labels.unwrap();
        assert_eq!(labels[LABEL_MANAGED], "1");
        assert_eq!(labels[LABEL_EPISODE], "/runs/r/digits/baseline/0");
        assert_eq!(labels[LABEL_HOST], crate::process::current_token());
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.memory, Some(2 << 30));
        assert_eq!(host.memory_swap, Some(2 << 30));
        assert_eq!(host.pids_limit, Some(256));
        assert_eq!(host.nano_cpus, Some(1_500_000_000));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        // Only what a root launcher needs to start scripts as the sandbox user.
        assert_eq!(host.cap_add, Some(vec!["SETUID".to_string(), "SETGID".to_string()]));
        let watch = body.cmd.clone().unwrap();
        assert_eq!(watch[..2], ["sh", "-c"]);
        assert!(
            watch[2].starts_with("exec timeout \"$1\" python3 -I -S -c \"$2\" /run/mlrb/host"),
            "{watch:?}"
        );
        let security = host.security_opt.clone().unwrap();
        assert!(security.contains(&"no-new-privileges".to_string()));
        assert!(
            security
                .iter()
                .any(|o| o.starts_with("seccomp=") && o.contains("pidfd_getfd"))
        );
        let ulimits = host.ulimits.clone().unwrap();
        assert!(
            ulimits
                .iter()
                .any(|u| u.name.as_deref() == Some("fsize") && u.hard == Some(1 << 30))
        );
        assert!(host.tmpfs.unwrap().contains_key("/tmp"));
        let mounts = host.mounts.unwrap();
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[0].read_only, Some(false));
        assert_eq!(mounts[1].read_only, Some(true));
        assert_eq!(mounts[1].target.as_deref(), Some("/workspace/data/train.csv"));
        let requests = host.device_requests.unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].device_ids, Some(vec!["1".to_string(), "3".to_string()]));
        assert_eq!(requests[0].count, None, "specific devices, never a count");
        assert_eq!(requests[0].capabilities, Some(vec![vec!["gpu".to_string()]]));

        let without = container_body(
            "i",
            &EpisodeSetup {
                gpus: vec![],
                network: Reach::Host,
                ..setup.clone()
            },
            "episode",
        );
        let host = without.host_config.unwrap();
        assert!(host.device_requests.is_none());
        assert_eq!(host.network_mode.as_deref(), Some("bridge"));

        // Behind a proxy: still no network of its own, the proxy's socket
        // bound in, the relay as the container's main process.
        let proxied = container_body(
            "i",
            &EpisodeSetup {
                network: Reach::Proxy("/tmp/mlrb-egress-x/egress.sock".into()),
                ..setup
            },
            "episode",
        );
        let host = proxied.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        let socket = host.mounts.unwrap().pop().unwrap();
        assert_eq!(socket.target.as_deref(), Some(gateway::GUEST_SOCKET));
        assert_eq!(socket.source.as_deref(), Some("/tmp/mlrb-egress-x/egress.sock"));
        // The relay beside the watch on the host's lifeline.
        let cmd = proxied.cmd.unwrap();
        assert!(
            cmd[2].contains("\"$0\" serve") && cmd[2].contains("/run/mlrb/host"),
            "{cmd:?}"
        );
        assert_eq!(cmd[3], gateway::FORWARDER);
        assert!(
            proxied
                .env
                .unwrap()
                .contains(&"HTTPS_PROXY=http://127.0.0.1:3128".to_string())
        );
    }
}

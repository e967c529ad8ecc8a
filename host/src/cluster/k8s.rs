//! The Kubernetes Job mlrb would run its workers as: an indexed Job of
//! `mlrb worker` pods that reach the run's `mlrb serve`, the token mounted
//! from a Secret (never in the manifest), scripts confined by the pod's
//! own sandboxing plus bubblewrap inside it. Built from the `k8s-openapi`
//! types, so that what is printed is a Job the API server takes.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::bench::Plan;
use crate::bench::placement::K8sSetup;

/// The worker container: its command, resources and the token's mount.
fn container(k8s: &K8sSetup, parallel: Option<usize>, url: &str) -> Container {
    let mut requests = BTreeMap::from([
        (
            "cpu".to_string(),
            Quantity(k8s.cpus_per_worker.unwrap_or(2).to_string()),
        ),
        (
            "memory".to_string(),
            Quantity(format!("{}Mi", k8s.memory_mb_per_worker.unwrap_or(8192))),
        ),
    ]);
    let mut limits = BTreeMap::new();
    if let Some(gpus) = k8s.gpus_per_worker.filter(|g| *g > 0) {
        limits.insert("nvidia.com/gpu".to_string(), Quantity(gpus.to_string()));
        requests.insert("nvidia.com/gpu".to_string(), Quantity(gpus.to_string()));
    }
    let mut command = vec![
        "mlrb".to_string(),
        "worker".into(),
        "--server".into(),
        url.to_string(),
        "--token-file".into(),
        format!("{TOKEN_DIR}/token"),
        "--name".into(),
        "$(POD_NAME)".into(),
    ];
    if let Some(parallel) = parallel {
        command.extend(["--parallel".to_string(), parallel.to_string()]);
    }
    Container {
        name: "worker".into(),
        image: Some(k8s.image.clone().unwrap_or_else(|| "mlrb-worker:latest".into())),
        command: Some(command),
        env: Some(vec![EnvVar {
            name: "POD_NAME".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.name".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(requests),
            limits: (!limits.is_empty()).then_some(limits),
            ..Default::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "token".into(),
            mount_path: TOKEN_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// Where the token's Secret is mounted in a worker pod.
const TOKEN_DIR: &str = "/var/run/secrets/mlrb";

/// The name of a run's objects: a DNS label from its directory's name.
pub fn object_name(dir: &Path) -> String {
    let raw = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let label: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let label = format!("mlrb-{}", label.trim_matches('-'));
    label
        .chars()
        .take(52)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// The Job of a run's workers, reaching the server at `url`.
pub fn manifest(plan: &Plan, dir: &Path, url: &str) -> Result<Job> {
    let k8s = plan.k8s.clone().unwrap_or_default();
    let cluster = plan.cluster.clone().unwrap_or_default();
    let name = object_name(dir);
    let workers = i32::try_from(cluster.workers.max(1))?;
    let container = container(&k8s, cluster.parallel, url);
    let labels = BTreeMap::from([("app.kubernetes.io/name".to_string(), "mlrb-worker".to_string())]);
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(k8s.namespace.clone().unwrap_or_else(|| "default".into())),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(workers),
            parallelism: Some(workers),
            // A pod that dies is started again; its lease returns to the
            // queue on expiry either way, so retries lose nothing.
            backoff_limit: Some(workers * 3),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("OnFailure".into()),
                    // The worker's SIGTERM handling gives leases back in time.
                    termination_grace_period_seconds: Some(120),
                    automount_service_account_token: Some(false),
                    containers: vec![container],
                    volumes: Some(vec![Volume {
                        name: "token".into(),
                        secret: Some(SecretVolumeSource {
                            secret_name: Some(format!("{name}-token")),
                            default_mode: Some(0o400),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::Job;

    use super::{manifest, object_name};
    use crate::bench::Plan;
    use crate::bench::placement::{ClusterSetup, K8sSetup};

    #[test]
    fn the_manifest_parses_back_as_an_indexed_job_with_the_token_from_a_secret() {
        let plan = Plan {
            cluster: Some(ClusterSetup {
                workers: 500,
                ..Default::default()
            }),
            k8s: Some(K8sSetup {
                image: Some("registry.lab/mlrb:1".into()),
                gpus_per_worker: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        };
        let dir = std::path::Path::new("/runs/20261125_Bench.1");
        let text = serde_json::to_string(&manifest(&plan, dir, "http://login:8700").unwrap()).unwrap();
        let job: Job = serde_json::from_str(&text).unwrap();
        let spec = job.spec.unwrap();
        assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!((spec.completions, spec.parallelism), (Some(500), Some(500)));
        let pod = spec.template.spec.unwrap();
        let secret = pod.volumes.unwrap()[0].secret.clone().unwrap();
        assert_eq!(secret.secret_name.as_deref(), Some("mlrb-20261125-bench-1-token"));
        let container = &pod.containers[0];
        let command = container.command.clone().unwrap().join(" ");
        assert!(command.contains("--server http://login:8700 --token-file /var/run/secrets/mlrb/token"));
        let gpu = &container.resources.as_ref().unwrap().limits.as_ref().unwrap()["nvidia.com/gpu"];
        assert_eq!(gpu.0, "1");
        assert!(
            text.contains("\"apiVersion\":\"batch/v1\"") && text.contains("\"kind\":\"Job\""),
            "{text}"
        );
        assert_eq!(object_name(std::path::Path::new("/r/--x--")), "mlrb-x");
    }
}

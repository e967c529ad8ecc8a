//! The Kubernetes Job mlrb would run its workers as: an indexed Job of
//! `mlrb worker` pods that reach the run's `mlrb serve`, the token mounted
//! from a Secret (never in the manifest), scripts confined by the pod's
//! own sandboxing plus bubblewrap inside it. Written as JSON (the API's
//! field names); the tests read it back with the `k8s-openapi` types, so
//! that what is printed is a Job the API server takes, without the host
//! compiling the whole API for one manifest.

use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use crate::bench::Plan;
use crate::bench::placement::K8sSetup;

/// The worker container: its command, resources and the token's mount.
fn container(k8s: &K8sSetup, parallel: Option<usize>, url: &str) -> Value {
    let mut requests = json!({
        "cpu": k8s.cpus_per_worker.unwrap_or(2).to_string(),
        "memory": format!("{}Mi", k8s.memory_mb_per_worker.unwrap_or(8192)),
    });
    let mut resources = json!({ "requests": requests.clone() });
    if let Some(gpus) = k8s.gpus_per_worker.filter(|g| *g > 0) {
        requests["nvidia.com/gpu"] = gpus.to_string().into();
        resources = json!({ "requests": requests, "limits": { "nvidia.com/gpu": gpus.to_string() } });
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
    json!({
        "name": "worker",
        "image": k8s.image.clone().unwrap_or_else(|| "mlrb-worker:latest".into()),
        "command": command,
        "env": [{ "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }],
        "resources": resources,
        "volumeMounts": [{ "name": "token", "mountPath": TOKEN_DIR, "readOnly": true }],
    })
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
pub fn manifest(plan: &Plan, dir: &Path, url: &str) -> Result<Value> {
    let k8s = plan.k8s.clone().unwrap_or_default();
    let cluster = plan.cluster.clone().unwrap_or_default();
    let name = object_name(dir);
    let workers = i32::try_from(cluster.workers.max(1))?;
    let labels = json!({ "app.kubernetes.io/name": "mlrb-worker" });
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": k8s.namespace.clone().unwrap_or_else(|| "default".into()),
            "labels": labels.clone(),
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": workers,
            "parallelism": workers,
            // A pod that dies is started again; its lease returns to the
            // queue on expiry either way, so retries lose nothing.
            "backoffLimit": workers * 3,
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "restartPolicy": "OnFailure",
                    // The worker's SIGTERM handling gives leases back in time.
                    "terminationGracePeriodSeconds": 120,
                    "automountServiceAccountToken": false,
                    "containers": [container(&k8s, cluster.parallel, url)],
                    "volumes": [{
                        "name": "token",
                        "secret": { "secretName": format!("{name}-token"), "defaultMode": 0o400 },
                    }],
                },
            },
        },
    }))
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
        // Read back with the API's own types, which keep every field they
        // know: written again, the Job is the manifest, so none was unknown.
        let job: Job = serde_json::from_str(&text).unwrap();
        let written: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            serde_json::to_value(&job).unwrap(),
            written,
            "a field the API does not know"
        );
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

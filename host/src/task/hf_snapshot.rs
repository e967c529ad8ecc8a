//! A Hugging Face dataset repository's files at its main revision, fetched
//! on the host in the layout `huggingface_hub` leaves in its cache
//! (`hub/datasets--<id>/refs/main`, `.../snapshots/<commit>/<files>`), as
//! `mlrb_hub.py` reads a cache a user brought. The endpoint is
//! `HF_ENDPOINT`, as the Hugging Face libraries read it.

use std::path::Path;

use anyhow::{Result, bail};
use serde::Deserialize;

use super::fetch;

/// The Hugging Face hub, unless `HF_ENDPOINT` names another.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// The most files a dataset repository may have.
const MAX_FILES: usize = 10_000;

#[derive(Deserialize)]
struct Info {
    sha: String,
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
}

/// Fetches dataset `id` into `dir/hub/`; its commit. Errors are one line
/// naming the folder (`task`) and the hub.
pub async fn fetch(task: &str, id: &str, dir: &Path) -> Result<String> {
    fetch_from(&fetch::endpoint("HF_ENDPOINT", DEFAULT_ENDPOINT), task, id, dir).await
}

async fn fetch_from(endpoint: &str, task: &str, id: &str, dir: &Path) -> Result<String> {
    let source = format!("the Hugging Face hub ({endpoint}, dataset {id})");
    let fail = |e: anyhow::Error| anyhow::anyhow!("task {task}: {source}: {e:#}");
    let info_path = dir.join("info.json");
    let max = fetch::max_bytes();
    let url = format!("{endpoint}/api/datasets/{id}/revision/main");
    let no_hint = |_: u16| None::<String>;
    fetch::download(&url, None, &info_path, 1 << 26, &no_hint)
        .await
        .map_err(fail)?;
    let info = std::fs::read(&info_path)?;
    std::fs::remove_file(&info_path)?;
    let info: Info = serde_json::from_slice(&info)
        .map_err(|e| fail(anyhow::anyhow!("its answer about the dataset is not the hub's ({e})")))?;
    check(&info).map_err(fail)?;
    let repo = dir.join("hub").join(format!("datasets--{}", id.replace('/', "--")));
    let snapshot = repo.join("snapshots").join(&info.sha);
    let mut total = 0u64;
    for sibling in &info.siblings {
        let to = snapshot.join(&sibling.rfilename);
        std::fs::create_dir_all(to.parent().unwrap_or(&snapshot))?;
        let url = format!("{endpoint}/datasets/{id}/resolve/{}/{}", info.sha, sibling.rfilename);
        let got = fetch::download(&url, None, &to, max - total, &no_hint)
            .await
            .map_err(|e| fail(e.context(sibling.rfilename.clone())))?;
        total += got;
    }
    std::fs::create_dir_all(repo.join("refs"))?;
    std::fs::write(repo.join("refs").join("main"), &info.sha)?;
    Ok(info.sha)
}

/// Refuses a commit that is not one, and a file name that would land
/// outside the snapshot.
fn check(info: &Info) -> Result<()> {
    if info.sha.len() != 40 || !info.sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("its commit {:?} is not a commit", info.sha);
    }
    if info.siblings.is_empty() || info.siblings.len() > MAX_FILES {
        bail!("it lists {} files", info.siblings.len());
    }
    for name in info.siblings.iter().map(|s| s.rfilename.as_str()) {
        let bad = name.is_empty()
            || name.starts_with('/')
            || name.contains(['\\', '\0', '?', '#', '%'])
            || name.split('/').any(|p| p.is_empty() || p == "." || p == "..");
        if bad {
            bail!("its file {name:?} would be written outside the snapshot");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(sha: &str, files: &[&str]) -> Info {
        Info {
            sha: sha.into(),
            siblings: files
                .iter()
                .map(|f| Sibling {
                    rfilename: f.to_string(),
                })
                .collect(),
        }
    }

    fn routes(sha: &str, files: &[(&str, &[u8], Option<usize>)]) -> fetch::server::Routes {
        let names: Vec<_> = files
            .iter()
            .map(|(n, _, _)| serde_json::json!({ "rfilename": n }))
            .collect();
        let info = serde_json::json!({ "id": "stanfordnlp/imdb", "sha": sha, "siblings": names }).to_string();
        let mut routes = fetch::server::Routes::new();
        routes.insert(
            "/api/datasets/imdb/revision/main".into(),
            (200, info.into_bytes(), None),
        );
        for (name, body, length) in files {
            let path = format!("/datasets/imdb/resolve/{sha}/{name}");
            routes.insert(path, (200, body.to_vec(), *length));
        }
        routes
    }

    #[tokio::test]
    async fn a_dataset_is_fetched_in_the_hub_caches_layout() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let url = fetch::server::serve(routes(
            sha,
            &[
                ("README.md", &b"# imdb"[..], None),
                ("plain_text/test.parquet", &b"PAR1"[..], None),
            ],
        ));
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(fetch_from(&url, "imdb", "imdb", dir.path()).await.unwrap(), sha);
        let repo = dir.path().join("hub/datasets--imdb");
        assert_eq!(std::fs::read_to_string(repo.join("refs/main")).unwrap(), sha);
        let parquet = repo.join("snapshots").join(sha).join("plain_text/test.parquet");
        assert_eq!(std::fs::read(parquet).unwrap(), b"PAR1");
    }

    #[tokio::test]
    async fn a_hostile_or_short_answer_is_refused_naming_the_folder_and_the_hub() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let cases = [
            (
                routes(sha, &[("../../outside", &b"x"[..], None)]),
                "outside the snapshot",
            ),
            (routes(sha, &[("README.md", &b"# im"[..], Some(99))]), "truncated"),
            (
                routes("not-a-commit", &[("README.md", &b"x"[..], None)]),
                "not a commit",
            ),
        ];
        for (routes, says) in cases {
            let url = fetch::server::serve(routes);
            let dir = tempfile::tempdir().unwrap();
            let error = format!("{:#}", fetch_from(&url, "imdb", "imdb", dir.path()).await.unwrap_err());
            assert!(
                error.starts_with("task imdb: the Hugging Face hub (http://127.0.0.1:"),
                "{error}"
            );
            assert!(error.contains(says) && !error.contains('\n'), "{error}");
            assert!(!dir.path().join("outside").exists() && !dir.path().parent().unwrap().join("outside").exists());
        }
        let mut garbage = fetch::server::Routes::new();
        garbage.insert(
            "/api/datasets/imdb/revision/main".into(),
            (200, b"<html>".to_vec(), None),
        );
        let dir = tempfile::tempdir().unwrap();
        let error = fetch_from(&fetch::server::serve(garbage), "imdb", "imdb", dir.path())
            .await
            .unwrap_err();
        assert!(format!("{error:#}").contains("not the hub's"), "{error:#}");
    }

    #[test]
    fn hostile_listings_are_refused() {
        let sha = "a".repeat(40);
        assert!(check(&info(&sha, &["README.md", "plain_text/test-00000-of-00001.parquet"])).is_ok());
        for (bad, says) in [
            (info("main", &["README.md"]), "not a commit"),
            (info(&"../".repeat(14)[..40], &["README.md"]), "not a commit"),
            (info(&sha, &["../../etc/passwd"]), "outside"),
            (info(&sha, &["/etc/passwd"]), "outside"),
            (info(&sha, &["a//b"]), "outside"),
            (info(&sha, &[]), "lists 0 files"),
        ] {
            let error = check(&bad).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
    }
}

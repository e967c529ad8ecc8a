//! Network as a capability: what an episode may connect to, as a list of
//! host patterns and ports (optionally HTTP methods) with byte, connection
//! and idle limits; nothing by default. Checked by the episode's egress
//! proxy (`sandbox::egress`) for scripts and by the agent's wasi:http; what
//! the connections came to is kept as [`NetworkUse`]. A base-layer type:
//! limits, tasks and records all name it.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

/// One allowed destination: a host (exact, `*.` and a suffix, or `*`) and
/// a port (or `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    host: HostPattern,
    /// `None`: any port.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// This name or address exactly.
    Exact(String),
    /// Any name ending in `.<suffix>` (not the suffix itself).
    Subdomains(String),
    /// Any public destination (`network = true`).
    Any,
}

/// A host name as compared: lower case, without a trailing dot.
pub fn canonical(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl std::str::FromStr for Rule {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Self> {
        let Some((host, port)) = text.rsplit_once(':') else {
            bail!("`{text}`: an allowed destination is host:port (e.g. huggingface.co:443)");
        };
        let port = match port {
            "*" => None,
            _ => match port.parse::<u16>() {
                Ok(port) => Some(port),
                Err(_) => bail!("`{text}`: `{port}` is not a port (or `*`)"),
            },
        };
        let host = canonical(host.trim_start_matches('[').trim_end_matches(']'));
        let valid = |name: &str| {
            !name.is_empty()
                && name
                    .split('.')
                    .all(|label| !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        };
        let pattern = match host.strip_prefix("*.") {
            Some(suffix) if valid(suffix) && suffix.contains('.') => HostPattern::Subdomains(suffix.to_string()),
            Some(_) => bail!("`{text}`: a wildcard is `*.` before a domain of two labels or more (e.g. *.hf.co:443)"),
            None if host == "*" => HostPattern::Any,
            None if host.parse::<IpAddr>().is_ok() || valid(&host) => HostPattern::Exact(host),
            None => bail!("`{text}`: `{host}` is not a host name, an address or `*.domain`"),
        };
        Ok(Self { host: pattern, port })
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let port = self.port.map_or("*".to_string(), |p| p.to_string());
        match &self.host {
            HostPattern::Exact(host) if host.contains(':') => write!(f, "[{host}]:{port}"),
            HostPattern::Exact(host) => write!(f, "{host}:{port}"),
            HostPattern::Subdomains(suffix) => write!(f, "*.{suffix}:{port}"),
            HostPattern::Any => write!(f, "*:{port}"),
        }
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

impl Rule {
    /// Whether this rule lets `host:port` be reached.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = canonical(host);
        self.port.is_none_or(|p| p == port)
            && match &self.host {
                HostPattern::Exact(exact) => *exact == host,
                HostPattern::Subdomains(suffix) => host
                    .strip_suffix(suffix.as_str())
                    .is_some_and(|head| head.ends_with('.') && head.len() > 1),
                HostPattern::Any => true,
            }
    }

    /// Whether this rule names `host` (an address) exactly: only then may
    /// an address that is not public be reached.
    pub fn names(&self, host: &str) -> bool {
        matches!(&self.host, HostPattern::Exact(exact) if *exact == canonical(host))
    }

    /// Whether everything this rule allows, `wider` allows too.
    fn within(&self, wider: &Rule) -> bool {
        let ports = match (self.port, wider.port) {
            (_, None) => true,
            (Some(a), Some(b)) => a == b,
            (None, Some(_)) => false,
        };
        ports
            && match (&self.host, &wider.host) {
                (_, HostPattern::Any) => true,
                (HostPattern::Any, _) => false,
                (HostPattern::Exact(host), _) => wider.allows(host, self.port.or(wider.port).unwrap_or(0)),
                (HostPattern::Subdomains(a), HostPattern::Subdomains(b)) => {
                    a == b || a.strip_suffix(b.as_str()).is_some_and(|head| head.ends_with('.'))
                }
                (HostPattern::Subdomains(_), HostPattern::Exact(_)) => false,
            }
    }
}

/// An allow-list grant: where connections may go, and how much may cross.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowList {
    /// Destinations, as `host:port` (`*.domain:port` for its subdomains).
    pub allow: Vec<Rule>,
    /// HTTP methods allowed in plain HTTP requests [default: any]; a
    /// CONNECT tunnel (HTTPS) is opened whatever is inside.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Bytes an episode may send out, in MiB [default: 1024].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_mb: Option<u64>,
    /// Bytes an episode may receive, in MiB [default: 10240].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_mb: Option<u64>,
    /// Connections an episode may open [default: 1000].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u32>,
    /// Seconds a connection may pass no byte before it is closed [default: 60].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<u64>,
}

/// Why a destination is refused, or None when the grant allows it.
pub fn refusal(list: &AllowList, host: &str, port: u16, method: Option<&str>) -> Option<String> {
    if !list.allow.iter().any(|rule| rule.allows(host, port)) {
        return Some(format!("{host}:{port} is not in the task's network grant"));
    }
    match method {
        Some(method) if !list.methods.is_empty() && !list.methods.iter().any(|m| m.eq_ignore_ascii_case(method)) => {
            Some(format!(
                "{method} is not among the granted methods ({})",
                list.methods.join(", ")
            ))
        }
        _ => None,
    }
}

impl AllowList {
    /// The largest egress, ingress (bytes), connections and idle time (s).
    pub fn caps(&self) -> (u64, u64, u32, u64) {
        (
            self.egress_mb.unwrap_or(1024) << 20,
            self.ingress_mb.unwrap_or(10_240) << 20,
            self.connections.unwrap_or(1000),
            self.idle_seconds.unwrap_or(60),
        )
    }

    /// This grant narrowed by a run's or plan's: every destination it names
    /// must be one the task grants, its methods among the task's, its caps
    /// the smaller. `what` names the narrowing one in errors.
    pub fn narrowed_by(&self, narrower: &AllowList, what: &str) -> Result<AllowList> {
        for rule in &narrower.allow {
            if !self.allow.iter().any(|wide| rule.within(wide)) {
                bail!(
                    "{what}: `{rule}` is not granted by the task (it grants {})",
                    self.describe()
                );
            }
        }
        let methods = match (self.methods.is_empty(), narrower.methods.is_empty()) {
            (_, true) => self.methods.clone(),
            (true, false) => narrower.methods.clone(),
            (false, false) => {
                if let Some(m) = narrower
                    .methods
                    .iter()
                    .find(|m| !self.methods.iter().any(|t| t.eq_ignore_ascii_case(m)))
                {
                    bail!("{what}: method {m} is not granted by the task");
                }
                narrower.methods.clone()
            }
        };
        let least = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(AllowList {
            allow: narrower.allow.clone(),
            methods,
            egress_mb: least(self.egress_mb, narrower.egress_mb),
            ingress_mb: least(self.ingress_mb, narrower.ingress_mb),
            connections: least(self.connections.map(u64::from), narrower.connections.map(u64::from)).map(|c| c as u32),
            idle_seconds: least(self.idle_seconds, narrower.idle_seconds),
        })
    }

    /// The destinations, as one line.
    pub fn describe(&self) -> String {
        let rules: Vec<String> = self.allow.iter().map(Rule::to_string).collect();
        match rules.is_empty() {
            true => "nothing".into(),
            false => rules.join(", "),
        }
    }
}

/// What an episode's network has used so far, counted against its grant's
/// caps: one per episode, shared by its scripts' egress proxy and its
/// agent's wasi:http, so together they get one cap, not one each.
#[derive(Debug, Default)]
pub struct Tally {
    /// Bytes sent out.
    pub out: AtomicU64,
    /// Bytes received.
    pub into: AtomicU64,
    /// Connections opened (or refused at the cap).
    pub opened: AtomicU32,
}

impl Tally {
    /// A fresh tally to share.
    pub fn shared() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Counts one more connection; false when that passes the cap of `most`.
    pub fn open_one(&self, most: u32) -> bool {
        self.opened.fetch_add(1, Ordering::Relaxed) < most
    }
}

/// One connection an episode asked for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Connection {
    /// `host:port` as asked.
    pub destination: String,
    /// `CONNECT`, or the plain HTTP request's method.
    pub method: String,
    /// The address it went to, when it went anywhere.
    pub address: Option<String>,
    /// Whether the grant allowed it.
    pub allowed: bool,
    /// Why it was refused, or why it was ended early.
    pub reason: Option<String>,
    /// Bytes sent to the destination.
    pub bytes_out: u64,
    /// Bytes received from it.
    pub bytes_in: u64,
    /// How long it lasted, in ms.
    pub ms: u64,
}

/// What an episode's connections came to, as `episode.json` keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkUse {
    /// Connections the grant allowed.
    pub allowed: u32,
    /// Connections refused.
    pub refused: u32,
    /// Bytes sent out, all connections together.
    pub bytes_out: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// The connections, the first [`NetworkUse::LISTED`] of them (the
    /// trace has every one).
    pub connections: Vec<Connection>,
}

impl NetworkUse {
    /// Connections listed in `episode.json`.
    pub const LISTED: usize = 200;

    /// The totals of `connections`; `None` when there were none.
    pub fn of(connections: &[Connection]) -> Option<Self> {
        if connections.is_empty() {
            return None;
        }
        let allowed = connections.iter().filter(|c| c.allowed).count() as u32;
        Some(Self {
            allowed,
            refused: connections.len() as u32 - allowed,
            bytes_out: connections.iter().map(|c| c.bytes_out).sum(),
            bytes_in: connections.iter().map(|c| c.bytes_in).sum(),
            connections: connections.iter().take(Self::LISTED).cloned().collect(),
        })
    }

    /// In words: "3 allowed, 1 refused, 2.0 KiB out, 5.1 MiB in".
    pub fn describe(&self) -> String {
        format!(
            "{} allowed, {} refused, {} out, {} in",
            self.allowed,
            self.refused,
            bytes(self.bytes_out),
            bytes(self.bytes_in)
        )
    }
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// An episode's network grant, as `network` in task.toml (and in
/// `episode.json`): `false` (the default), `true` (any public destination,
/// through the proxy, with the default caps) or a table of [`AllowList`].
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Network {
    /// No network at all.
    #[default]
    Off,
    /// Only what the list allows, through the episode's egress proxy.
    Allow(AllowList),
}

impl Network {
    /// The allow-list, when anything is granted.
    pub fn allow_list(&self) -> Option<&AllowList> {
        match self {
            Network::Off => None,
            Network::Allow(list) => Some(list),
        }
    }

    /// Whether anything is granted.
    pub fn granted(&self) -> bool {
        self.allow_list().is_some()
    }

    /// The grant in words: "none", or its destinations and caps.
    pub fn describe(&self) -> String {
        let Some(list) = self.allow_list() else {
            return "none".into();
        };
        let (egress, ingress, connections, idle) = list.caps();
        let methods = match list.methods.is_empty() {
            true => String::new(),
            false => format!(", methods {}", list.methods.join("/")),
        };
        format!(
            "{}{methods} (at most {} MiB out, {} MiB in, {connections} connections, {idle} s idle)",
            list.describe(),
            egress >> 20,
            ingress >> 20
        )
    }

    /// This grant narrowed by a run's or plan's (`what` names it in errors).
    pub fn narrowed_by(&self, narrower: &AllowList, what: &str) -> Result<Network> {
        match self {
            Network::Off if narrower.allow.is_empty() => Ok(Network::Off),
            Network::Off => bail!("{what}: the task grants no network, so none can be narrowed to"),
            Network::Allow(_) if narrower.allow.is_empty() => Ok(Network::Off),
            Network::Allow(list) => list.narrowed_by(narrower, what).map(Network::Allow),
        }
    }
}

impl From<bool> for Network {
    fn from(on: bool) -> Self {
        match on {
            false => Network::Off,
            true => Network::Allow(AllowList {
                allow: vec![Rule {
                    host: HostPattern::Any,
                    port: None,
                }],
                ..Default::default()
            }),
        }
    }
}

impl Serialize for Network {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Network::Off => s.serialize_bool(false),
            Network::Allow(list) => list.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Form;
        impl<'de> serde::de::Visitor<'de> for Form {
            type Value = Network;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("false, true, or a table such as { allow = [\"huggingface.co:443\"] }")
            }
            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<Network, E> {
                Ok(on.into())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Network, A::Error> {
                let list = AllowList::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(match list.allow.is_empty() {
                    true => Network::Off,
                    false => Network::Allow(list),
                })
            }
        }
        d.deserialize_any(Form)
    }
}

#[cfg(test)]
mod tests {
    use super::{AllowList, Network, Rule, refusal};

    fn list(rules: &[&str]) -> AllowList {
        AllowList {
            allow: rules.iter().map(|r| r.parse().unwrap()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn rules_match_exact_hosts_subdomains_and_ports_only() {
        let grant = list(&["huggingface.co:443", "*.hf.co:443", "10.0.0.5:8080"]);
        for (host, port, allowed) in [
            ("huggingface.co", 443, true),
            ("HuggingFace.co.", 443, true),
            ("huggingface.co", 80, false),
            ("evil-huggingface.co", 443, false),
            ("huggingface.co.evil.com", 443, false),
            ("cdn-lfs.hf.co", 443, true),
            ("a.b.hf.co", 443, true),
            ("hf.co", 443, false),
            ("xhf.co", 443, false),
            ("10.0.0.5", 8080, true),
            ("169.254.169.254", 80, false),
            ("127.0.0.1", 443, false),
        ] {
            assert_eq!(refusal(&grant, host, port, None).is_none(), allowed, "{host}:{port}");
        }
    }

    #[test]
    fn bad_rules_are_refused_with_the_fix() {
        for (text, says) in [
            ("huggingface.co", "host:port"),
            ("huggingface.co:https", "not a port"),
            ("**:443", "not a host name"),
            ("*.hf.co:https", "not a port"),
            ("*.co:443", "wildcard"),
            ("a b:80", "not a host name"),
            ("*.exa_mple.com:1", "wildcard"),
        ] {
            let error = text.parse::<Rule>().unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
        let round: Rule = "*.HF.co:443".parse().unwrap();
        assert_eq!(round.to_string(), "*.hf.co:443");
    }

    #[test]
    fn the_grant_reads_as_a_bool_or_a_table_and_true_is_any_destination() {
        #[derive(serde::Deserialize)]
        struct Resources {
            network: Network,
        }
        let read = |text: &str| toml::from_str::<Resources>(text).map(|r| r.network);
        assert_eq!(read("network = false").unwrap(), Network::Off);
        let any = read("network = true").unwrap();
        let list = any.allow_list().unwrap();
        assert!(refusal(list, "example.org", 8443, Some("POST")).is_none());
        assert!(!list.allow[0].names("127.0.0.1"), "`true` names no address");
        let table = read("network = { allow = [\"hf.co:443\"], egress_mb = 5 }").unwrap();
        assert_eq!(table.allow_list().unwrap().caps().0, 5 << 20);
        assert_eq!(read("network = { allow = [] }").unwrap(), Network::Off);
        for (text, says) in [
            ("network = { allow = [\"hf.co\"] }", "host:port"),
            ("network = { allow = [\"hf.co:443\"], egres_mb = 5 }", "egres_mb"),
            ("network = \"yes\"", "false, true, or a table"),
        ] {
            let error = read(text).err().unwrap().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
        // Recorded as written, and read back the same.
        let json = serde_json::to_string(&table).unwrap();
        assert_eq!(serde_json::from_str::<Network>(&json).unwrap(), table);
        assert_eq!(serde_json::to_string(&Network::Off).unwrap(), "false");
        // Narrowed: `true` covers any rule; nothing granted stays nothing.
        let narrowed = any
            .narrowed_by(&super::tests::list(&["cdn.hf.co:443"]), "plan")
            .unwrap();
        assert_eq!(narrowed.allow_list().unwrap().describe(), "cdn.hf.co:443");
        assert!(
            Network::Off
                .narrowed_by(&super::tests::list(&["a.b:1"]), "plan")
                .is_err()
        );
    }

    #[test]
    fn a_plan_can_only_narrow_the_task_grant() {
        let task = AllowList {
            methods: vec!["GET".into(), "HEAD".into()],
            egress_mb: Some(10),
            ..list(&["*.hf.co:443", "pypi.org:443"])
        };
        let narrower = AllowList {
            methods: vec!["GET".into()],
            egress_mb: Some(50),
            ingress_mb: Some(5),
            ..list(&["cdn.hf.co:443", "*.x.hf.co:443"])
        };
        let narrowed = task.narrowed_by(&narrower, "plan.toml").unwrap();
        assert_eq!(narrowed.describe(), "cdn.hf.co:443, *.x.hf.co:443");
        assert_eq!((narrowed.egress_mb, narrowed.ingress_mb), (Some(10), Some(5)));
        assert_eq!(narrowed.methods, vec!["GET".to_string()]);
        for (wider, says) in [
            (list(&["evil.com:443"]), "`evil.com:443` is not granted"),
            (list(&["pypi.org:80"]), "`pypi.org:80` is not granted"),
            (
                list(&["*.hf.co:443", "*.example.org:443"]),
                "`*.example.org:443` is not granted",
            ),
            (
                AllowList {
                    methods: vec!["POST".into()],
                    ..list(&["pypi.org:443"])
                },
                "method POST",
            ),
        ] {
            let error = task.narrowed_by(&wider, "plan.toml").unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
        let methods = AllowList {
            methods: vec!["GET".into()],
            ..list(&["pypi.org:443"])
        };
        assert!(
            refusal(&methods, "pypi.org", 443, Some("POST"))
                .unwrap()
                .contains("POST")
        );
        assert!(refusal(&methods, "pypi.org", 443, Some("get")).is_none());
    }
}

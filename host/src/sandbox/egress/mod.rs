//! Network as a capability: what an episode may connect to, as a list of
//! host patterns and ports (optionally HTTP methods) with byte, connection
//! and idle limits; nothing by default. The grant is checked by the egress
//! proxy (`proxy`) the host runs for the episode, which also resolves names
//! itself (so DNS is no side channel) and records every connection.

pub mod proxy;

use std::net::IpAddr;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

/// One allowed destination: a host (exact, or `*.` and a suffix) and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    host: HostPattern,
    port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// This name or address exactly.
    Exact(String),
    /// Any name ending in `.<suffix>` (not the suffix itself).
    Subdomains(String),
}

/// A host name as compared: lower case, without a trailing dot.
fn canonical(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl std::str::FromStr for Rule {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Self> {
        let Some((host, port)) = text.rsplit_once(':') else {
            bail!("`{text}`: an allowed destination is host:port (e.g. huggingface.co:443)");
        };
        let Ok(port) = port.parse::<u16>() else {
            bail!("`{text}`: `{port}` is not a port");
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
            None if host.parse::<IpAddr>().is_ok() || valid(&host) => HostPattern::Exact(host),
            None => bail!("`{text}`: `{host}` is not a host name, an address or `*.domain`"),
        };
        Ok(Self { host: pattern, port })
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            HostPattern::Exact(host) if host.contains(':') => write!(f, "[{host}]:{}", self.port),
            HostPattern::Exact(host) => write!(f, "{host}:{}", self.port),
            HostPattern::Subdomains(suffix) => write!(f, "*.{suffix}:{}", self.port),
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
        port == self.port
            && match &self.host {
                HostPattern::Exact(exact) => *exact == host,
                HostPattern::Subdomains(suffix) => host
                    .strip_suffix(suffix.as_str())
                    .is_some_and(|head| head.ends_with('.') && head.len() > 1),
            }
    }

    /// Whether everything this rule allows, `wider` allows too.
    fn within(&self, wider: &Rule) -> bool {
        self.port == wider.port
            && match (&self.host, &wider.host) {
                (HostPattern::Exact(host), _) => wider.allows(host, self.port),
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

#[cfg(test)]
mod tests {
    use super::{AllowList, Rule, refusal};

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
            ("*:443", "not a host name"),
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

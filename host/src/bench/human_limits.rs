//! Whether a person's episode ran under a plan's limits: every limit
//! `episode.json` records no looser than the one the plan gives the task
//! (a tighter one is kept: it gave the person no advantage), the steps
//! and validations it used within them, no more GPUs than the task takes,
//! the plan's sandbox and the task's version. A person's row beside the
//! agents' means nothing otherwise.

use serde_json::Value;

use crate::episode::EpisodeRecord;
use crate::limits::Limits;
use crate::network::Network;
use crate::sandbox::SandboxKind;
use crate::task::Task;

/// Limits where 0 means none: 0 is the loosest of all.
const ZERO_IS_NONE: &[&str] = &["llm_tokens", "llm_cost_usd"];

/// Limits that bind no script of the person's: the task's preparation only.
const NOT_THE_PERSONS: &[&str] = &["prepare_network"];

/// What is looser in `record` than `required` (the plan's limits for
/// `task`, with scripts in `sandbox`), as `field: what was recorded, what
/// is required (how to record it again)`; None when nothing is.
pub fn looser(record: &EpisodeRecord, task: &Task, required: &Limits, sandbox: SandboxKind) -> Option<String> {
    if record.task.version != task.spec.version {
        return Some(format!(
            "task.version: recorded {}, required {} (record it again on this task folder)",
            record.task.version, task.spec.version
        ));
    }
    if let Some(why) = looser_limit(&record.limits, required) {
        return Some(why);
    }
    let kind = match sandbox {
        SandboxKind::Local => "local",
        SandboxKind::Docker => "docker",
    };
    if record.host.sandbox.split_whitespace().next() != Some(kind) {
        return Some(format!(
            "host.sandbox: recorded {}, required {kind} (record it again with `mlrb human --sandbox {kind}`)",
            one_line(&record.host.sandbox)
        ));
    }
    let gpus = task.spec.resources.gpus as usize;
    if record.gpus.len() > gpus {
        return Some(format!(
            "gpus: recorded {} GPU(s), required at most {gpus} (the task's resources.gpus)",
            record.gpus.len()
        ));
    }
    used_more(record, task, required)
}

/// Steps and validations used past what the limits allow (a record edited
/// after the session, or made by a host that did not hold them).
fn used_more(record: &EpisodeRecord, task: &Task, required: &Limits) -> Option<String> {
    let end = record.end.as_ref()?;
    if end.steps > required.max_steps {
        return Some(format!(
            "end.steps: recorded {} steps, required at most {} (limits.max_steps)",
            end.steps, required.max_steps
        ));
    }
    let allowed = match task.spec.validation.enabled {
        true => task.spec.validation.max_calls as usize,
        false => 0,
    };
    if end.validations.len() > allowed {
        return Some(format!(
            "end.validations: recorded {} validations, required at most {allowed} (the task's validation.max_calls)",
            end.validations.len()
        ));
    }
    None
}

/// The first limit of `recorded` looser than `required`'s. Compared field
/// by field as `episode.json` holds them, so a limit added later is
/// compared too: a number is looser when larger, anything else when it
/// differs; the network grant when it allows what `required`'s does not.
fn looser_limit(recorded: &Limits, required: &Limits) -> Option<String> {
    if let Some(why) = looser_network(&recorded.network, &required.network) {
        return Some(why);
    }
    let (got, want) = (as_json(recorded), as_json(required));
    let want = want.as_object()?;
    for (field, wanted) in want {
        if field == "network" || NOT_THE_PERSONS.contains(&field.as_str()) {
            continue;
        }
        let had = got.get(field).unwrap_or(&Value::Null);
        let looser = match (had.as_f64(), wanted.as_f64()) {
            (Some(had), Some(wanted)) if ZERO_IS_NONE.contains(&field.as_str()) => {
                wanted != 0.0 && (had == 0.0 || had > wanted)
            }
            (Some(had), Some(wanted)) => had > wanted,
            _ => had != wanted,
        };
        if looser {
            let shown = |v: &Value| match (v, ZERO_IS_NONE.contains(&field.as_str())) {
                (v, true) if v.as_f64() == Some(0.0) => "0 (no limit)".to_string(),
                (v, _) => one_line(&v.to_string()),
            };
            return Some(format!(
                "limits.{field}: recorded {}, required at most {}{}",
                shown(had),
                shown(wanted),
                hint(field, wanted)
            ));
        }
    }
    None
}

/// Whether the grant `recorded` allows a destination, method or amount
/// that `required` does not.
fn looser_network(recorded: &Network, required: &Network) -> Option<String> {
    let within = match (recorded, required) {
        (Network::Off, _) => true,
        (Network::Allow(_), Network::Off) => false,
        (Network::Allow(had), Network::Allow(wanted)) => {
            // Narrowing the required grant by the recorded one changes
            // nothing of it only when it was within already.
            wanted.narrowed_by(had, "").is_ok_and(|narrowed| narrowed == *had)
        }
    };
    (!within).then(|| {
        format!(
            "limits.network: recorded {}, required at most {} (record it again without --network-allow, or within the grant)",
            recorded.describe(),
            required.describe()
        )
    })
}

/// How to record `field` at `wanted` with `mlrb human`, where an option sets it.
fn hint(field: &str, wanted: &Value) -> String {
    let number = wanted.as_f64().unwrap_or_default();
    let mib = |bytes: f64| (bytes / f64::from(1 << 20)).floor().to_string();
    let option = match field {
        "max_steps" => format!("--max-steps {number}"),
        "wall_seconds" => format!("--wall-seconds {number}"),
        "llm_tokens" => format!("--llm-tokens {number}"),
        "llm_cost_usd" => format!("--llm-cost-usd {number}"),
        "script_cpus" => format!("--cpus {number}"),
        "script_memory_bytes" => format!("--memory {}", mib(number)),
        "script_timeout_seconds" => format!("--script-timeout {number}"),
        "trace_bytes" => format!("--trace-mb {}", mib(number)),
        "agent_memory_bytes" => format!("--agent-memory-mb {}", mib(number)),
        "http_requests" => format!("--http-requests {number}"),
        "http_response_bytes" => format!("--http-response-mb {}", mib(number)),
        _ => return " (no `mlrb human` option sets it: the record was changed, or made by another mlrb)".into(),
    };
    format!(" (record it again with `mlrb human ... {option}`, or without the option)")
}

fn as_json(limits: &Limits) -> Value {
    serde_json::to_value(limits).unwrap_or(Value::Null)
}

/// `text` on one line, at most 200 characters: a record's text may be anything.
fn one_line(text: &str) -> String {
    let flat: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match flat.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_larger_number_is_looser_and_a_smaller_one_is_kept() {
        let required = Limits::default();
        assert_eq!(looser_limit(&required, &required), None);
        let tighter = Limits {
            wall_seconds: 10,
            max_steps: 3,
            script_memory_bytes: 1 << 20,
            ..Limits::default()
        };
        assert_eq!(looser_limit(&tighter, &required), None);
        let longer = Limits {
            wall_seconds: required.wall_seconds + 1,
            ..Limits::default()
        };
        let why = looser_limit(&longer, &required).unwrap();
        assert!(
            why.starts_with("limits.wall_seconds: recorded 1201, required at most 1200")
                && why.contains("--wall-seconds 1200"),
            "{why}"
        );
        let memory = Limits {
            script_memory_bytes: required.script_memory_bytes * 2,
            ..Limits::default()
        };
        assert!(looser_limit(&memory, &required).unwrap().contains("--memory 2048"));
        let files = Limits {
            workspace_files: required.workspace_files + 1,
            ..Limits::default()
        };
        assert!(
            looser_limit(&files, &required)
                .unwrap()
                .contains("no `mlrb human` option")
        );
    }

    #[test]
    fn zero_is_no_limit_where_it_means_none() {
        let required = Limits {
            llm_tokens: 100,
            ..Limits::default()
        };
        let unlimited = Limits {
            llm_tokens: 0,
            ..Limits::default()
        };
        let why = looser_limit(&unlimited, &required).unwrap();
        assert!(why.contains("recorded 0 (no limit), required at most 100"), "{why}");
        assert_eq!(looser_limit(&required, &unlimited), None);
    }

    #[test]
    fn a_network_grant_is_looser_when_it_allows_more() {
        let off = Limits::default();
        let any = Limits {
            network: Network::from(true),
            ..Limits::default()
        };
        let why = looser_limit(&any, &off).unwrap();
        assert!(why.starts_with("limits.network: recorded "), "{why}");
        assert_eq!(looser_limit(&off, &any), None);
        assert_eq!(looser_limit(&any, &any), None);
        let one: Network = serde_json::from_value(serde_json::json!({"allow": ["pypi.org:443"]})).unwrap();
        let narrow = Limits {
            network: one,
            ..Limits::default()
        };
        assert_eq!(looser_limit(&narrow, &any), None);
        assert!(looser_limit(&any, &narrow).is_some());
    }

    #[test]
    fn a_hostile_recorded_value_stays_on_one_line() {
        assert_eq!(one_line("docker\n(engine)\r"), "docker (engine) ");
        assert_eq!(one_line(&"x".repeat(500)).chars().count(), 201);
    }
}

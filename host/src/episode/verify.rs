//! What `mlrb verify` checks of one episode's records, without running
//! anything: the events' hash chain and its head, every snapshot object,
//! packed content and tree against its hash (and every pack's index), every
//! manifest's root against the chain, and the bindings of `episode.json`
//! and `score.json` to all of these.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{EpisodeRecord, ScoreRecord};
use crate::record::recording::Recording;
use crate::record::snapshot::{self, ManifestEntry};

/// Every way the records of the episode in `dir` fail to hold together;
/// empty when they do.
pub fn check_records(dir: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    let record = match EpisodeRecord::read(dir) {
        Ok(record) => record,
        Err(error) => return vec![format!("{error:#}")],
    };
    let Some(end) = &record.end else {
        return vec![format!("episode.json: the episode never ended ({})", record.status())];
    };
    match Recording::open(dir) {
        Err(error) => failures.push(format!("{error:#}")),
        Ok(recording) => {
            if recording.head != end.chain_head {
                failures.push(format!(
                    "events.jsonl: its hash chain ends at {}, episode.json binds {}",
                    short(&recording.head),
                    short(&end.chain_head)
                ));
            }
            failures.extend(check_store(dir, &record, &recording));
            failures.extend(check_validations(&record, &recording));
            failures.extend(check_limits(&record, &recording));
            failures.extend(check_smoke(dir, &record, &recording));
        }
    }
    failures.extend(check_score(dir, &record));
    failures
}

/// The snapshot store: objects and trees are what their names say, each
/// manifest is the one the chain recorded, the files every manifest names
/// are there, and the final one is the one `episode.json` names.
fn check_store(dir: &Path, record: &EpisodeRecord, recording: &Recording) -> Vec<String> {
    let store = dir.join("snapshots");
    let (objects, mut failures) = check_contents(&store);
    let Some(objects) = objects else { return failures };
    let manifests = match snapshot::list_manifests(&store) {
        Ok(manifests) => manifests,
        Err(error) => return [failures, vec![format!("{error:#}")]].concat(),
    };
    // A fork of another agent starts from its parent's snapshots, bound in
    // the parent's chain; the one it starts from is bound by its own.
    let inherited = record
        .fork
        .as_ref()
        .filter(|f| f.new_agent)
        .map_or(0, |_| fork_snapshot(recording));
    let (bound, headers) = (bound_roots(recording), bound_headers(recording));
    for header in &manifests {
        let name = format!("snapshots/manifests/{:06}.json", header.id);
        match bound.get(&header.id) {
            Some(root) if *root == header.root => {}
            Some(root) => failures.push(format!(
                "{name}: root {}, the hash chain recorded {}",
                short(&header.root),
                short(root)
            )),
            None if header.id < inherited => {}
            None => failures.push(format!("{name}: not recorded in the hash chain")),
        }
        if let Some(hash) = headers.get(&header.id) {
            let written = crate::record::hash_record_file(&store.join(&name["snapshots/".len()..])).unwrap_or_default();
            if written != *hash {
                failures.push(format!("{name}: changed since the hash chain recorded it"));
            }
        }
        if let Err(why) = files_present(&store, &objects, header.id) {
            failures.push(why);
        }
    }
    failures.extend(check_final(record, &manifests));
    failures
}

/// Every object, packed content and tree hashes to its name, and every
/// pack is whole and its index sound; the store's contents as far as they
/// are to be trusted.
fn check_contents(store: &Path) -> (Option<snapshot::ObjectReader>, Vec<String>) {
    let mut failures = check_hashes(store);
    let objects = match snapshot::ObjectReader::open(store) {
        Ok(objects) => objects,
        Err(error) => {
            failures.push(format!("{error:#}"));
            return (None, failures);
        }
    };
    failures.extend(objects.refused().iter().cloned());
    failures.extend(objects.check_packed());
    (Some(objects), failures)
}

/// Every object and tree hashes to its name.
fn check_hashes(store: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for sub in ["objects", "trees"] {
        let Ok(entries) = std::fs::read_dir(store.join(sub)) else {
            failures.push(format!("snapshots/{sub}: missing"));
            continue;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let named = if sub == "objects" {
                object_is_named(&entry.path(), &name)
            } else {
                crate::record::hash_record_file(&entry.path()).is_ok_and(|hash| hash == name)
            };
            if !named {
                failures.push(format!("snapshots/{sub}/{name}: its content does not hash to its name"));
            }
        }
    }
    failures
}

/// Whether the object at `path` is named by its content: as snapshots
/// name contents (holes unread, see [`crate::record::extents`]), or by its
/// plain blake3 (a long string of the trace, an object of an earlier
/// mlrb), read only when the first does not hold.
fn object_is_named(path: &Path, name: &str) -> bool {
    let Ok(file) = crate::record::open_record_file(path) else {
        return false;
    };
    let size = file.metadata().map_or(0, |m| m.len());
    if crate::record::extents::content_hash(&file, size).is_ok_and(|hash| hash == name) {
        return true;
    }
    crate::record::hash_record_file(path).is_ok_and(|hash| hash == name)
}

/// The last manifest is the final snapshot `episode.json` names, with the
/// root it binds.
fn check_final(record: &EpisodeRecord, manifests: &[snapshot::Manifest]) -> Vec<String> {
    let Some(end) = record.end.as_ref() else {
        return Vec::new();
    };
    let mut failures = Vec::new();
    match manifests.iter().find(|m| m.id == end.final_snapshot) {
        Some(header) if header.root != end.final_root => failures.push(format!(
            "episode.json: its final snapshot {} has root {}, it binds {}",
            header.id,
            short(&header.root),
            short(&end.final_root)
        )),
        None => failures.push(format!(
            "episode.json: its final snapshot {} is missing",
            end.final_snapshot
        )),
        Some(_) => {}
    }
    if manifests.last().map(|m| m.id) != Some(end.final_snapshot) {
        failures.push("snapshots/manifests: the last manifest is not the final snapshot episode.json names".into());
    }
    failures
}

/// Snapshot id → the blake3 of its manifest file, as the chain recorded them.
fn bound_headers(recording: &Recording) -> BTreeMap<u64, String> {
    let snapshots = recording
        .events
        .iter()
        .filter(|e| e["interface"] == "host" && e["function"] == "snapshot");
    snapshots
        .filter_map(|e| Some((e["args"]["id"].as_u64()?, e["args"]["manifest"].as_str()?.to_string())))
        .collect()
}

/// Snapshot id → root, as the chain recorded them.
fn bound_roots(recording: &Recording) -> BTreeMap<u64, String> {
    let mut bound = BTreeMap::new();
    for event in recording.events.iter().filter(|e| e["interface"] == "host") {
        let args = &event["args"];
        let id = match event["function"].as_str() {
            Some("snapshot") => args["id"].as_u64(),
            Some("fork") => args["snapshot"].as_u64(),
            _ => None,
        };
        if let (Some(id), Some(root)) = (id, args["root"].as_str()) {
            bound.insert(id, root.to_string());
        }
    }
    bound
}

fn fork_snapshot(recording: &Recording) -> u64 {
    recording
        .events
        .iter()
        .find(|e| e["interface"] == "host" && e["function"] == "fork")
        .and_then(|e| e["args"]["snapshot"].as_u64())
        .unwrap_or(0)
}

/// Every file snapshot `id` names has its content, loose or in a trusted pack.
fn files_present(store: &Path, objects: &snapshot::ObjectReader, id: u64) -> Result<(), String> {
    let manifest = snapshot::read_manifest(store, id).map_err(|e| format!("{e:#}"))?;
    for (path, entry) in &manifest.entries {
        if let ManifestEntry::File { hash, .. } = entry
            && !objects.contains(hash)
        {
            return Err(format!(
                "snapshot {id}: the content of {path} ({}) is missing",
                short(hash)
            ));
        }
    }
    Ok(())
}

/// `score.json` is bound to this episode: its chain head, agent, task and
/// final snapshot.
fn check_score(dir: &Path, record: &EpisodeRecord) -> Vec<String> {
    let score = match ScoreRecord::read(dir) {
        Ok(score) => score,
        Err(error) => return vec![format!("{error:#}")],
    };
    let Some(end) = &record.end else { return Vec::new() };
    let Some(binding) = &score.binding else {
        return vec!["score.json: binds nothing (written by an mlrb without bindings)".into()];
    };
    let mut failures = Vec::new();
    let mut differ = |what: &str, bound: &str, recorded: &str| {
        if bound != recorded {
            failures.push(format!(
                "score.json: binds {what} {}, the episode's is {}",
                short(bound),
                short(recorded)
            ));
        }
    };
    differ("chain head", &binding.chain_head, &end.chain_head);
    differ("agent", &binding.agent_sha256, &record.agent.sha256);
    differ("task version", &binding.task_version, &record.task.version);
    differ("task content", &binding.task_content_hash, &record.task.content_hash);
    differ("snapshot", &binding.snapshot_root, &end.final_root);
    if score.snapshot != Some(end.final_snapshot) {
        failures.push(format!(
            "score.json: scores snapshot {:?}, the final one is {}",
            score.snapshot, end.final_snapshot
        ));
    }
    let expected = super::judgement::judge(&score, &end.validations);
    failures.extend(super::judgement::differences(&score, &expected));
    failures
}

/// `episode.json`'s limits are the ones its trace's `host run` event bound
/// at the start, where it bound them (a person's episode does): a limit
/// changed afterwards is one the episode did not run under.
pub fn check_limits(record: &EpisodeRecord, recording: &Recording) -> Option<String> {
    let run = recording
        .events
        .iter()
        .find(|e| e["interface"] == "host" && e["function"] == "run")?;
    let bound = run["args"].get("limits")?;
    let written = serde_json::to_value(&record.limits).ok()?;
    let null = Value::Null;
    let (field, was) = bound
        .as_object()?
        .iter()
        .find(|(field, was)| written.get(field.as_str()).unwrap_or(&null) != *was)?;
    let is = written.get(field.as_str()).unwrap_or(&null);
    Some(format!(
        "episode.json: limits.{field} is {is}, the hash chain bound {was} at the start (changed since)"
    ))
}

/// Whether the episode ran in the smoke profile is what its trace's
/// `host run` event bound at the start: `episode.json` and `score.json`
/// must say the same, so that a smoke score is never passed off as real.
fn check_smoke(dir: &Path, record: &EpisodeRecord, recording: &Recording) -> Vec<String> {
    let Some(run) = recording
        .events
        .iter()
        .find(|e| e["interface"] == "host" && e["function"] == "run")
    else {
        return Vec::new();
    };
    let bound = run["args"]["smoke"].as_bool().unwrap_or(false);
    let mut failures = Vec::new();
    let mut differ = |file: &str, says: bool| {
        if says != bound {
            failures.push(format!(
                "{file}: smoke is {says}, the hash chain bound {bound} at the start (changed since)"
            ));
        }
    };
    differ("episode.json", record.smoke);
    if let Ok(score) = ScoreRecord::read(dir) {
        differ("score.json", score.smoke);
    }
    failures
}

/// The intermediate scorings `episode.json` lists are the ones its trace
/// recorded (the best score is derived from them).
fn check_validations(record: &EpisodeRecord, recording: &Recording) -> Option<String> {
    let end = record.end.as_ref()?;
    let traced: Vec<Value> = recording
        .events
        .iter()
        .filter(|e| e["interface"] == "episode" && e["function"] == "validate")
        .filter_map(|e| e["result"].get("validation").filter(|v| !v.is_null()).cloned())
        .collect();
    let listed: Vec<Value> = end
        .validations
        .iter()
        .map(|v| serde_json::to_value(v).unwrap_or_default())
        .collect();
    (traced != listed).then(|| {
        format!(
            "episode.json: lists {} validation(s) that its trace does not record as they are ({} in the trace)",
            listed.len(),
            traced.len()
        )
    })
}

/// A score's re-computation against the recorded one: `None` when they
/// agree, else what differs. A score measured in rounds (a speed) is
/// allowed what its rounds spread over ([`spread_tolerance`]); any other
/// within `relative` of the larger, or `absolute` (what the task allows a
/// metric that is not deterministic).
pub fn compare_scores(recorded: &ScoreRecord, again: &ScoreRecord, (relative, absolute): (f64, f64)) -> Option<String> {
    if again.evaluator_failed {
        return Some(format!(
            "re-scoring failed: {}",
            again.error.as_deref().unwrap_or("the evaluator failed")
        ));
    }
    let (Some(a), Some(b)) = (recorded.score, again.score) else {
        return (recorded.score.is_some() != again.score.is_some() || recorded.valid != again.valid)
            .then(|| differs(recorded, again, String::new()));
    };
    let allowed = match (recorded.spread, again.spread) {
        (Some(was), Some(now)) => {
            if let Some(noisy) = now.too_noisy(b) {
                return Some(noisy);
            }
            spread_tolerance(was, now, b)
        }
        (None, Some(_)) => {
            return Some(format!(
                "score.json keeps no spread for its score {a}, which its task measures in rounds"
            ));
        }
        _ => (relative * a.abs().max(b.abs())).max(absolute),
    };
    let close = (a - b).abs() <= allowed;
    (!close || recorded.valid != again.valid).then(|| {
        let within = match again.spread {
            Some(now) => format!(" (rounds {} to {}; allowed ±{})", now.low, now.high, round3(allowed)),
            None => String::new(),
        };
        differs(recorded, again, within)
    })
}

/// How far a re-scoring `b` may land from a score measured in rounds
/// ([`crate::task::Spread::allows`]).
pub fn spread_tolerance(recorded: crate::task::Spread, again: crate::task::Spread, b: f64) -> f64 {
    recorded.allows(again, b)
}

/// The part of a re-scored timing it may always differ by.
pub use crate::task::SPREAD_FLOOR;

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

fn differs(recorded: &ScoreRecord, again: &ScoreRecord, within: String) -> String {
    format!(
        "score.json says {} (valid: {}), the final snapshot scores {}{within} (valid: {})",
        shown(recorded.score),
        recorded.valid,
        shown(again.score),
        again.valid
    )
}

fn shown(score: Option<f64>) -> String {
    score.map_or("none".into(), |s| s.to_string())
}

fn short(hash: &str) -> String {
    hash.chars().take(16).collect()
}

/// The recorded `value` of a JSON file is the one expected (for the run's
/// `results.jsonl` and `summary.json`): `None`, or where they differ first.
pub fn json_differs(recorded: &Value, expected: &Value, path: &str) -> Option<String> {
    match (recorded, expected) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| {
                json_differs(
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                    &format!("{path}.{k}"),
                )
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| json_differs(x, y, &format!("{path}[{i}]"))),
        _ if recorded == expected => None,
        _ => Some(format!("{path} is {recorded}, its records give {expected}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Spread;

    /// A snapshot store of 100 small files (packed) and one larger (an
    /// object of its own); the pack's path.
    fn packed_store(dir: &Path) -> std::path::PathBuf {
        let ws = dir.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        for i in 0..100 {
            std::fs::write(ws.join(format!("f{i}")), format!("file {i}")).unwrap();
        }
        std::fs::write(ws.join("big"), vec![7u8; 100_000]).unwrap();
        let store = dir.join("snapshots");
        let mut snapshots = snapshot::SnapshotStore::create(&store, &crate::limits::Limits::default()).unwrap();
        let root = crate::record::walk::DirHandle::open_root(&ws).unwrap();
        snapshots.snapshot(&root, "s").unwrap().unwrap();
        let packs: Vec<_> = std::fs::read_dir(store.join("packs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(packs.len(), 1, "{packs:?}");
        assert_eq!(std::fs::read_dir(store.join("objects")).unwrap().count(), 1);
        packs[0].clone()
    }

    fn failures(store: &Path) -> String {
        check_contents(store).1.join("\n")
    }

    /// A pack written whole verifies; one changed byte of a content, a cut
    /// pack, or a hostile index is refused, saying which and why.
    #[test]
    fn a_changed_or_cut_pack_and_a_hostile_index_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = packed_store(tmp.path());
        let store = tmp.path().join("snapshots");
        assert_eq!(failures(&store), "");
        let whole = std::fs::read(&pack).unwrap();
        let rewrite = |bytes: &[u8]| {
            std::fs::remove_file(&pack).unwrap();
            std::fs::write(&pack, bytes).unwrap();
        };
        let mut changed = whole.clone();
        changed[3] ^= 1;
        rewrite(&changed);
        let said = failures(&store);
        assert!(
            said.contains("does not hash to its name") && said.contains("snapshots/packs/"),
            "{said}"
        );
        rewrite(&whole[..whole.len() - 100]);
        let said = failures(&store);
        assert!(said.contains("truncated") && said.contains("not trusted"), "{said}");
        // Hostile indexes, each with a checksum that holds.
        let entry = |bytes: &[u8], offset, len| snapshot::PackEntry {
            name: *blake3::Hash::from_hex(snapshot::content_name(bytes))
                .unwrap()
                .as_bytes(),
            offset,
            len,
        };
        let hostile = |entries: &[snapshot::PackEntry], why: &str| {
            std::fs::remove_file(&pack).ok();
            let (tail, name) = snapshot::encode_tail(6, entries);
            let path = store.join(format!("packs/{name}.pack"));
            std::fs::write(&path, [&b"onetwo"[..], &tail].concat()).unwrap();
            let said = failures(&store);
            assert!(said.contains(why) && said.contains(&name), "{why}: {said}");
            std::fs::remove_file(&path).unwrap();
        };
        hostile(&[entry(b"one", 0, 3), entry(b"two", 5, 3)], "outside its data");
        hostile(&[entry(b"onet", 0, 4), entry(b"two", 3, 3)], "overlap");
        let mut twice = entry(b"two", 3, 3);
        twice.name = entry(b"one", 0, 3).name;
        hostile(&[entry(b"one", 0, 3), twice], "twice");
        // A second pack that lists a content of the first, with other bytes.
        std::fs::write(&pack, &whole).unwrap();
        let mut other = entry(b"onetwo", 0, 6);
        other.name = entry(b"file 0", 0, 6).name;
        let (tail, name) = snapshot::encode_tail(6, &[other]);
        std::fs::write(
            store.join(format!("packs/{name}.pack")),
            [&b"onetwo"[..], &tail].concat(),
        )
        .unwrap();
        let said = failures(&store);
        assert!(said.contains("which another pack lists"), "{said}");
    }

    fn timed(score: f64, low: f64, high: f64) -> ScoreRecord {
        serde_json::from_value(serde_json::json!({
            "task": "t", "metric": "cpu_time_ratio", "higher_is_better": false,
            "score": score, "valid": true, "baseline": 160.0,
            "spread": {"low": low, "high": high, "rounds": 5},
            "improvement": null, "success": null, "end_reason": null, "error": null,
            "evaluator_failed": false, "snapshot": 1, "evaluated_at": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    }

    /// A timing re-scored on a busier machine lands within its rounds; an
    /// edited one does not, nor one whose spread was edited wider, nor one
    /// whose spread was taken out.
    #[test]
    fn a_timing_is_allowed_its_spread_and_no_more() {
        let again = timed(150.0, 141.0, 171.0);
        assert_eq!(compare_scores(&timed(162.0, 158.0, 180.0), &again, (1e-9, 0.0)), None);
        let forged = compare_scores(&timed(40.0, 38.0, 42.0), &again, (1e-9, 0.0)).unwrap();
        assert!(
            forged.contains("score.json says 40") && forged.contains("rounds 141 to 171"),
            "{forged}"
        );
        // Widened to swallow anything: trusted only up to twice the re-scoring's.
        assert!(compare_scores(&timed(40.0, 1.0, 400.0), &again, (1e-9, 0.0)).is_some());
        let mut bare = timed(150.0, 150.0, 150.0);
        bare.spread = None;
        let said = compare_scores(&bare, &again, (1e-9, 0.0)).unwrap();
        assert!(said.contains("keeps no spread"), "{said}");
        let allowed = spread_tolerance(
            Spread {
                low: 1.0,
                high: 400.0,
                rounds: 5,
            },
            Spread {
                low: 141.0,
                high: 171.0,
                rounds: 5,
            },
            150.0,
        );
        assert!((allowed - (30.0 + SPREAD_FLOOR * 150.0)).abs() < 1e-9, "{allowed}");
    }

    /// Rounds spread wider than half the re-scoring cannot check a timing:
    /// verify says so instead of letting a score 3 times better through;
    /// and however wide both spreads, no more than half is allowed.
    #[test]
    fn a_timing_re_scored_too_noisily_is_not_taken_for_verified() {
        let noisy = timed(1.0, 0.4, 1.8);
        let said = compare_scores(&timed(1.0, 0.4, 1.8), &noisy, (1e-9, 0.0)).unwrap();
        assert!(said.contains("too noisy") && said.contains("quieter machine"), "{said}");
        let wide = timed(1.0, 0.55, 1.45);
        assert_eq!(compare_scores(&timed(1.4, 0.5, 2.0), &wide, (1e-9, 0.0)), None);
        let third = compare_scores(&timed(1.0 / 3.0, 0.0, 2.0), &wide, (1e-9, 0.0)).unwrap();
        assert!(third.contains("score.json says 0.33"), "{third}");
    }
}

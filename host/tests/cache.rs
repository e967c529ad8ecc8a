//! `mlrb cache prune`: what it removes from the cache and what it keeps.

mod common;

use std::time::{Duration, SystemTime};

fn age(path: &std::path::Path, days: u64) {
    let past = SystemTime::now() - Duration::from_secs(days * 86_400);
    std::fs::File::options()
        .write(true)
        .open(path)
        .or_else(|_| std::fs::File::open(path))
        .unwrap()
        .set_modified(past)
        .unwrap();
}

#[test]
fn prune_removes_foreign_stale_and_leftover_entries_and_keeps_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let mlrb = || {
        let mut c = common::mlrb();
        c.env("MLRB_CACHE_DIR", &cache);
        c
    };
    for agent in ["baseline", "first_call"] {
        assert!(
            mlrb()
                .args(["agent", "check"])
                .arg(common::agent(agent))
                .output()
                .unwrap()
                .status
                .success()
        );
    }
    let compiled = cache.join("compiled");
    let entries = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let ours = entries(&compiled);
    assert_eq!(ours.iter().filter(|n| n.ends_with(".cwasm")).count(), 2, "{ours:?}");
    // One entry unused for 60 days, one of another engine version, a stale
    // temp file, a prepared task not run for 60 days and a prepare that died.
    let old = ours.iter().find(|n| n.ends_with(".cwasm")).unwrap().clone();
    age(&compiled.join(&old), 60);
    std::fs::write(compiled.join("0123abcd-ffffffffffffffff.cwasm"), b"foreign").unwrap();
    std::fs::write(compiled.join(".tmpXYZ"), b"half").unwrap();
    age(&compiled.join(".tmpXYZ"), 1);
    std::fs::create_dir_all(cache.join("prepared/gone-1-abc/public")).unwrap();
    age(&cache.join("prepared/gone-1-abc"), 60);
    std::fs::create_dir_all(cache.join("prepared/fresh-1-def/public")).unwrap();
    std::fs::create_dir_all(cache.join("prepared/.staging-dead")).unwrap();
    age(&cache.join("prepared/.staging-dead"), 1);

    let output = mlrb().args(["cache", "prune", "--unused-days", "30"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        // The old artifact and its MAC, the foreign one, the temp file, two prepared folders.
        String::from_utf8_lossy(&output.stdout).contains("removed 6 item(s)"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let left = entries(&compiled);
    assert!(left.contains(&"cache.key".to_string()), "{left:?}");
    assert!(
        !left.contains(&old) && !left.iter().any(|n| n.starts_with("0123abcd") || n.starts_with(".tmp")),
        "{left:?}"
    );
    assert_eq!(left.iter().filter(|n| n.ends_with(".cwasm")).count(), 1, "{left:?}");
    let kept = left.iter().find(|n| n.ends_with(".cwasm")).unwrap();
    let macs: Vec<&String> = left.iter().filter(|n| n.ends_with(".mac")).collect();
    assert_eq!(macs, vec![&kept.replace(".cwasm", ".mac")], "{left:?}");
    assert_eq!(entries(&cache.join("prepared")), vec!["fresh-1-def".to_string()]);
    // The pruned agent compiles again on its next start.
    assert!(
        mlrb()
            .args(["agent", "check"])
            .arg(common::agent("baseline"))
            .output()
            .unwrap()
            .status
            .success()
    );
}

/// Runs the baseline on digits with `cache` and says whether it started from the compile cache.
fn started_from_cache(cache: &std::path::Path, out: &std::path::Path) -> bool {
    let finished = {
        let mut command = common::run_command(&common::agent("baseline"), "digits", out, &["--json"]);
        command.env("MLRB_CACHE_DIR", cache);
        let output = command.output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    assert_eq!(finished["episode"]["end"]["reason"], "completed", "{finished}");
    finished["episode"]["agent"]["compiled_from_cache"].as_bool().unwrap()
}

#[test]
fn a_corrupted_truncated_or_foreign_cache_entry_is_never_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let compiled = cache.join("compiled");
    let run = |n: &str| started_from_cache(&cache, &tmp.path().join(n));
    assert!(!run("cold"), "a fresh cache cannot hit");
    assert!(run("warm"), "the second start must come from the cache");
    let artifact = std::fs::read_dir(&compiled)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .unwrap();
    let mac = artifact.with_extension("mac");
    let original = std::fs::read(&artifact).unwrap();

    // One flipped byte in the artifact.
    let mut flipped = original.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    std::fs::write(&artifact, &flipped).unwrap();
    assert!(!run("flipped"), "a corrupted artifact was loaded");
    assert_eq!(
        std::fs::read(&artifact).unwrap(),
        original,
        "recompiling wrote the same artifact back"
    );

    // Truncated.
    std::fs::write(&artifact, &original[..original.len() / 3]).unwrap();
    assert!(!run("truncated"));

    // A foreign cache's entry: a valid artifact with a MAC made under another key.
    std::fs::write(&mac, [7u8; 32]).unwrap();
    assert!(!run("foreign-mac"));

    // The MAC missing altogether.
    std::fs::remove_file(&mac).unwrap();
    assert!(!run("no-mac"));
    assert!(run("healed"), "after recompiling, the entry is trusted again");

    // Another cache's key file: every entry becomes foreign.
    std::fs::write(compiled.join("cache.key"), [9u8; 32]).unwrap();
    assert!(!run("other-key"));
}

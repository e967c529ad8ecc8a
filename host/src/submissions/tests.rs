//! The submission service's rules, each tried against the real database.

use super::accounts::Refused;
use super::quota::Quota;
use super::store::Store;
use super::submission::{State, Upload};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("submissions.db")).unwrap();
    (dir, store)
}

fn upload(refused: Option<&str>) -> Upload<'static> {
    Upload {
        benchmark: ("cpu-mini", "1"),
        agent_sha256: "ab",
        agent_bytes: 10,
        agent_name: "probe",
        refused: refused.map(str::to_string),
    }
}

fn no_limits() -> Quota {
    Quota {
        per_day: 100,
        in_flight: 100,
        cooldown_seconds: 0,
        ..Quota::default()
    }
}

#[test]
fn a_token_opens_its_account_and_the_database_keeps_no_secret() {
    let (dir, store) = store();
    let (alice, token) = store.add_submitter("alice", false, "admin:root").unwrap();
    assert_eq!(store.authenticate(&token.secret).unwrap(), Ok(alice.clone()));
    // A wrong secret under a real id, a made-up token, and nothing at all.
    let (head, last) = token.secret.split_at(token.secret.len() - 1);
    let wrong = format!("{head}{}", if last == "0" { "1" } else { "0" });
    for presented in [wrong.as_str(), "mlrbs_000000000000_00", "", "Bearer x"] {
        assert_eq!(
            store.authenticate(presented).unwrap(),
            Err(Refused::Invalid),
            "{presented}"
        );
    }
    let secret_part = token.secret.rsplit('_').next().unwrap();
    for file in std::fs::read_dir(dir.path()).unwrap() {
        let bytes = std::fs::read(file.unwrap().path()).unwrap();
        assert!(!bytes.windows(secret_part.len()).any(|w| w == secret_part.as_bytes()));
    }
    store.revoke_token(&token.id, "admin:root", "leaked").unwrap();
    assert_eq!(store.authenticate(&token.secret).unwrap(), Err(Refused::Revoked));
    assert!(store.revoke_token(&token.id, "admin:root", "again").is_err());
    let again = store.issue_token("alice", "admin:root").unwrap();
    assert_eq!(store.authenticate(&again.secret).unwrap(), Ok(alice));
    assert!(store.add_submitter("alice", false, "admin:root").is_err());
    for bad in ["", "a b", "../x", &"x".repeat(41)] {
        assert!(store.add_submitter(bad, false, "admin:root").is_err(), "{bad}");
    }
}

/// A token as the service stored it before keyed hashes: an argon2 hash.
fn legacy_token(store_path: &std::path::Path, submitter: i64) -> String {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let id = "0123456789ab";
    let secret = format!("mlrbs_{id}_{}", "5".repeat(64));
    let salt = SaltString::encode_b64(b"sixteen byte slt").unwrap();
    let hash = argon2::Argon2::default()
        .hash_password(secret.as_bytes(), &salt)
        .unwrap()
        .to_string();
    let db = rusqlite::Connection::open(store_path).unwrap();
    db.execute(
        "INSERT INTO tokens (id, submitter, hash, created_ms) VALUES (?1, ?2, ?3, 0)",
        rusqlite::params![id, submitter, hash],
    )
    .unwrap();
    secret
}

#[test]
fn tokens_are_keyed_hashes_and_an_old_argon2_one_still_opens_once_rekeyed() {
    let (dir, store) = store();
    let (alice, token) = store.add_submitter("alice", false, "admin:root").unwrap();
    let stored: String = store
        .read(|db| Ok(db.query_row("SELECT hash FROM tokens WHERE id = ?1", [&token.id], |r| r.get(0))?))
        .unwrap();
    assert!(stored.starts_with("blake3-keyed:"), "{stored}");
    // The key is beside the database, not in it: the database alone opens nothing.
    let key = dir.path().join("submissions.token-key");
    assert!(key.is_file());
    let old = legacy_token(&dir.path().join("submissions.db"), alice.id);
    assert_eq!(store.authenticate(&old).unwrap(), Ok(alice.clone()));
    let rekeyed: String = store
        .read(|db| Ok(db.query_row("SELECT hash FROM tokens WHERE id = '0123456789ab'", [], |r| r.get(0))?))
        .unwrap();
    assert!(rekeyed.starts_with("blake3-keyed:"), "not re-stored: {rekeyed}");
    assert_eq!(store.authenticate(&old).unwrap(), Ok(alice.clone()));
    let wrong = old.replace("5555", "4444");
    assert_eq!(store.authenticate(&wrong).unwrap(), Err(Refused::Invalid));
    // Reopened, the same key: the tokens still open.
    drop(store);
    let store = Store::open(&dir.path().join("submissions.db")).unwrap();
    assert_eq!(store.authenticate(&token.secret).unwrap(), Ok(alice));
}

#[test]
fn the_audit_log_refuses_to_change_and_names_every_change() {
    let (dir, store) = store();
    let (alice, token) = store.add_submitter("alice", false, "admin:root").unwrap();
    let submission = store.submit(&alice, &upload(None), &no_limits()).unwrap().unwrap();
    store.set_state(submission.id, State::Running, "", "service").unwrap();
    store.revoke_token(&token.id, "admin:root", "test").unwrap();
    let actions: Vec<String> = store.audit_log().unwrap().into_iter().map(|l| l.action).collect();
    assert_eq!(
        actions,
        [
            "added-submitter",
            "issued-token",
            "submitted",
            "changed-state",
            "revoked-token"
        ]
    );
    // Not even a raw connection to the file may rewrite history.
    let raw = rusqlite::Connection::open(dir.path().join("submissions.db")).unwrap();
    for sql in [
        "UPDATE audit SET detail = 'x'",
        "DELETE FROM audit",
        "DELETE FROM audit WHERE id = 1",
    ] {
        let error = raw.execute(sql, []).unwrap_err().to_string();
        assert!(error.contains("append-only"), "{sql}: {error}");
    }
    assert_eq!(store.audit_log().unwrap().len(), 5);
}

#[test]
fn every_recorded_submission_counts_against_the_quota_refused_ones_too() {
    let (_dir, store) = store();
    let (alice, _) = store.add_submitter("alice", false, "admin:root").unwrap();
    let quota = Quota {
        per_day: 2,
        ..no_limits()
    };
    let refused = store
        .submit(&alice, &upload(Some("imports wasi:sockets")), &quota)
        .unwrap()
        .unwrap();
    assert_eq!(
        (refused.state, refused.reason.as_deref()),
        (State::Refused, Some("imports wasi:sockets"))
    );
    let queued = store.submit(&alice, &upload(None), &quota).unwrap().unwrap();
    store.set_state(queued.id, State::Running, "", "service").unwrap();
    store
        .set_state(queued.id, State::Failed, "the sandbox failed", "service")
        .unwrap();
    let third = store.submit(&alice, &upload(None), &quota).unwrap().unwrap_err();
    assert!(third.why.contains("2 submissions in 24 hours"), "{third:?}");
    assert!(third.retry_after > 0 && third.retry_after <= 24 * 3600);
    // Another submitter's allowance is their own.
    let (bob, _) = store.add_submitter("bob", false, "admin:root").unwrap();
    assert!(store.submit(&bob, &upload(None), &quota).unwrap().is_ok());
}

#[test]
fn a_cooldown_and_the_submissions_in_flight_hold_the_next_one_back() {
    let (_dir, store) = store();
    let (alice, _) = store.add_submitter("alice", false, "admin:root").unwrap();
    let cooldown = Quota {
        cooldown_seconds: 3600,
        ..no_limits()
    };
    store.submit(&alice, &upload(None), &cooldown).unwrap().unwrap();
    let held = store.submit(&alice, &upload(None), &cooldown).unwrap().unwrap_err();
    assert!(
        held.why.contains("one submission per 3600 s") && held.retry_after > 3500,
        "{held:?}"
    );
    let one_at_a_time = Quota {
        in_flight: 1,
        ..no_limits()
    };
    let held = store
        .submit(&alice, &upload(None), &one_at_a_time)
        .unwrap()
        .unwrap_err();
    assert!(held.why.contains("still running"), "{held:?}");
    let usage = Quota {
        llm_usd_per_day: 1.0,
        ..no_limits()
    };
    let (bob, _) = store.add_submitter("bob", false, "admin:root").unwrap();
    let first = store.submit(&bob, &upload(None), &usage).unwrap().unwrap();
    store.add_usage(first.id, 60.0, 1.5).unwrap();
    let held = store.submit(&bob, &upload(None), &usage).unwrap().unwrap_err();
    assert!(held.why.contains("$1.50 of LLM calls"), "{held:?}");
}

#[test]
fn a_submitter_sees_only_their_own_and_states_follow_in_order() {
    let (_dir, store) = store();
    let (alice, _) = store.add_submitter("alice", false, "admin:root").unwrap();
    let (bob, _) = store.add_submitter("bob", false, "admin:root").unwrap();
    let (root, _) = store.add_submitter("root", true, "service").unwrap();
    let mine = store.submit(&alice, &upload(None), &no_limits()).unwrap().unwrap();
    assert!(store.submission(mine.id, &bob).unwrap().is_none());
    assert!(store.submissions(&bob).unwrap().is_empty());
    assert_eq!(store.submission(mine.id, &alice).unwrap().map(|s| s.id), Some(mine.id));
    assert_eq!(store.submissions(&root).unwrap().len(), 1);
    // Queued → ranked skips running and scoring: refused.
    assert!(store.set_state(mine.id, State::Ranked, "", "service").is_err());
    for next in [
        State::Running,
        State::Scoring,
        State::Held,
        State::Ranked,
        State::Invalidated,
        State::Queued,
    ] {
        store.set_state(mine.id, next, "", "admin:root").unwrap();
    }
    store
        .set_state(mine.id, State::Withdrawn, "by its author", "submitter:alice")
        .unwrap();
    let error = store.set_state(mine.id, State::Running, "", "service").unwrap_err();
    assert!(format!("{error}").contains("is withdrawn"), "{error}");
}

#[test]
fn the_database_survives_a_connection_dropped_mid_transaction() {
    let (dir, store) = store();
    let (alice, _) = store.add_submitter("alice", false, "admin:root").unwrap();
    let failed: anyhow::Result<()> = store.change(|tx| {
        tx.execute("UPDATE submitters SET name = 'mallory' WHERE id = ?1", [alice.id])?;
        anyhow::bail!("the service died here")
    });
    assert!(failed.is_err());
    drop(store);
    let store = Store::open(&dir.path().join("submissions.db")).unwrap();
    let listed = store.submissions(&alice).unwrap();
    assert!(listed.is_empty());
    assert_eq!(store.audit_log().unwrap().len(), 2);
    let raw = rusqlite::Connection::open(dir.path().join("submissions.db")).unwrap();
    let name: String = raw.query_row("SELECT name FROM submitters", [], |r| r.get(0)).unwrap();
    assert_eq!(name, "alice");
}

#[test]
fn a_removed_reference_leaves_its_audit_lines_and_its_id_is_never_given_again() {
    let (_dir, store) = store();
    let verdict = super::verdict::Verdict {
        review_flags: 0,
        info_flags: 0,
        verify: "verified".into(),
    };
    let key = ("cpu-mini", "1");
    let ada = store.add_reference(key, "ada", &verdict, "admin:root").unwrap();
    let bob = store.add_reference(key, "bob", &verdict, "admin:root").unwrap();
    assert_eq!((ada.id, bob.id), (1, 2));
    let why = store
        .remove_reference(key, "eve", "admin:root")
        .unwrap_err()
        .to_string();
    assert!(why.contains("no reference of eve (its references: ada, bob)"), "{why}");
    // Another version's reference of the same name is not this one.
    let why = store
        .remove_reference(("cpu-mini", "2"), "ada", "admin:root")
        .unwrap_err();
    assert!(why.to_string().contains("its references: none"), "{why}");
    assert_eq!(store.remove_reference(key, "bob", "admin:root").unwrap().id, 2);
    assert!(store.reference(2).unwrap().is_none());
    assert_eq!(store.reference(1).unwrap().map(|r| r.name), Some("ada".into()));
    // The highest id is gone, yet the next one is new.
    assert_eq!(store.add_reference(key, "bob", &verdict, "admin:root").unwrap().id, 3);
    let log = store.audit_log().unwrap();
    let lines: Vec<(&str, &str)> = log.iter().map(|l| (l.action.as_str(), l.subject.as_str())).collect();
    assert_eq!(
        lines,
        [
            ("added-reference", "reference:1"),
            ("added-reference", "reference:2"),
            ("removed-reference", "reference:2"),
            ("added-reference", "reference:3"),
        ]
    );
}

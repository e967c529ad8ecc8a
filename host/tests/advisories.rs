//! Cargo.lock against the RustSec advisories kept in advisories/ (a copy of
//! the database's entries for the crates the lock names, refreshed by
//! scripts/refresh_advisories.sh), offline. A crate version matches an
//! advisory when it is in none of its `patched` and `unaffected` ranges.
//! Only vulnerabilities fail the check; withdrawn advisories and
//! informational ones (`unmaintained`, `unsound`, `notice`) are printed.
//! advisories/ignore.toml lists the accepted ones, each with a reason and a
//! date after which it fails again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use semver::{Version, VersionReq};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One advisory's front matter.
#[derive(Debug, Clone)]
struct Advisory {
    id: String,
    package: String,
    informational: Option<String>,
    withdrawn: Option<String>,
    patched: Vec<VersionReq>,
    unaffected: Vec<VersionReq>,
    title: String,
}

impl Advisory {
    /// Reads the TOML front matter (between "```toml" and "```") of `text`.
    fn parse(text: &str, file: &Path) -> Advisory {
        let front = text
            .split_once("```toml")
            .and_then(|(_, rest)| rest.split_once("```"))
            .map(|(front, _)| front)
            .unwrap_or_else(|| panic!("{}: no ```toml front matter", file.display()));
        let doc: toml::Table = toml::from_str(front).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let advisory = doc["advisory"].as_table().expect("[advisory]");
        let text_of = |key: &str| advisory.get(key).and_then(|v| v.as_str()).map(str::to_string);
        let ranges = |key: &str| -> Vec<VersionReq> {
            let versions = doc.get("versions").and_then(|v| v.as_table());
            let list = versions.and_then(|v| v.get(key)).and_then(|v| v.as_array());
            list.into_iter()
                .flatten()
                .map(|r| {
                    let r = r.as_str().expect("a version range is a string");
                    VersionReq::parse(r).unwrap_or_else(|e| panic!("{}: range `{r}`: {e}", file.display()))
                })
                .collect()
        };
        let title = text.lines().find(|l| l.starts_with("# ")).unwrap_or("# ?")[2..].to_string();
        Advisory {
            id: text_of("id").expect("[advisory] id"),
            package: text_of("package").expect("[advisory] package"),
            informational: text_of("informational"),
            withdrawn: text_of("withdrawn"),
            patched: ranges("patched"),
            unaffected: ranges("unaffected"),
            title,
        }
    }

    fn affects(&self, version: &Version) -> bool {
        !self.patched.iter().chain(&self.unaffected).any(|r| r.matches(version))
    }

    fn is_vulnerability(&self) -> bool {
        self.withdrawn.is_none() && self.informational.is_none()
    }
}

/// The crates of Cargo.lock: (name, version).
fn locked() -> Vec<(String, Version)> {
    let text = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    let lock: toml::Table = toml::from_str(&text).unwrap();
    lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let name = p["name"].as_str().unwrap().to_string();
            let version = Version::parse(p["version"].as_str().unwrap()).unwrap();
            (name, version)
        })
        .collect()
}

/// Every advisory kept of crate `name`.
fn advisories_of(name: &str) -> Vec<Advisory> {
    let dir = root().join("advisories/crates").join(name);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found: Vec<Advisory> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| Advisory::parse(&std::fs::read_to_string(&p).unwrap(), &p))
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found
}

/// Each locked crate version with each advisory that matches it.
fn matches(lock: &[(String, Version)]) -> Vec<(String, Version, Advisory)> {
    let mut found = Vec::new();
    for (name, version) in lock {
        for advisory in advisories_of(name) {
            assert_eq!(&advisory.package, name, "{} is filed under another crate", advisory.id);
            if advisory.affects(version) {
                found.push((name.clone(), version.clone(), advisory));
            }
        }
    }
    found
}

/// advisories/ignore.toml: (id, until, reason).
fn accepted() -> Vec<(String, chrono::NaiveDate, String)> {
    let path = root().join("advisories/ignore.toml");
    let doc: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let list = doc
        .get("ignore")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    list.iter()
        .map(|entry| {
            let field = |key: &str| {
                entry
                    .get(key)
                    .and_then(|v| v.as_str())
                    .unwrap_or_else(|| panic!("{}: an [[ignore]] without `{key}`", path.display()))
                    .to_string()
            };
            let until = chrono::NaiveDate::parse_from_str(&field("until"), "%Y-%m-%d")
                .unwrap_or_else(|e| panic!("{}: `until` of {}: {e} (write YYYY-MM-DD)", path.display(), field("id")));
            (field("id"), until, field("reason"))
        })
        .collect()
}

#[test]
fn no_dependency_matches_a_vulnerability_advisory() {
    let found = matches(&locked());
    let accepted = accepted();
    let today = chrono::Utc::now().date_naive();
    let mut failures = Vec::new();
    for (name, version, advisory) in &found {
        let line = format!("{name} {version}: {} {}", advisory.id, advisory.title);
        let kind = match (&advisory.withdrawn, &advisory.informational) {
            (Some(when), _) => format!("withdrawn {when}"),
            (None, Some(kind)) => kind.clone(),
            (None, None) => "vulnerability".into(),
        };
        match accepted.iter().find(|(id, ..)| *id == advisory.id) {
            _ if !advisory.is_vulnerability() => println!("reported, not failing ({kind}): {line}"),
            Some((_, until, _)) if *until >= today => {
                println!("accepted until {until} (advisories/ignore.toml): {line}")
            }
            Some((_, until, _)) => failures.push(format!("{line} (accepted only until {until})")),
            None => failures.push(line),
        }
    }
    for (id, ..) in &accepted {
        if !found.iter().any(|(_, _, a)| a.id == *id) {
            failures.push(format!(
                "advisories/ignore.toml accepts {id}, which matches nothing now: remove it"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "dependencies with known vulnerabilities (move to a patched version, or accept one in advisories/ignore.toml with a reason):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_copy_covers_every_crate_of_the_lock() {
    let text = std::fs::read_to_string(root().join("advisories/locked-crates.txt")).unwrap();
    let covered: BTreeSet<&str> = text.lines().collect();
    let missing: BTreeSet<String> = locked()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| !covered.contains(name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "Cargo.lock names crates added after advisories/ was refreshed: {missing:?}: run scripts/refresh_advisories.sh PATH/TO/advisory-db"
    );
}

#[test]
fn wasmtime_48_0_8_matches_the_abort_advisory_and_48_0_9_does_not() {
    let lock = |version: &str| vec![("wasmtime".to_string(), Version::parse(version).unwrap())];
    let ids = |version: &str| -> Vec<String> { matches(&lock(version)).into_iter().map(|m| m.2.id).collect() };
    assert!(
        ids("48.0.8").contains(&"RUSTSEC-2026-0570".to_string()),
        "{:?}",
        ids("48.0.8")
    );
    assert!(ids("48.0.3").contains(&"RUSTSEC-2026-0325".to_string()));
    assert!(ids("48.0.9").is_empty(), "{:?}", ids("48.0.9"));
    assert!(ids("50.0.2").is_empty(), "{:?}", ids("50.0.2"));
    assert!(!ids("49.0.5").is_empty(), "49.0.5 is affected too");
}

#[test]
fn ranges_withdrawals_and_informational_advisories_are_read_as_rustsec_means_them() {
    let text = |extra: &str, patched: &str, unaffected: &str| {
        format!(
            "```toml\n[advisory]\nid = \"RUSTSEC-0000-0000\"\npackage = \"demo\"\n{extra}\n[versions]\npatched = [{patched}]\nunaffected = [{unaffected}]\n```\n\n# A demo\n"
        )
    };
    let parse = |t: &str| Advisory::parse(t, Path::new("demo.md"));
    let v = |s: &str| Version::parse(s).unwrap();
    let ranged = parse(&text("", "\">= 1.2.3, < 2.0.0\", \">= 2.0.1\"", "\"< 1.0.0\""));
    assert!(ranged.affects(&v("1.2.2")) && ranged.affects(&v("2.0.0")));
    assert!(!ranged.affects(&v("1.2.3")) && !ranged.affects(&v("2.0.1")) && !ranged.affects(&v("0.9.0")));
    assert!(ranged.is_vulnerability());
    let everything = parse(&text("", "", ""));
    assert!(
        everything.affects(&v("0.1.0")),
        "no patched release: every version is affected"
    );
    assert!(!parse(&text("informational = \"unmaintained\"", "", "")).is_vulnerability());
    assert!(!parse(&text("withdrawn = \"2025-02-22\"", "", "")).is_vulnerability());
}

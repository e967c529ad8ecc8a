//! The leaderboard's page opened in headless Chromium (Debian's
//! `chromium`): its rows in rank order, the names strangers chose shown as
//! text and never as elements, no script, and, while the version is open,
//! no score of the private part.

mod common;

use common::chromium::{chromium, render};
use std::path::Path;

use mlrb::bench::result_line::ResultLine;
use mlrb::submissions::leaderboard::{Entry, Verify, board, html};
use mlrb::submissions::{Benchmark, State};

const CLOSES: &str = "2026-12-31T00:00:00Z";

fn closes_ms() -> i64 {
    chrono::DateTime::parse_from_rfc3339(CLOSES).unwrap().timestamp_millis()
}

fn benchmark(dir: &Path) -> Benchmark {
    let path = dir.join("benchmark.toml");
    let text =
        format!("name = \"cpu-mini\"\nversion = \"2026-11\"\ncloses = \"{CLOSES}\"\n[plan]\ntasks = [\"digits\"]\n");
    std::fs::write(&path, text).unwrap();
    Benchmark::load(&path).unwrap()
}

/// A scored episode of `digits`: `private` on the private part, `public`
/// the best the public part told the agent.
fn episode(seed: u64, private: f64, public: f64) -> ResultLine {
    let mut r = ResultLine::infra_failed(&format!("digits/a/{seed}"), "digits", "a", seed, "d", 1, "");
    r.infra_error = None;
    (r.metric, r.valid, r.score, r.public_score) = ("accuracy".into(), true, Some(private), Some(public));
    (r.baseline, r.reference, r.normalized) = (Some(0.0), Some(1.0), Some(private));
    (r.success, r.cost_usd) = (Some(private > 0.5), 0.0123);
    r
}

/// Two ranked entries whose private order is the reverse of their public
/// one, both named to attack the page, and one held for review.
fn entries() -> Vec<Entry> {
    let entry = |id, agent: &str, state, results| Entry {
        id,
        agent: agent.into(),
        submitter: format!("submitter-{id}"),
        state,
        results,
        review_flags: 1,
        info_flags: 2,
        verify: Verify::Pending,
        person: None,
    };
    vec![
        entry(
            1,
            "<script>alert(1)</script>",
            State::Ranked,
            vec![episode(1, 0.95, 0.5), episode(2, 0.85, 0.6)],
        ),
        entry(
            2,
            "\"><img src=x onerror=alert(1)>",
            State::Ranked,
            vec![episode(1, 0.25, 0.7), episode(2, 0.35, 0.8)],
        ),
        entry(3, "careful", State::Held, vec![episode(1, 0.99, 0.4)]),
    ]
}

/// The page of the board at `now_ms`, as Chromium renders it.
fn rendered(chromium: &Path, now_ms: i64) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let page = html(&board(&benchmark(tmp.path()), &entries(), now_ms));
    let path = tmp.path().join("leaderboard.html");
    std::fs::write(&path, &page).unwrap();
    let dom = render(chromium, &format!("file://{}", path.display()));
    assert!(dom.contains("<table id=\"leaderboard\">"), "{dom}");
    // What strangers named their agents is text: no element came of it.
    assert!(!dom.contains("<script") && !dom.contains("<img"), "{dom}");
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{dom}");
    assert!(dom.contains("\"&gt;&lt;img src=x onerror=alert(1)&gt;"), "{dom}");
    dom
}

/// The text of `<td class="{class}">` in `row`.
fn cell<'a>(row: &'a str, class: &str) -> &'a str {
    let open = format!("<td class=\"{class}\">");
    let start = row.find(&open).unwrap_or_else(|| panic!("no {class} cell: {row}")) + open.len();
    &row[start..start + row[start..].find("</td>").unwrap()]
}

/// (rank, agent) of each row of the table's body, in order.
fn rows(dom: &str) -> Vec<(String, String)> {
    let body = &dom[dom.find("<tbody>").unwrap()..dom.find("</tbody>").unwrap()];
    body.split("<tr")
        .skip(1)
        .map(|row| (cell(row, "rank").to_string(), cell(row, "agent").to_string()))
        .collect()
}

fn expected(order: [(&str, &str); 3]) -> Vec<(String, String)> {
    order.iter().map(|(r, a)| (r.to_string(), a.to_string())).collect()
}

const SCRIPT: &str = "&lt;script&gt;alert(1)&lt;/script&gt;";
const IMG: &str = "\"&gt;&lt;img src=x onerror=alert(1)&gt;";

#[test]
fn the_open_board_ranks_on_the_public_part_and_shows_nothing_private() {
    let Some(chromium) = chromium() else { return };
    let dom = rendered(&chromium, closes_ms() - 1);
    assert_eq!(
        rows(&dom),
        expected([("1", IMG), ("2", SCRIPT), ("held for review", "careful")])
    );
    assert!(
        dom.contains("Provisional") && dom.contains("closes on 2026-12-31 00:00 UTC"),
        "{dom}"
    );
    // The public means (0.75, 0.55), none of the private ones (0.30, 0.90, 0.99).
    assert!(dom.contains(">0.7500 ") && dom.contains(">0.5500 "), "{dom}");
    for private in ["0.3000", "0.9000", "0.9900"] {
        assert!(!dom.contains(private), "{private} while open: {dom}");
    }
    assert!(!dom.contains("%</td>"), "no success rate while open: {dom}");
}

#[test]
fn the_closed_board_ranks_on_the_private_part() {
    let Some(chromium) = chromium() else { return };
    let dom = rendered(&chromium, closes_ms());
    assert_eq!(
        rows(&dom),
        expected([("1", SCRIPT), ("2", IMG), ("held for review", "careful")])
    );
    assert!(dom.contains("Final") && !dom.contains("Provisional"), "{dom}");
    assert!(dom.contains(">0.9000 ") && dom.contains(">0.3000 "), "{dom}");
    assert!(dom.contains("<td class=\"success\">100.0 %</td>"), "{dom}");
    assert!(dom.contains("<td class=\"cost\">$0.0123</td>"), "{dom}");
    assert!(
        dom.contains("href=\"/records/1\"") && dom.contains("href=\"/view/2/\""),
        "{dom}"
    );
}

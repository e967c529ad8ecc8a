//! A board as one complete page, rendered on the server: no script at all
//! (its Content-Security-Policy refuses any, should one ever slip in),
//! styled inline so it works offline, and every text a submitter wrote
//! escaped, since agent and submitter names come from strangers.

use super::{Board, Estimate, HELD, Part, Row, Verify};

/// What a person's reference row shows for a rank.
const PERSON: &str = "a person: reference, not ranked";

/// What a missing value shows.
const DASH: &str = "–";

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse}th,td{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.rank,td.score,td.normalized,td.success,td.cost{text-align:right;white-space:nowrap}\
tr.held{color:#777}tr.reference{background:#f4f8ff}.ci,.n{color:#666;font-size:.85em}\
.notice{padding:.6em 1em;border-left:4px solid #c80;background:#fff8e8}.notice.final{border-color:#282;background:#eef8ee}";

const COLUMNS: [&str; 11] = [
    "rank",
    "agent",
    "submitter",
    "score",
    "episodes",
    "success rate",
    "normalised score",
    "cost per episode",
    "flags (review / info)",
    "verification",
    "links",
];

/// `board` as a complete HTML page.
pub fn html(board: &Board) -> String {
    let title = text(&format!("{} {} leaderboard", board.benchmark, board.version));
    // No source of anything: styles inline, no script, no image, no form.
    let policy = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n{}\
         <p class=\"basis\">Tasks: {}. Ordered by {}.</p>\n{}{}</body>\n</html>\n",
        notice(board),
        text(&board.tasks.join(", ")),
        text(&board.ranked_by),
        table(board),
        references(board),
    )
}

/// Which part the scores are of, and whether the ranking is final.
fn notice(board: &Board) -> String {
    let date = board.closes.as_deref().map(date);
    match (board.part, date) {
        (Part::Public, Some(date)) => format!(
            "<p class=\"notice provisional\"><strong>Provisional.</strong> These are scores on the public part \
             of the hidden answers. The ranking on the private part appears when the version closes on {date}.</p>\n"
        ),
        (Part::Public, None) => "<p class=\"notice provisional\"><strong>Provisional.</strong> These are scores \
             on the public part of the hidden answers. The ranking on the private part appears when the version \
             closes (no closing date is set yet).</p>\n"
            .into(),
        (Part::Private, date) => format!(
            "<p class=\"notice final\"><strong>Final.</strong> Ranked on the private part of the hidden answers; \
             the version closed{}.</p>\n",
            date.map_or(String::new(), |d| format!(" on {d}"))
        ),
    }
}

/// An RFC 3339 time as "2026-12-31 00:00 UTC" (as given, where it is not one).
fn date(rfc3339: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(rfc3339) {
        Ok(at) => at.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M UTC").to_string(),
        Err(_) => text(rfc3339),
    }
}

fn table(board: &Board) -> String {
    let part = match board.part {
        Part::Public => "public part",
        Part::Private => "private part",
    };
    let head: String = COLUMNS
        .iter()
        .map(|c| match *c {
            "score" => format!("<th>score, {part} (95 % interval)</th>"),
            c => format!("<th>{c}</th>"),
        })
        .collect();
    let mut body = String::new();
    if !board.rows.iter().any(|r| r.state != HELD) {
        body += &format!(
            "<tr class=\"empty\"><td colspan=\"{}\">no ranked submissions yet</td></tr>\n",
            COLUMNS.len()
        );
    }
    for row in &board.rows {
        body += &table_row(row, board.part);
    }
    format!("<table id=\"leaderboard\">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n")
}

/// People's runs the organisers added as references, apart from the
/// ranking (none: nothing).
fn references(board: &Board) -> String {
    if board.references.is_empty() {
        return String::new();
    }
    let head: String = COLUMNS.iter().map(|c| format!("<th>{c}</th>")).collect();
    let body: String = board.references.iter().map(|r| table_row(r, board.part)).collect();
    format!(
        "<h2>References: people</h2>\n<p class=\"references\">Episodes a person worked (<code>mlrb human</code>), \
         added by the organisers as a human reference: scored and verified as submissions are, shown for \
         comparison, never ranked among them.</p>\n\
         <table id=\"references\">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n"
    )
}

fn table_row(row: &Row, part: Part) -> String {
    let class = match (&row.person, row.state == HELD) {
        (Some(_), _) => "reference",
        (None, true) => "held",
        (None, false) => "ranked",
    };
    let rank = match row.rank {
        Some(rank) => rank.to_string(),
        None if row.person.is_some() => text(PERSON),
        None if row.state == HELD => text(HELD),
        None => DASH.into(),
    };
    let links = match row.records.is_empty() {
        true => DASH.into(),
        false => format!(
            "<a href=\"{}\">records</a> <a href=\"{}\">trace</a>",
            text(&row.records),
            text(&row.trace)
        ),
    };
    let cells = [
        ("rank", rank),
        ("agent", text(&row.agent)),
        ("submitter", text(&row.submitter)),
        ("score", estimate(row.score)),
        ("episodes", episodes(row, part)),
        ("success", percent(row.success_rate)),
        ("normalized", estimate(row.normalized)),
        ("cost", usd(row.cost_per_episode_usd)),
        ("flags", format!("{} / {}", row.review_flags, row.info_flags)),
        ("verify", verify(&row.verify)),
        ("links", links),
    ];
    let cells: String = cells
        .iter()
        .map(|(class, cell)| format!("<td class=\"{class}\">{cell}</td>"))
        .collect();
    format!("<tr class=\"{class}\">{cells}</tr>\n")
}

/// "3 (2 valid, 1 infra failure left out)".
fn episodes(row: &Row, part: Part) -> String {
    let valid = match part {
        Part::Public => "with a public score",
        Part::Private => "valid",
    };
    let infra = match row.infra_failures {
        0 => String::new(),
        1 => ", 1 infra failure left out".into(),
        n => format!(", {n} infra failures left out"),
    };
    format!("{} ({} {valid}{infra})", row.episodes, row.valid)
}

fn verify(verify: &Verify) -> String {
    match verify {
        Verify::Pending => "pending".into(),
        Verify::Verified => "verified".into(),
        Verify::Failed(why) => format!("failed: {}", text(why)),
    }
}

/// "0.9123 [0.9001, 0.9245] n 3".
fn estimate(value: Option<Estimate>) -> String {
    let Some(e) = value else { return DASH.into() };
    let interval = match (e.low, e.high) {
        (Some(low), Some(high)) => format!(" <span class=\"ci\">[{}, {}]</span>", number(low), number(high)),
        _ => String::new(),
    };
    format!("{}{interval} <span class=\"n\">n {}</span>", number(e.mean), e.n)
}

/// A score to four significant digits: 0.9123, 12.35, 1235, 0.0001235.
fn number(value: f64) -> String {
    if !value.is_finite() {
        return DASH.into();
    }
    // Zero as a score below one is shown: 0.0000.
    let magnitude = if value == 0.0 {
        -1
    } else {
        value.abs().log10().floor() as i32
    };
    let decimals = (3 - magnitude).clamp(0, 12) as usize;
    // `+ 0.0`: no "-0.0000".
    format!("{:.decimals$}", value + 0.0)
}

/// A rate as a percentage: "66.7 %".
fn percent(value: Option<f64>) -> String {
    value.map_or(DASH.into(), |v| format!("{:.1} %", v * 100.0))
}

/// Dollars to four decimals: "$0.0123".
fn usd(value: f64) -> String {
    format!("${:.4}", value + 0.0)
}

/// `s` escaped as text or as a quoted attribute value.
fn text(s: &str) -> String {
    crate::format::esc(s).replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rank: Option<usize>, agent: &str, submitter: &str) -> Row {
        Row {
            rank,
            id: 7,
            agent: agent.into(),
            submitter: submitter.into(),
            state: if rank.is_some() { "ranked".into() } else { HELD.into() },
            episodes: 3,
            valid: 2,
            infra_failures: 1,
            score: Some(Estimate {
                mean: 0.912_34,
                low: Some(0.9),
                high: Some(0.924_5),
                n: 2,
            }),
            normalized: None,
            success_rate: Some(2.0 / 3.0),
            cost_per_episode_usd: 0.012_34,
            review_flags: 2,
            info_flags: 1,
            verify: Verify::Pending,
            records: "/records/7".into(),
            trace: "/view/7/".into(),
            person: None,
        }
    }

    fn board(part: Part, rows: Vec<Row>) -> Board {
        Board {
            benchmark: "cpu-mini".into(),
            version: "2026-11".into(),
            closes: Some("2026-12-31T00:00:00Z".into()),
            closed: part == Part::Private,
            part,
            tasks: vec!["digits".into()],
            ranked_by: "mean accuracy".into(),
            rows,
            references: Vec::new(),
        }
    }

    /// The names of every tag in `page`, and the attributes of each.
    fn tags(page: &str) -> Vec<(String, Vec<String>)> {
        page.split('<')
            .skip(1)
            .map(|rest| {
                let tag = &rest[..rest.find('>').expect("every tag closes")];
                let mut words = tag.split_whitespace();
                let name = words.next().unwrap_or("").to_ascii_lowercase();
                (name, words.map(|w| w.to_ascii_lowercase()).collect())
            })
            .collect()
    }

    #[test]
    fn what_strangers_wrote_is_text_never_a_tag_and_the_page_has_no_script() {
        let mut hostile = row(Some(1), "<script>alert(1)</script>", "\"><img src=x onerror=alert(1)>");
        hostile.verify = Verify::Failed("<b onmouseover='x'>".into());
        let mut other = row(None, "'><svg onload=alert(1)>", "a&b");
        other.verify = Verify::Verified;
        let page = html(&board(Part::Private, vec![hostile, other]));
        let allowed = [
            "!doctype", "html", "head", "meta", "title", "style", "body", "h1", "p", "strong", "table", "thead",
            "tbody", "tr", "th", "td", "span", "a",
        ];
        for (name, attributes) in tags(&page) {
            let name = name.trim_start_matches('/');
            assert!(allowed.contains(&name), "a <{name}> tag: {page}");
            assert!(
                attributes.iter().all(|a| !a.starts_with("on")),
                "<{name} {attributes:?}>"
            );
        }
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{page}");
        assert!(page.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"), "{page}");
        assert!(
            page.contains("&#39;&gt;&lt;svg onload=alert(1)&gt;") && page.contains("a&amp;b"),
            "{page}"
        );
        assert!(page.contains("failed: &lt;b onmouseover=&#39;x&#39;&gt;"), "{page}");
        // Nothing is fetched: it works offline.
        assert!(!page.contains("http://") && !page.contains("https://"), "{page}");
    }

    #[test]
    fn a_row_shows_every_column_formatted() {
        let page = html(&board(Part::Private, vec![row(Some(1), "a", "s")]));
        for cell in [
            "<td class=\"rank\">1</td>",
            "<td class=\"score\">0.9123 <span class=\"ci\">[0.9000, 0.9245]</span> <span class=\"n\">n 2</span></td>",
            "<td class=\"episodes\">3 (2 valid, 1 infra failure left out)</td>",
            "<td class=\"success\">66.7 %</td>",
            "<td class=\"normalized\">–</td>",
            "<td class=\"cost\">$0.0123</td>",
            "<td class=\"flags\">2 / 1</td>",
            "<td class=\"verify\">pending</td>",
            "<a href=\"/records/7\">records</a> <a href=\"/view/7/\">trace</a>",
            "<th>score, private part (95 % interval)</th>",
        ] {
            assert!(page.contains(cell), "{cell}: {page}");
        }
        let held = html(&board(Part::Public, vec![row(None, "a", "s")]));
        assert!(
            held.contains("<tr class=\"held\"><td class=\"rank\">held for review</td>"),
            "{held}"
        );
        assert!(
            held.contains("(2 with a public score, 1 infra failure left out)"),
            "{held}"
        );
    }

    #[test]
    fn the_open_page_says_its_scores_are_provisional_and_when_the_ranking_comes() {
        let open = html(&board(Part::Public, vec![row(Some(1), "a", "s")]));
        assert!(open.contains("Provisional") && open.contains("public part"), "{open}");
        assert!(
            open.contains("ranking on the private part appears when the version closes on 2026-12-31 00:00 UTC"),
            "{open}"
        );
        let mut never = board(Part::Public, vec![]);
        never.closes = None;
        assert!(html(&never).contains("no closing date is set yet"));
        let closed = html(&board(Part::Private, vec![row(Some(1), "a", "s")]));
        assert!(!closed.contains("Provisional") && closed.contains("Final"), "{closed}");
        assert!(closed.contains("closed on 2026-12-31 00:00 UTC"), "{closed}");
    }

    #[test]
    fn an_empty_board_says_so_in_a_table_with_a_head() {
        let page = html(&board(Part::Public, vec![]));
        assert!(
            page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"),
            "{page}"
        );
        assert!(
            page.contains("<table id=\"leaderboard\">\n<thead><tr><th>rank</th>"),
            "{page}"
        );
        assert!(page.contains("no ranked submissions yet"), "{page}");
        // Held rows only: still none ranked.
        let held = html(&board(Part::Public, vec![row(None, "a", "s")]));
        assert!(held.contains("no ranked submissions yet"), "{held}");
        let ranked = html(&board(Part::Public, vec![row(Some(1), "a", "s")]));
        assert!(!ranked.contains("no ranked submissions yet"), "{ranked}");
    }

    #[test]
    fn numbers_have_four_significant_digits_rates_percentages_and_cost_dollars() {
        let shown: Vec<String> = [0.912_34, 12.345_6, 1234.56, 0.000_123_456, 0.0, -0.5]
            .into_iter()
            .map(number)
            .collect();
        assert_eq!(shown, ["0.9123", "12.35", "1235", "0.0001235", "0.0000", "-0.5000"]);
        assert_eq!(
            (percent(Some(2.0 / 3.0)), percent(Some(1.0))),
            ("66.7 %".into(), "100.0 %".into())
        );
        assert_eq!((usd(0.0123), usd(-0.0)), ("$0.0123".into(), "$0.0000".into()));
        assert_eq!(
            (percent(None), estimate(None), number(f64::NAN)),
            (DASH.into(), DASH.into(), DASH.into())
        );
        let lone = Estimate {
            mean: 0.5,
            low: None,
            high: None,
            n: 1,
        };
        assert_eq!(estimate(Some(lone)), "0.5000 <span class=\"n\">n 1</span>");
    }
}

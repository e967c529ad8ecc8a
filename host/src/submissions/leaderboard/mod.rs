//! The leaderboard of a published benchmark version, as pure functions:
//! the submissions given (`Entry`), their rows computed and ordered
//! (`board`) and the page that shows them (`html`).
//!
//! Until the version closes a board carries nothing derived from the
//! private part of the hidden answers, not even its order: each row shows
//! the public part's score, provisional. Once it closes the rows are ranked
//! on the private part. What a result counts as (an invalid submission, an
//! infrastructure failure) is read through `bench::ranked`, as every other
//! table reads it.

mod html;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::benchmark::Benchmark;
use super::submission::State;
use crate::bench::ranked;
use crate::bench::result_line::ResultLine;
use crate::stats::{clustered_mean, estimate};

pub use html::html;

/// How far a ranked submission's records were checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "status", content = "detail")]
pub enum Verify {
    /// Not checked yet.
    Pending,
    /// Its records, bindings and scores checked out (`mlrb verify`).
    Verified,
    /// The check failed: why.
    Failed(String),
}

/// One submission, as the leaderboard is given it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The submission's id.
    pub id: i64,
    /// The agent's name, as submitted.
    pub agent: String,
    /// Who submitted it.
    pub submitter: String,
    /// Ranked or Held are shown; others are skipped.
    pub state: State,
    /// One line per episode.
    pub results: Vec<ResultLine>,
    /// `mlrb scan` flags for review.
    pub review_flags: usize,
    /// `mlrb scan` flags for information.
    pub info_flags: usize,
    /// How far its records were checked.
    pub verify: Verify,
    /// A person's run the organisers added as a reference (`mlrb
    /// submissions reference`): the person's name. Shown beside the
    /// submissions, never ranked among them.
    pub person: Option<String>,
}

/// Which part of the hidden answers a board's scores are of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// The public part: the version is open, the scores are provisional.
    Public,
    /// The private part: the version is closed, the ranking is final.
    Private,
}

/// A mean with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The mean.
    pub mean: f64,
    /// The interval's lower end; none where there is no interval (one
    /// value, or one task where the interval is clustered by task).
    pub low: Option<f64>,
    /// The interval's upper end.
    pub high: Option<f64>,
    /// How many values the mean is of.
    pub n: usize,
}

/// A benchmark version's leaderboard.
#[derive(Debug, Clone, Serialize)]
pub struct Board {
    /// The benchmark's name.
    pub benchmark: String,
    /// Its version.
    pub version: String,
    /// When the version closes (RFC 3339), if ever.
    pub closes: Option<String>,
    /// Whether it has closed.
    pub closed: bool,
    /// The part the scores are of: private once closed, public (provisional) before.
    pub part: Part,
    /// The benchmark's tasks.
    pub tasks: Vec<String>,
    /// What the rows are ordered by, in words (the score column's heading).
    pub ranked_by: String,
    /// Ranked submissions in rank order, then those held for review.
    pub rows: Vec<Row>,
    /// People's runs the organisers added as references, best first:
    /// scored like the rows, never ranked among them.
    pub references: Vec<Row>,
}

/// One submission on the board.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Its rank (shared by ties); none when held or without a score.
    pub rank: Option<usize>,
    /// The submission's id.
    pub id: i64,
    /// The agent's name, as submitted.
    pub agent: String,
    /// Who submitted it.
    pub submitter: String,
    /// `ranked` or `held for review`.
    pub state: String,
    /// Episodes run, invalid ones and infrastructure failures included.
    pub episodes: usize,
    /// Episodes with a valid submission; while open, those the public part scored.
    pub valid: usize,
    /// Episodes the infrastructure failed: left out of every mean.
    pub infra_failures: usize,
    /// The shown part's score the row is ranked by, with its 95 % interval.
    pub score: Option<Estimate>,
    /// The normalised score (starter 0, reference 1); private part only: none while open.
    pub normalized: Option<Estimate>,
    /// The share of judged episodes that succeeded; private part only: none while open.
    pub success_rate: Option<f64>,
    /// Mean model cost of an episode, in USD.
    pub cost_per_episode_usd: f64,
    /// `mlrb scan` flags for review.
    pub review_flags: usize,
    /// `mlrb scan` flags for information.
    pub info_flags: usize,
    /// How far its records were checked.
    pub verify: Verify,
    /// Link to its records.
    pub records: String,
    /// Link to its trace viewer.
    pub trace: String,
    /// A person's reference row: the person's name (none for a submission).
    pub person: Option<String>,
}

/// What `state` a person's reference row shows.
pub const REFERENCE: &str = "reference (a person)";

/// What `state` a held row shows.
pub const HELD: &str = "held for review";

/// The board of `benchmark` at `now_ms` (ms since the Unix epoch) for
/// `entries`: Ranked ones ranked, then Held ones, the rest left out.
pub fn board(benchmark: &Benchmark, entries: &[Entry], now_ms: i64) -> Board {
    let closed = benchmark.closed(now_ms);
    // A smoke episode's score measures nothing: its entry is never on a board.
    let entries: Vec<Entry> = entries
        .iter()
        .filter(|e| !e.results.iter().any(|r| r.smoke))
        .cloned()
        .collect();
    let basis = Basis::of(benchmark, &entries, closed);
    let shown = entries
        .iter()
        .filter(|e| e.person.is_none() && matches!(e.state, State::Ranked | State::Held));
    let mut rows: Vec<Row> = shown.map(|e| basis.row(e)).collect();
    basis.rank(&mut rows);
    let mut references: Vec<Row> = entries
        .iter()
        .filter(|e| e.person.is_some())
        .map(|e| basis.row(e))
        .collect();
    // Ordered as rows are, but a person is never given a rank.
    basis.rank(&mut references);
    references.iter_mut().for_each(|r| r.rank = None);
    Board {
        benchmark: benchmark.name.clone(),
        version: benchmark.version.clone(),
        closes: benchmark.closes.clone(),
        closed,
        part: basis.part,
        tasks: benchmark.plan.tasks.clone(),
        ranked_by: basis.ranked_by(),
        rows,
        references,
    }
}

/// How every row of a board is scored and ordered.
struct Basis {
    part: Part,
    /// Several tasks: scores of different metrics, so a scale they share.
    several: bool,
    metric: String,
    /// Of the metric (task metadata, known before anything is scored).
    higher_is_better: bool,
}

/// What a row shows of the part it is scored on.
struct Shown {
    valid: usize,
    score: Option<Estimate>,
    normalized: Option<Estimate>,
    success_rate: Option<f64>,
}

impl Basis {
    fn of(benchmark: &Benchmark, entries: &[Entry], closed: bool) -> Self {
        // An infrastructure failure's line names no metric (and says higher is better).
        let scored = entries.iter().flat_map(|e| &e.results).find(|r| !r.metric.is_empty());
        Self {
            part: if closed { Part::Private } else { Part::Public },
            several: benchmark.plan.tasks.len() > 1,
            metric: scored.map_or("score".into(), |r| r.metric.clone()),
            // A benchmark's tasks declare their direction (`task.toml`
            // must); an unknown one is ranked as its score reads.
            higher_is_better: scored.is_none_or(|r| r.higher_is_better != Some(false)),
        }
    }

    /// Whether a higher `Row::score` ranks higher: the shared scales of
    /// several tasks (normalised score, improvement) always do.
    fn higher_ranks_higher(&self) -> bool {
        self.several || self.higher_is_better
    }

    fn ranked_by(&self) -> String {
        let direction = if self.higher_ranks_higher() { "higher" } else { "lower" };
        let what = match (self.part, self.several) {
            (Part::Private, false) => format!("mean {} on the private part", self.metric),
            (Part::Private, true) => "mean normalised score on the private part (starter 0, reference 1)".into(),
            (Part::Public, false) => format!("provisional: mean best {} on the public part", self.metric),
            (Part::Public, true) => "provisional: mean improvement over the starter on the public part".into(),
        };
        let interval = if self.several {
            "clustered by task"
        } else {
            "over seeds"
        };
        format!("{what}, {direction} is better; 95 % interval {interval}")
    }

    fn row(&self, entry: &Entry) -> Row {
        let counted: Vec<&ResultLine> = entry.results.iter().filter(|r| ranked::counted(r)).collect();
        let shown = match self.part {
            Part::Public => self.public(&counted),
            Part::Private => self.private(&counted),
        };
        let costs: Vec<f64> = counted.iter().map(|r| r.cost_usd).collect();
        Row {
            rank: None,
            id: entry.id,
            agent: entry.agent.clone(),
            submitter: entry.submitter.clone(),
            state: match (&entry.person, entry.state) {
                (Some(_), _) => REFERENCE.into(),
                (None, State::Held) => HELD.into(),
                (None, state) => state.name().into(),
            },
            episodes: entry.results.len(),
            valid: shown.valid,
            infra_failures: entry.results.iter().filter(|r| r.infra_error.is_some()).count(),
            score: shown.score,
            normalized: shown.normalized,
            success_rate: shown.success_rate,
            // `+ 0.0`: no `-0` on the page.
            cost_per_episode_usd: crate::stats::mean(&costs).unwrap_or(0.0) + 0.0,
            review_flags: entry.review_flags,
            info_flags: entry.info_flags,
            verify: entry.verify.clone(),
            // Served once the version closes, a reference's as a submission's.
            records: match entry.person {
                None => format!("/records/{}", entry.id),
                Some(_) => format!("/records/reference/{}", entry.id),
            },
            trace: match entry.person {
                None => format!("/view/{}/", entry.id),
                Some(_) => format!("/view/reference/{}/", entry.id),
            },
            person: entry.person.clone(),
        }
    }

    /// The public part's score. Reads no field of the private part's
    /// (score, validity, improvement, normalised, success, best score).
    fn public(&self, counted: &[&ResultLine]) -> Shown {
        // Several metrics share no scale; improvement over the public part's
        // starter is one they do.
        let value = |r: &ResultLine| match self.several {
            true => r.public_improvement,
            false => r.public_score,
        };
        Shown {
            valid: counted.iter().filter(|r| value(r).is_some()).count(),
            score: self.estimate(&by_task(counted, value)),
            normalized: None,
            success_rate: None,
        }
    }

    /// The private part's scores: an invalid submission has no score, and
    /// counts as the starter's normalised score and as a failure.
    fn private(&self, counted: &[&ResultLine]) -> Shown {
        let normalized = self.estimate(&by_task(counted, ranked::normalized));
        let judged: Vec<bool> = counted.iter().filter_map(|r| ranked::success(r)).collect();
        let successes = judged.iter().filter(|s| **s).count();
        Shown {
            valid: counted.iter().filter(|r| r.valid).count(),
            score: match self.several {
                true => normalized,
                false => self.estimate(&by_task(counted, ranked::score)),
            },
            normalized,
            success_rate: (!judged.is_empty()).then(|| successes as f64 / judged.len() as f64),
        }
    }

    /// The mean of every value with its 95 % interval: clustered by task
    /// over several tasks, the t interval over seeds for one.
    fn estimate(&self, clusters: &[Vec<f64>]) -> Option<Estimate> {
        if self.several {
            let c = clustered_mean(clusters)?;
            return Some(Estimate {
                mean: c.mean,
                low: c.interval.map(|i| i.lower),
                high: c.interval.map(|i| i.upper),
                n: c.n,
            });
        }
        let e = estimate(&clusters.concat())?;
        Some(Estimate {
            mean: e.mean,
            low: e.interval.map(|i| i.lower),
            high: e.interval.map(|i| i.upper),
            n: e.n,
        })
    }

    /// Orders `rows` (ranked by score, then ranked without one, then held;
    /// the earlier submission first among equals) and ranks the ranked
    /// rows with a score, ties sharing a rank.
    fn rank(&self, rows: &mut [Row]) {
        let key = |r: &Row| {
            let oriented = r
                .score
                .map(|s| if self.higher_ranks_higher() { s.mean } else { -s.mean });
            // `+ 0.0`: -0 and 0 are one score.
            (r.state == HELD, oriented.is_none(), oriented.map(|k| -k + 0.0))
        };
        rows.sort_by(|a, b| {
            let (ka, kb) = (key(a), key(b));
            (ka.0, ka.1)
                .cmp(&(kb.0, kb.1))
                .then_with(|| ka.2.unwrap_or(0.0).total_cmp(&kb.2.unwrap_or(0.0)))
                .then(a.id.cmp(&b.id))
        });
        let mut previous: Option<(f64, usize)> = None;
        for (at, row) in rows.iter_mut().enumerate() {
            let (held, _, Some(k)) = key(row) else { continue };
            if held {
                continue;
            }
            let rank = match previous {
                Some((before, rank)) if before == k => rank,
                _ => at + 1,
            };
            row.rank = Some(rank);
            previous = Some((k, rank));
        }
    }
}

/// Per task (in order), the values `f` gives of `counted`.
fn by_task(counted: &[&ResultLine], f: impl Fn(&ResultLine) -> Option<f64>) -> Vec<Vec<f64>> {
    let mut tasks: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in counted {
        tasks.entry(r.task.as_str()).or_default().extend(f(r));
    }
    tasks.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLOSES: &str = "2026-12-31T00:00:00Z";

    fn closes_ms() -> i64 {
        chrono::DateTime::parse_from_rfc3339(CLOSES).unwrap().timestamp_millis()
    }

    fn benchmark(tasks: &[&str]) -> Benchmark {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("benchmark.toml");
        let tasks: Vec<String> = tasks.iter().map(|t| format!("\"{t}\"")).collect();
        let text = format!(
            "name = \"cpu-mini\"\nversion = \"2026-11\"\ncloses = \"{CLOSES}\"\n[plan]\ntasks = [{}]\n",
            tasks.join(", ")
        );
        std::fs::write(&path, text).unwrap();
        Benchmark::load(&path).unwrap()
    }

    /// A valid episode of `task` scoring `score` on the private part
    /// (normalised alike: starter 0, reference 1) and `public` on the public one.
    fn episode(task: &str, seed: u64, score: f64, public: f64) -> ResultLine {
        let mut r = ResultLine::infra_failed(&format!("{task}/a/{seed}"), task, "a", seed, "d", 1, "");
        r.infra_error = None;
        r.metric = "accuracy".into();
        r.valid = true;
        (r.score, r.best_score, r.normalized, r.improvement) = (Some(score), Some(score), Some(score), Some(score));
        (r.baseline, r.reference, r.success) = (Some(0.0), Some(1.0), Some(score > 0.5));
        (r.public_score, r.public_improvement) = (Some(public), Some(public));
        r.cost_usd = 0.01;
        r
    }

    fn infra(task: &str, seed: u64) -> ResultLine {
        let mut r = ResultLine::infra_failed(&format!("{task}/a/{seed}"), task, "a", seed, "d", 3, "worker lost");
        r.cost_usd = 5.0;
        r
    }

    fn entry(id: i64, state: State, results: Vec<ResultLine>) -> Entry {
        Entry {
            id,
            agent: format!("agent-{id}"),
            submitter: format!("submitter-{id}"),
            state,
            results,
            review_flags: 0,
            info_flags: 0,
            verify: Verify::Pending,
            person: None,
        }
    }

    fn ids(board: &Board) -> Vec<(i64, Option<usize>)> {
        board.rows.iter().map(|r| (r.id, r.rank)).collect()
    }

    /// `r` with every field of the private part's changed.
    fn private_changed(mut r: ResultLine) -> ResultLine {
        r.score = r.score.map(|s| 1.0 - s);
        r.best_score = Some(0.123);
        r.improvement = Some(-7.0);
        r.normalized = r.normalized.map(|s| 10.0 - s);
        r.success = r.success.map(|s| !s);
        r.valid = !r.valid;
        r.public_gain_lost = Some(true);
        r
    }

    #[test]
    fn a_smoke_entry_is_never_on_the_board() {
        let mut smoke = episode("digits", 1, 0.99, 0.99);
        smoke.smoke = true;
        let entries = [
            entry(1, State::Ranked, vec![smoke]),
            entry(2, State::Ranked, vec![episode("digits", 1, 0.5, 0.5)]),
        ];
        let board = board(&benchmark(&["digits"]), &entries, 0);
        assert_eq!(ids(&board), [(2, Some(1))]);
    }

    #[test]
    fn while_open_nothing_of_the_private_part_reaches_the_board_or_its_order() {
        // One task (the public score) and several (the public improvement).
        for tasks in [&["digits"][..], &["digits", "text"]] {
            only_the_public_part_while_open(&benchmark(tasks));
        }
    }

    fn only_the_public_part_while_open(benchmark: &Benchmark) {
        let a = vec![episode("digits", 1, 0.9, 0.6), episode("digits", 2, 0.8, 0.5)];
        let b = vec![episode("digits", 1, 0.1, 0.8), infra("digits", 2)];
        let entries = [entry(1, State::Ranked, a), entry(2, State::Ranked, b)];
        let changed: Vec<Entry> = entries
            .iter()
            .map(|e| Entry {
                results: e.results.iter().cloned().map(private_changed).collect(),
                ..e.clone()
            })
            .collect();
        let show = |entries: &[Entry], now: i64| {
            let board = board(benchmark, entries, now);
            (serde_json::to_string(&board).unwrap(), html(&board))
        };
        let open = closes_ms() - 1;
        assert_eq!(show(&entries, open), show(&changed, open));
        assert!(show(&entries, open).1.contains("Provisional"));
        assert_ne!(show(&entries, closes_ms()).0, show(&changed, closes_ms()).0);
        assert_ne!(show(&entries, closes_ms()).1, show(&changed, closes_ms()).1);
        // Open: ordered by the public part (b), none of the private part's columns.
        let board = board(benchmark, &entries, open);
        assert_eq!((board.part, board.closed), (Part::Public, false));
        assert_eq!(ids(&board), [(2, Some(1)), (1, Some(2))]);
        assert!(
            board
                .rows
                .iter()
                .all(|r| r.normalized.is_none() && r.success_rate.is_none())
        );
        assert!((board.rows[1].score.unwrap().mean - 0.55).abs() < 1e-12);
        // Closed: the private part decides.
        let board = super::board(benchmark, &entries, closes_ms());
        assert_eq!((board.part, board.closed), (Part::Private, true));
        assert_eq!(ids(&board), [(1, Some(1)), (2, Some(2))]);
    }

    #[test]
    fn open_rows_show_the_mean_public_score_in_the_metric_direction() {
        let benchmark = benchmark(&["digits"]);
        let lower = |mut r: ResultLine| {
            r.higher_is_better = Some(false);
            r
        };
        let mut unvalidated = episode("digits", 3, 0.5, 0.0);
        unvalidated.public_score = None;
        let a = [
            episode("digits", 1, 0.5, 2.0),
            episode("digits", 2, 0.5, 4.0),
            unvalidated,
        ];
        let b = [episode("digits", 1, 0.5, 1.0), episode("digits", 2, 0.5, 2.0)];
        let entries = [
            entry(1, State::Ranked, a.into_iter().map(lower).collect()),
            entry(2, State::Ranked, b.into_iter().map(lower).collect()),
        ];
        let board = board(&benchmark, &entries, closes_ms() - 1);
        // Lower is better: b's 1.5 ranks above a's 3.
        assert_eq!(ids(&board), [(2, Some(1)), (1, Some(2))]);
        let a = &board.rows[1];
        let expected = crate::stats::estimate(&[2.0, 4.0]).unwrap().interval.unwrap();
        let score = a.score.unwrap();
        assert_eq!((score.mean, score.n, a.episodes, a.valid), (3.0, 2, 3, 2));
        assert_eq!((score.low, score.high), (Some(expected.lower), Some(expected.upper)));
        assert!(board.ranked_by.contains("public part") && board.ranked_by.contains("lower is better"));
    }

    #[test]
    fn closed_one_task_ranks_on_the_mean_score_ties_sharing_a_rank() {
        let benchmark = benchmark(&["digits"]);
        let scores = |scores: &[f64]| -> Vec<ResultLine> {
            scores
                .iter()
                .enumerate()
                .map(|(i, s)| episode("digits", i as u64, *s, 0.0))
                .collect()
        };
        let mut invalid = episode("digits", 7, 0.0, 0.0);
        (invalid.valid, invalid.score, invalid.normalized, invalid.success) = (false, None, None, None);
        let mut c = scores(&[0.75, 0.75]);
        c.extend([invalid, infra("digits", 8)]);
        let entries = [
            entry(1, State::Ranked, scores(&[0.125, 0.125])),
            entry(2, State::Ranked, scores(&[0.5, 0.5])),
            entry(3, State::Ranked, scores(&[0.25, 0.75])),
            entry(4, State::Ranked, c),
        ];
        let board = board(&benchmark, &entries, closes_ms());
        assert_eq!(ids(&board), [(4, Some(1)), (2, Some(2)), (3, Some(2)), (1, Some(4))]);
        let c = &board.rows[0];
        assert_eq!((c.episodes, c.valid, c.infra_failures), (4, 2, 1));
        assert_eq!((c.score.unwrap().mean, c.score.unwrap().n), (0.75, 2));
        // The invalid episode counts as a failure; the infrastructure's is left out.
        assert_eq!(c.success_rate, Some(2.0 / 3.0));
        assert_eq!(c.normalized.unwrap().n, 3);
        assert!((c.cost_per_episode_usd - 0.01).abs() < 1e-12);
        let interval = crate::stats::estimate(&[0.25, 0.75]).unwrap().interval.unwrap();
        let a = board.rows[2].score.unwrap();
        assert_eq!((a.low, a.high), (Some(interval.lower), Some(interval.upper)));
        assert!(board.ranked_by.contains("private part") && board.ranked_by.contains("higher is better"));
        // Lower is better: the order turns round.
        let lower: Vec<Entry> = entries
            .iter()
            .map(|e| {
                let results = e.results.iter().cloned().map(|mut r| {
                    r.higher_is_better = Some(false);
                    r
                });
                Entry {
                    results: results.collect(),
                    ..e.clone()
                }
            })
            .collect();
        let board = super::board(&benchmark, &lower, closes_ms());
        assert_eq!(ids(&board), [(1, Some(1)), (2, Some(2)), (3, Some(2)), (4, Some(4))]);
    }

    #[test]
    fn several_tasks_rank_on_the_normalised_score_clustered_by_task() {
        let benchmark = benchmark(&["digits", "text"]);
        // Raw scores of different metrics say the opposite of the normalised ones.
        let run = |normalized: [f64; 4]| -> Vec<ResultLine> {
            let tasks = ["digits", "digits", "text", "text"];
            (0..4)
                .map(|i| {
                    let mut r = episode(tasks[i], i as u64, 0.0, 0.0);
                    (r.normalized, r.score) = (Some(normalized[i]), Some(100.0 - normalized[i]));
                    r
                })
                .collect()
        };
        let entries = [
            entry(1, State::Ranked, run([0.0, 0.5, 0.25, 0.25])),
            entry(2, State::Ranked, run([1.0, 0.5, 0.5, 0.0])),
        ];
        let board = board(&benchmark, &entries, closes_ms());
        assert_eq!(ids(&board), [(2, Some(1)), (1, Some(2))]);
        let expected = clustered_mean(&[vec![1.0, 0.5], vec![0.5, 0.0]]).unwrap();
        let top = &board.rows[0];
        assert_eq!(top.score, top.normalized);
        let score = top.score.unwrap();
        assert_eq!((score.mean, score.n), (expected.mean, 4));
        assert_eq!(score.low, expected.interval.map(|i| i.lower));
        assert!(score.low.is_some() && board.ranked_by.contains("normalised"));
    }

    #[test]
    fn a_persons_reference_is_shown_apart_and_never_ranked() {
        let benchmark = benchmark(&["digits"]);
        let scored = |s: f64| vec![episode("digits", 1, s, s)];
        let mut person = entry(3, State::Ranked, scored(0.99));
        person.person = Some("ada".into());
        let entries = [
            entry(1, State::Ranked, scored(0.5)),
            person,
            entry(2, State::Ranked, scored(0.6)),
        ];
        for now in [closes_ms() - 1, closes_ms()] {
            let board = board(&benchmark, &entries, now);
            // The person scores best, yet the submissions keep ranks 1 and 2.
            assert_eq!(ids(&board), [(2, Some(1)), (1, Some(2))]);
            let reference = &board.references[0];
            assert_eq!(board.references.len(), 1);
            assert_eq!((reference.rank, reference.person.as_deref()), (None, Some("ada")));
            assert_eq!(reference.state, REFERENCE);
            assert_eq!(
                (reference.records.as_str(), reference.trace.as_str()),
                ("/records/reference/3", "/view/reference/3/")
            );
            assert!((reference.score.unwrap().mean - 0.99).abs() < 1e-12);
            let page = html(&board);
            assert!(
                page.contains("id=\"references\"") && page.contains("a person"),
                "{page}"
            );
            let json = serde_json::to_value(&board).unwrap();
            assert_eq!(json["references"][0]["person"], "ada");
            assert!(json["rows"].as_array().unwrap().iter().all(|r| r["person"].is_null()));
        }
    }

    #[test]
    fn held_rows_follow_the_ranked_unranked_and_other_states_are_left_out() {
        let benchmark = benchmark(&["digits"]);
        let scored = |s: f64| vec![episode("digits", 1, s, s)];
        let mut entries = vec![
            entry(1, State::Held, scored(0.99)),
            entry(2, State::Ranked, scored(0.5)),
            entry(3, State::Ranked, vec![infra("digits", 1)]),
            entry(4, State::Ranked, scored(0.6)),
        ];
        for (id, state) in [
            (5, State::Queued),
            (6, State::Running),
            (7, State::Scoring),
            (8, State::Failed),
            (9, State::Withdrawn),
            (10, State::Invalidated),
            (11, State::Refused),
        ] {
            entries.push(entry(id, state, scored(1.0)));
        }
        for now in [closes_ms() - 1, closes_ms()] {
            let board = board(&benchmark, &entries, now);
            assert_eq!(ids(&board), [(4, Some(1)), (2, Some(2)), (3, None), (1, None)]);
            let states: Vec<&str> = board.rows.iter().map(|r| r.state.as_str()).collect();
            assert_eq!(states, ["ranked", "ranked", "ranked", "held for review"]);
        }
        let board = board(&benchmark, &entries, closes_ms());
        assert_eq!(
            (board.rows[0].records.as_str(), board.rows[0].trace.as_str()),
            ("/records/4", "/view/4/")
        );
        assert_eq!(
            (board.benchmark.as_str(), board.version.as_str()),
            ("cpu-mini", "2026-11")
        );
        assert_eq!(
            (board.closes.as_deref(), board.tasks.clone()),
            (Some(CLOSES), vec!["digits".to_string()])
        );
    }

    #[test]
    fn verification_is_tagged_by_status_with_its_detail() {
        let failed = serde_json::to_string(&Verify::Failed("chain broken".into())).unwrap();
        assert_eq!(failed, r#"{"status":"failed","detail":"chain broken"}"#);
        assert_eq!(
            serde_json::to_string(&Verify::Pending).unwrap(),
            r#"{"status":"pending"}"#
        );
        let back: Verify = serde_json::from_str(r#"{"status":"verified"}"#).unwrap();
        assert_eq!(back, Verify::Verified);
    }
}

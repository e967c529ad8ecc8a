//! The HTML report of a bench and the `mlrb view` trace viewer, opened in
//! headless Chromium (Debian's `chromium`): the rendered pages must show the
//! tables, the plots, an episode's transcript, its raw steps and a
//! workspace diff, also for a trace of 10 000 events.

mod common;

use common::chromium::{chromium, render};

use std::path::{Path, PathBuf};
use std::time::Instant;

/// A small bench (baseline and validator agents, 2 seeds) on the hostile
/// fixture: valid scores, intermediate scores and edits to diff.
fn small_bench(dir: &Path) -> PathBuf {
    let task = common::hostile_task(dir, &[]);
    // Its score reads no answer (only whether a submission exists): the
    // intermediate scores are worth keeping for the score-over-steps plot.
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    let toml = toml + "\n[validation.split]\nnone = \"the score says only whether submission.csv exists\"\n";
    std::fs::write(task.join("task.toml"), toml).unwrap();
    let output = common::two_seed_bench(dir, &["baseline", "validator"], &task)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    dir.join("r")
}

#[test]
fn the_html_report_renders_its_tables_and_plots_offline() {
    let Some(chromium) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let run = small_bench(tmp.path());
    let report = run.join("report.html");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the report fetches nothing"
    );
    let dom = render(&chromium, &format!("file://{}", report.display()));
    assert!(dom.contains("<table id=\"summary\">"), "{dom}");
    assert!(dom.contains("validator") && dom.contains("hostile"), "{dom}");
    assert!(dom.contains("id=\"success\""), "the success-rate plot: {dom}");
    assert!(dom.matches("<circle").count() >= 2, "score points: {dom}");
    assert!(dom.contains("score over steps"), "{dom}");
    // The seeds as epochs and the aggregates across tasks, each column
    // naming its reducer and uncertainty.
    assert!(
        dom.contains("<table id=\"epochs\">") && dom.contains("success: pass@k"),
        "{dom}"
    );
    assert!(
        dom.contains("<table id=\"across\">") && dom.contains("clustered SE"),
        "{dom}"
    );
    assert!(
        dom.contains("<table id=\"scales\">") && dom.contains("declared by the task"),
        "{dom}"
    );
    // The performance profiles: one step line per agent, AUP in the legend.
    let profiles = svg(&dom, "profiles");
    assert_eq!(profiles.matches("<polyline class=\"profile\"").count(), 2, "{profiles}");
    assert!(
        profiles.contains("baseline (AUP ") && profiles.contains("validator (AUP "),
        "{profiles}"
    );
    // The baseline is the best agent on the only task: ρ reaches 1 at τ = 1.
    assert!(profiles.contains("baseline: AUP 0.050"), "{profiles}");
    // Score against cost: a point per agent with a score.
    let cost = svg(&dom, "cost");
    assert_eq!(cost.matches("<circle class=\"agent\"").count(), 2, "{cost}");
    assert!(cost.contains("CPU-hours per episode"), "{cost}");
}

/// The rendered `<svg id=...>` element of `dom`.
fn svg<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no svg {id}: {dom}"));
    let end = dom[start..].find("</svg>").unwrap() + start;
    &dom[start..end]
}

#[test]
fn the_viewer_shows_episodes_steps_and_a_workspace_diff() {
    let Some(chromium) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let run = small_bench(tmp.path());
    let served = common::viewer::serve(&run);

    let index = render(&chromium, &served.url);
    assert!(
        index.contains("hostile/validator/1") && index.contains("hostile/baseline/2"),
        "{index}"
    );

    // The transcript by default; the raw steps a link away.
    let episode = render(&chromium, &format!("{}e/hostile/validator/1", served.url));
    assert!(episode.contains("<div id=\"transcript\">"), "{episode}");
    assert!(
        episode.contains("class=\"validation\"") && episode.contains("<b>exec.execute-script</b>"),
        "{episode}"
    );
    assert!(episode.contains("id=\"score\""), "{episode}");
    let steps = render(&chromium, &format!("{}e/hostile/validator/1/steps", served.url));
    assert!(steps.contains("<table id=\"steps\">"), "{steps}");
    assert!(
        steps.contains("episode.validate") && steps.contains("exec.execute-script"),
        "{steps}"
    );

    let diff = render(&chromium, &format!("{}e/hostile/validator/1/diff?a=0&b=2", served.url));
    assert!(diff.contains("class=\"diff\""), "{diff}");
    assert!(diff.contains("submission.csv"), "{diff}");
    assert!(diff.contains("+not,numbers"), "{diff}");

    // Nothing outside the run is reachable through the viewer.
    let escape = render(&chromium, &format!("{}e/..%2F..%2Fetc", served.url));
    assert!(escape.contains("not found"), "{escape}");
}

#[test]
fn the_viewer_pages_a_trace_of_ten_thousand_events() {
    let Some(chromium) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let run = small_bench(tmp.path());
    let episode = run.join("hostile/validator/1");
    let events = std::fs::read_to_string(episode.join("events.jsonl")).unwrap();
    let template: serde_json::Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    let mut big = String::new();
    for seq in 1..=10_000 {
        let mut event = template.clone();
        event["seq"] = seq.into();
        event["interface"] = "workspace".into();
        event["function"] = "write-file".into();
        event["args"] = serde_json::json!({ "path": format!("file-{seq}.txt"), "text": "x".repeat(2000) });
        big.push_str(&event.to_string());
        big.push('\n');
    }
    std::fs::write(episode.join("events.jsonl"), big).unwrap();
    let served = common::viewer::serve(&episode);

    let started = Instant::now();
    let first = render(&chromium, &served.url);
    let first_seconds = started.elapsed().as_secs_f64();
    assert!(first.contains("10000 events; page 1 of 50"), "{first}");
    assert_eq!(
        first.matches("<details class=\"call\"").count(),
        200,
        "one page of calls"
    );
    assert!(first.contains("file-1.txt") && !first.contains("file-201.txt"));
    let last = render(&chromium, &format!("{}?page=50", served.url));
    assert!(last.contains("file-10000.txt"), "{last}");
    // Long arguments are clipped on a call's line.
    assert!(first.contains("(2000 bytes)"), "{first}");
    let steps = render(&chromium, &format!("{}steps?page=2", served.url));
    assert_eq!(steps.matches("<tr class=").count(), 200, "one page of steps");
    assert!(steps.contains("file-201.txt") && !steps.contains("file-401.txt"));
    eprintln!("first page of 10 000 events rendered in {first_seconds:.2} s");
}

#[test]
fn the_viewer_never_follows_what_an_agent_planted_in_its_workspace() {
    let tmp = tempfile::tempdir().unwrap();
    let (_task_tmp, finished) = common::run_on_hostile_task("validator", &[], &[]);
    let episode = finished.dir.clone();
    // Outside the run: a file the viewer must never show.
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "VIEWER-SECRET-42").unwrap();
    // A fake episode inside the workspace, its records links to the secret,
    // and one whose trace is a FIFO that would stall a reader.
    let fake = episode.join("workspace/fake");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("episode.json"), "{}").unwrap();
    std::os::unix::fs::symlink(&secret, fake.join("events.jsonl")).unwrap();
    std::os::unix::fs::symlink(&secret, fake.join("score.json")).unwrap();
    let stall = episode.join("workspace/stall");
    std::fs::create_dir_all(&stall).unwrap();
    std::fs::write(stall.join("episode.json"), "{}").unwrap();
    let fifo = std::ffi::CString::new(stall.join("events.jsonl").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path this test owns.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);

    let served = common::viewer::serve(&episode);
    let (status, index) = common::viewer::http_get(&served.url);
    assert!(status.contains("200"), "{status}");
    assert!(
        !index.contains("workspace/fake") && !index.contains("VIEWER-SECRET"),
        "{index}"
    );
    for planted in ["workspace/fake", "workspace/stall"] {
        let (status, body) = common::viewer::http_get(&format!("{}e/{planted}", served.url));
        assert!(status.contains("404"), "{planted}: {status}");
        assert!(!body.contains("VIEWER-SECRET"));
    }
    // The viewer still answers (nothing stalled it).
    let (status, _) = common::viewer::http_get(&served.url);
    assert!(status.contains("200"), "{status}");
}

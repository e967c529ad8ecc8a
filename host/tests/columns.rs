//! Every command's default output fits 100 columns (`COLUMNS=100`, as
//! piped output gets by default) and `bench` and `report` lead with the
//! headline: which agent is better, by how much with its interval, or that
//! the design cannot tell. On a real bench: the baseline and the search
//! agent on `digits`, two seeds. report.html fits a 1280×800 window and
//! shows the scores per task as a plot with intervals before any table.

mod common;

use std::path::Path;

/// The lines of `text` over `width` characters (not bytes).
fn too_long(text: &str, width: usize) -> Vec<String> {
    text.lines()
        .filter(|l| l.chars().count() > width)
        .map(|l| format!("{} chars: {l}", l.chars().count()))
        .collect()
}

/// Runs `mlrb args` at `columns`; its stdout, after checking it succeeded
/// and that no line is wider.
fn rendered(args: &[&str], columns: usize) -> String {
    rendered_exiting(args, columns, 0)
}

/// [`rendered`] of a command expected to exit with `code`.
fn rendered_exiting(args: &[&str], columns: usize, code: i32) -> String {
    let output = common::mlrb()
        .env("COLUMNS", columns.to_string())
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.code() == Some(code),
        "mlrb {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    fits(&format!("mlrb {}", args.join(" ")), &stdout, columns);
    stdout
}

fn fits(what: &str, stdout: &str, columns: usize) {
    let long = too_long(stdout, columns);
    assert!(
        long.is_empty(),
        "{what}: lines over {columns} columns:\n{}\n\n{stdout}",
        long.join("\n")
    );
}

/// The headline comes first (the block before the first empty line),
/// names the agents compared and, for the task, the better agent with an
/// interval, or that the design cannot tell.
fn leads_with_the_headline(stdout: &str) {
    let block = stdout.split("\n\n").next().unwrap_or_default();
    assert!(block.starts_with("search_agent against baseline ("), "{stdout}");
    let words = block.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("95 % t interval"), "{stdout}");
    let digits = words
        .split(" digits ")
        .nth(1)
        .unwrap_or_else(|| panic!("no line for digits: {stdout}"));
    let better = digits.contains(" better: ") && digits.contains('[');
    let cannot_tell = digits.contains("the design cannot tell");
    assert!(better || cannot_tell, "{stdout}");
    assert!(digits.starts_with("search_agent"), "the agent ahead is named: {stdout}");
}

fn bench(out: &Path) -> String {
    let output = common::two_seed_bench(out, &["baseline", "search-agent"], "digits")
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn every_command_fits_100_columns_and_bench_and_report_lead_with_the_headline() {
    let tmp = tempfile::tempdir().unwrap();
    let bench_out = bench(tmp.path());
    fits("mlrb bench", &bench_out, 100);
    leads_with_the_headline(&bench_out);
    let run = tmp.path().join("r");
    let run_s = run.to_str().unwrap();

    let report = rendered(&["report", run_s], 100);
    leads_with_the_headline(&report);
    assert!(
        report.contains("Per task and agent") && report.contains("--wide"),
        "{report}"
    );
    // COLUMNS is honoured below 100 too.
    leads_with_the_headline(&rendered(&["report", run_s], 80));
    // --wide: every column, the seeds as epochs; wider than 100 is allowed.
    let wide = common::mlrb().args(["report", run_s, "--wide"]).output().unwrap();
    let wide = String::from_utf8_lossy(&wide.stdout);
    assert!(
        wide.contains("Seeds as epochs") && wide.contains("steps: mean"),
        "{wide}"
    );
    assert!(!too_long(&wide, 100).is_empty(), "the wide tables are wide: {wide}");
    let json = common::mlrb().args(["report", run_s, "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["headline"][0]["b"], "search_agent", "{json}");

    let compare = rendered(&["compare", run_s, "--agents", "baseline", "search_agent"], 100);
    assert!(compare.starts_with("verdict: "), "{compare}");
    let baseline = common::agent("baseline");
    let one = tmp.path().join("one");
    let episode = [
        "run",
        "--agent",
        baseline.to_str().unwrap(),
        "--task",
        "digits",
        "--out",
        one.to_str().unwrap(),
        "--run-name",
        "e",
    ];
    rendered(&episode, 100);
    for args in [
        &["tasks", "list"][..],
        &["tasks", "show", "digits"],
        &["agent", "check", baseline.to_str().unwrap()],
        &["verify", run_s, "--no-eval"],
        &["eval", one.join("e/digits/baseline/0").to_str().unwrap()],
        &["doctor"],
    ] {
        rendered(args, 100);
    }
    // A scan that flags episodes for review exits 1 (search_agent's
    // validations of resubmitted files are flagged); one that does not, 0.
    let scan = common::mlrb().args(["scan", run_s]).status().unwrap().code().unwrap();
    assert!(scan <= 1, "mlrb scan exited {scan}");
    rendered_exiting(&["scan", run_s], 100, scan);
    html_fits_a_laptop(&run.join("report.html"));
    // Stale results: their note fits too.
    let reason = "a test of the width";
    let invalidate = [
        "runs",
        "invalidate",
        "--runs",
        run_s,
        "--task",
        "digits",
        "--reason",
        reason,
    ];
    rendered(&invalidate, 100);
    let stale = rendered(&["report", run_s], 100);
    assert!(stale.contains("stale results"), "{stale}");
}

/// report.html in a 1280×800 window: nothing wider than the window, and
/// the plot of scores per task with intervals before the first table.
fn html_fits_a_laptop(page: &Path) {
    let Some(chromium) = common::chromium::chromium() else {
        return;
    };
    let (scroll, inner, dom) = common::chromium::layout_width(&chromium, page, (1280, 800));
    assert!(
        scroll <= inner,
        "report.html is {scroll} px wide in a {inner} px window"
    );
    let plot = dom.find("<svg class=\"plot\" id=\"scores\"").expect("the scores plot");
    let table = dom.find("<table").expect("a table");
    assert!(plot < table, "the scores plot comes before the first table");
    let headline = dom.find("id=\"headline\"").expect("the headline");
    assert!(headline < plot, "the headline comes first");
}

/// The subcommands a `--help` lists under "Commands:" (less `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A wrapped description is indented further than a name.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(String::from)
        .collect()
}

/// Every command's and subcommand's `--help`, found by walking the
/// "Commands:" lists from `mlrb --help`, fits 100 columns.
#[test]
fn every_help_fits_100_columns() {
    let mut to_read = vec![Vec::<String>::new()];
    let mut read = Vec::new();
    while let Some(path) = to_read.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = rendered(&args, 100);
        for name in subcommands(&help) {
            to_read.push(path.iter().cloned().chain([name]).collect());
        }
        read.push(path.join(" "));
    }
    for expected in ["run", "human", "bench", "tasks test", "submissions reference", "serve"] {
        assert!(
            read.iter().any(|r| r == expected),
            "no help read for {expected}: {read:?}"
        );
    }
}

/// The service's commands fit too, organiser's and submitter's, through a
/// real upload scored by a served service; and the task checks.
#[test]
fn the_service_and_task_commands_fit_100_columns() {
    use common::service;
    let tmp = tempfile::tempdir().unwrap();
    let fresh = tmp.path().join("fresh");
    rendered(&["submissions", "init", fresh.to_str().unwrap()], 100);
    let folder = service::folder(tmp.path(), "digits", service::OPEN_UNTIL);
    let token = tmp.path().join("token");
    std::fs::write(&token, service::submitter(&folder, "ada")).unwrap();
    let served = service::Served::start(&folder, 1024, &[]);
    let url = served.url();
    let remote = ["--server", &url, "--token-file", token.to_str().unwrap()];
    let baseline = common::agent("baseline");
    let submit = [
        &["submit", baseline.to_str().unwrap(), "--benchmark", "cpu-mini/1"][..],
        &remote,
    ]
    .concat();
    let submitted = rendered(&submit, 100);
    assert!(
        submitted.starts_with("submission 1: baseline to cpu-mini/1, "),
        "{submitted}"
    );
    let status = [&["submissions", "status", "1"][..], &remote].concat();
    let settled = std::time::Instant::now();
    loop {
        let json = common::mlrb()
            .args([&status[..], &["--json"]].concat())
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let state = json["submission"]["state"].as_str().unwrap_or_default().to_string();
        if ["ranked", "held", "failed"].contains(&state.as_str()) {
            break;
        }
        assert!(settled.elapsed().as_secs() < 600, "not settled: {json}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let shown = rendered(&status, 100);
    assert!(shown.contains("public part") && shown.contains("digits"), "{shown}");
    rendered(&[&["submissions", "list"][..], &remote].concat(), 100);
    let archive = tmp.path().join("s1.tar");
    let download = [
        &["submissions", "download", "1", "-o", archive.to_str().unwrap()][..],
        &remote,
    ];
    rendered(&download.concat(), 100);
    let why = [
        "--why",
        "a test of the width: the organiser's reason, long enough to need wrapping",
    ];
    let folder_s = folder.to_str().unwrap();
    rendered(&[&["submissions", "withdraw", folder_s, "1"][..], &why].concat(), 100);
    rendered(&["submissions", "audit", folder_s], 100);
    served.stop();
    for args in [&["tasks", "check", "digits"][..], &["tasks", "test", "digits"]] {
        rendered(args, 100);
    }
}

/// `tasks check --suite mlagentbench` gives each folder a line or a few
/// (each account's first clause) within 100 columns; `--wide` the rest.
#[test]
fn the_mlagentbench_table_is_short_and_wide_tells_the_rest() {
    let short = rendered(&["tasks", "check", "--suite", "mlagentbench"], 100);
    assert!(short.lines().count() <= 50, "{} lines:\n{short}", short.lines().count());
    assert!(short.contains("ogbn-arxiv") && short.contains("--wide"), "{short}");
    assert!(!short.contains("extensions built"), "only the first clause: {short}");
    let wide = rendered(&["tasks", "check", "--suite", "mlagentbench", "--wide"], 100);
    assert!(wide.contains("extensions built"), "{wide}");
    assert!(wide.lines().count() > short.lines().count());
}
